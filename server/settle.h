/* SPDX-License-Identifier: Apache-2.0 */
/* settle.h - what a kubelet that is coming back does not say yet. Right
 * after a restart the real kubelet answers before it knows everything
 * again: for a while its GetAllocatableResources lacks the resources whose
 * device plugins have not registered again, and its first Lists may leave
 * out a running pod's devices, or the pod. Taken at its word, podresd would
 * close the pod's interval and open a new one a moment later: a release and
 * a re-take that never happened. So after a failed poll, or when the
 * allocatable answer lists no device where the last one listed some (a
 * restart the polls did not see), the kubelet's snapshots are settled for
 * SETTLE_MS: a pod of the last stored snapshot holding devices that a new
 * one leaves out, or lists with fewer devices, is kept as it was, and so
 * are the devices of a resource the new allocatable answer lacks; another
 * failure within the window starts it over. After the window the kubelet's
 * word holds again: a pod deleted meanwhile is released then. The poll
 * thread's alone; no locking. */
#ifndef PODRES_SETTLE_H
#define PODRES_SETTLE_H
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <jansson.h>

#include "../common/err.h"

#define SETTLE_MS 30000 /* the longest a restarted kubelet's gaps are bridged */

struct settle {
    json_t *prev;      /* the last snapshot stored, settled; NULL before the first */
    uint64_t until_ms; /* settling until then (CLOCK_MONOTONIC ms); 0: not settling */
    bool failed;       /* a poll failed since the last snapshot was settled */
};

/* Counts of one settle_apply(). */
struct settle_held {
    size_t pods;    /* pods kept as they were */
    size_t devices; /* allocatable devices kept */
    bool started;   /* this snapshot opened the window */
};

/* A poll failed: the next snapshot opens a window. */
void settle_failed(struct settle *s);
/* Settle 'snap' (source_kubelet_decode()'s shape) in place at time 'now_ms':
 * open or close the window, and while it is open carry over from the last
 * stored snapshot what 'snap' lacks; 'held' says what. ERR_NOMEM leaves
 * 'snap' as it was. */
err_t settle_apply(struct settle *s, json_t *snap, uint64_t now_ms,
                   struct settle_held *held) WARN_UNUSED;
/* 'snap' (settled) was stored: it is the one the next is compared with. */
void settle_stored(struct settle *s, json_t *snap);
/* Whether a window is open: an unchanged kubelet answer must still be
 * stored, since the window's end changes what is wanted. */
bool settle_active(const struct settle *s);
void settle_free(struct settle *s);

#endif
