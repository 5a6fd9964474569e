#!/usr/bin/env bash
# Two writers of one podresd's reservations. A syncer whose --node-name is
# not podresd's (a typo) refuses to start, and `--once` with it exits
# non-zero, removing nothing. A syncer that sees its reservations removed
# by someone else (another syncer, by hand) stops writing for good: it says
# so once in its log, in a Warning Event on the DeviceBinding and on
# /readyz (503), and does not start again by itself, so the two never take
# turns.
. "$(dirname "$0")/lib.sh"

preassign() { # NAME NODE DEVICE
    cat > "$T/pa-$1.json" <<JSON
{"apiVersion":"podres.dev/v1alpha1","kind":"DeviceBinding",
 "metadata":{"name":"$1","namespace":"ml","labels":{"podres.dev/node":"$2"}},
 "spec":{"nodeName":"$2","containers":[{"name":"main","devices":[{"resourceName":"example.com/gpu","deviceIds":["$3"]}]}]}}
JSON
    k apply -f "$T/pa-$1.json" > /dev/null || fail "kubectl apply $1"
}
REASON="another podres-syncer writes this podresd's reservations"
MISMATCH="podresd serves node 'test-node', not --node-name 'test-nod'"
logged() { grep -cF -- "$2" "$1" || true; } # FILE TEXT - how many lines hold it
readyz() { curl -s "http://127.0.0.1:$1/readyz"; }
readyz_code() { curl -s -o /dev/null -w '%{http_code}' "http://127.0.0.1:$1/readyz"; }
metric() { curl -s "http://127.0.0.1:$1/metrics" | awk -v m="$2" '$1 == m { print $2 }'; }
resv_code() { curl -s -o /dev/null -w '%{http_code}' --unix-socket "$PD_SOCK" "http://localhost/v1/reservations/ml/$1"; }

pd_start
register example.com/gpu "$(jq -nc '[range(0;4) | {id: "gpu-\(.)"}]')"
kube_up
kube_node test-node
kube_ns ml
sy_start
wait_until 10 sh -c "[ \$(curl -s -o /dev/null -w '%{http_code}' http://127.0.0.1:$SY_PORT/readyz) = 200 ]" ||
    fail "the syncer is not ready: $(readyz "$SY_PORT")"
preassign pa test-node gpu-0
wait_until 10 sh -c "[ \$(curl -s -o /dev/null -w '%{http_code}' --unix-socket '$PD_SOCK' http://localhost/v1/reservations/ml/pa) = 200 ]" ||
    fail "the syncer did not reserve gpu-0 for ml/pa: $(tail -5 "$T/syncer.log")"
[ "$(metric "$SY_PORT" podres_syncer_node_mismatch)" = 0 ] || fail "A: podres_syncer_node_mismatch is not 0"

# B: the same podresd, a typo in its node name. It must not start, nor write.
r0=$(revision)
rc=0
timeout 20 "$PODRES_BIN/podres-syncer" --node-name test-nod --podresd-socket "$PD_SOCK" \
    --kubeconfig "$SY_KCFG" --metrics-listen "127.0.0.1:$(free_port)" > "$T/syncer-b.log" 2>&1 || rc=$?
[ "$rc" = 1 ] || fail "syncer B with --node-name test-nod: exit $rc (want 1): $(tail -5 "$T/syncer-b.log")"
grep -qF "$MISMATCH" "$T/syncer-b.log" || fail "B did not say why: $(cat "$T/syncer-b.log")"
ok "a syncer whose --node-name is not podresd's refuses to start: $(grep -F "$MISMATCH" "$T/syncer-b.log" | head -c 200)"

rc=0
timeout 20 "$PODRES_BIN/podres-syncer" --once --node-name test-nod --podresd-socket "$PD_SOCK" \
    --kubeconfig "$SY_KCFG" > "$T/once.log" 2>&1 || rc=$?
[ "$rc" != 0 ] && [ "$rc" != 124 ] || fail "--once --node-name test-nod: exit $rc: $(tail -5 "$T/once.log")"
grep -qF "$MISMATCH" "$T/once.log" || fail "--once did not say why: $(cat "$T/once.log")"
[ "$(resv_code pa)" = 200 ] || fail "the reservation of ml/pa is gone after B"
[ "$(revision)" = "$r0" ] || fail "podresd's revision moved from $r0 to $(revision): B wrote"
ok "--once with it exits $rc; podresd unchanged (revision $r0), the reservation of ml/pa kept"

# Someone else removes A's reservation again and again: A stops for good.
for i in 1 2 3 4 5 6; do
    curl -s -o /dev/null --unix-socket "$PD_SOCK" -X DELETE http://localhost/v1/reservations/ml/pa
    [ "$i" = 6 ] && break
    wait_until 3 sh -c "[ \$(curl -s -o /dev/null -w '%{http_code}' --unix-socket '$PD_SOCK' http://localhost/v1/reservations/ml/pa) = 200 ]" ||
        break
done
wait_until 10 sh -c "[ \$(curl -s -o /dev/null -w '%{http_code}' http://127.0.0.1:$SY_PORT/readyz) = 503 ]" ||
    fail "A did not stop writing after its reservation was removed $i times: $(readyz "$SY_PORT")"
readyz "$SY_PORT" | grep -qF "$REASON" || fail "A's /readyz: $(readyz "$SY_PORT")"
[ "$(metric "$SY_PORT" podres_syncer_writes_stopped)" = 1 ] || fail "A: podres_syncer_writes_stopped is not 1"
wait_until 10 sh -c "k get events -n ml --field-selector reason=WritesStopped -o json |
    jq -e '[.items[] | select(.regarding.name == \"pa\" and .type == \"Warning\")] | length == 1' > /dev/null" ||
    fail "no Warning Event WritesStopped on ml/pa: $(k get events -n ml -o wide)"
ok "A stopped writing after someone removed its reservation $((i - 1)) times: /readyz 503, an Event on ml/pa"

# It holds: no timer lifts it. The reservation stays removed, the reason stays.
sleep 35
[ "$(readyz_code "$SY_PORT")" = 503 ] || fail "A wrote again 35 s later: $(readyz "$SY_PORT")"
[ "$(resv_code pa)" = 404 ] || fail "A placed the reservation of ml/pa again"
na=$(logged "$T/syncer.log" "$REASON")
[ "$na" = 1 ] || fail "the stop was logged $na times (want once)"
ok "35 s later A still does not write (the reservation of ml/pa stays removed); said once: $(grep -F "$REASON" "$T/syncer.log" | head -c 250)"
