/* SPDX-License-Identifier: Apache-2.0 */
/* dvb.c - the DeviceBinding's JSON (dvb.h). The status keeps podresd's
 * containers and device groups in their order, one group per resource (a
 * DRA group with its claims), and spells topology as the API does ("id");
 * summary and boundDevices are what kubectl's printer columns show. */
#include "../common/common.h"
#include "../common/strbuf.h"
#include "dvb.h"

#include <assert.h>
#include <time.h>

bool dvb_has_devices(const json_t *pr)
{
    json_t *c, *g;
    size_t i, j;

    json_array_foreach(json_object_get(pr, "containers"), i, c) {
        json_array_foreach(json_object_get(c, "devices"), j, g) {
            if (json_array_size(json_object_get(g, "deviceIds")))
                return true;
        }
    }
    return false;
}

/* The kubelet spelling {"nodes":[{"ID":n}]} to the API's {"nodes":[{"id":n}]}. */
static json_t *topology_api(const json_t *t)
{
    json_t *nodes = json_array(), *n;
    size_t i;

    json_array_foreach(json_object_get(t, "nodes"), i, n)
        json_array_append_new(nodes, json_pack("{s:O}", "id", json_object_get(n, "ID")));
    return json_pack("{s:o}", "nodes", nodes);
}

/* The DRA claims of a podresd group, as {namespace, name, deviceIds}
 * each; new, or NULL when it has none. */
static json_t *claims_api(const json_t *claims)
{
    json_t *out = json_array(), *c, *v;
    size_t i;

    json_array_foreach(claims, i, c) {
        if (!json_is_string(json_object_get(c, "name")))
            continue;
        v = json_pack("{s:O}", "name", json_object_get(c, "name"));
        if (v && json_is_string(json_object_get(c, "namespace")))
            json_object_set(v, "namespace", json_object_get(c, "namespace"));
        if (v && json_is_array(json_object_get(c, "deviceIds")))
            json_object_set(v, "deviceIds", json_object_get(c, "deviceIds"));
        json_array_append_new(out, v);
    }
    if (!json_array_size(out)) {
        json_decref(out);
        return NULL;
    }
    return out;
}

/* Append to 'to' each value of 'from' that it does not hold yet, in order.
 * -1 if out of memory. */
static int add_missing(json_t *to, const json_t *from)
{
    json_t *v, *w;
    size_t i, j;
    bool seen;

    json_array_foreach(from, i, v) {
        seen = false;
        json_array_foreach(to, j, w) {
            if (json_equal(v, w)) {
                seen = true;
                break;
            }
        }
        if (!seen && json_array_append(to, v))
            return -1;
    }
    return 0;
}

/* The status group of 'res' in 'devs', appended empty when there is none.
 * Borrowed from 'devs', or NULL if out of memory. */
static json_t *group_of(json_t *devs, const char *res)
{
    json_t *g;
    size_t i;

    json_array_foreach(devs, i, g) {
        if (strcmp(json_string_value(json_object_get(g, "resourceName")), res) == 0)
            return g;
    }
    g = json_pack("{s:s,s:[],s:{s:[]}}", "resourceName", res, "deviceIds", "topology", "nodes");
    return json_array_append_new(devs, g) ? NULL : g;
}

/* Fold podresd's group 'g' into 'into', the status group of its resource:
 * the union of the device ids and of the NUMA nodes ("id"), in order, and
 * the DRA claims when it has any. The CRD keys a container's groups by
 * resourceName, and the kubelet lists one group per device and NUMA node.
 * -1 if out of memory. */
static int fold_group(json_t *into, const json_t *g)
{
    json_t *topo = topology_api(json_object_get(g, "topology"));
    json_t *claims = claims_api(json_object_get(g, "claims"));
    int rc = -1;

    if (!topo)
        goto out;
    if (claims && !json_object_get(into, "claims") &&
        json_object_set_new(into, "claims", json_array()))
        goto out;
    if (add_missing(json_object_get(into, "deviceIds"), json_object_get(g, "deviceIds")) ||
        add_missing(json_object_get(json_object_get(into, "topology"), "nodes"),
                    json_object_get(topo, "nodes")) ||
        add_missing(json_object_get(into, "claims"), claims))
        goto out;
    rc = 0;
out:
    json_decref(claims);
    json_decref(topo);
    return rc;
}

/* A container's device groups, one per resource; each group's count added
 * to 'counts' (resource -> integer). New, or NULL if out of memory. */
static json_t *status_devices(const json_t *c, json_t *counts)
{
    json_t *devs = json_array(), *g, *into, *n;
    size_t j;

    json_array_foreach(json_object_get(c, "devices"), j, g) {
        const char *res = json_string_value(json_object_get(g, "resourceName"));

        if (!res || !json_array_size(json_object_get(g, "deviceIds")))
            continue;
        into = group_of(devs, res);
        if (!into || fold_group(into, g)) {
            json_decref(devs);
            return NULL;
        }
    }
    json_array_foreach(devs, j, g) {
        const char *res = json_string_value(json_object_get(g, "resourceName"));
        size_t k = json_array_size(json_object_get(g, "deviceIds"));

        n = json_object_get(counts, res);
        json_object_set_new(counts, res, json_integer(json_integer_value(n) + (json_int_t)k));
    }
    return devs;
}

/* The status's containers, those with devices; NULL if out of memory. */
static json_t *status_containers(const json_t *pr, json_t *counts)
{
    json_t *out = json_array(), *c, *devs;
    size_t i;

    json_array_foreach(json_object_get(pr, "containers"), i, c) {
        devs = status_devices(c, counts);
        if (!devs) {
            json_decref(out);
            return NULL;
        }
        if (json_array_size(devs))
            json_array_append_new(
                out, json_pack("{s:O,s:o}", "name", json_object_get(c, "name"), "devices", devs));
        else
            json_decref(devs);
    }
    return out;
}

/* "a.com/x=1,b.com/y=2", resources sorted. */
static char *summary_of(const json_t *counts)
{
    struct strbuf sb = STRBUF_INIT;
    const char **keys, *k;
    json_t *v;
    size_t n = json_object_size(counts), i = 0, a, b;

    keys = calloc(n ? n : 1, sizeof(*keys));
    if (!keys)
        return NULL;
    json_object_foreach((json_t *)counts, k, v)
        keys[i++] = k;
    for (a = 1; a < n; a++) {
        for (b = a; b > 0 && strcmp(keys[b - 1], keys[b]) > 0; b--) {
            k = keys[b];
            keys[b] = keys[b - 1];
            keys[b - 1] = k;
        }
    }
    for (i = 0; i < n; i++) {
        if (strbuf_printf(&sb, "%s%s=%lld", i ? "," : "", keys[i],
                          (long long)json_integer_value(json_object_get(counts, keys[i]))))
            break;
    }
    free(keys);
    if (i < n || (!sb.buf && strbuf_add(&sb, "", 0))) {
        strbuf_release(&sb);
        return NULL;
    }
    return strbuf_detach(&sb, NULL);
}

/* Every device id of the status's containers, "a,b,c" in their order: what
 * `kubectl get -o wide` shows (a printer column shows one JSONPath result). */
static char *ids_of(const json_t *containers)
{
    struct strbuf sb = STRBUF_INIT;
    const json_t *c, *g, *id;
    size_t i, j, k;
    err_t rc = strbuf_add(&sb, "", 0);

    json_array_foreach(containers, i, c) {
        json_array_foreach(json_object_get(c, "devices"), j, g) {
            json_array_foreach(json_object_get(g, "deviceIds"), k, id) {
                if (!rc && json_is_string(id))
                    rc = strbuf_printf(&sb, "%s%s", sb.len ? "," : "", json_string_value(id));
            }
        }
    }
    if (rc) {
        strbuf_release(&sb);
        return NULL;
    }
    return strbuf_detach(&sb, NULL);
}

json_t *dvb_status(const json_t *pr, const char *pod_uid, const char *node)
{
    json_t *counts, *containers, *st = NULL;
    char *summary, *ids = NULL;

    assert(pod_uid && node);
    counts = json_object();
    if (!counts)
        return NULL;
    containers = status_containers(pr, counts);
    summary = summary_of(counts);
    if (containers)
        ids = ids_of(containers);
    if (containers && summary && ids)
        st = json_pack(
            "{s:s,s:s,s:s,s:s,s:s,s:O,s:I}", "nodeName", node, "podUID", pod_uid, "phase", "Bound",
            "summary", summary, "boundDevices", ids, "containers", containers, "observedRevision",
            json_object_get(pr, "revision") ? json_integer_value(json_object_get(pr, "revision"))
                                            : (json_int_t)0);
    json_decref(counts);
    json_decref(containers);
    free(summary);
    free(ids);
    return st;
}

json_t *dvb_condition(const char *type, const char *status, const char *reason, const char *message,
                      const json_t *old, const char *now)
{
    const char *old_status = json_string_value(json_object_get(old, "status"));
    const char *old_time = json_string_value(json_object_get(old, "lastTransitionTime"));
    const char *when = old_status && old_time && strcmp(old_status, status) == 0 ? old_time : now;

    return json_pack("{s:s,s:s,s:s,s:s,s:s}", "type", type, "status", status, "reason", reason,
                     "message", message, "lastTransitionTime", when);
}

const json_t *dvb_condition_of(const json_t *cr, const char *type)
{
    json_t *c;
    size_t i;

    json_array_foreach(json_object_get(json_object_get(cr, "status"), "conditions"), i, c) {
        const char *t = json_string_value(json_object_get(c, "type"));

        if (t && strcmp(t, type) == 0)
            return c;
    }
    return NULL;
}

void dvb_now(char *buf, size_t cap)
{
    time_t t = time(NULL);
    struct tm tm;

    gmtime_r(&t, &tm);
    strftime(buf, cap, "%Y-%m-%dT%H:%M:%SZ", &tm);
}

void dvb_path(char *buf, size_t cap, const char *ns, const char *name, const char *sub)
{
    assert(buf && cap > 0 && ns);
    snprintf(buf, cap, DVB_GROUP_PATH "/namespaces/%s/devicebindings%s%s%s", ns, name ? "/" : "",
             name ? name : "", sub ? sub : "");
}

json_t *dvb_pod_view(json_t *pod)
{
    static const char *const keep[] = {"name", "namespace", "uid", "resourceVersion",
                                       "deletionTimestamp"};
    json_t *md = json_object_get(pod, "metadata"), *out = json_object(), *m = json_object();
    size_t i;

    if (!out || !m || json_object_set(out, "metadata", m)) {
        json_decref(out);
        json_decref(m);
        return NULL;
    }
    for (i = 0; i < sizeof(keep) / sizeof(keep[0]); i++) {
        json_t *v = json_object_get(md, keep[i]);

        if (v && json_object_set(m, keep[i], v)) {
            json_decref(out);
            out = NULL;
            break;
        }
    }
    json_decref(m);
    return out;
}

const char *dvb_meta(const json_t *obj, const char *field)
{
    return json_string_value(json_object_get(json_object_get(obj, "metadata"), field));
}

const char *dvb_label(const json_t *cr)
{
    return json_string_value(
        json_object_get(json_object_get(json_object_get(cr, "metadata"), "labels"), DVB_LABEL));
}

bool dvb_owned_by(const json_t *cr, const char *uid)
{
    json_t *o;
    size_t i;

    json_array_foreach(json_object_get(json_object_get(cr, "metadata"), "ownerReferences"), i, o) {
        const char *u = json_string_value(json_object_get(o, "uid"));

        if (u && strcmp(u, uid) == 0)
            return true;
    }
    return false;
}

/* The one owner reference, to the Pod 'name' 'uid'. New, or NULL. */
static json_t *owner_refs(const char *name, const char *uid)
{
    return json_pack("[{s:s,s:s,s:s,s:s}]", "apiVersion", "v1", "kind", "Pod", "name", name, "uid",
                     uid);
}

json_t *dvb_new(const char *ns, const char *name, const char *node, const char *pod_uid)
{
    return json_pack("{s:s,s:s,s:{s:s,s:s,s:{s:s},s:o},s:{s:s}}", "apiVersion",
                     "podres.dev/v1alpha1", "kind", "DeviceBinding", "metadata", "name", name,
                     "namespace", ns, "labels", DVB_LABEL, node, "ownerReferences",
                     owner_refs(name, pod_uid), "spec", "nodeName", node);
}

json_t *dvb_owners_with_pod(const json_t *cr, const char *name, const char *uid)
{
    json_t *all = json_array(), *o, *pod = owner_refs(name, uid);
    size_t i;

    json_array_foreach(json_object_get(json_object_get(cr, "metadata"), "ownerReferences"), i, o) {
        const char *kind = json_string_value(json_object_get(o, "kind"));
        const char *api = json_string_value(json_object_get(o, "apiVersion"));

        if (!(kind && api && strcmp(kind, "Pod") == 0 && strcmp(api, "v1") == 0))
            json_array_append(all, o);
    }
    if (!all || !pod || json_array_extend(all, pod)) {
        json_decref(all);
        all = NULL;
    }
    json_decref(pod);
    return all;
}

json_t *dvb_status_patch(const json_t *old, const json_t *desired)
{
    json_t *st = json_deep_copy(desired), *v;
    const char *k;

    json_object_foreach((json_t *)old, k, v) {
        if (!json_object_get(st, k))
            json_object_set_new(st, k, json_null());
    }
    return json_pack("{s:o}", "status", st);
}

bool dvb_pod_going(const json_t *pod)
{
    return !pod || json_object_get(json_object_get(pod, "metadata"), "deletionTimestamp");
}

/* The Pod is gone, or another instance of that name now. A Pod that is
 * going counts as gone: the collector removes its dependents once it is.
 * Any other owner (a scheduler's PodGroup) keeps the object alive, so then
 * it is the syncer's to delete. */
bool dvb_collected(const json_t *cr, const char *name, const json_t *pod)
{
    const json_t *owners = json_object_get(json_object_get(cr, "metadata"), "ownerReferences");
    const char *live = dvb_pod_going(pod) ? NULL : dvb_meta(pod, "uid");
    json_t *o;
    size_t i;

    if (!json_array_size(owners))
        return false;
    json_array_foreach(owners, i, o) {
        const char *kind = json_string_value(json_object_get(o, "kind"));
        const char *api = json_string_value(json_object_get(o, "apiVersion"));
        const char *n = json_string_value(json_object_get(o, "name"));
        const char *u = json_string_value(json_object_get(o, "uid"));

        if (!kind || !api || !n || !u || strcmp(kind, "Pod") != 0 || strcmp(api, "v1") != 0 ||
            strcmp(n, name) != 0 || (live && strcmp(u, live) == 0))
            return false;
    }
    return true;
}
