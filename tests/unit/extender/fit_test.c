/* SPDX-License-Identifier: Apache-2.0 */
/* fit_test.c - free counts, NUMA nodes needed and the choice of devices
 * through extender/fit.h. */
#include "../../../common/common.h"
#include "../../../extender/fit.h"
#include "../test.h"

/* gpu0..gpu3 on NUMA 0, 0, 1, 1; a nic on NUMA 0. */
#define D(res, id, numa)                                                                           \
    {                                                                                              \
        (char *)(res), (char *)(id), (char *)"", (numa), true, false                               \
    }
static struct fit_dev devs[] = {
    D("example.com/gpu", "gpu0", 0), D("example.com/gpu", "gpu1", 0),
    D("example.com/gpu", "gpu2", 1), D("example.com/gpu", "gpu3", 1),
    D("example.com/nic", "nic0", 0),
};
#define N ARRAY_SIZE(devs)

static void reset(void)
{
    size_t i;

    for (i = 0; i < N; i++) {
        devs[i].busy = false;
        devs[i].healthy = true;
    }
}

static void test_free_and_numa(void)
{
    reset();
    CHECK_EQ_INT(fit_free(devs, N, "example.com/gpu"), 4);
    CHECK_EQ_INT(fit_free(devs, N, "example.com/nic"), 1);
    CHECK_EQ_INT(fit_free(devs, N, "other/x"), 0);
    CHECK_EQ_INT(fit_numa_needed(devs, N, "example.com/gpu", 0), 0);
    CHECK_EQ_INT(fit_numa_needed(devs, N, "example.com/gpu", 2), 1);
    CHECK_EQ_INT(fit_numa_needed(devs, N, "example.com/gpu", 3), 2);
    CHECK_EQ_INT(fit_numa_needed(devs, N, "example.com/gpu", 5), -1);
    devs[1].busy = true;     /* NUMA 0 keeps 1, NUMA 1 keeps 2 */
    devs[3].healthy = false; /* NUMA 1 keeps 1 healthy */
    CHECK_EQ_INT(fit_free(devs, N, "example.com/gpu"), 2);
    CHECK_EQ_INT(fit_numa_needed(devs, N, "example.com/gpu", 2), 2);
}

static void test_choose_best_fit(void)
{
    size_t idx[4];

    reset();
    devs[0].busy = true; /* NUMA 0: gpu1 free; NUMA 1: gpu2, gpu3 */
    CHECK(fit_choose(devs, N, "example.com/gpu", 1, idx));
    CHECK_STREQ(devs[idx[0]].id, "gpu1"); /* the NUMA node with the fewest free that fits */
    CHECK(devs[1].busy);
    CHECK(fit_choose(devs, N, "example.com/gpu", 2, idx));
    CHECK_STREQ(devs[idx[0]].id, "gpu2");
    CHECK_STREQ(devs[idx[1]].id, "gpu3");
    CHECK(!fit_choose(devs, N, "example.com/gpu", 1, idx));
}

static void test_choose_spans(void)
{
    size_t idx[4];

    reset();
    CHECK(fit_choose(devs, N, "example.com/gpu", 1, idx));
    CHECK_STREQ(devs[idx[0]].id, "gpu0");                  /* ties: the lower NUMA id */
    CHECK(fit_choose(devs, N, "example.com/gpu", 3, idx)); /* 1 + 2 left: both NUMA nodes */
    CHECK_STREQ(devs[idx[0]].id, "gpu2");
    CHECK_STREQ(devs[idx[1]].id, "gpu3");
    CHECK_STREQ(devs[idx[2]].id, "gpu1");
    reset();
    CHECK(!fit_choose(devs, N, "example.com/gpu", 5, idx));
    CHECK_EQ_INT(fit_free(devs, N, "example.com/gpu"), 4); /* nothing marked on failure */
}

TEST_MAIN(test_free_and_numa, test_choose_best_fit, test_choose_spans)
