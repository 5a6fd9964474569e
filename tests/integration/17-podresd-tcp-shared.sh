#!/usr/bin/env bash
# The read-only TCP listener (no write token) serves its connections from a
# few polling threads (SO_REUSEPORT shards on one port), not a thread each:
# 100 open keep-alive connections add no threads, partial requests held open
# do not stall other clients, keep-alive, Connection: close and HTTP/1.0
# answer as before, writes get 403, and a watch over TCP is handed to the
# stream loop and sees events. A second podresd cannot join the port; on
# port 0 there is one socket. With a write token the listener goes back to
# a thread per connection (test 10 and 12 cover its writes).
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

cat > "$T/tcp.py" <<'PY'
import os, socket, sys, time

port, pid, sock_path = int(sys.argv[1]), sys.argv[2], sys.argv[3]
GET = b"GET /v1/pods HTTP/1.1\r\nHost: localhost\r\n\r\n"

def threads():
    return len(os.listdir("/proc/%s/task" % pid))

def dial():
    s = socket.create_connection(("127.0.0.1", port), timeout=10)
    return s

def read_answer(s):
    """One HTTP/1.1 answer with Content-Length; returns (status, body)."""
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = s.recv(65536)
        if not chunk:
            raise RuntimeError("closed before the head: %r" % data[:200])
        data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    length = 0
    for line in head.split(b"\r\n")[1:]:
        k, _, v = line.partition(b":")
        if k.strip().lower() == b"content-length":
            length = int(v)
    while len(body) < length:
        chunk = s.recv(65536)
        if not chunk:
            raise RuntimeError("closed mid-body")
        body += chunk
    return int(head.split(b" ")[1]), body

def fail(msg):
    print("not ok - " + msg)
    sys.exit(1)

# keep-alive: three answers on one connection (0.9.75 closes keep-alive when
# an answer is queued on the first callback)
s = dial()
for i in range(3):
    s.sendall(GET)
    st, body = read_answer(s)
    if st != 200 or b'"p0"' not in body:
        fail("keep-alive answer %d: %d %r" % (i, st, body[:100]))
s.close()
print("ok - three answers on one keep-alive connection")

# Connection: close and HTTP/1.0: the answer, then the close
for req in (b"GET /v1/pods HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n",
            b"GET /v1/pods HTTP/1.0\r\nHost: localhost\r\n\r\n"):
    s = dial()
    s.sendall(req)
    data = b""
    while True:
        chunk = s.recv(65536)
        if not chunk:
            break
        data += chunk
    s.close()
    if b" 200 " not in data.split(b"\r\n")[0] or not data.rstrip().endswith(b"}"):
        fail("close answer: %r" % data[:120])
print("ok - Connection: close and HTTP/1.0 answer whole, then close")

# 100 open keep-alive connections, each answered once, add no threads
base = threads()
held = []
for i in range(100):
    s = dial()
    s.sendall(GET)
    st, _ = read_answer(s)
    if st != 200:
        fail("connection %d: %d" % (i, st))
    held.append(s)
now = threads()
if now > base + 4:
    fail("100 open TCP connections took %d threads (%d before)" % (now - base, base))
print("ok - 100 open keep-alive connections: %d threads before, %d with them" % (base, now))

# 50 partial requests held open do not stall another client
partial = []
for i in range(50):
    s = dial()
    s.sendall(b"GET /v1/pods HTTP/1.1\r\nHost: local")
    partial.append(s)
t0 = time.monotonic()
s = dial()
s.sendall(GET)
st, _ = read_answer(s)
took = time.monotonic() - t0
s.close()
if st != 200 or took > 2:
    fail("a GET beside 50 partial requests: %d after %.2f s" % (st, took))
# and the held connections still answer
for i, h in enumerate(held[:10]):
    h.sendall(GET)
    st, _ = read_answer(h)
    if st != 200:
        fail("held connection %d after the partial ones: %d" % (i, st))
print("ok - 50 partial requests held open: another GET answered in %.3f s" % took)
for h in held + partial:
    h.close()

# a watch over TCP: the stream loop takes it and it sees a write
s = dial()
s.sendall(b"GET /v1/watch?kind=PodResources HTTP/1.1\r\nHost: localhost\r\n\r\n")
s.settimeout(10)
data = b""
while b"\r\n\r\n" not in data:
    data += s.recv(4096)
if b"Transfer-Encoding: chunked" not in data or b" 200 " not in data.split(b"\r\n")[0]:
    fail("watch head: %r" % data[:200])
u = socket.socket(socket.AF_UNIX)
u.connect(sock_path)
body = b'{"uid":"u2","containers":[]}'
u.sendall(b"PUT /v1/namespaces/ns1/pods/p2 HTTP/1.1\r\nHost: localhost\r\n"
          b"Content-Type: application/json\r\nContent-Length: %d\r\n\r\n%s" % (len(body), body))
st, _ = read_answer(u)
u.close()
if st != 201:
    fail("bind p2 over the unix socket: %d" % st)
while b'"name":"p2"' not in data:
    chunk = s.recv(4096)
    if not chunk:
        fail("the TCP watch closed before the event: %r" % data[-200:])
    data += chunk
s.close()
print("ok - a watch over TCP gets the event of a write")
PY
python3 "$T/tcp.py" "$PD_PORT" "$PD_PID" "$PD_SOCK" || fail "TCP listener checks"

# The shards share their port through SO_REUSEPORT, but a second podresd
# (same user) asking for that port is refused, not let in to share it.
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

# Every listening TCP socket of a podresd (its shards) is on one port; with
# port 0 (a port the kernel picks) there is one socket.
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
[ "$(echo "$ports" | tr ' ' '\n' | sort -u)" = "$PD_PORT" ] && [ "$(echo "$ports" | wc -w)" -ge 2 ] ||
    fail "the shards' sockets: ports '$ports', want several on $PD_PORT"
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
ok "the shards share one port; on port 0 there is one listening socket"

# The watch client left: the stream is let go.
wait_until 5 sh -c "curl -s --unix-socket '$PD_SOCK' http://localhost/metrics | grep -qx 'podresd_watchers 0'" ||
    fail "the TCP watch was not let go"
tcp GET /healthz
expect_code 200 "healthz after all of it"
pd_check_log
pd_stop
ok "clean shutdown"
