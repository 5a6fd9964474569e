#!/usr/bin/env bash
# podresd with source kubelet against a misbehaving kubelet: the socket goes
# away and comes back (readiness flips, recovery without a restart),
# RESOURCE_EXHAUSTED (backoff), answers slower than the call timeout, and a
# List answer of 6 MiB (over gRPC's 4 MiB default).
. "$(dirname "$0")/lib.sh"

fk_stop() {
    kill -TERM "$FK_PID"
    wait "$FK_PID" 2>/dev/null || true
    rm -f "$FK_SOCK"
}
readyz() { curl -s -o /dev/null -w '%{http_code}' --unix-socket "$PD_SOCK" http://localhost/readyz; }
ready() { [ "$(readyz)" = 200 ]; }
not_ready() { [ "$(readyz)" = 503 ]; }
now_ms() { date +%s%3N; }
calls() { wc -l < "$T/calls.log"; }

POD='{"name":"train-0","namespace":"ml","containers":[{"name":"main","devices":[{"resourceName":"example.com/gpu","deviceIds":["gpu-0"],"topology":{"nodes":[{"ID":0}]}}]}]}'
ALLOC='{"devices":[{"resourceName":"example.com/gpu","deviceIds":["gpu-0","gpu-1"],"topology":{"nodes":[{"ID":0}]}}]}'
state() { fk_state "{\"pods\":[$POD],\"allocatable\":$ALLOC,\"faults\":{${1:-}}}"; }

state
: > "$T/calls.log"
pd_config_kubelet
# podresd starts before its kubelet: up, but not ready.
pd_start
not_ready || fail "ready without a kubelet"
# the 503 is a Status (CONTRACT.md, Errors) whose message gives the reason
curl -s --unix-socket "$PD_SOCK" http://localhost/readyz |
    jqe '.kind == "Status" and .code == 503 and .reason == "ServiceUnavailable" and
        (.message | startswith("not ready: ") and contains("no successful kubelet sync"))' > /dev/null ||
    fail "readyz reason: $(curl -s --unix-socket "$PD_SOCK" http://localhost/readyz)"
fk_start
wait_until 10 ready || fail "not ready once the kubelet is up"
ok "not ready before the first sync; ready once the kubelet answers"

# The kubelet restarts: socket gone, then back.
rev=$(revision)
t0=$(now_ms)
fk_stop
wait_until 5 not_ready || fail "still ready without the kubelet socket"
t1=$(now_ms)
curl -s --unix-socket "$PD_SOCK" http://localhost/readyz | grep -q "cannot connect" ||
    fail "readyz reason: $(curl -s --unix-socket "$PD_SOCK" http://localhost/readyz)"
req GET /v1/pods
[ "$(jqo '.podResources | length')" = 1 ] || fail "state kept while the kubelet is away"
sleep 2
t2=$(now_ms)
fk_start
wait_until 10 ready || fail "no recovery after the kubelet socket came back"
t3=$(now_ms)
[ "$(revision)" = "$rev" ] || fail "the restart changed the revision ($rev -> $(revision))"
grep -q "kubelet sync recovered" "$T/podresd.log" || fail "no recovery log line"
ok "socket removed: not ready after $((t1 - t0)) ms; restored: ready again after $((t3 - t2)) ms, no restart"

# RESOURCE_EXHAUSTED: podresd backs off instead of polling every 200 ms.
state '"resourceExhausted":true'
wait_until 5 grep -q RESOURCE_EXHAUSTED "$T/calls.log" || fail "fault not seen"
n0=$(calls)
sleep 3
n=$(( $(calls) - n0 ))
[ "$n" -le 8 ] || fail "$n calls in 3 s while RESOURCE_EXHAUSTED: no backoff"
not_ready || fail "ready while every call is refused"
grep -q "RESOURCE_EXHAUSTED" "$T/podresd.log" || fail "no log line for RESOURCE_EXHAUSTED"
state
wait_until 10 ready || fail "no recovery after RESOURCE_EXHAUSTED"
ok "RESOURCE_EXHAUSTED: $n calls in 3 s (30 without backoff), recovered"

# Answers slower than the 5 s call timeout: not ready; a slow but timely one is fine.
state '"delaySeconds":6'
wait_until 10 not_ready || fail "ready while every answer times out"
state '"delaySeconds":0.3'
wait_until 12 ready || fail "no recovery with answers of 0.3 s"
state
ok "slow kubelet: timeouts make podresd not ready; recovery once answers come in time"

# A List answer of 6 MiB (filler pods with 300 CPU ids each).
rev=$(revision)
t0=$(now_ms)
state '"listBytes":6291456'
rev_moved() { [ "$(revision)" != "$rev" ]; }
wait_until 30 rev_moved || fail "the 6 MiB List was not stored"
t1=$(now_ms)
req GET /v1/pods?namespace=bulk
npods=$(jqo '.podResources | length')
[ "$npods" -gt 5000 ] || fail "only $npods filler pods"
wait_until 10 ready || fail "not ready with a 6 MiB List"
state
one_pod() { [ "$(curl -s --unix-socket "$PD_SOCK" http://localhost/v1/pods | jq '.podResources | length')" = 1 ]; }
wait_until 30 one_pod || fail "filler pods not removed"
ok "6 MiB List: $npods pods stored in $((t1 - t0)) ms, then removed"

pd_stop
ok "clean shutdown"
