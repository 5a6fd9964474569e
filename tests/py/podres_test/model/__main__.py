# SPDX-License-Identifier: Apache-2.0
"""python3 -m podres_test.model run|restart SOCK SEED DIR PHASE HISTORY - test 65's
seeded, randomized, concurrent run of podresd's write API on the unix socket
SOCK, checked against the change feed and invariants of the state (see the
header of tests/integration/65-robust-model.sh). run: the clients, the
heartbeat and the watchers, then every check; what a restart must replay is
saved in DIR. restart: after podresd restarted on the same database, the
lists and the replayed feed equal what run saw. PHASE numbers the run's
markers; HISTORY is podresd's change-log ring. Exits 1 with the problems
found (and the SEED that replays them).
"""
import json
import os
import random
import sys
import time

from podres_test.client import call, metrics
from podres_test.model.check import check_all
from podres_test.model.clients import Client, Heartbeat, connect, device_body, do, drive
from podres_test.model.env import (CLIENTS, DIR, FAULT, FAULT_HITS, FPGA, GPU, HISTORY, MODE, MULT,
                                   NIC, OPS, PHASE, QB, SEED, SOCK, TOPO, dumps, ops, problem,
                                   problems, progress, short)
from podres_test.model.watchers import DEADLINE, STOP, W, Watcher


def get(path):
    for attempt in (1, 2):
        c = connect()
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
    setup = connect()
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
    store = metrics(SOCK, 20 * MULT)
    print("# phase %d (--history %d): %d clients x %d ops + %d heartbeats, %d requests (%d 2xx, %d 4xx) in %.1f s; %d events,"
          " final revision %d; %d watchers; %.0f writes in %.0f commits" %
          (PHASE, HISTORY, CLIENTS, OPS, hb.n, len(ops), sum(1 for o in ops if o["status"] in (200, 201)),
           sum(1 for o in ops if o["status"] and 400 <= o["status"] < 500), t_clients, len(live),
           final_rev, len(W), store.get("podresd_store_writes_total", 0),
           store.get("podresd_store_commits_total", 0)))
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
        c = connect()
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
