#!/usr/bin/env bash
# 72-robust-scarce.sh - podresd short of descriptors and of memory.
# Descriptors: podresd's limit is lowered to 200 once it runs (its budgets
# were sized for more: as when something else takes them), then 400 idle
# TCP connections are opened; the unix socket still answers /healthz and a
# write, and podresd's CPU stays low (libmicrohttpd retries a failed accept
# at once). Memory: podresd's address space is capped a little above what it
# uses (RLIMIT_AS, as ulimit -v), so a connection's thread cannot start and
# allocations fail; 24 clients at once on the unix socket each get an
# answer, 200 or a 503 Status, never a closed connection; after the cap is
# lifted requests are served again.
. "$(dirname "$0")/lib.sh"

ticks() { awk '{ print $14 + $15 }' "/proc/$PD_PID/stat"; }

pd_start
register example.com/gpu '[{"id":"g0"}]'

# ---- descriptors
prlimit --pid "$PD_PID" --nofile=200:4096 || fail "cannot lower podresd's descriptor limit"
mkfifo "$T/hold"
python3 -m podres_test.idle "$PD_PORT" 400 < "$T/hold" > "$T/idle.out" &
PIDS+=("$!")
exec 8> "$T/hold"
wait_until 30 test -s "$T/idle.out" || fail "the idle connections were not made"
sleep 1
[ "$(ls "/proc/$PD_PID/fd" | wc -l)" -ge 190 ] || fail "podresd holds only $(ls "/proc/$PD_PID/fd" | wc -l) descriptors: the limit was not reached"
C0=$(ticks)
curl -sf --max-time 5 --unix-socket "$PD_SOCK" http://localhost/healthz > /dev/null ||
    fail "no /healthz on the unix socket at the descriptor limit"
CODE=$(curl -s -o "$T/out" -w '%{http_code}' --max-time 5 -X PUT --unix-socket "$PD_SOCK" \
    -H 'Content-Type: application/json' --data-binary '{"uid":"u1","containers":[]}' \
    http://localhost/v1/namespaces/ns1/pods/p1) || true
expect_code 201 "a write on the unix socket at the descriptor limit"
sleep 3
C1=$(ticks)
# 3 s of a core are 300 ticks
[ $((C1 - C0)) -lt 90 ] || fail "podresd used $((C1 - C0)) ticks of CPU in 3 s at the descriptor limit"
ok "at the descriptor limit: $((C1 - C0)) ticks of CPU in 3 s, the unix socket answers /healthz and writes"
exec 8>&-
prlimit --pid "$PD_PID" --nofile=4096:4096 || fail "cannot raise the descriptor limit again"
wait_until 10 curl -sf --max-time 2 "http://127.0.0.1:$PD_PORT/healthz" ||
    fail "TCP not served again after the descriptors came back"
# (a read that opens a database connection needs descriptors: only now)
curl -s --unix-socket "$PD_SOCK" http://localhost/metrics > "$T/metrics"
grep -Eq '^podresd_accept_fd_exhausted_total [1-9]' "$T/metrics" ||
    fail "no accept counted in podresd_accept_fd_exhausted_total: $(grep fd_exhausted "$T/metrics")"
grep -q "cannot accept a connection" "$T/podresd.log" || fail "the descriptor shortage was not logged"
[ "$(grep -c "cannot accept a connection" "$T/podresd.log")" = 1 ] ||
    fail "the descriptor shortage was logged $(grep -c "cannot accept a connection" "$T/podresd.log") times, want once"
ok "TCP served again once descriptors are free; the shortage counted and logged once"
pd_stop

# ---- memory: an address-space cap a little above what podresd maps
rm -f "$T/podresd.log"
pd_start
cat > "$T/clients.py" <<'PY'
import json, sys, time
from podres_test.client import dial

path, port, n = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
socks = []
for i in range(n):  # all connected first: each would need a thread at once
    socks.append(("unix", dial(path), b"GET /healthz HTTP/1.1\r\nHost: localhost\r\n\r\n"))
    socks.append(("tcp", dial(port), b"GET /v1/pods HTTP/1.1\r\nHost: localhost\r\n\r\n"))
time.sleep(0.5)
codes, bad = {}, []
for kind, s, req in socks:
    try:
        s.sendall(req)
    except OSError:
        pass  # refused before the request: the answer is already in
    s.settimeout(10)
    data = b""
    try:
        while b"\r\n\r\n" not in data or len(data) < data.index(b"\r\n\r\n") + 4 + int(
                [l for l in data.split(b"\r\n") if l.lower().startswith(b"content-length:")][0]
                .split(b":")[1]):
            d = s.recv(65536)
            if not d:
                break
            data += d
    except (OSError, IndexError) as e:
        bad.append("%s: %r after %r" % (kind, e, data[:100]))
        continue
    if not data.startswith(b"HTTP/1.1 "):
        bad.append("%s: no answer: %r" % (kind, data[:100]))
        continue
    code = int(data[9:12])
    body = data.split(b"\r\n\r\n", 1)[1]
    if code != 200:
        try:
            st = json.loads(body)
            assert st["kind"] == "Status" and st["code"] == code, st
        except Exception as e:
            bad.append("%s: %d without a Status: %r" % (kind, code, body[:200]))
            continue
    codes[(kind, code)] = codes.get((kind, code), 0) + 1
print(" ".join("%s:%d=%d" % (k, c, v) for (k, c), v in sorted(codes.items())))
for b in bad:
    print("BAD", b)
PY
VM=$(awk '/^VmSize/ { print $2 }' "/proc/$PD_PID/status")
prlimit --pid "$PD_PID" --as=$(( (VM + 4096) * 1024 )):unlimited || fail "cannot cap podresd's address space"
python3 "$T/clients.py" "$PD_SOCK" "$PD_PORT" 24 > "$T/clients.out" 2>&1 || fail "clients: $(cat "$T/clients.out")"
prlimit --pid "$PD_PID" --as=unlimited:unlimited || fail "cannot lift the address-space cap"
! grep -q BAD "$T/clients.out" || fail "answers that are not a Status: $(cat "$T/clients.out")"
grep -q "unix:503=" "$T/clients.out" || fail "no request failed under the cap (want some 503): $(cat "$T/clients.out")"
ok "under an address-space cap of $((VM / 1024 + 4)) MiB every answer is 200 or a 503 Status: $(cat "$T/clients.out")"
req PUT /v1/namespaces/ns1/pods/p2 '{"uid":"u2","containers":[]}'
expect_code 201 "a write once the cap is lifted"
curl -s --unix-socket "$PD_SOCK" http://localhost/metrics > "$T/metrics"
grep -Eq '^podresd_out_of_memory_total [1-9]' "$T/metrics" ||
    fail "no failure counted in podresd_out_of_memory_total: $(grep out_of_memory "$T/metrics")"
[ "$(grep -c "out of memory" "$T/podresd.log")" = 1 ] ||
    fail "out of memory logged $(grep -c "out of memory" "$T/podresd.log") times, want once"
ok "served again once the cap is lifted; the failures counted and logged once"
pd_stop
