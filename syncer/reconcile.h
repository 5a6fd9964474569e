/* SPDX-License-Identifier: Apache-2.0 */
/* reconcile.h - one key ("namespace/name") at a time: the DeviceBinding the
 * node's state calls for, compared with the informer's copy, and the smallest
 * write that closes the gap (create, metadata patch, status patch, delete with
 * a uid precondition) or none. Only this node's objects are touched, only the
 * fields the syncer owns, never a scheduler's spec.containers. Not
 * thread-safe: one reconciler per worker thread. */
#ifndef PODRES_RECONCILE_H
#define PODRES_RECONCILE_H
#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

#include "../common/err.h"
#include "cache.h"
#include "kube.h"

#define RECONCILE_GROUP_PATH "/apis/podres.dev/v1alpha1"
#define RECONCILE_LABEL "podres.dev/node"

struct reconciler {
    const char *node;     /* this node's name; borrowed */
    struct kube *kube;    /* the worker's API client; borrowed */
    struct cache *pr;     /* podresd PodResources; borrowed */
    struct cache *resv;   /* podresd Reservations; borrowed */
    struct cache *pods;   /* API Pods of this node; borrowed */
    struct cache *crs;    /* DeviceBindings labelled for this node; borrowed */
};

/* Bring 'key' to its desired state. *wrote tells whether an API write was
 * acknowledged. Errors mean "try again later" ('msg' says why). */
err_t reconcile_key(struct reconciler *r, const char *key, bool *wrote, char *msg,
                    size_t cap) WARN_UNUSED;

/* The status a DeviceBinding should carry for PodResources 'pr' (borrowed)
 * of the pod with 'pod_uid' on 'node'. New, or NULL if out of memory. */
json_t *reconcile_status(const json_t *pr, const char *pod_uid, const char *node);

/* True when 'pr' holds at least one device. */
bool reconcile_has_devices(const json_t *pr);

#endif
