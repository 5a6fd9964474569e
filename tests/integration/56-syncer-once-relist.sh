#!/usr/bin/env bash
# podres-syncer --once for scripts; and relisting: the API server compacts
# its history (watches get 410), podresd's feed expires under a stopped
# syncer (410 in the stream): both are listed again and nothing is missed.
. "$(dirname "$0")/lib.sh"

once() { "$PODRES_BIN/podres-syncer" --once --node-name test-node --podresd-socket "$PD_SOCK" --kubeconfig "$SY_KCFG" "$@"; }

pd_config "history: 5"
pd_start
register example.com/gpu "$(jq -nc '[range(0;12) | {id: "g\(.)"}]')"
kube_up
for i in 0 1 2; do uid[$i]=$(kube_pod ns p$i test-node); done
bind ns p0 "${uid[0]}" g0
bind ns p1 "${uid[1]}" g1

# --once: one full reconcile, exit 0, the objects there; again: no writes.
once >> "$T/once.log" 2>&1 || fail "--once exited $?: $(cat "$T/once.log")"
[ "$(dvb_count)" = 2 ] || fail "--once made $(dvb_count) DeviceBindings"
dvb ns p1
[ "$(jqo .status.phase)" = Bound ] || fail "--once: $(out)"
w0=$(writes)
once >> "$T/once.log" 2>&1 || fail "second --once failed"
[ "$(writes)" = "$w0" ] || fail "a second --once wrote $(( $(writes) - w0 )) times with nothing changed"
ok "--once reconciles everything and exits 0; again, it writes nothing"
rc=0
"$PODRES_BIN/podres-syncer" --once --node-name test-node --podresd-socket "$T/nope.sock" \
    --kubeconfig "$SY_KCFG" > "$T/once-bad.log" 2>&1 || rc=$?
[ "$rc" = 1 ] || fail "--once without podresd exited $rc"
ok "--once exits 1 when it cannot read the node"

fp_start
SY_KCFG=$FP_KCFG sy_start
# The API server has compacted its history: every watch ends, and resuming
# one gets the real server's "too old resource version" ERROR 410 event.
fp POST /_proxy/faults '410:verbs=watch:count=2' > /dev/null
fp POST /_proxy/watches/drop > /dev/null
bind ns p2 "${uid[2]}" g2
wait_until 5 bash -c "$KCURL '$KUBE_SERVER/apis/podres.dev/v1alpha1/namespaces/ns/devicebindings/p2' | jqe '.status.phase == \"Bound\"'" ||
    fail "no sync after the API server's compaction"
kapi DELETE /apis/podres.dev/v1alpha1/namespaces/ns/devicebindings/p1
wait_until 5 bash -c "$KCURL '$KUBE_SERVER/apis/podres.dev/v1alpha1/namespaces/ns/devicebindings/p1' | jqe '.status.phase == \"Bound\"'" ||
    fail "the DeviceBinding informer did not recover from 410"
grep -q "expired; listing again" "$T/syncer.log" || fail "no relist logged after 410"
ok "API watches expired (410): relisted, in sync"

# The syncer is stopped, podresd restarts (ending the stream) and moves past
# its history (5 events): the syncer's resume gets 410 and lists again.
kill -STOP "$SY_PID"
pd_stop
pd_start
req DELETE /v1/namespaces/ns/pods/p0
for i in 3 4 5 6 7 8 9; do req PATCH "/v1/resources/example.com/gpu/devices/g$i" '{"health":"Unhealthy"}'; done
bind ns p1 "${uid[1]}" g1 g10
kill -CONT "$SY_PID"
wait_until 10 bash -c "[ \$($KCURL -o /dev/null -w '%{http_code}' '$KUBE_SERVER/apis/podres.dev/v1alpha1/namespaces/ns/devicebindings/p0') = 404 ] &&
    $KCURL '$KUBE_SERVER/apis/podres.dev/v1alpha1/namespaces/ns/devicebindings/p1' | jqe '.status.summary == \"example.com/gpu=2\"'" ||
    fail "changes made beyond podresd's history were missed: $(tail -5 "$T/syncer.log")"
grep -qE "podresd's feed expired|podresd no longer keeps revision" "$T/syncer.log" ||
    fail "the feed did not expire; the test did not test a relist"
ok "podresd's feed expired under a stopped syncer: listed again, nothing missed"
sy_stop
pd_stop
