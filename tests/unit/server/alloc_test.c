/* SPDX-License-Identifier: Apache-2.0 */
/* alloc_test.c - NUMA-aware device choice through alloc.h. */
#include "../../../common/common.h"
#include "../../../server/alloc.h"
#include "../test.h"

#define MAXD 64

/* Run alloc_choose and write the chosen ids as "a,b,c" into 'out'. */
static err_t pick(struct alloc_dev *devs, size_t n, size_t want, char *out, size_t cap)
{
    size_t picked[MAXD], i, len = 0;
    err_t rc;

    out[0] = '\0';
    for (i = 0; i < MAXD; i++)
        picked[i] = (size_t)-1;
    rc = alloc_choose(devs, n, want, picked);
    for (i = 0; !rc && i < want; i++) {
        if (picked[i] >= n) {
            snprintf(out, cap, "bad index");
            return ERR_DB;
        }
        len += (size_t)snprintf(out + len, cap - len, "%s%s", i ? "," : "", devs[picked[i]].id);
    }
    return rc;
}

static void test_fewest_numa(void)
{
    /* node 0 has 1 free device, node 1 has 2: want 2 -> both from node 1 */
    struct alloc_dev d[] = {{"a", 0}, {"b", 1}, {"c", 1}};
    /* want 3 of nodes with 1, 2, 3 free -> node 2 alone */
    struct alloc_dev e[] = {{"n0", 0}, {"n1a", 1}, {"n1b", 1}, {"n2a", 2}, {"n2b", 2}, {"n2c", 2}};
    /* want 4: no single node; pairs (0,1)=3, (0,2)=4 -> nodes 0 and 2 */
    struct alloc_dev f[] = {{"a", 0}, {"b", 0}, {"c", 1}, {"d", 2}, {"e", 2}};
    char s[256];

    CHECK_OK(pick(d, 3, 2, s, sizeof(s)));
    CHECK_STREQ(s, "b,c");
    CHECK_OK(pick(e, 6, 3, s, sizeof(s)));
    CHECK_STREQ(s, "n2a,n2b,n2c");
    CHECK_OK(pick(f, 5, 4, s, sizeof(s)));
    CHECK_STREQ(s, "a,b,d,e");
}

static void test_ties(void)
{
    /* two nodes each with enough: the lower NUMA id wins, then lower ids */
    struct alloc_dev d[] = {{"gpu-3", 1}, {"gpu-2", 1}, {"gpu-1", 0}, {"gpu-0", 0}, {"gpu-4", 0}};
    /* same NUMA node: device ids in order */
    struct alloc_dev e[] = {{"z", 3}, {"m", 3}, {"a", 3}};
    /* want 3 spanning 2 nodes of 3 with 2 each: nodes {0,1} */
    struct alloc_dev f[] = {{"c1", 2}, {"c0", 2}, {"b1", 1}, {"b0", 1}, {"a1", 0}, {"a0", 0}};
    char s[256];

    CHECK_OK(pick(d, 5, 2, s, sizeof(s)));
    CHECK_STREQ(s, "gpu-0,gpu-1");
    CHECK_OK(pick(e, 3, 2, s, sizeof(s)));
    CHECK_STREQ(s, "a,m");
    CHECK_OK(pick(f, 6, 3, s, sizeof(s)));
    CHECK_STREQ(s, "a0,a1,b0");
    /* 'devs' is sorted in place by (numa, id) */
    CHECK_STREQ(f[0].id, "a0");
    CHECK_STREQ(f[5].id, "c1");
}

static void test_no_topology(void)
{
    struct alloc_dev d[] = {{"x", ALLOC_NO_NUMA}, {"y", 1}, {"a", ALLOC_NO_NUMA}};
    struct alloc_dev e[] = {{"x", ALLOC_NO_NUMA}, {"y", 1}, {"w", 1}, {"a", ALLOC_NO_NUMA}};
    char s[256];

    CHECK_OK(pick(d, 3, 1, s, sizeof(s)));
    CHECK_STREQ(s, "y");
    CHECK_STREQ(d[2].id, "x"); /* without topology sorts last */
    CHECK_STREQ(d[1].id, "a");
    CHECK_OK(pick(d, 3, 3, s, sizeof(s)));
    CHECK_STREQ(s, "y,a,x");
    CHECK_OK(pick(e, 4, 2, s, sizeof(s)));
    CHECK_STREQ(s, "w,y");
}

static void test_not_enough_and_zero(void)
{
    struct alloc_dev d[] = {{"a", 0}, {"b", 1}};
    size_t picked[4] = {9, 9, 9, 9};

    CHECK_EQ_INT(alloc_choose(d, 2, 3, picked), ERR_CONFLICT);
    CHECK_EQ_INT(alloc_choose(d, 0, 1, picked), ERR_CONFLICT);
    CHECK_OK(alloc_choose(d, 2, 0, picked));
    CHECK_OK(alloc_choose(NULL, 0, 0, picked));
    CHECK_EQ_INT(picked[0], 9);
    CHECK_OK(alloc_choose(d, 2, 2, picked));
    CHECK(picked[0] != picked[1] && picked[0] < 2 && picked[1] < 2);
}

static void test_deterministic(void)
{
    static const int numa[] = {3, 0, 2, 1, 0, 3, 2, 1, 0, ALLOC_NO_NUMA, 1};
    struct alloc_dev d[11];
    char ids[11][8], first[256] = "", s[256];
    unsigned seed = 12345;
    size_t i, j, round;

    for (i = 0; i < 11; i++) {
        snprintf(ids[i], sizeof(ids[i]), "d%02zu", i);
        d[i].id = ids[i];
        d[i].numa = numa[i];
    }
    for (round = 0; round < 20; round++) {
        /* shuffle */
        for (i = 10; i > 0; i--) {
            struct alloc_dev t;

            seed = seed * 1103515245u + 12345u;
            j = (seed >> 16) % (i + 1);
            t = d[i];
            d[i] = d[j];
            d[j] = t;
        }
        CHECK_OK(pick(d, 11, 4, s, sizeof(s)));
        if (round == 0)
            snprintf(first, sizeof(first), "%s", s);
        else if (strcmp(first, s) != 0)
            CHECK_STREQ(s, first);
    }
    /* node 0 has 3 (d01,d04,d08), node 1 3 (d03,d07,d10): want 4 -> pairs; (0,1) first */
    CHECK_STREQ(first, "d01,d04,d08,d03");
}

static void test_many_groups(void)
{
    struct alloc_dev d[24];
    char ids[24][8], s[256];
    size_t i;

    /* 20 NUMA nodes with one device each, node 19 with four more: want 4 -> node 19 */
    for (i = 0; i < 20; i++) {
        snprintf(ids[i], sizeof(ids[i]), "n%02zu", i);
        d[i].id = ids[i];
        d[i].numa = (int)i;
    }
    for (i = 20; i < 24; i++) {
        snprintf(ids[i], sizeof(ids[i]), "x%02zu", i);
        d[i].id = ids[i];
        d[i].numa = 19;
    }
    CHECK_OK(pick(d, 24, 4, s, sizeof(s)));
    CHECK_STREQ(s, "n19,x20,x21,x22");
    /* 20 nodes, 1 device each: want 3 -> the three lowest nodes */
    for (i = 0; i < 20; i++) {
        d[i].id = ids[19 - i];
        d[i].numa = 19 - (int)i;
    }
    CHECK_OK(pick(d, 20, 3, s, sizeof(s)));
    CHECK_STREQ(s, "n00,n01,n02");
    CHECK_EQ_INT(alloc_choose(d, 20, 21, (size_t[21]){0}), ERR_CONFLICT);
}

TEST_MAIN(test_fewest_numa, test_ties, test_no_topology, test_not_enough_and_zero,
          test_deterministic, test_many_groups)
