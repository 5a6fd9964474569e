/* SPDX-License-Identifier: Apache-2.0 */
/* fault.c - counts guarded allocations and fails the chosen one. */
#include "common.h"

#include <stdatomic.h>

static long fail_at;        /* the allocation to fail, counted from 1; 0: never */
static bool after_start;    /* FAULT_ALLOC_AFTER_START=1: count from fault_arm() */
static atomic_bool armed;   /* counting has started */
static atomic_long counter; /* guarded allocations since counting started */

void fault_init(void)
{
    const char *s = getenv("FAULT_ALLOC_AT");
    const char *after = getenv("FAULT_ALLOC_AFTER_START");

    fail_at = s ? strtol(s, NULL, 10) : 0;
    after_start = after && strcmp(after, "1") == 0;
    atomic_store(&armed, !after_start);
}

void fault_arm(void)
{
    if (!after_start || atomic_load(&armed))
        return;
    atomic_store(&counter, 0);
    atomic_store(&armed, true);
}

bool fault_alloc_fails(void)
{
    if (fail_at <= 0 || !atomic_load(&armed))
        return false;
    return atomic_fetch_add(&counter, 1) + 1 == fail_at;
}
