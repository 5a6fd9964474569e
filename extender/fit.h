/* SPDX-License-Identifier: Apache-2.0 */
/* fit.h - which devices of one node suit a request: how many are free, how
 * many NUMA nodes a request of n needs, and which n to take. Pure functions
 * over an array of devices; no locks, no I/O (the view holds the lock). */
#ifndef PODRES_FIT_H
#define PODRES_FIT_H
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* One device of a node's inventory. */
struct fit_dev {
    char *res;    /* extended resource name, e.g. nvidia.com/gpu; owned by the node */
    char *id;     /* device id; owned by the node */
    char *key;    /* "res\nid", the key of the taken map; owned by the node */
    int numa;     /* the lowest NUMA node id of its topology, -1 when it has none */
    bool healthy; /* health is Healthy */
    bool busy;    /* held, pre-assigned or assumed (the view keeps it current) */
};

/* The most NUMA groups fit tells apart; devices of further NUMA nodes count
 * as the last group. */
#define FIT_MAX_GROUPS 64

/* Free (healthy, not busy) devices of 'res' among 'devs'. */
size_t fit_free(const struct fit_dev *devs, size_t n, const char *res);
/* How many NUMA nodes a request of 'want' devices of 'res' spans at best
 * (devices without topology are one group of their own): 0 for want == 0,
 * -1 when fewer than 'want' are free. */
int fit_numa_needed(const struct fit_dev *devs, size_t n, const char *res, size_t want);
/* Choose 'want' free devices of 'res' spanning the fewest NUMA nodes and
 * mark them busy; their indexes go to 'idx' (room for 'want'). Within the
 * fewest: one NUMA node that holds them all is the one with the fewest free
 * devices (best fit, ties by NUMA id); otherwise the fullest NUMA nodes
 * first; in a NUMA node, devices in id order. False (nothing marked) when
 * fewer than 'want' are free. */
bool fit_choose(struct fit_dev *devs, size_t n, const char *res, size_t want, size_t *idx);

#endif
