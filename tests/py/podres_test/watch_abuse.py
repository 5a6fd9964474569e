# SPDX-License-Identifier: Apache-2.0
"""python3 -m podres_test.watch_abuse SOCK NWATCH SECONDS RATE - test 63's
change feed under abuse, on podresd's unix socket SOCK: NWATCH watchers from
the current revision (one process, non-blocking sockets), one stalled
watcher, a writer (a process of its own) at RATE writes/s for SECONDS; then
checks every watcher saw every write's revision, once each, in order, and
no write waited on the stalled watcher. Prints a summary; exits non-zero
with the reason otherwise.
"""
import json
import os
import selectors
import socket
import sys
import time

from podres_test import client

sock, nwatch, secs, rate = sys.argv[1], int(sys.argv[2]), float(sys.argv[3]), int(sys.argv[4])


def call(m, p, body=None):
    # 500 tries: the listen backlog fills while 500 watchers connect
    return client.once(sock, m, p, body, timeout=5, retries=500)


def connect():
    return client.dial(sock, None, retries=500)


st, d = call("GET", "/version")
r0 = json.loads(d)["revision"]
sel = selectors.DefaultSelector()
bufs = {}
req = b"GET /v1/watch?since=%d HTTP/1.1\r\nHost: localhost\r\n\r\n" % r0
for i in range(nwatch):
    s = connect()
    s.sendall(req)
    s.setblocking(False)
    sel.register(s, selectors.EVENT_READ, i)
    bufs[i] = bytearray()
stalled = connect()
stalled.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
stalled.sendall(req)


def pump(limit):
    for key, _ in sel.select(limit):
        try:
            d = key.fileobj.recv(65536)
        except BlockingIOError:
            continue
        if not d:
            sel.unregister(key.fileobj)
            continue
        bufs[key.data] += d


# The writer is a process of its own, paced at RATE writes/s, so that
# pumping 500 sockets here does not slow it down; it reports its count and
# worst latency through a pipe.
big = "x" * 200
rfd, wfd = os.pipe()
t0 = time.time()
pid = os.fork()
if pid == 0:
    os.close(rfd)
    n, worst, code = 0, 0.0, 0
    while n < secs * rate:
        n += 1
        w0 = time.time()
        st, _ = call("PUT", "/v1/resources/example.com/gpu/devices",
                     json.dumps({"devices": [{"id": "g0", "properties": {"n": str(n), "pad": big}},
                                             {"id": "g1"}]}))
        worst = max(worst, time.time() - w0)
        if st != 200:
            code = st
            break
        pause = t0 + n / rate - time.time()
        if pause > 0:
            time.sleep(pause)
    os.write(wfd, b"%d %f %d %f" % (n, worst, code, time.time() - t0))
    os._exit(0)
os.close(wfd)
while os.waitpid(pid, os.WNOHANG) == (0, 0):
    pump(0.002)
n, worst, code, wtook = os.read(rfd, 100).split()
n, worst, code, wtook = int(n), float(worst), int(code), float(wtook)
if code:
    sys.exit("write %d: HTTP %d" % (n, code))
# The pace is a target, not a check: a slow or shared machine (the
# sanitizer build, a CI runner) falls behind it, and that says nothing about
# podresd. What the stalled watcher must not do is hold a write up: "worst"
# below. Every write of the run was made and answered 200 (above).
st, d = call("GET", "/version")
final = json.loads(d)["revision"]
deadline = time.time() + 20


def complete(b):
    return (b'"revision":%d,"object"' % final) in b


while time.time() < deadline and not all(complete(b) for b in bufs.values()):
    pump(0.05)
behind = [i for i, b in bufs.items() if not complete(b)]
if behind:
    sys.exit("%d watchers did not see revision %d" % (len(behind), final))
# Each watcher: revisions r0+1..final once each, in order.
want = list(range(r0 + 1, final + 1))
for i, b in bufs.items():
    revs = [ev["revision"] for ev in map(json.loads, client.dechunk(b).split(b"\n")[:-1])
            if ev["type"] != "BOOKMARK"]
    if revs != want:
        sys.exit("watcher %d: revisions %s.. != %d..%d" % (i, revs[:5], r0 + 1, final))
print("%d writes in %.1f s (%.0f/s, worst %.0f ms), %d watchers saw revisions %d..%d" %
      (n, wtook, n / wtook, worst * 1000, nwatch, r0 + 1, final))
if worst > 2.0:
    sys.exit("a write took %.1f s: the stalled watcher stalls writers" % worst)
for key in list(sel.get_map().values()):
    key.fileobj.close()
stalled.close()
