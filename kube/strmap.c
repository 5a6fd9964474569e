/* SPDX-License-Identifier: Apache-2.0 */
/* strmap.c - chained hash map of strings (strmap.h). Each entry is one
 * allocation holding its key; the table never shrinks (a node's keys come
 * back after a relist). */
#include "../common/common.h"
#include "strmap.h"

#include <assert.h>

#define MIN_BUCKETS 16 /* a power of two */

struct strmap_entry {
    struct strmap_entry *next; /* in the same bucket */
    size_t hash;               /* of 'key' */
    void *value;               /* the caller's */
    char key[];                /* NUL-terminated */
};

struct strmap {
    struct strmap_entry **buckets; /* 'nbuckets' chains */
    size_t nbuckets;               /* a power of two */
    size_t n;                      /* entries */
};

static size_t hash_of(const char *s)
{
    size_t h = (size_t)14695981039346656037ull;

    for (; *s; s++)
        h = (h ^ (unsigned char)*s) * (size_t)1099511628211ull;
    return h;
}

struct strmap *strmap_new(void)
{
    struct strmap *m = calloc(1, sizeof(*m));

    if (!m)
        return NULL;
    m->buckets = calloc(MIN_BUCKETS, sizeof(*m->buckets));
    if (!m->buckets) {
        free(m);
        return NULL;
    }
    m->nbuckets = MIN_BUCKETS;
    return m;
}

void strmap_free(struct strmap *m, void (*free_value)(void *value))
{
    struct strmap_entry *e, *next;
    size_t i;

    if (!m)
        return;
    for (i = 0; i < m->nbuckets; i++) {
        for (e = m->buckets[i]; e; e = next) {
            next = e->next;
            if (free_value)
                free_value(e->value);
            free(e);
        }
    }
    free(m->buckets);
    free(m);
}

/* The link that points at the entry of 'key' (or at NULL, the end of its
 * chain, when absent). */
static struct strmap_entry **slot_of(const struct strmap *m, const char *key, size_t hash)
{
    struct strmap_entry **p = &m->buckets[hash & (m->nbuckets - 1)];

    while (*p && ((*p)->hash != hash || strcmp((*p)->key, key) != 0))
        p = &(*p)->next;
    return p;
}

void *strmap_get(const struct strmap *m, const char *key)
{
    struct strmap_entry *e = *slot_of(m, key, hash_of(key));

    return e ? e->value : NULL;
}

/* Twice the buckets; out of memory, the chains just grow longer. */
static void grow(struct strmap *m)
{
    size_t n = m->nbuckets * 2, i;
    struct strmap_entry **b = calloc(n, sizeof(*b)), *e, *next;

    if (!b)
        return;
    for (i = 0; i < m->nbuckets; i++) {
        for (e = m->buckets[i]; e; e = next) {
            next = e->next;
            e->next = b[e->hash & (n - 1)];
            b[e->hash & (n - 1)] = e;
        }
    }
    free(m->buckets);
    m->buckets = b;
    m->nbuckets = n;
}

err_t strmap_put(struct strmap *m, const char *key, void *value, void **old)
{
    size_t hash = hash_of(key), len;
    struct strmap_entry **p = slot_of(m, key, hash), *e = *p;

    assert(value);
    if (e) {
        if (old)
            *old = e->value;
        e->value = value;
        return ERR_OK;
    }
    len = strlen(key);
    e = fault_alloc_fails() ? NULL : malloc(sizeof(*e) + len + 1);
    if (!e)
        return ERR_NOMEM;
    e->next = NULL;
    e->hash = hash;
    e->value = value;
    memcpy(e->key, key, len + 1);
    *p = e;
    m->n++;
    if (old)
        *old = NULL;
    if (m->n > m->nbuckets)
        grow(m);
    return ERR_OK;
}

void *strmap_del(struct strmap *m, const char *key)
{
    struct strmap_entry **p = slot_of(m, key, hash_of(key)), *e = *p;
    void *value;

    if (!e)
        return NULL;
    *p = e->next;
    value = e->value;
    free(e);
    assert(m->n > 0);
    m->n--;
    return value;
}

size_t strmap_size(const struct strmap *m)
{
    return m->n;
}

/* The first entry at or after bucket 'it->bucket' into it->next. */
static void settle(struct strmap_iter *it)
{
    while (!it->next && it->bucket + 1 < it->m->nbuckets)
        it->next = it->m->buckets[++it->bucket];
}

void strmap_iter_init(struct strmap_iter *it, const struct strmap *m)
{
    it->m = m;
    it->bucket = 0;
    it->next = m->buckets[0];
    settle(it);
}

bool strmap_iter_next(struct strmap_iter *it, const char **key, void **value)
{
    struct strmap_entry *e = it->next;

    if (!e)
        return false;
    it->next = e->next;
    settle(it);
    *key = e->key;
    if (value)
        *value = e->value;
    return true;
}
