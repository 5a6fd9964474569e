/* SPDX-License-Identifier: Apache-2.0 */
/* worker.c - the queue's consumer: one key at a time, a failure retried
 * with a backoff per key, the sync lag of each acknowledged write; and the
 * producers' side: which keys a change of a cache puts on the queue. */
#define LOG_MOD "main"
#include "../common/common.h"
#include "../common/clock.h"
#include "metrics.h"
#include "worker.h"

void worker_on_key(void *ctx, const char *key)
{
    queue_add(ctx, key, 0);
}

/* A change of podresd's state (a pod, a reservation): its key, and every
 * pre-assignment waiting for devices that the change may have freed (a
 * release, a deleted reservation): they are rechecked now, not at the next
 * resync. They are few: a reservation PUT to podresd each. */
void worker_on_podresd_key(void *ctx, const char *key)
{
    struct syncer *s = ctx;
    const char *k;
    json_t *v;

    queue_add(s->queue, key, 0);
    pthread_mutex_lock(&s->wmu);
    json_object_foreach(s->waiting, k, v) {
        if (strcmp(k, key) != 0)
            queue_add(s->queue, k, 0);
    }
    pthread_mutex_unlock(&s->wmu);
}

/* The inventory changed (a device, or the NodeDevices object): the worker
 * looks once the write interval since the last write is over. */
void worker_on_inventory(void *ctx, const char *key)
{
    struct syncer *s = ctx;

    (void)key;
    queue_add(s->queue, INVENTORY_KEY, inventory_due(&s->inv, clock_mono_ms()));
}

void worker_on_dra(void *ctx, const char *key)
{
    struct syncer *s = ctx;

    (void)key;
    queue_add(s->queue, DRA_KEY, 0);
}

/* After a reconcile of 'key': whether it waits for devices. */
static void note_waiting(struct syncer *s, const char *key, bool waiting)
{
    pthread_mutex_lock(&s->wmu);
    if (waiting)
        json_object_set_new(s->waiting, key, json_true());
    else
        json_object_del(s->waiting, key);
    pthread_mutex_unlock(&s->wmu);
}

/* The value of every key of worker_all_keys' set. */
static char present;

struct strmap *worker_all_keys(struct syncer *s)
{
    struct cache *from[] = {s->pr, s->resv, s->crs};
    struct strmap *keys = strmap_new();
    char **list;
    size_t i, j;

    for (j = 0; keys && j < ARRAY_SIZE(from); j++) {
        list = cache_keys(from[j], NULL);
        for (i = 0; list && list[i]; i++) {
            if (strmap_put(keys, list[i], &present, NULL))
                break;
        }
        if (!list || list[i]) {
            strmap_free(keys, NULL);
            keys = NULL;
        }
        cache_keys_free(list);
    }
    return keys;
}

void worker_resync(struct syncer *s)
{
    struct strmap *keys = worker_all_keys(s);
    struct strmap_iter it;
    const char *key;

    if (!keys) {
        log_warn("out of memory listing the keys to resync; trying at the next resync");
        return;
    }
    strmap_iter_init(&it, keys);
    while (strmap_iter_next(&it, &key, NULL))
        queue_add(s->queue, key, 0);
    strmap_free(keys, NULL);
    worker_on_inventory(s, NULL);
    worker_on_dra(s, NULL);
    s->last_resync = time(NULL);
}

/* Every cache holds a full list not known to be behind: podresd's state,
 * and the informers' (not while one lists again: after a 410, a reset, or a
 * watch that broke, the API server may be back with its state reset, and
 * the worker decides nothing on a copy the server may no longer hold). */
bool worker_caches_synced(struct syncer *s)
{
    return cache_synced(s->pr) && informer_current(&s->inf_pods) && informer_current(&s->inf_crs);
}

/* Per-key backoff after a failure: 200 ms doubling to 30 s; 30 s doubling
 * to 5 min for 403/422, which only a person fixes (each is logged). */
static uint64_t retry_delay(json_t *fails, const char *key, err_t rc)
{
    json_int_t n = json_integer_value(json_object_get(fails, key)) + 1;
    bool stuck = rc == ERR_FORBIDDEN || rc == ERR_UNPROCESSABLE;
    uint64_t cap = stuck ? 300000 : 30000;
    uint64_t d = stuck ? 30000 : 200;

    json_object_set_new(fails, key, json_integer(n));
    while (--n > 0 && d < cap)
        d *= 2;
    return d < cap ? d : cap;
}

/* The caches are not all current: the key waits. When DeviceBindings are
 * not served at all (their CRD missing), its binding is not mirrored for
 * that reason: counted, and said once. */
static void put_off(struct syncer *s, const char *key)
{
    bool missing = informer_missing(&s->inf_crs);

    if (missing)
        reconcile_skip(&s->rec, key, RECONCILE_SKIP_CRD_MISSING,
                       "the API server does not serve DeviceBindings (is the "
                       "CustomResourceDefinition devicebindings.podres.dev installed?)");
    queue_add(s->queue, key, missing ? 1000 : 200);
}

/* Whether --node-name is a Node in the API server: a typo otherwise (or a
 * node not registered yet). Said once, as a warning, and in the metric
 * podres_syncer_node_missing; nothing else follows from it: writes stop
 * only when another syncer is seen on this podresd (reconcile.h). */
static void check_node(struct syncer *s)
{
    char path[512], name[300];
    struct error err = {0};
    json_t *node = NULL;
    err_t rc;

    rest_escape(s->set.node_name, name, sizeof(name));
    snprintf(path, sizeof(path), "/api/v1/nodes/%s", name);
    rc = rest_do(s->k_work, "GET", path, NULL, NULL, &node, &err);
    json_decref(node);
    if (rc == ERR_NOTFOUND)
        log_warn("node '%s' is no Node in the API server (404 for %s): is --node-name "
                 "right? (a typo, or a node not registered yet); syncing it anyway",
                 s->set.node_name, path);
    else if (rc)
        log_info("cannot check that node '%s' is a Node in the API server: %s", s->set.node_name,
                 error_msg(&err));
    __atomic_store_n(&s->node_missing, rc == ERR_NOTFOUND ? 1 : rc ? -1 : 0, __ATOMIC_RELAXED);
}

/* The inventory key: written when podresd's devices and the NodeDevices
 * informer are current; when NodeDevices are not served, said once and
 * looked at again each second (no request: the informer lists). */
static void sync_inventory(struct syncer *s, json_t *fails, uint64_t dirty)
{
    struct error err = {0};
    uint64_t again;
    bool wrote;
    err_t rc;

    if (informer_missing(&s->inf_nd)) {
        inventory_skip(&s->inv, INVENTORY_SKIP_CRD_MISSING);
        queue_add(s->queue, INVENTORY_KEY, 1000);
        return;
    }
    if (!cache_synced(s->devs) || !informer_current(&s->inf_nd)) {
        queue_add(s->queue, INVENTORY_KEY, 200);
        return;
    }
    s->inv.revision = s->feed.revision;
    rc = inventory_sync(&s->inv, &wrote, &again, &err);
    if (rc == ERR_OK) {
        json_object_del(fails, INVENTORY_KEY);
        if (again)
            queue_add(s->queue, INVENTORY_KEY, again);
        if (wrote)
            metrics_lag_observe(&s->lag, (double)(clock_mono_ms() - dirty) / 1000.0);
        return;
    }
    if (rc == ERR_FORBIDDEN || rc == ERR_UNPROCESSABLE || rc == ERR_INVAL)
        log_warn("cannot write NodeDevices %s: %s", s->set.node_name, error_msg(&err));
    else
        log_debug("write of NodeDevices %s failed: %s; retrying", s->set.node_name,
                  error_msg(&err));
    queue_add(s->queue, INVENTORY_KEY, retry_delay(fails, INVENTORY_KEY, rc));
}

/* The DRA key: the devices of the node's ResourceSlices to podresd, once
 * the slices and podresd's devices are listed and podresd's feed answered.
 * Not while another syncer writes this podresd (its node's slices are not
 * these). When ResourceSlices are not served, counted; a list that finds
 * them brings the key back (and so does the next resync). */
static void sync_dra(struct syncer *s, json_t *fails)
{
    uint64_t epoch = __atomic_load_n(&s->feed.epoch, __ATOMIC_RELAXED), left;
    struct error err = {0};
    bool pushed;
    err_t rc;

    if (informer_missing(&s->inf_rs)) {
        dra_skip(&s->dra);
        return;
    }
    if (!informer_current(&s->inf_rs) || !cache_synced(s->devs) || !epoch) {
        queue_add(s->queue, DRA_KEY, 1000);
        return;
    }
    if (fence_holds(&s->rec.fence, &left)) {
        queue_add(s->queue, DRA_KEY, left + 100);
        return;
    }
    rc = dra_sync(&s->dra, epoch, &pushed, &err);
    if (rc == ERR_OK) {
        json_object_del(fails, DRA_KEY);
        return;
    }
    if (rest_gate_stopped(s->gate))
        return;
    log_debug("handing the node's DRA devices to podresd failed: %s; retrying", error_msg(&err));
    queue_add(s->queue, DRA_KEY, retry_delay(fails, DRA_KEY, rc));
}

void *worker_run(void *arg)
{
    struct syncer *s = arg;
    json_t *fails = json_object();
    char key[768];
    struct error err = {0};
    uint64_t dirty, again;
    bool wrote;
    err_t rc;

    check_node(s);
    while (!rest_gate_stopped(s->gate)) {
        if (!queue_get(s->queue, key, sizeof(key), &dirty, 1000))
            continue;
        if (nodefeed_mismatch(&s->feed, NULL)) {
            /* podresd serves another node: its state is not this node's */
            queue_add(s->queue, key, 5000);
            continue;
        }
        if (strcmp(key, INVENTORY_KEY) == 0) {
            sync_inventory(s, fails, dirty);
            continue;
        }
        if (strcmp(key, DRA_KEY) == 0) {
            sync_dra(s, fails);
            continue;
        }
        if (!worker_caches_synced(s)) {
            put_off(s, key);
            continue;
        }
        rc = reconcile_key(&s->rec, key, &wrote, &again, &err);
        if (rc == ERR_OK) {
            note_waiting(s, key, s->rec.waiting);
            json_object_del(fails, key);
            if (again)
                queue_add(s->queue, key, again);
            if (wrote)
                metrics_lag_observe(&s->lag, (double)(clock_mono_ms() - dirty) / 1000.0);
            continue;
        }
        if (rest_gate_stopped(s->gate))
            break;
        if (rc == ERR_FORBIDDEN || rc == ERR_UNPROCESSABLE || rc == ERR_INVAL)
            log_warn("cannot sync DeviceBinding %s: %s", key, error_msg(&err));
        else
            log_debug("sync of %s failed: %s; retrying", key, error_msg(&err));
        queue_add(s->queue, key, retry_delay(fails, key, rc));
    }
    json_decref(fails);
    return NULL;
}
