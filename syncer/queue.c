/* SPDX-License-Identifier: Apache-2.0 */
/* queue.c - a map key -> item (strmap.h); the earliest due key is found by
 * a scan, which is fine for the pods of one node. Keys due at the same
 * moment leave in the order they were first added. */
#include "../common/common.h"
#include "../common/clock.h"
#include "../kube/strmap.h"
#include "queue.h"

#include <assert.h>
#include <pthread.h>
#include <time.h>

/* One waiting key. */
struct item {
    uint64_t due_ms;   /* monotonic ms it may leave at */
    uint64_t dirty_ms; /* monotonic ms it was first added */
    uint64_t seq;      /* order of first addition, for keys due together */
};

/* Lock: 'mu' guards every field but 'cond'. */
struct queue {
    pthread_mutex_t mu;
    pthread_cond_t cond; /* signalled on add and close */
    struct strmap *keys; /* key -> struct item */
    uint64_t seq;        /* items added so far */
    bool closed;         /* shutting down */
};

uint64_t queue_jitter_ms(uint64_t ms, unsigned pct)
{
    uint64_t span = ms / 100 * pct + ms % 100 * pct / 100;

    if (!span)
        return ms;
    return ms - span + (uint64_t)rand() % (2 * span + 1);
}

struct queue *queue_new(void)
{
    struct queue *q = calloc(1, sizeof(*q));
    pthread_condattr_t ca;

    if (!q)
        return NULL;
    q->keys = strmap_new();
    if (!q->keys) {
        free(q);
        return NULL;
    }
    pthread_mutex_init(&q->mu, NULL);
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&q->cond, &ca);
    pthread_condattr_destroy(&ca);
    return q;
}

void queue_free(struct queue *q)
{
    if (!q)
        return;
    strmap_free(q->keys, free);
    pthread_cond_destroy(&q->cond);
    pthread_mutex_destroy(&q->mu);
    free(q);
}

/* A new item for 'key', due at 'due'. Out of memory the key is not queued:
 * said, and the next resync queues it again. Under q->mu. */
static void add_new(struct queue *q, const char *key, uint64_t due, uint64_t now)
{
    struct item *it = malloc(sizeof(*it));

    if (it) {
        *it = (struct item){.due_ms = due, .dirty_ms = now, .seq = q->seq++};
        if (!strmap_put(q->keys, key, it, NULL))
            return;
        free(it);
    }
    log_warn("out of memory queueing %s; it waits for the next resync", key);
}

void queue_add(struct queue *q, const char *key, uint64_t delay_ms)
{
    uint64_t t = clock_mono_ms(), due = t + delay_ms;
    struct item *it;

    assert(key);
    pthread_mutex_lock(&q->mu);
    it = strmap_get(q->keys, key);
    if (!it)
        add_new(q, key, due, t);
    else if (it->due_ms > due)
        it->due_ms = due;
    pthread_cond_broadcast(&q->cond);
    pthread_mutex_unlock(&q->mu);
}

/* The key due first (and first added among those due together), or NULL
 * when the queue is empty; borrowed until it is removed. Under q->mu. */
static const char *first_due(struct queue *q, struct item **first)
{
    struct strmap_iter iter;
    const char *k, *pick = NULL;
    struct item *best = NULL;
    void *v;

    strmap_iter_init(&iter, q->keys);
    while (strmap_iter_next(&iter, &k, &v)) {
        struct item *it = v;

        if (!best || it->due_ms < best->due_ms ||
            (it->due_ms == best->due_ms && it->seq < best->seq)) {
            best = it;
            pick = k;
        }
    }
    *first = best;
    return pick;
}

bool queue_get(struct queue *q, char *key, size_t cap, uint64_t *dirty_ms, uint64_t wait_ms)
{
    uint64_t end = clock_mono_ms() + wait_ms, t, until;
    struct item *best;
    const char *pick;
    struct timespec ts;
    bool got = false;

    assert(key && cap > 0);
    pthread_mutex_lock(&q->mu);
    while (!q->closed) {
        t = clock_mono_ms();
        pick = first_due(q, &best);
        if (pick && best->due_ms <= t) {
            str_copy(key, cap, pick);
            *dirty_ms = best->dirty_ms;
            free(strmap_del(q->keys, pick));
            got = true;
            break;
        }
        if (t >= end)
            break;
        until = pick && best->due_ms < end ? best->due_ms : end;
        ts = clock_mono_after(until - t);
        pthread_cond_timedwait(&q->cond, &q->mu, &ts);
    }
    pthread_mutex_unlock(&q->mu);
    return got;
}

size_t queue_len(struct queue *q)
{
    size_t n;

    pthread_mutex_lock(&q->mu);
    n = strmap_size(q->keys);
    pthread_mutex_unlock(&q->mu);
    return n;
}

void queue_close(struct queue *q)
{
    pthread_mutex_lock(&q->mu);
    q->closed = true;
    pthread_cond_broadcast(&q->cond);
    pthread_mutex_unlock(&q->mu);
}
