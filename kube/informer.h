/* SPDX-License-Identifier: Apache-2.0 */
/* informer.h - list+watch of one Kubernetes collection into a cache, the
 * client-go informer in small: list, then watch from the list's
 * resourceVersion with bookmarks. A watch that ran its full timeoutSeconds
 * and delivered an event or a bookmark is resumed from the last
 * resourceVersion seen; after anything else (410, "too large resource
 * version", another ERROR event, a broken connection, a watch ended early
 * or silent all along) the collection is listed again, at a random moment
 * within 2 s, and at most once every 1 to 1.5 s. A watch asks for 240 s
 * give or take 10 %. An answer to a list that is no list (another kind, no string
 * metadata.resourceVersion) is an error, logged once: the cache is kept, and
 * the next list waits 1 s doubling to 30 s. A list whose resourceVersion is
 * older than the one held means the API server's state was reset: the list
 * is taken as the truth. Runs on its own thread with its own client; the
 * readiness fields are read by other threads. */
#ifndef PODRES_INFORMER_H
#define PODRES_INFORMER_H
#include <stdbool.h>
#include <stdint.h>

#include "../common/err.h"
#include "cache.h"
#include "rest.h"

struct informer {
    const char *name;       /* "pods" or "devicebindings", for the log; borrowed */
    const char *path;       /* collection path, e.g. /api/v1/pods; borrowed */
    const char *query;      /* selector query, already escaped ("fieldSelector=..."); borrowed */
    struct rest *kube;      /* this thread's client; borrowed */
    struct rest_gate *gate; /* to notice shutdown; borrowed */
    struct cache *cache;    /* where objects go; borrowed */
    /* What the cache keeps of an object (new), or NULL to keep all of it: a
     * node's Pods are large (spec, status, managedFields) and reconcile
     * reads four fields of them. */
    json_t *(*slim)(json_t *obj);
    int timeout_s;            /* a watch's timeoutSeconds; 0: 240 */
    uint64_t missing_ms;      /* pause before the next list while the collection is not served
                               * (its last list a 404); 0: the usual pace. An optional API
                               * group an old API server lacks is not asked once a second */
    const char *missing_hint; /* the question the 404 line asks; NULL: whether the
                               * collection's CustomResourceDefinition is installed;
                               * borrowed */
    bool consistent;          /* the first list a consistent read too (--once: no watch follows) */
    char rv[64];              /* the newest resourceVersion seen; "" before the first list */
    bool relist;              /* list (a consistent list) before the next watch; atomic */
    bool reset_logged;        /* this reset was logged; a watch that works again ends it */
    uint64_t listed_ms;       /* monotonic ms of the last list tried, for the pace */
    uint64_t relist_at_ms;    /* monotonic ms before which the list after a watch that
                               * ended early does not start (a random spread) */
    uint64_t bad_list_ms;     /* pause before the next list after answers that were no
                               * list: 1 s doubling to 30 s; 0 after a list */
    /* Readiness, written by the informer's thread, read by any with
     * informer_synced and informer_ready (atomic loads and stores). */
    int synced;                /* listed since the last relist a 410 or a reset required */
    const char *why;           /* why not synced (static text), NULL: never listed */
    uint64_t failing_since_ms; /* monotonic ms of the first failure since an answer; 0: none */
    int missing;               /* the last list was a 404: the collection is not served */
};

/* One list into the cache, replacing it (sets rv, marks the informer
 * synced). The first is served from the API server's watch cache
 * (resourceVersion=0, as client-go's reflector lists first: the watch
 * after it catches up), unless 'consistent'; once a resourceVersion is
 * held, lists are consistent reads (no resourceVersion), which the server
 * never answers from a view older than what was seen. */
err_t informer_list(struct informer *inf) WARN_UNUSED;
/* The thread body: list and watch until the gate stops. 'arg' is the informer. */
void *informer_run(void *arg);

/* Whether the cache holds a full list not known to be stale: false until
 * the first list, and from a 410 or a reset until the list after it.
 * Thread-safe. */
bool informer_synced(struct informer *inf);
/* Whether, moreover, the watch that keeps it current runs: also false from
 * the break or early end of a watch until the list after it (the cache may
 * be behind an API server that came back reset). Thread-safe. */
bool informer_current(struct informer *inf);
/* Whether the informer makes progress: synced, and its requests have not
 * been failing for 'grace_ms' or longer. When not, 'why' (ERR_UNAVAIL) says so ("pods
 * informer ..."). Thread-safe. */
bool informer_ready(struct informer *inf, uint64_t grace_ms, struct error *why);
/* Whether the API server does not serve the collection: its last list was
 * answered 404 (a CustomResourceDefinition not installed, or deleted). Said
 * at info when it starts and when it ends. Thread-safe. */
bool informer_missing(struct informer *inf);

#endif
