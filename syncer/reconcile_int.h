/* SPDX-License-Identifier: Apache-2.0 */
/* reconcile_int.h - what reconcile.c (the decision per key) shares with
 * reconcile_write.c (the DeviceBinding writes) and reconcile_preassign.c
 * (pre-assignments and podresd's reservations); nothing outside the
 * reconciler includes it. Every function runs on the reconciler's thread.
 * 'key' is "namespace/name", 'ns' and 'name' its parts. */
#ifndef PODRES_RECONCILE_INT_H
#define PODRES_RECONCILE_INT_H
#include "dvb.h"
#include "reconcile.h"

/* The key a decision is about, and its parts. */
struct target {
    const char *key; /* "namespace/name"; borrowed */
    char ns[256];    /* its namespace */
    char name[512];  /* its name */
};

/* What a decision reads for one key: new copies from the caches. */
struct inputs {
    json_t *pr;   /* podresd's PodResources, or NULL */
    json_t *pod;  /* the API Pod, or NULL */
    json_t *cr;   /* the DeviceBinding, or NULL */
    json_t *resv; /* podresd's Reservation, or NULL */
};

/* Add 'key' to the set '*set' (made on first use). Out of memory, the key
 * is missing: a line logged twice, or a reservation taken for a stray. */
void rec_set_key(json_t **set, const char *key);

/* ---- reconcile_write.c: writes of the key's DeviceBinding ---- */
/* Each says what failed in 'e' (never NULL). */

/* Put an acknowledged object into the cache (anything but an object is ignored). */
void rec_remember(struct reconciler *r, const char *key, json_t *obj);
/* POST the object for the pod of 'uid'; on ERR_OK *out is the answer (new). */
err_t rec_create(struct reconciler *r, const struct target *t, const char *uid, json_t **out,
                 struct error *e) WARN_UNUSED;
/* DELETE 'cr' (borrowed) with its uid and resourceVersion as preconditions. */
err_t rec_delete(struct reconciler *r, const struct target *t, const json_t *cr,
                 struct error *e) WARN_UNUSED;
/* Merge patch of 'sub' ("" or "/status") of 'cr' (borrowed, as read) with
 * 'body' (stolen; NULL is ERR_NOMEM), with the uid and resourceVersion of
 * 'cr' as preconditions: ERR_CONFLICT when the object changed or was made
 * again since (read again, as after a 404). On ERR_OK, with 'out' not NULL,
 * *out is the answer (new), or untouched when the answer is no object. */
err_t rec_patch(struct reconciler *r, const struct target *t, const json_t *cr, const char *sub,
                json_t *body, json_t **out, struct error *e) WARN_UNUSED;
/* Make the Pod of 'pod_uid' (or NULL: none yet) an owner of *cr (owned by
 * the caller) unless it is one; *wrote set when it was written, and *cr
 * then replaced by the answer, the object a next write's preconditions name. */
err_t rec_own(struct reconciler *r, const struct target *t, json_t **cr, const char *pod_uid,
              bool *wrote, struct error *e) WARN_UNUSED;
/* Patch the status of 'cr' (borrowed) to 'desired' (stolen; NULL is
 * ERR_NOMEM) unless it is there already; *wrote set when it was written. */
err_t rec_put_status(struct reconciler *r, const struct target *t, const json_t *cr,
                     json_t *desired, bool *wrote, struct error *e) WARN_UNUSED;

/* ---- reconcile_preassign.c: pre-assignments ---- */

/* The DeviceBinding in->cr pre-assigns devices (spec.containers): reserve
 * them in podresd, or release the reservation after the TTL, and write the
 * status and the condition that follow (reconcile.h). */
err_t rec_preassigned(struct reconciler *r, const struct target *t, struct inputs *in, bool *wrote,
                      uint64_t *requeue_ms, struct error *e) WARN_UNUSED;
/* Remove the reservation under the key; one this reconciler did not place
 * is said once. */
err_t rec_unreserve(struct reconciler *r, const struct target *t, struct error *e) WARN_UNUSED;
/* Neither a pre-assignment nor a reservation (as cached) under the key:
 * it is forgotten (r->reserved), so that the sets stay as large as the
 * pre-assignments there are; one this reconciler placed and has not
 * released is released first. */
err_t rec_forget(struct reconciler *r, const struct target *t, struct error *e) WARN_UNUSED;
/* A reservation under a key without a DeviceBinding of this node: removed,
 * or, when it comes back, the sign of another syncer (r->fence). */
err_t rec_stray(struct reconciler *r, const struct target *t, struct error *e) WARN_UNUSED;
/* Whether writes are stopped (another syncer on this podresd); then
 * *requeue_ms is when the key should come back. */
bool rec_held(struct reconciler *r, uint64_t *requeue_ms);

#endif
