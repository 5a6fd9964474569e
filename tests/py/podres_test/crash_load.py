# SPDX-License-Identifier: Apache-2.0
"""python3 -m podres_test.crash_load SOCK MODE OUT [ROUND] - test 61's load on
podresd's unix socket SOCK while it is killed. MODE write: 4 threads PUT new
pods until the connection is refused, appending acknowledged names to OUT;
OUT.started.ROUND appears once they run.
MODE follow: watch from the revision in OUT.since, resume with since= after
every disconnect, append "revision type kind name" to OUT, stop when
OUT.stop exists. What was acknowledged against what survived is the shell
test's to compare.
"""
import http.client
import json
import os
import sys
import threading
import time

from podres_test.client import UnixConn

sock, mode, out = sys.argv[1], sys.argv[2], sys.argv[3]


def writer(round_, w, f, lock):
    i = 0
    while True:
        i += 1
        name = "r%d-w%d-%d" % (round_, w, i)
        body = {"uid": "u-" + name, "containers": [{"name": "c", "cpuIds": [i % 64]}]}
        if i % 5 == 0:
            body["containers"][0]["devices"] = [
                {"resourceName": "example.com/gpu", "deviceIds": ["gpu-%d" % ((i // 5) % 8)]}]
        try:
            c = UnixConn(sock, 5)
            c.request("PUT", "/v1/namespaces/ns%d/pods/%s" % (w, name), json.dumps(body),
                      {"Content-Type": "application/json"})
            code = c.getresponse().status
            c.close()
        except OSError:
            return
        if code in (200, 201):
            with lock:
                f.write("ns%d/%s\n" % (w, name))
                f.flush()
        if code == 409:
            continue


def follow():
    since = int(open(out + ".since").read())
    f = open(out, "a")
    while not os.path.exists(out + ".stop"):
        try:
            c = UnixConn(sock, 5)
            c.request("GET", "/v1/watch?since=%d" % since)
            r = c.getresponse()
            if r.status != 200:
                f.write("HTTP %d %s\n" % (r.status, r.read()[:200]))
                f.flush()
                return
            for line in r:
                ev = json.loads(line)
                if ev["type"] == "BOOKMARK":
                    continue
                since = ev["revision"]
                o = ev.get("object", {})
                f.write("%d %s %s %s/%s\n" % (since, ev["type"], ev.get("kind"),
                                               o.get("namespace", ""), o.get("name", o.get("id"))))
                f.flush()
        except (OSError, http.client.HTTPException, ValueError):
            pass
        time.sleep(0.02)


if mode == "write":
    f = open(out, "a")
    lock = threading.Lock()
    ths = [threading.Thread(target=writer, args=(int(sys.argv[4]), w, f, lock)) for w in range(4)]
    for t in ths:
        t.start()
    # The shell kills podresd a random moment after this file appears, so the
    # moment falls among the writes, not in the interpreter's start-up.
    open("%s.started.%s" % (out, sys.argv[4]), "w").close()
    for t in ths:
        t.join()
else:
    follow()
