#!/usr/bin/env bash
# Two syncers against one podresd that disagree on the node name (a typo in
# --node-name, a second copy): each would remove the other's reservations as
# made outside a DeviceBinding, and the other place them again, thousands of
# times a second. They must notice, stop writing, say so once and answer
# /readyz 503 with the reason; the one whose node is no Node says that too.
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
logged() { grep -cF -- "$2" "$1" || true; } # FILE TEXT - how many lines hold it
readyz() { curl -s "http://127.0.0.1:$1/readyz"; }
readyz_code() { curl -s -o /dev/null -w '%{http_code}' "http://127.0.0.1:$1/readyz"; }
metric() { curl -s "http://127.0.0.1:$1/metrics" | awk -v m="$2" '$1 == m { print $2 }'; }

pd_start
register example.com/gpu "$(jq -nc '[range(0;4) | {id: "gpu-\(.)"}]')"
kube_up
kube_node test-node
kube_ns ml
sy_start
# B: the same podresd, a typo in its node name.
SYB_PORT=$(free_port)
"$PODRES_BIN/podres-syncer" --node-name test-nod --podresd-socket "$PD_SOCK" \
    --kubeconfig "$SY_KCFG" --metrics-listen "127.0.0.1:$SYB_PORT" >> "$T/syncer-b.log" 2>&1 &
PIDS+=("$!")
wait_until 10 curl -sf "http://127.0.0.1:$SYB_PORT/healthz" || fail "syncer B did not start"
wait_until 10 sh -c "[ \$(curl -s -o /dev/null -w '%{http_code}' http://127.0.0.1:$SY_PORT/readyz) = 200 ] &&
    [ \$(curl -s -o /dev/null -w '%{http_code}' http://127.0.0.1:$SYB_PORT/readyz) = 200 ]" ||
    fail "the syncers are not ready: A $(readyz "$SY_PORT"), B $(readyz "$SYB_PORT")"

# The Node check: B's name is no Node; said once, and in the metric.
wait_until 5 sh -c "grep -qF \"node 'test-nod' is no Node in the API server\" '$T/syncer-b.log'" ||
    fail "B did not say its node is no Node: $(cat "$T/syncer-b.log")"
[ "$(metric "$SYB_PORT" podres_syncer_node_missing)" = 1 ] || fail "B: podres_syncer_node_missing is not 1"
[ "$(metric "$SY_PORT" podres_syncer_node_missing)" = 0 ] || fail "A: podres_syncer_node_missing is not 0"
[ "$(logged "$T/syncer.log" "is no Node in the API server")" = 0 ] || fail "A warned about its Node"
ok "a --node-name that is no Node is a warning, once, and podres_syncer_node_missing 1"

# Pre-assignments for both names: each syncer places one reservation the
# other takes for a stray.
r0=$(revision)
preassign pa test-node gpu-0
preassign pb test-nod gpu-1
sleep 2
r1=$(revision)
sleep 10
r2=$(revision)
echo "# podresd revision: $r0 before the pre-assignments, $r1 2 s after, $r2 10 s later" >&2
[ $((r2 - r1)) -le 10 ] || fail "podresd's revision grew by $((r2 - r1)) in 10 s: the syncers fight"
[ $((r2 - r0)) -le 30 ] || fail "podresd's revision grew by $((r2 - r0)) in 12 s: the syncers fight"
ok "podresd's revision grew by $((r2 - r0)) in 12 s, $((r2 - r1)) in the last 10 s"

stopped=0
for p in "$SY_PORT" "$SYB_PORT"; do
    if [ "$(readyz_code "$p")" = 503 ]; then
        readyz "$p" | grep -qF "$REASON" || fail "/readyz of :$p: $(readyz "$p")"
        [ "$(metric "$p" podres_syncer_writes_stopped)" = 1 ] || fail ":$p: podres_syncer_writes_stopped is not 1"
        stopped=$((stopped + 1))
    fi
done
[ "$stopped" -ge 1 ] || fail "no syncer stopped writing: A $(readyz "$SY_PORT"), B $(readyz "$SYB_PORT")"
readyz "$SYB_PORT" | grep -qF "node 'test-nod' is no Node in the API server" ||
    [ "$(readyz_code "$SYB_PORT")" = 200 ] || fail "B's reason does not name its missing Node: $(readyz "$SYB_PORT")"
ok "$stopped of the two syncers stopped writing; /readyz 503: $(readyz "$SYB_PORT" | head -c 300)"

na=$(logged "$T/syncer.log" "$REASON")
nb=$(logged "$T/syncer-b.log" "$REASON")
[ "$na" -le 1 ] && [ "$nb" -le 1 ] && [ $((na + nb)) -ge 1 ] ||
    fail "the fight was logged $na times by A, $nb times by B (want once each at most, once at least)"
ok "said once: $(grep -hF "$REASON" "$T/syncer.log" "$T/syncer-b.log" | head -1)"
