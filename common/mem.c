/* SPDX-License-Identifier: Apache-2.0 */
/* mem.c - glibc malloc settings; see mem.h. */
#include "common.h"
#include "mem.h"

#include <malloc.h>
#include <unistd.h>

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

size_t mem_rss_kib(void)
{
    unsigned long size = 0, resident = 0;
    FILE *f = fopen("/proc/self/statm", "r");
    long page = sysconf(_SC_PAGESIZE);

    if (!f)
        return 0;
    if (fscanf(f, "%lu %lu", &size, &resident) != 2)
        resident = 0;
    fclose(f);
    return page > 0 ? resident * (size_t)page / 1024 : 0;
}
