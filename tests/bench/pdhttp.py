"""The bench drivers' HTTP helpers: tests/py's podres_test.client (UnixConn,
call) with the bench's ways, a 10 s timeout and one retry when the server
closed an idle keep-alive connection; and node_pods(), the bench's node."""
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "py"))
from podres_test import client  # noqa: E402
from podres_test.client import UnixConn  # noqa: E402

__all__ = ["UnixConn", "call", "client", "node_pods"]


def call(conn, method, path, body=None, ctype=client.JSON):
    """(status, the answer's JSON or text); a dict or list body goes as JSON."""
    return client.call(conn, method, path, body, ctype, retry=True)


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
