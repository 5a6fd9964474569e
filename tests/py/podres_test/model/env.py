# SPDX-License-Identifier: Apache-2.0
"""podres_test.model.env - one run of the model: its parameters, the node it
models, and what its threads share (the requests made, the problems found).

The parameters come from the command line of `python3 -m podres_test.model
run|restart SOCK SEED DIR PHASE HISTORY` and the environment (MODEL_*,
TEST_TIMEOUT_MULT), read once, when this module is first imported: the
model is a program, and every module of it sees the same run. Not the
checks (check.py) nor the requests' choice (clients.py).
"""
import json
import os
import sys
import threading

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


def dumps(v):
    return json.dumps(v, separators=(",", ":"))


ops = []          # every request made, in no particular order
ops_lock = threading.Lock()
progress = [0]


def record(op):
    with ops_lock:
        ops.append(op)
        progress[0] += 1
