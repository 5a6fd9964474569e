#!/usr/bin/env bash
# podres-syncer reaching podresd over loopback TCP (--podresd-url): it reads
# the feed there, and with --podresd-token-file (podresd's write token) it
# reserves a pre-assignment's devices; without it podresd refuses the write
# (403) and the syncer says so, at start and with the reason. An outage of
# podresd is logged as podresd's.
. "$(dirname "$0")/lib.sh"

printf 'w-secret\n' > "$T/write-token"
chmod 600 "$T/write-token"
pd_config "write_token_file: $T/write-token"
pd_start
register example.com/gpu '[{"id":"gpu-0"},{"id":"gpu-1"}]'
kube_up
uid=$(kube_pod ml a test-node)
kube_pod ml p1 test-node > /dev/null
kube_pod ml p2 test-node > /dev/null
preassign() { # NAME DEVICE
    kapi POST /apis/podres.dev/v1alpha1/namespaces/ml/devicebindings \
        "{\"apiVersion\":\"podres.dev/v1alpha1\",\"kind\":\"DeviceBinding\",\"metadata\":{\"name\":\"$1\",\"namespace\":\"ml\",\"labels\":{\"podres.dev/node\":\"test-node\"}},\"spec\":{\"nodeName\":\"test-node\",\"containers\":[{\"name\":\"main\",\"devices\":[{\"resourceName\":\"example.com/gpu\",\"deviceIds\":[\"$2\"]}]}]}}"
    [ "$CODE" = 201 ] || fail "create the pre-assignment $1: HTTP $CODE $(out)"
}
phase() { $KCURL "$KUBE_SERVER/apis/podres.dev/v1alpha1/namespaces/ml/devicebindings/$1" | jq -r '.status.phase // "none"'; }
resv_state() { curl -s --unix-socket "$PD_SOCK" "http://localhost/v1/reservations/ml/$1" | jq -r '.reservation.state // "none"'; }

# With the write token: the feed and the reservations over TCP.
sy_start --podresd-url "http://127.0.0.1:$PD_PORT" --podresd-token-file "$T/write-token"
bind ml a "$uid" gpu-0
wait_until 5 sh -c "[ \"\$($KCURL '$KUBE_SERVER/apis/podres.dev/v1alpha1/namespaces/ml/devicebindings/a' | jq -r .status.phase)\" = Bound ]" ||
    fail "no Bound DeviceBinding for ml/a over --podresd-url: $(tail -5 "$T/syncer.log")"
preassign p1 gpu-1
wait_until 5 sh -c "[ \"\$(curl -s --unix-socket '$PD_SOCK' http://localhost/v1/reservations/ml/p1 | jq -r .reservation.state)\" = Pending ]" ||
    fail "p1 not reserved over TCP with the token: $(tail -5 "$T/syncer.log")"
wait_until 3 sh -c "[ \"\$($KCURL '$KUBE_SERVER/apis/podres.dev/v1alpha1/namespaces/ml/devicebindings/p1' | jq -r .status.phase)\" = Pending ]" ||
    fail "p1: phase $(phase p1)"
grep -q "w-secret" "$T/syncer.log" && fail "the token appears in the syncer's log"
sy_stop
ok "over --podresd-url with --podresd-token-file: bindings mirrored, a pre-assignment reserved"

# Without it: a warning at start, and the refusal's reason when it reserves.
kapi DELETE /apis/podres.dev/v1alpha1/namespaces/ml/devicebindings/p1
req DELETE /v1/reservations/ml/p1
: > "$T/syncer.log"
sy_start --podresd-url "http://127.0.0.1:$PD_PORT"
grep -q "without --podresd-token-file" "$T/syncer.log" || fail "no warning at start: $(cat "$T/syncer.log")"
preassign p2 gpu-1
wait_until 5 grep -q "cannot sync DeviceBinding ml/p2: .*writes over TCP" "$T/syncer.log" ||
    fail "the refusal's reason is not logged: $(tail -5 "$T/syncer.log")"
[ "$(resv_state p2)" = none ] || fail "p2 reserved without a token?"
ok "without the token: a warning at start and the 403's reason in the log"

# podresd goes away and comes back: the log names podresd, not the API server.
pd_stop
wait_until 10 grep -q "podresd unavailable" "$T/syncer.log" || fail "podresd's outage not logged: $(tail -3 "$T/syncer.log")"
grep -q "Kubernetes API server unavailable" "$T/syncer.log" && fail "podresd's outage logged as the API server's"
pd_start
wait_until 10 grep -q "podresd reachable again" "$T/syncer.log" || fail "podresd's return not logged: $(tail -3 "$T/syncer.log")"
sy_stop
ok "podresd's outage and return are logged as podresd's"
