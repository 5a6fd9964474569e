"""The project's DeviceBinding CRD, and CRD registration in the emulator.

Checks that schema/ and deploy/ agree, that the CRD is the one CONTRACT §4
describes, and that the emulator registers it as a real API server would:
Established, names defaulted, structural schema enforced, unknown fields
pruned, status subresource, discovery, Table columns.
"""

import copy
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from emutest import (CR_BASE, ROOT, TABLE_ACCEPT, Emulator, check, crd_object, db, db_path,  # noqa: E402
                     eq, fail, main)

CRDS = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions"


def static_checks():
    a = os.path.join(ROOT, "schema", "crd-devicebinding.yaml")
    b = os.path.join(ROOT, "deploy", "crd-devicebinding.yaml")
    with open(a, "rb") as fa, open(b, "rb") as fb:
        check(fa.read() == fb.read(), "schema/crd-devicebinding.yaml and deploy/crd-devicebinding.yaml "
              "are identical")
    crd = crd_object(a)
    eq(crd["apiVersion"], "apiextensions.k8s.io/v1", "CRD apiVersion")
    eq(crd["metadata"]["name"], "devicebindings.podres.dev", "CRD name")
    spec = crd["spec"]
    eq(spec["group"], "podres.dev", "group")
    eq(spec["scope"], "Namespaced", "namespaced")
    eq((spec["names"]["plural"], spec["names"]["kind"], spec["names"]["shortNames"]),
       ("devicebindings", "DeviceBinding", ["dvb"]), "plural, kind, short name")
    eq([v["name"] for v in spec["versions"]], ["v1alpha1"], "one version, v1alpha1")
    v = spec["versions"][0]
    check(v["served"] and v["storage"], "v1alpha1 served and stored")
    eq(v.get("subresources"), {"status": {}}, "status subresource")
    cols = [(c["name"].upper(), c["type"], c["jsonPath"]) for c in v["additionalPrinterColumns"]]
    eq(cols, [("NODE", "string", ".spec.nodeName"), ("PHASE", "string", ".status.phase"),
              ("DEVICES", "string", ".status.summary"), ("AGE", "date", ".metadata.creationTimestamp")],
       "printer columns of CONTRACT §4")
    s = v["schema"]["openAPIV3Schema"]
    sp = s["properties"]["spec"]["properties"]
    eq(sp["nodeName"]["type"], "string", "spec.nodeName")
    dev = sp["containers"]["items"]["properties"]["devices"]["items"]["properties"]
    eq(sorted(dev), ["deviceIds", "resourceName"], "spec.containers[].devices[] fields")
    st = s["properties"]["status"]["properties"]
    eq(sorted(st), ["conditions", "containers", "nodeName", "observedRevision", "phase", "podUID",
                    "summary"], "status fields")
    eq(st["phase"]["enum"], ["Pending", "Bound", "Conflict"], "status.phase enum")
    eq((st["observedRevision"]["type"], st["observedRevision"]["format"]), ("integer", "int64"),
       "status.observedRevision int64")
    sdev = st["containers"]["items"]["properties"]["devices"]["items"]["properties"]
    eq(sdev["topology"]["properties"]["nodes"]["items"]["properties"]["id"]["type"], "integer",
       "status devices topology.nodes[].id")
    eq(sorted(st["conditions"]["items"]["properties"]),
       ["lastTransitionTime", "message", "reason", "status", "type"], "condition fields")
    structural(s)
    return crd


def structural(root):
    """The rules of a structural schema (apiextensions validation): a type on every
    node (unless x-kubernetes-int-or-string / preserve-unknown-fields), items on
    arrays, properties only on objects, and only metadata, spec, status, kind,
    apiVersion at the root."""
    eq(root.get("type"), "object", "schema root is an object")
    check(set(root["properties"]) <= {"metadata", "spec", "status", "kind", "apiVersion"},
          "only metadata/spec/status/kind/apiVersion at the root", sorted(root["properties"]))
    bad = []

    def walk(node, path):
        if not isinstance(node, dict):
            bad.append("%s: not a mapping" % path)
            return
        t = node.get("type")
        if not t and not (node.get("x-kubernetes-int-or-string") or
                          node.get("x-kubernetes-preserve-unknown-fields")):
            bad.append("%s.type: Required value" % path)
        if t == "array" and "items" not in node:
            bad.append("%s.items: Required value" % path)
        if "properties" in node and t not in ("object", None):
            bad.append("%s: properties on a %s" % (path, t))
        for k in ("allOf", "anyOf", "oneOf", "not"):
            if k in node and "type" in str(node[k]):
                bad.append("%s.%s: must not specify type" % (path, k))
        for k, v in (node.get("properties") or {}).items():
            walk(v, "%s.properties[%s]" % (path, k))
        if isinstance(node.get("items"), dict):
            walk(node["items"], path + ".items")
        if isinstance(node.get("additionalProperties"), dict):
            walk(node["additionalProperties"], path + ".additionalProperties")
    walk(root, "openAPIV3Schema")
    eq(bad, [], "the project's CRD schema is structural")


def registration(emu, crd):
    eq(emu.get(CRDS + "/devicebindings.podres.dev").code, 404, "CRD absent before create")
    eq(emu.get(CR_BASE + "/devicebindings").code, 404, "CR endpoint 404 before the CRD exists")
    r = emu.post(CRDS + "?fieldManager=kubectl-client-side-apply&fieldValidation=Strict", crd)
    eq(r.code, 201, "POST CRD -> 201")
    o = r.json
    m = o["metadata"]
    check(m.get("uid") and m.get("resourceVersion") and m.get("creationTimestamp"),
          "CRD has uid, resourceVersion, creationTimestamp")
    eq(m.get("generation"), 1, "CRD generation 1")
    conds = {c["type"]: (c["status"], c["reason"]) for c in o["status"]["conditions"]}
    eq(conds.get("NamesAccepted"), ("True", "NoConflicts"), "NamesAccepted=True NoConflicts")
    eq(conds.get("Established"), ("True", "InitialNamesAccepted"), "Established=True")
    want_names = dict(crd["spec"]["names"], singular="devicebinding", listKind="DeviceBindingList")
    eq(o["status"]["acceptedNames"], want_names, "acceptedNames = spec.names with singular/listKind defaulted")
    eq(o["status"]["storedVersions"], ["v1alpha1"], "storedVersions")
    eq(emu.post(CRDS, crd).code, 409, "duplicate CRD -> 409")
    r = emu.get(CRDS)
    eq([i["metadata"]["name"] for i in r.json["items"]], ["devicebindings.podres.dev"], "list CRDs")
    r = emu.patch(CRDS + "/devicebindings.podres.dev?fieldManager=kubectl-client-side-apply",
                  {"metadata": {"annotations": {"kubectl.kubernetes.io/last-applied-configuration": "{}"}}})
    eq((r.code, r.json["metadata"]["annotations"]["kubectl.kubernetes.io/last-applied-configuration"],
        r.json["metadata"]["generation"]), (200, "{}", 1), "merge PATCH on the CRD (kubectl re-apply)")
    check(int(r.json["metadata"]["resourceVersion"]) > int(m["resourceVersion"]), "CRD patch bumps resourceVersion")

    # names defaulted
    c2 = copy.deepcopy(crd)
    c2["metadata"]["name"] = "widgets.example.com"
    c2["spec"]["group"] = "example.com"
    c2["spec"]["names"] = {"plural": "widgets", "kind": "Widget"}
    del c2["spec"]["versions"][0]["subresources"]
    off = copy.deepcopy(c2["spec"]["versions"][0])
    off.update(name="v1beta1", served=False, storage=False)
    c2["spec"]["versions"].append(off)
    r = rc = emu.post(CRDS, c2)
    eq(r.code, 201, "second CRD created")
    wp = "/apis/example.com/v1alpha1/namespaces/default/widgets"
    w = {"apiVersion": "example.com/v1alpha1", "kind": "Widget", "metadata": {"name": "w"},
         "spec": {"nodeName": "n"}, "status": {"phase": "Bound"}}
    r = emu.post(wp, w)
    eq((r.code, r.json.get("status")), (201, {"phase": "Bound"}), "without the status subresource, status is "
       "written through the main endpoint")
    r = emu.get(wp + "/w/status")
    eq((r.code, r.json["kind"]), (404, "Status"), "/status on a CRD without the status subresource -> 404")
    eq(emu.put(wp + "/w/status", r.json).code, 404, "PUT /status without the subresource -> 404")
    eq(emu.get("/apis/example.com/v1beta1/namespaces/default/widgets").code, 404, "unserved version -> 404")
    eq(emu.get("/apis/example.com/v1beta1").code, 404, "unserved version not in discovery")
    res = [x["name"] for x in emu.get("/apis/example.com/v1alpha1").json["resources"]]
    eq(res, ["widgets"], "no widgets/status in discovery without the subresource")
    eq((rc.json["spec"]["names"]["singular"], rc.json["spec"]["names"]["listKind"]),
       ("widget", "WidgetList"), "singular and listKind defaulted")
    eq(rc.json["spec"]["conversion"], {"strategy": "None"}, "conversion strategy defaulted")
    eq(emu.delete(CRDS + "/widgets.example.com").code, 200, "delete second CRD")

    # discovery
    r = emu.get("/apis")
    groups = {g["name"]: g for g in r.json["groups"]}
    check("podres.dev" in groups and "apiextensions.k8s.io" in groups, "/apis lists podres.dev")
    eq(groups["podres.dev"]["preferredVersion"]["groupVersion"], "podres.dev/v1alpha1", "preferredVersion")
    r = emu.get(CR_BASE)
    res = {x["name"]: x for x in r.json["resources"]}
    d = res.get("devicebindings") or fail("no devicebindings in discovery")
    eq((d["namespaced"], d["kind"], d["singularName"], d["shortNames"]),
       (True, "DeviceBinding", "devicebinding", ["dvb"]), "devicebindings discovery entry")
    eq(sorted(d["verbs"]), sorted(["delete", "deletecollection", "get", "list", "patch", "create",
                                   "update", "watch"]), "eight verbs")
    eq(d.get("categories"), ["podres"], "categories in discovery")
    eq(sorted(res["devicebindings/status"]["verbs"]), ["get", "patch", "update"], "status subresource listed")
    eq((res["devicebindings/status"]["namespaced"], res["devicebindings/status"]["kind"]),
       (True, "DeviceBinding"), "status subresource entry")
    r = emu.get("/apis/apiextensions.k8s.io/v1")
    crdres = {x["name"]: x for x in r.json["resources"]}
    c = crdres["customresourcedefinitions"]
    eq((c["shortNames"], c["namespaced"], c["kind"], c["singularName"], sorted(c["verbs"]), c.get("categories")),
       (["crd", "crds"], False, "CustomResourceDefinition", "customresourcedefinition",
        sorted(["create", "delete", "deletecollection", "get", "list", "patch", "update", "watch"]),
        ["api-extensions"]), "CRD discovery entry")
    eq(sorted(crdres["customresourcedefinitions/status"]["verbs"]), ["get", "patch", "update"],
       "customresourcedefinitions/status listed")
    agg = {"Accept": "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList,"
                     "application/json;g=apidiscovery.k8s.io;v=v2beta1;as=APIGroupDiscoveryList,application/json"}
    for path, kind in (("/apis", "APIGroupList"), (CR_BASE, "APIResourceList")):
        r = emu.get(path, headers=agg)
        eq((r.code, r.header("Content-Type"), r.json["kind"]), (200, "application/json", kind),
           "aggregated Accept on %s gets legacy JSON" % path)
    eq(emu.get("/apis/podres.dev").json["kind"], "APIGroup", "/apis/podres.dev APIGroup")
    r = emu.get("/api", headers={"Accept": "application/json;g=apidiscovery.k8s.io;v=v2;"
                                 "as=APIGroupDiscoveryList,application/json"})
    eq((r.code, r.header("Content-Type"), r.json["versions"]), (200, "application/json", ["v1"]),
       "aggregated Accept gets legacy /api")
    check(any(x["name"] == "pods" for x in emu.get("/api/v1").json["resources"]), "/api/v1 lists pods")
    r = emu.get("/version")
    eq((r.json["major"], r.json["gitVersion"]), ("1", "v1.30.0-emu"), "/version")
    r = emu.get("/openapi/v2", headers={"Accept": "application/com.github.proto-openapi.spec.v2@v1.0"
                                        "+protobuf"})
    eq((r.code, r.body), (200, b""), "/openapi/v2 is an empty protobuf document")
    check("protobuf" in r.header("Content-Type"), "/openapi/v2 protobuf content type")
    eq(emu.get("/openapi/v3").code, 404, "/openapi/v3 404")
    r = emu.get("/apis/nosuch.io/v1/things")
    eq((r.code, r.json["kind"], r.json["message"]), (404, "Status", "the server could not find the requested "
                                                     "resource"), "unknown path -> 404 Status")
    for path in (CR_BASE + "/widgets", "/api/v1/secrets", "/apis/podres.dev/v9/devicebindings", "/nosuch"):
        r = emu.get(path)
        eq((r.code, r.json and r.json["message"]), (404, "the server could not find the requested resource"),
           "unknown resource/version %s -> 404 Status" % path)


def bad_crds(emu, crd):
    def rejected(c, what, needle):
        r = emu.post(CRDS, c)
        eq(r.code, 422, "CRD with %s -> 422" % what)
        check(needle in r.json["message"], "message names the problem (%s)" % needle, r.json["message"])

    c = copy.deepcopy(crd)
    c["metadata"]["name"] = "wrong.podres.dev"
    rejected(c, "name != plural.group", 'must be spec.names.plural+"."+spec.group')
    c = copy.deepcopy(crd)
    c["metadata"]["name"] = "others.podres.dev"
    c["spec"]["names"] = {"plural": "others", "kind": "Other"}
    v2 = copy.deepcopy(c["spec"]["versions"][0])
    v2["name"] = "v1beta1"
    c["spec"]["versions"].append(v2)
    rejected(c, "two storage versions", "must have exactly one version marked as storage version")
    c = copy.deepcopy(crd)
    c["metadata"]["name"] = "others.podres.dev"
    c["spec"]["names"] = {"plural": "others", "kind": "Other"}
    del c["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]["properties"][
        "nodeName"]["type"]
    rejected(c, "a property without a type (not structural)",
             "properties[spec].properties[nodeName].type: Required value")
    c = copy.deepcopy(crd)
    c["metadata"]["name"] = "others.podres.dev"
    c["spec"]["names"] = {"plural": "others", "kind": "Other"}
    del c["spec"]["versions"][0]["schema"]
    rejected(c, "no schema", "schemas are required")


def custom_resources(emu):
    bad = db("prune-me")
    bad["spec"]["foo"] = 1
    bad["status"] = {"phase": "Bound"}
    bad["metadata"]["bogus"] = "x"
    r = emu.post(db_path("default"), bad)
    eq(r.code, 201, "create with unknown fields -> 201 (fieldValidation unset = Warn)")
    check("foo" not in r.json["spec"] and "bogus" not in r.json["metadata"], "unknown fields pruned")
    check("status" not in r.json, "status dropped on create (status subresource)")
    w = r.headers.get_all("Warning") or []
    check(any('unknown field \\"spec.foo\\"' in x for x in w), "Warning header names spec.foo", w)
    bad["metadata"]["name"] = "strict"
    r = emu.post(db_path("default") + "?fieldValidation=Strict", bad)
    eq(r.code, 400, "fieldValidation=Strict + unknown field -> 400")
    check('strict decoding error: ' in r.json["message"] and 'unknown field "spec.foo"' in r.json["message"],
          "strict decoding message",
          r.json["message"])
    r = emu.post(db_path("default") + "?fieldValidation=Ignore", dict(bad, metadata={"name": "ign"}))
    eq((r.code, r.headers.get("Warning")), (201, None), "fieldValidation=Ignore prunes silently")
    cur = emu.get(db_path("default", "prune-me")).json
    cur["status"] = {"phase": "Sideways"}
    r = emu.put(db_path("default", "prune-me", "status"), cur)
    eq(r.code, 422, "status.phase outside the enum -> 422")
    check('status.phase: Unsupported value: "Sideways": supported values: "Pending", "Bound", "Conflict"'
          in r.json["message"], "enum message", r.json["message"])
    cur["status"] = {"phase": "Bound", "observedRevision": "many"}
    r = emu.put(db_path("default", "prune-me", "status"), cur)
    eq(r.code, 422, "observedRevision of the wrong type -> 422")
    eq(r.json["details"]["causes"][0]["field"], "status.observedRevision", "cause field")
    bad2 = db("noname-dev")
    bad2["spec"]["containers"] = [{"devices": [{"deviceIds": ["a"]}]}]
    r = emu.post(db_path("default"), bad2)
    eq(r.code, 422, "missing required container name -> 422")
    check("spec.containers[0].name: Required value" in r.json["message"], "required field path",
          r.json["message"])

    # Table printing with the project's columns
    cur = emu.get(db_path("default", "prune-me")).json
    cur["status"] = {"phase": "Bound", "summary": "nvidia.com/gpu=2", "nodeName": "node-a",
                     "observedRevision": 7}
    eq(emu.put(db_path("default", "prune-me", "status"), cur).code, 200, "status written")
    r = emu.get(CR_BASE + "/devicebindings?limit=500", headers={"Accept": TABLE_ACCEPT})
    t = r.json
    eq(t["kind"], "Table", "Table returned for a Table Accept")
    eq([c["name"] for c in t["columnDefinitions"]], ["Name", "Node", "Phase", "Devices", "Age"],
       "Table columns")
    check(t["metadata"].get("resourceVersion"), "Table carries resourceVersion")
    row = [x for x in t["rows"] if x["cells"][0] == "prune-me"][0]
    eq(row["cells"][:4], ["prune-me", "node-a", "Bound", "nvidia.com/gpu=2"], "Table cells")
    check(row["cells"][4].endswith("s"), "Age cell is a duration", row["cells"][4])
    eq((row["object"]["kind"], row["object"]["metadata"]["namespace"]), ("PartialObjectMetadata", "default"),
       "row object is PartialObjectMetadata with namespace")
    ign = [x for x in t["rows"] if x["cells"][0] == "ign"][0]
    eq(ign["cells"][2:4], [None, None], "missing values are null cells")
    r = emu.get(db_path("default", "prune-me"), headers={"Accept": TABLE_ACCEPT})
    eq((r.json["kind"], len(r.json["rows"])), ("Table", 1), "single GET as Table")
    r = emu.get(CR_BASE + "/devicebindings")
    eq(r.json["kind"], "DeviceBindingList", "plain list without a Table Accept")


def deletion(emu):
    r = emu.delete(CRDS + "/devicebindings.podres.dev")
    eq(r.code, 200, "delete CRD")

    def gone():
        return emu.get(CRDS + "/devicebindings.podres.dev").code == 404
    from emutest import wait_for
    wait_for(gone, "CRD to be removed")
    ok_ = emu.get(CR_BASE + "/devicebindings").code == 404
    check(ok_, "CR endpoint gone with the CRD")


def run():
    crd = static_checks()
    emu = Emulator()
    registration(emu, crd)
    bad_crds(emu, crd)
    custom_resources(emu)
    deletion(emu)
    emu.stop()


if __name__ == "__main__":
    main(run)
