/* SPDX-License-Identifier: Apache-2.0 */
/* reconcile.c - the decision for one key: which of podresd's state, the
 * Pod, the DeviceBinding and the reservation call for a mirror, a
 * pre-assignment (reconcile_preassign.c), a removal or nothing, and the
 * bindings not mirrored, counted and said once. The writes themselves are
 * reconcile_write.c's. */
#define LOG_MOD "reconcile"
#include "../common/common.h"
#include "../common/clock.h"
#include "queue.h"
#include "reconcile_int.h"

#include <assert.h>

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
    json_decref(r->made);
    r->made = NULL;
    r->placed = NULL;
    r->removed = NULL;
    r->foreign = NULL;
    r->skips = NULL;
    r->reserved = NULL;
    r->strays = NULL;
}

void rec_set_key(json_t **set, const char *key)
{
    if (!*set)
        *set = json_object();
    json_object_set_new(*set, key, json_true());
}

/* A binding not mirrored whose DeviceBinding of this node is there (a pod
 * of another uid, say): an Event on it too, since its status is stale. */
static void tell_skip(struct reconciler *r, const char *key, const char *name, const char *detail)
{
    json_t *cr = r->events ? cache_get(r->crs, key) : NULL;
    const char *label = dvb_label(cr);
    char note[700];

    if (cr && label && strcmp(label, r->node) == 0) {
        snprintf(note, sizeof(note), "not mirroring the binding (%s): %s", name, detail);
        events_record(r->events, cr, "Warning", "NotMirrored", "Mirror", note, clock_mono_ms());
    }
    json_decref(cr);
}

/* Count a binding not mirrored; say why once until it is mirrored, goes,
 * or is skipped for another reason. */
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

    if (dvb_has_devices(pr))
        note_skip(r, key, why, detail);
    json_decref(pr);
}

/* Whether the cached 'cr' (or NULL) is another node's, or no node's: the
 * informer asked for this node's only, but a server may ignore the label
 * selector. A skip is counted; logged once per key and label. */
static bool foreign(struct reconciler *r, const char *key, const json_t *cr)
{
    const char *owner = dvb_label(cr);
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

/* Whether the Pod of uid 'uid' that 't' names is gone from the API server
 * (or going), asked of the server itself: the Pod cache may not have seen
 * its deletion yet when the garbage collector's of its DeviceBinding comes
 * in first (two watches, no order between them). */
static bool pod_gone_live(struct reconciler *r, const struct target *t, const char *uid)
{
    char path[1024];
    json_t *pod = NULL;
    const char *live;
    bool gone;
    err_t rc;

    snprintf(path, sizeof(path), "/api/v1/namespaces/%s/pods/%s", t->ns, t->name);
    rc = rest_do(r->kube, "GET", path, NULL, NULL, &pod, NULL);
    live = rc ? NULL : dvb_meta(pod, "uid");
    gone = rc == ERR_NOTFOUND || (!rc && (dvb_pod_going(pod) || !live || strcmp(live, uid) != 0));
    json_decref(pod);
    return gone;
}

/* The pod's DeviceBinding, made when there is none, owned by the Pod 'uid',
 * with the status of podresd's binding. */
static err_t ensure(struct reconciler *r, const struct target *t, struct inputs *in,
                    const char *uid, bool *wrote, struct error *e)
{
    const char *before = json_string_value(json_object_get(r->made, t->key));
    json_t *made = NULL;
    err_t rc;

    if (!in->cr) {
        if (dvb_pod_going(in->pod))
            return ERR_OK; /* the collector would remove it at once */
        /* Made once for this Pod and gone since: deleted, by the collector
         * if the Pod is gone (its binding released a moment later). */
        if (before && strcmp(before, uid) == 0 && pod_gone_live(r, t, uid)) {
            note_skip(r, t->key, RECONCILE_SKIP_NO_POD,
                      "its Pod is gone from the API server (and its DeviceBinding collected); "
                      "waiting for podresd to release it");
            return ERR_OK;
        }
        rc = rec_create(r, t, uid, &made, e);
        if (rc)
            return rc;
        *wrote = true;
        rec_remember(r, t->key, made);
        if (!r->made)
            r->made = json_object();
        json_object_set_new(r->made, t->key, json_string(uid));
        in->cr = made;
    }
    rc = rec_own(r, t, &in->cr, uid, wrote, e);
    if (rc)
        return rc;
    return rec_put_status(r, t, in->cr, dvb_status(in->pr, uid, r->node), wrote, e);
}

/* The pod holds no device (and there is no pre-assignment): remove our
 * object, unless the garbage collector does (the pod's deletion is a pod
 * lifecycle's last write, and the collector's, not ours). */
static err_t unbound(struct reconciler *r, const struct target *t, const struct inputs *in,
                     bool *wrote, struct error *e)
{
    err_t rc;

    if (!in->cr || dvb_collected(in->cr, t->name, in->pod))
        return ERR_OK;
    rc = rec_delete(r, t, in->cr, e);
    *wrote = rc == ERR_OK;
    return rc;
}

/* "namespace/name" into 't'; false when 'key' is not one. */
static bool target_of(const char *key, struct target *t)
{
    const char *slash = strchr(key, '/');

    if (!slash || (size_t)(slash - key) >= sizeof(t->ns))
        return false;
    t->key = key;
    snprintf(t->ns, sizeof(t->ns), "%.*s", (int)(slash - key), key);
    snprintf(t->name, sizeof(t->name), "%s", slash + 1);
    return true;
}

/* The pod holds devices: mirror them once its Pod is in the API server, as
 * the instance podresd knows. Until then the binding waits, said once. */
static err_t mirror(struct reconciler *r, const struct target *t, struct inputs *in, bool *wrote,
                    struct error *e)
{
    const char *pr_uid = json_string_value(json_object_get(in->pr, "uid"));
    const char *uid = dvb_meta(in->pod, "uid");
    char detail[600];

    /* Without the Pod there is no owner: wait for it (and never fight the
     * garbage collector after the Pod is deleted). */
    if (!uid) {
        snprintf(detail, sizeof(detail),
                 "no Pod of that name on node '%s' in the API server; waiting for it", r->node);
        note_skip(r, t->key, RECONCILE_SKIP_NO_POD, detail);
        return ERR_OK;
    }
    if (pr_uid && *pr_uid && strcmp(pr_uid, uid) != 0) {
        snprintf(detail, sizeof(detail),
                 "podresd has pod uid '%.64s', the API server's Pod uid '%.64s'; waiting until "
                 "they agree",
                 pr_uid, uid);
        note_skip(r, t->key, RECONCILE_SKIP_POD_UID, detail);
        return ERR_OK;
    }
    json_object_del(r->skips, t->key);
    return ensure(r, t, in, uid, wrote, e);
}

/* The decision for a key whose DeviceBinding (if any) is this node's and
 * not going away. */
static err_t decide(struct reconciler *r, const struct target *t, struct inputs *in, bool *wrote,
                    uint64_t *requeue_ms, struct error *e)
{
    err_t rc;

    if (in->cr && json_array_size(json_object_get(json_object_get(in->cr, "spec"), "containers")))
        return rec_preassigned(r, t, in, wrote, requeue_ms, e);
    /* No pre-assignment (any more): its reservation goes. */
    if (in->resv)
        rc = in->cr ? rec_unreserve(r, t, e) : rec_stray(r, t, e);
    else
        rc = rec_forget(r, t, e);
    if (rc || rec_held(r, requeue_ms))
        return rc;
    if (!dvb_has_devices(in->pr)) {
        json_object_del(r->skips, t->key); /* nothing to mirror */
        json_object_del(r->made, t->key);
        return unbound(r, t, in, wrote, e);
    }
    return mirror(r, t, in, wrote, e);
}

/* Writes stopped for good (r->fence): said once in an Event, on the first
 * DeviceBinding of this node looked at since, for `kubectl describe`. */
static void tell_stopped(struct reconciler *r, const json_t *cr)
{
    struct error why = {0};

    if (!cr || r->fence.told || !r->events || !fence_stopped(&r->fence, &why))
        return;
    r->fence.told = true;
    events_record(r->events, cr, "Warning", "WritesStopped", "Reserve", why.msg, clock_mono_ms());
}

err_t reconcile_key(struct reconciler *r, const char *key, bool *wrote, uint64_t *requeue_ms,
                    struct error *e)
{
    struct inputs in = {cache_get(r->pr, key), cache_get(r->pods, key), cache_get(r->crs, key),
                        cache_get(r->resv, key)};
    struct target t;
    struct error none;
    err_t rc = ERR_OK;

    assert(r->node && r->kube && r->pd && r->pr && r->resv && r->pods && r->crs);
    if (!e)
        e = &none;
    e->code = ERR_OK;
    e->msg[0] = '\0';
    *wrote = false;
    *requeue_ms = 0;
    r->waiting = false;
    if (!target_of(key, &t) || rec_held(r, requeue_ms))
        goto out;
    if (foreign(r, key, in.cr)) {
        /* Never written. No DeviceBinding of this node has the key, so a
         * reservation under it goes, as one without any does. */
        rc = in.resv ? rec_unreserve(r, &t, e) : ERR_OK;
        goto out;
    }
    if (in.cr && json_object_get(json_object_get(in.cr, "metadata"), "deletionTimestamp"))
        goto out; /* going away already */
    rc = decide(r, &t, &in, wrote, requeue_ms, e);
out:
    tell_stopped(r, in.cr);
    json_decref(in.pr);
    json_decref(in.pod);
    json_decref(in.cr);
    json_decref(in.resv);
    return rc;
}
