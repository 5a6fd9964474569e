# SPDX-License-Identifier: Apache-2.0
"""podres_test.model.clients - the model's requests: MODEL_CLIENTS clients, each
on its own keep-alive connection with its own seeded choices, sent in waves
(drive), and the heartbeat resource's plugin. Each request is recorded in
env.ops with its answer and a marker (a cpuId, a container name or a device
property) that an event can be traced back by. Not the watchers
(watchers.py) nor the checks (check.py).
"""
import itertools
import random
import threading
import time

from podres_test.client import UnixConn, call, decode
from podres_test.model.env import (FAULT, FPGA, GPU, MULT, NIC, NSS, OPS, PAUSE_P, PHASE,
                                   PODS, QB, SEED, SOCK, TOPO, UNKNOWN, dumps, record)


def connect():
    """A keep-alive connection to podresd."""
    return UnixConn(SOCK, 20 * MULT)


def do(conn, client, kind, method, path, body=None, q=None, **extra):
    op = dict(client=client, kind=kind, method=method, path=path, body=body, q=q,
              t0=time.monotonic(), **extra)
    try:
        op["status"], op["resp"] = call(conn, method, path, body)
    except Exception as e:  # a dropped connection is a finding too
        op["status"], op["resp"] = None, "%s: %s" % (type(e).__name__, e)
        conn.close()
    op["t1"] = time.monotonic()
    record(op)
    return op


def device_body(res, ids, q, rnd):
    out = []
    for i in ids:
        d = {"id": i, "properties": {"q": str(q)}}
        if TOPO[res][i] or rnd.random() < 0.5:
            d["topology"] = {"nodes": [{"ID": n} for n in TOPO[res][i]]}
        if rnd.random() < 0.15:
            d["health"] = "Unhealthy"
        elif rnd.random() < 0.5:
            d["health"] = "Healthy"
        out.append(d)
    return out


class Client:
    """One client: its own keep-alive connection, its own choices (seeded), and
    what it learnt from its answers (the uids it bound, its last bodies)."""

    def __init__(self, cid):
        self.cid = cid
        self.rnd = random.Random(SEED * 1000 + PHASE * 100 + cid)
        self.conn = connect()
        self.uids = {}        # (ns, name) -> uid of this client's last 2xx answer
        self.last_put = None  # (path, body, q) of the last PUT of a pod
        self.last_alloc = None
        self.seq = 0
        self.left = OPS
        self.op = None        # the request on the wire
        self.read_next = None  # a list to read next

    def plan(self):
        """Choose the next request (self.op)."""
        weights = [("put_pod", 24), ("put_same", 6), ("allocate", 14), ("alloc_same", 4),
                   ("delete_pod", 13), ("put_resv", 9), ("del_resv", 6), ("register", 5),
                   ("patch", 9), ("read", 14)]
        if FAULT:  # writes that succeed and emit many events: where a failure must roll back
            weights = [("put_pod", 20), ("allocate", 10), ("delete_pod", 12), ("put_resv", 8),
                       ("register", 30), ("patch", 8), ("read", 4)]
        self.left -= 1
        self.seq += 1
        q = QB + self.cid * 1000 + self.seq
        if self.read_next:  # read-your-writes: the list the last write changed
            self.req("read", "GET", self.read_next)
            self.read_next = None
            return
        kind = self.rnd.choices([w[0] for w in weights], cum_weights=list(
            itertools.accumulate(w[1] for w in weights)))[0]
        getattr(self, "op_" + kind)(q)

    def req(self, kind, method, path, body=None, q=None, **extra):
        self.op = dict(client=self.cid, kind=kind, method=method, path=path, body=body, q=q, **extra)

    def send(self):
        op = self.op
        op["t0"] = time.monotonic()
        try:
            hdrs = {"Content-Type": "application/json"} if op["body"] is not None else {}
            self.conn.request(op["method"], op["path"], op["body"], hdrs)
        except Exception as e:
            op["status"], op["resp"] = None, "%s: %s" % (type(e).__name__, e)

    def receive(self):
        op = self.op
        if "status" not in op:
            try:
                r = self.conn.getresponse()
                op["status"], op["resp"] = r.status, decode(r.read())
            except Exception as e:  # a dropped connection is a finding too
                op["status"], op["resp"] = None, "%s: %s" % (type(e).__name__, e)
        if op["status"] is None:
            self.conn.close()
        if op["method"] != "GET" and op["status"] in (200, 201) and self.rnd.random() < 0.25:
            self.read_next = "/v1/devices" if op["kind"] in ("register", "patch") else \
                "/v1/reservations" if "resv" in op["kind"] else "/v1/pods"
        op["t1"] = time.monotonic()
        record(op)
        if op["kind"] in ("put_pod", "put_same", "allocate", "alloc_same") and \
                op["status"] in (200, 201) and isinstance(op["resp"], dict):
            self.uids[op["pod"]] = op["resp"]["podResources"]["uid"]
        self.op = None

    def pod(self):
        return self.rnd.choice(NSS), self.rnd.choice(PODS)

    def ids(self, res, lo, hi, unknown=0.0):
        ids = self.rnd.sample(sorted(TOPO[res]), self.rnd.randint(lo, hi))
        if self.rnd.random() < unknown:
            ids.append(UNKNOWN[res])
        self.rnd.shuffle(ids)
        return ids

    def op_put_pod(self, q):
        ns, name = self.pod()
        uid = self.uids.get((ns, name)) if self.rnd.random() < 0.6 else None
        uid = uid or "u%d" % q
        containers = []
        for cname in (["main"] if self.rnd.random() < 0.7 else ["main", "side"]):
            groups = []
            for res in self.rnd.choices([GPU, NIC, FPGA], k=self.rnd.choice([0, 1, 1, 2])):
                groups.append({"resourceName": res, "deviceIds": self.ids(res, 1, 2, 0.08)})
            c = {"name": cname, "devices": groups}
            if cname == "main":
                c["cpuIds"] = [q]  # the marker
            containers.append(c)
        path = "/v1/namespaces/%s/pods/%s" % (ns, name)
        body = dumps({"uid": uid, "containers": containers})
        self.last_put = (path, body, q)
        self.req("put_pod", "PUT", path, body, q, pod=(ns, name))

    def again(self, kind, method, last, first, q):
        """The last request of its kind again, or 'first' when there is none yet."""
        if not last:
            return first(q)
        path, body, q0 = last
        self.req(kind, method, path, body, q0, pod=(path.split("/")[3], path.split("/")[5]))

    def op_put_same(self, q):
        self.again("put_same", "PUT", self.last_put, self.op_put_pod, q)

    def op_allocate(self, q):
        ns, name = self.pod()
        uid = self.uids.get((ns, name)) if self.rnd.random() < 0.3 else None
        uid = uid or "u%d" % q
        containers = []
        for j in range(self.rnd.choice([1, 1, 2])):
            req = {}
            for res in self.rnd.sample([GPU, NIC, FPGA], self.rnd.choice([1, 1, 2])):
                req[res] = self.rnd.choice([0, 1, 1, 2, 3])
            containers.append({"name": "a%d-%d" % (j, q), "requests": req})  # the marker
        path = "/v1/namespaces/%s/pods/%s/allocate" % (ns, name)
        body = dumps({"uid": uid, "containers": containers})
        self.last_alloc = (path, body, q)
        self.req("allocate", "POST", path, body, q, pod=(ns, name))

    def op_alloc_same(self, q):
        self.again("alloc_same", "POST", self.last_alloc, self.op_allocate, q)

    def op_delete_pod(self, q):
        ns, name = self.pod()
        path = "/v1/namespaces/%s/pods/%s" % (ns, name)
        r = self.rnd.random()
        if r < 0.2:
            self.req("delete_pod_wrong", "DELETE", path + "?uid=nope%d" % q, pod=(ns, name))
        elif r < 0.5 and (ns, name) in self.uids:
            self.req("delete_pod_uid", "DELETE", path + "?uid=" + self.uids[(ns, name)], pod=(ns, name))
        else:
            self.req("delete_pod", "DELETE", path, pod=(ns, name))

    def op_put_resv(self, q):
        ns, name = self.pod()
        containers = []
        names = ["main" if self.rnd.random() < 0.4 else "r%d" % q]  # the marker
        if self.rnd.random() < 0.15:
            names.append("side")
        for cname in names:
            groups = []
            for res in self.rnd.sample([GPU, NIC, FPGA], self.rnd.choice([1, 1, 2])):
                groups.append({"resourceName": res, "deviceIds": self.ids(res, 1, 2, 0.08)})
            containers.append({"name": cname, "devices": groups})
        self.req("put_resv", "PUT", "/v1/reservations/%s/%s" % (ns, name),
                 dumps({"containers": containers}), q, pod=(ns, name))

    def op_del_resv(self, q):
        ns, name = self.pod()
        self.req("del_resv", "DELETE", "/v1/reservations/%s/%s" % (ns, name), pod=(ns, name))

    def op_register(self, q):
        res = self.rnd.choice([GPU, NIC])  # FPGA: the heartbeat thread
        ids = [i for i in sorted(TOPO[res]) if self.rnd.random() < 0.8]
        self.rnd.shuffle(ids)
        body = {"devices": device_body(res, ids, q, self.rnd)}
        self.req("register", "PUT", "/v1/resources/%s/devices" % res, dumps(body), q)

    def op_patch(self, q):
        res = self.rnd.choice([GPU, NIC, FPGA])
        health = self.rnd.choice(["Healthy", "Unhealthy"])
        if self.rnd.random() < 0.05:
            self.req("patch_unknown", "PATCH", "/v1/resources/%s/devices/%s" % (res, UNKNOWN[res]),
                     dumps({"health": health}))
            return
        dev = self.rnd.choice(sorted(TOPO[res]))
        self.req("patch", "PATCH", "/v1/resources/%s/devices/%s" % (res, dev), dumps({"health": health}))

    def op_read(self, q):
        ns, name = self.pod()
        path = self.rnd.choice([
            "/v1/pods", "/v1/devices", "/v1/pods", "/v1/devices", "/v1/reservations", "/v1/pods?namespace=ns1",
            "/v1/pods?resource=" + NIC, "/v1/devices?free=true",
            "/v1/devices?resource=%s&health=Healthy" % GPU, "/v1/allocatable",
            "/v1/namespaces/%s/pods/%s" % (ns, name), "/v1/reservations/%s/%s" % (ns, name)])
        kind = "read_one" if path.count("/") > 3 and "?" not in path else "read"
        self.req(kind, "GET", path)


def drive(clients, rnd, on_progress):
    """Waves: a random subset of the clients send their next request at once (so
    that podresd commits them together, failures among them), then each reads
    its answer; now and then a lull."""
    while any(c.left for c in clients):
        wave = [c for c in clients if c.left and (FAULT or rnd.random() < 0.75)]
        wave = wave or [next(c for c in clients if c.left)]
        for c in wave:
            c.plan()
        for c in wave:
            c.send()
        for c in wave:
            c.receive()
        on_progress()
        if rnd.random() < PAUSE_P:
            time.sleep(rnd.uniform(0.05, 0.2))


class Heartbeat(threading.Thread):
    """The heartbeat resource's plugin: a PUT with ttlSeconds 1 every 1.7 s, so the
    heartbeat lapses in between (podresd's own writes, its devices turn Unhealthy)."""

    def __init__(self):
        super().__init__(daemon=True)
        self.rnd, self.conn, self.halt, self.n = random.Random(SEED + 3), connect(), threading.Event(), 0

    def run(self):
        while not self.halt.wait(1.7):
            self.n += 1
            ids = [i for i in sorted(TOPO[FPGA]) if self.rnd.random() < 0.85]
            q = QB + 100 + self.n
            body = {"devices": device_body(FPGA, ids, q, self.rnd), "ttlSeconds": 1}
            do(self.conn, 0, "register", "PUT", "/v1/resources/%s/devices" % FPGA, dumps(body), q)


# ---- the watchers ----
