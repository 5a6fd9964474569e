#!/usr/bin/env bash
# demo.sh BIN_DIR - the whole path on one machine: podresd on the embedded
# default (deploy/dev/podresd.yaml, state in a temp dir), the Kubernetes API
# emulator, podres-syncer; three pods get devices; then what a user sees.
# Stops everything it started and exits 0.
set -euo pipefail
cd "$(dirname "$0")/.."
BIN=${1:-bin}
T=$(mktemp -d "${TMPDIR:-/tmp}/podres-demo.XXXXXX")
PIDS=()
cleanup() {
    local p
    for p in "${PIDS[@]:-}"; do [ -n "$p" ] && kill -TERM "$p" 2>/dev/null || true; done
    for p in "${PIDS[@]:-}"; do [ -n "$p" ] && wait "$p" 2>/dev/null || true; done
    rm -rf "$T"
}
trap cleanup EXIT
port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
until_ok() { local i; for i in $(seq 1 100); do "$@" >/dev/null 2>&1 && return 0; sleep 0.1; done; return 1; }
if [ -t 1 ]; then
    say() { printf '\n\033[1m$ %s\033[0m\n' "$*"; }
else
    say() { printf '\n$ %s\n' "$*"; }
fi

PD_SOCK=$T/podresd.sock
"$BIN/podresd" --config deploy/dev/podresd.yaml --db "$T/podresd.db" --socket "$PD_SOCK" \
    --listen "127.0.0.1:$(port)" --node-name demo-node --log-level warn 2> "$T/podresd.log" &
PIDS+=($!)
/usr/bin/python3 tests/fixtures/kube-apiserver-emulator --listen 127.0.0.1:0 --port-file "$T/port" \
    --kubeconfig-out "$T/kubeconfig" --crd deploy/crd-devicebinding.yaml 2> "$T/emulator.log" &
PIDS+=($!)
until_ok curl -sf --unix-socket "$PD_SOCK" http://localhost/healthz || { cat "$T/podresd.log"; exit 1; }
until_ok test -s "$T/port" || { cat "$T/emulator.log"; exit 1; }
export KUBECONFIG=$T/kubeconfig KUBECACHEDIR=$T/kube-cache
until_ok kubectl get --raw /version
"$BIN/podres-syncer" --node-name demo-node --podresd-socket "$PD_SOCK" --kubeconfig "$KUBECONFIG" \
    --metrics-listen "127.0.0.1:$(port)" --log-level warn 2> "$T/syncer.log" &
PIDS+=($!)

S="curl -s --unix-socket $PD_SOCK"
say "a device plugin registers two FPGAs (the GPUs and NICs come from the config)"
$S -X PUT -H 'Content-Type: application/json' http://localhost/v1/resources/example.com/fpga/devices \
    -d '{"devices":[{"id":"fpga-0","topology":{"nodes":[{"ID":0}]}},{"id":"fpga-1","topology":{"nodes":[{"ID":1}]}}]}' |
    jq -c '[.devices[].id]'

say "three pods are scheduled to demo-node (kubectl apply)"
kubectl create namespace ml > /dev/null
for p in train-0 train-1 infer-0; do
    kubectl -n ml run "$p" --image=demo --restart=Never \
        --overrides='{"spec":{"nodeName":"demo-node"}}' > /dev/null
done
kubectl -n ml get pods -o custom-columns=NAME:.metadata.name,NODE:.spec.nodeName,UID:.metadata.uid

say "the runtime asks podresd to allocate their devices"
alloc() { # POD UID REQUESTS
    $S -X POST -H 'Content-Type: application/json' "http://localhost/v1/namespaces/ml/pods/$1/allocate" \
        -d "{\"uid\":\"$2\",\"containers\":[{\"name\":\"main\",\"requests\":$3}]}" |
        jq -c '{pod: .podResources.name, devices: [.podResources.containers[].devices[] | {resourceName, deviceIds}]}'
}
uid() { kubectl -n ml get pod "$1" -o jsonpath='{.metadata.uid}'; }
alloc train-0 "$(uid train-0)" '{"example.com/gpu":2,"example.com/nic":1}'
alloc train-1 "$(uid train-1)" '{"example.com/gpu":2}'
alloc infer-0 "$(uid infer-0)" '{"example.com/fpga":1}'

bound() { [ "$(kubectl get devicebindings -A -o jsonpath='{range .items[*]}{.status.phase}{"\n"}{end}' | grep -c Bound)" = 3 ]; }
until_ok bound || { echo "DeviceBindings did not appear"; cat "$T/syncer.log"; exit 1; }

say "curl --unix-socket $PD_SOCK http://localhost/v1/pods | jq"
$S http://localhost/v1/pods | jq -c '.podResources[] | {namespace, name, uid, devices: [.containers[].devices[].deviceIds[]]}'
say "curl --unix-socket $PD_SOCK http://localhost/v1/devices | jq"
$S http://localhost/v1/devices | jq -r '.devices[] | "\(.resourceName)\t\(.id)\t\(.health)\t\(if .holder then "\(.holder.namespace)/\(.holder.name)" else "-" end)"' | column -t
say "kubectl get devicebindings -A"
kubectl get devicebindings -A
echo
echo "demo: done; stopping podresd, podres-syncer and the emulator"
