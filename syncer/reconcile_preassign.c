/* SPDX-License-Identifier: Apache-2.0 */
/* reconcile_preassign.c - pre-assignments: the DeviceBinding's
 * spec.containers reserved in podresd (PUT /v1/reservations/NS/NAME), the
 * status and condition that follow the reservation's state, the TTL, the
 * Events a person acts on, and the reservations no DeviceBinding of this
 * node owns. Also the signs of another syncer on this podresd (fence.h). */
#define LOG_MOD "reconcile"
#include "../common/common.h"
#include "../common/clock.h"
#include "queue.h"
#include "reconcile_int.h"

#include <time.h>

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
        fence_lost(&r->fence, r->node, clock_mono_ms()))
        json_object_clear(r->removed);
    rec_set_key(&r->placed, key);
}

/* PUT 'want' as the reservation under 'key'; on ERR_OK *ans is podresd's
 * answer (new). */
static err_t put_reservation(struct reconciler *r, const char *key, const json_t *want,
                             json_t **ans, struct error *e)
{
    char path[1024];
    json_t *body = json_pack("{s:O}", "containers", want);
    err_t rc;

    if (!body)
        return errorf(e, ERR_NOMEM, "out of memory");
    snprintf(path, sizeof(path), "/v1/reservations/%s", key);
    rc = rest_do(r->pd, "PUT", path, body, NULL, ans, e);
    json_decref(body);
    if (!rc)
        placed(r, key);
    return rc;
}

/* Place or update the reservation; the verdict follows its state. */
static err_t reserve(struct reconciler *r, const char *key, const json_t *want, json_t *resv,
                     bool bound, struct verdict *v, struct error *e)
{
    json_t *ans = NULL, *have = resv ? reservation_of(json_object_get(resv, "containers")) : NULL;
    err_t rc = ERR_OK;

    if (!have || !json_equal(have, want)) {
        rc = put_reservation(r, key, want, &ans, e);
        if (rc == ERR_CONFLICT || rc == ERR_UNPROCESSABLE || rc == ERR_INVAL) {
            *v = (struct verdict){"Conflict", "False", "Unavailable", ""};
            str_copy(v->message, sizeof(v->message), bare(e->msg));
            rc = ERR_OK;
            goto out; /* podresd refused: the verdict says why */
        }
        resv = json_object_get(ans, "reservation");
    }
    if (!rc)
        verdict_of(resv, bound, v);
out:
    json_decref(have);
    json_decref(ans);
    return rc;
}

static err_t release(struct reconciler *r, const struct target *t, struct error *e)
{
    char path[1024];
    json_t *ans = NULL;
    err_t rc;

    snprintf(path, sizeof(path), "/v1/reservations/%s/%s", t->ns, t->name);
    rc = rest_do(r->pd, "DELETE", path, NULL, NULL, &ans, e);
    json_decref(ans);
    return rc == ERR_NOTFOUND ? ERR_OK : rc;
}

/* Remove the reservation under 'key'. One this reconciler placed for a
 * pre-assignment goes silently; any other was made outside a DeviceBinding
 * (a PUT over podresd's REST API by hand): with the syncer running, the
 * node's reservations mirror DeviceBindings, so it is undone, and said once
 * per reservation, since nothing else tells its maker. */
err_t rec_unreserve(struct reconciler *r, const struct target *t, struct error *e)
{
    err_t rc;

    if (!json_object_get(r->reserved, t->key) && !json_object_get(r->strays, t->key)) {
        log_info("removing reservation %s made outside a DeviceBinding: this node's "
                 "reservations are owned by DeviceBindings; pre-assign with a DeviceBinding "
                 "instead",
                 t->key);
        rec_set_key(&r->strays, t->key);
    }
    rc = release(r, t, e);
    if (!rc) {
        json_object_del(r->placed, t->key);
        json_object_del(r->reserved, t->key);
        json_object_del(r->strays, t->key);
    }
    return rc;
}

err_t rec_forget(struct reconciler *r, const struct target *t, struct error *e)
{
    /* A reservation this reconciler's PUT holds may be one the cache has
     * not seen yet: it is released (a 404 is fine), which forgets the key. */
    if (json_object_get(r->placed, t->key))
        return rec_unreserve(r, t, e);
    json_object_del(r->reserved, t->key); /* a no-op without it */
    return ERR_OK;
}

/* The node whose DeviceBinding NS/NAME pre-assigns a reservation, when it
 * is another than this one, into 'other' ("" when none: no such object,
 * labelled for this node or none, no spec.containers). */
static err_t claimant(struct reconciler *r, const struct target *t, char *other, size_t cap,
                      struct error *e)
{
    char path[1024];
    json_t *obj = NULL;
    const char *owner;
    err_t rc;

    other[0] = '\0';
    dvb_path(path, sizeof(path), t->ns, t->name, NULL);
    rc = rest_do(r->kube, "GET", path, NULL, NULL, &obj, e);
    if (rc == ERR_NOTFOUND)
        return ERR_OK;
    if (rc)
        return rc;
    owner = dvb_label(obj);
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
err_t rec_stray(struct reconciler *r, const struct target *t, struct error *e)
{
    char other[254];
    err_t rc;

    if (json_object_get(r->reserved, t->key) || !json_object_get(r->removed, t->key)) {
        if (!json_object_get(r->reserved, t->key)) {
            if (json_object_size(r->removed) >= 4096)
                json_object_clear(r->removed); /* bounded; a fight shows again */
            rec_set_key(&r->removed, t->key);
        }
        return rec_unreserve(r, t, e);
    }
    rc = claimant(r, t, other, sizeof(other), e);
    if (rc)
        return rc;
    if (!*other) {
        json_object_del(r->removed, t->key);
        return rec_unreserve(r, t, e);
    }
    fence_claimed(&r->fence, r->node, other);
    json_object_clear(r->removed);
    return ERR_OK;
}

/* Writes are stopped (another syncer on this podresd): the key comes back
 * when they may start again. */
bool rec_held(struct reconciler *r, uint64_t *requeue_ms)
{
    uint64_t left;

    if (!fence_holds(&r->fence, &left))
        return false;
    *requeue_ms = left + 100;
    return true;
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
                      "Reserve", note, clock_mono_ms());
    else if (strcmp(v->status, "True") == 0 && os)
        events_record(r->events, cr, "Normal", "PreassignmentHonored", "Bind",
                      "the pod holds the devices its DeviceBinding pre-assigned", clock_mono_ms());
}

/* The reservation of in->cr's pre-assignment and the verdict it earns:
 * released after the TTL while the pod has not arrived on the node, else
 * placed or updated (and the key looked at again at the TTL). */
static err_t settle(struct reconciler *r, const struct target *t, const struct inputs *in,
                    bool bound, struct verdict *v, uint64_t *requeue_ms, struct error *e)
{
    bool arrived = in->pr || in->pod;
    long long age = age_s(dvb_meta(in->cr, "creationTimestamp"));
    long long ttl_s = (long long)(r->ttl_ms / 1000);
    json_t *want;
    err_t rc;

    if (!arrived && age >= ttl_s) {
        *v = (struct verdict){"Conflict", "False", "ReservationExpired", ""};
        snprintf(v->message, sizeof(v->message),
                 "the pod did not arrive on node %s within %llds; the reservation was released",
                 r->node, ttl_s);
        return in->resv ? rec_unreserve(r, t, e) : ERR_OK;
    }
    want = reservation_of(json_object_get(json_object_get(in->cr, "spec"), "containers"));
    if (!want)
        return errorf(e, ERR_NOMEM, "out of memory");
    rc = reserve(r, t->key, want, in->resv, bound, v, e);
    json_decref(want);
    r->waiting = !rc && v->reason && strcmp(v->reason, "Unavailable") == 0;
    if (!arrived)
        *requeue_ms = (uint64_t)(ttl_s - (age > 0 ? age : 0)) * 1000 + 500;
    return rc;
}

/* The status of a pre-assignment: podresd's binding when the pod holds the
 * devices, the verdict's phase and its condition. New, or NULL. */
static json_t *preassigned_status(struct reconciler *r, const struct inputs *in,
                                  const char *pod_uid, bool bound, const struct verdict *v)
{
    json_t *desired = dvb_status(bound ? in->pr : NULL, pod_uid ? pod_uid : "", r->node);
    json_t *cond;
    char now[32];

    dvb_now(now, sizeof(now));
    cond = dvb_condition(PREASSIGNED, v->status, v->reason, v->message,
                         dvb_condition_of(in->cr, PREASSIGNED), now);
    if (desired && cond) {
        json_object_set_new(desired, "phase", json_string(v->phase));
        json_object_set_new(desired, "conditions", json_pack("[O]", cond));
    }
    json_decref(cond);
    return desired;
}

err_t rec_preassigned(struct reconciler *r, const struct target *t, struct inputs *in, bool *wrote,
                      uint64_t *requeue_ms, struct error *e)
{
    const char *pod_uid = in->pod ? dvb_meta(in->pod, "uid") : NULL;
    bool bound = dvb_has_devices(in->pr);
    struct verdict v = {0};
    err_t rc;

    rec_set_key(&r->reserved, t->key); /* a reservation under this key is this object's */
    rc = settle(r, t, in, bound, &v, requeue_ms, e);
    if (rc)
        return rc;
    rc = rec_own(r, t, &in->cr, pod_uid, wrote, e);
    if (rc)
        return rc;
    rc = rec_put_status(r, t, in->cr, preassigned_status(r, in, pod_uid, bound, &v), wrote, e);
    if (!rc)
        tell(r, in->cr, dvb_condition_of(in->cr, PREASSIGNED), &v);
    return rc;
}
