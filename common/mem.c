/* SPDX-License-Identifier: Apache-2.0 */
/* mem.c - glibc malloc settings; see mem.h. */
#include "common.h"
#include "mem.h"

#include <malloc.h>

void mem_tune(void)
{
    mallopt(M_ARENA_MAX, 2);
    /* Setting either threshold turns glibc's dynamic adjustment off. */
    mallopt(M_MMAP_THRESHOLD, MEM_MMAP_THRESHOLD);
    mallopt(M_TRIM_THRESHOLD, 128 * 1024);
}

void mem_trim(void)
{
    malloc_trim(0);
}
