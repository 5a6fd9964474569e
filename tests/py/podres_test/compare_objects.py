# SPDX-License-Identifier: Apache-2.0
"""python3 -m podres_test.compare_objects WANT GOT [--only-in-want] - test 79's
comparison of two streams of Kubernetes objects: every object of WANT
(kubectl kustomize) has an equal one in GOT (helm template), labels and
annotations aside (of the object and of a pod template); without
--only-in-want GOT has nothing more. Prints the differences, or "N
objects"; exits 1 with any.
"""
import json
import sys

import yaml

# kustomize puts its namespace on kinds it does not know to be cluster-scoped (the admission
# policy); the API server ignores it there.
CLUSTER = {"ClusterRole", "ClusterRoleBinding", "CustomResourceDefinition", "Namespace",
           "ValidatingAdmissionPolicy", "ValidatingAdmissionPolicyBinding", "FlowSchema",
           "PriorityLevelConfiguration"}


def load(path):
    out = {}
    for d in yaml.safe_load_all(open(path)):
        if d:
            if d["kind"] in CLUSTER:
                d["metadata"].pop("namespace", None)
            out[(d["kind"], d["metadata"].get("namespace", ""), d["metadata"]["name"])] = d
    return out


def strip(d):
    d = json.loads(json.dumps(d))
    for m in [d["metadata"], ((d.get("spec") or {}).get("template") or {}).get("metadata") or {}]:
        m.pop("labels", None)
        m.pop("annotations", None)
    return d


def diff(a, b, path=""):
    if type(a) != type(b):
        return ["%s: %r != %r" % (path, a, b)]
    if isinstance(a, dict):
        out = []
        for k in sorted(set(a) | set(b)):
            if k not in b:
                out.append("%s.%s: only in deploy/" % (path, k))
            elif k not in a:
                out.append("%s.%s: only in the chart" % (path, k))
            else:
                out += diff(a[k], b[k], "%s.%s" % (path, k))
        return out
    if isinstance(a, list):
        if len(a) != len(b):
            return ["%s: %d items != %d" % (path, len(a), len(b))]
        return [x for i in range(len(a)) for x in diff(a[i], b[i], "%s[%d]" % (path, i))]
    return [] if a == b else ["%s: %r != %r" % (path, a, b)]


want, got = load(sys.argv[1]), load(sys.argv[2])
bad = []
for key, w in want.items():
    if key[0] == "Namespace":
        continue
    if key not in got:
        bad.append("%s %s/%s: not rendered by the chart" % key)
        continue
    bad += ["%s %s/%s%s" % (key + (d,)) for d in diff(strip(w), strip(got[key]))]
if "--only-in-want" not in sys.argv:
    bad += ["%s %s/%s: only in the chart" % k for k in got if k not in want]
print("\n".join(bad) if bad else "%d objects" % len(want))
sys.exit(1 if bad else 0)
