#!/usr/bin/env bash
# 65-robust-model.sh - a seeded, randomized, concurrent run of podresd's write
# API, checked against the change feed and invariants of the state.
#
# MODEL_CLIENTS (default 8) clients, each on its own keep-alive connection,
# send random requests in waves (a random subset of them at once, so that
# podresd commits them in one group, failed ones among them), MODEL_OPS
# (default 150) each: bind (PUT) pods with random device subsets (conflicts,
# unknown devices, a device id two resources share), the same body again,
# allocate and allocate again, release (with no, the right or a wrong uid),
# reservations, re-registration of a device subset (bound devices get
# removed), health PATCHes, and reads (often of the list their last write
# changed). A resource with a 1 s heartbeat lapses meanwhile (podresd's own
# writes). Watchers follow the feed: from the start, a snapshot one started
# mid-run, since=REV mid-run, filtered ones, and one that resumes with
# since= every few events over HTTP/1.0. Every request carries a marker (a
# cpuId, a container name or a device property) so that an event can be
# traced back to the request that made it. Then:
#   - every status is one the contract allows for that request; no 5xx;
#   - each watcher's events have revisions start+1 .. final, once each, in
#     order, each object with its event's revision; types match the state
#     (ADDED for a new key, MODIFIED/DELETED for a present one); no MODIFIED
#     of a pod or reservation that changes nothing;
#   - the state folded from the feed equals every list read during the run at
#     its revision, and the final GET /v1/pods, /v1/devices, /v1/reservations;
#     each other watcher saw exactly W0's events (filtered) after its start;
#   - at every revision an answer reported: no device listed by two pods,
#     holders match the pods' containers, no device held by one pod and
#     reserved for another, reservedFor matches the reservations, and each
#     reservation's state is the one its pod and devices give;
#   - every object in a 2xx answer equals the feed's event at its revision;
#     a 201 made a new object (or a new uid); an allocation is the contract's
#     choice (fewest NUMA nodes, then NUMA ids, then device ids) from the
#     state just before it; no event carries the marker of a request answered
#     4xx; the revisions a client sees never go back (read-your-writes);
#   - after a restart on the same database the lists are identical and
#     since=0 / since=REV replay exactly the events the watchers saw.
# Phases: 1, the whole change log kept (--history 100000); 2, the same
# database on a ring of 400 revisions that the run wraps (since= one before
# the kept ones: 410); 3-8, one allocation failure injected per start
# (FAULT_ALLOC_AT) into short runs: the one request it hits gets a 503 and
# leaves no trace; last, the ring grown back to 100000.
# SEED (printed) replays the same choices: SEED=N ONLY=65 bash tests/run-integration.sh
. "$(dirname "$0")/lib.sh"

START=$SECONDS
SEED=${SEED:-$(( (RANDOM << 15) | RANDOM ))}
echo "# SEED=$SEED (replay: SEED=$SEED ONLY=65 bash tests/run-integration.sh)"
pd_config "history: 100000"
pd_start

cat > "$T/model.py" <<'PY'
# model.py run|restart SOCK SEED DIR - see the header of 65-robust-model.sh.
import http.client, itertools, json, os, random, socket, sys, threading, time

MODE, SOCK, SEED, DIR = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
PHASE, HISTORY = int(sys.argv[5]), int(sys.argv[6])
QB = (PHASE - 1) * 100000  # markers of this phase are QB and up (cpuIds stay <= 1048575)
FAULT = os.environ.get("MODEL_FAULT") == "1"  # podresd runs with FAULT_ALLOC_AT: one 503 is due
FAULT_HITS = []  # what the injected failure hit: 503 answers (at most one)
MULT = int(os.environ.get("TEST_TIMEOUT_MULT", "1") or 1)
CLIENTS = int(os.environ.get("MODEL_CLIENTS", "8"))
OPS = int(os.environ.get("MODEL_OPS", "150")) if PHASE == 1 else \
    int(os.environ.get("MODEL_OPS2", "100")) if PHASE == 2 else int(os.environ.get("MODEL_OPS3", "20"))
PAUSE_P = float(os.environ.get("MODEL_PAUSE", "0.15")) if PHASE <= 2 else 0.0  # a lull after a wave
GPU, NIC, FPGA = "example.com/gpu", "example.com/nic", "example.com/fpga"
TOPO = {
    GPU: {"g0": [0], "g1": [0], "g2": [0], "g3": [1], "g4": [1], "g5": [2], "g6": [2], "g7": [0, 1],
          "x0": [1]},
    NIC: {"n0": [0], "n1": [1], "n2": [], "n3": [], "n4": [1], "n5": [], "x0": []},  # x0: in both
    FPGA: {"f0": [0], "f1": [], "f2": [1]},
}
UNKNOWN = {GPU: "g9", NIC: "n9", FPGA: "f9"}
NSS, PODS = ["ns0", "ns1"], ["p0", "p1", "p2", "p3", "p4", "p5"]
NO_NUMA = 1 << 62
problems = []
plock = threading.Lock()


def problem(msg):
    with plock:
        problems.append(msg)


def short(v, n=400):
    s = v if isinstance(v, str) else json.dumps(v, separators=(",", ":"), sort_keys=True)
    return s if len(s) <= n else s[:n] + "..."


class Conn(http.client.HTTPConnection):
    def __init__(self):
        super().__init__("localhost", timeout=20 * MULT)

    def connect(self):
        s = socket.socket(socket.AF_UNIX)
        s.settimeout(self.timeout)
        s.connect(SOCK)
        self.sock = s


def call(conn, method, path, body=None):
    """One request on a keep-alive connection: (status, parsed JSON or None)."""
    hdrs = {"Content-Type": "application/json"} if body is not None else {}
    conn.request(method, path, body, hdrs)
    r = conn.getresponse()
    raw = r.read()
    try:
        return r.status, json.loads(raw)
    except ValueError:
        return r.status, raw.decode("utf-8", "replace")


def dumps(v):
    return json.dumps(v, separators=(",", ":"))


# ---- the operations ----

ALLOWED = {
    "register": {200}, "put_pod": {200, 201, 409, 422}, "put_same": {200, 201, 409, 422},
    "allocate": {200, 201, 404, 409, 422}, "alloc_same": {200, 201, 404, 409, 422},
    "delete_pod": {200, 404}, "delete_pod_uid": {200, 404, 409}, "delete_pod_wrong": {404, 409},
    "put_resv": {200, 201, 409, 422}, "del_resv": {200, 404}, "patch": {200, 404},
    "patch_unknown": {404}, "read": {200}, "read_one": {200, 404}, "quiesce": {200},
}
# the answer's key holding one object, or a list of them
ANSWER_KEY = {"register": "devices", "quiesce": "devices", "put_pod": "podResources",
              "put_same": "podResources", "allocate": "podResources", "alloc_same": "podResources",
              "delete_pod": "podResources", "delete_pod_uid": "podResources",
              "delete_pod_wrong": "podResources", "put_resv": "reservation",
              "del_resv": "reservation", "patch": "device"}
ops = []          # every request made, in no particular order
ops_lock = threading.Lock()
progress = [0]


def record(op):
    with ops_lock:
        ops.append(op)
        progress[0] += 1


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
        self.conn = Conn()
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
                raw = r.read()
                op["status"] = r.status
                try:
                    op["resp"] = json.loads(raw)
                except ValueError:
                    op["resp"] = raw.decode("utf-8", "replace")
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
        self.rnd, self.conn, self.halt, self.n = random.Random(SEED + 3), Conn(), threading.Event(), 0

    def run(self):
        while not self.halt.wait(1.7):
            self.n += 1
            ids = [i for i in sorted(TOPO[FPGA]) if self.rnd.random() < 0.85]
            q = QB + 100 + self.n
            body = {"devices": device_body(FPGA, ids, q, self.rnd), "ttlSeconds": 1}
            do(self.conn, 0, "register", "PUT", "/v1/resources/%s/devices" % FPGA, dumps(body), q)


# ---- the watchers ----

STOP = {"target": None}
DEADLINE = [time.monotonic() + 120 * MULT]


def stream_lines(s, chunked, stop):
    """Decoded NDJSON lines of a watch body on socket 's' (head already read)."""
    buf, body, need, eof = b"", b"", None, False
    while True:
        if chunked:
            while True:
                if need is None:
                    i = buf.find(b"\r\n")
                    if i < 0:
                        break
                    size = int(buf[:i].split(b";")[0], 16)
                    buf = buf[i + 2:]
                    if size == 0:
                        eof = True
                        break
                    need = size
                if need > 0:
                    take = buf[:need]
                    body += take
                    buf = buf[len(take):]
                    need -= len(take)
                    if need > 0:
                        break
                if len(buf) < 2:
                    break
                if buf[:2] != b"\r\n":
                    raise ValueError("bad chunk framing: %r" % buf[:40])
                buf, need = buf[2:], None
        else:
            body, buf = body + buf, b""
        while b"\n" in body:
            line, body = body.split(b"\n", 1)
            yield line
        if eof:
            return
        if stop():
            return
        try:
            d = s.recv(65536)
        except socket.timeout:
            continue
        if not d:
            if chunked:
                raise ValueError("the stream ended without its last chunk")
            return
        buf += d


class Watcher(threading.Thread):
    """GET /v1/watch; every line kept in 'lines' as (connection number, event)."""

    def __init__(self, name, query="", since=None, http10=False, resume_every=0):
        super().__init__(daemon=True)
        self.wname, self.query, self.since = name, query, since
        self.http10, self.resume_every = http10, resume_every
        self.filtered = "kind=" in query or "namespace=" in query
        self.lines, self.conns, self.last, self.err, self.done = [], 0, None, None, False
        self.idle_since = time.monotonic()
        self.ready = threading.Event()  # the initial list is in (or since= answered)

    def url(self, since):
        q = (["since=%d" % since] if since is not None else []) + ([self.query] if self.query else [])
        return "/v1/watch" + ("?" + "&".join(q) if q else "")

    def stop(self):
        if time.monotonic() > DEADLINE[0]:
            return True
        if STOP["target"] is None:
            return False
        if self.filtered:
            return W[0].done and time.monotonic() - self.idle_since > 0.5 * MULT
        return self.last is not None and self.last >= STOP["target"]

    def run(self):
        try:
            self.follow()
        except Exception as e:
            self.err = "%s: %s: %s" % (self.wname, type(e).__name__, e)
        self.ready.set()
        self.done = True

    def follow(self):
        since = self.since
        while not self.stop():
            s = socket.socket(socket.AF_UNIX)
            s.settimeout(0.2)
            s.connect(SOCK)
            self.conns += 1
            s.sendall(("GET %s HTTP/1.%d\r\nHost: localhost\r\n\r\n" %
                       (self.url(since), 0 if self.http10 else 1)).encode())
            head = b""
            while b"\r\n\r\n" not in head:
                try:
                    d = s.recv(4096)
                except socket.timeout:
                    if time.monotonic() > DEADLINE[0]:
                        raise
                    continue
                if not d:
                    raise ValueError("connection closed before the head: %r" % head[:200])
                head += d
            head, rest = head.split(b"\r\n\r\n", 1)
            status = int(head.split(b" ", 2)[1])
            if status != 200:
                if FAULT and status == 503:  # the injected failure: try once more
                    FAULT_HITS.append("watch %s %s: %r" % (self.wname, self.url(since), rest[:200]))
                    s.close()
                    continue
                raise ValueError("HTTP %d for %s: %r" % (status, self.url(since), rest[:300]))
            chunked = b"transfer-encoding: chunked" in head.lower()
            initial = since is None
            if not initial:
                self.ready.set()
            n = 0

            class Sock:  # the bytes read with the head come first
                def __init__(self, s, rest):
                    self.s, self.rest = s, rest

                def recv(self, k):
                    if self.rest:
                        r, self.rest = self.rest, b""
                        return r
                    return self.s.recv(k)
            for line in stream_lines(Sock(s, rest), chunked, self.stop):
                ev = json.loads(line)
                self.lines.append((self.conns, ev))
                self.idle_since = time.monotonic()
                if ev.get("type") == "ERROR":
                    raise ValueError("ERROR event: %s" % short(ev))
                if ev.get("type") == "BOOKMARK":
                    if initial and ev.get("initialEventsEnd"):
                        initial = False
                        self.ready.set()
                    if not initial:
                        self.last = ev["revision"]
                    continue
                if initial:
                    continue
                self.last = ev["revision"]
                n += 1
                if self.resume_every and n >= self.resume_every:
                    break
            s.close()
            if self.last is not None:
                since = self.last
            elif since is None:
                raise ValueError("the stream ended before its initial list did")

    def parts(self):
        """(initial ADDED list, its bookmark revision or None, the live events)."""
        init, live, bm, initial = [], [], None, self.since is None
        for _, ev in self.lines:
            if ev.get("type") == "BOOKMARK":
                if initial and ev.get("initialEventsEnd"):
                    initial, bm = False, ev["revision"]
                continue
            (init if initial else live).append(ev)
        return init, bm, live


W = []


# ---- checking ----

def key_of(kind, o):
    if kind == "Device":
        return (kind, o["resourceName"], o["id"])
    return (kind, o["namespace"], o["name"])


def strip_rev(o):
    return {k: v for k, v in o.items() if k != "revision"}


def apply(state, ev):
    k = key_of(ev["kind"], ev["object"])
    if ev["type"] == "DELETED":
        state.pop(k, None)
    else:
        state[k] = ev["object"]


def pod_devices(pod):
    for c in pod.get("containers") or []:
        for g in c.get("devices") or []:
            for i in g.get("deviceIds") or []:
                yield c["name"], g["resourceName"], i


def invariants(state, rev, where):
    pods = {k[1:]: o for k, o in state.items() if k[0] == "PodResources"}
    devs = {k[1:]: o for k, o in state.items() if k[0] == "Device"}
    resvs = {k[1:]: o for k, o in state.items() if k[0] == "Reservation"}
    bad = []
    listed = {}
    for (ns, name), p in pods.items():
        for cname, res, i in pod_devices(p):
            want = {"namespace": ns, "name": name, "uid": p["uid"], "container": cname}
            if (res, i) in listed:
                bad.append("device %s %s listed by pods %s and %s/%s" %
                           (res, i, listed[(res, i)], ns, name))
            listed[(res, i)] = want
            d = devs.get((res, i))
            if d is None:
                bad.append("pod %s/%s lists device %s %s, which is not in the device list" %
                           (ns, name, res, i))
            elif d["holder"] != want:
                bad.append("pod %s/%s lists device %s %s (container %s), whose holder is %s" %
                           (ns, name, res, i, cname, short(d["holder"])))
    reserved = {}
    for (ns, name), r in resvs.items():
        for _, res, i in pod_devices(r):
            if (res, i) in reserved:
                bad.append("device %s %s in reservations %s and %s/%s" %
                           (res, i, reserved[(res, i)], ns, name))
            reserved[(res, i)] = {"namespace": ns, "name": name}
    for (res, i), d in devs.items():
        h = d["holder"]
        if h is not None and listed.get((res, i)) != h:
            bad.append("device %s %s has holder %s, but that pod does not list it (%s)" %
                       (res, i, short(h), short(listed.get((res, i)))))
        if d["reservedFor"] != reserved.get((res, i)):
            bad.append("device %s %s reservedFor %s, the reservations say %s" %
                       (res, i, short(d["reservedFor"]), short(reserved.get((res, i)))))
        rf = d["reservedFor"]
        if h is not None and rf is not None and (h["namespace"], h["name"]) != (rf["namespace"], rf["name"]):
            bad.append("device %s %s is held by %s/%s and reserved for %s/%s" %
                       (res, i, h["namespace"], h["name"], rf["namespace"], rf["name"]))
    for (ns, name), r in resvs.items():
        want = expected_resv_state(r, pods.get((ns, name)), devs, ns, name)
        if r["state"] != want:
            bad.append("reservation %s/%s is %s, its pod and devices make it %s: %s" %
                       (ns, name, r["state"], want, short(r)))
        elif (r["message"] == "") != (want != "Conflict"):
            bad.append("reservation %s/%s %s with message %r" % (ns, name, r["state"], r["message"]))
    for b in bad[:3]:
        problem("invariant at revision %d (%s): %s" % (rev, where, b))


def expected_resv_state(r, pod, devs, ns, name):
    want = sorted("%s:%s/%s" % t for t in pod_devices(r))
    if pod is not None:
        return "Bound" if want == sorted("%s:%s/%s" % t for t in pod_devices(pod)) else "Conflict"
    for _, res, i in pod_devices(r):
        d = devs.get((res, i))
        if d is None or d["health"] != "Healthy":
            return "Conflict"
        h = d["holder"]
        if h is not None and (h["namespace"], h["name"]) != (ns, name):
            return "Conflict"
    return "Pending"


def alloc_choose(cands, want):
    """alloc.c: fewest NUMA groups, first such combination, then device ids."""
    cands = sorted(cands)
    groups = []
    for numa, i in cands:
        if groups and groups[-1][0] == numa:
            groups[-1][1].append(i)
        else:
            groups.append((numa, [i]))
    for m in range(1, len(groups) + 1):
        for comb in itertools.combinations(range(len(groups)), m):
            if sum(len(groups[g][1]) for g in comb) >= want:
                picks = []
                for g in comb:
                    for i in groups[g][1]:
                        if len(picks) < want:
                            picks.append(i)
                return picks
    return None


def expected_alloc(state, ns, name, request):
    """{(container, resource): sorted ids} the contract gives, or None (409)."""
    resv = state.get(("Reservation", ns, name))
    if resv is not None:
        out = {}
        for c in resv["containers"]:
            for g in c.get("devices") or []:
                out[(c["name"], g["resourceName"])] = sorted(g["deviceIds"])
        return out, [c["name"] for c in resv["containers"]]
    taken, out = set(), {}
    for c in request:
        for res, n in sorted(c["requests"].items()):
            if n == 0:
                continue
            cands = []
            for k, d in state.items():
                if k[0] != "Device" or k[1] != res or d["health"] != "Healthy" or (res, k[2]) in taken:
                    continue
                h, rf = d["holder"], d["reservedFor"]
                if h is not None and (h["namespace"], h["name"]) != (ns, name):
                    continue
                if rf is not None and (rf["namespace"], rf["name"]) != (ns, name):
                    continue
                nodes = d["topology"]["nodes"]
                cands.append((nodes[0]["ID"] if nodes else NO_NUMA, k[2]))
            picks = alloc_choose(cands, n) if len(cands) >= n else None
            if picks is None:
                return None, None
            taken |= {(res, i) for i in picks}
            out[(c["name"], res)] = sorted(picks)
    return out, [c["name"] for c in request]


def got_alloc(pod):
    out = {}
    for c in pod["containers"]:
        for g in c.get("devices") or []:
            out[(c["name"], g["resourceName"])] = list(g["deviceIds"])
    return out


def topology_check(state, op, pod):
    for c in pod["containers"]:
        for g in c.get("devices") or []:
            numa = set()
            for i in g["deviceIds"]:
                d = state.get(("Device", g["resourceName"], i))
                if d is not None:
                    numa |= {n["ID"] for n in d["topology"]["nodes"]}
            want = {"nodes": [{"ID": n} for n in sorted(numa)]}
            if g.get("topology") != want:
                problem("%s: group %s %s has topology %s, its devices' NUMA nodes are %s" %
                        (desc(op), g["resourceName"], g["deviceIds"], short(g.get("topology")),
                         short(want)))


def read_expect(path, state):
    """The answer GET 'path' should give from 'state': (key, list or object) or None."""
    base, _, qs = path.partition("?")
    args = dict(a.split("=", 1) for a in qs.split("&")) if qs else {}
    items = sorted(state.items())
    if base == "/v1/pods":
        out = [o for k, o in items if k[0] == "PodResources"
               and ("namespace" not in args or o["namespace"] == args["namespace"])
               and ("resource" not in args or any(r == args["resource"] for _, r, _ in pod_devices(o)))]
        return "podResources", out
    if base == "/v1/devices":
        out = [o for k, o in items if k[0] == "Device"
               and ("resource" not in args or o["resourceName"] == args["resource"])
               and ("health" not in args or o["health"] == args["health"])
               and (args.get("free") != "true" or (o["holder"] is None and o["reservedFor"] is None))]
        return "devices", out
    if base == "/v1/reservations":
        return "reservations", [o for k, o in items if k[0] == "Reservation"]
    if base == "/v1/allocatable":
        return "devices", [{"resourceName": o["resourceName"], "deviceIds": [o["id"]],
                            "topology": o["topology"]}
                           for k, o in items if k[0] == "Device" and o["health"] == "Healthy"]
    parts = base.split("/")
    if base.startswith("/v1/namespaces/"):
        return "podResources", state.get(("PodResources", parts[3], parts[5]))
    if base.startswith("/v1/reservations/"):
        return "reservation", state.get(("Reservation", parts[3], parts[4]))
    return None


def desc(op):
    return "client %s %s %s %s -> %s" % (op["client"], op["method"], op["path"],
                                        short(op["body"] or "", 200), op["status"])


def answer_objects(op):
    """(kind, object) of every object a 2xx write answer holds."""
    key = ANSWER_KEY.get(op["kind"])
    r = op["resp"]
    if not key or not isinstance(r, dict) or key not in r:
        return []
    kind = {"devices": "Device", "device": "Device", "podResources": "PodResources",
            "reservation": "Reservation"}[key]
    objs = r[key] if isinstance(r[key], list) else [r[key]]
    return [(kind, o) for o in objs]


def markers(kind, o):
    """The request markers an object carries."""
    out = set()
    if kind == "PodResources":
        for c in o.get("containers") or []:
            out |= {("q", x) for x in c.get("cpuIds") or []}
            if c["name"][0] == "a" and "-" in c["name"] and c["name"].split("-")[1].isdigit():
                out.add(("q", int(c["name"].split("-")[1])))
    elif kind == "Reservation":
        for c in o.get("containers") or []:
            if c["name"][0] == "r" and c["name"][1:].isdigit():
                out.add(("q", int(c["name"][1:])))
    elif kind == "Device" and "q" in (o.get("properties") or {}):
        out.add(("q", int(o["properties"]["q"])))
    return out


def check_all(final, final_rev):
    w0 = W[0]
    # 1. statuses
    for op in ops:
        st = op["status"]
        if st is None:
            problem("%s: no answer: %s" % (desc(op), op["resp"]))
            continue
        if st == 503 and FAULT:
            FAULT_HITS.append(desc(op))
        elif st not in ALLOWED[op["kind"]]:
            problem("%s: status %s not allowed for %s: %s" % (desc(op), st, op["kind"], short(op["resp"])))
        if st >= 300:
            r = op["resp"]
            if not isinstance(r, dict) or r.get("kind") != "Status" or r.get("code") != st:
                problem("%s: not a Status body: %s" % (desc(op), short(r)))
        elif not isinstance(op["resp"], dict) or not isinstance(op["resp"].get("revision"), int):
            problem("%s: no revision in the answer: %s" % (desc(op), short(op["resp"])))
    if len(FAULT_HITS) > 1:
        problem("one allocation failure was injected, %d answers were 503: %s" %
                (len(FAULT_HITS), "; ".join(FAULT_HITS)))
    if FAULT:
        print("# the injected allocation failure hit: %s" % (FAULT_HITS[0] if FAULT_HITS else
                                                         "no answer (a watch stream, or nothing)"))
    if not problems:
        print("ok - %d requests, every status one the contract allows (%s)" %
              (len(ops), ", ".join("%s %d" % (k, op_count(k)) for k in sorted(ALLOWED) if op_count(k))))

    # 2. the watchers' streams
    for w in W:
        if w.err:
            problem("watcher %s" % w.err)
        if w.conns != 1 and not w.resume_every and not FAULT:
            problem("watcher %s needed %d connections: its stream ended early" % (w.wname, w.conns))
    init0, b0, live0 = w0.parts()
    revs = [e["revision"] for e in live0]
    if revs != list(range(b0 + 1, final_rev + 1)):
        miss = sorted(set(range(b0 + 1, final_rev + 1)) - set(revs))[:10]
        dup = sorted(r for r in set(revs) if revs.count(r) > 1)[:10]
        order = [(a, b) for a, b in zip(revs, revs[1:]) if b != a + 1][:5]
        problem("W0: events after bookmark %s are not %d..%d once each in order: %d events, "
                "missing %s, twice %s, jumps %s" % (b0, b0 + 1, final_rev, len(revs), miss, dup, order))
    for e in live0:
        if e["object"].get("revision") != e["revision"]:
            problem("W0: event revision %d, its object's %s: %s" %
                    (e["revision"], e["object"].get("revision"), short(e)))
    # 3. fold W0's events; checks keyed by revision
    by_rev = {}
    at, before = {}, {}

    def at_rev(r, fn):
        at.setdefault(r, []).append(fn)

    boundaries = {b0, final_rev}
    for op in ops:
        if op["status"] not in (200, 201) or not isinstance(op["resp"], dict):
            continue
        rv = op["resp"].get("revision")
        if isinstance(rv, int):
            boundaries.add(rv)
        if op["method"] == "GET" and isinstance(rv, int):
            def cmp_read(state, op=op, rv=rv):
                key, want = read_expect(op["path"], state)
                got = op["resp"].get(key)
                if got != want:
                    problem("%s: answer at revision %d differs from the feed's state there:\n"
                            "    got  %s\n    want %s" % (desc(op), rv, short(got, 600), short(want, 600)))
            at_rev(rv, cmp_read)
    for w in W[1:]:
        init, bm, live = w.parts()
        if bm is not None:
            def cmp_init(state, w=w, init=init, bm=bm):
                got = sorted((key_of(e["kind"], e["object"]), dumps(e["object"])) for e in init)
                want = sorted((k, dumps(o)) for k, o in state.items() if match(w.query, k, o))
                if got != want:
                    problem("%s (%s): initial list at revision %d differs from W0's state there: got %s, want %s"
                            % (w.wname, w.query, bm, short([g[1] for g in got if g not in want]),
                               short([x[1] for x in want if x not in got])))
            at_rev(bm, cmp_init)
            boundaries.add(bm)
    for op in ops:
        if op["kind"] in ("allocate", "alloc_same", "put_pod", "put_same") and op["status"] in (200, 201) \
                and isinstance(op["resp"], dict):
            pod = op["resp"]["podResources"]
            r = pod["revision"]
            if op["kind"] in ("allocate", "alloc_same") and op["status"] == 201:
                def cmp_alloc(state, op=op, pod=pod):
                    ns, name = op["pod"]
                    want, names = expected_alloc(state, ns, name, json.loads(op["body"])["containers"])
                    if want is None:
                        problem("%s: allocated %s, but the state before it has not enough devices" %
                                (desc(op), short(pod["containers"])))
                    elif got_alloc(pod) != want or [c["name"] for c in pod["containers"]] != names:
                        problem("%s: allocated %s, the contract's choice from the state before it is %s" %
                                (desc(op), short(sorted(got_alloc(pod).items())), short(sorted(want.items()))))
                before.setdefault(r, []).append(cmp_alloc)
            before.setdefault(r, []).append(lambda state, op=op, pod=pod: topology_check(state, op, pod))
    state = {}
    for e in init0:
        state[key_of(e["kind"], e["object"])] = e["object"]
    for fn in at.get(b0, []):
        fn(state)
    if b0 in boundaries:
        invariants(state, b0, "start")
    nboundary = 1
    for e in live0:
        r = e["revision"]
        k = key_of(e["kind"], e["object"])
        prev = state.get(k)
        for fn in before.get(r, []):
            fn(state)
        if e["type"] == "ADDED" and prev is not None:
            problem("W0: ADDED for %s, which is there: %s" % (k, short(e)))
        if e["type"] in ("MODIFIED", "DELETED") and prev is None:
            problem("W0: %s for %s, which is not there: %s" % (e["type"], k, short(e)))
        if e["type"] == "MODIFIED" and prev is not None and strip_rev(prev) == strip_rev(e["object"]):
            problem("W0: MODIFIED changes nothing (a no-op write made a revision): %s" % short(e))
        by_rev[r] = (e, prev)
        apply(state, e)
        for fn in at.get(r, []):
            fn(state)
        if r in boundaries:
            nboundary += 1
            invariants(state, r, "after event %s %s" % (e["type"], short(list(k))))
    if not problems:
        print("ok - W0 saw revisions %d..%d once each, in order; types and object revisions agree;"
              " no MODIFIED that changes nothing" % (b0 + 1, final_rev))
        print("ok - invariants hold at %d revisions that answers reported; %d reads equal the feed's"
              " state at their revision" % (nboundary, sum(1 for o in ops if o["method"] == "GET" and o["status"] == 200)))
    # final lists
    for key, path in (("podResources", "/v1/pods"), ("devices", "/v1/devices"),
                      ("reservations", "/v1/reservations")):
        if final[path].get("revision") != final_rev:
            problem("final GET %s at revision %s, want %d" % (path, final[path].get("revision"), final_rev))
        want = read_expect(path, state)[1]
        if final[path].get(key) != want:
            problem("final GET %s differs from the state folded from the feed:\n    got  %s\n    want %s"
                    % (path, short(final[path].get(key), 800), short(want, 800)))
    if not problems:
        print("ok - the state folded from the feed equals the final GET /v1/pods, /v1/devices,"
              " /v1/reservations (%d pods, %d devices, %d reservations)" %
              (len(final["/v1/pods"]["podResources"]), len(final["/v1/devices"]["devices"]),
               len(final["/v1/reservations"]["reservations"])))

    # 4. answers against the feed
    seen_marker = {}
    for e in live0:
        for m in markers(e["kind"], e["object"]):
            if m[1] >= QB:  # older ones: an earlier phase's
                seen_marker.setdefault(m[1], e)
    for k, o in state.items():
        for m in markers(k[0], o):
            if m[1] >= QB:
                seen_marker.setdefault(m[1], {"final state": o})
    by_q = {}
    for op in ops:
        if op["q"] is not None:
            by_q.setdefault(op["q"], []).append(op)
    for q, e in sorted(seen_marker.items()):
        reqs = by_q.get(q, [])
        if not any(o["status"] in (200, 201) for o in reqs):
            problem("an event carries the marker of request(s) answered %s (a failed write's change "
                    "got out): %s\n    event %s" % ([o["status"] for o in reqs],
                                                     "; ".join(desc(o) for o in reqs), short(e, 600)))
    per_client = {}
    for op in sorted(ops, key=lambda o: o["t0"]):
        if op["status"] not in (200, 201) or not isinstance(op["resp"], dict):
            continue
        rv = op["resp"].get("revision")
        if isinstance(rv, int):
            if rv > final_rev:
                problem("%s: answer revision %d is after the final %d" % (desc(op), rv, final_rev))
            last = per_client.get(op["client"])
            if last is not None and rv < last[0]:
                problem("%s: revision %d, but this client already saw %d (%s)" %
                        (desc(op), rv, last[0], desc(last[1])))
            per_client[op["client"]] = (rv, op)
        for kind, o in answer_objects(op):
            r = o.get("revision")
            if isinstance(rv, int) and r > rv:
                problem("%s: object revision %d after the answer's %d" % (desc(op), r, rv))
            ev = by_rev.get(r, (None, None))[0]
            if ev is None:
                if r > b0:
                    problem("%s: object revision %s is no event: %s" % (desc(op), r, short(o)))
                continue
            if ev["kind"] != kind or key_of(kind, ev["object"]) != key_of(kind, o) or ev["object"] != o:
                problem("%s: the answer's object differs from the feed's event at its revision %d:\n"
                        "    answer %s\n    event  %s" % (desc(op), r, short(o), short(ev)))
                continue
            prev = by_rev[r][1]
            if op["status"] == 201 and kind != "Device":
                new = ev["type"] == "ADDED" or (kind == "PodResources" and prev is not None
                                                and prev["uid"] != o["uid"])
                if not new:
                    problem("%s: 201, but the event at %d is %s of an existing object" %
                            (desc(op), r, ev["type"]))
            if op["status"] == 200 and kind != "Device" and (ev["type"] == "ADDED" or (
                    kind == "PodResources" and prev is not None and prev["uid"] != o["uid"])):
                # unchanged: then another request created it, and got 201
                creator = [x for x in ops if x is not op and x["status"] == 201 and any(
                    kk == kind and oo.get("revision") == r and key_of(kk, oo) == key_of(kind, o)
                    for kk, oo in answer_objects(x))]
                if not creator:
                    problem("%s: 200, but no other request created the object (event %s at %d);"
                            " want 201" % (desc(op), ev["type"], r))
        if op["kind"] in ("put_pod", "put_same"):
            body = json.loads(op["body"])
            pod = op["resp"]["podResources"]
            want = [{"name": c["name"], "devices": [(g["resourceName"], sorted(g["deviceIds"]))
                                                    for g in c["devices"]],
                     "cpuIds": c.get("cpuIds", []), "memory": []} for c in body["containers"]]
            got = [{"name": c["name"], "devices": [(g["resourceName"], g["deviceIds"])
                                                   for g in c.get("devices") or []],
                    "cpuIds": c.get("cpuIds"), "memory": c.get("memory")} for c in pod["containers"]]
            if got != want or pod["uid"] != body["uid"] or (pod["namespace"], pod["name"]) != op["pod"]:
                problem("%s: the bound pod is not the body: %s" % (desc(op), short(pod)))
    if not problems:
        print("ok - every object in a 2xx answer is the feed's event at its revision; 201 = created;"
              " allocations are the contract's choice; no marker of a 4xx request in the feed;"
              " revisions never go back for a client")

    # 5. the other watchers against W0
    for w in W[1:]:
        init, bm, live = w.parts()
        start = bm if bm is not None else w.since
        if start < b0:  # it started before W0: of those events, only the revisions are known
            early = [e["revision"] for e in live if e["revision"] <= b0]
            if not w.filtered and early != list(range(start + 1, b0 + 1)):
                problem("%s (from %s): revisions before %d: %s" % (w.wname, start, b0, short(early)))
            live = [e for e in live if e["revision"] > b0]
        want = [e for e in live0 if e["revision"] > start and match_ev(w.query, e)]
        if live != want:
            diff = next((i for i, (a, b) in enumerate(zip(live, want)) if a != b), min(len(live), len(want)))
            problem("%s (%s, from %s, %d connection(s)): %d events, want %d; first difference at #%d:"
                    " got %s, want %s" % (w.wname, w.query or "all", start, w.conns, len(live), len(want),
                                          diff, short(live[diff:diff + 2], 300), short(want[diff:diff + 2], 300)))
    if not problems:
        print("ok - %s: each saw exactly W0's events after its start" %
              ", ".join("%s (%s, from %s, %d conn)" % (w.wname, w.query or "all",
                                                       w.parts()[1] if w.parts()[1] is not None else w.since,
                                                       w.conns) for w in W[1:]))


def op_count(k):
    return sum(1 for o in ops if o["kind"] == k)


def match(query, k, o):
    args = dict(a.split("=", 1) for a in query.split("&")) if query else {}
    if "kind" in args and k[0] != args["kind"]:
        return False
    if "namespace" in args and (k[0] == "Device" or o["namespace"] != args["namespace"]):
        return False
    return True


def match_ev(query, e):
    return match(query, key_of(e["kind"], e["object"]), e["object"])


def get(path):
    for attempt in (1, 2):
        c = Conn()
        try:
            st, j = call(c, "GET", path)
        finally:
            c.close()
        if st == 503 and FAULT and attempt == 1:  # the injected failure
            FAULT_HITS.append("GET %s: %s" % (path, short(j, 200)))
            continue
        break
    if st != 200:
        raise SystemExit("GET %s: HTTP %s %s" % (path, st, short(j)))
    return j


def report(what):
    for p in problems[:12]:
        print("  - " + p)
    print("FAIL: %s: %d problem(s); SEED=%d" % (what, len(problems), SEED))
    sys.exit(1)


def run():
    t0 = time.monotonic()
    rnd = random.Random(SEED + PHASE)
    W.append(Watcher("W0"))
    W[0].start()
    W.append(Watcher("W4-resume-http1.0", since=get("/version")["revision"], http10=True,
                     resume_every=rnd.randint(15, 40)))
    W[1].start()
    for w in W:
        if not w.ready.wait(10 * MULT):
            raise SystemExit("watcher %s did not start" % w.wname)
    setup = Conn()
    for res in (GPU, NIC, FPGA):
        body = {"devices": device_body(res, sorted(TOPO[res]), 0, random.Random(SEED + 1))}
        for d in body["devices"]:
            d.pop("health", None)
        if res == FPGA:
            body["ttlSeconds"] = 1
        op = do(setup, -1, "register", "PUT", "/v1/resources/%s/devices" % res, dumps(body), QB)
        if op["status"] == 503 and FAULT:
            op = do(setup, -1, "register", "PUT", "/v1/resources/%s/devices" % res, dumps(body), QB)
        if op["status"] != 200:
            raise SystemExit("register %s: %s %s" % (res, op["status"], short(op["resp"])))
    clients = [Client(i + 1) for i in range(CLIENTS)]
    hb = Heartbeat()
    hb.start()
    total = CLIENTS * OPS
    plan = [(0.3, lambda r: Watcher("W1-snapshot")),
            (0.4, lambda r: Watcher("W3-pods-ns1", query="kind=PodResources&namespace=ns1")),
            (0.5, lambda r: Watcher("W2-since", since=max(0, r - rnd.randint(20, 200)))),
            (0.65, lambda r: Watcher("W5-resv-since", query="kind=Reservation", since=r))]

    def on_progress():
        while plan and progress[0] >= plan[0][0] * total:
            w = plan.pop(0)[1](get("/version")["revision"])
            W.append(w)
            w.start()
    drive(clients, rnd, on_progress)
    hb.halt.set()
    hb.join(30 * MULT)
    # quiesce: the heartbeat resource without a ttl, so nothing writes after this
    body = {"devices": device_body(FPGA, sorted(TOPO[FPGA]), QB + 1, random.Random(SEED + 2))}
    op = do(setup, -1, "quiesce", "PUT", "/v1/resources/%s/devices" % FPGA, dumps(body), QB + 1)
    if op["status"] == 503 and FAULT:
        do(setup, -1, "quiesce", "PUT", "/v1/resources/%s/devices" % FPGA, dumps(body), QB + 1)
    time.sleep(0.05)
    final_rev = get("/version")["revision"]
    t_clients = time.monotonic() - t0
    STOP["target"] = final_rev
    DEADLINE[0] = time.monotonic() + 15 * MULT
    for w in W:
        w.join(20 * MULT)
    final = {}
    for path in ("/v1/pods", "/v1/devices", "/v1/reservations"):
        final[path] = get(path)
        op = dict(client=-1, kind="read", method="GET", path=path, body=None, q=None, status=200,
                  resp=final[path], t0=time.monotonic(), t1=time.monotonic())
        ops.append(op)
    if get("/version")["revision"] != final_rev:
        problem("the revision moved after the writes ended: %d -> %d" %
                (final_rev, get("/version")["revision"]))
    live = W[0].parts()[2]
    metrics = {}
    c = Conn()
    c.request("GET", "/metrics")
    for line in c.getresponse().read().decode().splitlines():
        if line.startswith("podresd_store_"):
            metrics[line.split()[0]] = float(line.split()[1])
    c.close()
    print("# phase %d (--history %d): %d clients x %d ops + %d heartbeats, %d requests (%d 2xx, %d 4xx) in %.1f s; %d events,"
          " final revision %d; %d watchers; %.0f writes in %.0f commits" %
          (PHASE, HISTORY, CLIENTS, OPS, hb.n, len(ops), sum(1 for o in ops if o["status"] in (200, 201)),
           sum(1 for o in ops if o["status"] and 400 <= o["status"] < 500), t_clients, len(live),
           final_rev, len(W), metrics.get("podresd_store_writes_total", 0),
           metrics.get("podresd_store_commits_total", 0)))
    kinds = {}
    for e in live:
        t = "%s %s" % (e["type"], e["kind"])
        if e["kind"] == "Reservation" and e["type"] != "DELETED":
            t += " " + e["object"]["state"]
        kinds[t] = kinds.get(t, 0) + 1
    print("# events: " + ", ".join("%s %d" % kv for kv in sorted(kinds.items())))
    check_all(final, final_rev)
    if problems:
        report("the concurrent run")
    b1 = [w.parts()[1] for w in W if w.wname == "W1-snapshot"]
    with open(os.path.join(DIR, "saved.json"), "w") as f:
        json.dump({"final": final, "final_rev": final_rev, "events": W[0].parts()[2],
                   "b0": W[0].parts()[1], "b1": b1[0] if b1 else 0}, f)


def restart():
    with open(os.path.join(DIR, "saved.json")) as f:
        saved = json.load(f)
    final_rev = saved["final_rev"]
    if get("/version")["revision"] != final_rev:
        problem("revision after the restart %s, before %d" % (get("/version")["revision"], final_rev))
    for path, before in saved["final"].items():
        after = get(path)
        if after != before:
            problem("GET %s after the restart differs:\n    before %s\n    after  %s" %
                    (path, short(before, 600), short(after, 600)))
    if not problems:
        print("ok - after a restart the lists are identical, revisions included (revision %d)" % final_rev)
    STOP["target"] = final_rev
    DEADLINE[0] = time.monotonic() + 15 * MULT
    oldest = max(0, final_rev - HISTORY)  # the oldest since= the history serves
    sinces = sorted({x for x in (0, saved["b1"], saved["b0"], oldest) if x >= oldest})
    for since in sinces:
        w = Watcher("replay-since-%d" % since, since=since)
        W[:] = [w]
        w.start()
        w.join(20 * MULT)
        if w.err:
            problem(w.err)
        live = w.parts()[2]
        want = [e for e in saved["events"] if e["revision"] > since]
        if since < saved["b0"]:
            # events before this phase: only their revisions are known here
            if [e["revision"] for e in live] != list(range(since + 1, final_rev + 1)):
                problem("watch?since=%d after the restart: revisions %s.., want %d..%d" %
                        (since, [e["revision"] for e in live][:5], since + 1, final_rev))
            live = [e for e in live if e["revision"] > saved["b0"]]
            want = [e for e in saved["events"]]
        if live != want:
            diff = next((i for i, (a, b) in enumerate(zip(live, want)) if a != b), min(len(live), len(want)))
            problem("watch?since=%d after the restart: %d events, want %d; first difference at #%d:"
                    " got %s, want %s" % (since, len(live), len(want), diff,
                                          short(live[diff:diff + 1]), short(want[diff:diff + 1])))
    if oldest > 0:
        c = Conn()
        st, j = call(c, "GET", "/v1/watch?since=%d" % (oldest - 1))
        c.close()
        if st != 410 or not isinstance(j, dict) or j.get("reason") != "Expired":
            problem("watch?since=%d (one before the %d kept): HTTP %s %s, want 410 Expired" %
                    (oldest - 1, HISTORY, st, short(j)))
    if not problems:
        print("ok - after the restart (%d revisions kept), since=%s replay exactly the events seen live%s" %
              (HISTORY, "/".join(map(str, sinces)),
               "; since=%d is 410 Expired" % (oldest - 1) if oldest > 0 else ""))
    if problems:
        report("the restart")


if MODE == "run":
    run()
else:
    restart()
PY

mkdir -p "$T/m"
model() { python3 "$T/model.py" "$1" "$PD_SOCK" "$SEED" "$T/m" "$2" "$3"; }
lapses() { grep -c "heartbeat of resource 'example.com/fpga' lapsed" "$T/podresd.log" || true; }

# Phase 1: the whole change log kept (--history 100000).
model run 1 100000 || fail "phase 1, the concurrent run (SEED=$SEED)"
pd_stop
ok "podresd stopped cleanly after phase 1 ($(lapses) heartbeat lapses)"
pd_start
model restart 1 100000 || fail "phase 1, after the restart (SEED=$SEED)"
pd_stop

# Phase 2: the same database with --history 400: the change log is laid out
# again as a smaller ring, which the run wraps a few times.
rm -f "$T/podresd.yaml"
pd_config "history: 400"
pd_start
grep -q "laid out as a ring of 400 revisions" "$T/podresd.log" || fail "the change log was not laid out again"
model restart 1 400 || fail "phase 2, phase 1's state on a ring of 400 (SEED=$SEED)"
model run 2 400 || fail "phase 2, the concurrent run (SEED=$SEED)"
pd_stop
ok "podresd stopped cleanly after phase 2 ($(lapses) heartbeat lapses in all)"
pd_start
model restart 2 400 || fail "phase 2, after the restart (SEED=$SEED)"
pd_stop

# Phase 3: one allocation failure injected per start (FAULT_ALLOC_AT=N counts
# podresd's guarded allocations from the end of start-up), at a seeded N,
# anywhere in a short concurrent run: the one request it hits gets a 503
# and leaves no trace (a write that failed after emitting events rolls them
# back with its savepoint); everything else is checked as before.
for round in 1 2 3 4 5 6; do
    n=$(( (SEED * 7919 + round * 104729) % 2500 + 450 ))
    export FAULT_ALLOC_AT=$n FAULT_ALLOC_AFTER_START=1
    pd_start
    unset FAULT_ALLOC_AT FAULT_ALLOC_AFTER_START
    echo "# phase $((2 + round)): FAULT_ALLOC_AT=$n"
    MODEL_FAULT=1 model run $((2 + round)) 400 || fail "phase $((2 + round)), FAULT_ALLOC_AT=$n (SEED=$SEED)"
    pd_stop
    pd_start
    model restart $((2 + round)) 400 || fail "phase $((2 + round)), after the restart (SEED=$SEED)"
    pd_stop
done
ok "podresd stopped cleanly after each injected allocation failure"

# The ring grown back to 100000: the 400 revisions it kept are served, the
# one before them is 410.
rm -f "$T/podresd.yaml"
pd_config "history: 100000"
pd_start
model restart 8 400 || fail "the change log grown back to 100000 (SEED=$SEED)"
pd_stop
echo "65-robust-model: SEED=$SEED, $((SECONDS - START)) s"
