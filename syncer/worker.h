/* SPDX-License-Identifier: Apache-2.0 */
/* worker.h - podres-syncer's worker thread and what feeds it: the caches'
 * change callbacks put keys on the queue (queue.h), the periodic resync
 * puts every key there, and the worker takes them off one at a time to
 * reconcile a DeviceBinding (reconcile.h), the node's NodeDevices
 * (inventory.h) or the devices of its ResourceSlices in podresd (dra.h),
 * with a backoff per key after a failure. It does not set
 * anything up: main.c does (syncer.h). */
#ifndef PODRES_WORKER_H
#define PODRES_WORKER_H
#include <jansson.h>
#include <stdbool.h>

#include "../kube/strmap.h"
#include "syncer.h"

/* Cache callbacks (cache_notify_fn). worker_on_key's 'ctx' is the queue;
 * the others' is the syncer. Any thread. */
/* A change of an API object: its key. */
void worker_on_key(void *ctx, const char *key);
/* A change of podresd's state (a pod, a reservation): its key, and every
 * pre-assignment waiting for devices that the change may have freed. */
void worker_on_podresd_key(void *ctx, const char *key);
/* A change of the inventory (a device, the NodeDevices object): the
 * inventory key, once the write interval since the last write is over. */
void worker_on_inventory(void *ctx, const char *key);
/* A change of the node's ResourceSlices, or podresd's feed connected (key
 * NULL): the DRA key. */
void worker_on_dra(void *ctx, const char *key);

/* Every key the node or the API server knows about, as a new set (the
 * values mean nothing; free with strmap_free(keys, NULL)); NULL if out of
 * memory. */
struct strmap *worker_all_keys(struct syncer *s);
/* Queue every key, the inventory and the DRA key; s->last_resync is now. */
void worker_resync(struct syncer *s);
/* Every cache holds a full list not known to be behind: podresd's state,
 * and the Pod and DeviceBinding informers'. Thread-safe. */
bool worker_caches_synced(struct syncer *s);

/* The thread body; 'arg' is the syncer. Returns when the gate stops. */
void *worker_run(void *arg);

#endif
