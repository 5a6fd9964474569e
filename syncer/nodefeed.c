/* SPDX-License-Identifier: Apache-2.0 */
/* nodefeed.c - the NDJSON feed of podresd as cache updates. */
#define LOG_MOD "nodefeed"
#include "../common/common.h"
#include "inventory.h"
#include "nodefeed.h"

#include <assert.h>
#include <pthread.h>

#define NAME_RECHECK_MS 5000

static pthread_mutex_t name_mu = PTHREAD_MUTEX_INITIALIZER; /* guards podresd_node */

static void mismatch_why(struct nodefeed *nf, struct error *why)
{
    pthread_mutex_lock(&name_mu);
    errorf(why, ERR_UNAVAIL,
           "podresd serves node '%s', not --node-name '%s': not syncing (is --node-name "
           "right? it must be podresd's --node-name)",
           nf->podresd_node, nf->node);
    pthread_mutex_unlock(&name_mu);
}

err_t nodefeed_check_node(struct nodefeed *nf, struct error *e)
{
    json_t *v = NULL;
    const char *name;
    err_t rc;

    assert(nf->node);
    rc = rest_do(nf->podresd, "GET", "/version", NULL, NULL, &v, e);
    if (rc) {
        json_decref(v);
        return rc;
    }
    name = json_string_value(json_object_get(v, "nodeName"));
    if (!name || !*name || strcmp(name, nf->node) == 0) {
        __atomic_store_n(&nf->mismatch, 0, __ATOMIC_RELEASE);
        json_decref(v);
        return ERR_OK;
    }
    pthread_mutex_lock(&name_mu);
    str_copy(nf->podresd_node, sizeof(nf->podresd_node), name);
    pthread_mutex_unlock(&name_mu);
    json_decref(v);
    __atomic_store_n(&nf->mismatch, 1, __ATOMIC_RELEASE);
    mismatch_why(nf, e);
    e->code = ERR_CONFLICT;
    return ERR_CONFLICT;
}

bool nodefeed_mismatch(struct nodefeed *nf, struct error *why)
{
    if (!__atomic_load_n(&nf->mismatch, __ATOMIC_ACQUIRE))
        return false;
    if (why)
        mismatch_why(nf, why);
    return true;
}

/* The list of 'key' in 'answer' as an object keyed "namespace/name". */
static json_t *keyed(const json_t *list)
{
    json_t *all = json_object(), *v;
    char key[512];
    size_t i;

    json_array_foreach(list, i, v) {
        if (cache_key_of(v, key, sizeof(key)))
            json_object_set(all, key, v);
    }
    return all;
}

/* A list of Devices as an object "resourceName/id" -> inventory view. */
static json_t *keyed_devices(const json_t *list)
{
    json_t *all = json_object(), *v;
    char key[600];
    size_t i;

    json_array_foreach(list, i, v) {
        if (inventory_key(v, key, sizeof(key)))
            json_object_set_new(all, key, inventory_device(v));
    }
    return all;
}

err_t nodefeed_list(struct nodefeed *nf)
{
    json_t *pods = NULL, *resv = NULL, *devs = NULL, *a, *b;
    struct error err = {0};
    err_t rc;

    assert(nf->podresd && nf->pods && nf->resv);
    rc = nodefeed_check_node(nf, &err);
    if (rc)
        goto out;
    rc = rest_do(nf->podresd, "GET", "/v1/pods", NULL, NULL, &pods, &err);
    if (rc)
        goto out;
    rc = rest_do(nf->podresd, "GET", "/v1/reservations", NULL, NULL, &resv, &err);
    if (rc)
        goto out;
    if (nf->devs) {
        rc = rest_do(nf->podresd, "GET", "/v1/devices", NULL, NULL, &devs, &err);
        if (rc)
            goto out;
        a = keyed_devices(json_object_get(devs, "devices"));
        cache_replace(nf->devs, a);
        json_decref(a);
    }
    a = keyed(json_object_get(pods, "podResources"));
    b = keyed(json_object_get(resv, "reservations"));
    cache_replace(nf->pods, a);
    cache_replace(nf->resv, b);
    nf->revision = (uint64_t)json_integer_value(json_object_get(pods, "revision"));
    json_decref(a);
    json_decref(b);
out:
    if (rc == ERR_CONFLICT)
        log_err("%s", error_msg(&err));
    else if (rc)
        log_warn("cannot read podresd: %s", error_msg(&err));
    json_decref(devs);
    json_decref(resv);
    json_decref(pods);
    return rc;
}

static struct cache *cache_for(struct nodefeed *nf, const char *kind, json_t **pending)
{
    if (strcmp(kind, "PodResources") == 0) {
        *pending = nf->pending_pods;
        return nf->pods;
    }
    if (strcmp(kind, "Reservation") == 0) {
        *pending = nf->pending_resv;
        return nf->resv;
    }
    if (strcmp(kind, "Device") == 0) {
        *pending = nf->pending_devs;
        return nf->devs;
    }
    return NULL;
}

/* The initial list is complete: swap it in. */
static void initial_end(struct nodefeed *nf)
{
    cache_replace(nf->pods, nf->pending_pods);
    cache_replace(nf->resv, nf->pending_resv);
    if (nf->devs)
        cache_replace(nf->devs, nf->pending_devs);
    nodefeed_release(nf);
}

/* One ADDED, MODIFIED or DELETED event of 'c' into it, or into 'pending'
 * during the initial list. Devices are kept as their inventory view. */
static void apply_event(struct cache *c, json_t *pending, const char *type, const char *kind,
                        json_t *obj)
{
    bool gone = strcmp(type, "DELETED") == 0, device = strcmp(kind, "Device") == 0;
    json_t *v;
    char key[600];

    if (device ? !inventory_key(obj, key, sizeof(key)) : !cache_key_of(obj, key, sizeof(key)))
        return;
    if (gone) {
        if (pending)
            json_object_del(pending, key);
        else
            cache_del(c, key);
        return;
    }
    v = device ? inventory_device(obj) : json_incref(obj);
    if (v && pending)
        json_object_set(pending, key, v);
    else if (v)
        cache_set(c, key, v, false);
    json_decref(v);
}

static bool on_event(void *ctx, json_t *ev)
{
    struct nodefeed *nf = ctx;
    const char *type = json_string_value(json_object_get(ev, "type"));
    const char *kind = json_string_value(json_object_get(ev, "kind"));
    json_t *pending = NULL;
    struct cache *c;

    if (!type)
        return false;
    if (!nf->live) {
        nf->live = true;
        __atomic_add_fetch(&nf->epoch, 1, __ATOMIC_RELAXED);
        if (nf->connected)
            nf->connected(nf->ctx, NULL);
    }
    if (strcmp(type, "ERROR") == 0) {
        log_info("podresd's feed expired at revision %llu; reading everything again",
                 (unsigned long long)nf->revision);
        nf->revision = 0; /* expired: start over with a full list */
        return false;
    }
    if (strcmp(type, "BOOKMARK") == 0) {
        if (json_is_true(json_object_get(ev, "initialEventsEnd")) && nf->pending_pods)
            initial_end(nf);
        nf->revision = (uint64_t)json_integer_value(json_object_get(ev, "revision"));
        return true;
    }
    c = kind ? cache_for(nf, kind, &pending) : NULL;
    if (c)
        apply_event(c, pending, type, kind, json_object_get(ev, "object"));
    if (!nf->pending_pods)
        nf->revision = (uint64_t)json_integer_value(json_object_get(ev, "revision"));
    return true;
}

/* Whether to open a stream: not while podresd names another node (said
 * once per mismatch, looked at again every NAME_RECHECK_MS). A podresd that
 * cannot be asked is streamed from, which fails the same way. */
static bool follow(struct nodefeed *nf, bool *said)
{
    struct error err = {0};

    err_t rc = nodefeed_check_node(nf, &err);

    if (rc != ERR_CONFLICT) {
        if (*said && rc == ERR_OK) {
            log_info("podresd serves node '%s' now; syncing", nf->node);
            *said = false;
        }
        return true;
    }
    if (!*said)
        log_err("%s", error_msg(&err));
    *said = true;
    nf->revision = 0; /* another podresd, maybe: read everything when it agrees */
    rest_gate_sleep(nf->gate, NAME_RECHECK_MS);
    return false;
}

void *nodefeed_run(void *arg)
{
    struct nodefeed *nf = arg;
    char path[128];
    struct error err = {0};
    bool said = false;
    err_t rc;

    while (!rest_gate_stopped(nf->gate)) {
        if (!follow(nf, &said))
            continue;
        if (nf->revision) {
            snprintf(path, sizeof(path), "/v1/watch?since=%llu", (unsigned long long)nf->revision);
        } else {
            snprintf(path, sizeof(path), "/v1/watch");
            nodefeed_release(nf);
            nf->pending_pods = json_object();
            nf->pending_resv = json_object();
            nf->pending_devs = json_object();
        }
        nf->live = false;
        rc = rest_stream(nf->podresd, path, on_event, nf, &err);
        if (rc == ERR_GONE) {
            log_info("podresd no longer keeps revision %llu; reading everything again",
                     (unsigned long long)nf->revision);
            nf->revision = 0;
            continue;
        }
        if (rc)
            log_debug("podresd feed ended: %s", error_msg(&err));
        if (!rest_gate_sleep(nf->gate, rc ? 1000 : 100))
            break;
    }
    return NULL;
}

void nodefeed_release(struct nodefeed *nf)
{
    json_decref(nf->pending_pods);
    json_decref(nf->pending_resv);
    json_decref(nf->pending_devs);
    nf->pending_pods = NULL;
    nf->pending_resv = NULL;
    nf->pending_devs = NULL;
}
