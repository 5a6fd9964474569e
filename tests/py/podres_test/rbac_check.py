# SPDX-License-Identifier: Apache-2.0
"""python3 -m podres_test.rbac_check ROLE.json [selftest] - test 40's
least-privilege check of the syncer's ClusterRole as the API server stores
it (kubectl get clusterrole -o json): exactly the grants in ALLOWED, no
wildcard, no nonResourceURLs, no aggregation, none missing. Prints the
problems (or "ok"); exits 1 with any. selftest: the checker must reject
each of a few widened or narrowed copies of ROLE.
"""
import json
import sys

ALLOWED = {("podres.dev", "devicebindings"): {"get", "list", "watch", "create", "update", "patch", "delete"},
           ("podres.dev", "devicebindings/status"): {"get", "list", "watch", "create", "update", "patch", "delete"},
           ("", "pods"): {"get", "list", "watch"},
           ("", "nodes"): {"get"},
           ("podres.dev", "nodedevices"): {"get", "list", "watch", "create"},
           ("podres.dev", "nodedevices/status"): {"patch"},
           ("events.k8s.io", "events"): {"create", "patch"},
           ("resource.k8s.io", "resourceslices"): {"get", "list", "watch"}}


def problems(role):
    out, granted = [], set()
    if role.get("aggregationRule"):
        out.append("aggregationRule (aggregates other roles' rules)")
    for i, r in enumerate(role.get("rules") or []):
        if r.get("nonResourceURLs"):
            out.append("rules[%d]: nonResourceURLs %s" % (i, r["nonResourceURLs"]))
        for g in r.get("apiGroups") or []:
            for res in r.get("resources") or []:
                for v in r.get("verbs") or []:
                    if "*" in (g, res, v):
                        out.append("rules[%d]: wildcard (%r, %r, %r)" % (i, g, res, v))
                    elif v not in ALLOWED.get((g, res), ()):
                        out.append("rules[%d]: grants %s on %s in group %r" % (i, v, res, g))
                    else:
                        granted.add((g, res, v))
    missing = sorted((g, r, v) for (g, r), vs in ALLOWED.items() for v in vs if (g, r, v) not in granted)
    if missing:
        out.append("missing grants the syncer needs: %s" % missing)
    return out


role = json.load(open(sys.argv[1]))
if sys.argv[2:] == ["selftest"]:
    import copy
    widen = [lambda r: r["rules"][0]["verbs"].append("deletecollection"),
             lambda r: r["rules"][1]["resources"].append("secrets"),
             lambda r: r["rules"][1]["verbs"].append("delete"),
             lambda r: r["rules"].append({"apiGroups": [""], "resources": ["events"], "verbs": ["create"]}),
             lambda r: r["rules"].append({"apiGroups": ["*"], "resources": ["devicebindings"], "verbs": ["get"]}),
             lambda r: r["rules"].append({"nonResourceURLs": ["/metrics"], "verbs": ["get"]}),
             lambda r: r.__setitem__("aggregationRule", {"clusterRoleSelectors": [{"matchLabels": {"a": "b"}}]}),
             lambda r: r["rules"][0]["verbs"].remove("watch"),
             lambda r: r["rules"][2]["verbs"].append("list")]
    for i, w in enumerate(widen):
        r = copy.deepcopy(role)
        w(r)
        if not problems(r):
            print("the checker accepted altered copy #%d: %s" % (i, json.dumps(r["rules"])))
            sys.exit(1)
    print("%d altered copies rejected" % len(widen))
    sys.exit(0)
p = problems(role)
print("\n".join(p) if p else "ok")
sys.exit(1 if p else 0)
