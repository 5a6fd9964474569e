/* SPDX-License-Identifier: Apache-2.0 */
/* queue.c - a jansson object key -> [due_ms, dirty_ms]; the earliest due key
 * is found by a scan, which is fine for the pods of one node. */
#include "../common/common.h"
#include "../common/clock.h"
#include "queue.h"

#include <jansson.h>
#include <pthread.h>
#include <time.h>

/* Lock: 'mu' guards 'keys' and 'closed'. */
struct queue {
    pthread_mutex_t mu;
    pthread_cond_t cond; /* signalled on add and close */
    json_t *keys;        /* key -> [due_ms, dirty_ms] */
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
    q->keys = json_object();
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
    json_decref(q->keys);
    pthread_cond_destroy(&q->cond);
    pthread_mutex_destroy(&q->mu);
    free(q);
}

void queue_add(struct queue *q, const char *key, uint64_t delay_ms)
{
    uint64_t t = clock_mono_ms(), due = t + delay_ms;
    json_t *e;

    pthread_mutex_lock(&q->mu);
    e = json_object_get(q->keys, key);
    if (!e) {
        json_object_set_new(q->keys, key, json_pack("[I,I]", (json_int_t)due, (json_int_t)t));
    } else if ((uint64_t)json_integer_value(json_array_get(e, 0)) > due) {
        json_array_set_new(e, 0, json_integer((json_int_t)due));
    }
    pthread_cond_broadcast(&q->cond);
    pthread_mutex_unlock(&q->mu);
}

bool queue_get(struct queue *q, char *key, size_t cap, uint64_t *dirty_ms, uint64_t wait_ms)
{
    uint64_t end = clock_mono_ms() + wait_ms, best, t, due;
    const char *k, *pick;
    json_t *e;
    struct timespec ts;
    bool got = false;

    pthread_mutex_lock(&q->mu);
    while (!q->closed) {
        t = clock_mono_ms();
        pick = NULL;
        best = UINT64_MAX;
        json_object_foreach(q->keys, k, e) {
            due = (uint64_t)json_integer_value(json_array_get(e, 0));
            if (due < best) {
                best = due;
                pick = k;
            }
        }
        if (pick && best <= t) {
            snprintf(key, cap, "%s", pick);
            e = json_object_get(q->keys, pick);
            *dirty_ms = (uint64_t)json_integer_value(json_array_get(e, 1));
            json_object_del(q->keys, pick);
            got = true;
            break;
        }
        if (t >= end)
            break;
        due = best < end ? best : end;
        ts = clock_mono_after(due - t);
        pthread_cond_timedwait(&q->cond, &q->mu, &ts);
    }
    pthread_mutex_unlock(&q->mu);
    return got;
}

size_t queue_len(struct queue *q)
{
    size_t n;

    pthread_mutex_lock(&q->mu);
    n = json_object_size(q->keys);
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
