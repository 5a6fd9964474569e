"""Every fault switch of the emulator, its admin endpoint, token handling and the
request counter that tests read to count API writes."""

import os
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from emutest import (CR_BASE, EMULATOR, Emulator, check, db, db_path, eq, main, secs)  # noqa: E402

LIST = db_path("default")


def startup_faults():
    emu = Emulator("--faults", "503:count=2:verbs=list:retry-after=3")
    emu.install_crd()
    for i in (1, 2):
        r = emu.get(LIST)
        eq((r.code, r.json["reason"], r.header("Retry-After")), (503, "ServiceUnavailable", "3"),
           "--faults 503 with Retry-After, list %d" % i)
        eq(r.json["details"]["retryAfterSeconds"], 3, "503 Status carries retryAfterSeconds")
    eq(emu.get(LIST).code, 200, "third list passes (count=2 used up)")
    eq(emu.post(LIST, db("x")).code, 201, "create was never affected (verbs=list)")
    eq(emu.admin("GET", "/faults")["faults"], [], "no faults left")
    emu.stop()
    r = subprocess.run(["/usr/bin/python3", EMULATOR, "--listen", "127.0.0.1:0", "--faults", "418"],
                       stderr=subprocess.PIPE, timeout=secs(10))
    check(r.returncode == 2 and b"unknown fault" in r.stderr, "a bad --faults spec is refused at start",
          r.stderr)


def switches(emu):
    def setf(spec):
        emu.admin("PUT", "/faults", {"spec": spec})

    # a body that is no spec (a bare number, a list): 400, the faults unchanged
    for body in (503, [1], {"spec": 7}):
        r = emu.req("PUT", "/_emulator/faults", body, token="")
        eq(r.code, 400, "PUT /_emulator/faults with %r" % (body,))
    eq(emu.admin("GET", "/faults")["faults"], [], "no fault set by a bad body")

    setf("429:count=1")
    r = emu.get(LIST)
    eq((r.code, r.header("Retry-After"), r.header("Content-Type").split(";")[0], r.body),
       (429, "1", "text/plain", b"Too many requests, please try again later.\n"),
       "429 plain text with Retry-After (the real rate limiter's reply)")
    eq(emu.get(LIST).code, 200, "next request passes")

    setf("429:body=status:retry-after=2:count=1")
    r = emu.get(LIST)
    eq((r.code, r.json["kind"], r.json["reason"], r.json["details"]["retryAfterSeconds"],
        r.header("Retry-After")), (429, "Status", "TooManyRequests", 2, "2"), "429 as a TooManyRequests Status")

    for code, reason in ((500, "InternalError"), (503, "ServiceUnavailable")):
        setf("%d:count=1" % code)
        r = emu.get(LIST)
        eq((r.code, r.json["reason"], r.header("Retry-After")), (code, reason, None),
           "%d without Retry-After" % code)
        setf("%d:count=1:retry-after=1" % code)
        r = emu.get(LIST)
        eq((r.code, r.header("Retry-After")), (code, "1"), "%d with Retry-After" % code)
    eq(emu.get(LIST).code, 200, "faults used up")

    # a resource filter and a clear
    setf("500:resource=pods")
    eq(emu.get("/api/v1/pods").code, 500, "resource=pods fault hits pods")
    eq(emu.get(LIST).code, 200, "...and not devicebindings")
    eq(emu.admin("DELETE", "/faults"), {"ok": True}, "DELETE /_emulator/faults clears")
    eq(emu.get("/api/v1/pods").code, 200, "pods answer again")

    # 409 on the next N updates
    emu.post(LIST, db("c"))
    setf("409:count=2")
    cur = emu.get(db_path("default", "c")).json
    eq(emu.post(LIST, db("c2")).code, 201, "create is not an update: unaffected by the 409 switch")
    r = emu.put(db_path("default", "c"), cur)
    eq((r.code, r.json["reason"]), (409, "Conflict"), "forced 409 on update 1")
    check("the object has been modified" in r.json["message"] and '"c"' in r.json["message"],
          "forced 409 has the real Conflict message", r.json["message"])
    eq(emu.patch(db_path("default", "c"), {"spec": {"nodeName": "n2"}}).code, 409, "forced 409 on update 2")
    eq(emu.patch(db_path("default", "c"), {"spec": {"nodeName": "n2"}}).code, 200, "third update passes")

    # 401 and 403 switches
    setf("401:count=1,403:count=1:verbs=get")
    eq(emu.get(LIST).json["reason"], "Unauthorized", "401 switch")
    eq(emu.get(db_path("default", "c")).code, 403, "403 switch (verbs=get)")
    eq(emu.get(LIST).code, 200, "both used up")

    # stall a request
    setf("stall:seconds=0.6:count=1:verbs=get")
    t0 = time.time()
    r = emu.get(db_path("default", "c"))
    took = time.time() - t0
    check(r.code == 200 and took >= 0.55, "stall delays the answer (%.2fs)" % took)

    # dropped watch stream
    setf("watch-drop:after=0.5:count=1")
    w = emu.watch(LIST + "?watch=1&resourceVersion=0")
    e = w.next()
    eq(e["type"], "ADDED", "dropping watch delivers events first")
    while isinstance(e, dict):
        e = w.next(3)
    eq(e, "DROPPED", "watch-drop closes the connection without the chunked terminator")
    w.close()
    w = emu.watch(LIST + "?watch=1&timeoutSeconds=1&resourceVersion=" + emu.get(LIST).json["metadata"][
        "resourceVersion"])
    eq(w.next(4), "EOF", "next watch is unaffected and ends cleanly")
    w.close()

    # stalled watch stream
    setf("watch-stall:seconds=1.2:count=1")
    w = emu.watch(LIST + "?watch=1&resourceVersion=" + emu.get(LIST).json["metadata"]["resourceVersion"])
    emu.patch(db_path("default", "c"), {"spec": {"nodeName": "stalled"}})
    check(w.quiet(0.7), "stalled watch delivers nothing")
    e = w.next(3)
    eq((e["type"], e["object"]["spec"]["nodeName"]), ("MODIFIED", "stalled"), "then resumes")
    w.close()

    # admin: drop all watches, compaction that expires open watches
    w1 = emu.watch(LIST + "?watch=1&resourceVersion=0")
    w2 = emu.watch(CR_BASE + "/devicebindings?watch=1&resourceVersion=0")
    w1.events(2)
    r = emu.admin("POST", "/watches/drop")
    check(r["dropped"] >= 2, "POST /_emulator/watches/drop drops the open watches", r)
    e = w1.next()
    while isinstance(e, dict):
        e = w1.next()
    eq(e, "DROPPED", "watch 1 dropped")
    e = w2.next()
    while isinstance(e, dict):
        e = w2.next()
    eq(e, "DROPPED", "watch 2 dropped")
    before = emu.get(LIST).json["metadata"]["resourceVersion"]
    w = emu.watch(LIST + "?watch=1&resourceVersion=" + before)
    emu.patch(db_path("default", "c"), {"spec": {"nodeName": "pre-compact"}})
    eq(w.next()["type"], "MODIFIED", "event before compaction")
    r = emu.admin("POST", "/compact", {"expireWatches": True})
    check(r["compactedResourceVersion"] > int(before), "compaction reports its resourceVersion")
    e = w.next()
    eq((e["type"], e["object"]["code"], e["object"]["reason"]), ("ERROR", 410, "Expired"),
       "open watch gets ERROR 410 on compaction with expireWatches")
    eq(w.next(), "EOF", "and ends")
    w.close()
    w = emu.watch(LIST + "?watch=1&resourceVersion=" + before)
    eq(w.next()["object"]["code"], 410, "re-watch from the old resourceVersion -> 410")
    w.close()


def bad_admin(emu):
    r = emu.req("PUT", "/_emulator/faults", {"spec": "500:count=x"}, token="")
    eq(r.code, 400, "bad fault spec -> 400 from the admin endpoint")
    r = emu.req("GET", "/_emulator/nosuch", token="")
    eq(r.code, 404, "unknown admin path -> 404")
    r = emu.req("PUT", "/_emulator/faults", b"500:count=1", ctype="text/plain", token="")
    eq((r.code, r.json["faults"][0]["kind"]), (200, "500"), "fault spec as a plain-text body")
    eq(emu.get(LIST).code, 500, "...and it works")
    r = emu.req("POST", "/_emulator/faults", b"429:count=1", ctype="text/plain", token="")
    eq(len(r.json["faults"]), 2, "POST adds a rule")
    emu.admin("DELETE", "/faults")


def counters(emu):
    emu.admin("DELETE", "/counters")
    eq(emu.admin("GET", "/counters")["total"], 0, "counters reset")
    emu.post(LIST, db("k1"))
    emu.post(LIST, db("k2"))
    emu.post(LIST, db("k2"))
    cur = emu.get(db_path("default", "k1")).json
    emu.put(db_path("default", "k1", "status"), dict(cur, status={"phase": "Bound"}))
    emu.patch(db_path("default", "k2"), {"spec": {"nodeName": "z"}})
    emu.get(LIST)
    w = emu.watch(LIST + "?watch=1&timeoutSeconds=1")
    w.close()
    emu.get("/apis")
    emu.admin("GET", "/state")
    c = emu.admin("GET", "/counters")
    n = c["counts"]
    eq(n["create"]["devicebindings"], {"201": 2, "409": 1}, "creates by code")
    eq(n["update"]["devicebindings/status"], {"200": 1}, "status update counted apart")
    eq(n["patch"]["devicebindings"], {"200": 1}, "patch counted")
    eq((n["get"]["devicebindings"], n["list"]["devicebindings"], n["watch"]["devicebindings"]),
       ({"200": 1}, {"200": 1}, {"200": 1}), "get, list and watch counted")
    eq(n["get"]["/apis"], {"200": 1}, "non-resource requests counted by path")
    check(not any("/_emulator" in r["resource"] for r in c["requests"]), "admin requests not counted")
    eq(emu.counter(verb="create,update,patch,delete", code="2xx"), 4, "filtered count of successful writes")
    eq(emu.counter(verb="create", resource="devicebindings", code="409"), 1, "filter by verb, resource, code")
    eq(emu.counter(resource="devicebindings/status"), 1, "filter by subresource")
    r = emu.admin("GET", "/requests")
    check(any(x["verb"] == "watch" for x in r["requests"]), "request log lists the watch")
    emu.admin("POST", "/counters/reset")
    eq(emu.admin("GET", "/counters")["total"], 0, "POST /_emulator/counters/reset")
    st = emu.admin("GET", "/state")
    check(st["resourceVersion"] > 0 and "historySize" in st and st["objects"]["podres.dev/devicebindings"] >= 2,
          "GET /_emulator/state", st)
    r = emu.admin("PUT", "/config", {"gcDelay": 2, "history": 50, "bookmarkInterval": 1})
    eq((r["gcDelay"], r["historySize"], r["bookmarkInterval"]), (2.0, 50, 1.0), "PUT /_emulator/config")
    eq(emu.req("PUT", "/_emulator/config", {"gcDelay": 0}, token="").code, 400, "gcDelay must be > 0")


def tokens():
    emu = Emulator("--forbidden-token", "nope", token="t1")
    r = emu.get(LIST, token="")
    eq((r.code, r.json["reason"], r.json["message"]), (401, "Unauthorized", "Unauthorized"), "no token -> 401")
    eq(emu.get(LIST, token="wrong").code, 401, "wrong token -> 401")
    eq(emu.get("/api/v1/namespaces/default/pods").code, 200, "right token -> 200")
    emu.install_crd()
    r = emu.get(LIST, token="nope")
    eq((r.code, r.json["reason"]), (403, "Forbidden"), "denied token -> 403")
    eq(r.json["message"], 'devicebindings.podres.dev is forbidden: User "system:serviceaccount:default:forbidden" '
       'cannot list resource "devicebindings" in API group "podres.dev" in the namespace "default"',
       "403 message as RBAC writes it")
    eq(emu.admin("GET", "/state")["tokenRequired"], True, "admin endpoint needs no token")
    emu.admin("POST", "/token/expire")
    eq(emu.get(LIST).code, 401, "expired token -> 401")
    eq(emu.get(LIST).code, 401, "...and stays 401")
    emu.admin("POST", "/token", {"token": "t2"})
    eq(emu.get(LIST, token="t2").code, 200, "replaced token -> 200")
    eq(emu.get(LIST, token="t1").code, 401, "old token still refused")
    emu.admin("POST", "/token", {"token": "t3", "keepOld": True})
    eq((emu.get(LIST, token="t2").code, emu.get(LIST, token="t3").code), (200, 200), "keepOld accepts both")
    emu.stop()


def token_file_rotation():
    """Checklist 47: forced token expiry -> 401 until the client re-reads a replaced token file."""
    from emutest import tmpdir
    sa = os.path.join(tmpdir(), "sa")
    emu = Emulator("--serviceaccount-dir", sa, token="file-t1")

    def file_token():
        with open(os.path.join(sa, "token")) as f:
            return f.read()
    eq(file_token(), "file-t1", "--serviceaccount-dir token file holds the token")
    eq(emu.get("/api/v1/namespaces", token=file_token()).code, 200, "token from the file -> 200")
    emu.admin("POST", "/token/expire")
    eq(emu.get("/api/v1/namespaces", token=file_token()).code, 401, "expired: the file's token -> 401")
    emu.admin("POST", "/token", {"token": "file-t2"})
    eq(emu.get("/api/v1/namespaces", token="file-t1").code, 401, "a client that kept the old token: 401")
    eq(file_token(), "file-t2", "the replaced token is written to the token file")
    eq(emu.get("/api/v1/namespaces", token=file_token()).code, 200, "re-reading the token file -> 200")
    emu.stop()


def tls():
    emu = Emulator(tls=True, token="tls-token")
    r = emu.get("/version")
    eq(r.code, 200, "TLS with the CA from make-test-certs and a token")
    eq(emu.get("/version", token="").code, 401, "TLS without a token -> 401")
    with open(emu.kubeconfig) as f:
        kc = f.read()
    check("server: \"https://127.0.0.1:%d\"" % emu.port in kc and "certificate-authority-data: " in kc and
          'token: "tls-token"' in kc, "--kubeconfig-out has server, CA data and token")
    emu.stop()


def run():
    startup_faults()
    emu = Emulator()
    emu.install_crd()
    switches(emu)
    bad_admin(emu)
    counters(emu)
    emu.stop()
    tokens()
    token_file_rotation()
    tls()


if __name__ == "__main__":
    main(run)
