/* SPDX-License-Identifier: Apache-2.0 */
/* cache.c - a jansson object behind a mutex. Notifications are collected
 * under the lock and delivered after it is released. */
#include "../common/common.h"
#include "cache.h"

#include <pthread.h>

/* Lock: 'mu' guards 'map' and 'synced'. */
struct cache {
    pthread_mutex_t mu;
    json_t *map;         /* key -> object */
    bool synced;         /* the first list arrived */
    cache_notify_fn fn;  /* change callback, or NULL */
    void *ctx;           /* its argument */
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

/* A numeric resourceVersion, or 0 when absent or opaque. */
static uint64_t rv_of(const json_t *obj)
{
    const char *s = json_string_value(json_object_get(json_object_get(obj, "metadata"),
                                                      "resourceVersion"));
    char *end;
    unsigned long long v;

    if (!s)
        return 0;
    v = strtoull(s, &end, 10);
    return *end ? 0 : v;
}

void cache_set(struct cache *c, const char *key, json_t *obj, bool newer_only)
{
    json_t *old;
    bool changed;

    pthread_mutex_lock(&c->mu);
    old = json_object_get(c->map, key);
    if (newer_only && old && rv_of(old) && rv_of(obj) && rv_of(obj) < rv_of(old)) {
        pthread_mutex_unlock(&c->mu);
        return;
    }
    changed = !old || !json_equal(old, obj);
    if (changed)
        json_object_set(c->map, key, obj);
    pthread_mutex_unlock(&c->mu);
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
    json_t *v;

    pthread_mutex_lock(&c->mu);
    v = json_incref(json_object_get(c->map, key));
    pthread_mutex_unlock(&c->mu);
    return v;
}

void cache_replace(struct cache *c, json_t *all)
{
    json_t *changed = json_array(), *old, *v;
    const char *key;
    size_t i;

    pthread_mutex_lock(&c->mu);
    json_object_foreach(c->map, key, v) {
        if (!json_object_get(all, key))
            json_array_append_new(changed, json_string(key));
    }
    json_object_foreach(all, key, v) {
        old = json_object_get(c->map, key);
        if (!old || !json_equal(old, v))
            json_array_append_new(changed, json_string(key));
    }
    json_object_clear(c->map);
    json_object_update(c->map, all);
    c->synced = true;
    pthread_mutex_unlock(&c->mu);
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
    if (!ns || !name)
        return false;
    n = snprintf(key, cap, "%s/%s", ns, name);
    return n > 0 && (size_t)n < cap;
}
