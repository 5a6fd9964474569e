/* SPDX-License-Identifier: Apache-2.0 */
/* queue.h - the work queue of keys ("namespace/name"): a key waits at most
 * once (adding it again keeps the earlier due time), can be delayed (per-key
 * backoff after a failure), and remembers when it first became dirty (for
 * the sync-lag histogram). Thread-safe. */
#ifndef PODRES_QUEUE_H
#define PODRES_QUEUE_H
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct queue;

struct queue *queue_new(void);    /* new, or NULL */
void queue_free(struct queue *q); /* NULL is a no-op */
/* Add 'key' due in 'delay_ms'. */
void queue_add(struct queue *q, const char *key, uint64_t delay_ms);
/* Wait for a due key (at most 'wait_ms'); copies it into 'key' and removes
 * it. *dirty_ms is when it was first added (clock_mono_ms()). False on
 * timeout or after queue_close(). */
bool queue_get(struct queue *q, char *key, size_t cap, uint64_t *dirty_ms, uint64_t wait_ms);
/* Keys waiting (for /metrics). */
size_t queue_len(struct queue *q);
/* Wake every waiter; queue_get returns false from now on. */
void queue_close(struct queue *q);
/* 'ms' spread uniformly by up to 'pct' percent either way (rand(), seeded
 * once by main): periods of many syncers started together drift apart
 * instead of reaching the API server in step. Thread-safe (glibc's rand
 * takes a lock). */
uint64_t queue_jitter_ms(uint64_t ms, unsigned pct);

#endif
