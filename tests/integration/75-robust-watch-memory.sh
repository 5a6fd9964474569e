#!/usr/bin/env bash
# 75-robust-watch-memory.sh - the watchers' memory budget (--watch-memory):
# 80 watchers that never read, each from its own revision (a write between
# opens, so none shares a snapshot) over a node of 2000 devices, with an
# 8 MiB budget. podresd's RSS stays within the budget of its baseline (plus
# slack); the watchers furthest behind are dropped (counted, logged once); a
# watcher that reads sees every revision and is never dropped; the newest
# stopped watchers stay; writes answer 200 throughout.
. "$(dirname "$0")/lib.sh"

START=$SECONDS
NSTOP=80
BUDGET_MIB=8
pd_config "watch_memory: $BUDGET_MIB
history: 4000"
pd_start
python3 -c 'import json; print(json.dumps({"devices": [{"id": "d%04d" % i, "properties": {
    "model": "example-accelerator-a100", "slot": "pci-0000:%02x:00.0" % (i % 256)}}
    for i in range(2000)]}))' > "$T/devs.json"
CODE=$(curl -s -o "$T/out" -w '%{http_code}' -X PUT -H 'Content-Type: application/json' \
    --data-binary @"$T/devs.json" --unix-socket "$PD_SOCK" http://localhost/v1/resources/example.com/dev/devices)
expect_code 200 "register 2000 devices"
rss() { awk '/^VmRSS/ { print $2 }' "/proc/$PD_PID/status"; }
ASAN=
grep -q libasan "/proc/$PD_PID/maps" && ASAN=1
# Warm up: a watcher's snapshot, the pooled read connections, the caches.
for i in 1 2 3; do
    timeout 5 curl -sN --unix-socket "$PD_SOCK" "http://localhost/v1/watch?timeoutSeconds=1" \
        > "$T/snap.out" || true
done
SNAP=$(wc -c < "$T/snap.out")
[ "$SNAP" -gt 300000 ] || fail "a snapshot of $SNAP bytes: the test needs one of a few hundred KB"
sleep 0.5
RSS0=$(rss)

timeout $((120 * MULT)) python3 -m podres_test.watch_memory "$PD_SOCK" "$PD_PID" "$NSTOP" > "$T/wm.out" 2>&1 ||
    fail "watchers: $(tail -5 "$T/wm.out")"
read -r MAXRSS NWRITES FROM TO NEWEST_LIVE OLDEST_ENDED < "$T/wm.out"
ok "$NWRITES writes answered 200; the reading watcher saw revisions $FROM..$TO once each, in order"

# RSS: the budget above the baseline, plus slack for what is not a
# watcher's (the snapshot being built, the feed ring, SQLite's caches).
if [ -n "$ASAN" ]; then
    echo "# RSS not compared: ASan's quarantine holds freed memory"
else
    [ "$MAXRSS" -le $((RSS0 + (BUDGET_MIB + 8) * 1024)) ] ||
        fail "RSS up to $MAXRSS kB with $NSTOP stopped watchers of ${SNAP}-byte snapshots; baseline $RSS0 kB, budget $BUDGET_MIB MiB"
    ok "RSS $RSS0 kB before, at most $MAXRSS kB with $NSTOP stopped watchers (budget $BUDGET_MIB MiB)"
fi

# Dropped: the oldest first; as many as the budget requires, counted and
# logged; the newest kept (the budget holds several snapshots).
FIT=$((BUDGET_MIB * 1048576 / SNAP))
[ "$NEWEST_LIVE" = 3 ] || fail "of the newest three stopped watchers only $NEWEST_LIVE kept"
[ "$OLDEST_ENDED" = 1 ] || fail "the oldest stopped watcher was not dropped"
req GET /metrics
DROPPED=$(awk '/^podresd_watch_dropped_total\{reason="memory"\}/ { print $2 }' "$T/out")
[ -n "$DROPPED" ] && [ "$DROPPED" -ge $((NSTOP - FIT - 2)) ] && [ "$DROPPED" -le "$NSTOP" ] ||
    fail "podresd_watch_dropped_total{reason=\"memory\"} '$DROPPED'; the budget fits $FIT snapshots of $SNAP bytes"
grep -q 'msg="dropped [0-9]* watch streams* over the watch memory budget' "$T/podresd.log" ||
    fail "no log line for the dropped watchers"
NLOG=$(grep -c 'over the watch memory budget' "$T/podresd.log")
[ "$NLOG" -le 3 ] || fail "$NLOG log lines for the dropped watchers: not rate-limited"
ok "$DROPPED of $NSTOP stopped watchers dropped, oldest first, in $NLOG log lines; the newest kept"

# Writes and a new watcher still work.
register example.com/dev '[{"id":"d0000"}]'
timeout 5 curl -sN --unix-socket "$PD_SOCK" "http://localhost/v1/watch?timeoutSeconds=1" > "$T/w.out" || true
grep -q initialEventsEnd "$T/w.out" || fail "a new watcher got no initial list: $(head -c 300 "$T/w.out")"
ok "writes and a new watch work afterwards"
pd_stop
echo "75-robust-watch-memory: $((SECONDS - START)) s"
