/* SPDX-License-Identifier: Apache-2.0 */
/* fence_test.c - the signs of another syncer on this podresd and the hold
 * on the writes, through syncer/fence.h, with the clock given. */
#include "../../../common/common.h"
#include "../../../syncer/fence.h"
#include "../test.h"

static void test_claimed_stops_and_resumes(void)
{
    struct fence f = {0};
    struct error why = {0};
    uint64_t left = 1;

    CHECK(!fence_holds(&f, 1000, &left));
    CHECK_EQ_INT(left, 0);
    CHECK(!fence_stopped(&f, 1000, &why));
    fence_claimed(&f, "test-nod", "test-node", 1000);
    CHECK(fence_holds(&f, 1000, &left));
    CHECK_EQ_INT(left, FENCE_HOLD_MS);
    CHECK(fence_stopped(&f, 2000, &why));
    CHECK_STREQ(why.msg, "another podres-syncer writes this podresd's reservations (node "
                         "'test-node'; this one is node 'test-nod'); stopped writing");
    CHECK(fence_holds(&f, 1000 + FENCE_HOLD_MS - 1, &left));
    CHECK_EQ_INT(left, 1);
    CHECK(!fence_holds(&f, 1000 + FENCE_HOLD_MS, &left));
    CHECK(!fence_stopped(&f, 1000 + FENCE_HOLD_MS, &why));
    CHECK(!fence_holds(&f, 1000 + FENCE_HOLD_MS + 1, &left));
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
    CHECK(!fence_holds(&f, 200000, &left));
    /* Close together: the FENCE_LOSSES-th stops the writes. */
    for (i = 0; i < FENCE_LOSSES - 1; i++)
        CHECK(!fence_lost(&f, "test-node", 300000 + (uint64_t)i));
    CHECK(fence_lost(&f, "test-node", 300000 + FENCE_LOSSES));
    CHECK(fence_stopped(&f, 300010, &why));
    CHECK(strstr(why.msg, "another podres-syncer writes this podresd's reservations") != NULL);
    CHECK(strstr(why.msg, "removed by someone else") != NULL);
    /* The count starts again after a stop. */
    CHECK(!fence_lost(&f, "test-node", 300020));
}

TEST_MAIN(test_claimed_stops_and_resumes, test_losses_in_window)
