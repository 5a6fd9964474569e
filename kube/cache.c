/* SPDX-License-Identifier: Apache-2.0 */
/* cache.c - a jansson object behind a mutex. Notifications are collected
 * under the lock and delivered after it is released.
 *
 * Objects are kept as their canonical text (compact, keys sorted), not as
 * jansson trees: a DeviceBinding of 911 bytes of JSON took 10.5 KiB as a
 * tree, a podresd pod of 491 bytes 7.4 KiB, and the syncer keeps three
 * caches of a node's pods (docs/BENCHMARKS.md, row 6d). Equal objects have
 * equal text (json_equal's meaning: key order aside, the same types and
 * values), so a change is a strcmp. cache_get parses a fresh copy; the
 * reconciler reads a key's four objects once per reconcile. */
#define LOG_MOD "cache"
#include "../common/common.h"
#include "cache.h"

#include <pthread.h>

#define TEXT_FLAGS (JSON_COMPACT | JSON_SORT_KEYS)
#define LOAD_FLAGS JSON_ALLOW_NUL

/* Lock: 'mu' guards 'map' and 'synced'. */
struct cache {
    pthread_mutex_t mu;
    json_t *map;        /* key -> JSON string: the object's canonical text */
    bool synced;        /* the first list arrived */
    cache_notify_fn fn; /* change callback, or NULL */
    void *ctx;          /* its argument */
};

struct cache *cache_new(cache_notify_fn fn, void *ctx)
{
    struct cache *c = calloc(1, sizeof(*c));

    if (!c)
        return NULL;
    c->map = json_object();
    if (!c->map) {
        free(c);
        return NULL;
    }
    pthread_mutex_init(&c->mu, NULL);
    c->fn = fn;
    c->ctx = ctx;
    return c;
}

void cache_free(struct cache *c)
{
    if (!c)
        return;
    json_decref(c->map);
    pthread_mutex_destroy(&c->mu);
    free(c);
}

static void notify(struct cache *c, const char *key)
{
    if (c->fn)
        c->fn(c->ctx, key);
}

/* The canonical text of 'obj' as a new JSON string, or NULL (no memory). */
static json_t *text_of(const json_t *obj)
{
    char *s = json_dumps(obj, TEXT_FLAGS);
    json_t *t;

    if (!s)
        return NULL;
    t = json_stringn_nocheck(s, strlen(s));
    free(s);
    return t;
}

static json_t *parse(const json_t *text)
{
    return json_loadb(json_string_value(text), json_string_length(text), LOAD_FLAGS, NULL);
}

/* A numeric resourceVersion, or 0 when absent or opaque. */
static uint64_t rv_of(const json_t *obj)
{
    const char *s = json_string_value(
        json_object_get(json_object_get(obj, "metadata"), "resourceVersion"));
    char *end;
    unsigned long long v;

    if (!s)
        return 0;
    v = strtoull(s, &end, 10);
    return *end ? 0 : v;
}

/* Whether an object stored as 'old' (text) is newer than 'obj'. */
static bool newer_stored(const json_t *old, const json_t *obj)
{
    uint64_t rv = rv_of(obj), old_rv;
    json_t *o;

    if (!rv)
        return false;
    o = parse(old);
    old_rv = rv_of(o);
    json_decref(o);
    return old_rv && rv < old_rv;
}

void cache_set(struct cache *c, const char *key, json_t *obj, bool newer_only)
{
    json_t *text = text_of(obj), *old;
    bool changed = false;

    if (!text) {
        log_warn("out of memory storing %s", key);
        return;
    }
    pthread_mutex_lock(&c->mu);
    old = json_object_get(c->map, key);
    if (!(newer_only && old && newer_stored(old, obj))) {
        changed = !old || strcmp(json_string_value(old), json_string_value(text)) != 0;
        if (changed)
            json_object_set(c->map, key, text);
    }
    pthread_mutex_unlock(&c->mu);
    json_decref(text);
    if (changed)
        notify(c, key);
}

void cache_del(struct cache *c, const char *key)
{
    int had;

    pthread_mutex_lock(&c->mu);
    had = json_object_del(c->map, key) == 0;
    pthread_mutex_unlock(&c->mu);
    if (had)
        notify(c, key);
}

json_t *cache_get(struct cache *c, const char *key)
{
    json_t *text;
    json_t *v = NULL;

    pthread_mutex_lock(&c->mu);
    text = json_incref(json_object_get(c->map, key));
    pthread_mutex_unlock(&c->mu);
    if (text) {
        v = parse(text);
        json_decref(text);
    }
    return v;
}

void cache_replace(struct cache *c, json_t *all)
{
    json_t *changed = json_array(), *texts = json_object(), *old, *v;
    const char *key;
    size_t i;

    /* The texts are made outside the lock: readers wait for none of it. */
    json_object_foreach(all, key, v)
        json_object_set_new(texts, key, text_of(v));
    pthread_mutex_lock(&c->mu);
    json_object_foreach(c->map, key, v) {
        if (!json_object_get(texts, key))
            json_array_append_new(changed, json_string(key));
    }
    json_object_foreach(texts, key, v) {
        old = json_object_get(c->map, key);
        if (!old || strcmp(json_string_value(old), json_string_value(v)) != 0)
            json_array_append_new(changed, json_string(key));
    }
    json_object_clear(c->map);
    json_object_update(c->map, texts);
    c->synced = true;
    pthread_mutex_unlock(&c->mu);
    json_decref(texts);
    json_array_foreach(changed, i, v)
        notify(c, json_string_value(v));
    json_decref(changed);
}

json_t *cache_keys(struct cache *c)
{
    json_t *keys = json_array(), *v;
    const char *key;

    pthread_mutex_lock(&c->mu);
    json_object_foreach(c->map, key, v)
        json_array_append_new(keys, json_string(key));
    pthread_mutex_unlock(&c->mu);
    return keys;
}

bool cache_synced(struct cache *c)
{
    bool s;

    pthread_mutex_lock(&c->mu);
    s = c->synced;
    pthread_mutex_unlock(&c->mu);
    return s;
}

size_t cache_size(struct cache *c)
{
    size_t n;

    pthread_mutex_lock(&c->mu);
    n = json_object_size(c->map);
    pthread_mutex_unlock(&c->mu);
    return n;
}

bool cache_key_of(const json_t *obj, char *key, size_t cap)
{
    const json_t *md = json_object_get(obj, "metadata");
    const char *ns, *name;
    int n;

    if (!md)
        md = obj; /* podresd objects carry namespace and name at the top */
    ns = json_string_value(json_object_get(md, "namespace"));
    name = json_string_value(json_object_get(md, "name"));
    if (!name)
        return false;
    n = ns ? snprintf(key, cap, "%s/%s", ns, name) : snprintf(key, cap, "%s", name);
    return n > 0 && (size_t)n < cap;
}
