/* SPDX-License-Identifier: Apache-2.0 */
/* inventory.h - the node's NodeDevices: its devices as podresd lists them
 * (health, topology, properties, aliases, physical; never the holders), DRA
 * devices and device plugins' alike, published as the status of one
 * cluster-scoped object named after the node, owned by its Node. A write happens only when the
 * inventory differs from the object's status (observedRevision aside), at most once per interval; a
 * steady node writes nothing. Not thread-safe: the worker thread calls
 * inventory_sync; inventory_due and the counters are read by any thread. */
#ifndef PODRES_INVENTORY_H
#define PODRES_INVENTORY_H
#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "../common/err.h"
#include "../common/strbuf.h"
#include "../kube/cache.h"
#include "../kube/rest.h"

/* The worker's queue key of the inventory: no DeviceBinding key ("ns/name")
 * can be spelt so. */
#define INVENTORY_KEY "@nodedevices"
#define INVENTORY_PATH "/apis/podres.dev/v1alpha1/nodedevices"

/* The bound of one NodeDevices: at most this many devices, and at most this
 * many bytes of them in JSON (the object must stay well under etcd's 1.5 MiB
 * request limit). Devices past either are left out of status.devices, in
 * their sort order; status.resources still counts them all, status.truncated
 * is true and the condition Truncated says how many are listed. */
#define INVENTORY_MAX_DEVICES 4096
#define INVENTORY_MAX_BYTES (1024 * 1024)

/* Why the inventory was not written: podres_syncer_inventory_skipped_total. */
enum inventory_skip {
    INVENTORY_SKIP_NO_NODE,     /* "no_node": no Node of this name to own the object */
    INVENTORY_SKIP_CRD_MISSING, /* "crd_missing": NodeDevices are not served */
    INVENTORY_SKIP_N
};

struct inventory {
    const char *node;     /* this node's name; borrowed */
    struct rest *kube;    /* the worker's API client; borrowed */
    struct cache *devs;   /* podresd's devices, as inventory_device made them; borrowed */
    struct cache *nd;     /* NodeDevices named after the node (an informer's); borrowed */
    uint64_t interval_ms; /* at most one write per interval (--inventory-interval) */
    uint64_t revision;    /* podresd's revision the devices were read at; set by the
                           * caller before inventory_sync */

    /* Kept between calls. */
    uint64_t last_write_ms;             /* monotonic ms of the last write; atomic */
    char node_uid[128];                 /* the Node's uid, read at each create */
    int skip_logged;                    /* the reason said last (enum + 1), 0: none */
    bool truncated_logged;              /* the truncation was said */
    uint64_t writes;                    /* acknowledged writes; atomic */
    uint64_t failures;                  /* failed writes; atomic */
    uint64_t skipped[INVENTORY_SKIP_N]; /* atomic */
    uint64_t devices;                   /* devices of the last status made; atomic */
    int truncated;                      /* the last status was truncated; atomic */
};

/* The inventory's view of one podresd Device (borrowed): resourceName, id,
 * health, topology {"nodes":[{"id":N}]} (podresd spells it "ID", as the
 * kubelet does), properties and aliases when it has any, and physical when
 * it names another device than itself (a slice or replica). New, or NULL
 * when 'dev' has no resourceName or id. */
json_t *inventory_device(const json_t *dev);
/* The cache key of such a device: "resourceName/id". */
bool inventory_key(const json_t *dev, char *key, size_t cap);

/* The NodeDevices status for 'devs' (an object key -> inventory_device,
 * borrowed) read at 'revision': devices sorted by resourceName then id and
 * bounded as above, per-resource totals, a summary, the unhealthy count and
 * the condition Truncated, whose lastTransitionTime is taken from 'old' (the
 * current status, or NULL) when unchanged, else 'now'. New, or NULL. */
json_t *inventory_status(const json_t *devs, uint64_t revision, const json_t *old, const char *now);
/* Whether two statuses say the same, observedRevision aside. */
bool inventory_same(const json_t *a, const json_t *b);

/* Milliseconds until a write may happen (0: now). Thread-safe. */
uint64_t inventory_due(struct inventory *inv, uint64_t now_ms);

/* Bring the node's NodeDevices to the inventory: create it (owned by the
 * Node) when the cache has none, then patch its status when it differs. The
 * caches (inv->devs, inv->nd) must be synced. *wrote tells whether the API server acknowledged a
 * write; *again_ms, when not 0, asks to be called again after that long (the
 * interval not over, or no Node yet). Errors mean "try again later"; 'e'
 * (or NULL) says why. */
err_t inventory_sync(struct inventory *inv, bool *wrote, uint64_t *again_ms,
                     struct error *e) WARN_UNUSED;
/* Not synced for 'why' (the caller knows: crd_missing): counted, said once
 * at info until a write succeeds. */
void inventory_skip(struct inventory *inv, enum inventory_skip why);

/* Prometheus lines (prefix "podres_syncer_inventory_"). Thread-safe. */
err_t inventory_render(struct inventory *inv, struct strbuf *sb) WARN_UNUSED;

#endif
