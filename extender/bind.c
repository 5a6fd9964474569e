/* SPDX-License-Identifier: Apache-2.0 */
/* bind.c - DeviceBinding first, Binding second: once the pod is bound its
 * node's podres-syncer may already look for the pre-assignment, so the
 * pre-assignment must exist before. Another writer's pre-assignment (a
 * DeviceBinding with spec.containers and without this extender's
 * annotation) is never overwritten: the bind fails and says so. */
#define LOG_MOD "bind"
#include "../common/common.h"
#include "../common/jsonx.h"
#include "bind.h"

#define DVB_PATH "/apis/podres.dev/v1alpha1/namespaces/%s/devicebindings"

/* What was written, to take it back. */
struct written {
    bool created;  /* POSTed (else PUT over an existing one) */
    char uid[128]; /* the DeviceBinding's metadata.uid */
    char rv[64];   /* its resourceVersion after the write */
};

json_t *bind_devicebinding(const char *ns, const char *name, const char *uid, const char *node,
                           const json_t *containers)
{
    return jsonx_object(
        "apiVersion", json_string("podres.dev/v1alpha1"), "kind", json_string("DeviceBinding"),
        "metadata",
        jsonx_object("name", json_string(name), "namespace", json_string(ns), "labels",
                     jsonx_object("podres.dev/node", json_string(node), NULL), "annotations",
                     jsonx_object(BIND_ANNOTATION, json_string(BIND_WRITER), NULL),
                     "ownerReferences",
                     json_pack("[{s:s,s:s,s:s,s:s}]", "apiVersion", "v1", "kind", "Pod", "name",
                               name, "uid", uid),
                     NULL),
        "spec",
        jsonx_object("nodeName", json_string(node), "containers", json_deep_copy(containers), NULL),
        NULL);
}

static void note_written(struct written *w, const json_t *obj, bool created)
{
    const json_t *md = json_object_get(obj, "metadata");
    const char *uid = json_string_value(json_object_get(md, "uid"));
    const char *rv = json_string_value(json_object_get(md, "resourceVersion"));

    w->created = created;
    str_copy(w->uid, sizeof(w->uid), uid ? uid : "");
    str_copy(w->rv, sizeof(w->rv), rv ? rv : "");
}

/* Whether the existing 'cur' may be written over, else 'msg' says why. */
static bool may_write(const json_t *cur, const char *uid, const char *node, char *msg, size_t cap)
{
    const json_t *md = json_object_get(cur, "metadata"), *o;
    const json_t *spec = json_object_get(cur, "spec");
    const char *by = json_string_value(
        json_object_get(json_object_get(md, "annotations"), BIND_ANNOTATION));
    const char *snode = json_string_value(json_object_get(spec, "nodeName"));
    bool ours = by && strcmp(by, BIND_WRITER) == 0;
    size_t i;

    json_array_foreach(json_object_get(md, "ownerReferences"), i, o) {
        const char *kind = json_string_value(json_object_get(o, "kind"));
        const char *u = json_string_value(json_object_get(o, "uid"));

        if (kind && u && strcmp(kind, "Pod") == 0 && strcmp(u, uid) != 0) {
            snprintf(msg, cap,
                     "its DeviceBinding belongs to an earlier pod of that name (uid "
                     "%.64s) and waits for the garbage collector",
                     u);
            return false;
        }
    }
    if (json_array_size(json_object_get(spec, "containers")) && !ours) {
        snprintf(msg, cap, "its DeviceBinding holds another writer's pre-assignment");
        return false;
    }
    if (snode && *snode && strcmp(snode, node) != 0 && !ours) {
        snprintf(msg, cap, "its DeviceBinding is for node '%.253s'", snode);
        return false;
    }
    return true;
}

/* DELETE the DeviceBinding with uid precondition 'uid'. */
static err_t delete_dvb(struct rest *k, const struct args_bind *b, const char *uid, char *msg,
                        size_t cap)
{
    char path[700];
    json_t *body = json_pack("{s:{s:s}}", "preconditions", "uid", uid), *ans = NULL;
    err_t rc;

    snprintf(path, sizeof(path), DVB_PATH "/%s", b->ns, b->name);
    rc = body ? rest_do(k, "DELETE", path, body, NULL, &ans, msg, cap) : ERR_NOMEM;
    json_decref(body);
    json_decref(ans);
    return rc == ERR_NOTFOUND ? ERR_OK : rc;
}

/* Create the DeviceBinding 'want'. */
static err_t create_dvb(struct rest *k, const struct args_bind *b, json_t *want, struct written *w,
                        char *msg, size_t cap)
{
    char path[700];
    json_t *ans = NULL;
    err_t rc;

    snprintf(path, sizeof(path), DVB_PATH, b->ns);
    rc = rest_do(k, "POST", path, want, NULL, &ans, msg, cap);
    if (!rc)
        note_written(w, ans, true);
    json_decref(ans);
    return rc;
}

/* Write 'want' over 'cur' (same node, or ours elsewhere: then deleted and made anew). */
static err_t replace_dvb(struct rest *k, const struct args_bind *b, const json_t *cur, json_t *want,
                         struct written *w, char *msg, size_t cap)
{
    const json_t *md = json_object_get(cur, "metadata");
    const char *snode = json_string_value(
        json_object_get(json_object_get(cur, "spec"), "nodeName"));
    const char *uid = json_string_value(json_object_get(md, "uid"));
    char path[700];
    json_t *ans = NULL;
    err_t rc;

    if (snode && *snode && strcmp(snode, b->node) != 0) {
        rc = delete_dvb(k, b, uid ? uid : "", msg, cap); /* spec.nodeName is immutable */
        return rc ? rc : create_dvb(k, b, want, w, msg, cap);
    }
    json_object_set(json_object_get(want, "metadata"), "resourceVersion",
                    json_object_get(md, "resourceVersion"));
    if (json_object_get(cur, "status"))
        json_object_set(want, "status", json_object_get(cur, "status"));
    snprintf(path, sizeof(path), DVB_PATH "/%s", b->ns, b->name);
    rc = rest_do(k, "PUT", path, want, NULL, &ans, msg, cap);
    if (!rc)
        note_written(w, ans, false);
    json_decref(ans);
    return rc;
}

/* Write the pod's pre-assignment of 'containers'. */
static err_t write_dvb(struct rest *k, const struct args_bind *b, const char *uid,
                       const json_t *containers, struct written *w, char *msg, size_t cap)
{
    json_t *want = bind_devicebinding(b->ns, b->name, uid, b->node, containers), *cur = NULL;
    char path[700];
    err_t rc;

    if (!want)
        return ERR_NOMEM;
    snprintf(path, sizeof(path), DVB_PATH "/%s", b->ns, b->name);
    rc = rest_do(k, "GET", path, NULL, NULL, &cur, msg, cap);
    if (rc == ERR_NOTFOUND)
        rc = create_dvb(k, b, want, w, msg, cap);
    else if (!rc && !may_write(cur, uid, b->node, msg, cap))
        rc = ERR_CONFLICT;
    else if (!rc)
        rc = replace_dvb(k, b, cur, want, w, msg, cap);
    json_decref(cur);
    json_decref(want);
    return rc;
}

/* Take back what write_dvb wrote: delete what it created, or drop the
 * spec.containers it put on an existing one. */
static err_t unwrite_dvb(struct rest *k, const struct args_bind *b, const struct written *w)
{
    char path[700], msg[512];
    json_t *patch, *ans = NULL;
    err_t rc;

    if (w->created) {
        rc = delete_dvb(k, b, w->uid, msg, sizeof(msg));
    } else {
        snprintf(path, sizeof(path), DVB_PATH "/%s", b->ns, b->name);
        patch = json_pack("{s:{s:s},s:{s:n}}", "metadata", "resourceVersion", w->rv, "spec",
                          "containers");
        rc = patch ? rest_do(k, "PATCH", path, patch, REST_MERGE_PATCH, &ans, msg, sizeof(msg))
                   : ERR_NOMEM;
        json_decref(patch);
        json_decref(ans);
    }
    if (rc)
        log_warn("cannot take back the pre-assignment of pod '%s/%s': %s", b->ns, b->name, msg);
    return rc;
}

/* POST the pod's Binding to its node. */
static err_t post_binding(struct rest *k, const struct args_bind *b, const char *uid, char *msg,
                          size_t cap)
{
    char path[700];
    json_t *body, *ans = NULL;
    err_t rc;

    body = jsonx_object("apiVersion", json_string("v1"), "kind", json_string("Binding"), "metadata",
                        jsonx_object("name", json_string(b->name), "namespace", json_string(b->ns),
                                     "uid", json_string(uid), NULL),
                        "target",
                        jsonx_object("apiVersion", json_string("v1"), "kind", json_string("Node"),
                                     "name", json_string(b->node), NULL),
                        NULL);
    if (!body)
        return ERR_NOMEM;
    snprintf(path, sizeof(path), "/api/v1/namespaces/%s/pods/%s/binding", b->ns, b->name);
    rc = rest_do(k, "POST", path, body, NULL, &ans, msg, cap);
    json_decref(body);
    json_decref(ans);
    return rc;
}

/* The pod, its uid (checked against the one asked for) and its requests. */
static err_t read_pod(struct rest *k, const struct args_bind *b, char *uid, size_t uidcap,
                      json_t **requests, char *msg, size_t cap)
{
    char path[700];
    json_t *pod = NULL, *totals = NULL;
    const char *u;
    err_t rc;

    snprintf(path, sizeof(path), "/api/v1/namespaces/%s/pods/%s", b->ns, b->name);
    rc = rest_do(k, "GET", path, NULL, NULL, &pod, msg, cap);
    if (rc)
        goto out;
    u = json_string_value(json_object_get(json_object_get(pod, "metadata"), "uid"));
    if (!u || (b->uid[0] && strcmp(u, b->uid) != 0)) {
        snprintf(msg, cap, "the pod is another instance now (uid %.64s)", u ? u : "none");
        rc = ERR_CONFLICT;
        goto out;
    }
    str_copy(uid, uidcap, u);
    rc = args_pod_requests(pod, requests, &totals, msg, cap);
out:
    json_decref(pod);
    json_decref(totals);
    return rc;
}

/* The devices chosen and written: the Binding, or the pre-assignment taken back. */
static err_t bind_written(struct view *view, struct rest *k, const struct args_bind *b,
                          const char *uid, const struct written *w, struct bind_stats *stats,
                          char *msg, size_t cap)
{
    char key[520];
    err_t rc = post_binding(k, b, uid, msg, cap);

    if (!rc)
        return ERR_OK;
    str_join(key, sizeof(key), b->ns, '/', b->name);
    if (w && !unwrite_dvb(k, b, w))
        __atomic_add_fetch(&stats->removed, 1, __ATOMIC_RELAXED);
    view_unassume(view, key);
    return rc;
}

err_t bind_pod(struct view *view, struct rest *k, const struct args_bind *b,
               struct bind_stats *stats, char *msg, size_t cap)
{
    json_t *requests = NULL, *containers = NULL;
    struct written w = {0};
    char uid[128], key[520];
    err_t rc = read_pod(k, b, uid, sizeof(uid), &requests, msg, cap);

    str_join(key, sizeof(key), b->ns, '/', b->name);
    if (!rc)
        rc = view_choose(view, b->node, key, uid, requests, &containers, msg, cap);
    if (!rc && json_array_size(containers)) {
        rc = write_dvb(k, b, uid, containers, &w, msg, cap);
        if (rc)
            view_unassume(view, key);
        else
            rc = bind_written(view, k, b, uid, &w, stats, msg, cap);
    } else if (!rc) {
        rc = bind_written(view, k, b, uid, NULL, stats, msg, cap);
    }
    if (rc) {
        __atomic_add_fetch(&stats->failures, 1, __ATOMIC_RELAXED);
        log_warn("cannot bind pod '%s' to node '%s': %s", key, b->node, msg);
    } else {
        __atomic_add_fetch(&stats->binds, 1, __ATOMIC_RELAXED);
        log_debug("bound pod '%s' to node '%s'", key, b->node);
    }
    json_decref(requests);
    json_decref(containers);
    return rc;
}
