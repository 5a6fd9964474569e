/* SPDX-License-Identifier: Apache-2.0 */
/* strmap.h - a map from strings to pointers, the container of the caches
 * (cache.h) and of the syncer's work queue: chained hashing (FNV-1a), the
 * table doubled when it holds as many entries as buckets. Keys are copied;
 * values are the caller's pointers, which the map neither reads nor frees
 * except through the function given to strmap_free. Not thread-safe: its
 * owner locks. Iteration order is the table's, not insertion order. */
#ifndef PODRES_STRMAP_H
#define PODRES_STRMAP_H
#include <stdbool.h>
#include <stddef.h>

#include "../common/err.h"

struct strmap;
struct strmap_entry;

/* New and empty, or NULL if out of memory. */
struct strmap *strmap_new(void);
/* Free the map, and each value with 'free_value' (NULL: the values are
 * left alone). NULL is a no-op. */
void strmap_free(struct strmap *m, void (*free_value)(void *value));

/* The value of 'key', or NULL when absent. */
void *strmap_get(const struct strmap *m, const char *key);
/* Set 'key' to 'value' (not NULL). On ERR_OK *old, when 'old' is not NULL,
 * is the value it replaced (the caller's to free), or NULL for a new key;
 * ERR_NOMEM leaves the map as it was. */
err_t strmap_put(struct strmap *m, const char *key, void *value, void **old) WARN_UNUSED;
/* Remove 'key': its value (the caller's to free), or NULL when absent. */
void *strmap_del(struct strmap *m, const char *key);
size_t strmap_size(const struct strmap *m);

/* A walk over every entry; the map must not change during it, but for
 * strmap_del of the entry just returned. */
struct strmap_iter {
    const struct strmap *m;    /* the map walked; borrowed */
    size_t bucket;             /* the bucket of 'next' */
    struct strmap_entry *next; /* the entry to return next, or NULL */
};

void strmap_iter_init(struct strmap_iter *it, const struct strmap *m);
/* The next entry into *key (borrowed until it is removed) and *value; false
 * after the last. */
bool strmap_iter_next(struct strmap_iter *it, const char **key, void **value);

#endif
