/* SPDX-License-Identifier: Apache-2.0 */
/* dra.h - the node's DRA inventory: the devices its ResourceSlices
 * (resource.k8s.io/v1) publish, handed to podresd one driver at a time
 * (PUT /v1/drivers/DRIVER/devices), so that podresd knows a DRA device by
 * its UUID or PCI address as it knows a device plugin's. A driver's set is
 * sent only when it differs from the one podresd last took, and again after
 * podresd's feed reconnected (podresd may have restarted); a driver whose
 * slices all went is sent an empty set. It is not the holders (podresd has
 * them from the kubelet) nor the claims. Not thread-safe: the worker thread
 * calls dra_sync and dra_skip; the counters are read by any thread. */
#ifndef PODRES_DRA_H
#define PODRES_DRA_H
#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>

#include "../common/err.h"
#include "../common/strbuf.h"
#include "../kube/cache.h"
#include "../kube/rest.h"

/* The worker's queue key of the DRA inventory: no DeviceBinding key
 * ("ns/name") can be spelt so. */
#define DRA_KEY "@dra"
#define DRA_PATH "/apis/resource.k8s.io/v1/resourceslices"

/* How podresd answered a driver's set: podres_syncer_dra_pushes_total{result}. */
enum dra_result {
    DRA_PUSH_OK,       /* "ok": taken */
    DRA_PUSH_CONFLICT, /* "conflict": 409, an alias names another device; sent again when
                        * the slices change or podresd's feed reconnects */
    DRA_PUSH_INVALID,  /* "invalid": 422, refused as malformed, or 413, a set over
                        * podresd's body limit; likewise */
    DRA_PUSH_FAILED,   /* "failed": anything else; retried with backoff */
    DRA_RESULT_N
};

struct dra {
    struct rest *pd;      /* the worker's podresd client; borrowed */
    struct cache *slices; /* the node's ResourceSlices, as dra_slice_view keeps them
                           * (an informer's); borrowed */
    struct cache *devs;   /* podresd's devices, as inventory_device makes them (the
                           * feed's), for drivers left over from before; borrowed */

    /* Kept between calls; dra_release frees them. */
    json_t *pushed;                /* driver -> the devices podresd took last */
    json_t *refused;               /* driver -> the devices podresd refused (409, 413, 422) */
    json_t *failing;               /* driver -> true: its failure was said */
    uint64_t epoch;                /* the feed's epoch 'pushed' belongs to; 0: none yet */
    bool leftovers;                /* look for drivers podresd has and the slices do not */
    bool skip_logged;              /* "not served" was said */
    uint64_t pushes[DRA_RESULT_N]; /* atomic */
    uint64_t skipped;              /* looks while ResourceSlices were not served; atomic */
    uint64_t drivers;              /* drivers of the node's slices at the last sync; atomic */
    uint64_t devices;              /* their devices; atomic */
};

/* The part of a ResourceSlice the cache keeps (new; NULL if out of memory):
 * metadata name and resourceVersion; spec driver, nodeName, pool name and
 * generation, and each device's name and attributes. */
json_t *dra_slice_view(json_t *slice);

/* What podresd should hold for 'slices' (an object key -> slice view,
 * borrowed): a new object driver -> array of device entries sorted by id,
 * or NULL if out of memory. Only the slices of a pool's newest generation
 * count; a device named twice in a pool counts once (the slice first by
 * name wins). An entry: "id" POOL/DEVICE; "properties", every attribute as
 * a string (string, int, bool, version), keyed by the attribute name as
 * written; "aliases", sorted, the values of the attributes named uuid,
 * pciBusID or serial (after any "domain/" prefix); "physical", the
 * parentUUID attribute's. A value podresd would refuse as a name (not
 * names_is_alias) is a property only. */
json_t *dra_inventory(const json_t *slices);

/* Hand podresd every driver's set that differs from what it took under
 * 'epoch' (the feed's connection count: when it changes, podresd may have
 * restarted, and every set goes again). The caches must be synced. *pushed
 * tells whether podresd took a set. A 409, 413 or 422 is said at warn with
 * podresd's message, counted, and not sent again until the set changes:
 * ERR_OK. Other failures are said once per driver until a push works, and
 * returned (try again later; 'e', or NULL, says why); the other drivers are
 * tried all the same. */
err_t dra_sync(struct dra *d, uint64_t epoch, bool *pushed, struct error *e) WARN_UNUSED;
/* Not synced because the API server does not serve ResourceSlices:
 * counted, said once at info until a sync happens. */
void dra_skip(struct dra *d);

/* Prometheus lines (prefix "podres_syncer_dra_"). Thread-safe. */
err_t dra_render(struct dra *d, struct strbuf *sb) WARN_UNUSED;
/* Free what dra_sync keeps (not the borrowed fields). */
void dra_release(struct dra *d);

#endif
