#!/usr/bin/env python3
"""scale.py BIN OUTDIR - what K podres nodes cost one real control plane (docs/SCALE.md).

Starts tests/kube/cluster (etcd, kube-apiserver with an audit log, kube-controller-manager),
applies deploy/'s namespace, CRDs, ServiceAccount, RBAC and FlowSchema, and K simulated nodes:
each a Node object, a real podresd (8 static GPUs) and a real podres-syncer as the
podres-syncer ServiceAccount. Then, each phase bracketed by the API server's own /metrics and
the audit log:

  start    every syncer started at once, until all are ready and every NodeDevices exists
  idle     nothing changes on any node (IDLE s)
  churn    pods come and go on every node (CHURN s): a Pod created with spec.nodeName and
           bound in that node's podresd; after LIFE s deleted gracefully, released in podresd
           half a second later and deleted for good (gracePeriodSeconds 0), as a kubelet
           ends a pod; RATE new pods per node per minute
  storm    every syncer killed and started again at once, until all are ready
  restart  the API server (the whole control plane) restarted, until every syncer is ready

Prints one table per node and per pod lifecycle, and writes OUTDIR/scale.json. Environment:
SCALE_NODES (K, 20), SCALE_IDLE (30), SCALE_CHURN (60), SCALE_RATE (6), SCALE_LIFE (5),
SCALE_FORCE (0; 1: pods are force-deleted, gracePeriodSeconds 0, before podresd releases).
"""
import collections
import http.client
import json
import os
import re
import shutil
import signal
import ssl
import subprocess
import sys
import threading
import time
import urllib.parse

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
sys.path.insert(0, os.path.join(ROOT, "tests", "bench"))
sys.path.insert(0, os.path.join(ROOT, "tests", "py"))
import pdhttp  # noqa: E402
from podres_test.free_port import free_port  # noqa: E402

SYNCER = "system:serviceaccount:podres-system:podres-syncer"
GC = "system:serviceaccount:kube-system:generic-garbage-collector"
GROUP = "/apis/podres.dev/v1alpha1"


def env_int(name, default):
    return int(os.environ.get(name, default))


class Kube:
    """The API server as the cluster admin; a connection per thread."""

    def __init__(self, kdir):
        self.kdir = kdir
        self.load()
        self.local = threading.local()

    def load(self):
        env = {}
        with open(os.path.join(self.kdir, "env")) as f:
            for line in f:
                k, sep, v = line.strip().partition("=")
                if sep:
                    env[k] = v
        self.env = env
        u = urllib.parse.urlparse(env["KUBE_SERVER"])
        self.host, self.port = u.hostname, u.port
        self.ctx = ssl.create_default_context(cafile=os.path.join(self.kdir, "pki", "ca.crt"))
        self.ctx.load_cert_chain(os.path.join(self.kdir, "pki", "admin.crt"),
                                 os.path.join(self.kdir, "pki", "admin.key"))

    def call(self, method, path, body=None, ctype="application/json", raw=False):
        c = getattr(self.local, "c", None)
        if c is None:
            c = http.client.HTTPSConnection(self.host, self.port, timeout=30, context=self.ctx)
            self.local.c = c
        data = json.dumps(body) if body is not None else None
        hdr = {"Content-Type": ctype} if data else {}
        for attempt in range(3):
            try:
                c.request(method, path, body=data, headers=hdr)
                r = c.getresponse()
                out = r.read()
                break
            except (OSError, http.client.HTTPException):
                c.close()
                if attempt == 2:
                    raise
                time.sleep(0.2)
        if raw:
            return r.status, out
        try:
            return r.status, json.loads(out) if out else None
        except ValueError:
            return r.status, out


# ---- the API server's /metrics ------------------------------------------------------------

LINE = re.compile(r'^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{(.*)\})?\s+(\S+)')
LABEL = re.compile(r'([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"')
WANT = ("apiserver_request_total", "apiserver_request_duration_seconds_sum",
        "apiserver_request_duration_seconds_count", "apiserver_response_sizes_sum",
        "apiserver_registered_watchers", "apiserver_longrunning_requests",
        "apiserver_storage_objects", "apiserver_resource_objects", "apiserver_storage_size_bytes",
        "apiserver_request_body_size_bytes_sum", "apiserver_watch_events_sizes_sum",
        "apiserver_watch_events_total",
        "apiserver_flowcontrol_nominal_limit_seats", "apiserver_flowcontrol_rejected_requests_total",
        "apiserver_flowcontrol_dispatched_requests_total", "etcd_db_total_size_in_bytes",
        "apiserver_flowcontrol_request_wait_duration_seconds_sum")


def scrape(kube):
    st, body = kube.call("GET", "/metrics", raw=True)
    if st != 200:
        raise RuntimeError("GET /metrics: HTTP %d" % st)
    out = collections.defaultdict(float)
    for line in body.decode().splitlines():
        m = LINE.match(line)
        if not m or m.group(1) not in WANT:
            continue
        labels = tuple(sorted(LABEL.findall(m.group(3) or "")))
        out[(m.group(1), labels)] += float(m.group(4))
    return out


def msum(snap, name, **match):
    t = 0.0
    for (n, labels), v in snap.items():
        if n != name:
            continue
        d = dict(labels)
        if all(d.get(k) == w for k, w in match.items()):
            t += v
    return t


def by(snap, name, key, **match):
    out = collections.Counter()
    for (n, labels), v in snap.items():
        if n != name:
            continue
        d = dict(labels)
        if all(d.get(k) == w for k, w in match.items()):
            out[tuple(d.get(k, "") for k in key)] += v
    return out


def delta(a, b, name, key, **match):
    x, y = by(a, name, key, **match), by(b, name, key, **match)
    return {k: y[k] - x.get(k, 0) for k in y if y[k] - x.get(k, 0)}


# ---- the audit log ---------------------------------------------------------------------------

class Audit:
    """Completed requests of the audit log, read on from where the last read stopped."""

    def __init__(self, path):
        self.path = path
        self.pos = 0

    def mark(self):
        self.pos = os.path.getsize(self.path) if os.path.exists(self.path) else 0

    def since(self):
        out = []
        with open(self.path, "rb") as f:
            f.seek(self.pos)
            for line in f:
                try:
                    ev = json.loads(line)
                except ValueError:
                    continue
                if ev.get("stage") == "ResponseComplete":
                    out.append(ev)
        return out


def verbs_of(events, user):
    c = collections.Counter()
    for ev in events:
        if ev.get("user", {}).get("username") != user:
            continue
        ref = ev.get("objectRef") or {}
        res = ref.get("resource", ev.get("requestURI", "?"))
        if ref.get("subresource"):
            res += "/" + ref["subresource"]
        c[(ev["verb"], res)] += 1
    return c


# ---- nodes -------------------------------------------------------------------------------------

DEVICES = """devices:
  - resourceName: example.com/gpu
    devices:
%s""" % "".join("      - {id: gpu-%d, topology: {nodes: [{ID: %d}]}, properties: {model: sim}}\n"
                % (i, i // 4) for i in range(8))


class Node:
    def __init__(self, h, i):
        self.h, self.i = h, i
        self.name = "sim-%03d" % i
        self.dir = os.path.join(h.out, "nodes", self.name)
        os.makedirs(self.dir, exist_ok=True)
        self.sock = os.path.join(self.dir, "run", "podresd.sock")
        self.mport = free_port()
        self.pd = self.sy = None
        self.seq = 0
        self.free = ["gpu-%d" % i for i in range(8)]
        self.live = {}  # pod name -> (uid, gpu, deadline)
        self.conn = None

    def start_podresd(self):
        cfg = os.path.join(self.dir, "podresd.yaml")
        with open(cfg, "w") as f:
            f.write("db: %s/db/podresd.db\nsocket: %s\nlisten: 127.0.0.1:%d\nnode_name: %s\n"
                    "log_level: warn\n%s" % (self.dir, self.sock, free_port(), self.name, DEVICES))
        self.pd = subprocess.Popen([self.h.bin + "/podresd", "--config", cfg],
                                   stdout=open(os.path.join(self.dir, "podresd.log"), "ab"),
                                   stderr=subprocess.STDOUT)

    def start_syncer(self):
        self.sy = subprocess.Popen(
            [self.h.bin + "/podres-syncer", "--node-name", self.name, "--podresd-socket", self.sock,
             "--kubeconfig", self.h.sy_kcfg, "--metrics-listen", "127.0.0.1:%d" % self.mport,
             "--log-level", "warn"],
            stdout=open(os.path.join(self.dir, "syncer.log"), "ab"), stderr=subprocess.STDOUT)

    def stop_syncer(self, sig=signal.SIGTERM):
        if self.sy and self.sy.poll() is None:
            self.sy.send_signal(sig)
            try:
                self.sy.wait(10)
            except subprocess.TimeoutExpired:
                self.sy.kill()
                self.sy.wait()

    def ready(self):
        try:
            c = http.client.HTTPConnection("127.0.0.1", self.mport, timeout=2)
            c.request("GET", "/readyz")
            r = c.getresponse()
            r.read()
            c.close()
            return r.status == 200
        except OSError:
            return False

    def pd_call(self, method, path, body=None):
        if self.conn is None:
            self.conn = pdhttp.UnixConn(self.sock)
        return pdhttp.call(self.conn, method, path, body)


class Harness:
    def __init__(self, bin_dir, out):
        self.bin, self.out = os.path.abspath(bin_dir), os.path.abspath(out)
        self.k = env_int("SCALE_NODES", 20)
        self.idle = env_int("SCALE_IDLE", 30)
        self.churn_s = env_int("SCALE_CHURN", 60)
        self.rate = env_int("SCALE_RATE", 6)
        self.life = env_int("SCALE_LIFE", 5)
        self.force = env_int("SCALE_FORCE", 0) == 1
        self.kdir = os.path.join(self.out, "kube")
        self.nodes = []
        self.phases = []
        self.lifecycles = 0
        self.errors = []
        self.lock = threading.Lock()

    def sh(self, *args, **kw):
        return subprocess.run(list(args), check=True, capture_output=True, text=True, **kw).stdout

    def kubectl(self, *args):
        return self.sh(self.kube.env["KUBECTL"], "--kubeconfig", self.kube.env["KUBECONFIG"], *args)

    def up(self):
        shutil.rmtree(self.out, ignore_errors=True)
        os.makedirs(self.out)
        d, crd = os.path.join(ROOT, "deploy"), os.path.join(ROOT, "schema")
        self.sh(os.path.join(ROOT, "tests/kube/cluster"), "up", self.kdir, "--owner", str(os.getpid()),
                "--crd", crd + "/crd-devicebinding.yaml", "--crd", crd + "/crd-nodedevices.yaml")
        self.kube = Kube(self.kdir)
        self.kubectl("apply", "-f", d + "/namespace.yaml", "-f", d + "/serviceaccount.yaml",
                     "-f", d + "/rbac.yaml", "-f", d + "/flowcontrol.yaml")
        tok = self.kubectl("create", "token", "podres-syncer", "-n", "podres-system",
                           "--duration", "2h").strip()
        self.sy_kcfg = os.path.join(self.out, "syncer.kubeconfig")
        with open(self.sy_kcfg, "w") as f:
            f.write("apiVersion: v1\nkind: Config\nclusters:\n- name: c\n  cluster:\n"
                    "    server: %s\n    certificate-authority: %s\ncontexts:\n- name: c\n"
                    "  context: {cluster: c, user: u}\ncurrent-context: c\nusers:\n- name: u\n"
                    "  user: {token: %s}\n" % (self.kube.env["KUBE_SERVER"],
                                               self.kube.env["KUBE_CA"], tok))
        os.chmod(self.sy_kcfg, 0o600)
        self.audit = Audit(self.kube.env["KUBE_AUDIT"])
        for ns in ("sim",):
            self.kube.call("POST", "/api/v1/namespaces",
                           {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}})
        deadline = time.time() + 30
        while self.kube.call("GET", "/api/v1/namespaces/sim/serviceaccounts/default")[0] != 200:
            if time.time() > deadline:
                raise RuntimeError("namespace sim has no default ServiceAccount")
            time.sleep(0.2)
        for i in range(self.k):
            n = Node(self, i)
            st, doc = self.kube.call("POST", "/api/v1/nodes", {
                "apiVersion": "v1", "kind": "Node", "metadata": {"name": n.name}})
            if st != 201:
                raise RuntimeError("create node %s: %s %s" % (n.name, st, doc))
            n.start_podresd()
            self.nodes.append(n)
        for n in self.nodes:
            self.wait(10, lambda n=n: os.path.exists(n.sock), "podresd of " + n.name)

    def wait(self, limit, cond, what):
        deadline = time.time() + limit
        while not cond():
            if time.time() > deadline:
                raise RuntimeError("timed out waiting for " + what)
            time.sleep(0.2)

    def all_ready(self):
        return all(n.ready() for n in self.nodes)

    def nodedevices(self):
        st, doc = self.kube.call("GET", GROUP + "/nodedevices")
        return len(doc.get("items") or []) if st == 200 else -1

    # ---- phases

    def phase(self, name, body):
        self.audit.mark()
        before = scrape(self.kube)
        t0 = time.time()
        extra = body() or {}
        took = time.time() - t0
        time.sleep(2)  # the last requests' audit lines and metrics
        try:
            after = scrape(self.kube)
        except OSError:
            after = None
        events = self.audit.since()
        p = {"name": name, "seconds": round(took, 1), "before": before, "after": after,
             "syncer": verbs_of(events, SYNCER), "gc": verbs_of(events, GC), "events": events}
        p.update(extra)
        self.phases.append(p)
        print("# phase %-8s %6.1f s  syncer requests %d" % (name, took, sum(p["syncer"].values())),
              flush=True)

    def start_all(self):
        for n in self.nodes:
            n.start_syncer()
        self.wait(120, self.all_ready, "every syncer ready")
        self.wait(60, lambda: self.nodedevices() == self.k, "every NodeDevices")

    def idle_phase(self):
        time.sleep(self.idle)

    def churn(self):
        stop = time.time() + self.churn_s
        period = 60.0 / self.rate
        threads = [threading.Thread(target=self.churn_node, args=(n, stop, period, i * period / self.k))
                   for i, n in enumerate(self.nodes)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        # what is still bound at the end goes the same way
        return {"lifecycles": self.lifecycles}

    def churn_node(self, n, stop, period, offset):
        nxt = time.time() + offset
        while True:
            now = time.time()
            for name, (uid, gpu, dl) in list(n.live.items()):
                if dl <= now:
                    self.end_pod(n, name, uid, gpu)
            if now >= stop and not n.live:
                return
            if now >= nxt and now < stop and n.free:
                self.start_pod(n)
                nxt += period
            time.sleep(0.05)

    def start_pod(self, n):
        n.seq += 1
        name = "%s-p%d" % (n.name, n.seq)
        st, doc = self.kube.call("POST", "/api/v1/namespaces/sim/pods", {
            "apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": "sim"},
            "spec": {"nodeName": n.name, "automountServiceAccountToken": False,
                     "containers": [{"name": "main", "image": "registry.invalid/x"}]}})
        if st != 201:
            self.errors.append("create pod %s: %s" % (name, st))
            return
        uid = doc["metadata"]["uid"]
        gpu = n.free.pop()
        st, _ = n.pd_call("PUT", "/v1/namespaces/sim/pods/" + name, {
            "uid": uid, "containers": [{"name": "main", "devices": [
                {"resourceName": "example.com/gpu", "deviceIds": [gpu]}]}]})
        if st not in (200, 201):
            self.errors.append("bind %s: %s" % (name, st))
        n.live[name] = (uid, gpu, time.time() + self.life)

    def end_pod(self, n, name, uid, gpu):
        """A pod's end as a kubelet makes it: the user's graceful delete (a deletionTimestamp),
        the containers stopped and the devices released, then the kubelet's own delete with
        gracePeriodSeconds 0. SCALE_FORCE=1: one delete with gracePeriodSeconds 0, the devices
        released 0.5 s later (a force deletion)."""
        path = "/api/v1/namespaces/sim/pods/" + name
        if not self.force:
            st, _ = self.kube.call("DELETE", path, {"gracePeriodSeconds": 30})
            if st != 200:
                self.errors.append("delete pod %s: %s" % (name, st))
            time.sleep(0.5)
        else:
            st, _ = self.kube.call("DELETE", path, {"gracePeriodSeconds": 0})
            if st != 200:
                self.errors.append("delete pod %s: %s" % (name, st))
            time.sleep(0.5)
        st, _ = n.pd_call("DELETE", "/v1/namespaces/sim/pods/%s?uid=%s" % (name, uid))
        if st != 200:
            self.errors.append("release %s: %s" % (name, st))
        if not self.force:
            st, _ = self.kube.call("DELETE", path, {"gracePeriodSeconds": 0,
                                                    "preconditions": {"uid": uid}})
            if st != 200:
                self.errors.append("final delete of pod %s: %s" % (name, st))
        n.free.append(gpu)
        del n.live[name]
        with self.lock:
            self.lifecycles += 1

    def settle(self):
        # every DeviceBinding gone (the garbage collector's deletes included)
        def none_left():
            st, doc = self.kube.call("GET", GROUP + "/devicebindings")
            return st == 200 and not doc.get("items")
        self.wait(60, none_left, "every DeviceBinding gone")

    def storm(self):
        for n in self.nodes:
            n.stop_syncer(signal.SIGKILL)
        t0 = time.time()
        for n in self.nodes:
            n.start_syncer()
        self.wait(180, self.all_ready, "every syncer ready after the storm")
        return {"ready_s": round(time.time() - t0, 1)}

    def restart(self):
        t0 = time.time()
        self.sh(os.path.join(ROOT, "tests/kube/cluster"), "restart", self.kdir)
        self.kube.local = threading.local()
        up = time.time() - t0
        self.wait(180, self.all_ready, "every syncer ready after the API server restart")
        return {"ready_s": round(time.time() - t0, 1), "apiserver_s": round(up, 1)}

    def sizes(self):
        """Bytes of each kind as stored in etcd (protobuf/JSON as the server writes it), from
        etcd's gRPC gateway; and as JSON over the API."""
        ports = dict(line.strip().split("=", 1) for line in open(os.path.join(self.kdir, "ports"))
                     if "=" in line)
        out = {}
        import base64
        for kind, prefix in (("devicebinding", "/registry/podres.dev/devicebindings/"),
                             ("nodedevices", "/registry/podres.dev/nodedevices/"),
                             ("pod", "/registry/pods/")):
            end = prefix[:-1] + chr(ord(prefix[-1]) + 1)
            body = json.dumps({"key": base64.b64encode(prefix.encode()).decode(),
                               "range_end": base64.b64encode(end.encode()).decode()}).encode()
            c = http.client.HTTPConnection("127.0.0.1", int(ports["ETCD_PORT"]), timeout=10)
            c.request("POST", "/v3/kv/range", body=body, headers={"Content-Type": "application/json"})
            doc = json.loads(c.getresponse().read())
            vals = [len(base64.b64decode(kv["value"])) for kv in doc.get("kvs", [])]
            out[kind] = {"count": len(vals), "etcd_bytes": (sum(vals) // len(vals)) if vals else 0}
        return out

    def run(self):
        t0 = time.time()
        self.up()
        self.phase("start", self.start_all)
        self.phase("idle", self.idle_phase)
        # objects while a pod on every node holds a device, for their sizes
        for n in self.nodes:
            self.start_pod(n)
        self.wait(60, lambda: len(self.kube.call("GET", GROUP + "/devicebindings")[1]["items"]) == self.k,
                  "a DeviceBinding per node")
        time.sleep(1)
        self.obj_sizes = self.sizes()
        for n in self.nodes:
            for name, (uid, gpu, _) in list(n.live.items()):
                self.end_pod(n, name, uid, gpu)
        self.lifecycles = 0
        self.settle()
        self.phase("churn", lambda: (self.churn(), self.settle())[0])
        self.phase("storm", self.storm)
        self.phase("restart", self.restart)
        self.total_s = time.time() - t0
        procs = [p for n in self.nodes for p in (n.sy, n.pd) if p and p.poll() is None]
        for p in procs:
            p.terminate()
        for p in procs:
            try:
                p.wait(10)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()
        self.sh(os.path.join(ROOT, "tests/kube/cluster"), "down", self.kdir)
        self.report()

    # ---- the table

    def report(self):
        k, out = self.k, []
        w = out.append
        w("podres scale: K=%d nodes (podresd + podres-syncer each), kube-apiserver %s, "
          "%.0f s in all" % (k, self.kube.env.get("KUBE_VERSION", "?"), self.total_s))
        w("churn: %d new pods per node per minute, each living %d s; %d lifecycles in %d s; "
          "pods end %s" % (self.rate, self.life, self.lifecycles, self.churn_s,
                           "by force deletion (gracePeriodSeconds 0)" if self.force else
                           "as with a kubelet (graceful delete, release, final delete)"))
        w("")
        w("%-8s %7s %9s  %s" % ("phase", "seconds", "req/node", "syncer requests per node, by verb and resource"))
        for p in self.phases:
            tot = sum(p["syncer"].values())
            verbs = ", ".join("%s %s %.2f" % (v, r, c / k) for (v, r), c in sorted(p["syncer"].items()))
            w("%-8s %7.1f %9.2f  %s" % (p["name"], p["seconds"], tot / k, verbs or "-"))
        churn = next(p for p in self.phases if p["name"] == "churn")
        lc = max(self.lifecycles, 1)
        w("")
        w("per pod lifecycle (churn phase, %d lifecycles):" % self.lifecycles)
        for who, c in (("podres-syncer", churn["syncer"]), ("garbage collector", churn["gc"])):
            dvb = {vr: n for vr, n in c.items() if vr[1].startswith("devicebindings")}
            w("  %-18s %s" % (who, ", ".join("%s %s %.2f" % (v, r, n / lc)
                                             for (v, r), n in sorted(dvb.items())) or "-"))
        a, b = churn["before"], churn["after"]
        if b:
            rb = delta(a, b, "apiserver_request_body_size_bytes_sum", ("verb", "resource"),
                       group="podres.dev")
            w("  request body bytes on podres.dev resources (syncer creates and patches, the"
              " collector's deletes): %s"
              % (", ".join("%s %s %.0f" % (v, r, n / lc) for (v, r), n in sorted(rb.items())) or "-"))
            we = delta(a, b, "apiserver_watch_events_sizes_sum", ("kind",), group="podres.dev")
            wn = delta(a, b, "apiserver_watch_events_total", ("kind",), group="podres.dev")
            w("  watch events sent on podres.dev kinds: %s"
              % (", ".join("%s %.2f events %.0f B" % (kk[0], wn.get(kk, 0) / lc, n / lc)
                           for kk, n in sorted(we.items())) or "-"))
        idle = next(p for p in self.phases if p["name"] == "idle")
        w("")
        w("steady state (idle %d s): %.4f syncer requests per node per second"
          % (self.idle, sum(idle["syncer"].values()) / k / max(idle["seconds"], 1)))
        snap = idle["after"]
        watch = by(snap, "apiserver_longrunning_requests", ("resource",), verb="WATCH")
        w("watches held (apiserver_longrunning_requests WATCH; the control plane's own besides): %s"
          % ", ".join("%s %d" % (r[0], n) for r, n in sorted(watch.items())
                      if r[0] in ("pods", "devicebindings", "nodedevices", "nodes")))
        w("objects in etcd with a pod on every node: %s" % ", ".join(
            "%s %d" % (kk, v["count"]) for kk, v in sorted(self.obj_sizes.items())))
        dbs = msum(snap, "apiserver_storage_size_bytes") or msum(snap, "etcd_db_total_size_in_bytes")
        w("etcd database: %.1f MiB (apiserver_storage_size_bytes)" % (dbs / 2**20))
        w("object sizes in etcd: %s" % ", ".join(
            "%s %d B" % (kk, v["etcd_bytes"]) for kk, v in sorted(self.obj_sizes.items())))
        seats = by(snap, "apiserver_flowcontrol_nominal_limit_seats", ("priority_level",))
        w("APF seats: podres %d of %d" % (seats.get(("podres",), 0), sum(seats.values())))
        for p in self.phases:
            if p["name"] in ("storm", "restart"):
                w("%s: every syncer ready %.1f s after %s" % (
                    p["name"], p["ready_s"], "the kill" if p["name"] == "storm" else
                    "the restart began (control plane up in %.1f s)" % p["apiserver_s"]))
        st = next(p for p in self.phases if p["name"] == "storm")
        if st["after"]:
            rej = delta(st["before"], st["after"], "apiserver_flowcontrol_rejected_requests_total",
                        ("priority_level",))
            wt = delta(st["before"], st["after"], "apiserver_flowcontrol_request_wait_duration_seconds_sum",
                       ("priority_level",))
            dur = delta(st["before"], st["after"], "apiserver_request_duration_seconds_sum", ("verb",))
            cnt = delta(st["before"], st["after"], "apiserver_request_duration_seconds_count", ("verb",))
            w("storm: APF rejected %s; queue wait s %s; mean request s %s" % (
                dict((kk[0], int(v)) for kk, v in rej.items()) or 0,
                {kk[0]: round(v, 3) for kk, v in wt.items()},
                {kk[0]: round(dur[kk] / cnt[kk], 4) for kk in cnt if cnt[kk]}))
        rs = next(p for p in self.phases if p["name"] == "restart")
        codes = collections.Counter()
        for ev in rs.get("events", []):
            if ev.get("user", {}).get("username") == SYNCER:
                codes["%s %s" % (ev["verb"], ev.get("responseStatus", {}).get("code"))] += 1
        w("restart: syncer requests by verb and code, per node: %s"
          % ", ".join("%s %.2f" % (kk, n / k) for kk, n in sorted(codes.items())))
        if self.errors:
            w("errors (%d): %s" % (len(self.errors), "; ".join(self.errors[:5])))
        text = "\n".join(out)
        print(text)
        with open(os.path.join(self.out, "scale.txt"), "w") as f:
            f.write(text + "\n")
        with open(os.path.join(self.out, "scale.json"), "w") as f:
            json.dump({"k": k, "lifecycles": self.lifecycles, "sizes": self.obj_sizes,
                       "phases": [{"name": p["name"], "seconds": p["seconds"],
                                   "syncer": {"%s %s" % vr: n for vr, n in p["syncer"].items()},
                                   "gc": {"%s %s" % vr: n for vr, n in p["gc"].items()}}
                                  for p in self.phases]}, f, indent=1)


def main():
    if len(sys.argv) != 3:
        print(__doc__, file=sys.stderr)
        return 2
    h = Harness(sys.argv[1], sys.argv[2])
    try:
        h.run()
    finally:
        for n in h.nodes:
            for p in (n.sy, n.pd):
                if p and p.poll() is None:
                    p.kill()
        subprocess.run([os.path.join(ROOT, "tests/kube/cluster"), "down", h.kdir],
                       capture_output=True)
    return 1 if h.errors else 0


if __name__ == "__main__":
    sys.exit(main())
