/* SPDX-License-Identifier: Apache-2.0 */
/* sqlmem_test.c - SQLite's per-thread block cache, through sqlmem.h. */
#include "../../../common/common.h"
#include "../../../server/sqlmem.h"
#include "../test.h"

#include <malloc.h>
#include <pthread.h>
#include <sqlite3.h>
#include <stdint.h>

#define CLASS_MAX (SQLMEM_STEP * SQLMEM_CLASSES)

/* Sizes, alignment and contents of blocks of every size up to 2,000. */
static void test_blocks(void)
{
    int n, bad = 0;
    unsigned char *p;

    for (n = 1; n <= 2000; n++) {
        p = sqlmem_malloc(n);
        if (!p || ((uintptr_t)p & 15) != 0 || sqlmem_size(p) < n ||
            sqlmem_size(p) != sqlmem_roundup(n) ||
            (n <= CLASS_MAX && sqlmem_size(p) % SQLMEM_STEP != 0))
            bad++;
        if (p)
            memset(p, 0xa5, (size_t)sqlmem_size(p));
        sqlmem_free(p);
    }
    CHECK_EQ_INT(bad, 0);
    CHECK_EQ_INT(sqlmem_roundup(1), SQLMEM_STEP);
    CHECK_EQ_INT(sqlmem_roundup(SQLMEM_STEP + 1), 2 * SQLMEM_STEP);
    CHECK_EQ_INT(sqlmem_roundup(CLASS_MAX + 1), CLASS_MAX + 8);
    CHECK(sqlmem_malloc(0) == NULL);
    sqlmem_free(NULL);
    CHECK_EQ_INT(sqlmem_size(NULL), 0);
}

/* A thread keeps nothing until it asks; then a freed small block is kept
 * and handed out again, within the caps; when it stops, it keeps nothing. */
static void test_cache(void)
{
    void *p[SQLMEM_PER_CLASS + 20], *q;
    size_t i, before;

    sqlmem_free(sqlmem_malloc(40));
    CHECK_EQ_INT(sqlmem_thread_cached(), 0);
    sqlmem_thread_cache(true);
    p[0] = sqlmem_malloc(40);
    before = sqlmem_thread_cached();
    sqlmem_free(p[0]);
    q = sqlmem_malloc(60); /* the same class: 64 bytes */
    if (SQLMEM_CACHING) {
        CHECK(q == p[0]);
        CHECK_EQ_INT(sqlmem_thread_cached(), before);
    }
    sqlmem_free(q);

    /* one class: at most SQLMEM_PER_CLASS blocks */
    before = sqlmem_thread_cached();
    for (i = 0; i < ARRAY_SIZE(p); i++)
        p[i] = sqlmem_malloc(100);
    for (i = 0; i < ARRAY_SIZE(p); i++)
        sqlmem_free(p[i]);
    if (SQLMEM_CACHING)
        CHECK(sqlmem_thread_cached() > before);
    CHECK(sqlmem_thread_cached() <= SQLMEM_THREAD_BYTES);
    CHECK(sqlmem_thread_cached() - before <= (size_t)SQLMEM_PER_CLASS * 128);

    /* every class, many blocks: at most SQLMEM_THREAD_BYTES in all */
    for (i = 0; i < ARRAY_SIZE(p); i++)
        p[i] = sqlmem_malloc((int)(i % SQLMEM_CLASSES + 1) * SQLMEM_STEP);
    for (i = 0; i < ARRAY_SIZE(p); i++)
        sqlmem_free(p[i]);
    CHECK(sqlmem_thread_cached() <= SQLMEM_THREAD_BYTES);

    /* big blocks are never kept */
    before = sqlmem_thread_cached();
    sqlmem_free(sqlmem_malloc(CLASS_MAX + 1));
    CHECK_EQ_INT(sqlmem_thread_cached(), before);

    sqlmem_thread_cache(false);
    CHECK_EQ_INT(sqlmem_thread_cached(), 0);
    sqlmem_free(sqlmem_malloc(40));
    CHECK_EQ_INT(sqlmem_thread_cached(), 0);
}

static void test_realloc(void)
{
    unsigned char *p = sqlmem_malloc(10), *q;
    int i, bad = 0;

    for (i = 0; i < 10; i++)
        p[i] = (unsigned char)i;
    q = sqlmem_realloc(p, 20); /* the same class */
    CHECK(q == p);
    q = sqlmem_realloc(q, 300); /* another class */
    for (i = 0; i < 10; i++)
        bad += q[i] != i;
    memset(q, 7, 300);
    q = sqlmem_realloc(q, 5000); /* big */
    for (i = 0; i < 300; i++)
        bad += q[i] != 7;
    memset(q, 9, 5000);
    q = sqlmem_realloc(q, 9000); /* big to big */
    for (i = 0; i < 5000; i++)
        bad += q[i] != 9;
    CHECK_EQ_INT(sqlmem_size(q), 9000);
    q = sqlmem_realloc(q, 16); /* back to a class */
    for (i = 0; i < 16; i++)
        bad += q[i] != 9;
    CHECK_EQ_INT(sqlmem_size(q), SQLMEM_STEP);
    CHECK_EQ_INT(bad, 0);
    p = sqlmem_realloc(NULL, 8);
    CHECK(p != NULL);
    sqlmem_free(p);
    sqlmem_free(q);
}

static void *cache_and_exit(void *arg)
{
    void *p[200];
    size_t i;

    (void)arg;
    sqlmem_thread_cache(true);
    for (i = 0; i < ARRAY_SIZE(p); i++)
        p[i] = sqlmem_malloc((int)(i % SQLMEM_CLASSES + 1) * SQLMEM_STEP);
    for (i = 0; i < ARRAY_SIZE(p); i++)
        sqlmem_free(p[i]);
    return (void *)sqlmem_thread_cached();
}

/* A thread's kept blocks go back to malloc when it exits. */
static void test_thread_exit(void)
{
    pthread_t t;
    void *kept = NULL;
    size_t used0, used1;

    /* warm up malloc for threads (their first arena, stacks) */
    CHECK_OK(pthread_create(&t, NULL, cache_and_exit, NULL));
    CHECK_OK(pthread_join(t, NULL));
    used0 = mallinfo2().uordblks;
    CHECK_OK(pthread_create(&t, NULL, cache_and_exit, NULL));
    CHECK_OK(pthread_join(t, &kept));
    used1 = mallinfo2().uordblks;
    if (SQLMEM_CACHING)
        CHECK((size_t)kept > 4096);
    /* what it kept would show here (it is more than 4 KiB) */
    CHECK(used1 < used0 + 2048);
    if (!(used1 < used0 + 2048))
        printf("# in use %zu then %zu; the thread kept %zu\n", used0, used1, (size_t)kept);
}

/* SQLite on its own thread, which asks to keep blocks (its cache starts
 * empty); returns what the thread keeps once SQLite is done, +1. */
static void *sqlite_work(void *arg)
{
    sqlite3 *db = NULL;
    sqlite3_stmt *s = NULL;
    int *count = arg;

    sqlmem_thread_cache(true);
    if (sqlmem_thread_cached() != 0 || sqlite3_open(":memory:", &db) != SQLITE_OK)
        return NULL;
    if (sqlite3_exec(db,
                     "CREATE TABLE t(k INTEGER PRIMARY KEY, v TEXT);"
                     "WITH RECURSIVE r(n) AS (SELECT 1 UNION ALL SELECT n+1 FROM r WHERE n<5000) "
                     "INSERT INTO t SELECT n, printf('%0*d', n % 700, n) FROM r;"
                     "DELETE FROM t WHERE k % 3 = 0;",
                     NULL, NULL, NULL) == SQLITE_OK &&
        sqlite3_prepare_v2(db, "SELECT count(*) FROM t", -1, &s, NULL) == SQLITE_OK &&
        sqlite3_step(s) == SQLITE_ROW)
        *count = sqlite3_column_int(s, 0);
    sqlite3_finalize(s);
    sqlite3_close(db);
    return (void *)(sqlmem_thread_cached() + 1);
}

/* SQLite runs on it (its small blocks come through: some are kept); once
 * SQLite is initialised, installing again changes nothing. */
static void test_sqlite(void)
{
    pthread_t t;
    void *kept = NULL;
    int count = 0;

    CHECK_EQ_INT(sqlmem_install(), SQLITE_OK);
    CHECK_OK(pthread_create(&t, NULL, sqlite_work, &count));
    CHECK_OK(pthread_join(t, &kept));
    CHECK_EQ_INT(count, 3334);
    CHECK(kept != NULL);
    if (SQLMEM_CACHING)
        CHECK((size_t)kept > 1);
    CHECK_EQ_INT(sqlmem_install(), SQLITE_MISUSE);
}

TEST_MAIN(test_blocks, test_cache, test_realloc, test_thread_exit, test_sqlite)
