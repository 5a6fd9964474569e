#!/usr/bin/env bash
# tests/bench/node.sh BIN_DIR OUT_DIR - rows N: on a real node (tests/kube/node:
# the upstream kubelet, containerd, the sample device plugin), the time from
# a pod's creation (spec.nodeName, one example.com/resource) to podresd's
# binding of it (kubelet mode, polling every 2 s as deploy/ does) and to its
# DeviceBinding Bound in the API server (podres-syncer), p50 and p99 of
# BENCH_NODE_PODS pods (default 20), one after another, each created at a
# random phase of the poll; the reference is the kubelet poll interval. Prints "ROW|id|figure|podres|reference|ratio|goal"
# lines for run.sh; as root only (a real node), else one row saying so.
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
BIN=$(cd "$1" && pwd)
OUT=$2
N=${BENCH_NODE_PODS:-20}
INTERVAL_MS=2000
mkdir -p "$OUT" && OUT=$(cd "$OUT" && pwd)
log() { printf '[bench %s] %s\n' "$(date +%T)" "$*" >&2; }
die() { log "FAIL: $*"; exit 1; }
if [ "$(id -u)" != 0 ]; then
    log "rows N need root (a real node): skipped"
    echo "ROW|N1|pod created on a real node → DeviceBinding Bound, p50 / p99 ms|-|not root: no real node|-|-"
    exit 0
fi
KDIR=$OUT/kube NDIR=$OUT/node PIDS=()
cleanup() {
    local p
    for p in "${PIDS[@]:-}"; do [ -n "$p" ] && kill -9 "$p" 2>/dev/null || true; done
    "$ROOT/tests/kube/node" down "$NDIR" > /dev/null 2>&1 || true
    "$ROOT/tests/kube/cluster" down "$KDIR" > /dev/null 2>&1 || true
}
trap cleanup EXIT
now_ms() { date +%s%3N; }
pct() { # P VALUES... - the P-th percentile (nearest rank)
    local p=$1
    shift
    printf '%s\n' "$@" | sort -n | awk -v p="$p" '{a[NR] = $1} END {
        r = int((p / 100) * NR + 0.999999); if (r < 1) r = 1; if (r > NR) r = NR; print a[r] }'
}

log "N: a real node (cluster, kubelet, containerd, sample device plugin)"
"$ROOT/tests/kube/cluster" up "$KDIR" --scheduler --nodes --owner $$ \
    --crd "$ROOT/schema/crd-devicebinding.yaml" --crd "$ROOT/schema/crd-nodedevices.yaml" \
    > "$OUT/cluster.log" 2>&1 || die "cluster up: $(tail -5 "$OUT/cluster.log")"
# shellcheck disable=SC1091
. "$KDIR/env"
k() { "$KUBECTL" --kubeconfig "$KUBECONFIG" "$@"; }
"$ROOT/tests/kube/node" up "$KDIR" "$NDIR" bench-node --device-plugin --owner $$ \
    > "$OUT/node.log" 2>&1 || die "node up: $(tail -5 "$OUT/node.log")"
# shellcheck disable=SC1091
. "$NDIR/env"
k apply -f "$ROOT/deploy/namespace.yaml" -f "$ROOT/deploy/serviceaccount.yaml" \
    -f "$ROOT/deploy/rbac.yaml" > /dev/null
k create namespace bench > /dev/null
tok=$(k create token podres-syncer -n podres-system --duration 2h \
    --bound-object-kind Node --bound-object-name bench-node)
cat > "$OUT/syncer.kubeconfig" <<EOF
apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: "$KUBE_SERVER", certificate-authority: "$KUBE_CA"}}]
users: [{name: s, user: {token: "$tok"}}]
contexts: [{name: c, context: {cluster: c, user: s}}]
current-context: c
EOF
chmod 600 "$OUT/syncer.kubeconfig"
SOCK=$OUT/podresd.sock
cat > "$OUT/podresd.yaml" <<EOF
db: $OUT/podresd.db
socket: $SOCK
listen: 127.0.0.1:$(python3 "$ROOT/tests/py/podres_test/free_port.py")
node_name: bench-node
source: kubelet
kubelet_socket: $KUBELET_PODRES_SOCKET
kubelet_interval: ${INTERVAL_MS}ms
log_level: warn
EOF
"$BIN/podresd" --config "$OUT/podresd.yaml" 2> "$OUT/podresd.log" &
PIDS+=($!)
"$BIN/podres-syncer" --node-name bench-node --podresd-socket "$SOCK" \
    --kubeconfig "$OUT/syncer.kubeconfig" --metrics-listen "127.0.0.1:$(python3 "$ROOT/tests/py/podres_test/free_port.py")" \
    --log-level warn 2> "$OUT/syncer.log" &
PIDS+=($!)
for i in $(seq 100); do curl -sf --unix-socket "$SOCK" http://localhost/readyz > /dev/null && break; sleep 0.1; done
DVB="$KUBE_SERVER/apis/podres.dev/v1alpha1/namespaces/bench/devicebindings"
KCURL=(curl -s --cacert "$KUBE_CA" --cert "$KDIR/pki/admin.crt" --key "$KDIR/pki/admin.key")

to_pd=() to_dvb=()
for i in $(seq "$N"); do
    p=lat-$i
    jq -n --arg p "$p" '{apiVersion: "v1", kind: "Pod", metadata: {name: $p, namespace: "bench"},
        spec: {nodeName: "bench-node", terminationGracePeriodSeconds: 0, automountServiceAccountToken: false,
               containers: [{name: "main", image: "podres.test/busybox:1", command: ["sleep", "600"],
                             resources: {limits: {"example.com/resource": "1"}}}]}}' > "$OUT/pod.json"
    # A random phase against the poll clock: each pod follows the release of
    # the one before, which a poll saw, and would otherwise always wait a whole interval.
    ms=$((RANDOM % INTERVAL_MS))
    sleep "$((ms / 1000)).$(printf %03d $((ms % 1000)))"
    t0=$(now_ms)
    k create -f "$OUT/pod.json" > /dev/null
    t1="" t2=""
    for _ in $(seq 1000); do # 20 ms steps, at most 20 s
        [ -n "$t1" ] || ! curl -sf --unix-socket "$SOCK" "http://localhost/v1/namespaces/bench/pods/$p" |
            jq -e '[.podResources.containers[].devices[].deviceIds[]] | length == 1' > /dev/null ||
            t1=$(now_ms)
        [ -n "$t2" ] || ! "${KCURL[@]}" -f "$DVB/$p" 2>/dev/null | jq -e '.status.phase == "Bound"' > /dev/null ||
            t2=$(now_ms)
        [ -n "$t1" ] && [ -n "$t2" ] && break
        sleep 0.02
    done
    [ -n "$t1" ] && [ -n "$t2" ] || die "pod $p: podresd ${t1:-never}, DeviceBinding ${t2:-never}"
    to_pd+=($((t1 - t0))) to_dvb+=($((t2 - t0)))
    log "  $p: podresd +$((t1 - t0)) ms, DeviceBinding Bound +$((t2 - t0)) ms"
    k delete pod -n bench "$p" --wait=true --timeout 60s > /dev/null
    for _ in $(seq 300); do # the device free again in podresd before the next pod
        curl -s -o /dev/null -w '%{http_code}' --unix-socket "$SOCK" \
            "http://localhost/v1/namespaces/bench/pods/$p" | grep -qx 404 && break
        sleep 0.05
    done
done
a50=$(pct 50 "${to_dvb[@]}") a99=$(pct 99 "${to_dvb[@]}")
b50=$(pct 50 "${to_pd[@]}") b99=$(pct 99 "${to_pd[@]}")
r=$(awk -v a="$a99" -v i="$INTERVAL_MS" 'BEGIN { printf "%.2f", a / i }')
met=$(awk -v r="$r" 'BEGIN { print (r <= 1.5) ? "yes" : "no" }')
echo "ROW|N1|pod created on the real node → DeviceBinding Bound, p50 / p99 ms ($N pods)|$a50 / $a99|$INTERVAL_MS (kubelet poll interval)|$r (p99)|p99 ≤ 1.5 × interval|$met"
echo "ROW|N2|pod created on the real node → podresd's binding (kubelet mode), p50 / p99 ms|$b50 / $b99|$INTERVAL_MS (kubelet poll interval)|$(awk -v a="$b99" -v i="$INTERVAL_MS" 'BEGIN { printf "%.2f", a / i }') (p99)|-|-"
