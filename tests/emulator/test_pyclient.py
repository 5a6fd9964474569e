"""The official Python client (python3-kubernetes, Debian) against the emulator
over TLS with a bearer token (KUBE_API_SUBSET checklist 52): create, 409 on a
duplicate, list, merge patch, watch from "0", 410 on a stale resourceVersion;
plus Pods by spec.nodeName, delete, and 401."""

import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from emutest import GROUP, VERSION, Emulator, check, db, eq, main, secs  # noqa: E402

from kubernetes import client, config, watch  # noqa: E402
from kubernetes.client.rest import ApiException  # noqa: E402

PLURAL = "devicebindings"


def run():
    emu = Emulator(tls=True, token="py-token")
    emu.install_crd()
    api = config.new_client_from_config(config_file=emu.kubeconfig)
    co = client.CustomObjectsApi(api)
    core = client.CoreV1Api(api)
    print("# python3-kubernetes %s" % __import__("kubernetes").__version__)

    o = co.create_namespaced_custom_object(GROUP, VERSION, "default", PLURAL, db("pod-b"))
    check(o["metadata"]["uid"] and o["metadata"]["generation"] == 1, "create_namespaced_custom_object")
    try:
        co.create_namespaced_custom_object(GROUP, VERSION, "default", PLURAL, db("pod-b"))
        check(False, "duplicate create raises")
    except ApiException as e:
        eq((e.status, __import__("json").loads(e.body)["reason"]), (409, "AlreadyExists"),
           "duplicate create -> ApiException 409 AlreadyExists")
    lst = co.list_namespaced_custom_object(GROUP, VERSION, "default", PLURAL)
    eq((lst["kind"], [i["metadata"]["name"] for i in lst["items"]]), ("DeviceBindingList", ["pod-b"]),
       "list_namespaced_custom_object")
    lst = co.list_cluster_custom_object(GROUP, VERSION, PLURAL, label_selector="podres.dev/node=node-a")
    eq(len(lst["items"]), 1, "list_cluster_custom_object with label_selector")
    p = co.patch_namespaced_custom_object(GROUP, VERSION, "default", PLURAL, "pod-b",
                                          {"spec": {"nodeName": "node-q"}, "metadata": {"labels": {"x": "1"}}})
    eq((p["spec"]["nodeName"], p["metadata"]["labels"]["x"], p["metadata"]["generation"]), ("node-q", "1", 2),
       "patch_namespaced_custom_object (merge patch)")
    log = emu.admin("GET", "/requests")["requests"]
    check(any(r["verb"] == "patch" and r["code"] == 200 and "OpenAPI-Generator" in r["userAgent"] and
              r["contentType"].startswith("application/merge-patch+json") for r in log),
          "the patch went out as PATCH with application/merge-patch+json and succeeded",
          [(r["verb"], r["contentType"]) for r in log])
    s = co.patch_namespaced_custom_object_status(GROUP, VERSION, "default", PLURAL, "pod-b",
                                                 {"status": {"phase": "Bound", "observedRevision": 4}})
    eq((s["status"]["phase"], s["metadata"]["generation"]), ("Bound", 2), "patch status")
    g = co.get_namespaced_custom_object(GROUP, VERSION, "default", PLURAL, "pod-b")
    eq(g["status"]["observedRevision"], 4, "get_namespaced_custom_object")
    first_rv = g["metadata"]["resourceVersion"]

    t0 = time.time()
    events = []
    for ev in watch.Watch().stream(co.list_namespaced_custom_object, GROUP, VERSION, "default", PLURAL,
                                   resource_version="0", timeout_seconds=2):
        events.append((ev["type"], ev["object"]["metadata"]["name"]))
    took = time.time() - t0
    eq(events, [("ADDED", "pod-b")], "watch from \"0\" yields ADDED")
    check(took < secs(6), "and terminates after timeout_seconds (%.1fs)" % took)

    for i in range(3):
        co.patch_namespaced_custom_object(GROUP, VERSION, "default", PLURAL, "pod-b",
                                          {"metadata": {"annotations": {"i": str(i)}}})
    emu.admin("POST", "/compact")
    emu.admin("DELETE", "/counters")
    try:
        for ev in watch.Watch().stream(co.list_namespaced_custom_object, GROUP, VERSION, "default", PLURAL,
                                       resource_version=first_rv):
            pass
        check(False, "a stale resourceVersion raises")
    except ApiException as e:
        eq(e.status, 410, "watch from a compacted resourceVersion -> ApiException 410")
        check("too old resource version" in str(e.reason), "410 reason", e.reason)
    eq(emu.counter(verb="watch"), 2, "the client retried once (no timeout_seconds), as it does on 410")

    # core v1
    core.create_namespace(client.V1Namespace(metadata=client.V1ObjectMeta(name="ml")))
    for name, node in (("a", "node-a"), ("b", "node-b")):
        core.create_namespaced_pod("ml", client.V1Pod(
            metadata=client.V1ObjectMeta(name=name),
            spec=client.V1PodSpec(node_name=node, containers=[client.V1Container(name="c", image="i")])))
    pods = core.list_pod_for_all_namespaces(field_selector="spec.nodeName=node-b")
    eq([p.metadata.name for p in pods.items], ["b"], "list pods by spec.nodeName (typed client)")
    eq(pods.items[0].status.phase, "Pending", "pod status.phase Pending")

    st = co.delete_namespaced_custom_object(GROUP, VERSION, "default", PLURAL, "pod-b")
    eq((st["kind"], st["status"]), ("Status", "Success"), "delete_namespaced_custom_object")
    try:
        co.get_namespaced_custom_object(GROUP, VERSION, "default", PLURAL, "pod-b")
        check(False, "get after delete raises")
    except ApiException as e:
        eq(e.status, 404, "get after delete -> 404")

    bad = config.new_client_from_config(config_file=emu.kubeconfig)
    bad.configuration.api_key = {"authorization": "Bearer wrong"}
    try:
        client.CustomObjectsApi(bad).list_namespaced_custom_object(GROUP, VERSION, "default", PLURAL)
        check(False, "wrong token raises")
    except ApiException as e:
        eq(e.status, 401, "wrong token -> ApiException 401")
    emu.stop()
    in_cluster()


def in_cluster():
    """Checklist 48: the emulator stands in for the serviceaccount directory."""
    from emutest import tmpdir
    from kubernetes.config.incluster_config import InClusterConfigLoader
    sa = os.path.join(tmpdir(), "serviceaccount")
    emu = Emulator("--serviceaccount-dir", sa, tls=True, token="sa-token")
    emu.install_crd()
    cfg = client.Configuration()
    InClusterConfigLoader(token_filename=os.path.join(sa, "token"), cert_filename=os.path.join(sa, "ca.crt"),
                          environ={"KUBERNETES_SERVICE_HOST": "127.0.0.1",
                                   "KUBERNETES_SERVICE_PORT": str(emu.port)}).load_and_set(cfg)
    co = client.CustomObjectsApi(client.ApiClient(cfg))
    lst = co.list_namespaced_custom_object(GROUP, VERSION, open(os.path.join(sa, "namespace")).read(), PLURAL)
    eq(lst["kind"], "DeviceBindingList", "in-cluster config from --serviceaccount-dir (token, ca.crt, namespace)")
    emu.stop()


if __name__ == "__main__":
    main(run)
