#!/usr/bin/env python3
"""syncer_lag.py setup|churn|curlref - podres-syncer benchmarks against the emulator.

setup SOCK EMU NODE N      N pods in the emulator and bound in podresd; waits (<= 60 s)
                           until the emulator holds N Bound DeviceBindings.
churn SOCK EMU NODE TAG K RATE
                           K pod lifecycles (bind, release 0.5 s later) at RATE changes/s;
                           lag = podresd answer of the write -> the emulator's watch event
                           (Bound status / DELETED). Prints p50/p99 ms and API requests per
                           lifecycle (non-list/watch requests on devicebindings).
"""
import json
import ssl
import sys
import threading
import time
import urllib.parse
import http.client

import pdhttp

GROUP = "/apis/podres.dev/v1alpha1"


def emu_conn(url):
    u = urllib.parse.urlparse(url)
    if u.scheme == "https":  # the emulator's throw-away certificate: not verified here
        return http.client.HTTPSConnection(u.hostname, u.port, timeout=30,
                                           context=ssl._create_unverified_context())
    return http.client.HTTPConnection(u.hostname, u.port, timeout=30)


def emu_pod(e, ns, name, node):
    pdhttp.call(e, "POST", "/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace",
                                                  "metadata": {"name": ns}})
    st, doc = pdhttp.call(e, "POST", "/api/v1/namespaces/%s/pods" % ns, {
        "apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": ns},
        "spec": {"nodeName": node, "containers": [{"name": "main", "image": "x"}]}})
    if st == 409:
        st, doc = pdhttp.call(e, "GET", "/api/v1/namespaces/%s/pods/%s" % (ns, name))
    assert st in (200, 201), (st, doc)
    return doc["metadata"]["uid"]


def pct(v, p):
    v = sorted(v)
    return v[int(p * (len(v) - 1) + 0.5)] if v else float("nan")


def setup(sock, emu, node, n):
    e = emu_conn(emu)
    c = pdhttp.UnixConn(sock)
    devices, pods = pdhttp.node_pods(n)
    st, doc = pdhttp.call(c, "PUT", "/v1/resources/bench.io/gpu/devices", {"devices": devices})
    assert st == 200, (st, doc)
    for ns, name, _, conts in pods:
        uid = emu_pod(e, ns, name, node)
        st, doc = pdhttp.call(c, "PUT", "/v1/namespaces/%s/pods/%s" % (ns, name),
                              {"uid": uid, "containers": conts})
        assert st in (200, 201), (st, doc)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        st, doc = pdhttp.call(e, "GET", GROUP + "/devicebindings")
        bound = sum(1 for i in doc["items"] if i.get("status", {}).get("phase") == "Bound")
        if bound >= n:
            print("devicebindings=%d" % bound)
            return 0
        time.sleep(0.2)
    print("devicebindings=%d (timeout)" % bound)
    return 1


def churn(sock, emu, node, tag, k, rate):
    e = emu_conn(emu)
    c = pdhttp.UnixConn(sock)
    ns = "lc-%s" % tag
    st, doc = pdhttp.call(c, "PUT", "/v1/resources/bench.io/lc%s/devices" % tag,
                          {"devices": [{"id": "x%d" % i} for i in range(k)]})
    assert st == 200, (st, doc)
    uids = [emu_pod(e, ns, "p%d" % i, node) for i in range(k)]
    st, doc = pdhttp.call(e, "GET", GROUP + "/namespaces/%s/devicebindings" % ns)
    rv = doc["metadata"]["resourceVersion"]
    seen = {}  # (name, "bound"|"deleted") -> time
    stop = threading.Event()

    def watch():
        w = emu_conn(emu)
        w.request("GET", GROUP + "/namespaces/%s/devicebindings?watch=1&resourceVersion=%s" % (ns, rv))
        r = w.getresponse()
        while not stop.is_set():
            line = r.readline()
            if not line:
                break
            t = time.monotonic()
            try:
                ev = json.loads(line)
            except ValueError:
                continue
            if not isinstance(ev, dict):
                continue
            o = ev.get("object", {})
            name = o.get("metadata", {}).get("name")
            if ev.get("type") == "DELETED":
                seen.setdefault((name, "deleted"), t)
            elif o.get("status", {}).get("phase") == "Bound":
                seen.setdefault((name, "bound"), t)
            elif name and name.startswith("ref-"):
                seen.setdefault((name, "ref"), t)

    th = threading.Thread(target=watch, daemon=True)
    th.start()
    time.sleep(0.5)
    # reference: a bare POST to the emulator -> its own watch event
    ref = []
    for i in range(10):
        t = time.monotonic()
        st, doc = pdhttp.call(e, "POST", GROUP + "/namespaces/%s/devicebindings" % ns, {
            "apiVersion": "podres.dev/v1alpha1", "kind": "DeviceBinding",
            "metadata": {"name": "ref-%d" % i, "namespace": ns}, "spec": {"nodeName": "nowhere"}})
        assert st == 201, (st, doc)
        end = t + 5
        while ("ref-%d" % i, "ref") not in seen and time.monotonic() < end:
            time.sleep(0.001)
        if ("ref-%d" % i, "ref") in seen:
            ref.append((seen[("ref-%d" % i, "ref")] - t) * 1000)
    pdhttp.call(e, "DELETE", "/_emulator/counters")
    committed = {}
    step = 1.0 / rate
    t0 = time.monotonic()
    events = []
    for i in range(k):   # bind p_i at 2i, release p_i at 2i+10 (0.5 s later at 20/s)
        events.append((2 * i, "bind", i))
        events.append((2 * i + 11, "release", i))
    events.sort()
    for slot, what, i in events:
        wait = t0 + slot * step - time.monotonic()
        if wait > 0:
            time.sleep(wait)
        if what == "bind":
            st, doc = pdhttp.call(c, "PUT", "/v1/namespaces/%s/pods/p%d" % (ns, i), {
                "uid": uids[i], "containers": [{"name": "main", "devices": [
                    {"resourceName": "bench.io/lc%s" % tag, "deviceIds": ["x%d" % i]}]}]})
            assert st in (200, 201), (st, doc)
            committed[("p%d" % i, "bound")] = time.monotonic()
        else:
            st, doc = pdhttp.call(c, "DELETE", "/v1/namespaces/%s/pods/p%d" % (ns, i))
            assert st == 200, (st, doc)
            committed[("p%d" % i, "deleted")] = time.monotonic()
    deadline = time.monotonic() + 15
    while time.monotonic() < deadline and not all(key in seen for key in committed):
        time.sleep(0.05)
    time.sleep(1.0)  # let late writes be counted
    stop.set()
    lags = [(seen[key] - t) * 1000 for key, t in committed.items() if key in seen]
    missing = len(committed) - len(lags)
    st, doc = pdhttp.call(e, "GET", "/_emulator/counters")
    reqs = sum(r["count"] for r in doc["requests"]
               if "devicebindings" in r["resource"] and r["verb"] not in ("list", "watch"))
    print("changes=%d missing=%d p50=%.1f p99=%.1f requests=%d per_lifecycle=%.2f "
          "emu_watch_p50=%.1f secs=%.1f" % (
        len(committed), missing, pct(lags, 0.5), pct(lags, 0.99), reqs, reqs / k, pct(ref, 0.5),
        time.monotonic() - t0))
    return 1 if missing else 0


if __name__ == "__main__":
    a = sys.argv
    if a[1] == "setup":
        sys.exit(setup(a[2], a[3], a[4], int(a[5])))
    sys.exit(churn(a[2], a[3], a[4], a[5], int(a[6]), float(a[7])))
