/* SPDX-License-Identifier: Apache-2.0 */
/* reconcile_write.c - the reconciler's writes of a DeviceBinding: the
 * create, and the patches and the delete, which hold only while the object
 * is the one read (its uid and resourceVersion). After every acknowledged write the
 * answer goes into the informer's cache (newer versions only), so a key
 * queued again before the watch event arrives is not written twice. A 404
 * or 409 reads the object again: the next decision starts from the
 * server's copy, or leaves it alone if it is not this node's. */
#define LOG_MOD "reconcile"
#include "../common/common.h"
#include "reconcile_int.h"

void rec_remember(struct reconciler *r, const char *key, json_t *obj)
{
    if (json_is_object(obj))
        cache_set(r->crs, key, obj, true);
}

/* Read the object again into the cache. ERR_FORBIDDEN (the reason in 'e')
 * when it is not this node's: labelled for another node, or not at all:
 * nothing is written to it, and it is looked at again after the longest
 * backoff, not every 30 s. Whatever the cache held for the key is not what
 * the server has, and the server's is not this node's: it goes. Other
 * failures leave 'e' alone: the caller's own failure says more. */
static err_t refetch(struct reconciler *r, const struct target *t, struct error *e)
{
    char path[1024];
    json_t *obj = NULL;
    const char *owner;
    err_t rc;

    dvb_path(path, sizeof(path), t->ns, t->name, NULL);
    rc = rest_do(r->kube, "GET", path, NULL, NULL, &obj, NULL);
    if (rc == ERR_NOTFOUND) {
        cache_del(r->crs, t->key);
        return ERR_OK;
    }
    if (rc)
        return rc;
    owner = dvb_label(obj);
    if (owner && strcmp(owner, r->node) == 0) {
        rec_remember(r, t->key, obj);
    } else {
        cache_del(r->crs, t->key);
        __atomic_add_fetch(&r->skipped[RECONCILE_SKIP_FOREIGN_LABEL], 1, __ATOMIC_RELAXED);
        rc = errorf(e, ERR_FORBIDDEN,
                    "DeviceBinding %s exists but is labelled for %s%s%s, not node '%s'; leaving "
                    "it alone",
                    t->key, owner ? "node '" : "no node", owner ? owner : "", owner ? "'" : "",
                    r->node);
    }
    json_decref(obj);
    return rc;
}

err_t rec_create(struct reconciler *r, const struct target *t, const char *uid, json_t **out,
                 struct error *e)
{
    char path[1024];
    json_t *body = dvb_new(t->ns, t->name, r->node, uid);
    err_t rc, f;

    if (!body)
        return errorf(e, ERR_NOMEM, "out of memory");
    dvb_path(path, sizeof(path), t->ns, NULL, NULL);
    rc = rest_do(r->kube, "POST", path, body, NULL, out, e);
    json_decref(body);
    if (rc != ERR_CONFLICT)
        return rc;
    /* It exists already (our cache lagged): read it and decide again. */
    f = refetch(r, t, e);
    if (f == ERR_OK)
        errorf(e, rc, "DeviceBinding %s already exists; read it again", t->key);
    return f == ERR_FORBIDDEN ? f : rc;
}

err_t rec_delete(struct reconciler *r, const struct target *t, const json_t *cr, struct error *e)
{
    char path[1024];
    /* The object as decided on: its uid, and its resourceVersion, so that a
     * change the cache has not seen yet (a scheduler's spec.containers just
     * written) makes it a 409 and a new decision, not a lost pre-assignment. */
    json_t *pre = json_object(), *out = NULL;
    json_t *body = json_pack("{s:s,s:s,s:o}", "kind", "DeleteOptions", "apiVersion", "v1",
                             "preconditions", pre);
    const char *uid = dvb_meta(cr, "uid"), *rv = dvb_meta(cr, "resourceVersion");
    err_t rc = ERR_NOMEM;

    if (!body)
        return errorf(e, rc, "out of memory");
    /* a field given empty would be compared as such: only those known */
    if ((uid && json_object_set_new(pre, "uid", json_string(uid))) ||
        (rv && json_object_set_new(pre, "resourceVersion", json_string(rv)))) {
        errorf(e, rc, "out of memory");
        goto out;
    }
    dvb_path(path, sizeof(path), t->ns, t->name, NULL);
    rc = rest_do(r->kube, "DELETE", path, body, NULL, &out, e);
    json_decref(out);
    if (rc == ERR_OK || rc == ERR_NOTFOUND) {
        cache_del(r->crs, t->key);
        rc = ERR_OK;
    } else if (rc == ERR_CONFLICT && refetch(r, t, e) == ERR_FORBIDDEN) {
        /* Changed, or another object by that name now, not this node's. */
        rc = ERR_FORBIDDEN;
    }
out:
    json_decref(body);
    return rc;
}

/* Make the merge patch 'body' hold only while the object is still 'cr':
 * its uid and resourceVersion go in the patch's metadata. The API server
 * answers 409 when the resourceVersion differs, on the object and on
 * /status alike, so an object deleted and made again (under another node's
 * label, say) since 'cr' was read is not written. The uid alone would not
 * do: /status ignores it, and the object refuses a different one as an
 * invalid change (422) only after the resourceVersion check. A field the
 * cache lacks is left out. */
static err_t precondition(json_t *body, const json_t *cr)
{
    json_t *meta = json_object_get(body, "metadata");
    const char *uid = dvb_meta(cr, "uid"), *rv = dvb_meta(cr, "resourceVersion");

    if (!meta) {
        meta = json_object();
        if (json_object_set_new(body, "metadata", meta))
            return ERR_NOMEM;
    }
    if (uid && json_object_set_new(meta, "uid", json_string(uid)))
        return ERR_NOMEM;
    if (rv && json_object_set_new(meta, "resourceVersion", json_string(rv)))
        return ERR_NOMEM;
    return ERR_OK;
}

err_t rec_patch(struct reconciler *r, const struct target *t, const json_t *cr, const char *sub,
                json_t *body, json_t **out, struct error *e)
{
    char path[1024];
    json_t *ans = NULL;
    err_t rc = ERR_NOMEM;

    if (!body || precondition(body, cr)) {
        errorf(e, rc, "out of memory");
        goto out;
    }
    dvb_path(path, sizeof(path), t->ns, t->name, sub);
    rc = rest_do(r->kube, "PATCH", path, body, REST_MERGE_PATCH, &ans, e);
    if (!rc) {
        rec_remember(r, t->key, ans);
    } else if (rc == ERR_NOTFOUND || rc == ERR_CONFLICT) {
        /* Gone, changed or replaced since it was read: decided again on
         * the server's copy, unless that is not this node's. */
        if (refetch(r, t, e) == ERR_FORBIDDEN)
            rc = ERR_FORBIDDEN;
    }
    if (!rc && out && json_is_object(ans))
        *out = json_incref(ans);
out:
    json_decref(ans);
    json_decref(body);
    return rc;
}

err_t rec_own(struct reconciler *r, const struct target *t, json_t **cr, const char *pod_uid,
              bool *wrote, struct error *e)
{
    json_t *now = NULL;
    err_t rc;

    if (!pod_uid || dvb_owned_by(*cr, pod_uid))
        return ERR_OK;
    rc = rec_patch(r, t, *cr, "",
                   json_pack("{s:{s:o}}", "metadata", "ownerReferences",
                             dvb_owners_with_pod(*cr, t->name, pod_uid)),
                   &now, e);
    if (rc)
        return rc;
    *wrote = true;
    /* The next write's preconditions are the object's as written now. */
    if (now) {
        json_decref(*cr);
        *cr = now;
    }
    return ERR_OK;
}

err_t rec_put_status(struct reconciler *r, const struct target *t, const json_t *cr,
                     json_t *desired, bool *wrote, struct error *e)
{
    err_t rc = ERR_OK;

    if (!desired)
        return errorf(e, ERR_NOMEM, "out of memory");
    if (!json_equal(desired, json_object_get(cr, "status"))) {
        rc = rec_patch(r, t, cr, "/status",
                       dvb_status_patch(json_object_get(cr, "status"), desired), NULL, e);
        *wrote = *wrote || rc == ERR_OK;
    }
    json_decref(desired);
    return rc;
}
