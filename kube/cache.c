/* SPDX-License-Identifier: Apache-2.0 */
/* cache.c - a string map (strmap.h) of texts behind a mutex. Notifications
 * are collected under the lock and delivered after it is released.
 *
 * Objects are kept as their canonical text (compact, keys sorted), not as
 * jansson trees: a tree takes several times the bytes of its text, and the
 * syncer keeps three caches of a node's pods. Equal objects have equal text
 * (json_equal's meaning: key order aside, the same types and values), so a
 * change is a strcmp. A text is shared, counted, between the map and the
 * readers parsing it outside the lock; cache_get parses a fresh copy, and
 * the reconciler reads a key's four objects once per reconcile. */
#define LOG_MOD "cache"
#include "../common/common.h"
#include "../common/jsonw.h"
#include "cache.h"
#include "strmap.h"

#include <assert.h>
#include <pthread.h>

#define TEXT_FLAGS (JSONW_FLAGS | JSON_SORT_KEYS)
#define LOAD_FLAGS JSON_ALLOW_NUL

/* One object's canonical text. Reference counted (atomic): the map holds
 * one reference, and each reader parsing it outside the lock another. */
struct text {
    int refs;   /* references; the last frees it */
    size_t len; /* bytes of 's' before its NUL */
    char s[];   /* the text */
};

/* Lock: 'mu' guards 'map' and 'synced'. */
struct cache {
    pthread_mutex_t mu;
    struct strmap *map; /* key -> struct text */
    bool synced;        /* the first list arrived */
    cache_notify_fn fn; /* change callback, or NULL */
    void *ctx;          /* its argument */
};

/* Keys whose notification waits for the lock's release. */
struct keys {
    char **v;   /* new strings */
    size_t n;   /* used */
    size_t cap; /* allocated */
};

static void text_put(void *p)
{
    struct text *t = p;

    if (t && __atomic_sub_fetch(&t->refs, 1, __ATOMIC_ACQ_REL) == 0)
        free(t);
}

static struct text *text_get(struct text *t)
{
    if (t)
        __atomic_add_fetch(&t->refs, 1, __ATOMIC_RELAXED);
    return t;
}

/* The canonical text of 'obj' (one reference), or NULL (no memory). */
static struct text *text_of(const json_t *obj)
{
    char *s = json_dumps(obj, TEXT_FLAGS);
    size_t len = s ? strlen(s) : 0;
    struct text *t = s ? malloc(sizeof(*t) + len + 1) : NULL;

    if (t) {
        t->refs = 1;
        t->len = len;
        memcpy(t->s, s, len + 1);
    }
    free(s);
    return t;
}

static json_t *parse(const struct text *t)
{
    return json_loadb(t->s, t->len, LOAD_FLAGS, NULL);
}

static bool same(const struct text *a, const struct text *b)
{
    return a && b && a->len == b->len && memcmp(a->s, b->s, a->len) == 0;
}

struct cache *cache_new(cache_notify_fn fn, void *ctx)
{
    struct cache *c = calloc(1, sizeof(*c));

    if (!c)
        return NULL;
    c->map = strmap_new();
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
    strmap_free(c->map, text_put);
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
    const char *s = json_string_value(
        json_object_get(json_object_get(obj, "metadata"), "resourceVersion"));
    char *end;
    unsigned long long v;

    if (!s)
        return 0;
    v = strtoull(s, &end, 10);
    return *end ? 0 : v;
}

/* Whether an object stored as 'old' is newer than 'obj'. */
static bool newer_stored(const struct text *old, const json_t *obj)
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

/* Store 't' under 'key' unless it is there already (or older there when
 * 'newer_only'); the reference to 't' goes to the map or is dropped.
 * Whether the stored object changed. Under c->mu. */
static bool store(struct cache *c, const char *key, struct text *t, const json_t *obj,
                  bool newer_only)
{
    struct text *old = strmap_get(c->map, key);
    void *replaced = NULL;

    if ((newer_only && old && newer_stored(old, obj)) || same(old, t)) {
        text_put(t);
        return false;
    }
    if (strmap_put(c->map, key, t, &replaced)) {
        log_warn("out of memory storing %s", key);
        text_put(t);
        return false;
    }
    text_put(replaced);
    return true;
}

void cache_set(struct cache *c, const char *key, json_t *obj, bool newer_only)
{
    struct text *t;
    bool changed;

    assert(key && obj);
    t = text_of(obj);
    if (!t) {
        log_warn("out of memory storing %s", key);
        return;
    }
    pthread_mutex_lock(&c->mu);
    changed = store(c, key, t, obj, newer_only);
    pthread_mutex_unlock(&c->mu);
    if (changed)
        notify(c, key);
}

void cache_del(struct cache *c, const char *key)
{
    struct text *old;

    pthread_mutex_lock(&c->mu);
    old = strmap_del(c->map, key);
    pthread_mutex_unlock(&c->mu);
    text_put(old);
    if (old)
        notify(c, key);
}

json_t *cache_get(struct cache *c, const char *key)
{
    struct text *t;
    json_t *v = NULL;

    pthread_mutex_lock(&c->mu);
    t = text_get(strmap_get(c->map, key));
    pthread_mutex_unlock(&c->mu);
    if (t) {
        v = parse(t);
        text_put(t);
    }
    return v;
}

/* Add a copy of 'key' to 'k'. Out of memory, a change goes unnotified: the
 * next resync finds it. */
static void keys_add(struct keys *k, const char *key)
{
    char **v;

    if (k->n == k->cap) {
        v = realloc(k->v, (k->cap ? k->cap * 2 : 16) * sizeof(*v));
        if (!v)
            return;
        k->v = v;
        k->cap = k->cap ? k->cap * 2 : 16;
    }
    k->v[k->n] = strdup(key);
    if (k->v[k->n])
        k->n++;
}

/* The texts of 'all' (an object key -> obj) as a new map; NULL if out of
 * memory. */
static struct strmap *texts_of(const json_t *all)
{
    struct strmap *m = strmap_new();
    struct text *t;
    const char *key;
    json_t *v;

    json_object_foreach((json_t *)all, key, v) {
        if (!m)
            break;
        t = text_of(v);
        if (!t || strmap_put(m, key, t, NULL)) {
            text_put(t);
            strmap_free(m, text_put);
            m = NULL;
        }
    }
    return m;
}

/* The keys whose object differs between 'from' and 'to' into 'k'. */
static void diff(const struct strmap *from, const struct strmap *to, struct keys *k)
{
    struct strmap_iter it;
    const char *key;
    void *v;

    strmap_iter_init(&it, from);
    while (strmap_iter_next(&it, &key, NULL)) {
        if (!strmap_get(to, key))
            keys_add(k, key);
    }
    strmap_iter_init(&it, to);
    while (strmap_iter_next(&it, &key, &v)) {
        if (!same(strmap_get(from, key), v))
            keys_add(k, key);
    }
}

void cache_replace(struct cache *c, json_t *all)
{
    struct strmap *texts = texts_of(all), *old; /* made outside the lock: readers wait for none */
    struct keys changed = {0};
    size_t i;

    if (!texts) {
        log_warn("out of memory replacing the cache; keeping it as it was");
        return;
    }
    pthread_mutex_lock(&c->mu);
    old = c->map;
    diff(old, texts, &changed);
    c->map = texts;
    c->synced = true;
    pthread_mutex_unlock(&c->mu);
    strmap_free(old, text_put);
    for (i = 0; i < changed.n; i++) {
        notify(c, changed.v[i]);
        free(changed.v[i]);
    }
    free(changed.v);
}

char **cache_keys(struct cache *c, size_t *n)
{
    struct strmap_iter it;
    const char *key;
    char **keys;
    size_t i = 0;

    pthread_mutex_lock(&c->mu);
    keys = calloc(strmap_size(c->map) + 1, sizeof(*keys));
    strmap_iter_init(&it, c->map);
    while (keys && strmap_iter_next(&it, &key, NULL)) {
        keys[i] = strdup(key);
        if (!keys[i]) {
            cache_keys_free(keys);
            keys = NULL;
            break;
        }
        i++;
    }
    pthread_mutex_unlock(&c->mu);
    if (n)
        *n = keys ? i : 0;
    return keys;
}

void cache_keys_free(char **keys)
{
    size_t i;

    for (i = 0; keys && keys[i]; i++)
        free(keys[i]);
    free(keys);
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
    n = strmap_size(c->map);
    pthread_mutex_unlock(&c->mu);
    return n;
}

bool cache_key_of(const json_t *obj, char *key, size_t cap)
{
    const json_t *md = json_object_get(obj, "metadata");
    const char *ns, *name;
    int n;

    assert(key && cap > 0);
    if (!md)
        md = obj; /* podresd objects carry namespace and name at the top */
    ns = json_string_value(json_object_get(md, "namespace"));
    name = json_string_value(json_object_get(md, "name"));
    if (!name)
        return false;
    n = ns ? snprintf(key, cap, "%s/%s", ns, name) : snprintf(key, cap, "%s", name);
    return n > 0 && (size_t)n < cap;
}
