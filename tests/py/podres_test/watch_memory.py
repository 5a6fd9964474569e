# SPDX-License-Identifier: Apache-2.0
"""python3 -m podres_test.watch_memory SOCK PID NSTOP - test 75's watchers
against podresd PID's watch memory budget, on its unix socket SOCK: one
reading watcher from the current revision; NSTOP watchers that never read
(4 KiB receive buffers), a device PATCH after each is counted by podresd;
then 20 more writes. Checks the reader saw every revision once, in order,
and no ERROR. Prints "MAXRSS_KB WRITES FIRST_REV LAST_REV NEWEST_LIVE
OLDEST_ENDED" for the shell test to judge.
"""
import json
import select
import socket
import sys
import time

from podres_test import client

path, pid, nstop = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])


def call(m, p, body=None, ctype=client.JSON):
    return client.once(path, m, p, body, ctype, timeout=30)


def rss():
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])


st, d = call("GET", "/version")
r0 = json.loads(d)["revision"]
reader = client.dial(path)
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
    s = socket.socket(socket.AF_UNIX)  # its buffer set before the connect
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
evs = [json.loads(l) for l in client.dechunk(got).split(b"\n")[:-1]]
if any(e["type"] == "ERROR" for e in evs):
    sys.exit("the reading watcher got an ERROR: %s" % [e for e in evs if e["type"] == "ERROR"][0])
revs = [e["revision"] for e in evs if e["type"] != "BOOKMARK"]
if revs != list(range(r0 + 1, final + 1)):
    sys.exit("reader: revisions %s..%s (%d), want %d..%d" %
             (revs[:3], revs[-3:], len(revs), r0 + 1, final))


def ended(s):
    s.settimeout(1.0)
    try:
        while s.recv(1 << 16):
            pass
        return True
    except (socket.timeout, ConnectionResetError):
        return False


# The newest three stopped watchers, read first (long before the 30 s
# stall time), must be open; the oldest must have been closed.
live = [i for i in range(nstop - 1, nstop - 4, -1) if not ended(stopped[i])]
print(maxrss, writes, r0 + 1, final, len(live), int(ended(stopped[0])))
