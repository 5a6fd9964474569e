#!/usr/bin/env python3
"""populate.py SOCK node|fill N - write the bench state into podresd.
node: 110 pods x 2 containers x up to 8 devices (bench.io/gpu).
fill N: N devices bench.io/d and N single-device bindings (restart bench)."""
import sys
import pdhttp

sock, what = sys.argv[1], sys.argv[2]
c = pdhttp.UnixConn(sock, timeout=30)
if what == "node":
    devices, pods = pdhttp.node_pods(int(sys.argv[3]) if len(sys.argv) > 3 else 110)
    st, doc = pdhttp.call(c, "PUT", "/v1/resources/bench.io/gpu/devices", {"devices": devices})
    assert st == 200, (st, doc)
    for ns, name, uid, conts in pods:
        st, doc = pdhttp.call(c, "PUT", "/v1/namespaces/%s/pods/%s" % (ns, name),
                              {"uid": uid, "containers": conts})
        assert st in (200, 201), (st, doc)
    print("devices=%d pods=%d" % (len(devices), len(pods)))
elif what == "fill":
    n = int(sys.argv[3])
    per = 4000  # podresd takes at most 4096 devices per resource
    for r in range(0, n, per):
        st, doc = pdhttp.call(c, "PUT", "/v1/resources/bench.io/d%d/devices" % (r // per),
                              {"devices": [{"id": "d%05d" % i} for i in range(r, min(n, r + per))]})
        assert st == 200, (st, doc)
    for i in range(n):
        st, doc = pdhttp.call(c, "PUT", "/v1/namespaces/fill/pods/b%05d" % i,
                              {"uid": "u%d" % i, "containers": [{"name": "main", "devices": [
                                  {"resourceName": "bench.io/d%d" % (i // per), "deviceIds": ["d%05d" % i]}]}]})
        assert st in (200, 201), (st, doc)
    print("bindings=%d" % n)
elif what == "devs":
    n = int(sys.argv[3])
    st, doc = pdhttp.call(c, "PUT", "/v1/resources/bench.io/dev/devices",
                          {"devices": [{"id": "c%d-%d" % (i, j)} for i in range(n) for j in range(2)]})
    assert st == 200, (st, doc)
