/* SPDX-License-Identifier: Apache-2.0 */
/* alloc.h - device choice for allocate: pure functions, no I/O, no locks.
 * The caller passes only candidate devices (healthy, free, not reserved for
 * another pod) of one resource. */
#ifndef PODRES_ALLOC_H
#define PODRES_ALLOC_H
#include <limits.h>
#include <stddef.h>

#include "../common/err.h"

#define ALLOC_NO_NUMA INT_MAX /* a device without topology sorts after all NUMA nodes */

struct alloc_dev {
    const char *id; /* device id; borrowed */
    int numa;       /* lowest NUMA node id, or ALLOC_NO_NUMA */
};

/* Choose 'want' of the 'n' devices, spanning the fewest NUMA nodes; among
 * equal spans the set of NUMA ids that sorts first, then device ids in
 * order. 'devs' is sorted in place by (numa, id). On ERR_OK picked[0..want)
 * holds indices into the sorted 'devs'. ERR_CONFLICT when n < want. */
err_t alloc_choose(struct alloc_dev *devs, size_t n, size_t want, size_t *picked) WARN_UNUSED;

#endif
