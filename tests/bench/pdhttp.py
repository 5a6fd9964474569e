"""Tiny HTTP helpers for the bench drivers: podresd over its unix socket,
HTTP servers on 127.0.0.1. Keep-alive connections, bounded timeouts."""
import http.client
import json
import socket


class UnixConn(http.client.HTTPConnection):
    def __init__(self, path, timeout=10):
        super().__init__("localhost", timeout=timeout)
        self.path = path

    def connect(self):
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.settimeout(self.timeout)
        s.connect(self.path)
        self.sock = s


def call(conn, method, path, body=None, ctype="application/json"):
    headers = {}
    data = None
    if body is not None:
        data = body if isinstance(body, (bytes, str)) else json.dumps(body)
        headers["Content-Type"] = ctype
    for attempt in (0, 1):   # the server may have closed an idle keep-alive connection
        try:
            conn.request(method, path, body=data, headers=headers)
            r = conn.getresponse()
            raw = r.read()
            break
        except (BrokenPipeError, ConnectionResetError, http.client.RemoteDisconnected):
            conn.close()
            if attempt:
                raise
    try:
        doc = json.loads(raw) if raw else None
    except ValueError:
        doc = raw
    return r.status, doc


def node_pods(n=110):
    """n pods x 2 containers x 1..8 devices of bench.io/gpu; returns (devices, pods)."""
    devices, pods = [], []
    for i in range(n):
        conts = []
        for c in range(2):
            k = (i * 2 + c) % 8 + 1
            ids = ["g%03d-%d-%d" % (i, c, j) for j in range(k)]
            for j, d in enumerate(ids):
                devices.append({"id": d, "topology": {"nodes": [{"ID": (i + j) % 2}]},
                                "properties": {"model": "bench-a100"}})
            conts.append({"name": "c%d" % c, "devices": [{"resourceName": "bench.io/gpu", "deviceIds": ids}],
                          "cpuIds": [i % 64, (i + 1) % 64]})
        pods.append(("ns%d" % (i % 10), "pod-%03d" % i, "uid-%03d" % i, conts))
    return devices, pods
