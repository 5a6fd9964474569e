/* SPDX-License-Identifier: Apache-2.0 */
/* alloc.c - fewest-NUMA-nodes device choice. Groups are NUMA nodes; the
 * search tries every combination of m groups in lexicographic order for m =
 * 1, 2, ... up to 16 groups, and falls back to largest-groups-first beyond
 * that (a machine with more NUMA nodes is rare and the answer stays
 * deterministic). */
#include "../common/common.h"
#include "alloc.h"

#include <assert.h>

#define MAX_EXACT_GROUPS 16

struct group {
    int numa;     /* the NUMA id */
    size_t first; /* index of its first device in the sorted array */
    size_t count; /* devices in it */
};

static int cmp_dev(const void *a, const void *b)
{
    const struct alloc_dev *x = a, *y = b;

    if (x->numa != y->numa)
        return x->numa < y->numa ? -1 : 1;
    return strcmp(x->id, y->id);
}

static size_t make_groups(const struct alloc_dev *devs, size_t n, struct group *g)
{
    size_t i, ng = 0;

    for (i = 0; i < n; i++) {
        if (ng == 0 || g[ng - 1].numa != devs[i].numa) {
            g[ng].numa = devs[i].numa;
            g[ng].first = i;
            g[ng].count = 0;
            ng++;
        }
        g[ng - 1].count++;
    }
    return ng;
}

/* Next m-combination of [0, ng) in lexicographic order; false after the last. */
static bool next_comb(size_t *c, size_t m, size_t ng)
{
    size_t i = m;

    while (i > 0) {
        i--;
        if (c[i] < ng - m + i) {
            c[i]++;
            for (i++; i < m; i++)
                c[i] = c[i - 1] + 1;
            return true;
        }
    }
    return false;
}

/* Find the first combination of fewest groups covering 'want'; mark them. */
static void choose_groups(const struct group *g, size_t ng, size_t want, bool *use)
{
    size_t c[MAX_EXACT_GROUPS], m, i, total;

    for (m = 1; m <= ng; m++) {
        for (i = 0; i < m; i++)
            c[i] = i;
        do {
            total = 0;
            for (i = 0; i < m; i++)
                total += g[c[i]].count;
            if (total >= want) {
                for (i = 0; i < m; i++)
                    use[c[i]] = true;
                return;
            }
        } while (next_comb(c, m, ng));
    }
}

/* Beyond MAX_EXACT_GROUPS: largest groups first, lower NUMA id on ties. */
static void choose_groups_greedy(const struct group *g, size_t ng, size_t want, bool *use)
{
    size_t total = 0, i, best;

    while (total < want) {
        best = ng;
        for (i = 0; i < ng; i++) {
            if (!use[i] && (best == ng || g[i].count > g[best].count))
                best = i;
        }
        use[best] = true;
        total += g[best].count;
    }
}

err_t alloc_choose(struct alloc_dev *devs, size_t n, size_t want, size_t *picked)
{
    struct group *g;
    bool *use;
    size_t ng, i, j, k = 0;

    assert(devs || n == 0);
    assert(picked || want == 0);
    if (want == 0)
        return ERR_OK;
    if (n < want)
        return ERR_CONFLICT;
    qsort(devs, n, sizeof(*devs), cmp_dev);
    g = calloc(n, sizeof(*g));
    use = calloc(n, sizeof(*use));
    if (!g || !use || fault_alloc_fails()) {
        free(g);
        free(use);
        return ERR_NOMEM;
    }
    ng = make_groups(devs, n, g);
    if (ng <= MAX_EXACT_GROUPS)
        choose_groups(g, ng, want, use);
    else
        choose_groups_greedy(g, ng, want, use);
    for (i = 0; i < ng && k < want; i++) {
        if (!use[i])
            continue;
        for (j = 0; j < g[i].count && k < want; j++)
            picked[k++] = g[i].first + j;
    }
    assert(k == want); /* the groups chosen hold 'want' devices */
    free(g);
    free(use);
    return ERR_OK;
}
