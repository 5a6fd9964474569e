/* SPDX-License-Identifier: Apache-2.0 */
/* fence.c - the two signs of another syncer on this podresd, and the hold
 * they put on the writes. */
#define LOG_MOD "fence"
#include "../common/common.h"
#include "fence.h"

#include <pthread.h>

static pthread_mutex_t why_mu = PTHREAD_MUTEX_INITIALIZER; /* guards every fence's 'why' */

/* Stop writing for good with reason 'why', said once. */
static void stop(struct fence *f, const char *why)
{
    if (__atomic_load_n(&f->stopped, __ATOMIC_ACQUIRE))
        return;
    pthread_mutex_lock(&why_mu);
    snprintf(f->why, sizeof(f->why), "%s", why);
    pthread_mutex_unlock(&why_mu);
    __atomic_store_n(&f->stopped, 1, __ATOMIC_RELEASE);
    log_err("%s; stop the other podres-syncer (or fix its --node-name), then restart this one",
            why);
}

void fence_claimed(struct fence *f, const char *node, const char *other)
{
    char why[400];

    snprintf(why, sizeof(why),
             "another podres-syncer writes this podresd's reservations (node '%.100s'; this one "
             "is node '%.100s'); stopped writing until restarted",
             other, node);
    stop(f, why);
}

bool fence_lost(struct fence *f, const char *node, uint64_t now_ms)
{
    char why[400];
    uint64_t oldest;

    if (__atomic_load_n(&f->stopped, __ATOMIC_ACQUIRE))
        return false;
    f->losses[f->nloss++ % FENCE_LOSSES] = now_ms;
    if (f->nloss < FENCE_LOSSES)
        return false;
    oldest = f->losses[f->nloss % FENCE_LOSSES]; /* the FENCE_LOSSES-th last */
    if (now_ms - oldest > FENCE_WINDOW_MS)
        return false;
    snprintf(why, sizeof(why),
             "another podres-syncer writes this podresd's reservations (node '%.100s': %d of "
             "its reservations removed by someone else within %d s); stopped writing until "
             "restarted",
             node, FENCE_LOSSES, FENCE_WINDOW_MS / 1000);
    stop(f, why);
    return true;
}

bool fence_holds(struct fence *f, uint64_t *left_ms)
{
    *left_ms = 0;
    if (!__atomic_load_n(&f->stopped, __ATOMIC_ACQUIRE))
        return false;
    *left_ms = FENCE_RECHECK_MS;
    return true;
}

bool fence_stopped(struct fence *f, struct error *why)
{
    if (!__atomic_load_n(&f->stopped, __ATOMIC_ACQUIRE))
        return false;
    if (!why)
        return true;
    pthread_mutex_lock(&why_mu);
    errorf(why, ERR_UNAVAIL, "%s", f->why);
    pthread_mutex_unlock(&why_mu);
    return true;
}
