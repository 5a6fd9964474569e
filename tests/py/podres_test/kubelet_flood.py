"""kubelet_flood SOCKET SECONDS - test 94: spend the real kubelet's pod-resources
rate limit (100 requests/s, burst 10, shared by every client) for SECONDS:
List calls as fast as four threads can send them on SOCKET, so that every
other client's call meanwhile is refused. Prints
"ok=N exhausted=M" and exits 0 when at least one call was refused with
RESOURCE_EXHAUSTED. Run with /usr/bin/python3 (Debian's grpcio and
grpc_tools); the Python of proto/podresources.proto is generated into a
temporary directory first.
"""

import importlib
import os
import subprocess
import sys
import tempfile
import threading
import time

import grpc

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))


def main():
    sock, seconds = sys.argv[1], float(sys.argv[2])
    out = tempfile.mkdtemp()
    proto = os.path.join(ROOT, "proto")
    if subprocess.call([sys.executable, "-m", "grpc_tools.protoc", "-I" + proto,
                        "--python_out=" + out, "--grpc_python_out=" + out,
                        os.path.join(proto, "podresources.proto")]) != 0:
        sys.exit("kubelet_flood: cannot compile podresources.proto")
    sys.path.insert(0, out)
    pb = importlib.import_module("podresources_pb2")
    pbg = importlib.import_module("podresources_pb2_grpc")
    stub = pbg.PodResourcesListerStub(grpc.insecure_channel("unix://" + sock))
    counts = {"ok": 0, "exhausted": 0, "other": 0}
    lock = threading.Lock()

    end = time.monotonic() + seconds

    def worker():
        while time.monotonic() < end:
            try:
                stub.List(pb.ListPodResourcesRequest(), timeout=5)
                key = "ok"
            except grpc.RpcError as e:
                key = "exhausted" if e.code() == grpc.StatusCode.RESOURCE_EXHAUSTED else "other"
            with lock:
                counts[key] += 1

    threads = [threading.Thread(target=worker) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    print("ok=%d exhausted=%d other=%d" % (counts["ok"], counts["exhausted"], counts["other"]))
    sys.exit(0 if counts["exhausted"] > 0 else 1)


if __name__ == "__main__":
    main()
