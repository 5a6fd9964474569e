/* SPDX-License-Identifier: Apache-2.0 */
/* clock_test.c - the clocks agree in unit and move forward; a deadline is
 * normalised and lies after now. */
#include "../../../common/common.h"
#include "../../../common/clock.h"
#include "../test.h"

static void test_clocks(void)
{
    uint64_t ms = clock_mono_ms(), us = clock_mono_us(), wall = clock_wall_ms();
    struct timespec now, at;

    CHECK(us / 1000 >= ms);
    CHECK(clock_mono_ms() >= ms);
    CHECK(wall > 1700000000000ull); /* after 2023: milliseconds, not seconds */
    CHECK(wall / 1000 - (uint64_t)time(NULL) + 1 <= 2);
    clock_gettime(CLOCK_MONOTONIC, &now);
    at = clock_mono_after(1999);
    CHECK(at.tv_nsec >= 0 && at.tv_nsec < 1000000000L);
    CHECK(at.tv_sec >= now.tv_sec + 1 && at.tv_sec <= now.tv_sec + 3);
}

TEST_MAIN(test_clocks)
