#!/usr/bin/env bash
# podres-syncer behind tests/fixtures/fault-proxy, in front of the real API
# server: a 30 s outage during churn (503 on every request, counted), then
# convergence; 409s and 429s with Retry-After, then convergence, no request
# before Retry-After, nothing lost or duplicated.
. "$(dirname "$0")/lib.sh"

# The DeviceBindings labelled for test-node, as "ns/name summary" lines.
api_state() {
    $KCURL "$KUBE_SERVER/apis/podres.dev/v1alpha1/devicebindings?labelSelector=podres.dev%2Fnode%3Dtest-node" |
        jq -r '.items[] | "\(.metadata.namespace)/\(.metadata.name) \(.status.summary // "-")"' | sort
}
# The same from podresd: pods holding devices.
node_state() {
    curl -s --unix-socket "$PD_SOCK" http://localhost/v1/pods |
        jq -r '.podResources[] | select([.containers[].devices[].deviceIds[]] | length > 0) |
               "\(.namespace)/\(.name) example.com/gpu=\([.containers[].devices[].deviceIds[]] | length)"' | sort
}
converged() { [ "$(api_state)" = "$(node_state)" ]; }

pd_start
register example.com/gpu "$(jq -nc '[range(0;16) | {id: "gpu-\(.)"}]')"
kube_up
fp_start
for i in $(seq 0 7); do uid[$i]=$(kube_pod ns p$i test-node); done
SY_KCFG=$FP_KCFG sy_start --qps 50 --burst 100 --log-level debug
for i in 0 1 2 3; do bind ns p$i "${uid[$i]}" gpu-$i; done
wait_until 5 converged || fail "no initial convergence: $(api_state) vs $(node_state)"
ok "initial state synced"

# Outage: every request answers 503 for 30 s while the node churns.
fp DELETE /_proxy/counters > /dev/null
fp PUT /_proxy/faults '{"spec":"503"}' > /dev/null
end=$(( $(date +%s) + 30 * MULT ))
i=4
while [ "$(date +%s)" -lt "$end" ]; do
    bind ns p$((i % 8)) "${uid[$((i % 8))]}" gpu-$((i % 16)) gpu-$(((i + 8) % 16)) 2>/dev/null || true
    req DELETE "/v1/namespaces/ns/pods/p$(((i + 3) % 8))"
    i=$((i + 1))
    sleep 1
done
during=$(fp GET /_proxy/counters | jq .total)
fp DELETE /_proxy/faults > /dev/null
echo "# requests during the 30 s outage: $during"
# Budget: one shared backoff doubling from 200 ms to 30 s allows about 8 tries in
# 30 s; three times that leaves room for threads already in flight.
[ "$during" -le 24 ] || fail "$during requests during a 30 s outage: over the backoff budget"
wait_until 45 converged || fail "no convergence after the outage: $(api_state) vs $(node_state)"
ok "a 30 s outage during churn: $during requests, then exactly the node's state"

# 409 and 429 (plain text, Retry-After: 1) on half of the writes.
fp DELETE /_proxy/requests > /dev/null
fp PUT /_proxy/faults \
    '{"spec":"409:count=6:verbs=update|patch,429:count=6:verbs=write,429:count=2:verbs=write:body=status"}' > /dev/null
for i in $(seq 0 7); do
    if [ $((i % 2)) = 0 ]; then bind ns p$i "${uid[$i]}" gpu-$((i + 8)); else req DELETE /v1/namespaces/ns/pods/p$i; fi
done
t0=$(date +%s)
wait_until 60 converged || fail "no convergence under 409/429: [$(api_state)] vs [$(node_state)]"
echo "# converged under 409/429 in $(( $(date +%s) - t0 )) s"
[ "$(fp GET /_proxy/faults | jq '.faults | length')" = 0 ] || fail "the faults were not all hit"
fp GET /_proxy/requests > "$T/reqs"
/usr/bin/python3 - "$T/reqs" <<'PY' || fail "a request came before Retry-After"
import json, sys
reqs = json.load(open(sys.argv[1]))["requests"]
bad = []
for r in reqs:
    if r["code"] != 429 or not r["userAgent"].startswith("podres-syncer"):
        continue
    t = r["end"]
    # A request sent before the 429 reached the client may arrive a moment later.
    early = [q for q in reqs if t + 0.05 < q["start"] < t + 0.95
             and q["userAgent"].startswith("podres-syncer")]
    bad += early
if bad:
    print("early:", bad[:3], file=sys.stderr)
    sys.exit(1)
PY
n=$($KCURL "$KUBE_SERVER/apis/podres.dev/v1alpha1/devicebindings" | jq '[.items[].metadata.name] | length')
u=$($KCURL "$KUBE_SERVER/apis/podres.dev/v1alpha1/devicebindings" | jq '[.items[].metadata.name] | unique | length')
[ "$n" = "$u" ] || fail "duplicate DeviceBindings"
ok "409 and 429 with Retry-After: converged, nothing lost or duplicated, no request before Retry-After"
grep -q "Kubernetes API server unavailable" "$T/syncer.log" || fail "the outage was not logged"
[ "$(grep -c "Kubernetes API server unavailable" "$T/syncer.log")" -le 4 ] || fail "the outage was logged over and over"

# A write stalled past the client's 30 s timeout: given up, tried again, converged.
fp PUT /_proxy/faults 'stall:seconds=45:verbs=write:user-agent=podres-syncer:count=1' > /dev/null
bind ns p1 "${uid[1]}" gpu-1
t0=$(date +%s)
wait_until 60 converged || fail "no convergence after a stalled write: [$(api_state)] vs [$(node_state)]"
took=$(( $(date +%s) - t0 ))
[ "$(fp GET /_proxy/faults | jq '.faults | length')" = 0 ] || fail "no write was stalled"
# Converging took the client's timeout: the stalled write was given up, not answered.
[ "$took" -ge 29 ] || fail "converged in $took s: the stall did not hold the write"
ok "a write stalled past the client's 30 s timeout: given up, retried, converged in $took s"
sy_stop
pd_stop
