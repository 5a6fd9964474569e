/* SPDX-License-Identifier: Apache-2.0 */
/* proc_test.c - SIGTERM and SIGINT wait for proc_wait instead of killing the
 * process; a wait without one times out; SIGPIPE is ignored. */
#include "../../../common/common.h"
#include "../../../common/proc.h"
#include "../test.h"

static void test_signals(void)
{
    sigset_t sigs;

    proc_signals(&sigs);
    CHECK(sigismember(&sigs, SIGTERM) == 1);
    CHECK(sigismember(&sigs, SIGINT) == 1);
    CHECK(!proc_wait(&sigs, 10));
    CHECK_EQ_INT(raise(SIGPIPE), 0); /* ignored: the test goes on */
    CHECK_EQ_INT(raise(SIGTERM), 0); /* blocked: pending until the wait */
    CHECK(proc_wait(&sigs, 1000));
    CHECK_EQ_INT(raise(SIGINT), 0);
    CHECK(proc_wait(&sigs, 1000));
    CHECK(!proc_wait(&sigs, 10));
}

TEST_MAIN(test_signals)
