#!/usr/bin/env bash
# demo-node.sh [BIN_DIR] - `make demo` as root: the whole path on one machine, on a real
# node. A real Kubernetes control plane (tests/kube/cluster) and node
# (tests/kube/node: the upstream kubelet, containerd, the upstream sample
# device plugin with two devices of example.com/resource), podres installed
# from deploy/ with its image (make image), three pods that the kubelet runs
# and the device plugin allocates: two get a device, the third waits until
# one is free. Then what a user sees, and the history of the device that
# changed hands. Commands a user could run are printed as run ("$ ..."),
# after the export line that makes them work in another shell. DEMO_HOLD=1
# keeps everything running until Enter. Stops everything it started and
# exits 0. The DaemonSet's database and socket live in the demo's directory,
# not in /var/lib/podresd and /run/podresd (those are the machine's own).
set -euo pipefail
cd "$(dirname "$0")/.."
BIN=$(cd "${1:-bin}" && pwd)
T=$(mktemp -d "${TMPDIR:-/tmp}/podres-demo.XXXXXX")
cleanup() {
    tests/kube/node down "$T/node" > /dev/null 2>&1 || true
    tests/kube/cluster down "$T/kube" > /dev/null 2>&1 || true
    rm -rf "$T"
}
trap cleanup EXIT
until_ok() { # SECONDS CMD...
    local i n=$(($1 * 10))
    shift
    for i in $(seq 1 "$n"); do "$@" > /dev/null 2>&1 && return 0; sleep 0.1; done
    return 1
}
if [ -t 1 ]; then
    say() { printf '\n\033[1m# %s\033[0m\n' "$*"; }
    cmd() { printf '\033[1m$ %s\033[0m\n' "$*"; }
else
    say() { printf '\n# %s\n' "$*"; }
    cmd() { printf '$ %s\n' "$*"; }
fi
run() { cmd "$1"; eval "$1"; }
[ -f build/image/podres-0.1.0.tar ] || { echo "demo: no image: make image" >&2; exit 1; }

echo "demo: starting the control plane (tests/kube/cluster) and a node (tests/kube/node)"
tests/kube/cluster up "$T/kube" --scheduler --nodes --owner $$ > "$T/cluster.log" 2>&1 ||
    { cat "$T/cluster.log"; exit 1; }
tests/kube/node up "$T/kube" "$T/node" demo-node --device-plugin --owner $$ > "$T/node.log" 2>&1 ||
    { tail -n 30 "$T/node.log"; exit 1; }
. "$T/kube/env"
export KUBECONFIG KUBECACHEDIR=$T/kube-cache
export PATH=$(dirname "$KUBECTL"):$BIN:$PATH
say "to run these commands in another shell while the demo runs (DEMO_HOLD=1 make demo keeps it up):"
cmd "cd $PWD; export KUBECONFIG=$KUBECONFIG PATH=$(dirname "$KUBECTL"):$BIN:\$PATH"
say "a real node: the upstream kubelet on containerd, with the sample device plugin's example.com/resource"
run "kubectl get nodes -o 'custom-columns=NAME:.metadata.name,READY:.status.conditions[?(@.type==\"Ready\")].status,DEVICES:.status.allocatable.example\\.com/resource,RUNTIME:.status.nodeInfo.containerRuntimeVersion'"

say "podres from deploy/, its image loaded into the node's containerd (make image)"
tests/kube/node overlay "$T/node" "$T/overlay" # deploy/, its hostPaths in the demo's directory
run "kubectl apply -k $T/overlay | grep -c created"
run "kubectl -n podres-system rollout status ds/podres --timeout 180s"
run "kubectl -n podres-system get pods -o wide"

say "three pods each ask for one example.com/resource; the node has two"
run "kubectl create namespace ml"
until_ok 30 kubectl -n ml get serviceaccount default
for p in train-0 train-1 infer-0; do
    run "kubectl -n ml run $p --image=podres.test/busybox:1 --restart=Never --overrides='{\"spec\":{\"terminationGracePeriodSeconds\":1,\"containers\":[{\"name\":\"main\",\"image\":\"podres.test/busybox:1\",\"command\":[\"sleep\",\"3600\"],\"resources\":{\"limits\":{\"example.com/resource\":\"1\"}}}]}}'"
    [ "$p" = infer-0 ] || kubectl -n ml wait --for condition=Ready "pod/$p" --timeout 90s > /dev/null
done
run "kubectl -n ml get pods -o wide"

bound() { # N - N DeviceBindings Bound
    [ "$(kubectl get devicebindings -A -o jsonpath='{range .items[*]}{.status.phase}{"\n"}{end}' | grep -c Bound)" = "$1" ]
}
until_ok 30 bound 2 || { echo "demo: DeviceBindings did not appear"; exit 1; }
S="curl -s --unix-socket $T/node/podresd-run/podresd.sock"
say "what podresd, in its pod, read from the kubelet: every pod with its devices, every device with its holder"
run "$S http://localhost/v1/pods | jq -c '.podResources[] | select(.namespace == \"ml\") | {namespace, name, devices: [.containers[].devices[].deviceIds[]]}'"
run "$S http://localhost/v1/devices | jq -r '.devices[] | \"\\(.resourceName)\\t\\(.id)\\t\\(.health)\\t\\(if .holder then \"\\(.holder.namespace)/\\(.holder.name)\" else \"-\" end)\"' | column -t"
say "what the cluster sees (podres-syncer, in the same pod, wrote these)"
run "kubectl get devicebindings -A"
dev=$(kubectl -n ml get devicebinding train-0 -o jsonpath='{.status.containers[0].devices[0].deviceIds[0]}')
run "kubectl podres who $dev"

say "train-0 ends: its device goes to infer-0, which waited for it"
run "kubectl -n ml delete pod train-0"
kubectl -n ml wait --for condition=Ready pod/infer-0 --timeout 90s > /dev/null
until_ok 30 bound 2
until_ok 30 kubectl -n ml get devicebinding infer-0
run "kubectl get devicebindings -A"
until_ok 30 kubectl get nodedevices demo-node
run "kubectl get nodedevices"
say "the history of $dev: who held it, from when to when"
run "$S 'http://localhost/v1/history?device=$dev' | jq -r '.intervals[] | \"\\(.namespace)/\\(.name)\\t\\(.from)\\t\\(.to // \"now\")\"' | column -t"
if [ -n "${DEMO_HOLD:-}" ]; then
    echo
    read -r -p "demo: running; press Enter to stop the node and the control plane " _ || true
fi
echo
echo "demo: done; stopping the node and the control plane"
