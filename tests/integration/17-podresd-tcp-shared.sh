#!/usr/bin/env bash
# The read-only TCP listener (no write token) serves its connections from
# one polling thread on one socket, not a thread each: 100 open keep-alive
# connections add no threads, partial requests held open do not stall other
# clients, keep-alive, Connection: close and HTTP/1.0 answer as before,
# writes get 403, and a watch over TCP is handed to the stream loop and sees
# events. A second podresd cannot join the port; on port 0 the kernel picks
# one. With a write token the listener goes back to a thread per connection
# (test 10 and 12 cover its writes).
. "$(dirname "$0")/lib.sh"

pd_start
register example.com/gpu '[{"id":"gpu0"},{"id":"gpu1"}]'
req PUT /v1/namespaces/ns1/pods/p0 \
    '{"uid":"u0","containers":[{"name":"main","devices":[{"resourceName":"example.com/gpu","deviceIds":["gpu0"]}]}]}'
expect_code 201 "bind p0"

tcp GET /v1/pods
expect_code 200 "TCP read"
[ "$(jqo '.podResources[0].name')" = p0 ] || fail "TCP list: $(out)"
tcp PUT /v1/namespaces/ns1/pods/p1 '{"uid":"u1","containers":[]}'
expect_status 403 Forbidden "TCP write without a token"
ok "TCP reads answer, writes get 403"

python3 -m podres_test.tcp_listener "$PD_PORT" "$PD_PID" "$PD_SOCK" || fail "TCP listener checks"

# A second podresd (same user) asking for the port is refused, not let in
# to share it.
mkdir -p "$T/two"
cat > "$T/two/podresd.yaml" <<YAML
db: $T/two/podresd.db
socket: $T/two/run/podresd.sock
listen: 127.0.0.1:$PD_PORT
node_name: test-node
YAML
rc=0
timeout 10 "$PODRES_BIN/podresd" --config "$T/two/podresd.yaml" > "$T/two/log" 2>&1 || rc=$?
[ "$rc" -ne 0 ] && [ "$rc" -ne 124 ] || fail "a second podresd on the same TCP port: exit $rc"
grep -q "cannot listen on '127.0.0.1:$PD_PORT'" "$T/two/log" || fail "second podresd: $(cat "$T/two/log")"
tcp GET /healthz
expect_code 200 "the first podresd after the second one's attempt"
ok "a second podresd on the same TCP port is refused"

# A podresd listens on one TCP socket, on its port; with port 0 on one the
# kernel picks, and it answers there.
listening_ports() {
    python3 - "$1" <<'PY'
import os, sys
pid = sys.argv[1]
inodes = set()
for fd in os.listdir("/proc/%s/fd" % pid):
    try:
        t = os.readlink("/proc/%s/fd/%s" % (pid, fd))
    except OSError:
        continue
    if t.startswith("socket:["):
        inodes.add(t[8:-1])
ports = []
for table in ("/proc/net/tcp", "/proc/net/tcp6"):
    with open(table) as f:
        next(f)
        for line in f:
            c = line.split()
            if c[3] == "0A" and c[9] in inodes:
                ports.append(int(c[1].split(":")[1], 16))
print(" ".join(str(p) for p in sorted(ports)))
PY
}
ports=$(listening_ports "$PD_PID")
[ "$ports" = "$PD_PORT" ] || fail "listening TCP sockets: ports '$ports', want one on $PD_PORT"
sed -i "s/^listen: .*/listen: 127.0.0.1:0/" "$T/two/podresd.yaml"
"$PODRES_BIN/podresd" --config "$T/two/podresd.yaml" > "$T/two/log" 2>&1 &
TWO=$!
PIDS+=("$TWO")
wait_until 10 curl -sf --unix-socket "$T/two/run/podresd.sock" http://localhost/healthz ||
    fail "podresd on port 0 did not start: $(cat "$T/two/log")"
ports=$(listening_ports "$TWO")
[ "$(echo "$ports" | wc -w)" = 1 ] && curl -sf "http://127.0.0.1:$ports/healthz" > /dev/null ||
    fail "podresd on port 0 listens on '$ports', want one port that answers"
kill -TERM "$TWO"; wait "$TWO" || fail "podresd on port 0 exited $? after SIGTERM"
ok "one listening socket on the port; on port 0 one the kernel picks"

# The watch client left: the stream is let go.
wait_until 5 sh -c "curl -s --unix-socket '$PD_SOCK' http://localhost/metrics | grep -qx 'podresd_watchers 0'" ||
    fail "the TCP watch was not let go"
tcp GET /healthz
expect_code 200 "healthz after all of it"
pd_check_log
pd_stop
ok "clean shutdown"
