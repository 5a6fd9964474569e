#!/usr/bin/env bash
# A resource registered with ttlSeconds turns Unhealthy when not refreshed
# in time, visibly in the feed; a refresh makes it Healthy again.
. "$(dirname "$0")/lib.sh"

pd_start
register example.com/fpga '[{"id":"f0"},{"id":"f1"}]' 1
r=$(revision)
curl -sN --unix-socket "$PD_SOCK" "http://localhost/v1/watch?since=$r&kind=Device" > "$T/w" &
PIDS+=($!)
wait_until 6 grep -q '"health":"Unhealthy"' "$T/w" || fail "no Unhealthy event after the TTL"
req GET '/v1/devices?resource=example.com/fpga'
[ "$(jqo '[.devices[].health] | unique | join(",")')" = Unhealthy ] || fail "devices: $(out)"
grep -q "heartbeat of resource 'example.com/fpga' lapsed" "$T/podresd.log" || fail "no log line"
ok "a lapsed heartbeat turns the devices Unhealthy, in the feed"
register example.com/fpga '[{"id":"f0"},{"id":"f1"}]' 30
req GET '/v1/devices?resource=example.com/fpga'
[ "$(jqo '[.devices[].health] | unique | join(",")')" = Healthy ] || fail "after refresh: $(out)"
wait_until 3 grep -q '"health":"Healthy"' "$T/w" || fail "no Healthy event after the refresh"
ok "a refresh makes them Healthy again"
# The heartbeat survives a restart: a lapsed TTL is seen after it too.
register example.com/tpu '[{"id":"t0"}]' 1
pd_stop
sleep 1.5
pd_start
wait_until 4 sh -c "curl -s --unix-socket '$PD_SOCK' 'http://localhost/v1/devices?resource=example.com/tpu' | grep -q Unhealthy" ||
    fail "TTL not enforced after a restart"
ok "heartbeats are enforced across restarts"
pd_stop
