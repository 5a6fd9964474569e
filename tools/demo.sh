#!/usr/bin/env bash
# demo.sh BIN_DIR - the whole path on one machine: podresd on the embedded
# default (deploy/dev/podresd.yaml, state in a temp dir), a real Kubernetes
# control plane (tests/kube/cluster, built by `make kube`), podres-syncer as
# its ServiceAccount of deploy/; three pods get devices; then what a user
# sees. Every command a user could run is printed as run ("$ ..."), with
# the real paths, after the export line that makes them work in another
# shell; "# ..." lines say what happens. DEMO_HOLD=1 keeps everything
# running until Enter, to paste them. Stops everything it started and
# exits 0.
set -euo pipefail
cd "$(dirname "$0")/.."
BIN=${1:-bin}
T=$(mktemp -d "${TMPDIR:-/tmp}/podres-demo.XXXXXX")
PIDS=()
cleanup() {
    local p
    tests/kube/cluster down "$T/kube" 2>/dev/null || true
    for p in "${PIDS[@]:-}"; do [ -n "$p" ] && kill -TERM "$p" 2>/dev/null || true; done
    for p in "${PIDS[@]:-}"; do [ -n "$p" ] && wait "$p" 2>/dev/null || true; done
    rm -rf "$T"
}
trap cleanup EXIT
port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
until_ok() { local i; for i in $(seq 1 100); do "$@" >/dev/null 2>&1 && return 0; sleep 0.1; done; return 1; }
if [ -t 1 ]; then
    say() { printf '\n\033[1m# %s\033[0m\n' "$*"; }
    cmd() { printf '\033[1m$ %s\033[0m\n' "$*"; }
else
    say() { printf '\n# %s\n' "$*"; }
    cmd() { printf '$ %s\n' "$*"; }
fi
# run 'COMMAND LINE' - print it as it can be pasted, then run it (bash, with kubectl on PATH).
run() {
    cmd "$1"
    eval "$1"
}

PD_SOCK=$T/podresd.sock
"$BIN/podresd" --config deploy/dev/podresd.yaml --db "$T/podresd.db" --socket "$PD_SOCK" \
    --listen "127.0.0.1:$(port)" --node-name demo-node --log-level warn 2> "$T/podresd.log" &
PIDS+=($!)
until_ok curl -sf --unix-socket "$PD_SOCK" http://localhost/healthz || { cat "$T/podresd.log"; exit 1; }

echo "demo: starting etcd, kube-apiserver and kube-controller-manager (tests/kube/cluster)"
tests/kube/cluster up "$T/kube" --owner $$ > "$T/cluster.log" 2>&1 || { cat "$T/cluster.log"; exit 1; }
. "$T/kube/env"
export KUBECONFIG KUBECACHEDIR=$T/kube-cache
export PATH=$(dirname "$KUBECTL"):$PATH
say "to run these commands in another shell while the demo runs (DEMO_HOLD=1 make demo keeps it up):"
cmd "cd $PWD; export KUBECONFIG=$KUBECONFIG PATH=$(dirname "$KUBECTL"):\$PATH"
say "the project's CRDs, namespace and the syncer's ServiceAccount and RBAC"
run "kubectl apply -f deploy/namespace.yaml -f schema/crd-devicebinding.yaml -f schema/crd-nodedevices.yaml -f deploy/serviceaccount.yaml -f deploy/rbac.yaml"
kubectl wait --for condition=Established crd/devicebindings.podres.dev crd/nodedevices.podres.dev > /dev/null
# The node: its NodeDevices is owned by it (no kubelet registers one here).
kubectl create -f - > /dev/null <<EOF
{"apiVersion": "v1", "kind": "Node", "metadata": {"name": "demo-node"}}
EOF

# podres-syncer runs as the podres-syncer ServiceAccount (deploy/rbac.yaml's
# least privilege), with a token from the TokenRequest API.
cat > "$T/syncer.kubeconfig" <<EOF
apiVersion: v1
kind: Config
clusters: [{name: demo, cluster: {server: "$KUBE_SERVER", certificate-authority: "$KUBE_CA"}}]
users: [{name: podres-syncer, user: {token: "$(kubectl -n podres-system create token podres-syncer)"}}]
contexts: [{name: demo, context: {cluster: demo, user: podres-syncer}}]
current-context: demo
EOF
chmod 600 "$T/syncer.kubeconfig"
"$BIN/podres-syncer" --node-name demo-node --podresd-socket "$PD_SOCK" --kubeconfig "$T/syncer.kubeconfig" \
    --metrics-listen "127.0.0.1:$(port)" --log-level warn 2> "$T/syncer.log" &
PIDS+=($!)

S="curl -s --unix-socket $PD_SOCK"
say "a device plugin registers two FPGAs (the GPUs and NICs come from the config)"
run "$S -X PUT -H 'Content-Type: application/json' http://localhost/v1/resources/example.com/fpga/devices -d '{\"devices\":[{\"id\":\"fpga-0\",\"topology\":{\"nodes\":[{\"ID\":0}]}},{\"id\":\"fpga-1\",\"topology\":{\"nodes\":[{\"ID\":1}]}}]}' | jq -c '[.devices[].id]'"

say "three pods are scheduled to demo-node"
run "kubectl create namespace ml"
# A new namespace's default ServiceAccount, which a pod needs, comes from
# kube-controller-manager a moment later.
until_ok kubectl -n ml get serviceaccount default
for p in train-0 train-1 infer-0; do
    run "kubectl -n ml run $p --image=demo --restart=Never --overrides='{\"spec\":{\"nodeName\":\"demo-node\"}}'"
done
run "kubectl -n ml get pods -o custom-columns=NAME:.metadata.name,NODE:.spec.nodeName,UID:.metadata.uid"

say "the runtime asks podresd to allocate their devices"
alloc() { # POD UID REQUESTS
    run "$S -X POST -H 'Content-Type: application/json' http://localhost/v1/namespaces/ml/pods/$1/allocate -d '{\"uid\":\"$2\",\"containers\":[{\"name\":\"main\",\"requests\":$3}]}' | jq -c '{pod: .podResources.name, devices: [.podResources.containers[].devices[] | {resourceName, deviceIds}]}'"
}
uid() { kubectl -n ml get pod "$1" -o jsonpath='{.metadata.uid}'; }
alloc train-0 "$(uid train-0)" '{"example.com/gpu":2,"example.com/nic":1}'
alloc train-1 "$(uid train-1)" '{"example.com/gpu":2}'
alloc infer-0 "$(uid infer-0)" '{"example.com/fpga":1}'

bound() { [ "$(kubectl get devicebindings -A -o jsonpath='{range .items[*]}{.status.phase}{"\n"}{end}' | grep -c Bound)" = 3 ]; }
until_ok bound || { echo "DeviceBindings did not appear"; cat "$T/syncer.log"; exit 1; }

say "what podresd says: every pod with its devices, every device with its holder"
run "$S http://localhost/v1/pods | jq -c '.podResources[] | {namespace, name, uid, devices: [.containers[].devices[].deviceIds[]]}'"
run "$S http://localhost/v1/devices | jq -r '.devices[] | \"\\(.resourceName)\\t\\(.id)\\t\\(.health)\\t\\(if .holder then \"\\(.holder.namespace)/\\(.holder.name)\" else \"-\" end)\"' | column -t"
say "what the cluster sees (podres-syncer wrote these)"
run "kubectl get devicebindings -A"
until_ok kubectl get nodedevices demo-node
run "kubectl get nodedevices"
if [ -n "${DEMO_HOLD:-}" ]; then
    echo
    read -r -p "demo: running; press Enter to stop podresd, podres-syncer and the control plane " _ || true
fi
echo
echo "demo: done; stopping podresd, podres-syncer and the control plane"
