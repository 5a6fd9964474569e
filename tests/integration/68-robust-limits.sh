#!/usr/bin/env bash
# 68-robust-limits.sh - podresd's budgets under unprivileged loopback TCP
# clients. Watch streams: 1024 TCP watches from 16 loopback addresses, none
# of which reads, all of one local user: that user gets at most 64, another
# user (nobody) still gets one, TCP as a whole at most half of the 1024, and
# the unix socket (the syncer's path) still starts a watch and writes. On
# the unix socket, one user's 700 idle connections: it keeps at most half of
# the 1024, the rest are closed at accept and counted, and another user
# (nobody, in the socket's group) still writes. Descriptors: podresd started with a soft limit of 100 (hard
# 300) raises it to 300; 600 idle TCP connections then cost little CPU, and
# the unix socket answers /healthz and a write. Connections: a client that
# trickles its head (a byte every 5 s, within libmicrohttpd's 30 s idle
# timeout), over TCP or the unix socket, is closed 30 s after it connected;
# with 1500 idle TCP connections (past the 1024 of TCP) a new TCP client is
# served within seconds, the oldest idle ones shed for it.
. "$(dirname "$0")/lib.sh"

pd_start
register example.com/gpu '[{"id":"g0"}]'

cat > "$T/watches.py" <<'PY'
import socket, sys, time

port, peers, each = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])
REQ = b"GET /v1/watch HTTP/1.1\r\nHost: localhost\r\n\r\n"
held, codes = [], {}
for p in range(peers):
    for i in range(each):
        s = socket.socket()
        s.bind(("127.0.0.%d" % (p + 1), 0))
        s.settimeout(10)
        s.connect(("127.0.0.1", port))
        s.sendall(REQ)
        head = s.recv(12)
        code = int(head[9:12]) if len(head) >= 12 else 0
        codes.setdefault(p, []).append(code)
        held.append(s)  # never read again
ok = sum(c == 200 for cs in codes.values() for c in cs)
first = sum(c == 200 for c in codes[0])
print(ok, first, flush=True)
sys.stdin.read()  # hold the sockets until told
PY

# 16 addresses x 64 watches; a fifo keeps them open while we look
mkfifo "$T/hold"
python3 "$T/watches.py" "$PD_PORT" 16 66 < "$T/hold" > "$T/watches.out" &
PIDS+=("$!")
exec 7> "$T/hold"
wait_until 60 test -s "$T/watches.out" || fail "the TCP watchers did not finish"
timeout 5 curl -sN -o "$T/uw" -w '%{http_code}' --unix-socket "$PD_SOCK" \
    "http://localhost/v1/watch?timeoutSeconds=1" > "$T/ucode" || true
[ "$(cat "$T/ucode")" = 200 ] || fail "unix socket watch got $(cat "$T/ucode") with TCP full"
req PUT /v1/namespaces/ns1/pods/p0 '{"uid":"u0","containers":[]}'
expect_code 201 "write on the unix socket with TCP's watches full"
ok "the unix socket still watches and writes"
read -r OK FIRST < "$T/watches.out"
[ "$FIRST" -le 64 ] || fail "one TCP peer address holds $FIRST watches (limit 64)"
[ "$OK" -le 64 ] || fail "one local user holds $OK TCP watches from 16 addresses (limit 64)"
[ "$OK" -ge 1 ] || fail "the local user got no TCP watch at all"
ok "TCP watches capped: $FIRST from one address, $OK from one local user over 16 addresses"
code=$(timeout 5 setpriv --reuid 65534 --regid 65534 --clear-groups curl -sN -o /dev/null -w '%{http_code}' \
    "http://127.0.0.1:$PD_PORT/v1/watch?timeoutSeconds=1" || true)
[ "$code" = 200 ] || fail "another local user's TCP watch got $code while one user holds its 64"
ok "another local user (nobody) still starts a TCP watch"

exec 7>&-

# ---- the unix socket: one user's connections, another user's write
cat > "$T/unix-flood.py" <<'PY'
import socket, sys
path, n = sys.argv[1], int(sys.argv[2])
held = []
for i in range(n):
    s = socket.socket(socket.AF_UNIX)
    s.connect(path)
    held.append(s)
print(len(held), flush=True)
sys.stdin.read()
PY
mkfifo "$T/hold-unix"
python3 "$T/unix-flood.py" "$PD_SOCK" 700 < "$T/hold-unix" > "$T/flood.out" &
PIDS+=("$!")
exec 8> "$T/hold-unix"
wait_until 30 test -s "$T/flood.out" || fail "the unix flood did not connect"
# root holds its share now: its own curl would be closed too; /metrics is read over TCP
wait_until 10 sh -c "curl -s http://127.0.0.1:$PD_PORT/metrics |
    awk '\$1 == \"podresd_connections_refused_total{reason=\\\"per_user\\\"}\" && \$2 >= 100 { f = 1 } END { exit !f }'" ||
    fail "podresd did not close the user's connections over its share: $(curl -s "http://127.0.0.1:$PD_PORT/metrics" | grep connections_refused)"
refused=$(curl -s "http://127.0.0.1:$PD_PORT/metrics" |
    awk '$1 == "podresd_connections_refused_total{reason=\"per_user\"}" { print $2 }')
chmod go+x "$T" && chmod 0750 "$T/run" # nobody reaches the socket through its group (gid 0), as a plugin would
out=$(setpriv --reuid 65534 --regid 0 --clear-groups curl -sS -w '\n%{http_code}' \
    --unix-socket "$PD_SOCK" -X PUT -H 'Content-Type: application/json' \
    --data-binary '{"uid":"u9","containers":[]}' http://localhost/v1/namespaces/ns1/pods/p9 2>&1 || true)
[ "${out##*$'\n'}" = 201 ] || fail "another user's write on the unix socket: $out"
grep -q "closing a new connection of uid 0 on the unix socket" "$T/podresd.log" ||
    fail "the per-user bound was not logged"
ok "one user's 700 unix connections: $refused closed at accept (counted, logged); another user still writes"
exec 8>&-

# ---- connections: a head that trickles, idle TCP connections past the limit
cat > "$T/trickle.py" <<'PY'
import socket, sys, time
from podres_test.client import dial

port, path = int(sys.argv[1]), sys.argv[2]
socks = []
for i in range(3):
    socks.append(dial(port))
    socks.append(dial(path))
t0 = time.monotonic()
head = b"GET /healthz HTTP/1.1\r\nHost: localhost\r\nX-Slow: " + b"a" * 100
closed = {}
i = 0
while len(closed) < len(socks) and time.monotonic() - t0 < 50:
    for s in socks:
        if s in closed:
            continue
        try:
            s.send(head[i:i + 1])
            s.settimeout(0.01)
            if s.recv(1) == b"":
                closed[s] = time.monotonic() - t0
        except socket.timeout:
            pass
        except OSError:
            closed[s] = time.monotonic() - t0
    i += 1
    time.sleep(5)
print(len(socks), len(closed), min(closed.values(), default=0), max(closed.values(), default=0))
PY
python3 "$T/trickle.py" "$PD_PORT" "$PD_SOCK" > "$T/trickle.out" &
TRICKLE=$!
PIDS+=("$TRICKLE")


wait "$TRICKLE"
read -r N CLOSED FIRST LAST < "$T/trickle.out"
[ "$CLOSED" = "$N" ] || fail "$CLOSED of $N trickling clients closed within 50 s"
python3 -c "import sys; sys.exit(not (25 <= $FIRST and $LAST <= 45))" ||
    fail "trickling clients closed after $FIRST..$LAST s, want about 30 s"
ok "trickling heads closed after $FIRST..$LAST s"

# (after the trickling ones: idle, they would be shed first)
mkfifo "$T/hold3"
python3 -m podres_test.idle "$PD_PORT" 1500 < "$T/hold3" > "$T/idle3.out" &
PIDS+=("$!")
exec 9> "$T/hold3"
wait_until 30 test -s "$T/idle3.out" || fail "the idle connections were not made"
sleep 2
curl -sf -o /dev/null --max-time 10 "http://127.0.0.1:$PD_PORT/healthz" ||
    fail "a new TCP client was not served with 1500 idle TCP connections open"
ok "a new TCP client served past 1500 idle TCP connections"
exec 9>&-
pd_stop

# ---- descriptors: a low limit, and idle TCP connections past it
mkdir -p "$T/lowfd"
cat > "$T/lowfd/podresd" <<SH
#!/bin/sh
ulimit -Sn 100 && ulimit -Hn 300 && exec "$PODRES_BIN/podresd" "\$@"
SH
chmod +x "$T/lowfd/podresd"
PODRES_BIN=$T/lowfd pd_start
read -r SOFT HARD < <(awk '/^Max open files/ { print $4, $5 }' "/proc/$PD_PID/limits")
[ "$SOFT" = 300 ] && [ "$HARD" = 300 ] || fail "descriptor limit $SOFT/$HARD, want 300/300"
ok "the soft descriptor limit raised to the hard one"

mkfifo "$T/hold2"
python3 -m podres_test.idle "$PD_PORT" 600 < "$T/hold2" > "$T/idle.out" &
PIDS+=("$!")
exec 8> "$T/hold2"
wait_until 30 test -s "$T/idle.out" || fail "the idle connections were not made"
sleep 1
ticks() { awk '{ print $14 + $15 }' "/proc/$PD_PID/stat"; }
C0=$(ticks)
curl -sf --max-time 5 --unix-socket "$PD_SOCK" http://localhost/healthz > /dev/null ||
    fail "no /healthz on the unix socket with 600 idle TCP connections"
req PUT /v1/namespaces/ns1/pods/p1 '{"uid":"u1","containers":[]}'
expect_code 201 "write on the unix socket with 600 idle TCP connections"
sleep 3
C1=$(ticks)
# 3 s of a busy loop would be ~300 ticks; two requests take a few
[ $((C1 - C0)) -lt 50 ] || fail "podresd used $((C1 - C0)) ticks of CPU in 3 s while idle"
ok "600 idle TCP connections: $((C1 - C0)) ticks of CPU in 3 s, the unix socket answers"
exec 8>&-
pd_stop
