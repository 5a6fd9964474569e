/* SPDX-License-Identifier: Apache-2.0 */
/* fault.c - counts guarded allocations and fails the chosen one. */
#include "common.h"

#include <stdatomic.h>

static long fail_at;           /* 0: never fail */
static atomic_long counter;    /* guarded allocations so far */

void fault_init(void)
{
    const char *s = getenv("FAULT_ALLOC_AT");

    fail_at = s ? strtol(s, NULL, 10) : 0;
}

bool fault_alloc_fails(void)
{
    if (fail_at <= 0)
        return false;
    return atomic_fetch_add(&counter, 1) + 1 == fail_at;
}
