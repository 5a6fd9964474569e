"""Tiny harness for the emulator's tests: start it, talk HTTP, read watches, check.

Standard library only; run the tests with /usr/bin/python3.  Every wait is
bounded and scaled by $TEST_TIMEOUT_MULT.
"""

import atexit
import http.client
import json
import os
import shutil
import signal
import socket
import ssl
import subprocess
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
EMULATOR = os.path.join(ROOT, "tests", "fixtures", "kube-apiserver-emulator")
CERTS = os.path.join(ROOT, "tests", "fixtures", "make-test-certs")
MULT = float(os.environ.get("TEST_TIMEOUT_MULT", "1") or 1)
TABLE_ACCEPT = ("application/json;as=Table;v=v1;g=meta.k8s.io,"
                "application/json;as=Table;v=v1beta1;g=meta.k8s.io,application/json")
GROUP = "podres.dev"
VERSION = "v1alpha1"
CR_BASE = "/apis/%s/%s" % (GROUP, VERSION)

_running = []
_checks = [0]


def secs(n):
    return n * MULT


def ok(msg):
    _checks[0] += 1
    print("ok %d - %s" % (_checks[0], msg), flush=True)


def fail(msg):
    print("FAIL - %s" % msg, flush=True)
    for e in _running:
        e.dump_log()
    raise SystemExit(1)


def check(cond, msg, detail=None):
    if not cond:
        fail(msg + ("" if detail is None else ": %s" % (detail,)))
    ok(msg)


def eq(have, want, msg):
    if have != want:
        fail("%s: want %r, have %r" % (msg, want, have))
    ok(msg)


def wait_for(fn, what, timeout=5.0, interval=0.05):
    end = time.time() + secs(timeout)
    while time.time() < end:
        v = fn()
        if v:
            return v
        time.sleep(interval)
    fail("timed out waiting for %s" % what)


def tmpdir():
    d = tempfile.mkdtemp(prefix="emu-test-")
    atexit.register(shutil.rmtree, d, True)
    return d


def make_certs(d):
    subprocess.check_call([CERTS, d])
    return os.path.join(d, "ca.crt"), os.path.join(d, "server.crt"), os.path.join(d, "server.key")


def crd_object(path=None):
    import yaml          # python3-yaml comes with python3-kubernetes
    with open(path or os.path.join(ROOT, "schema", "crd-devicebinding.yaml")) as f:
        return yaml.safe_load(f)


class Resp(object):
    def __init__(self, code, headers, body):
        self.code = code
        self.headers = headers
        self.body = body
        try:
            self.json = json.loads(body.decode("utf-8")) if body else None
        except ValueError:
            self.json = None

    def header(self, name):
        return self.headers.get(name)

    def __repr__(self):
        return "<%d %s>" % (self.code, self.body[:300])


class Emulator(object):
    def __init__(self, *args, tls=False, token=None, env=None):
        self.dir = tmpdir()
        self.port_file = os.path.join(self.dir, "port")
        self.kubeconfig = os.path.join(self.dir, "kubeconfig")
        self.log = os.path.join(self.dir, "emulator.log")
        self.token = token
        cmd = ["/usr/bin/python3", EMULATOR, "--listen", "127.0.0.1:0", "--port-file", self.port_file,
               "--kubeconfig-out", self.kubeconfig] + list(args)
        self.ctx = None
        if tls:
            ca, crt, key = make_certs(os.path.join(self.dir, "certs"))
            cmd += ["--tls-cert", crt, "--tls-key", key, "--ca-cert", ca]
            self.ctx = ssl.create_default_context(cafile=ca)
            self.ca = ca
        if token:
            cmd += ["--token", token]
        self.logf = open(self.log, "w")
        self.proc = subprocess.Popen(cmd, stdout=self.logf, stderr=subprocess.STDOUT)
        _running.append(self)
        end = time.time() + secs(10)
        while not os.path.exists(self.port_file):
            if self.proc.poll() is not None or time.time() > end:
                fail("emulator did not start (rc %s)" % self.proc.poll())
            time.sleep(0.02)
        with open(self.port_file) as f:
            self.port = int(f.read())
        self.scheme = "https" if tls else "http"
        self.url = "%s://127.0.0.1:%d" % (self.scheme, self.port)

    def dump_log(self):
        try:
            with open(self.log) as f:
                tail = f.read()[-3000:]
            print("--- emulator log (%s) ---\n%s" % (self.log, tail), flush=True)
        except OSError:
            pass

    def stop(self):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                rc = self.proc.wait(secs(10))
            except subprocess.TimeoutExpired:
                self.proc.kill()
                fail("emulator did not stop on SIGTERM")
            if rc != 0:
                fail("emulator exited %d on SIGTERM" % rc)
        if self in _running:
            _running.remove(self)

    def conn(self, timeout=10):
        if self.ctx:
            return http.client.HTTPSConnection("127.0.0.1", self.port, timeout=secs(timeout),
                                               context=self.ctx)
        return http.client.HTTPConnection("127.0.0.1", self.port, timeout=secs(timeout))

    def req(self, method, path, body=None, ctype="application/json", headers=None, token=None,
            timeout=10):
        h = {"Accept": "application/json"}
        tok = token if token is not None else self.token
        if tok:
            h["Authorization"] = "Bearer " + tok
        data = None
        if body is not None:
            data = body if isinstance(body, bytes) else json.dumps(body).encode()
            h["Content-Type"] = ctype
        h.update(headers or {})
        c = self.conn(timeout)
        try:
            c.request(method, path, body=data, headers=h)
            r = c.getresponse()
            out = Resp(r.status, r.headers, r.read())
        finally:
            c.close()
        return out

    def get(self, path, **kw):
        return self.req("GET", path, **kw)

    def post(self, path, body, **kw):
        return self.req("POST", path, body, **kw)

    def put(self, path, body, **kw):
        return self.req("PUT", path, body, **kw)

    def patch(self, path, body, ctype="application/merge-patch+json", **kw):
        return self.req("PATCH", path, body, ctype=ctype, **kw)

    def delete(self, path, body=None, **kw):
        return self.req("DELETE", path, body, **kw)

    def admin(self, method, path, body=None):
        r = self.req(method, "/_emulator" + path, body, token="")
        if r.code != 200:
            fail("admin %s %s: %r" % (method, path, r))
        return r.json

    def counter(self, **filters):
        q = "&".join("%s=%s" % kv for kv in filters.items())
        return self.admin("GET", "/counters?" + q)["total"]

    def install_crd(self, crd=None):
        r = self.post("/apis/apiextensions.k8s.io/v1/customresourcedefinitions", crd or crd_object())
        if r.code != 201:
            fail("CRD install: %r" % r)
        return r.json

    def watch(self, path, **kw):
        return Watch(self, path, **kw)


def db_path(ns, name=None, sub=None):
    p = "%s/namespaces/%s/devicebindings" % (CR_BASE, ns)
    if name:
        p += "/" + name
    if sub:
        p += "/" + sub
    return p


def db(name, ns="default", node="node-a", labels=None, **extra):
    o = {"apiVersion": "%s/%s" % (GROUP, VERSION), "kind": "DeviceBinding",
         "metadata": {"name": name, "namespace": ns, "labels": labels or {"podres.dev/node": node}},
         "spec": {"nodeName": node}}
    o.update(extra)
    return o


class Watch(object):
    """One watch stream on its own socket, chunked encoding decoded here so that a
    read timeout leaves the stream usable.  next() returns an event dict, None on
    timeout, "EOF" at a clean end (chunked terminator) or "DROPPED" when the
    connection closes without one."""

    def __init__(self, emu, path, accept="application/json", token=None, timeout=10):
        sock = socket.create_connection(("127.0.0.1", emu.port), timeout=secs(timeout))
        if emu.ctx:
            sock = emu.ctx.wrap_socket(sock, server_hostname="127.0.0.1")
        self.sock = sock
        tok = token if token is not None else emu.token
        req = "GET %s HTTP/1.1\r\nHost: 127.0.0.1:%d\r\nAccept: %s\r\nUser-Agent: emutest\r\n" % (
            path, emu.port, accept)
        if tok:
            req += "Authorization: Bearer %s\r\n" % tok
        sock.sendall((req + "\r\n").encode())
        self.raw = b""
        self.data = b""
        self.state = None          # None, "EOF", "DROPPED"
        end = time.time() + secs(timeout)
        while b"\r\n\r\n" not in self.raw:
            if not self._recv(end):
                fail("watch %s: no response headers" % path)
        head, self.raw = self.raw.split(b"\r\n\r\n", 1)
        lines = head.decode("latin-1").split("\r\n")
        self.code = int(lines[0].split()[1])
        self.headers = {}
        for l in lines[1:]:
            k, v = l.split(":", 1)
            self.headers[k.strip().lower()] = v.strip()
        self.chunked = self.headers.get("transfer-encoding") == "chunked"
        self.length = int(self.headers.get("content-length", "0"))

    def header(self, name):
        return self.headers.get(name.lower())

    def _recv(self, end):
        left = end - time.time()
        if left <= 0:
            return False
        self.sock.settimeout(left)
        try:
            b = self.sock.recv(65536)
        except (socket.timeout, TimeoutError, ssl.SSLWantReadError):
            return False
        except (ConnectionError, ssl.SSLError, OSError):
            b = b""
        if not b:
            self.closed_socket = True
            return "closed"
        self.raw += b
        return True

    def _decode(self):
        if not self.chunked:
            self.data += self.raw
            self.raw = b""
            if len(self.data) >= self.length:
                self.state = self.state or "EOF"
            return
        while True:
            if b"\r\n" not in self.raw:
                return
            size_line, rest = self.raw.split(b"\r\n", 1)
            n = int(size_line.split(b";")[0], 16)
            if n == 0:
                self.state = "EOF"
                return
            if len(rest) < n + 2:
                return
            self.data += rest[:n]
            self.raw = rest[n + 2:]

    def next(self, timeout=3.0):
        end = time.time() + secs(timeout)
        while True:
            self._decode()
            if b"\n" in self.data:
                line, self.data = self.data.split(b"\n", 1)
                try:
                    return json.loads(line)
                except ValueError:
                    fail("watch event is not one JSON line: %r" % line)
            if self.state:
                if self.data.strip():
                    fail("watch stream ended inside an event: %r" % self.data)
                return self.state
            got = self._recv(end)
            if got == "closed":
                self._decode()
                if self.state is None:
                    self.state = "DROPPED"
            elif not got:
                return None

    def body(self, timeout=3.0):
        end = time.time() + secs(timeout)
        while self.state is None:
            self._decode()
            if self.state:
                break
            if not self._recv(end):
                break
        return self.data

    def events(self, n, timeout=3.0):
        out = []
        for _ in range(n):
            e = self.next(timeout)
            if not isinstance(e, dict):
                fail("expected %d events, got %d then %r" % (n, len(out), e))
            out.append(e)
        return out

    def quiet(self, timeout=0.5):
        """True if nothing arrives for `timeout` seconds (not scaled: absence checks
        must not outlast the behaviour they look at)."""
        e = self.next(timeout / MULT)
        return e is None

    def close(self):
        try:
            self.sock.close()
        except OSError:
            pass


def main(fn):
    def on_term(signum, frame):
        raise SystemExit(1)
    signal.signal(signal.SIGTERM, on_term)
    t0 = time.time()
    try:
        fn()
        print("# %d checks passed in %.1fs" % (_checks[0], time.time() - t0), flush=True)
    finally:
        for e in list(_running):
            try:
                e.stop()
            except SystemExit:
                pass
            if e.proc.poll() is None:
                e.proc.kill()
