/* SPDX-License-Identifier: Apache-2.0 */
/* fence_test.c - the signs of another syncer on this podresd and the stop
 * they put on the writes, through syncer/fence.h, with the clock given. */
#include "../../../common/common.h"
#include "../../../syncer/fence.h"
#include "../test.h"

static void test_claimed_stops_for_good(void)
{
    struct fence f = {0};
    struct error why = {0};
    uint64_t left = 1;

    CHECK(!fence_holds(&f, &left));
    CHECK_EQ_INT(left, 0);
    CHECK(!fence_stopped(&f, &why));
    fence_claimed(&f, "test-nod", "test-node");
    CHECK(fence_holds(&f, &left));
    CHECK_EQ_INT(left, FENCE_RECHECK_MS);
    CHECK(fence_stopped(&f, &why));
    CHECK_EQ_INT(why.code, ERR_UNAVAIL);
    CHECK_STREQ(why.msg, "another podres-syncer writes this podresd's reservations (node "
                         "'test-node'; this one is node 'test-nod'); stopped writing until "
                         "restarted");
    /* No sign again for as long as one likes: still stopped, the reason kept. */
    fence_claimed(&f, "test-nod", "other");
    CHECK(fence_holds(&f, &left));
    CHECK(fence_stopped(&f, NULL));
    CHECK(fence_stopped(&f, &why));
    CHECK(strstr(why.msg, "'test-node'") != NULL);
    CHECK(!fence_lost(&f, "test-nod", 1));
}

static void test_losses_in_window(void)
{
    struct fence f = {0};
    struct error why = {0};
    uint64_t left;
    int i;

    /* Spread out: never FENCE_LOSSES within the window. */
    for (i = 0; i < 20; i++)
        CHECK(!fence_lost(&f, "test-node", 1000 + (uint64_t)i * (FENCE_WINDOW_MS / 4 + 1)));
    CHECK(!fence_holds(&f, &left));
    /* Close together: the FENCE_LOSSES-th stops the writes, once. */
    for (i = 0; i < FENCE_LOSSES - 1; i++)
        CHECK(!fence_lost(&f, "test-node", 300000 + (uint64_t)i));
    CHECK(fence_lost(&f, "test-node", 300000 + FENCE_LOSSES));
    CHECK(fence_stopped(&f, &why));
    CHECK(strstr(why.msg, "another podres-syncer writes this podresd's reservations") != NULL);
    CHECK(strstr(why.msg, "removed by someone else") != NULL);
    for (i = 0; i < 2 * FENCE_LOSSES; i++)
        CHECK(!fence_lost(&f, "test-node", 300020 + (uint64_t)i));
    CHECK(fence_holds(&f, &left));
}

TEST_MAIN(test_claimed_stops_for_good, test_losses_in_window)
