#!/usr/bin/env bash
# The change feed: initial events and bookmark, order, resume, 410, filters,
# timeoutSeconds, bookmarks, shutdown.
. "$(dirname "$0")/lib.sh"

pd_config "history: 20"
pd_start
register example.com/gpu '[{"id":"g0"},{"id":"g1"},{"id":"g2"}]'

# Follow the feed from the start while writing.
curl -sN --unix-socket "$PD_SOCK" "http://localhost/v1/watch" > "$T/all" &
WPID=$!; PIDS+=("$WPID")
wait_until 5 grep -q initialEventsEnd "$T/all" || fail "no initialEventsEnd bookmark"
[ "$(head -3 "$T/all" | jq -r .type | sort -u)" = ADDED ] || fail "initial events should be ADDED"
[ "$(sed -n 4p "$T/all" | jq -r .revision)" = 3 ] || fail "initial bookmark revision: $(sed -n 4p "$T/all")"
for i in 1 2 3 4; do
    req PUT "/v1/namespaces/ns$((i % 2))/pods/p$i" "{\"uid\":\"u$i\",\"containers\":[{\"name\":\"c\",\"devices\":[{\"resourceName\":\"example.com/gpu\",\"deviceIds\":[\"g$((i % 3))\"]}]}]}"
    [ "$CODE" = 201 ] || [ "$CODE" = 409 ] || fail "bind p$i: $CODE"
done
req DELETE /v1/namespaces/ns1/pods/p1
final=$(revision)
wait_until 5 grep -q "\"revision\":$final,\"object\"" "$T/all" || fail "live events missing: $(cat "$T/all")"
revs=$(jq -r 'select(.type!="BOOKMARK") | .revision' "$T/all" | tail -n +4)
[ "$(echo "$revs" | sort -n | uniq | tr '\n' ' ')" = "$(echo "$revs" | tr '\n' ' ')" ] || fail "events out of order or repeated: $revs"
[ "$(echo "$revs" | head -1)" = 4 ] && [ "$(echo "$revs" | tail -1)" = "$final" ] &&
    [ "$(echo "$revs" | wc -l)" = $((final - 3)) ] || fail "events skipped: $revs (final $final)"
jq -r 'select(.type=="DELETED" and .kind=="PodResources") | .object.name' "$T/all" | grep -qx p1 ||
    fail "no DELETED event for p1: $(cat "$T/all")"
ok "initial ADDED, initialEventsEnd, then every change in order, once"

# Resume with since=.
timeout 5 curl -sN --unix-socket "$PD_SOCK" "http://localhost/v1/watch?since=5&timeoutSeconds=1" > "$T/since"
[ "$(jq -r 'select(.type!="BOOKMARK") | .revision' "$T/since" | tr '\n' ' ')" = "$(seq 6 "$final" | tr '\n' ' ')" ] ||
    fail "since=5: $(cat "$T/since")"
ok "since= resumes after the given revision; timeoutSeconds ends the stream"

# Filters.
timeout 5 curl -sN --unix-socket "$PD_SOCK" "http://localhost/v1/watch?since=3&kind=PodResources&namespace=ns0&timeoutSeconds=1" > "$T/f"
[ "$(jq -r 'select(.type!="BOOKMARK") | "\(.kind)/\(.object.namespace)"' "$T/f" | sort -u)" = "PodResources/ns0" ] ||
    fail "filters: $(cat "$T/f")"
timeout 5 curl -sN --unix-socket "$PD_SOCK" "http://localhost/v1/watch?kind=Device&timeoutSeconds=1" > "$T/d"
[ "$(jq -r 'select(.type=="ADDED") | .kind' "$T/d" | sort -u)" = Device ] || fail "kind filter on the initial list"
ok "kind and namespace filters"

# 410 beyond the kept history (history: 20).
for i in $(seq 1 25); do req PATCH /v1/resources/example.com/gpu/devices/g0 "{\"health\":\"$([ $((i % 2)) = 0 ] && echo Healthy || echo Unhealthy)\"}"; done
req GET "/v1/watch?since=1"
expect_status 410 Expired "since older than the history"
req GET "/v1/watch?since=999999"
expect_status 410 Expired "since in the future"
ok "410 Expired beyond the kept history"

# A watcher that never reads does not stall writers or other watchers.
python3 - "$PD_SOCK" <<'PY' &
import socket, sys, time
s = socket.socket(socket.AF_UNIX)
s.connect(sys.argv[1])
s.sendall(b"GET /v1/watch HTTP/1.1\r\nHost: localhost\r\n\r\n")
time.sleep(20)
PY
PIDS+=($!)
r=$(revision)
curl -sN --unix-socket "$PD_SOCK" "http://localhost/v1/watch?since=$r" > "$T/live" &
PIDS+=($!)
sleep 0.3
big=$(python3 -c 'print(",".join("\"p%d\":\"%s\"" % (i, "x" * 1000) for i in range(60)))')
start=$(date +%s)
for i in $(seq 1 60); do
    req PUT /v1/resources/example.com/gpu/devices "{\"devices\":[{\"id\":\"g0\",\"properties\":{$big,\"n\":\"$i\"}},{\"id\":\"g1\"},{\"id\":\"g2\"}]}"
    [ "$CODE" = 200 ] || fail "write $i during a stalled watcher: $CODE"
done
[ $(( $(date +%s) - start )) -lt $((10 * MULT)) ] || fail "writes slowed down by a stalled watcher"
final=$(revision)
wait_until 5 grep -q "\"revision\":$final,\"object\"" "$T/live" || fail "the live watcher fell behind"
ok "a watcher that never reads stalls neither writers nor other watchers"

# A bookmark at least every 10 s on a quiet stream; shutdown ends streams.
r=$(revision)
curl -sN --unix-socket "$PD_SOCK" "http://localhost/v1/watch?since=$r" > "$T/quiet" &
QPID=$!; PIDS+=("$QPID")
sleep $((11 * MULT))
[ "$(jq -r 'select(.type=="BOOKMARK") | .revision' "$T/quiet" | head -1)" = "$r" ] || fail "no bookmark in 11 s: $(cat "$T/quiet")"
ok "bookmark on a quiet stream"
kill "$WPID" 2>/dev/null || true
pd_stop
wait "$QPID" || fail "the watch client saw an error at shutdown"
ok "shutdown ends open watches cleanly"
