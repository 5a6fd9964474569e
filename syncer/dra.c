/* SPDX-License-Identifier: Apache-2.0 */
/* dra.c - ResourceSlices as podresd's DRA inventory (dra.h): the pure
 * mapping of slices to device entries, then the pushes, one driver at a
 * time, and what is kept of them. */
#define LOG_MOD "dra"
#include "../common/common.h"
#include "../common/names.h"
#include "../common/prom.h"
#include "dra.h"

#include <assert.h>

#define ALIASES_MAX 16 /* podresd takes at most this many aliases a device */

static const char *const result_names[DRA_RESULT_N] = {"ok", "conflict", "invalid", "failed"};

/* ---- the pure part ---- */

/* obj.a.b (b NULL: obj.a), borrowed. */
static json_t *at(const json_t *obj, const char *a, const char *b)
{
    json_t *v = json_object_get(obj, a);

    return b ? json_object_get(v, b) : v;
}

/* Copy obj[key] into out[key] when present. -1 if out of memory. */
static int keep(json_t *out, const json_t *obj, const char *key)
{
    json_t *v = json_object_get(obj, key);

    return v ? json_object_set(out, key, v) : 0;
}

static json_t *device_view(const json_t *dev)
{
    json_t *out = json_object();

    if (out && (keep(out, dev, "name") || keep(out, dev, "attributes"))) {
        json_decref(out);
        return NULL;
    }
    return out;
}

json_t *dra_slice_view(json_t *slice)
{
    json_t *spec = json_object_get(slice, "spec"), *md = json_object_get(slice, "metadata");
    json_t *out = json_pack("{s:{},s:{s:{},s:[]}}", "metadata", "spec", "pool", "devices");
    json_t *m = at(out, "metadata", NULL), *s = at(out, "spec", NULL), *d, *v;
    size_t i;

    if (!out || keep(m, md, "name") || keep(m, md, "resourceVersion") || keep(s, spec, "driver") ||
        keep(s, spec, "nodeName") || keep(at(s, "pool", NULL), at(spec, "pool", NULL), "name") ||
        keep(at(s, "pool", NULL), at(spec, "pool", NULL), "generation"))
        goto out_nomem;
    json_array_foreach(json_object_get(spec, "devices"), i, d) {
        v = device_view(d);
        if (!v || json_array_append_new(at(s, "devices", NULL), v))
            goto out_nomem;
    }
    return out;
out_nomem:
    json_decref(out);
    return NULL;
}

/* An attribute's value (a DeviceAttribute: one of string, int, bool,
 * version) as a string in 'buf'; NULL when it has none of them. */
static const char *attribute_text(const json_t *attr, char *buf, size_t cap)
{
    json_t *v;

    v = json_object_get(attr, "string");
    if (json_is_string(v))
        return json_string_value(v);
    v = json_object_get(attr, "version");
    if (json_is_string(v))
        return json_string_value(v);
    v = json_object_get(attr, "int");
    if (json_is_integer(v)) {
        snprintf(buf, cap, "%" JSON_INTEGER_FORMAT, json_integer_value(v));
        return buf;
    }
    v = json_object_get(attr, "bool");
    if (json_is_boolean(v))
        return json_is_true(v) ? "true" : "false";
    return NULL;
}

/* An attribute's name after any "domain/" prefix. */
static const char *base_name(const char *qualified)
{
    const char *slash = strrchr(qualified, '/');

    return slash ? slash + 1 : qualified;
}

static int cmp_key(const void *a, const void *b)
{
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* 'set' (an object name -> true) as a sorted array, the first ALIASES_MAX
 * names of it; new, or NULL. */
static json_t *sorted_names(const json_t *set)
{
    size_t n = json_object_size(set), i = 0;
    const char **names = calloc(n ? n : 1, sizeof(*names)), *k;
    json_t *out, *x;

    if (!names)
        return NULL;
    json_object_foreach((json_t *)set, k, x)
        names[i++] = k;
    qsort(names, n, sizeof(names[0]), cmp_key);
    out = json_array();
    for (i = 0; out && i < n && i < ALIASES_MAX; i++) {
        if (json_array_append_new(out, json_string(names[i]))) {
            json_decref(out);
            out = NULL;
        }
    }
    free(names);
    return out;
}

/* One attribute into the entry's properties, alias set and physical id. */
static void take_attribute(json_t *entry, json_t *props, json_t *aliases, const char *name,
                           const json_t *attr)
{
    char buf[32];
    const char *text = attribute_text(attr, buf, sizeof(buf)), *base = base_name(name);

    if (!text || !*name || strlen(name) > 253 || strlen(text) > 4096)
        return;
    json_object_set_new(props, name, json_string(text));
    if (!names_is_alias(text))
        return;
    if (strcmp(base, "uuid") == 0 || strcmp(base, "pciBusID") == 0 || strcmp(base, "serial") == 0)
        json_object_set_new(aliases, text, json_true());
    else if (strcmp(base, "parentUUID") == 0)
        json_object_set_new(entry, "physical", json_string(text));
}

/* The entry of device 'dev' (a view) of pool 'pool'; new, or NULL. */
static json_t *device_entry(const char *pool, const json_t *dev)
{
    const char *name = json_string_value(json_object_get(dev, "name")), *k;
    json_t *entry = json_object(), *props = json_object(), *aliases = json_object(), *v;
    char id[600];

    if (!entry || !props || !aliases || !name)
        goto out_fail;
    snprintf(id, sizeof(id), "%s/%s", pool, name);
    json_object_set_new(entry, "id", json_string(id));
    json_object_foreach(json_object_get(dev, "attributes"), k, v)
        take_attribute(entry, props, aliases, k, v);
    if (json_object_size(aliases) && json_object_set_new(entry, "aliases", sorted_names(aliases)))
        goto out_fail;
    if (json_object_size(props) && json_object_set(entry, "properties", props))
        goto out_fail;
    json_decref(props);
    json_decref(aliases);
    return entry;
out_fail:
    json_decref(entry);
    json_decref(props);
    json_decref(aliases);
    return NULL;
}

/* "driver\npool" of a slice view into 'buf'; false when it names neither. */
static bool pool_key(const json_t *slice, char *buf, size_t cap)
{
    const char *driver = json_string_value(at(slice, "spec", "driver"));
    const char *pool = json_string_value(at(at(slice, "spec", "pool"), "name", NULL));
    int n;

    if (!driver || !*driver || !pool || !*pool)
        return false;
    n = snprintf(buf, cap, "%s\n%s", driver, pool);
    return n > 0 && (size_t)n < cap;
}

static json_int_t generation(const json_t *slice)
{
    return json_integer_value(at(at(slice, "spec", "pool"), "generation", NULL));
}

/* The keys of 'obj', sorted; new (free() it, not the strings: borrowed from
 * 'obj'), or NULL when empty or out of memory. */
static const char **sorted_keys(const json_t *obj, size_t *n)
{
    const char **keys, *k;
    json_t *v;
    size_t i = 0;

    *n = json_object_size(obj);
    keys = *n ? calloc(*n, sizeof(*keys)) : NULL;
    if (!keys)
        return NULL;
    json_object_foreach((json_t *)obj, k, v)
        keys[i++] = k;
    qsort(keys, *n, sizeof(*keys), cmp_key);
    return keys;
}

/* The devices of one slice into 'per' (driver -> {id -> entry}); a device
 * already there stays. -1 if out of memory. */
static int add_devices(json_t *per, const json_t *slice)
{
    const char *driver = json_string_value(at(slice, "spec", "driver"));
    const char *pool = json_string_value(at(at(slice, "spec", "pool"), "name", NULL));
    json_t *devs = json_object_get(per, driver), *d, *entry;
    const char *id;
    size_t i;

    if (!devs &&
        (json_object_set_new(per, driver, json_object()) || !(devs = json_object_get(per, driver))))
        return -1;
    json_array_foreach(at(slice, "spec", "devices"), i, d) {
        if (!json_is_string(json_object_get(d, "name")))
            continue;
        entry = device_entry(pool, d);
        if (!entry)
            return -1;
        id = json_string_value(json_object_get(entry, "id"));
        if (json_object_get(devs, id))
            json_decref(entry); /* named twice: the first slice's */
        else if (json_object_set_new(devs, id, entry))
            return -1;
    }
    return 0;
}

/* 'per' (driver -> {id -> entry}) as driver -> [entry] by id; new, or NULL. */
static json_t *by_id(const json_t *per)
{
    json_t *out = json_object(), *devs, *list;
    const char *driver, **ids;
    size_t n, i;

    json_object_foreach((json_t *)per, driver, devs) {
        ids = sorted_keys(devs, &n);
        list = json_array();
        for (i = 0; list && ids && i < n; i++) {
            if (json_array_append(list, json_object_get(devs, ids[i])))
                break;
        }
        free(ids);
        if (!out || !list || i < n || json_object_set_new(out, driver, list)) {
            json_decref(out);
            return NULL;
        }
    }
    return out;
}

/* The newest generation of each pool: "driver\npool" -> generation. */
static json_t *newest_generations(const json_t *slices)
{
    json_t *newest = json_object(), *slice, *have;
    const char *name;
    char key[800];

    json_object_foreach((json_t *)slices, name, slice) {
        if (!pool_key(slice, key, sizeof(key)))
            continue;
        have = json_object_get(newest, key);
        if ((!have || generation(slice) > json_integer_value(have)) &&
            json_object_set_new(newest, key, json_integer(generation(slice)))) {
            json_decref(newest);
            return NULL;
        }
    }
    return newest;
}

json_t *dra_inventory(const json_t *slices)
{
    json_t *newest = newest_generations(slices), *per = json_object(), *out = NULL;
    const json_t *slice;
    size_t n, i;
    const char **names = sorted_keys(slices, &n);
    char key[800];

    if ((n && !names) || !newest || !per)
        goto out;
    for (i = 0; i < n; i++) {
        slice = json_object_get(slices, names[i]);
        if (!pool_key(slice, key, sizeof(key)) ||
            generation(slice) != json_integer_value(json_object_get(newest, key)))
            continue; /* a pool's older generation: being replaced */
        if (add_devices(per, slice))
            goto out;
    }
    out = by_id(per);
out:
    free(names);
    json_decref(newest);
    json_decref(per);
    return out;
}

/* ---- the pushes ---- */

/* Every object of 'c' as key -> object; new, or NULL if out of memory. */
static json_t *snapshot(struct cache *c)
{
    char **keys = cache_keys(c, NULL);
    json_t *all = keys ? json_object() : NULL, *v;
    size_t i;

    for (i = 0; all && keys[i]; i++) {
        v = cache_get(c, keys[i]);
        if (v && json_object_set_new(all, keys[i], v)) {
            json_decref(all);
            all = NULL;
        }
    }
    cache_keys_free(keys);
    return all;
}

/* The drivers to look at, as driver -> true: those of the slices, those
 * podresd took or refused a set of (a refused driver's slices may all go
 * while podresd still holds the set it took before), and, after the feed
 * reconnected, those podresd lists devices of (a resourceName without '/':
 * a device plugin's has one), which slices gone while no syncer ran may
 * have left there. New, or NULL. */
static json_t *candidates(struct dra *d, const json_t *want)
{
    json_t *all = json_object(), *devs = d->leftovers ? snapshot(d->devs) : NULL, *v;
    const char *k, *res;

    if (!all || (d->leftovers && !devs)) {
        json_decref(all);
        return NULL;
    }
    json_object_foreach((json_t *)want, k, v)
        json_object_set_new(all, k, json_true());
    json_object_foreach(d->pushed, k, v)
        json_object_set_new(all, k, json_true());
    json_object_foreach(d->refused, k, v)
        json_object_set_new(all, k, json_true());
    json_object_foreach(devs, k, v) {
        res = json_string_value(json_object_get(v, "resourceName"));
        if (res && !strchr(res, '/'))
            json_object_set_new(all, res, json_true());
    }
    json_decref(devs);
    return all;
}

static void count(struct dra *d, enum dra_result r)
{
    __atomic_add_fetch(&d->pushes[r], 1, __ATOMIC_RELAXED);
}

/* PUT 'devs' (borrowed) as the set of 'driver'. podresd's 413 (a set over
 * its body limit) is ERR_TOOLARGE: like a 422, it stays so until the set
 * changes. */
static err_t put_driver(struct dra *d, const char *driver, json_t *devs, struct error *e)
{
    char path[600], esc[400];
    json_t *body = json_pack("{s:O}", "devices", devs);
    err_t rc;

    if (!body)
        return errorf(e, ERR_NOMEM, "out of memory");
    rest_escape(driver, esc, sizeof(esc));
    snprintf(path, sizeof(path), "/v1/drivers/%s/devices", esc);
    rc = rest_do(d->pd, "PUT", path, body, NULL, NULL, e);
    json_decref(body);
    if (rc == ERR_INVAL && rest_last_code(d->pd) == 413)
        rc = ERR_TOOLARGE;
    return rc;
}

/* Whether 'rc' is podresd refusing the set as it is (409, 413, 422). */
static bool is_refusal(err_t rc)
{
    return rc == ERR_CONFLICT || rc == ERR_UNPROCESSABLE || rc == ERR_TOOLARGE;
}

/* What podresd's answer 'rc' (and 'e') to the set 'devs' of 'driver'
 * means: kept, refused (said, ERR_OK), or a failure to try again. */
static err_t answered(struct dra *d, const char *driver, json_t *devs, err_t rc, struct error *e)
{
    if (rc == ERR_UNAVAIL)
        return rc; /* shutting down */
    if (rc == ERR_OK || is_refusal(rc)) {
        json_object_set(rc ? d->refused : d->pushed, driver, devs);
        json_object_del(rc ? d->pushed : d->refused, driver);
        if (!rc && json_object_get(d->failing, driver))
            log_info("podresd takes the devices of DRA driver '%s' again", driver);
        json_object_del(d->failing, driver);
    }
    if (rc == ERR_OK) {
        count(d, DRA_PUSH_OK);
        log_debug("podresd took %zu devices of DRA driver '%s'", json_array_size(devs), driver);
        return ERR_OK;
    }
    if (is_refusal(rc)) {
        count(d, rc == ERR_CONFLICT ? DRA_PUSH_CONFLICT : DRA_PUSH_INVALID);
        log_warn("podresd refused the devices (%zu) of DRA driver '%s' of the node's "
                 "ResourceSlices: %s; sending them again when the slices change",
                 json_array_size(devs), driver, error_msg(e));
        return ERR_OK;
    }
    count(d, DRA_PUSH_FAILED);
    if (!json_object_get(d->failing, driver))
        log_warn("cannot hand the devices of DRA driver '%s' to podresd: %s; retrying", driver,
                 error_msg(e));
    json_object_set_new(d->failing, driver, json_true());
    return rc;
}

/* The kept sets, made on first use; all of them forgotten when the feed's
 * epoch changed (podresd may have restarted). -1 if out of memory. */
static int prepare(struct dra *d, uint64_t epoch)
{
    if (!d->pushed)
        d->pushed = json_object();
    if (!d->refused)
        d->refused = json_object();
    if (!d->failing)
        d->failing = json_object();
    if (!d->pushed || !d->refused || !d->failing)
        return -1;
    if (epoch != d->epoch) {
        json_object_clear(d->pushed);
        json_object_clear(d->refused);
        d->epoch = epoch;
        d->leftovers = true;
    }
    return 0;
}

/* The gauges: drivers with devices in 'want', and their devices. */
static void note_sizes(struct dra *d, const json_t *want)
{
    uint64_t drivers = 0, devices = 0;
    const char *k;
    json_t *v;

    json_object_foreach((json_t *)want, k, v) {
        drivers += json_array_size(v) > 0;
        devices += json_array_size(v);
    }
    __atomic_store_n(&d->drivers, drivers, __ATOMIC_RELAXED);
    __atomic_store_n(&d->devices, devices, __ATOMIC_RELAXED);
}

/* Push each candidate driver's set that podresd neither took nor refused
 * as it is; the first failure is returned (in 'e'), the others tried. */
static err_t push_all(struct dra *d, const json_t *want, const json_t *drivers, json_t *none,
                      bool *pushed, struct error *e)
{
    struct error one_e;
    const char *driver;
    json_t *devs, *v;
    err_t rc = ERR_OK, one;

    json_object_foreach((json_t *)drivers, driver, v) {
        devs = json_object_get(want, driver);
        if (!devs)
            devs = none; /* its slices all went */
        if (json_equal(devs, json_object_get(d->pushed, driver)) ||
            json_equal(devs, json_object_get(d->refused, driver)))
            continue;
        one_e = (struct error){0};
        one = put_driver(d, driver, devs, &one_e);
        *pushed = *pushed || one == ERR_OK;
        one = answered(d, driver, devs, one, &one_e);
        if (one && !rc) {
            rc = one;
            if (e)
                *e = one_e;
        }
    }
    return rc;
}

err_t dra_sync(struct dra *d, uint64_t epoch, bool *pushed, struct error *e)
{
    json_t *slices = NULL, *want = NULL, *drivers = NULL, *none = json_array();
    err_t rc;

    assert(d->pd && d->slices && d->devs);
    *pushed = false;
    if (!none || prepare(d, epoch)) {
        rc = errorf(e, ERR_NOMEM, "out of memory");
        goto out;
    }
    slices = snapshot(d->slices);
    want = slices ? dra_inventory(slices) : NULL;
    drivers = want ? candidates(d, want) : NULL;
    if (!drivers) {
        rc = errorf(e, ERR_NOMEM, "out of memory");
        goto out;
    }
    note_sizes(d, want);
    rc = push_all(d, want, drivers, none, pushed, e);
    if (!rc)
        d->leftovers = false;
out:
    json_decref(none);
    json_decref(drivers);
    json_decref(want);
    json_decref(slices);
    return rc;
}

void dra_skip(struct dra *d)
{
    __atomic_add_fetch(&d->skipped, 1, __ATOMIC_RELAXED);
}

err_t dra_render(struct dra *d, struct strbuf *sb)
{
    struct prom p = PROM_INIT(sb);
    size_t i;

    prom_help(&p, "podres_syncer_dra_pushes_total", "counter",
              "DRA driver device sets handed to podresd, by its answer (ok; conflict: 409, an "
              "alias names another device; invalid: 422, or 413, a set over podresd's body "
              "limit; failed: anything else, retried).");
    for (i = 0; i < DRA_RESULT_N; i++)
        prom_sample(&p, "podres_syncer_dra_pushes_total",
                    (const char *const[]){"result", result_names[i], NULL}, "%llu",
                    (unsigned long long)__atomic_load_n(&d->pushes[i], __ATOMIC_RELAXED));
    prom_help(&p, "podres_syncer_dra_skipped_total", "counter",
              "Times the DRA inventory was not synced, by reason (not_served: the API server "
              "does not serve resource.k8s.io/v1 ResourceSlices).");
    prom_sample(&p, "podres_syncer_dra_skipped_total",
                (const char *const[]){"reason", "not_served", NULL}, "%llu",
                (unsigned long long)__atomic_load_n(&d->skipped, __ATOMIC_RELAXED));
    prom_metric(&p, "podres_syncer_dra_drivers", "gauge",
                "DRA drivers with devices in the node's ResourceSlices.", "%llu",
                (unsigned long long)__atomic_load_n(&d->drivers, __ATOMIC_RELAXED));
    prom_metric(&p, "podres_syncer_dra_devices", "gauge", "Devices of the node's ResourceSlices.",
                "%llu", (unsigned long long)__atomic_load_n(&d->devices, __ATOMIC_RELAXED));
    return p.rc;
}

void dra_release(struct dra *d)
{
    json_decref(d->pushed);
    json_decref(d->refused);
    json_decref(d->failing);
    d->pushed = NULL;
    d->refused = NULL;
    d->failing = NULL;
}
