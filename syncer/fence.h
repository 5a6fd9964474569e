/* SPDX-License-Identifier: Apache-2.0 */
/* fence.h - stops the worker's writes while another podres-syncer writes
 * the same podresd's reservations (a second copy, a typo in --node-name):
 * two syncers that disagree on the node name remove each other's
 * reservations as made outside a DeviceBinding, thousands of times a
 * second. The reconciler reports the signs; the fence says whether to
 * write, and why not (/readyz). Times are CLOCK_MONOTONIC milliseconds,
 * given by the caller. Once stopped, writes stay stopped until
 * the process restarts: a fence that lifted itself would let the two
 * syncers take turns (each removing the other's reservations), and which
 * one is right is a person's call. A zeroed struct fence is ready; nothing to free. */
#ifndef PODRES_FENCE_H
#define PODRES_FENCE_H
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "../common/err.h"

#define FENCE_LOSSES 5         /* this many reservations lost ... */
#define FENCE_WINDOW_MS 10000  /* ... within this long are a sign */
#define FENCE_RECHECK_MS 60000 /* a key comes back this often while stopped */

/* Lock: the worker writes every field; /readyz reads 'stopped' (atomic) and
 * 'why' (under a lock of fence.c shared by every fence). */
struct fence {
    int stopped;                   /* atomic: 1 once writes stopped */
    bool told;                     /* the Event about it was recorded (reconcile.c) */
    uint64_t losses[FENCE_LOSSES]; /* when the last reservations were lost (a ring) */
    size_t nloss;                  /* losses noted so far */
    char why[400];                 /* the reason once stopped */
};

/* Sign one: a reservation this syncer removed once, as made outside a
 * DeviceBinding, came back, and the DeviceBinding of its name is labelled
 * for node 'other', not 'node': another syncer places it. Writes stop. */
void fence_claimed(struct fence *f, const char *node, const char *other);
/* Sign two, counted: a reservation this syncer placed was gone when it
 * placed it again (someone removed it). FENCE_LOSSES within
 * FENCE_WINDOW_MS stop the writes: true then (once). */
bool fence_lost(struct fence *f, const char *node, uint64_t now_ms);
/* Whether writes are stopped; *left_ms says when to look at a key again.
 * Worker thread. */
bool fence_holds(struct fence *f, uint64_t *left_ms);
/* Whether writes are stopped; when they are, 'why' (or NULL) gets the
 * reason, as ERR_UNAVAIL. Thread-safe. */
bool fence_stopped(struct fence *f, struct error *why);

#endif
