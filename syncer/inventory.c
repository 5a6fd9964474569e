/* SPDX-License-Identifier: Apache-2.0 */
/* inventory.c - the node's devices as one NodeDevices object. */
#define LOG_MOD "inventory"
#include "../common/common.h"
#include "../common/clock.h"
#include "../common/jsonw.h"
#include "../common/mem.h"
#include "inventory.h"
#include "queue.h"
#include "dvb.h"

#include <assert.h>

static const char *const skip_names[INVENTORY_SKIP_N] = {"no_node", "crd_missing"};

/* ---- the pure part ---- */

bool inventory_key(const json_t *dev, char *key, size_t cap)
{
    const char *res = json_string_value(json_object_get(dev, "resourceName"));
    const char *id = json_string_value(json_object_get(dev, "id"));
    int n;

    if (!res || !id)
        return false;
    n = snprintf(key, cap, "%s/%s", res, id);
    return n > 0 && (size_t)n < cap;
}

/* podresd's {"nodes":[{"ID":n}]} as {"nodes":[{"id":n}]}. */
static json_t *topology(const json_t *topo)
{
    json_t *nodes = json_array(), *n;
    size_t i;

    json_array_foreach(json_object_get(topo, "nodes"), i, n) {
        json_t *id = json_object_get(n, "ID");

        if (json_is_integer(id))
            json_array_append_new(nodes, json_pack("{s:O}", "id", id));
    }
    return json_pack("{s:o}", "nodes", nodes);
}

json_t *inventory_device(const json_t *dev)
{
    const char *res = json_string_value(json_object_get(dev, "resourceName"));
    const char *id = json_string_value(json_object_get(dev, "id"));
    const char *health = json_string_value(json_object_get(dev, "health"));
    const char *physical = json_string_value(json_object_get(dev, "physical"));
    json_t *props = json_object_get(dev, "properties"), *aliases = json_object_get(dev, "aliases");
    json_t *out;

    if (!res || !id)
        return NULL;
    out = json_pack("{s:s,s:s,s:s,s:o}", "resourceName", res, "id", id, "health",
                    health && strcmp(health, "Healthy") == 0 ? "Healthy" : "Unhealthy", "topology",
                    topology(json_object_get(dev, "topology")));
    if (out && json_is_object(props) && json_object_size(props))
        json_object_set(out, "properties", props);
    if (out && json_is_array(aliases) && json_array_size(aliases))
        json_object_set(out, "aliases", aliases);
    if (out && physical && *physical && strcmp(physical, id) != 0)
        json_object_set_new(out, "physical", json_string(physical));
    return out;
}

static int by_key(const void *a, const void *b)
{
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* Per-resource totals of the sorted devices, and the summary line. */
static json_t *totals(json_t *const *devs, size_t n, char *summary, size_t cap, json_int_t *bad)
{
    json_t *out = json_array(), *last = NULL;
    const char *prev = NULL;
    size_t i, len = 0;

    summary[0] = '\0';
    for (i = 0; i < n; i++) {
        const char *res = json_string_value(json_object_get(devs[i], "resourceName"));
        bool ok = strcmp(json_string_value(json_object_get(devs[i], "health")), "Healthy") == 0;

        if (!prev || strcmp(prev, res) != 0) {
            last = json_pack("{s:s,s:I,s:I}", "name", res, "total", (json_int_t)0, "healthy",
                             (json_int_t)0);
            json_array_append_new(out, last);
            prev = res;
        }
        json_object_set_new(last, "total",
                            json_integer(json_integer_value(json_object_get(last, "total")) + 1));
        if (ok)
            json_object_set_new(
                last, "healthy",
                json_integer(json_integer_value(json_object_get(last, "healthy")) + 1));
        else
            (*bad)++;
    }
    json_array_foreach(out, i, last) {
        int w = snprintf(summary + len, cap - len, "%s%s=%lld", i ? "," : "",
                         json_string_value(json_object_get(last, "name")),
                         (long long)json_integer_value(json_object_get(last, "total")));

        if (w < 0 || (size_t)w >= cap - len) {
            summary[len] = '\0';
            break;
        }
        len += (size_t)w;
    }
    return out;
}

/* The old condition of 'type' in status 'old', or NULL. */
static const json_t *old_condition(const json_t *old, const char *type)
{
    const json_t *c;
    size_t i;

    json_array_foreach(json_object_get(old, "conditions"), i, c) {
        const char *t = json_string_value(json_object_get(c, "type"));

        if (t && strcmp(t, type) == 0)
            return c;
    }
    return NULL;
}

/* The devices of 'devs' in key order (borrowed from it), *n of them; new
 * (free() it), or NULL when there are none or memory is short. */
static json_t **sorted_devices(const json_t *devs, size_t *n)
{
    const char **keys, *k;
    json_t **sorted, *v;
    size_t i = 0;

    *n = json_object_size(devs);
    if (!*n)
        return NULL;
    keys = calloc(*n, sizeof(*keys));
    sorted = calloc(*n, sizeof(*sorted));
    if (keys && sorted) {
        json_object_foreach((json_t *)devs, k, v)
            keys[i++] = k;
        qsort(keys, *n, sizeof(*keys), by_key);
        for (i = 0; i < *n; i++)
            sorted[i] = json_object_get(devs, keys[i]);
    } else {
        free(sorted);
        sorted = NULL;
    }
    free(keys);
    return sorted;
}

/* The first of the 'n' sorted devices within INVENTORY_MAX_DEVICES and
 * INVENTORY_MAX_BYTES, as a new array; *listed how many. */
static json_t *bounded(json_t *const *sorted, size_t n, size_t *listed)
{
    json_t *list = json_array();
    size_t i, bytes = 2;

    for (i = 0; list && i < n && i < INVENTORY_MAX_DEVICES; i++) {
        char *text = json_dumps(sorted[i], JSONW_FLAGS);
        size_t len = text ? strlen(text) + 1 : 0;

        free(text);
        if (!len || bytes + len > INVENTORY_MAX_BYTES)
            break;
        bytes += len;
        json_array_append(list, sorted[i]);
    }
    *listed = i;
    return list;
}

json_t *inventory_status(const json_t *devs, uint64_t revision, const json_t *old, const char *now)
{
    size_t n, listed = 0;
    json_t **sorted = sorted_devices(devs, &n), *list, *st = NULL;
    json_int_t bad = 0;
    char summary[1024], message[256] = "";
    bool cut;

    if (n && !sorted)
        return NULL;
    list = bounded(sorted, n, &listed);
    if (!list)
        goto out;
    cut = listed < n;
    if (cut)
        snprintf(message, sizeof(message),
                 "%zu of %zu devices listed: a NodeDevices lists at most %d devices and %d "
                 "bytes of them; resources counts them all",
                 listed, n, INVENTORY_MAX_DEVICES, INVENTORY_MAX_BYTES);
    st = json_pack("{s:I,s:s,s:I,s:b,s:o,s:o,s:[o]}", "observedRevision", (json_int_t)revision,
                   "summary", "", "unhealthy", (json_int_t)0, "truncated", cut, "resources",
                   json_array(), "devices", list, "conditions",
                   dvb_condition("Truncated", cut ? "True" : "False",
                                 cut ? "TooManyDevices" : "AllListed", message,
                                 old_condition(old, "Truncated"), now));
    if (!st)
        goto out;
    json_object_set_new(st, "resources", totals(sorted, n, summary, sizeof(summary), &bad));
    json_object_set_new(st, "summary", json_string(summary));
    json_object_set_new(st, "unhealthy", json_integer(bad));
out:
    free(sorted);
    return st;
}

bool inventory_same(const json_t *a, const json_t *b)
{
    json_t *x, *y;
    bool same;

    if (!json_is_object(a) || !json_is_object(b))
        return json_equal(a, b);
    x = json_copy((json_t *)a);
    y = json_copy((json_t *)b);
    json_object_del(x, "observedRevision");
    json_object_del(y, "observedRevision");
    same = json_equal(x, y);
    json_decref(x);
    json_decref(y);
    return same;
}

/* ---- writes ---- */

uint64_t inventory_due(struct inventory *inv, uint64_t now_ms)
{
    uint64_t last = __atomic_load_n(&inv->last_write_ms, __ATOMIC_RELAXED);

    return last && now_ms < last + inv->interval_ms ? last + inv->interval_ms - now_ms : 0;
}

void inventory_skip(struct inventory *inv, enum inventory_skip why)
{
    __atomic_add_fetch(&inv->skipped[why], 1, __ATOMIC_RELAXED);
    if (inv->skip_logged == (int)why + 1)
        return;
    inv->skip_logged = (int)why + 1;
    if (why == INVENTORY_SKIP_NO_NODE)
        log_info("NodeDevices %s not written: no Node '%s' in the API server to own it; "
                 "checking again every 30 s",
                 inv->node, inv->node);
    else
        log_info("NodeDevices %s not written: the API server does not serve NodeDevices (is "
                 "the CustomResourceDefinition nodedevices.podres.dev installed?)",
                 inv->node);
}

/* The Node's uid (ERR_NOTFOUND: no such Node). */
static err_t node_uid(struct inventory *inv, struct error *e)
{
    char path[512], name[300];
    json_t *node = NULL;
    const char *uid;
    err_t rc;

    rest_escape(inv->node, name, sizeof(name));
    snprintf(path, sizeof(path), "/api/v1/nodes/%s", name);
    rc = rest_do(inv->kube, "GET", path, NULL, NULL, &node, e);
    if (rc)
        return rc;
    uid = json_string_value(json_object_get(json_object_get(node, "metadata"), "uid"));
    if (uid && strlen(uid) < sizeof(inv->node_uid))
        snprintf(inv->node_uid, sizeof(inv->node_uid), "%s", uid);
    json_decref(node);
    if (!inv->node_uid[0])
        return errorf(e, ERR_UPSTREAM, "Node %s has no uid", inv->node);
    return ERR_OK;
}

/* POST the node's NodeDevices, owned by its Node; *out the object made (or,
 * after a 409, the one there). */
static err_t create(struct inventory *inv, json_t **out, struct error *e)
{
    char path[512], name[300];
    json_t *body;
    err_t rc;

    body = json_pack("{s:s,s:s,s:{s:s,s:{s:s},s:[{s:s,s:s,s:s,s:s}]},s:{}}", "apiVersion",
                     "podres.dev/v1alpha1", "kind", "NodeDevices", "metadata", "name", inv->node,
                     "labels", DVB_LABEL, inv->node, "ownerReferences", "apiVersion", "v1", "kind",
                     "Node", "name", inv->node, "uid", inv->node_uid, "spec");
    if (!body)
        return errorf(e, ERR_NOMEM, "out of memory");
    rc = rest_do(inv->kube, "POST", INVENTORY_PATH, body, NULL, out, e);
    json_decref(body);
    if (rc == ERR_CONFLICT) { /* made since the informer listed: read it */
        rest_escape(inv->node, name, sizeof(name));
        snprintf(path, sizeof(path), INVENTORY_PATH "/%s", name);
        rc = rest_do(inv->kube, "GET", path, NULL, NULL, out, e);
    }
    if (rc == ERR_OK)
        log_info("created NodeDevices %s", inv->node);
    return rc;
}

/* podresd's devices as the feed keeps them: an object key -> view; new, or
 * NULL if out of memory. */
static json_t *devices_now(struct inventory *inv)
{
    char **keys = cache_keys(inv->devs, NULL);
    json_t *devs = keys ? json_object() : NULL, *dev;
    size_t i;

    for (i = 0; devs && keys[i]; i++) {
        dev = cache_get(inv->devs, keys[i]);
        if (dev)
            json_object_set_new(devs, keys[i], dev);
    }
    cache_keys_free(keys);
    return devs;
}

/* The gauges, and a truncation said once. */
static void note(struct inventory *inv, const json_t *want, size_t n)
{
    bool cut = json_is_true(json_object_get(want, "truncated"));

    __atomic_store_n(&inv->devices, (uint64_t)n, __ATOMIC_RELAXED);
    __atomic_store_n(&inv->truncated, (int)cut, __ATOMIC_RELAXED);
    if (cut && !inv->truncated_logged)
        log_warn("NodeDevices %s: %s", inv->node,
                 json_string_value(json_object_get(
                     json_array_get(json_object_get(want, "conditions"), 0), "message")));
    inv->truncated_logged = cut;
}

/* The object, created: *obj new. ERR_OK with *obj NULL when there is no
 * Node to own it (said, counted, *again_ms set). The Node's uid is read
 * anew each time: a Node made again has another. */
static err_t make_object(struct inventory *inv, json_t **obj, uint64_t *again_ms, struct error *e)
{
    err_t rc;

    inv->node_uid[0] = '\0';
    rc = node_uid(inv, e);
    if (rc == ERR_NOTFOUND) {
        inventory_skip(inv, INVENTORY_SKIP_NO_NODE);
        *again_ms = 30000;
        return ERR_OK;
    }
    return rc ? rc : create(inv, obj, e);
}

static err_t patch_status(struct inventory *inv, const json_t *old, json_t *want, struct error *e)
{
    char path[512], name[300];
    json_t *patch = dvb_status_patch(old, want);
    err_t rc;

    if (!patch)
        return errorf(e, ERR_NOMEM, "out of memory");
    rest_escape(inv->node, name, sizeof(name));
    snprintf(path, sizeof(path), INVENTORY_PATH "/%s/status", name);
    rc = rest_do(inv->kube, "PATCH", path, patch, REST_MERGE_PATCH, NULL, e);
    json_decref(patch);
    return rc;
}

/* Create the object when there is none (*obj NULL), then patch its status
 * to 'want' when it says otherwise; *wrote when either was acknowledged. */
static err_t write_object(struct inventory *inv, json_t **obj, json_t *want, bool *wrote,
                          uint64_t *again_ms, struct error *e)
{
    err_t rc;

    if (!*obj) {
        rc = make_object(inv, obj, again_ms, e);
        if (rc)
            return rc;
        *wrote = *obj != NULL;
    }
    if (!*obj || inventory_same(json_object_get(*obj, "status"), want))
        return ERR_OK;
    rc = patch_status(inv, json_object_get(*obj, "status"), want, e);
    *wrote = *wrote || rc == ERR_OK;
    return rc;
}

err_t inventory_sync(struct inventory *inv, bool *wrote, uint64_t *again_ms, struct error *e)
{
    json_t *obj = NULL, *devs = NULL, *want = NULL;
    char now[40];
    size_t n = 0;
    err_t rc = ERR_OK;

    assert(inv->node && inv->kube && cache_synced(inv->devs) && cache_synced(inv->nd));
    *wrote = false;
    *again_ms = inventory_due(inv, clock_mono_ms());
    if (*again_ms) /* coalesce: one write per interval */
        return ERR_OK;
    obj = cache_get(inv->nd, inv->node);
    devs = devices_now(inv);
    n = json_object_size(devs);
    dvb_now(now, sizeof(now));
    want = devs ? inventory_status(devs, inv->revision, json_object_get(obj, "status"), now) : NULL;
    if (!want) {
        rc = errorf(e, ERR_NOMEM, "out of memory");
        goto out;
    }
    note(inv, want, n);
    rc = write_object(inv, &obj, want, wrote, again_ms, e);
    if (*wrote) {
        inv->skip_logged = 0;
        __atomic_store_n(&inv->last_write_ms, clock_mono_ms(), __ATOMIC_RELAXED);
        __atomic_add_fetch(&inv->writes, 1, __ATOMIC_RELAXED);
    }
    if (rc)
        __atomic_add_fetch(&inv->failures, 1, __ATOMIC_RELAXED);
out:
    json_decref(obj);
    json_decref(devs);
    json_decref(want);
    if (n >= 64) /* the trees of a large inventory (and the informer's of the object) are
                  * gone: give their pages back; this runs on a change or a resync */
        mem_trim();
    return rc;
}

err_t inventory_render(struct inventory *inv, struct strbuf *sb)
{
    size_t i;
    err_t rc = strbuf_printf(
        sb,
        "# HELP podres_syncer_inventory_writes_total Writes of the node's NodeDevices the API "
        "server acknowledged.\n"
        "# TYPE podres_syncer_inventory_writes_total counter\n"
        "podres_syncer_inventory_writes_total %llu\n"
        "# HELP podres_syncer_inventory_failures_total Writes of the node's NodeDevices that "
        "failed (retried with backoff).\n"
        "# TYPE podres_syncer_inventory_failures_total counter\n"
        "podres_syncer_inventory_failures_total %llu\n"
        "# HELP podres_syncer_inventory_devices Devices in the node's inventory.\n"
        "# TYPE podres_syncer_inventory_devices gauge\npodres_syncer_inventory_devices %llu\n"
        "# HELP podres_syncer_inventory_truncated 1 when NodeDevices lists fewer devices than "
        "the node has (over its size bound).\n"
        "# TYPE podres_syncer_inventory_truncated gauge\npodres_syncer_inventory_truncated %d\n"
        "# HELP podres_syncer_inventory_skipped_total Times the inventory could not be written, "
        "by reason (no_node: no Node to own it; crd_missing: NodeDevices are not served).\n"
        "# TYPE podres_syncer_inventory_skipped_total counter\n",
        (unsigned long long)__atomic_load_n(&inv->writes, __ATOMIC_RELAXED),
        (unsigned long long)__atomic_load_n(&inv->failures, __ATOMIC_RELAXED),
        (unsigned long long)__atomic_load_n(&inv->devices, __ATOMIC_RELAXED),
        __atomic_load_n(&inv->truncated, __ATOMIC_RELAXED));

    for (i = 0; !rc && i < INVENTORY_SKIP_N; i++)
        rc = strbuf_printf(sb, "podres_syncer_inventory_skipped_total{reason=\"%s\"} %llu\n",
                           skip_names[i],
                           (unsigned long long)__atomic_load_n(&inv->skipped[i], __ATOMIC_RELAXED));
    return rc;
}
