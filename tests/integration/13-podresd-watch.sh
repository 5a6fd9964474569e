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

# A watch from now: its initial ADDED events too come in revision order (each
# object's revision, that of its last change), whatever their kinds.
curl -sN --max-time 3 --unix-socket "$PD_SOCK" "http://localhost/v1/watch?timeoutSeconds=1" > "$T/now" || true
init=$(jq -r 'select(.type=="ADDED") | "\(.revision) \(.object.revision)"' "$T/now")
[ "$(echo "$init" | wc -l)" -ge 5 ] || fail "initial events: $(cat "$T/now")"
echo "$init" | awk '$1 != $2 { exit 1 }' || fail "an initial event's revision is not its object's: $init"
[ "$(echo "$init" | cut -d' ' -f1 | sort -n | uniq | tr '\n' ' ')" = "$(echo "$init" | cut -d' ' -f1 | tr '\n' ' ')" ] ||
    fail "initial events out of revision order: $(jq -c '[.kind, .revision]' "$T/now" | tr '\n' ' ')"
ok "the initial ADDED events of a new watch come in revision order"

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

# The wire: the stream is served by podresd's stream loop, which writes its
# own head. HTTP/1.1 gets chunks and a last chunk; HTTP/1.0 the raw lines
# until the close; HEAD the head alone.
python3 - "$PD_SOCK" <<'PY' || fail "watch wire format"
import sys
from podres_test.client import exchange
def talk(req):
    data, closed = exchange(sys.argv[1], req, 5, timeout=5)
    assert closed, ("no close in 5 s", data[-200:])
    return data
q = b"GET /v1/watch?kind=Device&timeoutSeconds=1 HTTP/1.%d\r\nHost: localhost\r\n\r\n"
r = talk(q % 1)
head, body = r.split(b"\r\n\r\n", 1)
h = head.decode().lower()
assert h.startswith("http/1.1 200 ok"), h
for want in ("content-type: application/x-ndjson", "transfer-encoding: chunked",
             "connection: close", "cache-control: no-cache", "date: "):
    assert want in h, (want, h)
assert body.endswith(b"\r\n0\r\n\r\n"), body[-40:]
r = talk(q % 0)
head, body = r.split(b"\r\n\r\n", 1)
assert b"chunked" not in head.lower(), head
lines = body.decode().splitlines()
assert lines and all(l.startswith("{") for l in lines), body[:200]
assert '"initialEventsEnd":true' in body.decode(), body[-200:]
r = talk(b"HEAD /v1/watch HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n")
head, body = r.split(b"\r\n\r\n", 1)
assert head.startswith(b"HTTP/1.1 200") and b"application/x-ndjson" in head and body == b"", r
PY
ok "watch wire: chunked HTTP/1.1 with its last chunk, raw HTTP/1.0, HEAD"

# A client that goes away frees its stream at once, without waiting for a
# write to fail (the gauge podresd_watchers counts open streams).
before=$(curl -s --unix-socket "$PD_SOCK" http://localhost/metrics | awk '/^podresd_watchers / {print $2}')
curl -sN --unix-socket "$PD_SOCK" "http://localhost/v1/watch" > /dev/null &
CPID=$!
wait_until 5 sh -c "[ \"\$(curl -s --unix-socket '$PD_SOCK' http://localhost/metrics | awk '/^podresd_watchers / {print \$2}')\" = $((before + 1)) ]" ||
    fail "the watcher was not counted"
kill "$CPID"; wait "$CPID" 2>/dev/null || true
wait_until 5 sh -c "[ \"\$(curl -s --unix-socket '$PD_SOCK' http://localhost/metrics | awk '/^podresd_watchers / {print \$2}')\" = $before ]" ||
    fail "a closed watch client was not let go"
ok "a watch client that closes is let go at once"

# 410 beyond the kept history (history: 20).
for i in $(seq 1 25); do req PATCH /v1/resources/example.com/gpu/devices/g0 "{\"health\":\"$([ $((i % 2)) = 0 ] && echo Healthy || echo Unhealthy)\"}"; done
req GET "/v1/watch?since=1"
expect_status 410 Expired "since older than the history"
req GET "/v1/watch?since=999999"
expect_status 410 Expired "since in the future"
grep -q "999999 is newer than this podresd's" "$T/out" || fail "since in the future: the message says otherwise: $(out)"
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

# A filtered watcher far behind the ring reads the change log page by page
# (512 rows) and gives the stream loop back between pages: 2,100 device
# changes, then one pod change; since= before them, filtered to pods.
rm -f "$T/podresd.yaml"
PD_DB=$T/db2/podresd.db
mkdir -p "$T/db2"
pd_config "history: 5000"
pd_start
register example.com/gpu '[{"id":"g0"},{"id":"g1"}]'
r0=$(revision)
python3 - "$PD_SOCK" <<'PY' || fail "2,100 writes"
import sys
from podres_test.client import UnixConn
c = UnixConn(sys.argv[1], timeout=None)
for i in range(2100):
    c.request("PATCH", "/v1/resources/example.com/gpu/devices/g0",
              '{"health":"%s"}' % ("Unhealthy" if i % 2 == 0 else "Healthy"),
              {"Content-Type": "application/json"})
    r = c.getresponse(); r.read()
    assert r.status == 200, r.status
PY
req PUT /v1/namespaces/far/pods/p '{"uid":"u","containers":[{"name":"c","devices":[{"resourceName":"example.com/gpu","deviceIds":["g1"]}]}]}'
expect_code 201 "bind after 2,100 device changes"
prev=$(jq -r .podResources.revision "$T/out")
timeout 10 curl -sN --unix-socket "$PD_SOCK" "http://localhost/v1/watch?since=$r0&kind=PodResources&timeoutSeconds=2" > "$T/far"
[ "$(jq -r 'select(.type!="BOOKMARK") | "\(.type)/\(.kind)/\(.revision)"' "$T/far")" = "ADDED/PodResources/$prev" ] ||
    fail "far-behind filtered watcher: $(head -c 400 "$T/far")"
ok "a filtered watcher 2,100 revisions behind gets exactly its one event"
pd_stop

