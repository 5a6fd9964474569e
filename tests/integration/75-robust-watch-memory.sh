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

cat > "$T/watchmem.py" <<'PY'
# watchmem.py SOCK PID NSTOP - one reading watcher from the current revision;
# NSTOP watchers that never read (4 KiB receive buffers), a device PATCH
# after each is counted by podresd; then 20 more writes. Checks the reader
# saw every revision once, in order, and no ERROR. Prints
# "MAXRSS_KB WRITES FIRST_REV LAST_REV NEWEST_LIVE OLDEST_ENDED".
import json, os, select, socket, sys, time, http.client

path, pid, nstop = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])

class Conn(http.client.HTTPConnection):
    def connect(self):
        self.sock = socket.socket(socket.AF_UNIX)
        self.sock.settimeout(30)
        self.sock.connect(path)

def call(m, p, body=None, ctype="application/json"):
    c = Conn("localhost")
    c.request(m, p, body, {"Content-Type": ctype} if body else {})
    r = c.getresponse()
    d = r.read()
    c.close()
    return r.status, d

def rss():
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])

st, d = call("GET", "/version")
r0 = json.loads(d)["revision"]
reader = socket.socket(socket.AF_UNIX)
reader.connect(path)
reader.sendall(b"GET /v1/watch?since=%d HTTP/1.1\r\nHost: localhost\r\n\r\n" % r0)
reader.setblocking(False)
got = bytearray()

def pump():
    while True:
        try:
            d = reader.recv(1 << 16)
        except BlockingIOError:
            return
        if not d:
            sys.exit("the reading watcher was closed")
        got.extend(d)

writes = 0
def write(i):
    global writes
    st, d = call("PATCH", "/v1/resources/example.com/dev/devices/d%04d" % (i % 2000),
                 json.dumps({"health": "Unhealthy"}), "application/merge-patch+json")
    if st != 200:
        sys.exit("write %d: HTTP %d %s" % (i, st, d[:200]))
    writes += 1

maxrss, stopped = rss(), []
for i in range(nstop):
    s = socket.socket(socket.AF_UNIX)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    s.connect(path)
    s.sendall(b"GET /v1/watch HTTP/1.1\r\nHost: localhost\r\n\r\n")
    stopped.append(s)
    # Readable once podresd wrote its head, after it took the snapshot: the
    # next write gives the next watcher a revision of its own.
    r, _, _ = select.select([s], [], [], 20)
    if not r:
        sys.exit("stopped watcher %d: no answer in 20 s" % i)
    write(i)
    pump()
    maxrss = max(maxrss, rss())
for i in range(20):
    write(nstop + i)
    pump()
    maxrss = max(maxrss, rss())
st, d = call("GET", "/version")
final = json.loads(d)["revision"]
deadline = time.time() + 30
while b'"revision":%d,"object"' % final not in got and time.time() < deadline:
    pump()
    time.sleep(0.01)

def dechunk(b):
    head, rest = bytes(b).split(b"\r\n\r\n", 1)
    out = bytearray()
    while True:
        nl = rest.find(b"\r\n")
        if nl < 0:
            return bytes(out)
        n = int(rest[:nl].split(b";")[0], 16)
        if n == 0 or len(rest) < nl + 2 + n:
            return bytes(out)
        out += rest[nl + 2:nl + 2 + n]
        rest = rest[nl + 4 + n:]

evs = [json.loads(l) for l in dechunk(got).split(b"\n")[:-1]]
if any(e["type"] == "ERROR" for e in evs):
    sys.exit("the reading watcher got an ERROR: %s" % [e for e in evs if e["type"] == "ERROR"][0])
revs = [e["revision"] for e in evs if e["type"] != "BOOKMARK"]
if revs != list(range(r0 + 1, final + 1)):
    sys.exit("reader: revisions %s..%s (%d), want %d..%d" %
             (revs[:3], revs[-3:], len(revs), r0 + 1, final))
# The newest three stopped watchers, read first (long before the 30 s
# stall time), must be open; the oldest must have been closed.
def ended(s):
    s.settimeout(1.0)
    try:
        while s.recv(1 << 16):
            pass
        return True
    except (socket.timeout, ConnectionResetError):
        return False
live = [i for i in range(nstop - 1, nstop - 4, -1) if not ended(stopped[i])]
print(maxrss, writes, r0 + 1, final, len(live), int(ended(stopped[0])))
PY
timeout $((120 * MULT)) python3 "$T/watchmem.py" "$PD_SOCK" "$PD_PID" "$NSTOP" > "$T/wm.out" 2>&1 ||
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
