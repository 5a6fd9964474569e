"""Plain-HTTP checks of what podres-syncer relies on in the API server.

Write semantics (resourceVersion, /status isolation, generation, no-op
updates, patches, delete preconditions, finalizers), watches (from a
resourceVersion, bookmarks, 410, filters, Table), selectors, Namespaces,
Pods and the asynchronous owner-reference garbage collector.
"""

import os
import re
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from emutest import (CR_BASE, TABLE_ACCEPT, Emulator, check, db, db_path, eq, fail, main,  # noqa: E402
                     secs, wait_for)

NS = "/api/v1/namespaces"


def rv_of(o):
    return o["metadata"]["resourceVersion"]


def create_reads(emu):
    r = emu.post(db_path("default"), db("a"))
    eq(r.code, 201, "POST -> 201")
    m = r.json["metadata"]
    check(re.match(r"^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$", m["uid"]),
          "uid is a UUID", m["uid"])
    check(re.match(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ$", m["creationTimestamp"]),
          "creationTimestamp is RFC 3339 UTC seconds", m["creationTimestamp"])
    eq(m["generation"], 1, "generation 1")
    check(m["resourceVersion"].isdigit(), "resourceVersion set")
    r = emu.post(db_path("default"), db("a"))
    eq((r.code, r.json["reason"], r.json["message"]),
       (409, "AlreadyExists", 'devicebindings.podres.dev "a" already exists'), "duplicate -> 409 AlreadyExists")
    eq(r.json["details"], {"name": "a", "group": "podres.dev", "kind": "devicebindings"},
       "Status details carry the plural")
    r = emu.post(db_path("nope"), db("a", ns="nope"))
    eq((r.code, r.json["message"]), (404, 'namespaces "nope" not found'), "create in missing namespace -> 404")
    r = emu.post(db_path("default"), db("b", ns="other"))
    eq(r.code, 400, "body namespace differs from URL -> 400")
    o = db("x")
    o["metadata"] = {"generateName": "gen-"}
    r = emu.post(db_path("default"), o)
    check(r.code == 201 and re.match(r"^gen-[a-z0-9]{5}$", r.json["metadata"]["name"]), "generateName honoured",
          r)
    o["metadata"] = {}
    r = emu.post(db_path("default"), o)
    eq(r.code, 422, "no name or generateName -> 422")
    o = db("with-rv")
    o["metadata"]["resourceVersion"] = "5"
    eq(emu.post(db_path("default"), o).code, 500, "resourceVersion on create -> 500 InternalError")
    r = emu.post(db_path("default") + "?dryRun=All", db("dry"))
    eq(r.code, 201, "dryRun=All create -> 201")
    eq(emu.get(db_path("default", "dry")).code, 404, "dryRun=All not persisted")
    eq(emu.post(db_path("default") + "?dryRun=Yes", db("dry")).code, 422, "dryRun=Yes -> 422")
    r = emu.get(db_path("default", "nosuch"))
    eq((r.code, r.json["reason"], r.json["message"], r.json["details"]["kind"]),
       (404, "NotFound", 'devicebindings.podres.dev "nosuch" not found', "devicebindings"), "GET missing -> 404")
    eq((r.json["details"]["name"], r.json["details"]["group"]), ("nosuch", "podres.dev"),
       "NotFound details name and group")
    r = emu.get(db_path("empty-ns"))
    eq((r.code, r.json["kind"], r.json["items"]), (200, "DeviceBindingList", []),
       "list in an unknown namespace is empty")
    eq(r.header("Content-Type"), "application/json", "JSON responses are application/json")
    eq(int(r.json["metadata"]["resourceVersion"]), emu.admin("GET", "/state")["resourceVersion"],
       "list resourceVersion is the current global resourceVersion")
    r = emu.get(CR_BASE + "/devicebindings")
    eq((r.json["kind"], int(r.json["metadata"]["resourceVersion"])),
       ("DeviceBindingList", emu.admin("GET", "/state")["resourceVersion"]),
       "all-namespaces list with the global resourceVersion")
    r = emu.req("GET", db_path("default", "a"), b'{"ignored": true}', ctype="application/json")
    eq((r.code, r.json["metadata"]["name"]), (200, "a"), "Content-Type and body on a GET are ignored")
    r = emu.get(db_path("default", "a") + "?pretty=true&timeout=30s")
    eq(r.code, 200, "unknown query parameters pretty/timeout accepted on GET")
    r = emu.patch(db_path("default", "a") + "?fieldManager=kubectl-patch&fieldValidation=Strict&timeout=10s"
                  "&pretty=1", {"metadata": {"labels": {"q": "1"}}})
    eq(r.code, 200, "fieldManager/fieldValidation/timeout/pretty accepted on PATCH")
    emu.patch(db_path("default", "a"), {"metadata": {"labels": {"q": None}}})
    r = emu.get(CR_BASE + "/devicebindings?limit=1")
    check(r.json["metadata"]["resourceVersion"] and len(r.json["items"]) >= 2 and
          "continue" not in r.json["metadata"], "limit accepted, all items returned, no continue")


def updates(emu):
    cur = emu.get(db_path("default", "a")).json
    body = dict(cur)
    body["metadata"] = dict(cur["metadata"])
    del body["metadata"]["resourceVersion"]
    r = emu.put(db_path("default", "a"), body)
    eq((r.code, r.json["message"]), (422, 'devicebindings.podres.dev "a" is invalid: metadata.resourceVersion: '
                                          'Invalid value: 0x0: must be specified for an update'),
       "PUT without resourceVersion -> 422")
    body["metadata"]["resourceVersion"] = "1"
    body["spec"] = {"nodeName": "node-b"}
    r = emu.put(db_path("default", "a"), body)
    eq((r.code, r.json["reason"]), (409, "Conflict"), "PUT with stale resourceVersion -> 409 Conflict")
    eq(r.json["message"], 'Operation cannot be fulfilled on devicebindings.podres.dev "a": the object has been '
       'modified; please apply your changes to the latest version and try again', "Conflict message")
    body["metadata"]["resourceVersion"] = rv_of(cur)
    r = emu.put(db_path("default", "a"), body)
    eq(r.code, 200, "PUT with current resourceVersion -> 200")
    check(int(rv_of(r.json)) > int(rv_of(cur)), "resourceVersion increased")
    eq(r.json["metadata"]["generation"], 2, "spec change bumps generation")
    eq(r.json["metadata"]["uid"], cur["metadata"]["uid"], "uid kept")
    r2 = emu.put(db_path("default", "a"), dict(r.json, metadata=dict(r.json["metadata"], name="zzz")))
    eq(r2.code, 400, "body name differs from URL -> 400")
    r2 = emu.put(db_path("default", "nosuch"), dict(db("nosuch"), metadata={"name": "nosuch",
                                                                               "resourceVersion": "3"}))
    eq(r2.code, 404, "PUT on a missing object -> 404")

    # status isolation, both ways
    cur = r.json
    body = dict(cur, status={"phase": "Bound", "summary": "gpu=1"})
    r = emu.put(db_path("default", "a"), body)
    eq(r.code, 200, "main-endpoint PUT with status -> 200")
    check("status" not in r.json, "main endpoint ignores status")
    eq(rv_of(r.json), rv_of(cur), "...and it was a no-op (same resourceVersion)")
    body = dict(cur, status={"phase": "Bound", "summary": "gpu=1"}, spec={"nodeName": "evil"})
    body["metadata"] = dict(cur["metadata"], labels={"hacked": "yes"})
    r = emu.put(db_path("default", "a", "status"), body)
    eq(r.code, 200, "PUT /status -> 200")
    eq(r.json["status"], {"phase": "Bound", "summary": "gpu=1"}, "/status writes status")
    eq((r.json["spec"]["nodeName"], r.json["metadata"]["labels"]), ("node-b", {"podres.dev/node": "node-a"}),
       "/status ignores spec and labels")
    eq(r.json["metadata"]["generation"], 2, "/status does not bump generation")
    cur = r.json
    r = emu.patch(db_path("default", "a"), {"status": {"phase": "Conflict"}, "spec": {"nodeName": "node-c"}})
    eq((r.json["status"]["phase"], r.json["spec"]["nodeName"]), ("Bound", "node-c"),
       "main-endpoint PATCH changes spec, not status")
    eq(r.json["metadata"]["generation"], 3, "generation 3")
    r = emu.patch(db_path("default", "a"), {"metadata": {"labels": {"extra": "1"}}})
    eq(r.json["metadata"]["generation"], 3, "label change does not bump generation")
    r = emu.patch(db_path("default", "a"), {"metadata": {"annotations": {"g": "1"}}})
    eq((r.code, r.json["metadata"]["generation"]), (200, 3), "annotation change does not bump generation")
    r = emu.patch(db_path("default", "a"), {"metadata": {"finalizers": ["podres.dev/gen"]}})
    eq((r.json["metadata"]["finalizers"], r.json["metadata"]["generation"]), (["podres.dev/gen"], 3),
       "finalizer edit does not bump generation")
    r = emu.patch(db_path("default", "a"), {"metadata": {"finalizers": None, "annotations": {"g": None}}})
    eq((r.code, r.json["metadata"].get("finalizers"), r.json["metadata"]["generation"]), (200, None, 3),
       "finalizer removed again, generation still 3")
    check(int(rv_of(r.json)) > int(rv_of(cur)), "label change bumps resourceVersion")
    r = emu.patch(db_path("default", "a", "status"), {"status": {"phase": "Pending"}})
    eq((r.json["status"], r.json["metadata"]["generation"]), ({"phase": "Pending", "summary": "gpu=1"}, 3),
       "merge PATCH /status")
    cur = r.json
    nost = {k: v for k, v in cur.items() if k != "status"}
    r = emu.put(db_path("default", "a", "status"), nost)
    check(r.code == 200 and "status" not in r.json, "/status PUT without status clears status", r)
    eq(emu.get(db_path("default", "a") + "/scale").code, 404, "unknown subresource -> 404")

    # no-op update keeps resourceVersion and emits no event
    cur = emu.get(db_path("default", "a")).json
    w = emu.watch(db_path("default") + "?watch=1&resourceVersion=" + rv_of(cur))
    r = emu.put(db_path("default", "a"), cur)
    eq((r.code, rv_of(r.json)), (200, rv_of(cur)), "identical PUT keeps the resourceVersion")
    r = emu.patch(db_path("default", "a"), {"spec": {"nodeName": cur["spec"]["nodeName"]}})
    eq(rv_of(r.json), rv_of(cur), "no-op merge patch keeps the resourceVersion")
    emu.patch(db_path("default", "a"), {"metadata": {"annotations": {"n": "1"}}})
    e = w.next()
    check(isinstance(e, dict) and e["type"] == "MODIFIED" and e["object"]["metadata"].get("annotations") ==
          {"n": "1"}, "the first event after no-ops is the real change", e)
    w.close()


def patches(emu):
    p = db_path("default", "a")
    r = emu.patch(p, {"metadata": {"labels": {"extra": None}}})
    check("extra" not in r.json["metadata"]["labels"], "merge patch null deletes a key")
    r = emu.patch(p, {"metadata": {"resourceVersion": "2"}, "spec": {"nodeName": "x"}})
    eq((r.code, r.json["reason"]), (409, "Conflict"), "merge patch with stale resourceVersion -> 409")
    cur = emu.get(p).json
    r = emu.patch(p, {"metadata": {"resourceVersion": rv_of(cur)}, "spec": {"nodeName": "node-d"}})
    eq((r.code, r.json["spec"]["nodeName"]), (200, "node-d"), "merge patch with current resourceVersion")
    r = emu.patch(p, [{"op": "replace", "path": "/spec/nodeName", "value": "node-e"},
                      {"op": "add", "path": "/metadata/labels/jp", "value": "yes"}],
                  ctype="application/json-patch+json")
    eq((r.code, r.json["spec"]["nodeName"], r.json["metadata"]["labels"].get("jp")), (200, "node-e", "yes"),
       "JSON patch replace and add")
    r = emu.patch(p, [{"op": "test", "path": "/spec/nodeName", "value": "node-zzz"},
                      {"op": "remove", "path": "/spec/nodeName"}], ctype="application/json-patch+json")
    eq(r.code, 422, "JSON patch with a failing test op -> 422")
    eq(emu.get(p).json["spec"]["nodeName"], "node-e", "failed JSON patch changed nothing")
    r = emu.patch(p, {"spec": {}}, ctype="application/strategic-merge-patch+json")
    eq(r.code, 415, "strategic merge patch on a custom resource -> 415")
    eq((r.json["reason"], r.json["message"]), ("UnsupportedMediaType", "the body of the request was in an "
       "unknown format - accepted media types include: application/json-patch+json, "
       "application/merge-patch+json, application/apply-patch+yaml"), "415 message lists accepted types")
    r = emu.patch(p, b"apiVersion: v1", ctype="application/apply-patch+yaml")
    eq(r.code, 415, "server-side apply -> documented 415")
    r = emu.patch(p, b"{not json")
    eq(r.code, 400, "undecodable patch -> 400")
    r = emu.patch(db_path("default", "nosuch"), {"spec": {}})
    eq(r.code, 404, "patch on a missing object -> 404")


def deletes(emu):
    emu.post(db_path("default"), db("d1"))
    cur = emu.get(db_path("default", "d1")).json
    r = emu.delete(db_path("default", "d1"), {"preconditions": {"uid": "00000000-0000-0000-0000-000000000000"}})
    eq(r.code, 409, "delete with wrong uid precondition -> 409")
    check("Precondition failed: UID in precondition: 00000000-0000-0000-0000-000000000000, UID in object meta: "
          in r.json["message"], "uid precondition message", r.json["message"])
    r = emu.delete(db_path("default", "d1"), {"preconditions": {"resourceVersion": "1"}})
    eq(r.code, 409, "delete with wrong resourceVersion precondition -> 409")
    check("Precondition failed: ResourceVersion in precondition: 1" in r.json["message"], "rv precondition message")
    r = emu.delete(db_path("default", "d1"), {"propagationPolicy": "Sideways"})
    eq(r.code, 422, "invalid propagationPolicy -> 422")
    r = emu.delete(db_path("default", "d1") + "?propagationPolicy=Sideways")
    eq(r.code, 422, "invalid propagationPolicy in the query -> 422")
    r = emu.delete(db_path("default", "d1"), {"propagationPolicy": "Background",
                                               "preconditions": {"uid": cur["metadata"]["uid"],
                                                                 "resourceVersion": rv_of(cur)}})
    eq(r.code, 200, "delete with matching preconditions -> 200")
    eq((r.json["kind"], r.json["status"], r.json["details"]),
       ("Status", "Success", {"name": "d1", "group": "podres.dev", "kind": "devicebindings",
                              "uid": cur["metadata"]["uid"]}), "Success Status with details")
    eq(emu.get(db_path("default", "d1")).code, 404, "gone after delete")
    eq(emu.delete(db_path("default", "d1")).code, 404, "delete missing -> 404")

    # finalizers
    o = db("fin")
    o["metadata"]["finalizers"] = ["podres.dev/keep"]
    cur = emu.post(db_path("default"), o).json
    w = emu.watch(db_path("default") + "?watch=true&fieldSelector=metadata.name%3Dfin&resourceVersion=" +
                  rv_of(cur))
    r = emu.delete(db_path("default", "fin"))
    eq(r.code, 200, "delete with finalizers -> 200")
    eq((r.json["kind"], r.json["metadata"]["deletionGracePeriodSeconds"], r.json["metadata"]["generation"]),
       ("DeviceBinding", 0, 2), "returns the object, grace 0, generation+1")
    check(r.json["metadata"].get("deletionTimestamp"), "deletionTimestamp set")
    e = w.next()
    eq(e and e["type"], "MODIFIED", "watchers see MODIFIED")
    r = emu.patch(db_path("default", "fin"), {"metadata": {"finalizers": ["podres.dev/keep", "new"]}})
    eq(r.code, 422, "adding a finalizer while deleting -> 422")
    check("no new finalizers can be added if the object is being deleted" in r.json["message"], "message")
    r = emu.patch(db_path("default", "fin"), {"metadata": {"finalizers": None}})
    eq(r.code, 200, "removing the last finalizer -> 200")
    e = w.next()
    eq(e and e["type"], "DELETED", "...and the object is deleted")
    eq(emu.get(db_path("default", "fin")).code, 404, "gone after the last finalizer")
    w.close()

    # deletecollection with a selector
    for n in ("dc1", "dc2"):
        emu.post(db_path("default"), db(n, labels={"dc": "yes"}))
    r = emu.delete(db_path("default") + "?labelSelector=dc%3Dyes")
    eq((r.code, sorted(i["metadata"]["name"] for i in r.json["items"])), (200, ["dc1", "dc2"]),
       "deletecollection with labelSelector")


def watches(emu):
    base = db_path("wns")
    eq(emu.post(NS, {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "wns"}}).code, 201,
       "namespace created")
    start = emu.get(base).json["metadata"]["resourceVersion"]
    a = emu.post(base, db("w1", ns="wns")).json
    b = emu.post(base, db("w2", ns="wns")).json
    emu.patch(db_path("wns", "w1"), {"spec": {"nodeName": "node-z"}})
    d = emu.delete(db_path("wns", "w2")).json
    w = emu.watch(base + "?watch=True&resourceVersion=" + start)
    eq(w.code, 200, "watch -> 200")
    eq(w.header("Transfer-Encoding"), "chunked", "watch is chunked")
    evs = w.events(4)
    eq([(e["type"], e["object"]["metadata"]["name"]) for e in evs],
       [("ADDED", "w1"), ("ADDED", "w2"), ("MODIFIED", "w1"), ("DELETED", "w2")],
       "watch from N replays every later change in order, no synthetic events")
    rvs = [int(rv_of(e["object"])) for e in evs]
    check(rvs == sorted(rvs) and rvs[0] == int(rv_of(a)), "events carry their resourceVersions in order", rvs)
    check(int(rv_of(evs[3]["object"])) > int(rv_of(b)), "DELETED carries the deletion resourceVersion")
    eq(evs[3]["object"]["spec"]["nodeName"], "node-a", "DELETED carries the last state")
    check(w.quiet(0.3), "then nothing")
    emu.patch(db_path("wns", "w1"), {"metadata": {"labels": {"live": "1"}}})
    e = w.next()
    eq((e["type"], e["object"]["metadata"]["labels"]["live"]), ("MODIFIED", "1"), "live event delivered")
    w.close()
    del d

    for rv in ("0", ""):
        w = emu.watch(base + "?watch=1&timeoutSeconds=1" + ("&resourceVersion=" + rv if rv else ""))
        e = w.next()
        eq((e["type"], e["object"]["metadata"]["name"]), ("ADDED", "w1"),
           "watch from %r starts with synthetic ADDED" % rv)
        eq(w.next(3), "EOF", "timeoutSeconds closes the stream cleanly")
        w.close()
    for v in ("false", "0", "False"):
        r = emu.get(base + "?watch=" + v)
        eq((r.code, r.json["kind"]), (200, "DeviceBindingList"), "watch=%s is a list" % v)

    # bookmarks
    w = emu.watch(base + "?watch=1&allowWatchBookmarks=true&resourceVersion=" + start)
    bm = None
    end = time.time() + secs(5)
    while time.time() < end and bm is None:
        e = w.next(1)
        if isinstance(e, dict) and e["type"] == "BOOKMARK":
            bm = e
    check(bm is not None, "BOOKMARK events with allowWatchBookmarks=true")
    eq((bm["object"]["kind"], bm["object"]["apiVersion"], list(bm["object"]["metadata"])),
       ("DeviceBinding", "podres.dev/v1alpha1", ["resourceVersion"]), "BOOKMARK object shape")
    w.close()
    w = emu.watch(base + "?watch=1&resourceVersion=" + rv_of(emu.get(base).json))
    check(w.quiet(0.8), "no BOOKMARK without allowWatchBookmarks")
    w.close()

    # too new
    cur = int(emu.get(base).json["metadata"]["resourceVersion"])
    w = emu.watch(base + "?watch=1&resourceVersion=%d" % (cur + 1000), timeout=15)
    e = w.next(8)
    eq((e["type"], e["object"]["code"], e["object"]["details"]["causes"][0]["reason"]),
       ("ERROR", 504, "ResourceVersionTooLarge"), "watch from a future resourceVersion -> ERROR 504")
    w.close()

    # expired: history window, then forced compaction
    emu.admin("PUT", "/config", {"history": 3})
    for i in range(5):
        emu.patch(db_path("wns", "w1"), {"metadata": {"annotations": {"i": str(i)}}})
    w = emu.watch(base + "?watch=1&resourceVersion=" + start)
    eq(w.code, 200, "expired watch still answers 200")
    e = w.next()
    eq((e["type"], e["object"]["kind"], e["object"]["code"], e["object"]["reason"]),
       ("ERROR", "Status", 410, "Expired"), "watch older than the history window -> ERROR 410 Expired")
    check(e["object"]["message"].startswith("too old resource version: %s (" % start), "410 message",
          e["object"]["message"])
    eq(w.next(), "EOF", "stream closes after the ERROR")
    w.close()
    emu.admin("PUT", "/config", {"history": 1000})
    cur = emu.get(base).json["metadata"]["resourceVersion"]
    emu.patch(db_path("wns", "w1"), {"metadata": {"annotations": {"i": "x"}}})
    emu.admin("POST", "/compact")
    w = emu.watch(base + "?watch=1&resourceVersion=" + cur)
    e = w.next()
    eq((e["type"], e["object"]["code"]), ("ERROR", 410), "forced compaction -> ERROR 410")
    w.close()
    cur = emu.get(base).json["metadata"]["resourceVersion"]
    w = emu.watch(base + "?watch=1&resourceVersion=" + cur)
    check(w.quiet(0.3), "watch from the current resourceVersion after compaction is fine")
    w.close()
    r = emu.get(base + "?watch=1&sendInitialEvents=true&resourceVersionMatch=NotOlderThan")
    eq(r.code, 422, "sendInitialEvents -> 422 (WatchList gate off)")
    check("sendInitialEvents is forbidden for watch unless the WatchList feature gate is enabled"
          in r.json["message"], "sendInitialEvents message")
    r = emu.get(base + "?watch=1&resourceVersion=0&resourceVersionMatch=NotOlderThan")
    eq(r.code, 422, "resourceVersionMatch on a watch without sendInitialEvents -> 422")
    check("resourceVersionMatch is forbidden for watch unless sendInitialEvents is provided" in r.json["message"],
          "resourceVersionMatch message", r.json["message"])
    w = emu.watch(base + "?watch=1&resourceVersion=" + start, accept=TABLE_ACCEPT)
    e = w.next()
    eq((e["type"], e["object"]["kind"], e["object"]["code"]), ("ERROR", "Status", 410),
       "Table watch: ERROR stays a Status")
    w.close()

    # Table watch
    cur = emu.get(base).json["metadata"]["resourceVersion"]
    w = emu.watch(base + "?watch=true&resourceVersion=" + cur, accept=TABLE_ACCEPT)
    emu.patch(db_path("wns", "w1"), {"spec": {"nodeName": "t1"}})
    emu.patch(db_path("wns", "w1"), {"spec": {"nodeName": "t2"}})
    e1, e2 = w.events(2)
    eq((e1["object"]["kind"], len(e1["object"]["columnDefinitions"]), e1["object"]["rows"][0]["cells"][1]),
       ("Table", 5, "t1"), "Table watch: first event has columnDefinitions")
    eq((e2["object"]["columnDefinitions"], e2["object"]["rows"][0]["cells"][1]), (None, "t2"),
       "later Table events have none")
    eq(e2["object"]["metadata"]["resourceVersion"], rv_of(emu.get(db_path("wns", "w1")).json),
       "Table event carries the resourceVersion")
    w.close()


def selectors(emu):
    ns = "sel"
    emu.post(NS, {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}})
    for name, labels in (("s1", {"tier": "a", "node": "n1"}), ("s2", {"tier": "b", "node": "n1"}),
                         ("s3", {"tier": "c"})):
        emu.post(db_path(ns), db(name, ns=ns, labels=labels))

    def names(q):
        r = emu.get(db_path(ns) + "?" + q)
        if r.code != 200:
            fail("list %s: %r" % (q, r))
        return [i["metadata"]["name"] for i in r.json["items"]]
    from urllib.parse import quote
    for sel, want in (("tier=a", ["s1"]), ("tier==a", ["s1"]), ("tier!=a", ["s2", "s3"]),
                      ("tier in (a,b)", ["s1", "s2"]), ("tier notin (a, b)", ["s3"]), ("node", ["s1", "s2"]),
                      ("!node", ["s3"]), ("node=n1,tier!=b", ["s1"]), ("", ["s1", "s2", "s3"])):
        eq(names("labelSelector=" + quote(sel)), want, "labelSelector %r" % sel)
    eq(emu.get(db_path(ns) + "?labelSelector=" + quote("tier in a")).code, 400, "bad labelSelector -> 400")
    eq(names("fieldSelector=metadata.name%3Ds2"), ["s2"], "fieldSelector metadata.name=")
    eq(names("fieldSelector=metadata.name%3D%3Ds2"), ["s2"], "fieldSelector metadata.name==")
    eq(names("fieldSelector=metadata.name!%3Ds2"), ["s1", "s3"], "fieldSelector metadata.name!=")
    r = emu.get(CR_BASE + "/devicebindings?fieldSelector=metadata.namespace%3Dsel,metadata.name!%3Ds1")
    eq([i["metadata"]["name"] for i in r.json["items"]], ["s2", "s3"], "fieldSelector metadata.namespace, AND")
    r = emu.get(db_path(ns) + "?fieldSelector=spec.nodeName%3Dx")
    eq((r.code, r.json["message"]), (400, "field label not supported: spec.nodeName"),
       "unsupported field -> 400")

    # selectors on watch: moving in and out of the selection
    cur = emu.get(db_path(ns)).json["metadata"]["resourceVersion"]
    w = emu.watch(db_path(ns) + "?watch=1&labelSelector=tier%3Da&resourceVersion=" + cur)
    wf = emu.watch(db_path(ns) + "?watch=1&fieldSelector=metadata.name%3Ds3&resourceVersion=" + cur)
    emu.patch(db_path(ns, "s2"), {"metadata": {"labels": {"tier": "a"}}})
    emu.patch(db_path(ns, "s1"), {"metadata": {"labels": {"tier": "z"}}})
    emu.patch(db_path(ns, "s3"), {"metadata": {"labels": {"seen": "yes"}}})
    evs = w.events(2)
    eq([(e["type"], e["object"]["metadata"]["name"]) for e in evs], [("ADDED", "s2"), ("DELETED", "s1")],
       "label-selected watch: ADDED on entering, DELETED on leaving")
    check(w.quiet(0.3), "label-selected watch skips the rest")
    e = wf.next()
    eq((e["type"], e["object"]["metadata"]["name"]), ("MODIFIED", "s3"), "field-selected watch")
    check(wf.quiet(0.3), "field-selected watch skips the rest")
    w.close()
    wf.close()
    cur = emu.get(db_path(ns)).json["metadata"]["resourceVersion"]
    w = emu.watch(db_path(ns) + "?watch=1&labelSelector=" + quote("tier in (a,c),!gone") + "&resourceVersion=" + cur)
    emu.patch(db_path(ns, "s3"), {"metadata": {"labels": {"gone": "1"}}})
    emu.patch(db_path(ns, "s1"), {"metadata": {"labels": {"tier": "c"}}})
    evs = w.events(2)
    eq([(e["type"], e["object"]["metadata"]["name"]) for e in evs], [("DELETED", "s3"), ("ADDED", "s1")],
       "set-based labelSelector on watch")
    check(w.quiet(0.3), "set-based watch skips the rest")
    w.close()
    w = emu.watch(CR_BASE + "/devicebindings?watch=1&fieldSelector=metadata.namespace%3Dsel&resourceVersion=0")
    eq(sorted(e["object"]["metadata"]["name"] for e in w.events(3)), ["s1", "s2", "s3"],
       "all-namespaces watch with metadata.namespace")
    w.close()


def pods_and_gc(emu):
    ns = "ml"
    r = emu.post(NS, {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}})
    eq(r.code, 201, "namespace ml created")
    eq(r.json["status"]["phase"], "Active", "namespace Active")
    eq(emu.get(NS + "/ml").json["metadata"]["name"], "ml", "GET namespace")
    r = emu.get(NS)
    check(r.json["kind"] == "NamespaceList" and {"default", "ml"} <= {i["metadata"]["name"] for i in r.json["items"]},
          "list namespaces")
    wn = emu.watch(NS + "?watch=1&fieldSelector=metadata.name%3Dml&resourceVersion=0")
    e = wn.next()
    eq((e["type"], e["object"]["kind"], e["object"]["metadata"]["name"]), ("ADDED", "Namespace", "ml"),
       "watch namespaces")
    eq(emu.post(NS, {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "ml"}}).code, 409,
       "duplicate namespace -> 409")

    def pod(name, node):
        return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": ns},
                "spec": {"nodeName": node, "containers": [{"name": "main", "image": "busybox"}]}}
    pods = {}
    for name, node in (("p1", "node-a"), ("p2", "node-b"), ("p3", "node-a")):
        r = emu.post(NS + "/ml/pods", pod(name, node))
        eq(r.code, 201, "pod %s created" % name)
        pods[name] = r.json
    r = emu.post(NS + "/ml/pods", {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "bad"},
                                   "spec": {"containers": [{"name": "c"}]}})
    eq(r.code, 422, "pod without image -> 422")
    p9 = pod("p9", "n")
    p9["metadata"]["namespace"] = "gone"
    eq(emu.post(NS + "/gone/pods", p9).code, 404, "pod in a missing namespace -> 404")
    r = emu.get("/api/v1/pods?fieldSelector=spec.nodeName%3Dnode-a")
    eq(sorted(p["metadata"]["name"] for p in r.json["items"]), ["p1", "p3"], "pods by spec.nodeName")
    eq(r.json["kind"], "PodList", "PodList")
    r = emu.get(NS + "/ml/pods?fieldSelector=spec.nodeName%3Dnode-b")
    eq([p["metadata"]["name"] for p in r.json["items"]], ["p2"], "namespaced pods by spec.nodeName")
    r = emu.get(NS + "/ml/pods/p2")
    eq((r.code, r.json["kind"], r.json["spec"]["nodeName"]), (200, "Pod", "node-b"), "GET pod")
    eq(len(emu.get(NS + "/ml/pods").json["items"]), 3, "list pods in a namespace")
    w = emu.watch("/api/v1/pods?watch=1&fieldSelector=spec.nodeName%3Dnode-b&resourceVersion=0")
    eq(w.next()["object"]["metadata"]["name"], "p2", "pod watch with spec.nodeName")
    check(w.quiet(0.2), "pod watch skips other nodes")
    p4 = pod("p4", "node-b")
    eq(emu.post(NS + "/ml/pods", p4).code, 201, "pod p4 created")
    e = w.next()
    eq((e["type"], e["object"]["metadata"]["name"]), ("ADDED", "p4"), "pod watch sees a new pod on the node")
    eq(emu.delete(NS + "/ml/pods/p4").code, 200, "delete pod p4")
    e = w.next()
    eq((e["type"], e["object"]["metadata"]["name"]), ("DELETED", "p4"), "pod watch sees the deletion")
    w.close()

    def owned(name, owner_name, uid, owner_ns=ns):
        o = db(name, ns=owner_ns)
        o["metadata"]["ownerReferences"] = [{"apiVersion": "v1", "kind": "Pod", "name": owner_name, "uid": uid,
                                             "controller": True, "blockOwnerDeletion": True}]
        r = emu.post(db_path(owner_ns), o)
        if r.code != 201:
            fail("create %s: %r" % (name, r))
        return r.json
    owned("p1", "p1", pods["p1"]["metadata"]["uid"])
    owned("p3", "p3", pods["p3"]["metadata"]["uid"])
    owned("stale", "p2", "11111111-2222-3333-4444-555555555555")
    emu.post(NS, {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "other"}})
    owned("elsewhere", "p2", pods["p2"]["metadata"]["uid"], owner_ns="other")
    bad = db("badref", ns=ns)
    bad["metadata"]["ownerReferences"] = [{"apiVersion": "v1", "kind": "Pod", "name": "p1"}]
    r = emu.post(db_path(ns), bad)
    eq(r.code, 422, "ownerReference without uid -> 422")
    cur = emu.get(db_path(ns)).json["metadata"]["resourceVersion"]
    w = emu.watch(db_path(ns) + "?watch=1&resourceVersion=" + cur)
    r = emu.delete(NS + "/ml/pods/p1", {"propagationPolicy": "Background"})
    eq((r.code, r.json["kind"]), (200, "Pod"), "pod delete returns the pod")
    eq(emu.get(NS + "/ml/pods/p1").code, 404, "pod gone")
    eq(emu.get(db_path(ns, "p1")).code, 200, "dependent still there right after (GC is asynchronous)")
    t0 = time.time()
    e = None
    while time.time() < t0 + secs(5):
        e = w.next(5)
        if not isinstance(e, dict) or (e["type"], e["object"]["metadata"]["name"]) == ("DELETED", "p1"):
            break
    took = time.time() - t0
    eq(isinstance(e, dict) and (e["type"], e["object"]["metadata"]["name"]), ("DELETED", "p1"),
       "GC deletes the dependent with an event")
    check(took >= 0.2, "GC waited its delay (%.2fs)" % took)
    wait_for(lambda: emu.get(db_path(ns, "stale")).code == 404, "owner with a wrong uid to count as absent")
    ok_ = emu.get(db_path("other", "elsewhere")).code == 404
    check(ok_ or wait_for(lambda: emu.get(db_path("other", "elsewhere")).code == 404, "cross-namespace GC"),
          "owner in another namespace counts as absent")
    time.sleep(secs(0.6))
    eq(emu.get(db_path(ns, "p3")).code, 200, "dependent of a live pod stays")
    w.close()

    # namespace deletion removes its content, asynchronously
    r = emu.delete(NS + "/ml")
    eq((r.code, r.json["status"]["phase"]), (200, "Terminating"), "namespace delete -> Terminating")
    e = wn.next()
    eq((e["type"], e["object"]["status"]["phase"]), ("MODIFIED", "Terminating"), "namespace watch: Terminating")
    r = emu.post(db_path(ns), db("late", ns=ns))
    eq(r.code, 403, "create in a terminating namespace -> 403")
    wait_for(lambda: emu.get(NS + "/ml").code == 404, "namespace to go away")
    eq(emu.get(db_path(ns)).json["items"], [], "its DeviceBindings went with it")
    e = wn.next()
    eq((e["type"], e["object"]["metadata"]["name"]), ("DELETED", "ml"), "namespace watch: DELETED")
    wn.close()


def fidelity(emu):
    """Smaller things a real server does that clients see."""
    # Services exist (empty), as `kubectl cluster-info` lists kube-system's.
    r = emu.get("/api/v1/namespaces/kube-system/services?labelSelector=kubernetes.io/cluster-service%3Dtrue")
    eq((r.code, r.json["kind"], r.json["items"]), (200, "ServiceList", []), "services: an empty list")
    check(any(x["name"] == "services" for x in emu.get("/api/v1").json["resources"]),
          "services in /api/v1 discovery")
    # An integer sent as 2.0 is given back as 2 (Go decodes it into an int64).
    emu.post(NS, {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "fid"}})
    eq(emu.post(db_path("fid"), db("f", ns="fid")).code, 201, "create fid/f")
    r = emu.patch(db_path("fid", "f") + "/status", {"status": {"observedRevision": 2.0}})
    check(r.code == 200 and b'"observedRevision": 2.0' not in r.body and b'"observedRevision":2.0' not in r.body
          and r.json["status"]["observedRevision"] == 2, "2.0 in an integer field is stored as 2", r)
    r = emu.get(db_path("fid", "f"))
    check(isinstance(r.json["status"]["observedRevision"], int), "read back as an integer", r)
    # A bad label value: upstream's whole message, examples and regex included.
    r = emu.patch(db_path("fid", "f"), {"metadata": {"labels": {"q": "bad value!"}}})
    check(r.code == 422 and r.json["message"].endswith(
        "regex used for validation is '(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')"),
        "bad label value: upstream's message", r)
    # Creating in a namespace being deleted: the 403 names the object.
    emu.post(db_path("fid"), db("g", ns="fid"))
    emu.patch(db_path("fid", "g"), {"metadata": {"finalizers": ["x/keep"]}})
    emu.delete(NS + "/fid")
    r = emu.post(db_path("fid"), db("q", ns="fid"))
    eq((r.code, r.json["message"], r.json["details"]["name"]),
       (403, 'devicebindings.podres.dev "q" is forbidden: unable to create new content in namespace fid '
        'because it is being terminated', "q"), "create in a terminating namespace: 403 naming it")
    emu.patch(db_path("fid", "g"), {"metadata": {"finalizers": None}})


def run():
    emu = Emulator("--gc-delay", "0.3", "--bookmark-interval", "0.3")
    emu.install_crd()
    create_reads(emu)
    updates(emu)
    patches(emu)
    deletes(emu)
    watches(emu)
    selectors(emu)
    pods_and_gc(emu)
    fidelity(emu)
    emu.stop()


if __name__ == "__main__":
    main(run)
