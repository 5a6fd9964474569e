/* SPDX-License-Identifier: Apache-2.0 */
/* rest_gate.c - the gate every request of the process passes (rest.h): a
 * token bucket (--qps, --burst) and one backoff for all clients, which
 * failures extend (doubling, with jitter) and Retry-After sets, said once
 * when it starts and once when it ends. It sends nothing itself. */
#define LOG_MOD "kube"
#include "../common/common.h"
#include "../common/clock.h"
#include "rest_int.h"

#include <assert.h>
#include <pthread.h>
#include <time.h>

#define BACKOFF_MIN_MS 200   /* first backoff after a failure */
#define BACKOFF_MAX_MS 30000 /* backoff ceiling */
#define SLICE_MS 50          /* sleeps are cut in slices to notice a stop */

/* Lock: 'mu' guards every field. */
struct rest_gate {
    pthread_mutex_t mu;
    double qps;             /* tokens per second; <= 0: unlimited */
    double burst;           /* bucket size */
    double tokens;          /* available now */
    uint64_t refilled_ms;   /* last refill */
    uint64_t not_before_ms; /* no request before this (backoff, Retry-After) */
    uint64_t backoff_ms;    /* current backoff; 0 while healthy */
    bool failing;           /* logged the failure already */
    const char *peer;       /* who, in the log: "Kubernetes API server", "podresd" */
    volatile int stopped;   /* shutdown */
};

struct rest_gate *rest_gate_new(double qps, int burst)
{
    struct rest_gate *g = calloc(1, sizeof(*g));

    if (!g)
        return NULL;
    pthread_mutex_init(&g->mu, NULL);
    g->qps = qps;
    g->burst = burst > 0 ? burst : 1;
    g->tokens = g->burst;
    g->refilled_ms = clock_mono_ms();
    g->peer = "Kubernetes API server";
    return g;
}

void rest_gate_name(struct rest_gate *g, const char *peer)
{
    assert(g && peer);
    g->peer = peer;
}

void rest_gate_free(struct rest_gate *g)
{
    if (!g)
        return;
    pthread_mutex_destroy(&g->mu);
    free(g);
}

void rest_gate_stop(struct rest_gate *g)
{
    assert(g);
    __atomic_store_n(&g->stopped, 1, __ATOMIC_RELEASE);
}

bool rest_gate_stopped(struct rest_gate *g)
{
    return g && __atomic_load_n(&g->stopped, __ATOMIC_ACQUIRE);
}

bool rest_gate_sleep(struct rest_gate *g, uint64_t ms)
{
    uint64_t end = clock_mono_ms() + ms, t;
    struct timespec ts;

    while (!rest_gate_stopped(g)) {
        t = clock_mono_ms();
        if (t >= end)
            return true;
        t = end - t < SLICE_MS ? end - t : SLICE_MS;
        ts.tv_sec = 0;
        ts.tv_nsec = (long)t * 1000000;
        nanosleep(&ts, NULL);
    }
    return false;
}

/* How long to wait before the next request may go; takes a token when 0. */
static uint64_t gate_try(struct rest_gate *g)
{
    uint64_t t = clock_mono_ms(), wait = 0;

    pthread_mutex_lock(&g->mu);
    if (t < g->not_before_ms) {
        wait = g->not_before_ms - t;
    } else if (g->qps > 0) {
        g->tokens += (double)(t - g->refilled_ms) * g->qps / 1000.0;
        if (g->tokens > g->burst)
            g->tokens = g->burst;
        g->refilled_ms = t;
        if (g->tokens >= 1.0)
            g->tokens -= 1.0;
        else
            wait = (uint64_t)((1.0 - g->tokens) * 1000.0 / g->qps) + 1;
    }
    pthread_mutex_unlock(&g->mu);
    return wait;
}

bool rest_gate_wait(struct rest_gate *g)
{
    uint64_t wait;

    if (!g)
        return true;
    for (;;) {
        if (rest_gate_stopped(g))
            return false;
        wait = gate_try(g);
        if (wait == 0)
            return true;
        if (!rest_gate_sleep(g, wait))
            return false;
    }
}

void rest_gate_failed(struct rest_gate *g, uint64_t retry_after_ms, const char *what)
{
    uint64_t t = clock_mono_ms(), delay;
    bool first;

    if (!g)
        return;
    pthread_mutex_lock(&g->mu);
    if (retry_after_ms) {
        /* The server said when: wait exactly that, without escalating. */
        delay = retry_after_ms;
    } else {
        g->backoff_ms = g->backoff_ms ? g->backoff_ms * 2 : BACKOFF_MIN_MS;
        if (g->backoff_ms > BACKOFF_MAX_MS)
            g->backoff_ms = BACKOFF_MAX_MS;
        delay = g->backoff_ms / 2 + (uint64_t)rand() % (g->backoff_ms / 2 + 1);
    }
    if (t + delay > g->not_before_ms)
        g->not_before_ms = t + delay;
    first = !g->failing;
    g->failing = true;
    pthread_mutex_unlock(&g->mu);
    if (first)
        log_warn("%s unavailable (%s); backing off", g->peer, what);
}

void rest_gate_ok(struct rest_gate *g)
{
    bool was;

    if (!g)
        return;
    pthread_mutex_lock(&g->mu);
    was = g->failing;
    g->failing = false;
    g->backoff_ms = 0;
    pthread_mutex_unlock(&g->mu);
    if (was)
        log_info("%s reachable again", g->peer);
}
