/* SPDX-License-Identifier: Apache-2.0 */
/* bind.c - DeviceBinding first, Binding second: once the pod is bound its
 * node's podres-syncer may already look for the pre-assignment, so the
 * pre-assignment must exist before. Another writer's pre-assignment (a
 * DeviceBinding with spec.containers and without this extender's
 * annotation) is never overwritten: the bind fails and says so. */
#define LOG_MOD "bind"
#include "../common/common.h"
#include "../common/clock.h"
#include "../common/jsonx.h"
#include "bind.h"

#include <assert.h>

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

/* Whether the existing 'cur' may be written over, else 'e' says why
 * (ERR_CONFLICT). */
static bool may_write(const json_t *cur, const char *uid, const char *node, struct error *e)
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
            errorf(e, ERR_CONFLICT,
                   "its DeviceBinding belongs to an earlier pod of that name (uid "
                   "%.64s) and waits for the garbage collector",
                   u);
            return false;
        }
    }
    if (json_array_size(json_object_get(spec, "containers")) && !ours) {
        errorf(e, ERR_CONFLICT, "its DeviceBinding holds another writer's pre-assignment");
        return false;
    }
    if (snode && *snode && strcmp(snode, node) != 0 && !ours) {
        errorf(e, ERR_CONFLICT, "its DeviceBinding is for node '%.253s'", snode);
        return false;
    }
    return true;
}

/* DELETE the DeviceBinding with uid precondition 'uid'. */
static err_t delete_dvb(struct rest *k, const struct args_bind *b, const char *uid, struct error *e)
{
    char path[700];
    json_t *body = json_pack("{s:{s:s}}", "preconditions", "uid", uid), *ans = NULL;
    err_t rc;

    if (!body)
        return errorf(e, ERR_NOMEM, "out of memory");
    snprintf(path, sizeof(path), DVB_PATH "/%s", b->ns, b->name);
    rc = rest_do(k, "DELETE", path, body, NULL, &ans, e);
    json_decref(body);
    json_decref(ans);
    return rc == ERR_NOTFOUND ? ERR_OK : rc;
}

/* Create the DeviceBinding 'want'. */
static err_t create_dvb(struct rest *k, const struct args_bind *b, json_t *want, struct written *w,
                        struct error *e)
{
    char path[700];
    json_t *ans = NULL;
    err_t rc;

    snprintf(path, sizeof(path), DVB_PATH, b->ns);
    rc = rest_do(k, "POST", path, want, NULL, &ans, e);
    if (!rc)
        note_written(w, ans, true);
    json_decref(ans);
    return rc;
}

/* Write 'want' over 'cur' (same node, or ours elsewhere: then deleted and made anew). */
static err_t replace_dvb(struct rest *k, const struct args_bind *b, const json_t *cur, json_t *want,
                         struct written *w, struct error *e)
{
    const json_t *md = json_object_get(cur, "metadata");
    const char *snode = json_string_value(
        json_object_get(json_object_get(cur, "spec"), "nodeName"));
    const char *uid = json_string_value(json_object_get(md, "uid"));
    char path[700];
    json_t *ans = NULL;
    err_t rc;

    if (snode && *snode && strcmp(snode, b->node) != 0) {
        rc = delete_dvb(k, b, uid ? uid : "", e); /* spec.nodeName is immutable */
        return rc ? rc : create_dvb(k, b, want, w, e);
    }
    json_object_set(json_object_get(want, "metadata"), "resourceVersion",
                    json_object_get(md, "resourceVersion"));
    if (json_object_get(cur, "status"))
        json_object_set(want, "status", json_object_get(cur, "status"));
    snprintf(path, sizeof(path), DVB_PATH "/%s", b->ns, b->name);
    rc = rest_do(k, "PUT", path, want, NULL, &ans, e);
    if (!rc)
        note_written(w, ans, false);
    json_decref(ans);
    return rc;
}

/* Write the pod's pre-assignment of 'containers'. */
static err_t write_dvb(struct rest *k, const struct args_bind *b, const char *uid,
                       const json_t *containers, struct written *w, struct error *e)
{
    json_t *want = bind_devicebinding(b->ns, b->name, uid, b->node, containers), *cur = NULL;
    char path[700];
    err_t rc;

    if (!want)
        return errorf(e, ERR_NOMEM, "out of memory");
    snprintf(path, sizeof(path), DVB_PATH "/%s", b->ns, b->name);
    rc = rest_do(k, "GET", path, NULL, NULL, &cur, e);
    if (rc == ERR_NOTFOUND)
        rc = create_dvb(k, b, want, w, e);
    else if (rc == ERR_OK)
        rc = may_write(cur, uid, b->node, e) ? replace_dvb(k, b, cur, want, w, e) : ERR_CONFLICT;
    json_decref(cur);
    json_decref(want);
    return rc;
}

/* Take back what write_dvb wrote: delete what it created, or drop the
 * spec.containers it put on an existing one. */
static err_t unwrite_dvb(struct rest *k, const struct args_bind *b, const struct written *w)
{
    char path[700];
    struct error err = {0};
    json_t *patch, *ans = NULL;
    err_t rc;

    if (w->created) {
        rc = delete_dvb(k, b, w->uid, &err);
    } else {
        snprintf(path, sizeof(path), DVB_PATH "/%s", b->ns, b->name);
        patch = json_pack("{s:{s:s},s:{s:n}}", "metadata", "resourceVersion", w->rv, "spec",
                          "containers");
        rc = patch ? rest_do(k, "PATCH", path, patch, REST_MERGE_PATCH, &ans, &err)
                   : errorf(&err, ERR_NOMEM, "out of memory");
        json_decref(patch);
        json_decref(ans);
    }
    if (rc)
        log_warn("cannot take back the pre-assignment of pod '%s/%s': %s", b->ns, b->name,
                 error_msg(&err));
    return rc;
}

/* POST the pod's Binding to its node. */
static err_t post_binding(struct rest *k, const struct args_bind *b, const char *uid,
                          struct error *e)
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
        return errorf(e, ERR_NOMEM, "out of memory");
    snprintf(path, sizeof(path), "/api/v1/namespaces/%s/pods/%s/binding", b->ns, b->name);
    rc = rest_do(k, "POST", path, body, NULL, &ans, e);
    json_decref(body);
    json_decref(ans);
    return rc;
}

/* Whether 'name' is one of the NULL-terminated 'list'. */
static bool listed(char *const *list, const char *name)
{
    size_t i;

    for (i = 0; list && list[i]; i++) {
        if (strcmp(list[i], name) == 0)
            return true;
    }
    return false;
}

/* ERR_FORBIDDEN with 'e' saying why when 'pod' is not one this extender may
 * bind to b->node: another instance, bound already, another scheduler's, or
 * a node it did not pass filter on. */
static err_t check_pod(const struct bind_checks *chk, const struct args_bind *b, const json_t *pod,
                       struct error *e)
{
    const char *u = json_string_value(json_object_get(json_object_get(pod, "metadata"), "uid"));
    const json_t *spec = json_object_get(pod, "spec");
    const char *on = json_string_value(json_object_get(spec, "nodeName"));
    const char *sched = json_string_value(json_object_get(spec, "schedulerName"));

    if (!u || strcmp(u, b->uid) != 0)
        return errorf(e, ERR_CONFLICT, "the pod is another instance now (uid %.64s)",
                      u ? u : "none");
    if (on && *on)
        return errorf(e, ERR_FORBIDDEN, "the pod is bound already (to node '%.253s')", on);
    if (!listed(chk->schedulers, sched ? sched : "default-scheduler"))
        return errorf(e, ERR_FORBIDDEN, "the pod's scheduler '%.64s' is not served here",
                      sched ? sched : "default-scheduler");
    if (!passed_has(chk->passed, b->uid, b->node, clock_mono_ms()))
        return errorf(e, ERR_FORBIDDEN, "node '%.253s' did not pass filter for this pod", b->node);
    return ERR_OK;
}

/* The pod, its uid (checked against the one asked for) and its requests. */
static err_t read_pod(struct rest *k, const struct bind_checks *chk, const struct args_bind *b,
                      struct bind_stats *stats, char *uid, size_t uidcap, json_t **requests,
                      struct error *e)
{
    char path[700];
    json_t *pod = NULL, *totals = NULL;
    err_t rc;

    snprintf(path, sizeof(path), "/api/v1/namespaces/%s/pods/%s", b->ns, b->name);
    rc = rest_do(k, "GET", path, NULL, NULL, &pod, e);
    if (rc)
        goto out;
    rc = check_pod(chk, b, pod, e);
    if (rc) {
        __atomic_add_fetch(&stats->refused, 1, __ATOMIC_RELAXED);
        goto out;
    }
    str_copy(uid, uidcap, b->uid);
    rc = args_pod_requests(pod, requests, &totals, e);
out:
    json_decref(pod);
    json_decref(totals);
    return rc;
}

/* The devices chosen and written: the Binding, or the pre-assignment taken back. */
static err_t bind_written(struct view *view, struct rest *k, const struct args_bind *b,
                          const char *uid, const struct written *w, struct bind_stats *stats,
                          struct error *e)
{
    char key[520];
    err_t rc = post_binding(k, b, uid, e);

    if (!rc)
        return ERR_OK;
    str_join(key, sizeof(key), b->ns, '/', b->name);
    if (w && !unwrite_dvb(k, b, w))
        __atomic_add_fetch(&stats->removed, 1, __ATOMIC_RELAXED);
    view_unassume(view, key);
    return rc;
}

/* The pod's devices chosen on its node, its pre-assignment written when it
 * has any, then its Binding. */
static err_t bind_steps(struct view *view, struct rest *k, const struct bind_checks *chk,
                        const struct args_bind *b, const char *key, struct bind_stats *stats,
                        struct error *e)
{
    json_t *requests = NULL, *containers = NULL;
    struct written w = {0};
    char uid[128];
    err_t rc = read_pod(k, chk, b, stats, uid, sizeof(uid), &requests, e);

    if (rc)
        goto out;
    rc = view_choose(view, b->node, key, uid, requests, &containers, e);
    if (rc)
        goto out;
    if (!json_array_size(containers)) {
        rc = bind_written(view, k, b, uid, NULL, stats, e);
        goto out;
    }
    rc = write_dvb(k, b, uid, containers, &w, e);
    if (rc)
        view_unassume(view, key);
    else
        rc = bind_written(view, k, b, uid, &w, stats, e);
out:
    json_decref(requests);
    json_decref(containers);
    return rc;
}

err_t bind_pod(struct view *view, struct rest *k, const struct bind_checks *chk,
               const struct args_bind *b, struct bind_stats *stats, struct error *e)
{
    struct error none = {0};
    char key[520];
    err_t rc;

    assert(view && k && chk && b && stats);
    if (!e)
        e = &none;
    str_join(key, sizeof(key), b->ns, '/', b->name);
    rc = bind_steps(view, k, chk, b, key, stats, e);
    if (rc) {
        __atomic_add_fetch(&stats->failures, 1, __ATOMIC_RELAXED);
        log_warn("cannot bind pod '%s' to node '%s': %s", key, b->node, error_msg(e));
    } else {
        __atomic_add_fetch(&stats->binds, 1, __ATOMIC_RELAXED);
        log_debug("bound pod '%s' to node '%s'", key, b->node);
    }
    return rc;
}
