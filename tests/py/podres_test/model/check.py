# SPDX-License-Identifier: Apache-2.0
"""podres_test.model.check - what the model holds podresd to, once a run is
over: every status one the contract allows; each watcher's events once each,
in order; the state folded from W0's events equal to every list read and to
the final lists, and the invariants of the state at every revision an
answer reported; every 2xx answer's objects the feed's events, allocations
the contract's choice, no trace of a failed request; the other watchers
W0's events, filtered. Findings go to env.problems. Not the requests
(clients.py) nor the watchers (watchers.py).
"""
import itertools
import json

from podres_test.model.env import FAULT, FAULT_HITS, NO_NUMA, QB, dumps, ops, problem, problems, short
from podres_test.model.watchers import W

# the statuses the contract allows for each kind of request

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
    """Every check of a run that ended at FINAL_REV with the lists FINAL."""
    check_statuses()
    init0, b0, live0 = check_streams(final_rev)
    state, by_rev = fold(init0, b0, live0, final_rev)
    check_final(final, final_rev, state)
    check_answers(live0, state, by_rev, b0, final_rev)
    check_watchers(live0, b0)


def check_statuses():
    """1. Every status one the contract allows for its request; a Status body
    with every error, a revision with every success."""
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


def check_streams(final_rev):
    """2. No watcher failed or reconnected unasked; W0 saw every revision after
    its initial list once, in order: (its initial list, its bookmark, its
    live events)."""
    for w in W:
        if w.err:
            problem("watcher %s" % w.err)
        if w.conns != 1 and not w.resume_every and not FAULT:
            problem("watcher %s needed %d connections: its stream ended early" % (w.wname, w.conns))
    init0, b0, live0 = W[0].parts()
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
    return init0, b0, live0


def fold(init0, b0, live0, final_rev):
    """3. The state folded from W0's events, with the checks keyed by revision
    (reads, other watchers' initial lists, allocations, event types and the
    invariants) run on the way: (the final state, {revision: (event, the
    object before it)})."""
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
    return state, by_rev


def check_final(final, final_rev, state):
    """The final GET /v1/pods, /v1/devices and /v1/reservations equal STATE."""
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


def check_answers(live0, state, by_rev, b0, final_rev):
    """4. Answers against the feed: every object in a 2xx answer is the event at
    its revision, 201 created it, no event carries the marker of a failed
    request, a client's revisions never go back, a bound pod is its body."""
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


def check_watchers(live0, b0):
    """5. Each other watcher saw exactly W0's events after its start, filtered."""
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
