#!/usr/bin/env python3
"""hist_query.py SOCK N DEVICES START_MS END_MS - N keep-alive GETs each of
/version, /v1/history?device=gpu-R&resource=bench.io/gpu&from=T&to=T+1d and
/v1/history?at=T (R and T random, T in [START_MS, END_MS - 1d]), interleaved,
through one connection; prints p50 and p99 ms of each: version_p50= ...
device_p50= ... at_p50= ... and the intervals the last answers held."""
import random
import sys
import time
import pdhttp

sock, n, ndev, lo, hi = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5])
c = pdhttp.UnixConn(sock, timeout=30)
rnd = random.Random(42)


def rfc(ms):
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(ms // 1000)) + ".%03dZ" % (ms % 1000)


lat = {"version": [], "device": [], "at": []}
seen = {}
for i in range(n):
    t = rnd.randrange(lo, hi - 86400000)
    paths = {"version": "/version",
             "device": "/v1/history?device=gpu-%d&resource=bench.io/gpu&from=%s&to=%s" % (
                 rnd.randrange(ndev), rfc(t), rfc(t + 86400000)),
             "at": "/v1/history?at=%s" % rfc(t)}
    for k, p in paths.items():
        s = time.perf_counter()
        st, doc = pdhttp.call(c, "GET", p)
        lat[k].append((time.perf_counter() - s) * 1000)
        assert st == 200, (st, p, doc)
        if k != "version":
            seen[k] = len(doc["intervals"])
out = []
for k, v in lat.items():
    v.sort()
    out.append("%s_p50=%.3f %s_p99=%.3f" % (k, v[len(v) // 2], k, v[min(len(v) - 1, len(v) * 99 // 100)]))
print(" ".join(out), "device_n=%d at_n=%d" % (seen["device"], seen["at"]))
