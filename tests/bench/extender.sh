#!/usr/bin/env bash
# tests/bench/extender.sh - the extender's filter latency over 5000 nodes of
# 8 devices each (NodeDevices in the real API server of tests/kube/cluster),
# against an empty extender (tests/bench/empty_extender.c: parse, echo the
# NodeNames) answering the same request. Usage: extender.sh BIN_DIR TOOLS_DIR
# WORK_DIR. Prints "ROW|id|figure|podres|reference|ratio|goal" lines on stdout
# for run.sh; progress on stderr. BENCH_EXT_NODES and BENCH_EXT_REQS scale it.
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
BIN=$1 TOOLS=$2 W=$3
NODES=${BENCH_EXT_NODES:-5000} REQS=${BENCH_EXT_REQS:-200}
mkdir -p "$W"
PIDS=()
KD=$W/kube
cleanup() {
    local p
    exec 2>/dev/null   # no "Killed" job notices
    for p in "${PIDS[@]:-}"; do [ -n "$p" ] && kill -9 "$p" 2>/dev/null || true; done
    "$ROOT/tests/kube/cluster" down "$KD" > /dev/null 2>&1 || true
}
trap cleanup EXIT
log() { printf '[bench-extender %s] %s\n' "$(date +%T)" "$*" >&2; }
free_port() { python3 "$ROOT/tests/py/podres_test/free_port.py"; }
wait_until() { local i=0 limit=$(($1 * 10)); shift; until "$@" > /dev/null 2>&1; do i=$((i + 1)); [ $i -ge $limit ] && return 1; sleep 0.1; done; }

"$ROOT/tests/kube/cluster" up "$KD" --owner $$ --crd "$ROOT/schema/crd-nodedevices.yaml" \
    --crd "$ROOT/schema/crd-devicebinding.yaml" > "$W/kube-up.log" 2>&1 ||
    { cat "$W/kube-up.log" >&2; exit 1; }
# shellcheck disable=SC1091
. "$KD/env"
CURL="curl -s --cacert $KUBE_CA --cert $KD/pki/admin.crt --key $KD/pki/admin.key"
ND=$KUBE_SERVER/apis/podres.dev/v1alpha1/nodedevices

log "creating $NODES NodeDevices of 8 devices (create + status, 32 at a time)"
export CURL ND
seq 0 $((NODES - 1)) | xargs -P 32 -I{} sh -c '
    $CURL -o /dev/null -X POST -H "Content-Type: application/json" "$ND" \
        -d "{\"apiVersion\":\"podres.dev/v1alpha1\",\"kind\":\"NodeDevices\",\"metadata\":{\"name\":\"node-{}\"}}"
    $CURL -o /dev/null -X PATCH -H "Content-Type: application/merge-patch+json" "$ND/node-{}/status" \
        -d "{\"status\":{\"devices\":[$(for i in 0 1 2 3 4 5 6 7; do
            printf "{\"resourceName\":\"example.com/gpu\",\"id\":\"node-{}-g%d\",\"health\":\"Healthy\",\"topology\":{\"nodes\":[{\"id\":%d}]}}" $i $((i / 4))
            [ $i = 7 ] || printf ,; done)]}}"'

EXT_PORT=$(free_port) REF_PORT=$(free_port)
XC=$W/extender-certs
"$ROOT/deploy/scheduler/podres-extender-certs" "$XC"
"$BIN/podres-extender" --kubeconfig "$KUBECONFIG" --listen "127.0.0.1:$EXT_PORT" \
    --tls-cert-file "$XC/server.crt" --tls-private-key-file "$XC/server.key" --client-ca-file "$XC/ca.crt" \
    >> "$W/extender.log" 2>&1 &
PIDS+=($!)
"$TOOLS/empty_extender" "$REF_PORT" "$XC/server.crt" "$XC/server.key" "$XC/ca.crt" &
PIDS+=($!)
XCURL="curl -s --cacert $XC/ca.crt --cert $XC/client.crt --key $XC/client.key"
wait_until 120 sh -c "$XCURL https://127.0.0.1:$EXT_PORT/metrics | grep -qx 'podres_extender_nodes $NODES'" ||
    { tail "$W/extender.log" >&2; log "the extender did not load $NODES nodes"; exit 1; }

echo '{"metadata":{"name":"p","namespace":"ml"},"spec":{"containers":[{"name":"main","image":"x",
  "resources":{"limits":{"example.com/gpu":"2","cpu":"1"}}}]}}' > "$W/pod.json"
read -r ep50 ep99 epass < <(python3 "$ROOT/tests/bench/extender_lat.py" "https://127.0.0.1:$EXT_PORT" "$W/pod.json" "$NODES" "$REQS" "$XC")
read -r rp50 rp99 rpass < <(python3 "$ROOT/tests/bench/extender_lat.py" "https://127.0.0.1:$REF_PORT" "$W/pod.json" "$NODES" "$REQS" "$XC")
[ "$epass" = "$NODES" ] || { log "the extender passed $epass of $NODES nodes"; exit 1; }
log "filter over $NODES nodes: p50 $ep50 ms p99 $ep99 ms; empty extender p50 $rp50 ms p99 $rp99 ms"
r50=$(awk -v a="$ep50" -v b="$rp50" 'BEGIN { printf "%.2f", a / b }')
r99=$(awk -v a="$ep99" -v b="$rp99" 'BEGIN { printf "%.2f", a / b }')
echo "ROW|9a|extender filter p50 ms, $NODES nodes × 8 devices|$ep50|$rp50 (empty extender)|$r50|≤ 3×"
echo "ROW|9b|extender filter p99 ms, $NODES nodes × 8 devices|$ep99|$rp99 (empty extender)|$r99|≤ 3×"
