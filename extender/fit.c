/* SPDX-License-Identifier: Apache-2.0 */
/* fit.c - NUMA-aware choice of free devices on one node. A node has a
 * handful of NUMA nodes and tens of devices: every call groups the free
 * devices afresh, which costs less than keeping groups current. */
#include "../common/common.h"
#include "fit.h"

struct group {
    int numa;    /* NUMA node id, -1: no topology */
    size_t free; /* free devices of the resource in it */
};

/* The free devices of 'res' grouped by NUMA node into 'g'; returns the
 * number of groups and the total free in *total. */
static size_t group_free(const struct fit_dev *devs, size_t n, const char *res, struct group *g,
                         size_t *total)
{
    size_t ng = 0, i, j;

    *total = 0;
    for (i = 0; i < n; i++) {
        if (!devs[i].healthy || devs[i].busy || strcmp(devs[i].res, res) != 0)
            continue;
        for (j = 0; j < ng && g[j].numa != devs[i].numa; j++)
            ;
        if (j == ng && ng < FIT_MAX_GROUPS)
            g[ng++] = (struct group){.numa = devs[i].numa, .free = 0};
        if (j == FIT_MAX_GROUPS)
            j = FIT_MAX_GROUPS - 1;
        g[j].free++;
        (*total)++;
    }
    return ng;
}

/* Fullest first, ties by NUMA id. */
static int by_free_desc(const void *a, const void *b)
{
    const struct group *x = a, *y = b;

    if (x->free != y->free)
        return x->free < y->free ? 1 : -1;
    return (x->numa > y->numa) - (x->numa < y->numa);
}

size_t fit_free(const struct fit_dev *devs, size_t n, const char *res)
{
    size_t i, c = 0;

    for (i = 0; i < n; i++)
        c += devs[i].healthy && !devs[i].busy && strcmp(devs[i].res, res) == 0;
    return c;
}

int fit_numa_needed(const struct fit_dev *devs, size_t n, const char *res, size_t want)
{
    struct group g[FIT_MAX_GROUPS];
    size_t total, ng, k, got = 0;

    if (want == 0)
        return 0;
    ng = group_free(devs, n, res, g, &total);
    if (total < want)
        return -1;
    qsort(g, ng, sizeof(g[0]), by_free_desc);
    for (k = 0; k < ng && got < want; k++)
        got += g[k].free;
    return (int)k;
}

/* The best-fit single group for 'want', or -1 (g sorted fullest first). */
static int best_single(const struct group *g, size_t ng, size_t want)
{
    int best = -1;
    size_t i;

    /* Later entries have fewer free; among equals the first has the lower NUMA id. */
    for (i = 0; i < ng; i++) {
        if (g[i].free >= want && (best < 0 || g[i].free < g[best].free))
            best = (int)i;
    }
    return best;
}

/* Take up to 'want' free devices of 'res' in NUMA node 'numa', in id
 * order (devices are sorted); returns how many were taken. */
static size_t take(struct fit_dev *devs, size_t n, const char *res, int numa, size_t want,
                   size_t *idx)
{
    size_t i, got = 0;

    for (i = 0; i < n && got < want; i++) {
        if (!devs[i].healthy || devs[i].busy || devs[i].numa != numa ||
            strcmp(devs[i].res, res) != 0)
            continue;
        devs[i].busy = true;
        idx[got++] = i;
    }
    return got;
}

bool fit_choose(struct fit_dev *devs, size_t n, const char *res, size_t want, size_t *idx)
{
    struct group g[FIT_MAX_GROUPS];
    size_t total, ng, k, got = 0;
    int one;

    if (want == 0)
        return true;
    ng = group_free(devs, n, res, g, &total);
    if (total < want)
        return false;
    qsort(g, ng, sizeof(g[0]), by_free_desc);
    one = best_single(g, ng, want);
    if (one >= 0)
        return take(devs, n, res, g[one].numa, want, idx) == want;
    for (k = 0; k < ng && got < want; k++)
        got += take(devs, n, res, g[k].numa, want - got, idx + got);
    /* Devices folded into the last group (more than FIT_MAX_GROUPS NUMA
     * nodes) are taken from any node. */
    for (k = 0; k < n && got < want; k++) {
        if (devs[k].healthy && !devs[k].busy && strcmp(devs[k].res, res) == 0) {
            devs[k].busy = true;
            idx[got++] = k;
        }
    }
    return got == want;
}
