/* SPDX-License-Identifier: Apache-2.0 */
/* feed_test.c - the change-feed ring and its waits through feed.h. */
#include "../../../common/common.h"
#include "../../../server/feed.h"
#include "../test.h"

#include <time.h>

/* Publish one event of 'kind' in namespace 'ns' with revision 'rev'. */
static void pub(struct feed *f, uint64_t rev, const char *kind, const char *ns)
{
    struct feed_event ev;
    char line[128];

    memset(&ev, 0, sizeof(ev));
    ev.rev = rev;
    snprintf(ev.kind, sizeof(ev.kind), "%s", kind);
    ev.ns = strdup(ns);
    snprintf(line, sizeof(line), "{\"revision\":%llu,\"kind\":\"%s\"}\n", (unsigned long long)rev,
             kind);
    ev.line = strdup(line);
    ev.len = strlen(line);
    feed_publish(f, &ev, 1);
    CHECK(ev.line == NULL && ev.ns == NULL); /* stolen */
}

/* Number of lines in buf[0..len) and the revision of line 'i' (0-based), or 0. */
static uint64_t line_rev(const char *buf, size_t len, size_t i)
{
    size_t at = 0, k = 0;

    while (at < len) {
        const char *nl = memchr(buf + at, '\n', len - at);

        if (!nl)
            return 0;
        if (k == i)
            return strtoull(buf + at + strlen("{\"revision\":"), NULL, 10);
        at = (size_t)(nl - buf) + 1;
        k++;
    }
    return 0;
}

static size_t line_count(const char *buf, size_t len)
{
    size_t i, n = 0;

    for (i = 0; i < len; i++)
        n += buf[i] == '\n';
    return n;
}

static void test_publish_wait(void)
{
    struct feed *f = feed_new(8, 10);
    char *buf = NULL;
    size_t len = 0, cap = 0;
    uint64_t cur = 10;
    struct feed_event evs[2];

    CHECK(f != NULL);
    CHECK_EQ_INT(feed_head(f), 10);
    pub(f, 11, "Device", "");
    pub(f, 12, "PodResources", "default");
    memset(evs, 0, sizeof(evs));
    evs[0].rev = 13;
    evs[1].rev = 14;
    snprintf(evs[0].kind, sizeof(evs[0].kind), "Reservation");
    snprintf(evs[1].kind, sizeof(evs[1].kind), "Device");
    evs[0].ns = strdup("kube-system");
    evs[1].ns = strdup("");
    evs[0].line = strdup("{\"revision\":13,\"kind\":\"Reservation\"}\n");
    evs[1].line = strdup("{\"revision\":14,\"kind\":\"Device\"}\n");
    evs[0].len = strlen(evs[0].line);
    evs[1].len = strlen(evs[1].line);
    feed_publish(f, evs, 2);
    CHECK_EQ_INT(feed_head(f), 14);

    CHECK_EQ_INT(feed_read(f, &cur, NULL, &buf, &len, &cap), FEED_GOT);
    CHECK_EQ_INT(cur, 14);
    CHECK_EQ_INT(line_count(buf, len), 4);
    CHECK_EQ_INT(line_rev(buf, len, 0), 11);
    CHECK_EQ_INT(line_rev(buf, len, 1), 12);
    CHECK_EQ_INT(line_rev(buf, len, 2), 13);
    CHECK_EQ_INT(line_rev(buf, len, 3), 14);
    CHECK(len > 0 && buf[len - 1] == '\n');

    /* from the middle */
    len = 0;
    cur = 12;
    CHECK_EQ_INT(feed_read(f, &cur, NULL, &buf, &len, &cap), FEED_GOT);
    CHECK_EQ_INT(cur, 14);
    CHECK_EQ_INT(line_count(buf, len), 2);
    CHECK_EQ_INT(line_rev(buf, len, 0), 13);

    /* nothing new: timeout, cursor unchanged */
    len = 0;
    CHECK_EQ_INT(feed_read(f, &cur, NULL, &buf, &len, &cap), FEED_EMPTY);
    CHECK_EQ_INT(cur, 14);
    CHECK_EQ_INT(len, 0);
    free(buf);
    feed_free(f);
}

static void test_filters(void)
{
    struct feed *f = feed_new(16, 0);
    struct feed_filter dev = {"Device", NULL}, ns = {NULL, "default"}, both = {"PodResources", "x"};
    char *buf = NULL;
    size_t len = 0, cap = 0;
    uint64_t cur = 0;

    pub(f, 1, "Device", "");
    pub(f, 2, "PodResources", "default");
    pub(f, 3, "PodResources", "other");
    pub(f, 4, "Device", "");
    pub(f, 5, "Reservation", "default");

    CHECK_EQ_INT(feed_read(f, &cur, &dev, &buf, &len, &cap), FEED_GOT);
    CHECK_EQ_INT(line_count(buf, len), 2);
    CHECK_EQ_INT(line_rev(buf, len, 0), 1);
    CHECK_EQ_INT(line_rev(buf, len, 1), 4);
    CHECK_EQ_INT(cur, 5); /* advanced over the filtered event 5 as well */

    len = 0;
    cur = 0;
    CHECK_EQ_INT(feed_read(f, &cur, &ns, &buf, &len, &cap), FEED_GOT);
    CHECK_EQ_INT(line_count(buf, len), 2);
    CHECK_EQ_INT(line_rev(buf, len, 0), 2);
    CHECK_EQ_INT(line_rev(buf, len, 1), 5);
    CHECK_EQ_INT(cur, 5);

    /* only filtered events: EMPTY but the cursor moved over them */
    len = 0;
    cur = 0;
    CHECK_EQ_INT(feed_read(f, &cur, &both, &buf, &len, &cap), FEED_EMPTY);
    CHECK_EQ_INT(cur, 5);
    CHECK_EQ_INT(len, 0);

    CHECK(feed_match(NULL, "Device", ""));
    CHECK(feed_match(&dev, "Device", "any"));
    CHECK(!feed_match(&dev, "PodResources", ""));
    CHECK(feed_match(&ns, "PodResources", "default"));
    CHECK(!feed_match(&ns, "PodResources", "defaults"));
    CHECK(!feed_match(&ns, "Device", NULL));
    free(buf);
    feed_free(f);
}

static void test_behind(void)
{
    struct feed *f = feed_new(3, 0);
    char *buf = NULL;
    size_t len = 0, cap = 0;
    uint64_t cur;
    uint64_t r;

    for (r = 1; r <= 5; r++)
        pub(f, r, "Device", "");
    /* the ring keeps 3..5 */
    cur = 1;
    CHECK_EQ_INT(feed_read(f, &cur, NULL, &buf, &len, &cap), FEED_BEHIND);
    CHECK_EQ_INT(cur, 1);
    cur = 0;
    CHECK_EQ_INT(feed_read(f, &cur, NULL, &buf, &len, &cap), FEED_BEHIND);
    cur = 2;
    CHECK_EQ_INT(feed_read(f, &cur, NULL, &buf, &len, &cap), FEED_GOT);
    CHECK_EQ_INT(line_count(buf, len), 3);
    CHECK_EQ_INT(line_rev(buf, len, 0), 3);
    CHECK_EQ_INT(line_rev(buf, len, 2), 5);
    CHECK_EQ_INT(cur, 5);
    free(buf);
    feed_free(f);

    /* a feed started at head 100 has nothing before 101 */
    f = feed_new(4, 100);
    buf = NULL;
    len = cap = 0;
    cur = 50;
    CHECK_EQ_INT(feed_read(f, &cur, NULL, &buf, &len, &cap), FEED_BEHIND);
    cur = 100;
    CHECK_EQ_INT(feed_read(f, &cur, NULL, &buf, &len, &cap), FEED_EMPTY);
    free(buf);
    feed_free(f);
}

/* Beyond the byte budget the oldest lines go, in order, and the newest
 * always stays; cursors before them are behind. */
static void test_byte_budget(void)
{
    struct feed *f = feed_new(100, 0);
    char *buf = NULL;
    size_t len = 0, cap = 0, one;
    uint64_t cur, r;

    /* every line of pub() for "Device" and a one-digit revision is 'one' bytes */
    one = strlen("{\"revision\":1,\"kind\":\"Device\"}\n");
    feed_limit_bytes(f, 3 * one);
    for (r = 1; r <= 9; r++)
        pub(f, r, "Device", "");
    cur = 5;
    CHECK_EQ_INT(feed_read(f, &cur, NULL, &buf, &len, &cap), FEED_BEHIND);
    cur = 6; /* 7..9 are kept */
    CHECK_EQ_INT(feed_read(f, &cur, NULL, &buf, &len, &cap), FEED_GOT);
    CHECK_EQ_INT(line_count(buf, len), 3);
    CHECK_EQ_INT(line_rev(buf, len, 0), 7);
    CHECK_EQ_INT(cur, 9);
    /* a budget smaller than one line still keeps the newest */
    feed_limit_bytes(f, 1);
    pub(f, 10, "Device", "");
    cur = 8;
    CHECK_EQ_INT(feed_read(f, &cur, NULL, &buf, &len, &cap), FEED_BEHIND);
    cur = 9;
    len = 0;
    CHECK_EQ_INT(feed_read(f, &cur, NULL, &buf, &len, &cap), FEED_GOT);
    CHECK_EQ_INT(line_count(buf, len), 1);
    CHECK_EQ_INT(line_rev(buf, len, 0), 10);
    /* no limit again: the ring fills to its event capacity */
    feed_limit_bytes(f, 0);
    for (r = 11; r <= 20; r++)
        pub(f, r, "Device", "");
    cur = 9;
    len = 0;
    CHECK_EQ_INT(feed_read(f, &cur, NULL, &buf, &len, &cap), FEED_GOT);
    CHECK_EQ_INT(line_count(buf, len), 11);
    free(buf);
    feed_free(f);
}

static void test_buffer_limit(void)
{
    struct feed *f = feed_new(8, 0);
    char *buf = malloc(8);
    size_t len = 0, cap = 8;
    uint64_t cur = 0;

    pub(f, 1, "Device", "");
    pub(f, 2, "Device", "");
    /* a line longer than the buffer is still taken whole, one at a time */
    CHECK_EQ_INT(feed_read(f, &cur, NULL, &buf, &len, &cap), FEED_GOT);
    CHECK(len >= 1 && cap >= len);
    CHECK(line_count(buf, len) >= 1);
    CHECK_EQ_INT(line_rev(buf, len, 0), 1);
    CHECK(cur >= 1);
    while (cur < 2) {
        CHECK_EQ_INT(feed_read(f, &cur, NULL, &buf, &len, &cap), FEED_GOT);
    }
    CHECK_EQ_INT(line_count(buf, len), 2);
    CHECK_EQ_INT(line_rev(buf, len, 1), 2);
    free(buf);
    feed_free(f);
}

static void count_notify(void *ctx)
{
    (*(int *)ctx)++;
}

static void test_notify_close(void)
{
    struct feed *f = feed_new(8, 0);
    char *buf = NULL;
    size_t len = 0, cap = 0;
    uint64_t cur = 0;
    int calls = 0;

    /* nothing yet: EMPTY at once */
    CHECK_EQ_INT(feed_read(f, &cur, NULL, &buf, &len, &cap), FEED_EMPTY);
    /* every publish calls the hook once, and the event is there to read */
    feed_set_notify(f, count_notify, &calls);
    pub(f, feed_head(f) + 1, "Device", "");
    CHECK_EQ_INT(calls, 1);
    CHECK_EQ_INT(feed_read(f, &cur, NULL, &buf, &len, &cap), FEED_GOT);
    CHECK_EQ_INT(cur, 1);
    CHECK_EQ_INT(feed_read(f, &cur, NULL, &buf, &len, &cap), FEED_EMPTY);
    /* no hook, no call */
    feed_set_notify(f, NULL, NULL);
    pub(f, feed_head(f) + 1, "Device", "");
    CHECK_EQ_INT(calls, 1);
    /* close calls it too, and every later read is CLOSED, events or not */
    feed_set_notify(f, count_notify, &calls);
    feed_close(f);
    CHECK_EQ_INT(calls, 2);
    cur = 0;
    CHECK_EQ_INT(feed_read(f, &cur, NULL, &buf, &len, &cap), FEED_CLOSED);
    free(buf);
    feed_free(f);
    feed_free(NULL);
}

static void test_watchers(void)
{
    struct feed *f = feed_new(2, 0);

    CHECK_EQ_INT(feed_watchers(f), 0);
    feed_watcher_add(f, 1);
    feed_watcher_add(f, 1);
    CHECK_EQ_INT(feed_watchers(f), 2);
    feed_watcher_add(f, -1);
    CHECK_EQ_INT(feed_watchers(f), 1);
    feed_watcher_add(f, -1);
    CHECK_EQ_INT(feed_watchers(f), 0);
    feed_free(f);
}

TEST_MAIN(test_publish_wait, test_filters, test_behind, test_byte_budget, test_buffer_limit,
          test_notify_close, test_watchers)
