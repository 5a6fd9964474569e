/* SPDX-License-Identifier: Apache-2.0 */
/* fence.h - stops the worker's writes while another podres-syncer writes
 * the same podresd's reservations (a second copy, a typo in --node-name):
 * two syncers that disagree on the node name remove each other's
 * reservations as made outside a DeviceBinding, thousands of times a
 * second. The reconciler reports the signs; the fence says whether to
 * write, and why not (/readyz). Times are CLOCK_MONOTONIC milliseconds,
 * given by the caller. A zeroed struct fence is ready; nothing to free. */
#ifndef PODRES_FENCE_H
#define PODRES_FENCE_H
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "../common/err.h"

#define FENCE_HOLD_MS 30000   /* writes stop this long after a sign */
#define FENCE_LOSSES 5        /* this many reservations lost ... */
#define FENCE_WINDOW_MS 10000 /* ... within this long are a sign */
#define FENCE_LOG_MS 600000   /* the warning comes again after this long */

/* Lock: the worker writes every field; /readyz reads 'until_ms' (atomic)
 * and 'why' (under a lock of fence.c shared by every fence). */
struct fence {
    uint64_t until_ms;             /* writes stopped until then; 0: writing */
    uint64_t logged_ms;            /* when the warning was last logged; 0: never */
    uint64_t losses[FENCE_LOSSES]; /* when the last reservations were lost (a ring) */
    size_t nloss;                  /* losses noted since the last stop */
    char why[320];                 /* the reason while stopped */
};

/* Sign one: a reservation this syncer removed once, as made outside a
 * DeviceBinding, came back, and the DeviceBinding of its name is labelled
 * for node 'other', not 'node': another syncer places it. Writes stop. */
void fence_claimed(struct fence *f, const char *node, const char *other, uint64_t now_ms);
/* Sign two, counted: a reservation this syncer placed was gone when it
 * placed it again (someone removed it). FENCE_LOSSES within
 * FENCE_WINDOW_MS stop the writes: true then. */
bool fence_lost(struct fence *f, const char *node, uint64_t now_ms);
/* Whether writes are stopped at 'now_ms'; *left_ms says for how long more.
 * Worker thread. */
bool fence_holds(struct fence *f, uint64_t now_ms, uint64_t *left_ms);
/* Whether writes are stopped; when they are, 'why' (or NULL) gets the
 * reason, as ERR_UNAVAIL. Thread-safe. */
bool fence_stopped(struct fence *f, uint64_t now_ms, struct error *why);

#endif
