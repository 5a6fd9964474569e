#!/usr/bin/env bash
# 63-robust-watch-abuse.sh - the change feed under abuse: 500 concurrent
# watchers (one Python process, non-blocking sockets) while a writer (a
# process of its own) does up to 100 writes/s; one watcher that stops reading is dropped (or left behind)
# without stalling writes or the other watchers, which all see every event;
# 200 slowloris connections are reclaimed within the connection timeout;
# afterwards podresd's fd count and RSS are back near their baseline.
. "$(dirname "$0")/lib.sh"

START=$SECONDS
pd_config "history: 200"   # a small feed ring: its growth is not what RSS should measure
pd_start
register example.com/gpu '[{"id":"g0"},{"id":"g1"}]'
fds() { ls "/proc/$PD_PID/fd" | wc -l; }
rss() { awk '/^VmRSS/ { print $2 }' "/proc/$PD_PID/status"; }
# Warm up: the pooled read connections and caches exist before the baseline.
for i in 1 2 3 4 5; do req GET /v1/pods; req GET /v1/devices; done
timeout 3 curl -sN --unix-socket "$PD_SOCK" "http://localhost/v1/watch?timeoutSeconds=1" > /dev/null || true
threads() { awk '/^Threads/ { print $2 }' "/proc/$PD_PID/status"; }
sleep 0.5
TH0=$(threads) # main, the listeners' polling threads, the checkpointer
# settle - one write (closed watchers notice on their next event), then wait
# for their threads to end.
settle() {
    register example.com/gpu '[{"id":"g0"},{"id":"g1"}]'
    wait_until 15 sh -c "[ \$(awk '/^Threads/ { print \$2 }' /proc/$PD_PID/status) -le $TH0 ]" ||
        fail "threads still $(threads) after the watchers left (baseline $TH0)"
}

# rss_back_to BASE SLACK_KB - wait (up to 25 s: podresd's housekeeping runs
# every 10 s, closing idle read connections and trimming the heap) until RSS
# is at most BASE + SLACK_KB; sets RSSN.
rss_back_to() {
    local i
    for i in $(seq 50); do
        RSSN=$(rss)
        [ "$RSSN" -le $(($1 + $2)) ] && return 0
        sleep 0.5
    done
    return 1
}
ASAN=
grep -q libasan "/proc/$PD_PID/maps" && ASAN=1
# A first burst: what is left once it is over is glibc's cache of thread
# stacks (up to 40 MiB of stack mappings, ~16 KiB resident each) and heap
# fragments, bounded; measured +2 MiB. RSS must come back within 6 MiB of
# the baseline before it, and within 3 MiB of its own plateau after the next.
RSS_PRE=$(rss)
timeout $((60 * MULT)) python3 -m podres_test.watch_abuse "$PD_SOCK" 500 4 100 > "$T/abuse.out" 2>&1 ||
    fail "warm-up burst: $(tail -5 "$T/abuse.out")"
settle
if [ -z "$ASAN" ]; then
    rss_back_to "$RSS_PRE" 6144 || fail "RSS $RSSN kB 25 s after a burst of 500 watchers, before it $RSS_PRE kB"
    ok "RSS $RSS_PRE kB before a burst of 500 watchers, $RSSN kB after"
fi
FD0=$(fds)
RSS0=$(rss)

# Slowloris: 200 connections that never finish their request.
cat > "$T/slow.py" <<'PY'
import socket, sys, time
ss = []
for i in range(200):
    s = socket.socket(socket.AF_UNIX)
    s.connect(sys.argv[1])
    s.sendall(b"PUT /v1/namespaces/ns/pods/p HTTP/1.1\r\nHost: localhost\r\nContent-Le")
    ss.append(s)
time.sleep(float(sys.argv[2]))
closed = 0
for s in ss:
    s.settimeout(0.5)
    try:
        if s.recv(100) == b"":
            closed += 1
    except (socket.timeout, ConnectionResetError):
        pass
print(closed)
PY
python3 "$T/slow.py" "$PD_SOCK" 34 > "$T/slow.out" &
SPID=$!
# A Python start on a loaded machine can take seconds.
slow_open() { [ "$(fds)" -ge $((FD0 + 150)) ]; }
wait_until 10 slow_open || fail "slowloris connections not open? fds $(fds), baseline $FD0"
curl -sf --max-time 5 --unix-socket "$PD_SOCK" http://localhost/healthz > /dev/null ||
    fail "healthz during slowloris"

# 500 watchers and ~100 writes/s, meanwhile.
timeout $((90 * MULT)) python3 -m podres_test.watch_abuse "$PD_SOCK" 500 4 100 > "$T/abuse.out" 2>&1 ||
    fail "watch abuse: $(tail -5 "$T/abuse.out")"
ok "$(cat "$T/abuse.out")"
kill -0 "$PD_PID" || fail "podresd died"

wait "$SPID"
settle
[ "$(cat "$T/slow.out")" = 200 ] || fail "slowloris: $(cat "$T/slow.out") of 200 closed by podresd after 34 s"
ok "200 slowloris connections reclaimed by the 30 s timeout; healthz answered meanwhile"

# Back to baseline (give podresd a moment): fds, allowing for the idle read
# connections the store pools (at most 16, two fds each), and RSS within 32 MiB (see below).
wait_until 15 sh -c "[ \$(ls /proc/$PD_PID/fd | wc -l) -le $((FD0 + 32)) ]" ||
    fail "fds $(fds), baseline $FD0: $(ls -l /proc/$PD_PID/fd | tail -5)"
RSS1=$(rss)
if [ -n "$ASAN" ]; then
    echo "# RSS not compared: ASan's quarantine holds freed memory"
else
    rss_back_to "$RSS0" 3072 || fail "RSS $RSSN kB 25 s after the abuse, baseline $RSS0 kB"
    RSS1=$RSSN
fi
ok "fds $FD0 -> $(fds); RSS $RSS0 -> $RSS1 kB"
pd_stop
echo "63-robust-watch-abuse: $((SECONDS - START)) s"
