/* SPDX-License-Identifier: Apache-2.0 */
/* stream_test.c - the stream loop through stream.h, over socketpairs: the
 * bytes on the wire (head, chunks, terminator), kicks and wake times, a
 * client that leaves or stops reading, the limit, the memory budget, and
 * stop. */
#include "../../../common/common.h"
#include "../../../common/clock.h"
#include "../../../server/stream.h"
#include "../test.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define NEVER UINT64_MAX

/* A scripted source: hands out 'next' once, or 'big' forever; the test
 * thread changes it under 'mu'. */
struct src {
    pthread_mutex_t mu;
    char next[64];    /* handed out once, then cleared */
    char out[64];     /* the copy handed out (borrowed by the loop) */
    bool end;         /* END once 'next' is empty */
    bool big;         /* 64 KiB on every pull */
    uint64_t wake_ms; /* asked wake time when idle */
    int pulls;
    bool freed;
    size_t held;  /* bytes it says it holds, for the budget */
    uint64_t age; /* of those bytes */
    bool shed;    /* shed for the budget */
};

static char big_block[65536];

static const struct stream_limits lim4 = {.unix_max = 4, .per_uid = 4, .tcp_max = 4, .per_peer = 4};

static enum stream_pull src_pull(void *cls, uint64_t now, const char **data, size_t *len,
                                 uint64_t *wake)
{
    struct src *s = cls;
    enum stream_pull r = STREAM_IDLE;

    (void)now;
    pthread_mutex_lock(&s->mu);
    s->pulls++;
    if (s->big) {
        *data = big_block;
        *len = sizeof(big_block);
        r = STREAM_DATA;
    } else if (s->next[0]) {
        memcpy(s->out, s->next, sizeof(s->out));
        s->next[0] = '\0';
        *data = s->out;
        *len = strlen(s->out);
        r = STREAM_DATA;
    } else if (s->end) {
        r = STREAM_END;
    } else {
        *wake = s->wake_ms;
    }
    pthread_mutex_unlock(&s->mu);
    return r;
}

static void src_free(void *cls)
{
    struct src *s = cls;

    pthread_mutex_lock(&s->mu);
    s->freed = true;
    pthread_mutex_unlock(&s->mu);
}

static size_t src_held(void *cls, uint64_t *age)
{
    struct src *s = cls;
    size_t n;

    pthread_mutex_lock(&s->mu);
    n = s->held;
    *age = s->age;
    pthread_mutex_unlock(&s->mu);
    return n;
}

static void src_shed(void *cls, const char **data, size_t *len)
{
    struct src *s = cls;

    pthread_mutex_lock(&s->mu);
    s->held = 0;
    s->shed = true;
    s->big = false;
    pthread_mutex_unlock(&s->mu);
    *data = "BYE\n";
    *len = 4;
}

static const struct stream_src test_src = {src_pull, src_free, src_held, src_shed};

static void src_init(struct src *s, const char *first)
{
    memset(s, 0, sizeof(*s));
    pthread_mutex_init(&s->mu, NULL);
    snprintf(s->next, sizeof(s->next), "%s", first);
    s->wake_ms = NEVER;
}

static void src_set(struct src *s, const char *next, bool end)
{
    pthread_mutex_lock(&s->mu);
    snprintf(s->next, sizeof(s->next), "%s", next);
    s->end = end;
    pthread_mutex_unlock(&s->mu);
}

static bool src_freed(struct src *s, int within_ms)
{
    uint64_t until = clock_mono_ms() + (uint64_t)within_ms;
    struct timespec pause = {0, 5 * 1000000};
    bool f;

    for (;;) {
        pthread_mutex_lock(&s->mu);
        f = s->freed;
        pthread_mutex_unlock(&s->mu);
        if (f || clock_mono_ms() >= until)
            return f;
        nanosleep(&pause, NULL);
    }
}

/* Wait (2 s at most) until the source has been pulled 'n' times. */
static void wait_pulls(struct src *s, int n)
{
    uint64_t until = clock_mono_ms() + 2000;
    struct timespec pause = {0, 1000000};
    int p;

    for (;;) {
        pthread_mutex_lock(&s->mu);
        p = s->pulls;
        pthread_mutex_unlock(&s->mu);
        if (p >= n || clock_mono_ms() >= until)
            break;
        nanosleep(&pause, NULL);
    }
    CHECK(p >= n);
}

/* Read exactly strlen(want) bytes within 2 s and compare. */
static void expect_bytes(int fd, const char *want)
{
    char got[512];
    size_t n = strlen(want), have = 0;
    struct pollfd p = {.fd = fd, .events = POLLIN};
    ssize_t r;

    while (have < n && poll(&p, 1, 2000) == 1) {
        r = read(fd, got + have, n - have);
        if (r <= 0)
            break;
        have += (size_t)r;
    }
    got[have] = '\0';
    CHECK_STREQ(got, want);
}

/* EOF within 2 s, nothing before it. */
static void expect_eof(int fd)
{
    struct pollfd p = {.fd = fd, .events = POLLIN};
    char c;

    CHECK_EQ_INT(poll(&p, 1, 2000), 1);
    CHECK_EQ_INT(read(fd, &c, 1), 0);
}

/* Nothing to read for 'ms'. */
static void expect_quiet(int fd, int ms)
{
    struct pollfd p = {.fd = fd, .events = POLLIN};

    CHECK_EQ_INT(poll(&p, 1, ms), 0);
}

/* A loop with one stream of 's' on a socketpair; sv[1] is the client's end. */
static struct streams *one_stream(unsigned stall_s, struct src *s, bool chunked, const char *head,
                                  int sv[2])
{
    struct streams *ss = NULL;

    CHECK_OK(streams_start(&lim4, stall_s, &ss));
    CHECK_OK(socketpair(AF_UNIX, SOCK_STREAM, 0, sv));
    CHECK_OK(streams_adopt(ss, sv[0], head, chunked, &test_src, s));
    return ss;
}

static void test_chunks_kick_end(void)
{
    struct streams *ss;
    struct src s;
    int sv[2];

    src_init(&s, "a\n");
    ss = one_stream(30, &s, true, "HEAD\r\n\r\n", sv);
    /* the head, then what the source had at once */
    expect_bytes(sv[1], "HEAD\r\n\r\n2\r\na\n\r\n");
    CHECK_EQ_INT(streams_count(ss), 1);
    /* idle until kicked */
    wait_pulls(&s, 2);
    src_set(&s, "bc\n", false);
    expect_quiet(sv[1], 100);
    streams_kick(ss);
    expect_bytes(sv[1], "3\r\nbc\n\r\n");
    /* the end: the last chunk, then the socket closes and the source goes */
    src_set(&s, "", true);
    streams_kick(ss);
    expect_bytes(sv[1], "0\r\n\r\n");
    expect_eof(sv[1]);
    CHECK(src_freed(&s, 2000));
    CHECK_EQ_INT(streams_count(ss), 0);
    close(sv[1]);
    streams_stop(ss);
    streams_stop(NULL);
}

static void test_raw_and_wake_time(void)
{
    struct streams *ss;
    struct src s;
    int sv[2];
    uint64_t t0;

    src_init(&s, "x\n");
    t0 = clock_mono_ms();
    s.wake_ms = t0 + 150;
    ss = one_stream(30, &s, false, "H\r\n\r\n", sv);
    /* not chunked: the bytes as they are */
    expect_bytes(sv[1], "H\r\n\r\nx\n");
    /* no kick: once idle, pulled again at the time the source asked for */
    wait_pulls(&s, 2);
    src_set(&s, "y\n", true);
    expect_bytes(sv[1], "y\n");
    CHECK(clock_mono_ms() - t0 >= 140);
    /* and the end is the socket closing, without a last chunk */
    expect_eof(sv[1]);
    CHECK(src_freed(&s, 2000));
    close(sv[1]);
    streams_stop(ss);
}

static void test_client_leaves(void)
{
    struct streams *ss;
    struct src s;
    int sv[2];

    src_init(&s, "");
    ss = one_stream(30, &s, true, "H\r\n\r\n", sv);
    expect_bytes(sv[1], "H\r\n\r\n");
    /* an idle stream whose client closes is freed without a write */
    close(sv[1]);
    CHECK(src_freed(&s, 2000));
    CHECK_EQ_INT(streams_count(ss), 0);
    streams_stop(ss);
}

/* CPU time of this process in ms. */
static uint64_t cpu_ms(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

/* As http_request.c hands a watch over: the loop gets a duplicate while the first
 * descriptor of the socket is still open. A client that leaves then frees
 * the stream, and no event for it may follow (ASan: use after free; any
 * build: the loop spins on a level-triggered hang-up). */
static void test_client_leaves_shared_fd(void)
{
    struct streams *ss = NULL;
    struct src s;
    int sv[2];
    uint64_t c0;

    src_init(&s, "");
    CHECK_OK(streams_start(&lim4, 30, &ss));
    CHECK_OK(socketpair(AF_UNIX, SOCK_STREAM, 0, sv));
    CHECK_OK(streams_adopt(ss, dup(sv[0]), "H\r\n\r\n", true, &test_src, &s));
    expect_bytes(sv[1], "H\r\n\r\n");
    close(sv[1]);
    CHECK(src_freed(&s, 2000));
    c0 = cpu_ms();
    usleep(300 * 1000);
    CHECK(cpu_ms() - c0 < 100);
    close(sv[0]);
    streams_stop(ss);
}

static void test_stalled_client(void)
{
    struct streams *ss;
    struct src s;
    int sv[2];
    uint64_t t0;

    src_init(&s, "");
    s.big = true;
    t0 = clock_mono_ms();
    ss = one_stream(1, &s, true, "H\r\n\r\n", sv);
    /* the client reads nothing: the socket fills, pulls stop, and after
     * the stall time (1 s) the stream is dropped */
    CHECK(src_freed(&s, 5000));
    CHECK(clock_mono_ms() - t0 >= 900);
    pthread_mutex_lock(&s.mu);
    CHECK(s.pulls < 200); /* no busy loop on a full socket */
    pthread_mutex_unlock(&s.mu);
    close(sv[1]);
    streams_stop(ss);
}

static void test_limit_and_stop(void)
{
    struct streams *ss;
    struct src a, b;
    int sa[2], sb[2];
    struct stream_limits lim1 = {.unix_max = 1, .per_uid = 1, .tcp_max = 1, .per_peer = 1};

    CHECK_OK(streams_start(&lim1, 30, &ss));
    CHECK_OK(socketpair(AF_UNIX, SOCK_STREAM, 0, sa));
    CHECK_OK(socketpair(AF_UNIX, SOCK_STREAM, 0, sb));
    src_init(&a, "");
    src_init(&b, "");
    CHECK_OK(streams_adopt(ss, sa[0], "A\r\n\r\n", true, &test_src, &a));
    expect_bytes(sa[1], "A\r\n\r\n");
    /* over the limit: refused, its socket closed and its source freed */
    CHECK_EQ_INT(streams_adopt(ss, sb[0], "B\r\n\r\n", true, &test_src, &b), ERR_UNAVAIL);
    CHECK(b.freed);
    expect_eof(sb[1]);
    /* stop: a last pull (this source ends), the last chunk, the close */
    src_set(&a, "", true);
    streams_stop(ss);
    CHECK(a.freed);
    expect_bytes(sa[1], "0\r\n\r\n");
    expect_eof(sa[1]);
    close(sa[1]);
    close(sb[1]);
}

/* A client that reads nothing is dropped after the stall time even when
 * every byte fits in its socket; one that reads stays. */
static void test_idle_unread_client(void)
{
    struct streams *ss = NULL;
    struct src idle, reader;
    int si[2], sr[2];
    uint64_t t0 = clock_mono_ms();

    src_init(&idle, "a\n");
    src_init(&reader, "b\n");
    CHECK_OK(streams_start(&lim4, 1, &ss));
    CHECK_OK(socketpair(AF_UNIX, SOCK_STREAM, 0, si));
    CHECK_OK(socketpair(AF_UNIX, SOCK_STREAM, 0, sr));
    CHECK_OK(streams_adopt(ss, si[0], "H\r\n\r\n", true, &test_src, &idle));
    CHECK_OK(streams_adopt(ss, sr[0], "H\r\n\r\n", true, &test_src, &reader));
    expect_bytes(sr[1], "H\r\n\r\n2\r\nb\n\r\n");
    CHECK(src_freed(&idle, 5000));
    CHECK(clock_mono_ms() - t0 >= 900);
    usleep(500 * 1000);
    CHECK(!src_freed(&reader, 0));
    CHECK_EQ_INT(streams_count(ss), 1);
    close(si[1]);
    close(sr[1]);
    streams_stop(ss);
}

/* A TCP connection from 'addr' (a loopback address) to 'lfd'; *client
 * gets the client's end, the result is the server's. */
static int tcp_pair(int lfd, const char *addr, int *client)
{
    struct sockaddr_in sa = {.sin_family = AF_INET};
    socklen_t len = sizeof(sa);
    int c = socket(AF_INET, SOCK_STREAM, 0);

    CHECK(c >= 0);
    inet_pton(AF_INET, addr, &sa.sin_addr);
    CHECK_OK(bind(c, (struct sockaddr *)&sa, sizeof(sa)));
    CHECK_OK(getsockname(lfd, (struct sockaddr *)&sa, &len));
    CHECK_OK(connect(c, (struct sockaddr *)&sa, len));
    *client = c;
    return accept(lfd, NULL, NULL);
}

/* TCP streams count against their client's budget and TCP's, never the
 * unix socket's: a full TCP budget leaves the unix socket's streams. On
 * loopback a client is a local user, whatever its address (127.0.0.1 and
 * 127.0.0.2 are this process's); a unix socket's user has its share. */
static void test_budgets(void)
{
    struct stream_limits lim = {.unix_max = 3, .per_uid = 2, .tcp_max = 3, .per_peer = 2};
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    struct streams *ss = NULL;
    struct src s[8]; /* s[2] and s[4], refused and freed, serve again */
    int lfd = socket(AF_INET, SOCK_STREAM, 0), c[6], u[3][2], i;

    for (i = 0; i < 8; i++)
        src_init(&s[i], "");
    CHECK_OK(bind(lfd, (struct sockaddr *)&sa, sizeof(sa)));
    CHECK_OK(listen(lfd, 16));
    CHECK_OK(streams_start(&lim, 30, &ss));
    CHECK_OK(streams_adopt(ss, tcp_pair(lfd, "127.0.0.1", &c[0]), "H", true, &test_src, &s[0]));
    CHECK_OK(streams_adopt(ss, tcp_pair(lfd, "127.0.0.1", &c[1]), "H", true, &test_src, &s[1]));
    CHECK_EQ_INT(streams_adopt(ss, tcp_pair(lfd, "127.0.0.1", &c[2]), "H", true, &test_src, &s[2]),
                 ERR_UNAVAIL); /* the client's 2 */
    CHECK_EQ_INT(streams_adopt(ss, tcp_pair(lfd, "127.0.0.2", &c[3]), "H", true, &test_src, &s[3]),
                 ERR_UNAVAIL); /* the same user */
    c[4] = -1;
    for (i = 0; i < 3; i++)
        CHECK_OK(socketpair(AF_UNIX, SOCK_STREAM, 0, u[i]));
    CHECK_OK(streams_adopt(ss, u[0][0], "H", true, &test_src, &s[5]));
    CHECK_OK(streams_adopt(ss, u[1][0], "H", true, &test_src, &s[6]));
    CHECK_EQ_INT(streams_adopt(ss, u[2][0], "H", true, &test_src, &s[7]), ERR_UNAVAIL);
    CHECK_EQ_INT(streams_count(ss), 4);
    /* a stream that ends gives its client's slot back */
    close(c[0]);
    CHECK(src_freed(&s[0], 2000));
    CHECK_OK(streams_adopt(ss, tcp_pair(lfd, "127.0.0.1", &c[5]), "H", true, &test_src, &s[2]));
    streams_stop(ss);
    for (i = 0; i < 6; i++)
        if (c[i] >= 0)
            close(c[i]);
    for (i = 0; i < 3; i++)
        close(u[i][1]);
    close(lfd);
}

/* A budget of 150 bytes; three sources say they hold 100 each (the total
 * counts them adopted or not). The first, alone in the loop, is shed with
 * its socket full in the middle of a chunk: closed without its last line.
 * Of the other two, the one whose bytes are older is shed and ends with its
 * last line (no byte of a chunk was half written); then the total fits and
 * the third stays. */
static struct src *budget_src;

static size_t budget_total(void *ctx)
{
    size_t i, n = 0;

    (void)ctx;
    for (i = 0; i < 3; i++)
        n += src_held(&budget_src[i], &(uint64_t){0});
    return n;
}

static void test_memory_budget(void)
{
    struct streams *ss = NULL;
    struct src s[3]; /* ages 5 (full socket), 3 (idle), 9 (idle) */
    int sv[3][2], i;
    char buf[65536];
    ssize_t r;

    budget_src = s;
    for (i = 0; i < 3; i++) {
        src_init(&s[i], "");
        s[i].held = 100;
        CHECK_OK(socketpair(AF_UNIX, SOCK_STREAM, 0, sv[i]));
    }
    s[0].age = 5;
    s[0].big = true;
    s[1].age = 3;
    s[2].age = 9;
    CHECK_OK(streams_start(&lim4, 30, &ss));
    streams_set_budget(ss, 150, budget_total, NULL);
    CHECK_OK(streams_adopt(ss, sv[0][0], "H\r\n\r\n", true, &test_src, &s[0]));
    CHECK(src_freed(&s[0], 2000));
    CHECK_OK(streams_adopt(ss, sv[1][0], "H\r\n\r\n", true, &test_src, &s[1]));
    CHECK_OK(streams_adopt(ss, sv[2][0], "H\r\n\r\n", true, &test_src, &s[2]));
    expect_bytes(sv[1][1], "H\r\n\r\n4\r\nBYE\n\r\n0\r\n\r\n");
    expect_eof(sv[1][1]);
    CHECK(src_freed(&s[1], 2000));
    do /* the first stream: its bytes, then the end, without its last line */
        r = read(sv[0][1], buf, sizeof(buf));
    while (r > 0);
    CHECK_EQ_INT(r, 0);
    CHECK(s[0].shed && s[1].shed && !s[2].shed);
    expect_bytes(sv[2][1], "H\r\n\r\n");
    expect_quiet(sv[2][1], 100);
    CHECK(!src_freed(&s[2], 0));
    streams_stop(ss);
    for (i = 0; i < 3; i++)
        close(sv[i][1]);
}

TEST_MAIN(test_chunks_kick_end, test_raw_and_wake_time, test_client_leaves,
          test_client_leaves_shared_fd, test_stalled_client, test_limit_and_stop,
          test_idle_unread_client, test_budgets, test_memory_budget)
