/* SPDX-License-Identifier: Apache-2.0 */
/* mem_test.c - mem.h: after mem_tune(), large buffers grown by doubling (as
 * a watcher's list is) and freed from several threads give their memory
 * back; without it glibc would keep them on the heap. */
#include "../../../common/common.h"
#include "../../../common/mem.h"
#include "../test.h"

#include <pthread.h>
#include <unistd.h>

#define NBUF 64
#define BIG (384 * 1024)

/* Resident set of this process in KiB (/proc/self/statm), 0 if unknown. */
static size_t rss_kib(void)
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

static void *grow_and_keep(void *p)
{
    char **slot = p;
    size_t cap = 4096;
    char *b = malloc(cap);

    /* grow by doubling, touching every page, like a list buffer */
    while (b && cap < BIG) {
        char *nb = realloc(b, cap * 2);

        if (!nb)
            break;
        b = nb;
        cap *= 2;
        memset(b, 'x', cap);
    }
    *slot = b;
    return NULL;
}

static void test_big_buffers_come_back(void)
{
    char *bufs[NBUF] = {0};
    pthread_t th[NBUF];
    size_t base, peak, after;
    int i;

    base = rss_kib();
    CHECK(base > 0);
    for (i = 0; i < NBUF; i++)
        CHECK_OK(pthread_create(&th[i], NULL, grow_and_keep, &bufs[i]));
    for (i = 0; i < NBUF; i++)
        pthread_join(th[i], NULL);
    peak = rss_kib();
    for (i = 0; i < NBUF; i++)
        CHECK(bufs[i] != NULL);
    CHECK(peak >= base + NBUF * (BIG / 1024) / 2);
    for (i = 0; i < NBUF; i++)
        free(bufs[i]);
    mem_trim();
    after = rss_kib();
    printf("# rss: base %zu KiB, peak %zu KiB, after free %zu KiB\n", base, peak, after);
#if defined(__SANITIZE_ADDRESS__)
    printf("# not compared: ASan's allocator and quarantine replace glibc malloc\n");
#else
    /* back to baseline, give or take 2 MiB of thread stacks and arenas */
    CHECK(after < base + 2048);
#endif
}

int main(void)
{
    void (*tests[])(void) = {test_big_buffers_come_back};
    size_t i;

    mem_tune();
    for (i = 0; i < ARRAY_SIZE(tests); i++)
        tests[i]();
    printf("1..%d\n", test_n);
    return test_failed ? 1 : 0;
}
