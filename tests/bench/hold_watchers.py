#!/usr/bin/env python3
"""hold_watchers.py SOCK N SECONDS READYFILE [stopped] - keep N watch streams open on
podresd, draining them; touch READYFILE once every stream delivered its initial list.
With "stopped" the streams are never read: READYFILE is touched once podresd counts
N watchers (podresd_watchers in /metrics)."""
import resource
import select
import socket
import sys
import time

import pdhttp

path, n, secs, ready = sys.argv[1], int(sys.argv[2]), float(sys.argv[3]), sys.argv[4]
stopped = len(sys.argv) > 5 and sys.argv[5] == "stopped"
soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
resource.setrlimit(resource.RLIMIT_NOFILE, (max(soft, min(hard, n + 64)), hard))


def watchers():
    return int(pdhttp.client.metrics(path).get("podresd_watchers", -1))


socks, got = [], {}
for i in range(n):
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    if stopped:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    s.connect(path)
    s.sendall(b"GET /v1/watch HTTP/1.1\r\nHost: localhost\r\n\r\n")
    socks.append(s)
    got[s] = b""
end = time.monotonic() + secs
done = False
while stopped and time.monotonic() < end:
    if not done and watchers() >= n:
        done = True
        open(ready, "w").close()
    time.sleep(0.2)
while time.monotonic() < end:
    r, _, _ = select.select(socks, [], [], 0.2)
    for s in r:
        d = s.recv(1 << 16)
        if not d:
            sys.exit("watch stream ended")
        if not done:
            got[s] = (got[s] + d)[-4096:]
    if not done and all(b"initialEventsEnd" in v for v in got.values()):
        done = True
        open(ready, "w").close()
