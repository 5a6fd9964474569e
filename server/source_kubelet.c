/* SPDX-License-Identifier: Apache-2.0 */
/* source_kubelet.c - the kubelet poll thread: two unary calls per poll
 * (List, then GetAllocatableResources), protobuf-c decoding into the JSON
 * snapshot of store_kubelet_sync(), backoff and readiness. List comes first
 * so that a device registered after it is at worst missing for one poll,
 * never reported as bound and Unhealthy. Failures are logged once per
 * streak (then at debug), so a kubelet that is down for an hour costs two
 * log lines. */
#define LOG_MOD "kubelet"
#include "../common/common.h"
#include "../common/clock.h"
#include "source_kubelet.h"
#include "grpc.h"
#include "podresources.pb-c.h"
#include "settle.h"

#include <assert.h>
#include <pthread.h>
#include <time.h>
#include <unistd.h>

#define METHOD_LIST "/v1.PodResourcesLister/List"
#define METHOD_ALLOC "/v1.PodResourcesLister/GetAllocatableResources"
#define READY_INTERVALS 3
#define BACKOFF_MAX_MS 30000
#define TIMEOUT_MIN_MS 5000 /* a List of many MiB from a busy kubelet takes time */
#define TIMEOUT_MAX_MS 30000

struct source_kubelet {
    char *socket_path;    /* the kubelet's socket */
    uint64_t interval_ms; /* poll interval */
    struct store *store;  /* borrowed */
    struct grpc *grpc;    /* the client; the poll thread's alone */
    pthread_t thread;     /* the poll thread */
    bool started;         /* thread is running and must be joined */
    pthread_mutex_t mu;   /* guards the fields below */
    pthread_cond_t cv;    /* wakes the poll thread to stop (CLOCK_MONOTONIC) */
    volatile int stop;    /* set once to stop; also read by the curl callback */
    uint64_t last_ok_ms;  /* CLOCK_MONOTONIC of the last successful sync; 0 = never */
    unsigned failures;    /* consecutive failed polls */
    char last_err[256];   /* why the last poll failed */
    /* The poll thread's own: the answers last stored, and the revision then. */
    uint8_t *seen_list, *seen_alloc; /* raw List and GetAllocatableResources answers */
    size_t seen_llen, seen_alen;     /* their lengths */
    uint64_t seen_rev;               /* store revision after storing them */
    struct settle settle;            /* a restarted kubelet's gaps bridged */
    /* Guarded by 'mu': for the metrics. */
    uint64_t settles;            /* settling windows opened */
    size_t held_pods, held_devs; /* what the last stored snapshot kept (settle.h) */
};

/* True when the kubelet said exactly what was stored last and nothing else
 * changed the store since: no need to decode and compare again. */
static bool unchanged(struct source_kubelet *k, const uint8_t *list, size_t llen,
                      const uint8_t *alloc, size_t alen)
{
    return k->seen_rev && k->seen_llen == llen && k->seen_alen == alen &&
           (llen == 0 || memcmp(k->seen_list, list, llen) == 0) &&
           (alen == 0 || memcmp(k->seen_alloc, alloc, alen) == 0) &&
           k->seen_rev == store_revision(k->store);
}

/* Keep the stored answers (stolen). */
static void remember(struct source_kubelet *k, uint8_t **list, size_t llen, uint8_t **alloc,
                     size_t alen)
{
    free(k->seen_list);
    free(k->seen_alloc);
    k->seen_list = *list;
    k->seen_alloc = *alloc;
    k->seen_llen = llen;
    k->seen_alen = alen;
    k->seen_rev = store_revision(k->store);
    *list = NULL;
    *alloc = NULL;
}

/* ---- decoding ---- */

/* A name or id: non-empty (unless 'empty_ok') and without control characters
 * (UTF-8 is checked when jansson takes it). */
static bool clean(const char *s, bool empty_ok)
{
    const unsigned char *p = (const unsigned char *)s;

    if (!s || (!empty_ok && !*s))
        return false;
    for (; *p; p++) {
        if (*p < 0x20 || *p == 0x7f)
            return false;
    }
    return true;
}

/* Add string 'v' under 'key'; ERR_INVAL for an unclean or non-UTF-8 value. */
static err_t put_str(json_t *obj, const char *key, const char *v, bool empty_ok)
{
    json_t *s;

    if (!clean(v, empty_ok))
        return ERR_INVAL;
    s = json_string(v);
    if (!s)
        return ERR_INVAL; /* not UTF-8 (or out of memory) */
    return json_object_set_new(obj, key, s) ? ERR_NOMEM : ERR_OK;
}

/* {"nodes":[{"ID":n}...]}; NULL topology gives no nodes. */
static json_t *topology_json(const V1__TopologyInfo *t)
{
    json_t *nodes = json_array();
    size_t i;

    for (i = 0; t && nodes && i < t->n_nodes; i++) {
        if (json_array_append_new(nodes, json_pack("{s:I}", "ID", (json_int_t)t->nodes[i]->id))) {
            json_decref(nodes);
            return NULL;
        }
    }
    return nodes ? json_pack("{s:o}", "nodes", nodes) : NULL;
}

/* put_str() of each of the 'n' pairs kv[2i] (key), kv[2i+1] (value). */
static err_t put_strs(json_t *obj, const char *const *kv, size_t n, bool empty_ok)
{
    size_t i;
    err_t rc;

    for (i = 0; i < n; i++) {
        rc = put_str(obj, kv[2 * i], kv[2 * i + 1], empty_ok);
        if (rc)
            return rc;
    }
    return ERR_OK;
}

/* Append the 'n' CPU ids to the array 'arr'. */
static err_t cpus_json(const int64_t *ids, size_t n, json_t *arr)
{
    size_t i;

    for (i = 0; i < n; i++) {
        if (json_array_append_new(arr, json_integer((json_int_t)ids[i])))
            return ERR_NOMEM;
    }
    return ERR_OK;
}

static err_t group_json(const V1__ContainerDevices *g, json_t **out)
{
    json_t *o = json_object(), *ids = json_array();
    size_t i;
    err_t rc = o && ids ? put_str(o, "resourceName", g->resource_name, false) : ERR_NOMEM;

    if (rc)
        goto out;
    for (i = 0; i < g->n_device_ids; i++) {
        /* json_string() refuses what is not UTF-8 */
        if (!clean(g->device_ids[i], false) ||
            json_array_append_new(ids, json_string(g->device_ids[i]))) {
            rc = ERR_INVAL;
            goto out;
        }
    }
    if (json_object_set(o, "deviceIds", ids) ||
        json_object_set_new(o, "topology", topology_json(g->topology))) {
        rc = ERR_NOMEM;
        goto out;
    }
    *out = o;
    o = NULL;
out:
    json_decref(ids);
    json_decref(o);
    return rc;
}

static err_t memory_json(const V1__ContainerMemory *m, json_t **out)
{
    json_t *o = json_object();
    err_t rc = o ? put_str(o, "memoryType", m->memory_type, false) : ERR_NOMEM;

    if (rc)
        goto out;
    if (m->size > INT64_MAX) {
        rc = ERR_INVAL;
        goto out;
    }
    if (json_object_set_new(o, "size", json_integer((json_int_t)m->size)) ||
        json_object_set_new(o, "topology", topology_json(m->topology))) {
        rc = ERR_NOMEM;
        goto out;
    }
    *out = o;
    o = NULL;
out:
    json_decref(o);
    return rc;
}

/* Append {"name"} of CDI device 'd' to the array 'arr'. */
static err_t cdi_json(const V1__CDIDevice *d, json_t *arr)
{
    json_t *o = json_object();
    err_t rc = o ? put_str(o, "name", d->name, true) : ERR_NOMEM;

    if (rc) {
        json_decref(o);
        return rc;
    }
    return json_array_append_new(arr, o) ? ERR_NOMEM : ERR_OK;
}

/* How many of claim resource 'c''s CDI ids the kubelet repeated from 'prev',
 * the claim resource before it (NULL: none). The 1.36 kubelet's
 * GetDynamicResources gathers a driver's CDI ids across the claim's devices,
 * so each device also lists those of the driver's devices before it: 'prev'
 * as sent, of the same driver and a proper prefix of 'c''s, is taken for
 * that. (A kubelet without the bug whose device lists its predecessor's ids
 * and more would lose those: no driver known to us does that.) */
static size_t repeated_cdi(const V1__ClaimResource *prev, const V1__ClaimResource *c)
{
    size_t i;

    if (!prev || !prev->driver_name || !c->driver_name ||
        strcmp(prev->driver_name, c->driver_name) != 0 || prev->n_cdi_devices >= c->n_cdi_devices)
        return 0;
    for (i = 0; i < prev->n_cdi_devices; i++) {
        if (!prev->cdi_devices[i]->name || !c->cdi_devices[i]->name ||
            strcmp(prev->cdi_devices[i]->name, c->cdi_devices[i]->name) != 0)
            return 0;
    }
    return prev->n_cdi_devices;
}

/* Claim resource 'c' as JSON, without its first 'skip' CDI ids (repeated_cdi()). */
static err_t claim_json(const V1__ClaimResource *c, size_t skip, json_t **out)
{
    const char *const kv[] = {"driverName", c->driver_name, "poolName",
                              c->pool_name, "deviceName",   c->device_name};
    json_t *o = json_object(), *cdi = json_array();
    size_t i;
    err_t rc = o && cdi ? ERR_OK : ERR_NOMEM;

    for (i = skip; !rc && i < c->n_cdi_devices; i++)
        rc = cdi_json(c->cdi_devices[i], cdi);
    if (rc)
        goto out;
    if (json_object_set(o, "cdiDevices", cdi)) {
        rc = ERR_NOMEM;
        goto out;
    }
    rc = put_strs(o, kv, ARRAY_SIZE(kv) / 2, true);
    if (rc)
        goto out;
    *out = o;
    o = NULL;
out:
    json_decref(cdi);
    json_decref(o);
    return rc;
}

/* Append what 'conv' makes of each of the 'n' items to the array 'arr',
 * while 'rc' is ERR_OK; 'rc' tells how it ended. */
#define APPEND_ALL(rc, arr, n, items, conv)                                                        \
    do {                                                                                           \
        json_t *item_;                                                                             \
        for (size_t i_ = 0; !(rc) && i_ < (n); i_++) {                                             \
            (rc) = conv((items)[i_], &item_);                                                      \
            if (!(rc) && json_array_append_new((arr), item_))                                      \
                (rc) = ERR_NOMEM;                                                                  \
        }                                                                                          \
    } while (0)

static err_t dynamic_json(const V1__DynamicResource *r, json_t **out)
{
    const char *const kv[] = {"claimName", r->claim_name, "claimNamespace", r->claim_namespace};
    json_t *o = json_object(), *claims = json_array(), *c;
    err_t rc = o && claims ? put_strs(o, kv, ARRAY_SIZE(kv) / 2, true) : ERR_NOMEM;
    size_t i, skip;

    for (i = 0; !rc && i < r->n_claim_resources; i++) {
        skip = repeated_cdi(i ? r->claim_resources[i - 1] : NULL, r->claim_resources[i]);
        rc = claim_json(r->claim_resources[i], skip, &c);
        if (!rc && json_array_append_new(claims, c))
            rc = ERR_NOMEM;
    }
    if (rc)
        goto out;
    if (json_object_set(o, "claimResources", claims)) {
        rc = ERR_NOMEM;
        goto out;
    }
    *out = o;
    o = NULL;
out:
    json_decref(claims);
    json_decref(o);
    return rc;
}

/* ---- DRA devices as device groups ---- */

/* The element of 'arr' whose string fields k1, k2 are v1, v2 (k2 NULL: k1
 * alone), or NULL. */
static json_t *find_by(const json_t *arr, const char *k1, const char *v1, const char *k2,
                       const char *v2)
{
    json_t *o;
    size_t i;

    json_array_foreach(arr, i, o) {
        if (strcmp(json_string_value(json_object_get(o, k1)), v1) == 0 &&
            (!k2 || strcmp(json_string_value(json_object_get(o, k2)), v2) == 0))
            return o;
    }
    return NULL;
}

static bool utf8(const char *s)
{
    json_t *j = json_string(s);

    json_decref(j);
    return j != NULL;
}

/* Append string 'v' to 'arr' unless it is there. */
static err_t add_once(json_t *arr, const char *v)
{
    json_t *x;
    size_t i;

    json_array_foreach(arr, i, x) {
        if (strcmp(json_string_value(x), v) == 0)
            return ERR_OK;
    }
    return json_array_append_new(arr, json_string(v)) ? ERR_NOMEM : ERR_OK;
}

/* The DRA group of 'driver' in the device groups 'devs' (one with
 * "claims"), added when missing; NULL if out of memory. */
static json_t *dra_group(json_t *devs, const char *driver)
{
    json_t *g;
    size_t i;

    json_array_foreach(devs, i, g) {
        if (json_object_get(g, "claims") &&
            strcmp(json_string_value(json_object_get(g, "resourceName")), driver) == 0)
            return g;
    }
    g = json_pack("{s:s,s:[],s:{s:[]},s:[]}", "resourceName", driver, "deviceIds", "topology",
                  "nodes", "claims");
    if (g && json_array_append_new(devs, g))
        return NULL;
    return g;
}

/* The names of a DRA device and its claim: clean, UTF-8, and all but the
 * claim's namespace (older kubelets) not empty. */
static bool dra_names_ok(const V1__DynamicResource *r, const V1__ClaimResource *c)
{
    const char *const names[] = {c->driver_name, c->pool_name, c->device_name, r->claim_name,
                                 r->claim_namespace};
    size_t i;

    for (i = 0; i < ARRAY_SIZE(names); i++) {
        if (!clean(names[i], i == ARRAY_SIZE(names) - 1) || !utf8(names[i]))
            return false;
    }
    return true;
}

/* Device pool/device of driver 'c', allocated through claim 'r', as a
 * binding in the container's groups 'devs': id "pool/device" in the
 * driver's group, and in that group's claim entry. */
static err_t dra_add(json_t *devs, const V1__DynamicResource *r, const V1__ClaimResource *c)
{
    char id[1024];
    json_t *g, *cl;
    err_t rc;

    if (!dra_names_ok(r, c))
        return ERR_INVAL;
    if ((size_t)snprintf(id, sizeof(id), "%s/%s", c->pool_name, c->device_name) >= sizeof(id))
        return ERR_INVAL;
    g = dra_group(devs, c->driver_name);
    if (!g)
        return ERR_NOMEM;
    cl = find_by(json_object_get(g, "claims"), "namespace", r->claim_namespace, "name",
                 r->claim_name);
    if (!cl) {
        cl = json_pack("{s:s,s:s,s:[]}", "namespace", r->claim_namespace, "name", r->claim_name,
                       "deviceIds");
        if (!cl || json_array_append_new(json_object_get(g, "claims"), cl))
            return ERR_NOMEM;
    }
    rc = add_once(json_object_get(g, "deviceIds"), id);
    return rc ? rc : add_once(json_object_get(cl, "deviceIds"), id);
}

/* Every device of the container's dynamicResources as a DRA group of 'devs'. */
static err_t dra_groups(const V1__ContainerResources *c, json_t *devs)
{
    const V1__DynamicResource *r;
    size_t i, j;
    err_t rc = ERR_OK;

    for (i = 0; !rc && i < c->n_dynamic_resources; i++) {
        r = c->dynamic_resources[i];
        for (j = 0; !rc && j < r->n_claim_resources; j++)
            rc = dra_add(devs, r, r->claim_resources[j]);
    }
    return rc;
}

/* Set the arrays of a container; "dynamicResources" only when it has any. */
static err_t container_set(json_t *o, json_t *devs, json_t *cpus, json_t *mem, json_t *dyn)
{
    if (json_object_set(o, "devices", devs) || json_object_set(o, "cpuIds", cpus) ||
        json_object_set(o, "memory", mem) ||
        (json_array_size(dyn) && json_object_set(o, "dynamicResources", dyn)))
        return ERR_NOMEM;
    return ERR_OK;
}

/* {"name","devices","cpuIds","memory"[,"dynamicResources" when any]}. */
static err_t container_json(const V1__ContainerResources *c, json_t **out)
{
    json_t *o = json_object(), *devs = json_array(), *cpus = json_array(), *mem = json_array();
    json_t *dyn = json_array();
    err_t rc = o && devs && cpus && mem && dyn ? put_str(o, "name", c->name, false) : ERR_NOMEM;

    APPEND_ALL(rc, devs, c->n_devices, c->devices, group_json);
    if (rc)
        goto out;
    rc = cpus_json(c->cpu_ids, c->n_cpu_ids, cpus);
    if (rc)
        goto out;
    APPEND_ALL(rc, mem, c->n_memory, c->memory, memory_json);
    APPEND_ALL(rc, dyn, c->n_dynamic_resources, c->dynamic_resources, dynamic_json);
    if (!rc)
        rc = dra_groups(c, devs);
    if (rc)
        goto out;
    rc = container_set(o, devs, cpus, mem, dyn);
    if (rc)
        goto out;
    *out = o;
    o = NULL;
out:
    json_decref(devs);
    json_decref(cpus);
    json_decref(mem);
    json_decref(dyn);
    json_decref(o);
    return rc;
}

static err_t pod_json(const V1__PodResources *p, json_t **out)
{
    const char *const kv[] = {"namespace", p->namespace_, "name", p->name};
    json_t *o = json_object(), *cs = json_array();
    err_t rc = o && cs ? put_strs(o, kv, ARRAY_SIZE(kv) / 2, false) : ERR_NOMEM;

    APPEND_ALL(rc, cs, p->n_containers, p->containers, container_json);
    if (rc)
        goto out;
    if (json_object_set(o, "containers", cs)) {
        rc = ERR_NOMEM;
        goto out;
    }
    *out = o;
    o = NULL;
out:
    json_decref(cs);
    json_decref(o);
    return rc;
}

/* One snapshot device per id of the allocatable group 'g', appended to 'devs'. */
static err_t allocatable_group(const V1__ContainerDevices *g, json_t *devs)
{
    json_t *o = NULL, *ids, *d;
    size_t j;
    err_t rc = group_json(g, &o);

    if (rc)
        return rc;
    ids = json_object_get(o, "deviceIds");
    for (j = 0; j < json_array_size(ids); j++) {
        d = json_pack("{s:O,s:O,s:O}", "resourceName", json_object_get(o, "resourceName"), "id",
                      json_array_get(ids, j), "topology", json_object_get(o, "topology"));
        if (json_array_append_new(devs, d)) {
            rc = ERR_NOMEM;
            break;
        }
    }
    json_decref(o);
    return rc;
}

/* The node's allocatable devices into 'devs', its CPUs and memory, as a
 * container's, into 'cpus' and 'mem'. */
static err_t allocatable_json(const V1__AllocatableResourcesResponse *a, json_t *devs, json_t *cpus,
                              json_t *mem)
{
    size_t i;
    err_t rc;

    for (i = 0; i < a->n_devices; i++) {
        rc = allocatable_group(a->devices[i], devs);
        if (rc)
            return rc;
    }
    rc = cpus_json(a->cpu_ids, a->n_cpu_ids, cpus);
    APPEND_ALL(rc, mem, a->n_memory, a->memory, memory_json);
    return rc;
}

/* The two decoded answers as {"pods","devices","cpuIds","memory"}; on
 * ERR_OK *snap is new, on ERR_INVAL 'e' says which answer is bad. */
static err_t snapshot_of(const V1__ListPodResourcesResponse *l,
                         const V1__AllocatableResourcesResponse *a, json_t **snap, struct error *e)
{
    json_t *pods = json_array(), *devs = json_array(), *cpus = json_array(), *mem = json_array();
    err_t rc = pods && devs && cpus && mem ? ERR_OK : ERR_NOMEM;

    APPEND_ALL(rc, pods, l->n_pod_resources, l->pod_resources, pod_json);
    if (rc == ERR_INVAL)
        errorf(e, rc, "List answer has an empty or malformed name, or a memory size over 2^63-1");
    if (rc)
        goto out;
    rc = allocatable_json(a, devs, cpus, mem);
    if (rc == ERR_INVAL)
        errorf(e, rc,
               "GetAllocatableResources answer has an empty or malformed name, or a memory "
               "size over 2^63-1");
    if (rc)
        goto out;
    *snap = json_pack("{s:O,s:O,s:O,s:O}", "pods", pods, "devices", devs, "cpuIds", cpus, "memory",
                      mem);
    rc = *snap ? ERR_OK : ERR_NOMEM;
out:
    json_decref(pods);
    json_decref(devs);
    json_decref(cpus);
    json_decref(mem);
    return rc;
}

err_t source_kubelet_decode(const uint8_t *list, size_t list_len, const uint8_t *alloc,
                            size_t alloc_len, json_t **snap, struct error *e)
{
    V1__ListPodResourcesResponse *l = v1__list_pod_resources_response__unpack(NULL, list_len, list);
    V1__AllocatableResourcesResponse *a = v1__allocatable_resources_response__unpack(
        NULL, alloc_len, alloc);
    json_t *out = NULL;
    err_t rc;

    assert(snap);
    if (!l || !a) {
        rc = errorf(e, ERR_INVAL, "cannot decode the %s answer",
                    !l ? "List" : "GetAllocatableResources");
        goto out;
    }
    rc = snapshot_of(l, a, &out, e);
    if (rc)
        goto out;
    *snap = out;
out:
    if (l)
        v1__list_pod_resources_response__free_unpacked(l, NULL);
    if (a)
        v1__allocatable_resources_response__free_unpacked(a, NULL);
    return rc;
}

/* ---- timing ---- */

uint64_t source_kubelet_backoff(uint64_t interval_ms, unsigned failures, double jitter)
{
    uint64_t cap = interval_ms * 16, wait = interval_ms;
    unsigned i;

    if (failures == 0)
        return interval_ms;
    if (cap > BACKOFF_MAX_MS)
        cap = BACKOFF_MAX_MS;
    if (cap < interval_ms)
        cap = interval_ms;
    for (i = 1; i < failures && wait < cap; i++)
        wait *= 2;
    if (wait > cap)
        wait = cap;
    if (jitter < 0)
        jitter = 0;
    if (jitter > 1)
        jitter = 1;
    return wait + (uint64_t)((double)(wait / 4) * jitter);
}

/* ---- the poll thread ---- */

/* One poll: both calls, decode, reconcile. 'gs' tells a gRPC failure. */
static err_t poll_once(struct source_kubelet *k, struct grpc_status *gs, struct error *e)
{
    uint8_t *list = NULL, *alloc = NULL;
    size_t llen = 0, alen = 0;
    json_t *snap = NULL;
    bool changed = false;
    struct settle_held held;
    err_t rc = grpc_call(k->grpc, METHOD_LIST, NULL, 0, &list, &llen, gs);

    if (!rc) /* one report for either call */
        rc = grpc_call(k->grpc, METHOD_ALLOC, NULL, 0, &alloc, &alen, gs);
    if (rc) {
        /* A kubelet out of reach may be restarting; one that refused for
         * its rate limit is not. */
        if (gs->code != GRPC_RESOURCE_EXHAUSTED)
            settle_failed(&k->settle);
        errorf(e, rc, "%s", gs->message[0] ? gs->message : err_str(rc));
        goto out;
    }
    /* While settling, an unchanged answer may still change what is wanted. */
    if (!settle_active(&k->settle) && unchanged(k, list, llen, alloc, alen))
        goto out;
    rc = source_kubelet_decode(list, llen, alloc, alen, &snap, e);
    if (!rc && (rc = settle_apply(&k->settle, snap, clock_mono_ms(), &held)))
        errorf(e, rc, "cannot settle the kubelet's answer: %s", err_str(rc));
    if (rc)
        goto out;
    rc = store_kubelet_sync(k->store, snap, &changed);
    if (rc) {
        errorf(e, rc, "cannot store the kubelet's state: %s", err_str(rc));
        goto out;
    }
    settle_stored(&k->settle, snap);
    pthread_mutex_lock(&k->mu);
    k->settles += held.started;
    k->held_pods = held.pods;
    k->held_devs = held.devices;
    pthread_mutex_unlock(&k->mu);
    remember(k, &list, llen, &alloc, alen);
    log_debug("kubelet poll: List %zu bytes, GetAllocatableResources %zu bytes, %s "
              "(revision %llu)",
              llen, alen, changed ? "changes stored" : "no change",
              (unsigned long long)store_revision(k->store));
out:
    json_decref(snap);
    free(list);
    free(alloc);
    return rc;
}

/* Record the outcome; returns the wait before the next poll. */
static uint64_t record(struct source_kubelet *k, err_t rc, const struct grpc_status *gs,
                       const char *why, double jitter)
{
    uint64_t wait;
    unsigned before;
    bool first;

    pthread_mutex_lock(&k->mu);
    before = k->failures;
    first = !rc && k->last_ok_ms == 0;
    if (!rc) {
        k->last_ok_ms = clock_mono_ms();
        k->failures = 0;
        k->last_err[0] = '\0';
    } else {
        k->failures++;
        str_copy(k->last_err, sizeof(k->last_err), why); /* cut to fit */
    }
    wait = source_kubelet_backoff(k->interval_ms, k->failures, rc ? jitter : 0);
    pthread_mutex_unlock(&k->mu);
    if (!rc && first)
        log_info("first kubelet sync done (revision %llu)",
                 (unsigned long long)store_revision(k->store));
    else if (!rc && before)
        log_info("kubelet sync recovered after %u failed attempts", before);
    else if (rc && before == 0 && gs->code == GRPC_RESOURCE_EXHAUSTED)
        log_warn("kubelet answered RESOURCE_EXHAUSTED (its rate limit is shared by all "
                 "clients): %s; backing off",
                 why);
    else if (rc && before == 0)
        log_warn("kubelet sync failed: %s; retrying with backoff", why);
    else if (rc)
        log_debug("kubelet sync failed again (%u): %s; next try in %llu ms", before + 1, why,
                  (unsigned long long)wait);
    return wait;
}

/* Sleep 'ms' unless stopped; true when stopping. */
static bool wait_or_stop(struct source_kubelet *k, uint64_t ms)
{
    struct timespec ts = clock_mono_after(ms);
    bool stop;

    pthread_mutex_lock(&k->mu);
    while (!k->stop && pthread_cond_timedwait(&k->cv, &k->mu, &ts) == 0)
        ;
    stop = k->stop != 0;
    pthread_mutex_unlock(&k->mu);
    return stop;
}

static void *run(void *arg)
{
    struct source_kubelet *k = arg;
    unsigned seed = (unsigned)getpid() ^ (unsigned)clock_mono_ms();
    struct grpc_status gs;
    struct error why;
    uint64_t wait;
    err_t rc;

    do {
        memset(&why, 0, sizeof(why));
        rc = poll_once(k, &gs, &why);
        if (rc && k->stop)
            break;
        wait = record(k, rc, &gs, why.msg, (double)rand_r(&seed) / RAND_MAX);
    } while (!wait_or_stop(k, wait));
    return NULL;
}

static err_t init_sync(struct source_kubelet *k)
{
    pthread_condattr_t ca;
    int r;

    if (pthread_condattr_init(&ca))
        return ERR_NOMEM;
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    r = pthread_cond_init(&k->cv, &ca);
    pthread_condattr_destroy(&ca);
    if (r)
        return ERR_NOMEM;
    if (pthread_mutex_init(&k->mu, NULL)) {
        pthread_cond_destroy(&k->cv);
        return ERR_NOMEM;
    }
    return ERR_OK;
}

err_t source_kubelet_start(const struct source_kubelet_opts *o, struct source_kubelet **out)
{
    struct source_kubelet *k = calloc(1, sizeof(*k));
    struct grpc_opts go = {.max_recv = SOURCE_KUBELET_MAX_RECV};
    uint64_t tmo = o->interval_ms * 5;
    int r;

    assert(o->interval_ms > 0 && o->socket_path && out);
    if (!k)
        return ERR_NOMEM;
    if (init_sync(k)) {
        free(k);
        return ERR_NOMEM;
    }
    k->interval_ms = o->interval_ms;
    k->store = o->store;
    k->socket_path = strdup(o->socket_path);
    go.socket_path = k->socket_path;
    go.timeout_ms = tmo < TIMEOUT_MIN_MS   ? TIMEOUT_MIN_MS
                    : tmo > TIMEOUT_MAX_MS ? TIMEOUT_MAX_MS
                                           : tmo;
    go.stop = &k->stop;
    k->grpc = k->socket_path ? grpc_new(&go) : NULL;
    if (!k->grpc) {
        source_kubelet_free(k);
        return ERR_NOMEM;
    }
    r = pthread_create(&k->thread, NULL, run, k);
    if (r) {
        log_err("cannot start the kubelet poll thread: %s", strerror(r));
        source_kubelet_free(k);
        return ERR_NOMEM;
    }
    k->started = true;
    log_info("polling the kubelet on '%s' every %llu ms", k->socket_path,
             (unsigned long long)k->interval_ms);
    *out = k;
    return ERR_OK;
}

void source_kubelet_free(struct source_kubelet *k)
{
    if (!k)
        return;
    if (k->started) {
        pthread_mutex_lock(&k->mu);
        __atomic_store_n(&k->stop, 1, __ATOMIC_RELEASE);
        pthread_cond_broadcast(&k->cv);
        pthread_mutex_unlock(&k->mu);
        pthread_join(k->thread, NULL);
    }
    grpc_free(k->grpc);
    settle_free(&k->settle);
    free(k->seen_list);
    free(k->seen_alloc);
    free(k->socket_path);
    pthread_cond_destroy(&k->cv);
    pthread_mutex_destroy(&k->mu);
    free(k);
}

bool source_kubelet_ready(void *ctx, struct error *why)
{
    struct source_kubelet *k = ctx;
    uint64_t now = clock_mono_ms(), limit;
    bool ready;

    assert(k);
    pthread_mutex_lock(&k->mu);
    limit = k->interval_ms * READY_INTERVALS;
    ready = k->last_ok_ms && now - k->last_ok_ms <= limit;
    if (!ready && !k->last_ok_ms)
        errorf(why, ERR_UNAVAIL, "no successful kubelet sync yet%s%s", k->last_err[0] ? ": " : "",
               k->last_err);
    else if (!ready)
        errorf(why, ERR_UNAVAIL, "last successful kubelet sync %llu ms ago (limit %llu ms)%s%s",
               (unsigned long long)(now - k->last_ok_ms), (unsigned long long)limit,
               k->last_err[0] ? ": " : "", k->last_err);
    pthread_mutex_unlock(&k->mu);
    return ready;
}

err_t source_kubelet_metrics(void *ctx, struct strbuf *sb)
{
    struct source_kubelet *k = ctx;
    unsigned long long settles;
    size_t pods, devs;

    assert(k);
    pthread_mutex_lock(&k->mu);
    settles = (unsigned long long)k->settles;
    pods = k->held_pods;
    devs = k->held_devs;
    pthread_mutex_unlock(&k->mu);
    return strbuf_printf(
        sb,
        "# HELP podresd_kubelet_settles_total Times the kubelet came back from an outage or a "
        "restart (or lost a resource's devices) and its answers were settled for a while.\n"
        "# TYPE podresd_kubelet_settles_total counter\npodresd_kubelet_settles_total %llu\n"
        "# HELP podresd_kubelet_held What the kubelet's last answer left out and podresd kept as "
        "it was, while settling: pods, and allocatable devices.\n"
        "# TYPE podresd_kubelet_held gauge\n"
        "podresd_kubelet_held{kind=\"pod\"} %zu\npodresd_kubelet_held{kind=\"device\"} %zu\n",
        settles, pods, devs);
}
