/* SPDX-License-Identifier: Apache-2.0 */
/* reconcile.c - desired DeviceBinding status and the writes that get there.
 * After every acknowledged write the answer goes into the informer's cache
 * (newer versions only), so a key queued again before the watch event
 * arrives is not written twice. */
#define LOG_MOD "reconcile"
#include "../common/common.h"
#include "../common/strbuf.h"
#include "queue.h"
#include "reconcile.h"

#include <time.h>

bool reconcile_has_devices(const json_t *pr)
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

/* Add each group's count to 'counts' (resource -> integer). */
static json_t *status_containers(const json_t *pr, json_t *counts)
{
    json_t *out = json_array(), *c, *g, *devs, *n;
    size_t i, j;

    json_array_foreach(json_object_get(pr, "containers"), i, c) {
        devs = json_array();
        json_array_foreach(json_object_get(c, "devices"), j, g) {
            const char *res = json_string_value(json_object_get(g, "resourceName"));
            size_t k = json_array_size(json_object_get(g, "deviceIds"));

            if (!res || !k)
                continue;
            n = json_object_get(counts, res);
            json_object_set_new(counts, res, json_integer(json_integer_value(n) + (json_int_t)k));
            json_array_append_new(devs, json_pack("{s:s,s:O,s:o}", "resourceName", res, "deviceIds",
                                                  json_object_get(g, "deviceIds"), "topology",
                                                  topology_api(json_object_get(g, "topology"))));
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

json_t *reconcile_status(const json_t *pr, const char *pod_uid, const char *node)
{
    json_t *counts = json_object(), *containers, *st = NULL;
    char *summary, *ids = NULL;

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

json_t *reconcile_condition(const char *type, const char *status, const char *reason,
                            const char *message, const json_t *old, const char *now)
{
    const char *old_status = json_string_value(json_object_get(old, "status"));
    const char *old_time = json_string_value(json_object_get(old, "lastTransitionTime"));
    const char *when = old_status && old_time && strcmp(old_status, status) == 0 ? old_time : now;

    return json_pack("{s:s,s:s,s:s,s:s,s:s}", "type", type, "status", status, "reason", reason,
                     "message", message, "lastTransitionTime", when);
}

/* ---- paths and small accessors ---- */

static void cr_path(char *buf, size_t cap, const char *ns, const char *name, const char *sub)
{
    snprintf(buf, cap, RECONCILE_GROUP_PATH "/namespaces/%s/devicebindings%s%s%s", ns,
             name ? "/" : "", name ? name : "", sub ? sub : "");
}

json_t *reconcile_pod_view(json_t *pod)
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

static const char *meta_str(const json_t *obj, const char *field)
{
    return json_string_value(json_object_get(json_object_get(obj, "metadata"), field));
}

static bool owner_ok(const json_t *cr, const char *uid)
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

static json_t *owner_refs(const char *name, const char *uid)
{
    return json_pack("[{s:s,s:s,s:s,s:s}]", "apiVersion", "v1", "kind", "Pod", "name", name, "uid",
                     uid);
}

/* The owners 'cr' should have: its own, but for a Pod owner of another
 * instance, and the Pod 'name' 'uid'. Others' owners (a scheduler's
 * PodGroup, ...) are kept: the list is patched whole. New, or NULL. */
static json_t *owners_with_pod(const json_t *cr, const char *name, const char *uid)
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

/* ---- whose object ---- */

/* The node 'cr' is labelled for, or NULL. */
static const char *label_of(const json_t *cr)
{
    return json_string_value(json_object_get(
        json_object_get(json_object_get(cr, "metadata"), "labels"), RECONCILE_LABEL));
}

uint64_t reconcile_skipped(struct reconciler *r, enum reconcile_skip why)
{
    return __atomic_load_n(&r->skipped[why], __ATOMIC_RELAXED);
}

const char *reconcile_skip_name(enum reconcile_skip why)
{
    static const char *const names[RECONCILE_SKIP_N] = {"foreign_label", "no_pod",
                                                        "pod_uid_mismatch", "crd_missing"};

    return why < RECONCILE_SKIP_N ? names[why] : "unknown";
}

void reconcile_release(struct reconciler *r)
{
    json_decref(r->foreign);
    json_decref(r->skips);
    json_decref(r->reserved);
    json_decref(r->strays);
    json_decref(r->placed);
    json_decref(r->removed);
    r->placed = NULL;
    r->removed = NULL;
    r->foreign = NULL;
    r->skips = NULL;
    r->reserved = NULL;
    r->strays = NULL;
}

/* Add 'key' to the set '*set' (made on first use). Out of memory, the key
 * is missing: a line logged twice, or a reservation taken for a stray. */
static void set_key(json_t **set, const char *key)
{
    if (!*set)
        *set = json_object();
    json_object_set_new(*set, key, json_true());
}

/* Count a binding not mirrored; say why once until it is mirrored, goes,
 * or is skipped for another reason. */
/* A binding not mirrored whose DeviceBinding of this node is there (a pod
 * of another uid, say): an Event on it too, since its status is stale. */
static void tell_skip(struct reconciler *r, const char *key, const char *name, const char *detail)
{
    json_t *cr = r->events ? cache_get(r->crs, key) : NULL;
    const char *label = label_of(cr);
    char note[700];

    if (cr && label && strcmp(label, r->node) == 0) {
        snprintf(note, sizeof(note), "not mirroring the binding (%s): %s", name, detail);
        events_record(r->events, cr, "Warning", "NotMirrored", "Mirror", note, queue_now_ms());
    }
    json_decref(cr);
}

static void note_skip(struct reconciler *r, const char *key, enum reconcile_skip why,
                      const char *detail)
{
    const char *name = reconcile_skip_name(why);
    const char *logged = json_string_value(json_object_get(r->skips, key));

    __atomic_add_fetch(&r->skipped[why], 1, __ATOMIC_RELAXED);
    if (logged && strcmp(logged, name) == 0)
        return;
    if (!r->skips)
        r->skips = json_object();
    json_object_set_new(r->skips, key, json_string(name));
    log_info("not mirroring the binding of pod %s (%s): %s", key, name, detail);
    tell_skip(r, key, name, detail);
}

void reconcile_skip(struct reconciler *r, const char *key, enum reconcile_skip why,
                    const char *detail)
{
    json_t *pr = cache_get(r->pr, key);

    if (reconcile_has_devices(pr))
        note_skip(r, key, why, detail);
    json_decref(pr);
}

/* Whether the cached 'cr' (or NULL) is another node's, or no node's: the
 * informer asked for this node's only, but a server may ignore the label
 * selector. A skip is counted; logged once per key and label. */
static bool foreign(struct reconciler *r, const char *key, const json_t *cr)
{
    const char *owner = label_of(cr);
    const char *logged = json_string_value(json_object_get(r->foreign, key));

    if (!cr || (owner && strcmp(owner, r->node) == 0)) {
        json_object_del(r->foreign, key); /* a no-op without it */
        return false;
    }
    __atomic_add_fetch(&r->skipped[RECONCILE_SKIP_FOREIGN_LABEL], 1, __ATOMIC_RELAXED);
    if (logged && strcmp(logged, owner ? owner : "") == 0)
        return true;
    if (!r->foreign)
        r->foreign = json_object();
    json_object_set_new(r->foreign, key, json_string(owner ? owner : ""));
    log_info("DeviceBinding %s is labelled for %s%s%s, not node '%s'; leaving it alone", key,
             owner ? "node '" : "no node", owner ? owner : "", owner ? "'" : "", r->node);
    return true;
}

/* Put an acknowledged object into the cache (anything but an object is ignored). */
static void remember(struct reconciler *r, const char *key, json_t *obj)
{
    if (json_is_object(obj))
        cache_set(r->crs, key, obj, true);
}

/* ---- writes ---- */

/* Read the object again into the cache. ERR_FORBIDDEN (the reason in
 * 'why') when it is not this node's: labelled for another node, or not at
 * all: nothing is written to it, and it is looked at again after the
 * longest backoff, not every 30 s. Whatever the cache held for the key is
 * not what the server has, and the server's is not this node's: it goes. */
static err_t refetch(struct reconciler *r, const char *key, const char *ns, const char *name,
                     char *why, size_t cap)
{
    char path[1024], msg[512];
    json_t *obj = NULL;
    const char *owner;
    err_t rc;

    cr_path(path, sizeof(path), ns, name, NULL);
    rc = rest_do(r->kube, "GET", path, NULL, NULL, &obj, msg, sizeof(msg));
    if (rc == ERR_NOTFOUND) {
        cache_del(r->crs, key);
        return ERR_OK;
    }
    if (rc)
        return rc;
    owner = label_of(obj);
    if (owner && strcmp(owner, r->node) == 0) {
        remember(r, key, obj);
    } else {
        cache_del(r->crs, key);
        __atomic_add_fetch(&r->skipped[RECONCILE_SKIP_FOREIGN_LABEL], 1, __ATOMIC_RELAXED);
        snprintf(why, cap,
                 "DeviceBinding %s exists but is labelled for %s%s%s, not node '%s'; leaving it "
                 "alone",
                 key, owner ? "node '" : "no node", owner ? owner : "", owner ? "'" : "", r->node);
        rc = ERR_FORBIDDEN;
    }
    json_decref(obj);
    return rc;
}

static err_t create(struct reconciler *r, const char *key, const char *ns, const char *name,
                    const char *uid, json_t **out, char *msg, size_t cap)
{
    char path[1024];
    json_t *body = json_pack("{s:s,s:s,s:{s:s,s:s,s:{s:s},s:o},s:{s:s}}", "apiVersion",
                             "podres.dev/v1alpha1", "kind", "DeviceBinding", "metadata", "name",
                             name, "namespace", ns, "labels", RECONCILE_LABEL, r->node,
                             "ownerReferences", owner_refs(name, uid), "spec", "nodeName", r->node);
    err_t rc;

    if (!body)
        return ERR_NOMEM;
    cr_path(path, sizeof(path), ns, NULL, NULL);
    rc = rest_do(r->kube, "POST", path, body, NULL, out, msg, cap);
    json_decref(body);
    if (rc == ERR_CONFLICT) {
        /* It exists already (our cache lagged): read it and decide again. */
        err_t f = refetch(r, key, ns, name, msg, cap);

        if (f == ERR_OK)
            snprintf(msg, cap, "DeviceBinding %s already exists; read it again", key);
        else if (f == ERR_FORBIDDEN)
            rc = f;
    }
    return rc;
}

static err_t delete_cr(struct reconciler *r, const char *key, const char *ns, const char *name,
                       const json_t *cr, char *msg, size_t cap)
{
    char path[1024];
    /* The object as decided on: its uid, and its resourceVersion, so that a
     * change the cache has not seen yet (a scheduler's spec.containers just
     * written) makes it a 409 and a new decision, not a lost pre-assignment. */
    json_t *pre = json_object(), *out = NULL;
    json_t *body = json_pack("{s:s,s:s,s:o}", "kind", "DeleteOptions", "apiVersion", "v1",
                             "preconditions", pre);
    const char *uid = meta_str(cr, "uid"), *rv = meta_str(cr, "resourceVersion");
    err_t rc;

    if (!body)
        return ERR_NOMEM;
    /* a field given empty would be compared as such: only those known */
    if ((uid && json_object_set_new(pre, "uid", json_string(uid))) ||
        (rv && json_object_set_new(pre, "resourceVersion", json_string(rv)))) {
        json_decref(body);
        return ERR_NOMEM;
    }
    cr_path(path, sizeof(path), ns, name, NULL);
    rc = rest_do(r->kube, "DELETE", path, body, NULL, &out, msg, cap);
    json_decref(body);
    json_decref(out);
    if (rc == ERR_OK || rc == ERR_NOTFOUND) {
        cache_del(r->crs, key);
        return ERR_OK;
    }
    /* Changed, or another object by that name now: decide again, or leave
     * it alone if it is not this node's. */
    if (rc == ERR_CONFLICT && refetch(r, key, ns, name, msg, cap) == ERR_FORBIDDEN)
        rc = ERR_FORBIDDEN;
    return rc;
}

/* Merge patch of 'sub' ("" or "/status") with 'patch' (stolen). */
static err_t patch(struct reconciler *r, const char *key, const char *ns, const char *name,
                   const char *sub, json_t *body, char *msg, size_t cap)
{
    char path[1024];
    json_t *out = NULL;
    err_t rc;

    if (!body)
        return ERR_NOMEM;
    cr_path(path, sizeof(path), ns, name, sub);
    rc = rest_do(r->kube, "PATCH", path, body, REST_MERGE_PATCH, &out, msg, cap);
    json_decref(body);
    if (!rc)
        remember(r, key, out);
    else if ((rc == ERR_NOTFOUND || rc == ERR_CONFLICT) &&
             refetch(r, key, ns, name, msg, cap) == ERR_FORBIDDEN)
        rc = ERR_FORBIDDEN;
    json_decref(out);
    return rc;
}

/* {"status": desired} plus null for each old status field no longer wanted. */
static json_t *status_patch(const json_t *old, json_t *desired)
{
    json_t *st = json_deep_copy(desired), *v;
    const char *k;

    json_object_foreach((json_t *)old, k, v) {
        if (!json_object_get(st, k))
            json_object_set_new(st, k, json_null());
    }
    return json_pack("{s:o}", "status", st);
}

/* ---- pre-assignment ---- */

#define PREASSIGNED "PreassignmentHonored"

/* Seconds since an RFC 3339 UTC time ("2026-01-02T03:04:05Z"); -1 if unreadable. */
static long long age_s(const char *ts)
{
    struct tm tm = {0};
    char *end;
    time_t t;

    if (!ts)
        return -1;
    end = strptime(ts, "%Y-%m-%dT%H:%M:%S", &tm);
    if (!end || (*end != 'Z' && *end != '.'))
        return -1;
    t = timegm(&tm);
    return (long long)(time(NULL) - t);
}

void reconcile_now(char *buf, size_t cap)
{
    time_t t = time(NULL);
    struct tm tm;

    gmtime_r(&t, &tm);
    strftime(buf, cap, "%Y-%m-%dT%H:%M:%SZ", &tm);
}

static int cmp_json_str(const void *a, const void *b)
{
    return strcmp(json_string_value(*(json_t *const *)a), json_string_value(*(json_t *const *)b));
}

/* spec.containers as podresd takes a reservation: names and sorted ids only. */
static json_t *reservation_of(const json_t *containers)
{
    json_t *out = json_array(), *c, *g, *devs, *ids, *v[1024];
    size_t i, j, k, n;

    json_array_foreach(containers, i, c) {
        devs = json_array();
        json_array_foreach(json_object_get(c, "devices"), j, g) {
            n = 0;
            json_array_foreach(json_object_get(g, "deviceIds"), k, ids) {
                if (n < ARRAY_SIZE(v) && json_is_string(ids))
                    v[n++] = ids;
            }
            qsort(v, n, sizeof(v[0]), cmp_json_str);
            ids = json_array();
            for (k = 0; k < n; k++)
                json_array_append(ids, v[k]);
            json_array_append_new(devs,
                                  json_pack("{s:O,s:o}", "resourceName",
                                            json_object_get(g, "resourceName"), "deviceIds", ids));
        }
        json_array_append_new(
            out, json_pack("{s:O,s:o}", "name", json_object_get(c, "name"), "devices", devs));
    }
    return out;
}

/* Status message of a podresd answer without the "HTTP 409: " prefix. */
static const char *bare(const char *msg)
{
    const char *p = strstr(msg, ": ");

    return strncmp(msg, "HTTP ", 5) == 0 && p ? p + 2 : msg;
}

struct verdict {
    const char *phase;  /* Pending, Bound or Conflict */
    const char *status; /* condition status: True, False, Unknown */
    const char *reason; /* condition reason */
    char message[512];  /* condition message */
};

/* The verdict of podresd's reservation state. */
static void verdict_of(const json_t *resv, bool bound, struct verdict *v)
{
    const char *state = json_string_value(json_object_get(resv, "state"));

    if (state && strcmp(state, "Bound") == 0) {
        *v = (struct verdict){"Bound", "True", "Matched", ""};
    } else if (state && strcmp(state, "Conflict") == 0) {
        *v = (struct verdict){"Conflict", "False", bound ? "Mismatch" : "Unavailable", ""};
        snprintf(v->message, sizeof(v->message), "%s",
                 json_string_value(json_object_get(resv, "message")));
    } else {
        *v = (struct verdict){"Pending", "Unknown", "Reserved",
                              "devices reserved; waiting for the pod to be bound"};
    }
}

/* A PUT of the reservation under 'key' succeeded. One this reconciler
 * placed that the PUT made again (201) was removed by someone else: a loss,
 * counted toward the fence. */
static void placed(struct reconciler *r, const char *key)
{
    if (rest_last_code(r->pd) == 201 && json_object_get(r->placed, key) &&
        fence_lost(&r->fence, r->node, queue_now_ms()))
        json_object_clear(r->removed);
    set_key(&r->placed, key);
}

/* Place or update the reservation; the verdict follows its state. */
static err_t reserve(struct reconciler *r, const char *key, const json_t *want, json_t *resv,
                     bool bound, struct verdict *v, char *msg, size_t cap)
{
    char path[1024];
    json_t *body, *ans = NULL,
                  *have = resv ? reservation_of(json_object_get(resv, "containers")) : NULL;
    err_t rc = ERR_OK;

    if (!have || !json_equal(have, want)) {
        snprintf(path, sizeof(path), "/v1/reservations/%s", key);
        body = json_pack("{s:O}", "containers", want);
        rc = body ? rest_do(r->pd, "PUT", path, body, NULL, &ans, msg, cap) : ERR_NOMEM;
        json_decref(body);
        if (!rc)
            placed(r, key);
        if (rc == ERR_CONFLICT || rc == ERR_UNPROCESSABLE || rc == ERR_INVAL) {
            *v = (struct verdict){"Conflict", "False", "Unavailable", ""};
            snprintf(v->message, sizeof(v->message), "%s", bare(msg));
            json_decref(have);
            return ERR_OK;
        }
        resv = json_object_get(ans, "reservation");
    }
    json_decref(have);
    if (!rc)
        verdict_of(resv, bound, v);
    json_decref(ans);
    return rc;
}

static err_t release(struct reconciler *r, const char *ns, const char *name)
{
    char path[1024], msg[512];
    json_t *ans = NULL;
    err_t rc;

    snprintf(path, sizeof(path), "/v1/reservations/%s/%s", ns, name);
    rc = rest_do(r->pd, "DELETE", path, NULL, NULL, &ans, msg, sizeof(msg));
    json_decref(ans);
    return rc == ERR_NOTFOUND ? ERR_OK : rc;
}

/* Remove the reservation under 'key'. One this reconciler placed for a
 * pre-assignment goes silently; any other was made outside a DeviceBinding
 * (a PUT over podresd's REST API by hand): with the syncer running, the
 * node's reservations mirror DeviceBindings, so it is undone, and said once
 * per reservation, since nothing else tells its maker. */
static err_t unreserve(struct reconciler *r, const char *key, const char *ns, const char *name)
{
    err_t rc;

    if (!json_object_get(r->reserved, key) && !json_object_get(r->strays, key)) {
        log_info("removing reservation %s made outside a DeviceBinding: this node's "
                 "reservations are owned by DeviceBindings; pre-assign with a DeviceBinding "
                 "instead",
                 key);
        set_key(&r->strays, key);
    }
    rc = release(r, ns, name);
    if (!rc) {
        json_object_del(r->placed, key);
        json_object_del(r->reserved, key);
        json_object_del(r->strays, key);
    }
    return rc;
}

/* The node whose DeviceBinding NS/NAME pre-assigns a reservation, when it
 * is another than this one, into 'other' ("" when none: no such object,
 * labelled for this node or none, no spec.containers). */
static err_t claimant(struct reconciler *r, const char *ns, const char *name, char *other,
                      size_t cap)
{
    char path[1024], msg[512];
    json_t *obj = NULL;
    const char *owner;
    err_t rc;

    other[0] = '\0';
    cr_path(path, sizeof(path), ns, name, NULL);
    rc = rest_do(r->kube, "GET", path, NULL, NULL, &obj, msg, sizeof(msg));
    if (rc == ERR_NOTFOUND)
        return ERR_OK;
    if (rc)
        return rc;
    owner = label_of(obj);
    if (owner && strcmp(owner, r->node) != 0 &&
        json_array_size(json_object_get(json_object_get(obj, "spec"), "containers")))
        snprintf(other, cap, "%s", owner);
    json_decref(obj);
    return ERR_OK;
}

/* A reservation under a key without a DeviceBinding of this node. One this
 * reconciler did not place is removed; when it comes back, the API server
 * is asked whose it is: another node's pre-assignment means another syncer
 * on this podresd, and the writes stop (r->fence); anything else is
 * removed again. */
static err_t stray(struct reconciler *r, const char *key, const char *ns, const char *name)
{
    char other[254];
    err_t rc;

    if (json_object_get(r->reserved, key) || !json_object_get(r->removed, key)) {
        if (!json_object_get(r->reserved, key)) {
            if (json_object_size(r->removed) >= 4096)
                json_object_clear(r->removed); /* bounded; a fight shows again */
            set_key(&r->removed, key);
        }
        return unreserve(r, key, ns, name);
    }
    rc = claimant(r, ns, name, other, sizeof(other));
    if (rc)
        return rc;
    if (!*other) {
        json_object_del(r->removed, key);
        return unreserve(r, key, ns, name);
    }
    fence_claimed(&r->fence, r->node, other, queue_now_ms());
    json_object_clear(r->removed);
    return ERR_OK;
}

/* Writes are stopped (another syncer on this podresd): the key comes back
 * when they may start again. */
static bool held(struct reconciler *r, uint64_t *requeue_ms)
{
    uint64_t left;

    if (!fence_holds(&r->fence, queue_now_ms(), &left))
        return false;
    *requeue_ms = left + 100;
    return true;
}

/* ---- the decision ---- */

struct inputs {
    json_t *pr;   /* podresd's PodResources, or NULL */
    json_t *pod;  /* the API Pod, or NULL */
    json_t *cr;   /* the DeviceBinding, or NULL */
    json_t *resv; /* podresd's Reservation, or NULL */
};

/* Patch the status to 'desired' (stolen) unless it is there already. */
static err_t put_status(struct reconciler *r, const char *key, const char *ns, const char *name,
                        const json_t *cr, json_t *desired, bool *wrote, char *msg, size_t cap)
{
    err_t rc = ERR_OK;

    if (!desired)
        return ERR_NOMEM;
    if (!json_equal(desired, json_object_get(cr, "status"))) {
        rc = patch(r, key, ns, name, "/status",
                   status_patch(json_object_get(cr, "status"), desired), msg, cap);
        *wrote = *wrote || rc == ERR_OK;
    }
    json_decref(desired);
    return rc;
}

/* The first condition of 'type' in the object's status, or NULL. */
static const json_t *condition_of(const json_t *cr, const char *type)
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

/* The condition of a pre-assignment changed from 'old' (or none) to 'v':
 * an Event for what a person acts on. */
static void tell(struct reconciler *r, const json_t *cr, const json_t *old, const struct verdict *v)
{
    const char *os = json_string_value(json_object_get(old, "status"));
    const char *orn = json_string_value(json_object_get(old, "reason"));
    const char *om = json_string_value(json_object_get(old, "message"));
    const char *note = v->message[0] ? v->message : v->reason;

    if (!r->events || (os && orn && om && strcmp(os, v->status) == 0 &&
                       strcmp(orn, v->reason) == 0 && strcmp(om, v->message) == 0))
        return;
    if (strcmp(v->phase, "Conflict") == 0)
        events_record(r->events, cr, "Warning",
                      strcmp(v->reason, "ReservationExpired") == 0 ? "ReservationExpired"
                                                                   : "Conflict",
                      "Reserve", note, queue_now_ms());
    else if (strcmp(v->status, "True") == 0 && os)
        events_record(r->events, cr, "Normal", "PreassignmentHonored", "Bind",
                      "the pod holds the devices its DeviceBinding pre-assigned", queue_now_ms());
}

static err_t preassigned(struct reconciler *r, const char *key, const char *ns, const char *name,
                         struct inputs *in, bool *wrote, uint64_t *requeue_ms, char *msg,
                         size_t cap)
{
    const char *pod_uid = in->pod ? meta_str(in->pod, "uid") : NULL;
    bool bound = reconcile_has_devices(in->pr), arrived = in->pr || in->pod;
    long long age = age_s(meta_str(in->cr, "creationTimestamp"));
    long long ttl_s = (long long)(r->ttl_ms / 1000);
    json_t *want = reservation_of(json_object_get(json_object_get(in->cr, "spec"), "containers"));
    json_t *desired, *cond;
    struct verdict v = {0};
    char now[32];
    err_t rc = ERR_OK;

    if (!want)
        return ERR_NOMEM;
    set_key(&r->reserved, key); /* a reservation under this key is this object's */
    if (!arrived && age >= ttl_s) {
        rc = in->resv ? unreserve(r, key, ns, name) : ERR_OK;
        v = (struct verdict){"Conflict", "False", "ReservationExpired", ""};
        snprintf(v.message, sizeof(v.message),
                 "the pod did not arrive on node %s within %llds; the reservation was released",
                 r->node, ttl_s);
    } else {
        rc = reserve(r, key, want, in->resv, bound, &v, msg, cap);
        r->waiting = !rc && v.reason && strcmp(v.reason, "Unavailable") == 0;
        if (!arrived)
            *requeue_ms = (uint64_t)(ttl_s - (age > 0 ? age : 0)) * 1000 + 500;
    }
    json_decref(want);
    if (rc)
        return rc;
    if (pod_uid && !owner_ok(in->cr, pod_uid)) {
        rc = patch(r, key, ns, name, "",
                   json_pack("{s:{s:o}}", "metadata", "ownerReferences",
                             owners_with_pod(in->cr, name, pod_uid)),
                   msg, cap);
        if (rc)
            return rc;
        *wrote = true;
    }
    reconcile_now(now, sizeof(now));
    desired = reconcile_status(bound ? in->pr : NULL, pod_uid ? pod_uid : "", r->node);
    cond = reconcile_condition(PREASSIGNED, v.status, v.reason, v.message,
                               condition_of(in->cr, PREASSIGNED), now);
    if (desired && cond) {
        json_object_set_new(desired, "phase", json_string(v.phase));
        json_object_set_new(desired, "conditions", json_pack("[O]", cond));
    }
    json_decref(cond);
    rc = put_status(r, key, ns, name, in->cr, desired, wrote, msg, cap);
    if (!rc)
        tell(r, in->cr, condition_of(in->cr, PREASSIGNED), &v);
    return rc;
}

/* Whether 'pod' (the API Pod, or NULL) is going: gone from the API server,
 * or with a deletionTimestamp. */
static bool pod_going(const json_t *pod)
{
    return !pod || json_object_get(json_object_get(pod, "metadata"), "deletionTimestamp");
}

/* Whether the garbage collector removes 'cr' without the syncer: it has
 * owners, all of them the Pod 'name', and none is the live 'pod' (NULL
 * when the API server has none): the Pod is gone, or another instance of
 * that name now. A Pod that is going counts as gone: the collector removes
 * its dependents once it is. Any other owner (a scheduler's PodGroup) keeps
 * the object alive, so then it is the syncer's to delete. */
static bool collected(const json_t *cr, const char *name, const json_t *pod)
{
    const json_t *owners = json_object_get(json_object_get(cr, "metadata"), "ownerReferences");
    const char *live = pod_going(pod) ? NULL : meta_str(pod, "uid");
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

static err_t ensure(struct reconciler *r, const char *key, const char *ns, const char *name,
                    struct inputs *in, bool *wrote, char *msg, size_t cap)
{
    const char *uid = meta_str(in->pod, "uid");
    json_t *desired, *made = NULL;
    err_t rc;

    if (!in->cr) {
        if (pod_going(in->pod))
            return ERR_OK; /* the collector would remove it at once */
        rc = create(r, key, ns, name, uid, &made, msg, cap);
        if (rc)
            return rc;
        *wrote = true;
        remember(r, key, made);
        in->cr = made;
    }
    if (!owner_ok(in->cr, uid)) {
        rc = patch(r, key, ns, name, "",
                   json_pack("{s:{s:o}}", "metadata", "ownerReferences",
                             owners_with_pod(in->cr, name, uid)),
                   msg, cap);
        if (rc)
            return rc;
        *wrote = true;
    }
    desired = reconcile_status(in->pr, uid, r->node);
    return put_status(r, key, ns, name, in->cr, desired, wrote, msg, cap);
}

/* The pod holds no device (and there is no pre-assignment): remove our
 * object, unless the garbage collector does (the pod's deletion is a pod
 * lifecycle's last write, and the collector's, not ours). */
static err_t unbound(struct reconciler *r, const char *key, const char *ns, const char *name,
                     struct inputs *in, bool *wrote, char *msg, size_t cap)
{
    err_t rc = ERR_OK;

    if (in->cr && !collected(in->cr, name, in->pod)) {
        rc = delete_cr(r, key, ns, name, in->cr, msg, cap);
        *wrote = rc == ERR_OK;
    }
    return rc;
}

/* "namespace/name" into its parts; false when 'key' is not one. */
static bool split_key(const char *key, char *ns, size_t ns_cap, char *name, size_t name_cap)
{
    const char *slash = strchr(key, '/');

    if (!slash || (size_t)(slash - key) >= ns_cap)
        return false;
    snprintf(ns, ns_cap, "%.*s", (int)(slash - key), key);
    snprintf(name, name_cap, "%s", slash + 1);
    return true;
}

/* The key's DeviceBinding is another node's: it is never written. No
 * DeviceBinding of this node has the key, so a reservation under it goes,
 * as one without any does. */
static err_t not_ours(struct reconciler *r, const char *key, const char *ns, const char *name,
                      const struct inputs *in)
{
    return in->resv ? unreserve(r, key, ns, name) : ERR_OK;
}

/* The pod holds devices: mirror them once its Pod is in the API server, as
 * the instance podresd knows. Until then the binding waits, said once. */
static err_t mirror(struct reconciler *r, const char *key, const char *ns, const char *name,
                    struct inputs *in, bool *wrote, char *msg, size_t cap)
{
    const char *pr_uid = json_string_value(json_object_get(in->pr, "uid"));
    const char *uid = meta_str(in->pod, "uid");
    char detail[600];

    /* Without the Pod there is no owner: wait for it (and never fight the
     * garbage collector after the Pod is deleted). */
    if (!uid) {
        snprintf(detail, sizeof(detail),
                 "no Pod of that name on node '%s' in the API server; waiting for it", r->node);
        note_skip(r, key, RECONCILE_SKIP_NO_POD, detail);
        return ERR_OK;
    }
    if (pr_uid && *pr_uid && strcmp(pr_uid, uid) != 0) {
        snprintf(detail, sizeof(detail),
                 "podresd has pod uid '%.64s', the API server's Pod uid '%.64s'; waiting until "
                 "they agree",
                 pr_uid, uid);
        note_skip(r, key, RECONCILE_SKIP_POD_UID, detail);
        return ERR_OK;
    }
    json_object_del(r->skips, key);
    return ensure(r, key, ns, name, in, wrote, msg, cap);
}

err_t reconcile_key(struct reconciler *r, const char *key, bool *wrote, uint64_t *requeue_ms,
                    char *msg, size_t cap)
{
    struct inputs in = {cache_get(r->pr, key), cache_get(r->pods, key), cache_get(r->crs, key),
                        cache_get(r->resv, key)};
    char ns[256], name[512];
    err_t rc = ERR_OK;

    *wrote = false;
    *requeue_ms = 0;
    r->waiting = false;
    msg[0] = '\0';
    if (!split_key(key, ns, sizeof(ns), name, sizeof(name)) || held(r, requeue_ms))
        goto out;
    if (foreign(r, key, in.cr)) {
        rc = not_ours(r, key, ns, name, &in);
        goto out;
    }
    if (in.cr && json_object_get(json_object_get(in.cr, "metadata"), "deletionTimestamp"))
        goto out; /* going away already */
    if (in.cr && json_array_size(json_object_get(json_object_get(in.cr, "spec"), "containers"))) {
        rc = preassigned(r, key, ns, name, &in, wrote, requeue_ms, msg, cap);
        goto out;
    }
    if (in.resv) {
        /* No pre-assignment (any more): its reservation goes. */
        rc = in.cr ? unreserve(r, key, ns, name) : stray(r, key, ns, name);
        if (rc || held(r, requeue_ms))
            goto out;
    }
    if (!reconcile_has_devices(in.pr)) {
        json_object_del(r->skips, key); /* nothing to mirror */
        rc = unbound(r, key, ns, name, &in, wrote, msg, cap);
        goto out;
    }
    rc = mirror(r, key, ns, name, &in, wrote, msg, cap);
out:
    json_decref(in.pr);
    json_decref(in.pod);
    json_decref(in.cr);
    json_decref(in.resv);
    return rc;
}
