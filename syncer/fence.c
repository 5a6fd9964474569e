/* SPDX-License-Identifier: Apache-2.0 */
/* fence.c - the two signs of another syncer on this podresd, and the hold
 * they put on the writes. */
#define LOG_MOD "fence"
#include "../common/common.h"
#include "fence.h"

#include <pthread.h>

static pthread_mutex_t why_mu = PTHREAD_MUTEX_INITIALIZER; /* guards every fence's 'why' */

/* Stop writing for FENCE_HOLD_MS with reason 'why'; warn, unless warned
 * less than FENCE_LOG_MS ago (a fight that goes on stops the writes again
 * after each hold, said once). */
static void stop(struct fence *f, const char *why, uint64_t now_ms)
{
    pthread_mutex_lock(&why_mu);
    snprintf(f->why, sizeof(f->why), "%s", why);
    pthread_mutex_unlock(&why_mu);
    __atomic_store_n(&f->until_ms, now_ms + FENCE_HOLD_MS, __ATOMIC_RELEASE);
    f->nloss = 0;
    if (!f->logged_ms || now_ms - f->logged_ms >= FENCE_LOG_MS) {
        f->logged_ms = now_ms ? now_ms : 1;
        log_warn("%s; writing again in %d s if no sign of it remains", why, FENCE_HOLD_MS / 1000);
    } else {
        log_debug("%s (again)", why);
    }
}

void fence_claimed(struct fence *f, const char *node, const char *other, uint64_t now_ms)
{
    char why[320];

    snprintf(why, sizeof(why),
             "another podres-syncer writes this podresd's reservations (node '%.100s'; this one "
             "is node '%.100s'); stopped writing",
             other, node);
    stop(f, why, now_ms);
}

bool fence_lost(struct fence *f, const char *node, uint64_t now_ms)
{
    char why[320];
    uint64_t oldest;

    f->losses[f->nloss++ % FENCE_LOSSES] = now_ms;
    if (f->nloss < FENCE_LOSSES)
        return false;
    oldest = f->losses[f->nloss % FENCE_LOSSES]; /* the FENCE_LOSSES-th last */
    if (now_ms - oldest > FENCE_WINDOW_MS)
        return false;
    snprintf(why, sizeof(why),
             "another podres-syncer writes this podresd's reservations (node '%.100s': %d of "
             "its reservations removed by someone else within %d s); stopped writing",
             node, FENCE_LOSSES, FENCE_WINDOW_MS / 1000);
    stop(f, why, now_ms);
    return true;
}

bool fence_holds(struct fence *f, uint64_t now_ms, uint64_t *left_ms)
{
    uint64_t until = __atomic_load_n(&f->until_ms, __ATOMIC_ACQUIRE);

    *left_ms = 0;
    if (!until)
        return false;
    if (now_ms >= until) {
        __atomic_store_n(&f->until_ms, 0, __ATOMIC_RELEASE);
        log_debug("no sign of another podres-syncer for %d s; writing again", FENCE_HOLD_MS / 1000);
        return false;
    }
    *left_ms = until - now_ms;
    return true;
}

bool fence_stopped(struct fence *f, uint64_t now_ms, struct error *why)
{
    uint64_t until = __atomic_load_n(&f->until_ms, __ATOMIC_ACQUIRE);

    if (!until || now_ms >= until)
        return false;
    if (!why)
        return true;
    pthread_mutex_lock(&why_mu);
    errorf(why, ERR_UNAVAIL, "%s", f->why);
    pthread_mutex_unlock(&why_mu);
    return true;
}
