/* SPDX-License-Identifier: Apache-2.0 */
/* sqlmem.c - SQLite's allocator: a per-thread cache of small blocks.
 *
 * Debian builds SQLite without its lookaside allocator, so each statement
 * step mallocs and frees dozens of small blocks (cursors, unpacked records,
 * values). glibc's per-thread cache keeps 7 free blocks of a size; a step
 * frees more, and past those each free and malloc takes the lock of an arena
 * that every thread shares (two arenas, common/mem.c). A thread that asks
 * (sqlmem_thread_cache: podresd's combiner, which runs every write) keeps up
 * to SQLMEM_PER_CLASS free blocks of each size class, SQLMEM_THREAD_BYTES in
 * all, and gives them back when it stops or exits. Other threads (readers)
 * keep none, so a burst of them leaves nothing behind. A block freed by a
 * thread that keeps blocks goes to its cache, whichever thread allocated it.
 * Blocks above the classes are plain malloc.
 *
 * Each block carries a 16-byte header (malloc's alignment) with its usable
 * size, which SQLite asks for (xSize). */
#include "sqlmem.h"

#include <pthread.h>
#include <sqlite3.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define HDR 16
#define CLASS_MAX (SQLMEM_STEP * SQLMEM_CLASSES)

struct blk {
    struct blk *next;
};

struct tcache {
    struct blk *head[SQLMEM_CLASSES];
    unsigned n[SQLMEM_CLASSES];
    size_t bytes;
    bool keyed; /* the exit destructor is set for this thread */
};

static __thread struct tcache tc;
static __thread bool tc_on; /* this thread keeps blocks (sqlmem_thread_cache) */
static pthread_key_t exit_key;
static pthread_once_t key_once = PTHREAD_ONCE_INIT;
static bool key_ok;

static void tcache_drop(void *arg)
{
    struct tcache *t = arg;
    struct blk *b;
    size_t c;

    for (c = 0; c < SQLMEM_CLASSES; c++) {
        while ((b = t->head[c]) != NULL) {
            t->head[c] = b->next;
            free((char *)b - HDR);
        }
        t->n[c] = 0;
    }
    t->bytes = 0;
    t->keyed = false;
}

/* At thread exit: give the blocks back, and keep no more (another key's
 * destructor may still free SQLite memory on this thread). */
static void tcache_exit(void *arg)
{
    tc_on = false;
    tcache_drop(arg);
}

static void key_init(void)
{
    key_ok = pthread_key_create(&exit_key, tcache_exit) == 0;
}

static size_t *hdr_of(void *p)
{
    return (size_t *)(void *)((char *)p - HDR);
}

int sqlmem_roundup(int n)
{
    if (n <= CLASS_MAX)
        return n <= 0 ? SQLMEM_STEP : (n + SQLMEM_STEP - 1) / SQLMEM_STEP * SQLMEM_STEP;
    return (n + 7) & ~7;
}

void *sqlmem_malloc(int n)
{
    size_t usable = (size_t)sqlmem_roundup(n), c;
    struct blk *b;
    size_t *h;

    if (n <= 0)
        return NULL;
    if (usable <= CLASS_MAX) {
        c = usable / SQLMEM_STEP - 1;
        b = tc.head[c];
        if (b) {
            tc.head[c] = b->next;
            tc.n[c]--;
            tc.bytes -= usable;
            return b;
        }
    }
    h = malloc(HDR + usable);
    if (!h)
        return NULL;
    *h = usable;
    return (char *)h + HDR;
}

void sqlmem_free(void *p)
{
    size_t usable, c;
    struct blk *b = p;

    if (!p)
        return;
    usable = *hdr_of(p);
    if (SQLMEM_CACHING && tc_on && usable <= CLASS_MAX) {
        c = usable / SQLMEM_STEP - 1;
        if (tc.n[c] < SQLMEM_PER_CLASS && tc.bytes + usable <= SQLMEM_THREAD_BYTES) {
            if (!tc.keyed) {
                pthread_once(&key_once, key_init);
                tc.keyed = key_ok && pthread_setspecific(exit_key, &tc) == 0;
            }
            if (tc.keyed) {
                b->next = tc.head[c];
                tc.head[c] = b;
                tc.n[c]++;
                tc.bytes += usable;
                return;
            }
        }
    }
    free(hdr_of(p));
}

void *sqlmem_realloc(void *p, int n)
{
    size_t usable, want = (size_t)sqlmem_roundup(n);
    size_t *h;
    void *q;

    if (!p)
        return sqlmem_malloc(n);
    if (n <= 0)
        return NULL;
    usable = *hdr_of(p);
    if (want == usable)
        return p;
    if (usable > CLASS_MAX && want > CLASS_MAX) {
        h = realloc(hdr_of(p), HDR + want);
        if (!h)
            return NULL;
        *h = want;
        return (char *)h + HDR;
    }
    q = sqlmem_malloc(n);
    if (!q)
        return NULL;
    memcpy(q, p, usable < want ? usable : want);
    sqlmem_free(p);
    return q;
}

int sqlmem_size(void *p)
{
    return p ? (int)*hdr_of(p) : 0;
}

void sqlmem_thread_cache(bool on)
{
    tc_on = on;
    if (!on)
        tcache_drop(&tc);
}

size_t sqlmem_thread_cached(void)
{
    return tc.bytes;
}

static int mem_init(void *arg)
{
    (void)arg;
    return SQLITE_OK;
}

static void mem_shutdown(void *arg)
{
    (void)arg;
}

int sqlmem_install(void)
{
    static const sqlite3_mem_methods methods = {
        sqlmem_malloc,  sqlmem_free, sqlmem_realloc, sqlmem_size,
        sqlmem_roundup, mem_init,    mem_shutdown,   NULL,
    };

    return sqlite3_config(SQLITE_CONFIG_MALLOC, &methods);
}
