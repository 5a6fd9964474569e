/* SPDX-License-Identifier: Apache-2.0 */
/* informer.h - list+watch of one Kubernetes collection into a cache, the
 * client-go informer in small: list, then watch from the list's
 * resourceVersion with bookmarks, resume from the last seen version when a
 * stream ends, relist on 410. Runs on its own thread with its own client. */
#ifndef PODRES_INFORMER_H
#define PODRES_INFORMER_H
#include "../common/err.h"
#include "cache.h"
#include "kube.h"

struct informer {
    const char *name;       /* "pods" or "devicebindings", for the log; borrowed */
    const char *path;       /* collection path, e.g. /api/v1/pods; borrowed */
    const char *query;      /* selector query, already escaped ("fieldSelector=..."); borrowed */
    struct kube *kube;      /* this thread's client; borrowed */
    struct kube_gate *gate; /* to notice shutdown; borrowed */
    struct cache *cache;    /* where objects go; borrowed */
    /* What the cache keeps of an object (new), or NULL to keep all of it: a
     * node's Pods are large (spec, status, managedFields) and reconcile
     * reads four fields of them. */
    json_t *(*slim)(json_t *obj);
    char rv[64]; /* resourceVersion to watch from; "" = list first */
};

/* One list into the cache (sets rv). */
err_t informer_list(struct informer *inf) WARN_UNUSED;
/* The thread body: list and watch until the gate stops. 'arg' is the informer. */
void *informer_run(void *arg);

#endif
