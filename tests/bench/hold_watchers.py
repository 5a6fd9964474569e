#!/usr/bin/env python3
"""hold_watchers.py SOCK N SECONDS READYFILE - keep N watch streams open on podresd,
draining them; touch READYFILE once every stream delivered its initial list."""
import os
import select
import socket
import sys
import time

path, n, secs, ready = sys.argv[1], int(sys.argv[2]), float(sys.argv[3]), sys.argv[4]
socks, got = [], {}
for i in range(n):
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.connect(path)
    s.sendall(b"GET /v1/watch HTTP/1.1\r\nHost: localhost\r\n\r\n")
    socks.append(s)
    got[s] = b""
end = time.monotonic() + secs
done = False
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
