/* SPDX-License-Identifier: Apache-2.0 */
/* reconcile.h - one key ("namespace/name") at a time: the DeviceBinding the
 * node's state calls for, compared with the informer's copy, and the smallest
 * write that closes the gap (create, metadata patch, status patch, delete; all
 * but the create with the copy's uid and resourceVersion as preconditions) or
 * none. A DeviceBinding whose Pod is gone or going is
 * the garbage collector's to delete (its ownerReference), never the
 * syncer's: a pod's lifecycle costs the syncer a create and a status patch.
 * Only this node's objects are touched, only the fields the syncer owns,
 * never a scheduler's spec.containers. Not thread-safe: one reconciler per
 * worker thread. */
#ifndef PODRES_RECONCILE_H
#define PODRES_RECONCILE_H
#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "../common/err.h"
#include "../kube/cache.h"
#include "../kube/rest.h"
#include "events.h"
#include "fence.h"

/* Why a binding podresd reports is not mirrored into a DeviceBinding:
 * podres_syncer_skipped_total{reason}. */
enum reconcile_skip {
    RECONCILE_SKIP_FOREIGN_LABEL, /* "foreign_label": the object by that name is labelled
                                   * for another node, or none */
    RECONCILE_SKIP_NO_POD,        /* "no_pod": no Pod of that name on this node in the API
                                   * server (yet, or no more) */
    RECONCILE_SKIP_POD_UID,       /* "pod_uid_mismatch": the API server's Pod is another
                                   * instance than podresd's */
    RECONCILE_SKIP_CRD_MISSING,   /* "crd_missing": the API server does not serve
                                   * DeviceBindings (the caller notices it) */
    RECONCILE_SKIP_N
};

struct reconciler {
    const char *node;      /* this node's name; borrowed */
    struct rest *kube;     /* the worker's API client; borrowed */
    struct rest *pd;       /* the worker's podresd client (reservations); borrowed */
    uint64_t ttl_ms;       /* how long a pre-assignment waits for its pod */
    struct cache *pr;      /* podresd PodResources; borrowed */
    struct cache *resv;    /* podresd Reservations; borrowed */
    struct cache *pods;    /* API Pods of this node; borrowed */
    struct cache *crs;     /* DeviceBindings labelled for this node; borrowed */
    struct events *events; /* where Events about DeviceBindings go; borrowed, or NULL */
    bool waiting;          /* out: the last key is a pre-assignment whose devices are
                            * taken (Conflict, Unavailable): any change on the node may
                            * free them (reconcile_key sets it) */
    json_t *foreign;       /* key -> the label of the other node's object logged for it
                            * (logged once); owned, reconcile_release frees it */

    /* The worker's counts and memory of what it said; owned, freed by
     * reconcile_release. */
    uint64_t skipped[RECONCILE_SKIP_N]; /* bindings not mirrored, each time one is looked
                                         * at, by reason; atomic, read by reconcile_skipped */
    json_t *skips;      /* key -> the reason name logged for it (once, until the binding
                         * is mirrored or goes) */
    json_t *reserved;   /* keys of this node's pre-assignments, whose reservations are
                         * this reconciler's; a key goes when neither is left */
    json_t *strays;     /* keys of reservations made outside a DeviceBinding, logged,
                         * until they are removed */
    json_t *placed;     /* keys of the reservations this reconciler's PUT holds now */
    json_t *removed;    /* keys of reservations removed once although another node's
                         * DeviceBinding pre-assigns them (until writes stop) */
    json_t *made;       /* key -> the Pod uid of each DeviceBinding this reconciler
                         * created, while podresd binds the pod */
    struct fence fence; /* writes stop while another syncer writes this podresd's
                         * reservations; fence_stopped() is thread-safe */
};

/* Bring 'key' to its desired state. *wrote tells whether an API write was
 * acknowledged; *requeue_ms, when not 0, asks for another look after that
 * long (a pre-assignment's deadline). Errors mean "try again later" ('e', or
 * NULL, says why).
 *
 * A DeviceBinding whose spec.containers a scheduler wrote is a
 * pre-assignment: its devices are reserved in podresd (PUT
 * /v1/reservations/NS/NAME) and its status follows the reservation's state:
 * Pending while the pod is not bound, Bound with condition
 * PreassignmentHonored=True when the binding equals the reservation,
 * Conflict (condition False, the reason in its message) when a device is
 * unknown, unhealthy, held or reserved elsewhere, or the binding differs.
 * The reservation is released when the object goes away, or after ttl_ms
 * from its creation when the pod has not arrived on the node. Each change of
 * the condition a person acts on is also an Event on the DeviceBinding
 * (events.h): Conflict and ReservationExpired (Warning), and
 * PreassignmentHonored (Normal) after Pending or a Conflict.
 *
 * A DeviceBinding not labelled podres.dev/node=<r->node> is never written
 * (a server that ignored the label selector, a name another node's object
 * holds), and each skip is counted. As cached: logged once (info), ERR_OK,
 * and a reservation under that key in this node's podresd is released,
 * since no DeviceBinding of this node has the key. As read again after a
 * 404 or 409: dropped from the cache, ERR_FORBIDDEN with the reason.
 *
 * A binding with devices whose Pod is not in the API server for this node,
 * or is another instance (uid) than podresd's, waits: counted, logged once
 * at info. A reservation in podresd that this reconciler did not place for
 * a DeviceBinding's pre-assignment (a PUT over REST by hand) is removed, and
 * logged once at info: the node's reservations are owned by DeviceBindings.
 *
 * Another syncer on this podresd (a second copy, a typo in --node-name)
 * would remove this one's reservations and have its own removed, without
 * end. Its signs: a reservation removed once comes back while the
 * DeviceBinding of its name (read from the API server) pre-assigns it for
 * another node; or FENCE_LOSSES of this reconciler's reservations are gone
 * (a PUT makes them again: 201) within FENCE_WINDOW_MS. Either stops every
 * write until the process restarts (r->fence: each key comes back, ERR_OK,
 * after FENCE_RECHECK_MS), logged as an error and said in a Warning Event
 * WritesStopped on the first DeviceBinding of this node looked at since. */
err_t reconcile_key(struct reconciler *r, const char *key, bool *wrote, uint64_t *requeue_ms,
                    struct error *e) WARN_UNUSED;

/* Free what reconcile_key keeps in 'r' (not the borrowed fields); a no-op
 * for a reconciler never used. */
void reconcile_release(struct reconciler *r);

/* How many times a binding was not mirrored for 'why' (foreign_label: a
 * DeviceBinding left alone, as cached or as read, because it is labelled
 * for another node or for none). Thread-safe. */
uint64_t reconcile_skipped(struct reconciler *r, enum reconcile_skip why);
/* The reason's name in the metric: "foreign_label", "no_pod",
 * "pod_uid_mismatch", "crd_missing". Static. */
const char *reconcile_skip_name(enum reconcile_skip why);
/* The binding of 'key' is not mirrored now for 'why' (a reason the caller
 * knows: crd_missing, when the worker cannot reconcile): counted, and
 * logged at info with 'detail' once, until the binding is mirrored or
 * skipped for another reason. Nothing happens when podresd holds no
 * devices for the key. Same thread as reconcile_key. */
void reconcile_skip(struct reconciler *r, const char *key, enum reconcile_skip why,
                    const char *detail);

#endif
