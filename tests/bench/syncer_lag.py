#!/usr/bin/env python3
"""syncer_lag.py setup|churn - podres-syncer benchmarks against a real control plane.

KDIR is a control plane of tests/kube/cluster (KDIR/env, KDIR/pki/, the audit log
KDIR/audit.log); this script talks to its API server as the cluster admin (the client
certificate KDIR/pki/admin.crt, trusting KDIR/pki/ca.crt alone). There is no kubelet:
pods are created with spec.nodeName, in namespaces whose `default` ServiceAccount
exists, and stay Pending.

setup SOCK KDIR NODE N     N pods in the API server and bound in podresd; waits (<= 60 s)
                           until the API server holds N Bound DeviceBindings.
churn SOCK KDIR NODE TAG K RATE
                           K pod lifecycles (bind, release 0.5 s later) at RATE changes/s;
                           lag = podresd answer of the write -> the event on a watch of the
                           namespace's DeviceBindings (Bound status / DELETED). Prints p50/p99
                           ms and the syncer's API requests per lifecycle: the audit log's
                           completed requests of the syncer's ServiceAccount on devicebindings
                           (status included), other than list and watch, during the churn.
                           api_watch_p50: a bare POST of a DeviceBinding by this script ->
                           its own watch event (the API server's own write-to-watch time).
"""
import collections
import http.client
import json
import os
import ssl
import sys
import threading
import time
import urllib.parse

import pdhttp

GROUP = "/apis/podres.dev/v1alpha1"
SYNCER_USER = "system:serviceaccount:podres-system:podres-syncer"


def kube_env(kdir):
    env = {}
    with open(os.path.join(kdir, "env")) as f:
        for line in f:
            k, sep, v = line.strip().partition("=")
            if sep:
                env[k] = v
    return env


class Kube:
    """The API server of KDIR, as the cluster admin (client certificate)."""

    def __init__(self, kdir):
        self.env = kube_env(kdir)
        u = urllib.parse.urlparse(self.env["KUBE_SERVER"])
        self.host, self.port = u.hostname, u.port
        self.ctx = ssl.create_default_context(cafile=os.path.join(kdir, "pki", "ca.crt"))
        self.ctx.load_cert_chain(os.path.join(kdir, "pki", "admin.crt"),
                                 os.path.join(kdir, "pki", "admin.key"))
        self.audit = self.env["KUBE_AUDIT"]

    def conn(self, timeout=30):
        return http.client.HTTPSConnection(self.host, self.port, timeout=timeout, context=self.ctx)


def kube_ns(e, ns):
    """Namespace NS (if needed) and its default ServiceAccount, which Pod admission needs
    (kube-controller-manager creates it a moment after the namespace)."""
    st, doc = pdhttp.call(e, "POST", "/api/v1/namespaces", {
        "apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}})
    assert st in (201, 409), (st, doc)
    deadline = time.monotonic() + 30
    while True:
        st, doc = pdhttp.call(e, "GET", "/api/v1/namespaces/%s/serviceaccounts/default" % ns)
        if st == 200:
            return
        assert time.monotonic() < deadline, "namespace %s has no default ServiceAccount" % ns
        time.sleep(0.1)


def kube_pod(e, ns, name, node):
    """A Pod on NODE (no kubelet: it stays Pending); returns its uid."""
    st, doc = pdhttp.call(e, "POST", "/api/v1/namespaces/%s/pods" % ns, {
        "apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": ns},
        "spec": {"nodeName": node, "automountServiceAccountToken": False,
                 "containers": [{"name": "main", "image": "registry.invalid/x"}]}})
    if st == 409:
        st, doc = pdhttp.call(e, "GET", "/api/v1/namespaces/%s/pods/%s" % (ns, name))
    assert st in (200, 201), (st, doc)
    return doc["metadata"]["uid"]


def pct(v, p):
    v = sorted(v)
    return v[int(p * (len(v) - 1) + 0.5)] if v else float("nan")


def setup(sock, kdir, node, n):
    kube = Kube(kdir)
    e = kube.conn()
    c = pdhttp.UnixConn(sock)
    devices, pods = pdhttp.node_pods(n)
    st, doc = pdhttp.call(c, "PUT", "/v1/resources/bench.io/gpu/devices", {"devices": devices})
    assert st == 200, (st, doc)
    for ns in sorted({p[0] for p in pods}):
        kube_ns(e, ns)
    for ns, name, _, conts in pods:
        uid = kube_pod(e, ns, name, node)
        st, doc = pdhttp.call(c, "PUT", "/v1/namespaces/%s/pods/%s" % (ns, name),
                              {"uid": uid, "containers": conts})
        assert st in (200, 201), (st, doc)
    deadline = time.monotonic() + 60
    bound = 0
    while time.monotonic() < deadline:
        st, doc = pdhttp.call(e, "GET", GROUP + "/devicebindings")
        assert st == 200, (st, doc)
        bound = sum(1 for i in doc["items"] if (i.get("status") or {}).get("phase") == "Bound")
        if bound >= n:
            print("devicebindings=%d" % bound)
            return 0
        time.sleep(0.2)
    print("devicebindings=%d (timeout)" % bound)
    return 1


def syncer_requests(path, offset):
    """The syncer's completed requests on devicebindings (status included) other than
    list and watch, in the audit log from byte OFFSET on: (count, {verb: n}, errors)."""
    verbs = collections.Counter()
    errors = 0
    with open(path, "rb") as f:
        f.seek(offset)
        for line in f:
            try:
                ev = json.loads(line)
            except ValueError:
                continue
            if ev.get("stage") != "ResponseComplete" or \
                    (ev.get("user") or {}).get("username") != SYNCER_USER or \
                    (ev.get("objectRef") or {}).get("resource") != "devicebindings" or \
                    ev.get("verb") in ("list", "watch"):
                continue
            verbs[ev["verb"]] += 1
            if (ev.get("responseStatus") or {}).get("code", 0) >= 400:
                errors += 1
    return sum(verbs.values()), verbs, errors


def churn(sock, kdir, node, tag, k, rate):
    kube = Kube(kdir)
    e = kube.conn()
    c = pdhttp.UnixConn(sock)
    ns = "lc-%s" % tag
    st, doc = pdhttp.call(c, "PUT", "/v1/resources/bench.io/lc%s/devices" % tag,
                          {"devices": [{"id": "x%d" % i} for i in range(k)]})
    assert st == 200, (st, doc)
    kube_ns(e, ns)
    uids = [kube_pod(e, ns, "p%d" % i, node) for i in range(k)]
    st, doc = pdhttp.call(e, "GET", GROUP + "/namespaces/%s/devicebindings" % ns)
    assert st == 200, (st, doc)
    rv = doc["metadata"]["resourceVersion"]
    seen = {}  # (name, "bound"|"deleted"|"ref") -> time
    stop = threading.Event()
    opened = threading.Event()

    def watch():
        w = kube.conn(timeout=60)
        w.request("GET", GROUP + "/namespaces/%s/devicebindings?watch=1&resourceVersion=%s"
                  "&timeoutSeconds=300" % (ns, rv))
        r = w.getresponse()
        assert r.status == 200, r.status
        opened.set()
        try:
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
                o = ev.get("object") or {}
                name = (o.get("metadata") or {}).get("name")
                if ev.get("type") == "DELETED":
                    seen.setdefault((name, "deleted"), t)
                elif (o.get("status") or {}).get("phase") == "Bound":
                    seen.setdefault((name, "bound"), t)
                elif name and name.startswith("ref-"):
                    seen.setdefault((name, "ref"), t)
        except (OSError, http.client.HTTPException):
            pass

    th = threading.Thread(target=watch, daemon=True)
    th.start()
    assert opened.wait(10), "the watch did not open"
    time.sleep(0.5)
    # reference: a bare POST of a DeviceBinding -> its own watch event
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
    time.sleep(0.2)
    audit0 = os.path.getsize(kube.audit)
    committed = {}
    step = 1.0 / rate
    t0 = time.monotonic()
    events = []
    for i in range(k):   # bind p_i at 2i, release p_i at 2i+11 (0.55 s later at 20/s)
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
    secs = time.monotonic() - t0
    time.sleep(1.0)  # let late writes reach the audit log
    stop.set()
    lags = [(seen[key] - t) * 1000 for key, t in committed.items() if key in seen]
    missing = len(committed) - len(lags)
    reqs, verbs, errors = syncer_requests(kube.audit, audit0)
    print("changes=%d missing=%d p50=%.1f p99=%.1f requests=%d per_lifecycle=%.2f verbs=%s "
          "errors=%d api_watch_p50=%.1f secs=%.1f" % (
              len(committed), missing, pct(lags, 0.5), pct(lags, 0.99), reqs, reqs / k,
              ",".join("%s:%d" % kv for kv in sorted(verbs.items())) or "-", errors,
              pct(ref, 0.5), secs))
    return 1 if missing else 0


if __name__ == "__main__":
    a = sys.argv
    if a[1] == "setup":
        sys.exit(setup(a[2], a[3], a[4], int(a[5])))
    sys.exit(churn(a[2], a[3], a[4], a[5], int(a[6]), float(a[7])))
