/* SPDX-License-Identifier: Apache-2.0 */
/* cache.h - a thread-safe map "namespace/name" -> JSON object, the local copy
 * an informer or the podresd feed keeps. Objects are stored as compact text
 * (a copy: the caller keeps its object) and read back as new objects the
 * caller owns. A cache says whether its first full list has arrived
 * ("synced"). */
#ifndef PODRES_CACHE_H
#define PODRES_CACHE_H
#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct cache;

/* Called with each key whose object was added, changed or removed. */
typedef void (*cache_notify_fn)(void *ctx, const char *key);

/* New, or NULL. 'fn' (may be NULL) is called outside the lock. */
struct cache *cache_new(cache_notify_fn fn, void *ctx);
void cache_free(struct cache *c); /* NULL is a no-op */

/* Store a copy of 'obj' (borrowed) under 'key'. When 'newer_only' and both
 * carry a numeric metadata.resourceVersion, an older one is ignored.
 * Notifies when the stored object changed (json_equal's sense). */
void cache_set(struct cache *c, const char *key, json_t *obj, bool newer_only);
void cache_del(struct cache *c, const char *key);
/* A new object, equal to the stored one and the caller's to change and
 * json_decref; NULL when absent. */
json_t *cache_get(struct cache *c, const char *key);
/* Replace everything by 'all' (an object key -> obj; borrowed); notifies for
 * each difference; marks the cache synced. Out of memory, the cache stays
 * as it was (said at warn). */
void cache_replace(struct cache *c, json_t *all);
/* The keys held now: a new NULL-terminated array of new strings (free with
 * cache_keys_free), in no particular order; *n, when 'n' is not NULL, is
 * their count. NULL if out of memory. */
char **cache_keys(struct cache *c, size_t *n);
void cache_keys_free(char **keys); /* NULL is a no-op */
bool cache_synced(struct cache *c);
size_t cache_size(struct cache *c);

/* "namespace/name" of a Kubernetes object or a podresd object into 'key'
 * ('cap' > 0 bytes); "name" of a cluster-scoped object (no namespace).
 * False when 'obj' has no name, or the key does not fit. */
bool cache_key_of(const json_t *obj, char *key, size_t cap);

#endif
