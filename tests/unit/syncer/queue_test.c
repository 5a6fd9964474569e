/* SPDX-License-Identifier: Apache-2.0 */
/* queue_test.c - the work queue: order, dedup, delays, dirty times, timeouts
 * and close through syncer/queue.h. Delays are short and bounds generous. */
#include "../../../common/common.h"
#include "../../../common/clock.h"
#include "../../../syncer/queue.h"
#include "../test.h"

#include <pthread.h>
#include <time.h>

static void sleep_ms(long ms)
{
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};

    nanosleep(&ts, NULL);
}

static void test_fifo(void)
{
    struct queue *q = queue_new();
    char key[64];
    uint64_t dirty = 0, t0 = clock_mono_ms();

    CHECK(q != NULL);
    CHECK_EQ_INT(queue_len(q), 0);
    queue_add(q, "ns/a", 0);
    sleep_ms(3);
    queue_add(q, "ns/b", 0);
    sleep_ms(3);
    queue_add(q, "ns/c", 0);
    CHECK_EQ_INT(queue_len(q), 3);
    CHECK(queue_get(q, key, sizeof(key), &dirty, 0));
    CHECK_STREQ(key, "ns/a");
    CHECK(dirty >= t0 && dirty <= clock_mono_ms());
    CHECK(queue_get(q, key, sizeof(key), &dirty, 0));
    CHECK_STREQ(key, "ns/b");
    CHECK(queue_get(q, key, sizeof(key), &dirty, 0));
    CHECK_STREQ(key, "ns/c");
    CHECK_EQ_INT(queue_len(q), 0);
    CHECK(!queue_get(q, key, sizeof(key), &dirty, 0));

    /* added in the same millisecond: still in order of addition */
    queue_add(q, "x/1", 0);
    queue_add(q, "x/2", 0);
    queue_add(q, "x/3", 0);
    CHECK(queue_get(q, key, sizeof(key), &dirty, 0));
    CHECK_STREQ(key, "x/1");
    CHECK(queue_get(q, key, sizeof(key), &dirty, 0));
    CHECK_STREQ(key, "x/2");
    CHECK(queue_get(q, key, sizeof(key), &dirty, 0));
    CHECK_STREQ(key, "x/3");
    queue_free(q);
    queue_free(NULL);
}

static void test_due_order(void)
{
    struct queue *q = queue_new();
    char key[64];
    uint64_t dirty;

    queue_add(q, "ns/late", 150);
    queue_add(q, "ns/mid", 60);
    queue_add(q, "ns/now", 0);
    CHECK(queue_get(q, key, sizeof(key), &dirty, 2000));
    CHECK_STREQ(key, "ns/now");
    CHECK(queue_get(q, key, sizeof(key), &dirty, 2000));
    CHECK_STREQ(key, "ns/mid");
    CHECK(queue_get(q, key, sizeof(key), &dirty, 2000));
    CHECK_STREQ(key, "ns/late");
    queue_free(q);
}

static void test_dedup(void)
{
    struct queue *q = queue_new();
    char key[64];
    uint64_t dirty = 0, first, t0;

    /* the earlier due time wins; the first dirty time stays */
    first = clock_mono_ms();
    queue_add(q, "ns/a", 10000);
    sleep_ms(20);
    queue_add(q, "ns/a", 0);
    CHECK_EQ_INT(queue_len(q), 1);
    CHECK(queue_get(q, key, sizeof(key), &dirty, 1000));
    CHECK_STREQ(key, "ns/a");
    CHECK(dirty >= first && dirty < first + 15); /* not the second add's time */
    CHECK_EQ_INT(queue_len(q), 0);

    /* a later due time does not postpone a due key */
    queue_add(q, "ns/b", 0);
    queue_add(q, "ns/b", 10000);
    CHECK_EQ_INT(queue_len(q), 1);
    t0 = clock_mono_ms();
    CHECK(queue_get(q, key, sizeof(key), &dirty, 1000));
    CHECK_STREQ(key, "ns/b");
    CHECK(clock_mono_ms() - t0 < 500);

    /* after removal the key is new again: a fresh dirty time */
    sleep_ms(20);
    t0 = clock_mono_ms();
    queue_add(q, "ns/b", 0);
    CHECK(queue_get(q, key, sizeof(key), &dirty, 0));
    CHECK(dirty >= t0);
    queue_free(q);
}

static void test_delay(void)
{
    struct queue *q = queue_new();
    char key[64];
    uint64_t dirty, t0 = clock_mono_ms(), t1;

    queue_add(q, "ns/d", 100);
    CHECK_EQ_INT(queue_len(q), 1);
    CHECK(!queue_get(q, key, sizeof(key), &dirty, 0)); /* not due yet */
    CHECK(!queue_get(q, key, sizeof(key), &dirty, 20));
    CHECK_EQ_INT(queue_len(q), 1);
    CHECK(queue_get(q, key, sizeof(key), &dirty, 3000));
    t1 = clock_mono_ms();
    CHECK_STREQ(key, "ns/d");
    CHECK(t1 - t0 >= 99);
    CHECK(t1 - t0 < 2000);
    CHECK(dirty >= t0 && dirty <= t0 + 20); /* dirty when added, not when due */
    queue_free(q);
}

static void test_timeout(void)
{
    struct queue *q = queue_new();
    char key[64] = "untouched";
    uint64_t dirty = 7, t0 = clock_mono_ms(), el;

    CHECK(!queue_get(q, key, sizeof(key), &dirty, 80));
    el = clock_mono_ms() - t0;
    CHECK(el >= 79);
    CHECK(el < 2000);
    CHECK_STREQ(key, "untouched");
    CHECK_EQ_INT(dirty, 7);

    /* a key due after the wait ends: timeout, the key stays */
    queue_add(q, "ns/x", 5000);
    t0 = clock_mono_ms();
    CHECK(!queue_get(q, key, sizeof(key), &dirty, 50));
    el = clock_mono_ms() - t0;
    CHECK(el >= 49);
    CHECK(el < 2000);
    CHECK_EQ_INT(queue_len(q), 1);
    queue_free(q);
}

struct waiter {
    struct queue *q;  /* the queue */
    bool got;         /* queue_get's answer */
    char key[64];     /* the key it got */
    uint64_t took_ms; /* how long it waited */
};

static void *wait_thread(void *arg)
{
    struct waiter *w = arg;
    uint64_t dirty, t0 = clock_mono_ms();

    w->got = queue_get(w->q, w->key, sizeof(w->key), &dirty, 10000);
    w->took_ms = clock_mono_ms() - t0;
    return NULL;
}

static void test_wake_on_add(void)
{
    struct waiter w = {.q = queue_new()};
    pthread_t th;

    CHECK_OK(pthread_create(&th, NULL, wait_thread, &w));
    sleep_ms(50);
    queue_add(w.q, "ns/woken", 0);
    pthread_join(th, NULL);
    CHECK(w.got);
    CHECK_STREQ(w.key, "ns/woken");
    CHECK(w.took_ms < 5000);
    queue_free(w.q);
}

static void test_close(void)
{
    struct waiter w = {.q = queue_new()};
    pthread_t th;
    char key[64];
    uint64_t dirty;

    queue_add(w.q, "ns/later", 60000); /* waiting, not due */
    CHECK_OK(pthread_create(&th, NULL, wait_thread, &w));
    sleep_ms(50);
    queue_close(w.q);
    pthread_join(th, NULL);
    CHECK(!w.got);
    CHECK(w.took_ms < 5000);

    /* closed: false at once, even with a due key */
    queue_add(w.q, "ns/due", 0);
    CHECK(!queue_get(w.q, key, sizeof(key), &dirty, 5000));
    CHECK_EQ_INT(queue_len(w.q), 2);
    queue_free(w.q);
}

static void test_len_and_truncation(void)
{
    struct queue *q = queue_new();
    char small[5];
    uint64_t dirty;

    queue_add(q, "a/1", 0);
    queue_add(q, "a/2", 1000);
    queue_add(q, "a/1", 0);
    CHECK_EQ_INT(queue_len(q), 2);
    queue_free(q); /* frees waiting keys */

    q = queue_new();
    queue_add(q, "long/name", 0);
    CHECK(queue_get(q, small, sizeof(small), &dirty, 0));
    CHECK_STREQ(small, "long"); /* truncated, NUL-terminated */
    queue_free(q);
}

/* BUG (syncer/queue.c:97): queue_get() removes the entry by the copied,
 * possibly truncated 'key' instead of by 'pick', so a key longer than 'cap'
 * stays queued and is handed out again on every call. Left out of TEST_MAIN
 * until queue.c deletes by 'pick'. */
static void test_truncated_key_removed(void)
{
    struct queue *q = queue_new();
    char small[5];
    uint64_t dirty;

    queue_add(q, "long/name", 0);
    CHECK(queue_get(q, small, sizeof(small), &dirty, 0));
    CHECK_EQ_INT(queue_len(q), 0);
    CHECK(!queue_get(q, small, sizeof(small), &dirty, 0));
    queue_free(q);
}

/* queue_jitter_ms stays within the percent either way, and spreads. */
static void test_jitter(void)
{
    uint64_t v, lo = UINT64_MAX, hi = 0;
    int i;

    CHECK_EQ_INT(queue_jitter_ms(1000, 0), 1000);
    CHECK_EQ_INT(queue_jitter_ms(5, 10), 5); /* nothing to spread */
    for (i = 0; i < 1000; i++) {
        v = queue_jitter_ms(300000, 10);
        lo = v < lo ? v : lo;
        hi = v > hi ? v : hi;
    }
    CHECK(lo >= 270000 && hi <= 330000);
    CHECK(lo < 280000 && hi > 320000);
}

TEST_MAIN(test_jitter, test_fifo, test_due_order, test_dedup, test_delay, test_timeout,
          test_wake_on_add, test_close, test_len_and_truncation, test_truncated_key_removed)
