/* SPDX-License-Identifier: Apache-2.0 */
/* responder.h - a tiny HTTP server thread for the syncer's unit tests that
 * talk to an API server: it answers connections one at a time, in order,
 * with canned replies (the reply closes the connection), and keeps each
 * request's head and body for the checks. Include after test.h. */
#ifndef PODRES_TEST_RESPONDER_H
#define PODRES_TEST_RESPONDER_H
#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "../../../common/clock.h"

#define RESPONDER_MAX 12

/* One canned answer: 'head' (status line, headers, blank line and maybe a
 * body) is sent, then after 'pause_ms' the optional 'more'. */
struct reply {
    const char *head; /* sent first */
    const char *more; /* sent after the pause, or NULL */
    int pause_ms;     /* between them */
};

struct responder {
    int fd;                              /* listening socket */
    int port;                            /* its port */
    struct reply replies[RESPONDER_MAX]; /* in order, one per connection */
    int n;                               /* replies to give */
    int served;                          /* connections answered */
    char req[RESPONDER_MAX][4096];       /* each request: head and body */
    uint64_t arrived_ms[RESPONDER_MAX];  /* when each request was read (CLOCK_MONOTONIC) */
    uint64_t sent_ms[RESPONDER_MAX];     /* when each answer's head was written */
    pthread_t th;                        /* the serving thread */
};

#define HEAD_200 "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nConnection: close\r\n\r\n"

static void responder_send(int fd, const char *s)
{
    size_t len = strlen(s), off = 0;
    ssize_t w;

    while (off < len) {
        w = send(fd, s + off, len - off, MSG_NOSIGNAL);
        if (w <= 0)
            return;
        off += (size_t)w;
    }
}

/* Read a request (headers, then Content-Length bytes of body) into 'buf'. */
static void responder_read(int fd, char *buf, size_t cap)
{
    size_t len = 0, want = 0;
    const char *end = NULL, *cl;
    ssize_t r;

    while (len + 1 < cap) {
        r = recv(fd, buf + len, cap - 1 - len, 0);
        if (r <= 0)
            break;
        len += (size_t)r;
        buf[len] = '\0';
        if (!end) {
            end = strstr(buf, "\r\n\r\n");
            if (!end)
                continue;
            cl = strcasestr(buf, "\r\nContent-Length:");
            want = (size_t)(end - buf) + 4 + (cl && cl < end ? strtoul(cl + 17, NULL, 10) : 0);
        }
        if (len >= want)
            break;
    }
    buf[len] = '\0';
}

static void *responder_serve(void *arg)
{
    struct responder *s = arg;
    struct pollfd p = {.fd = s->fd, .events = POLLIN};
    struct timespec ts;
    int c, i;

    for (i = 0; i < s->n; i++) {
        if (poll(&p, 1, 10000) != 1)
            break; /* the client gave up: the test's checks say so */
        c = accept(s->fd, NULL, NULL);
        if (c < 0)
            break;
        responder_read(c, s->req[i], sizeof(s->req[i]));
        s->arrived_ms[i] = clock_mono_ms();
        responder_send(c, s->replies[i].head);
        s->sent_ms[i] = clock_mono_ms();
        if (s->replies[i].more) {
            ts.tv_sec = s->replies[i].pause_ms / 1000;
            ts.tv_nsec = (long)(s->replies[i].pause_ms % 1000) * 1000000L;
            nanosleep(&ts, NULL);
            responder_send(c, s->replies[i].more);
        }
        /* counted before the close the client waits for: a test reads
         * 'served' as soon as its call returns */
        __atomic_store_n(&s->served, i + 1, __ATOMIC_SEQ_CST);
        shutdown(c, SHUT_WR);
        close(c);
    }
    return NULL;
}

/* Listen on 127.0.0.1 and answer 'n' connections with 'r' in order. */
static void responder_start(struct responder *s, const struct reply *r, int n)
{
    struct sockaddr_in a = {.sin_family = AF_INET};
    socklen_t alen = sizeof(a);
    int one = 1;

    memset(s, 0, sizeof(*s));
    memcpy(s->replies, r, sizeof(*r) * (size_t)n);
    s->n = n;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    s->fd = socket(AF_INET, SOCK_STREAM, 0);
    setsockopt(s->fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    CHECK(bind(s->fd, (struct sockaddr *)&a, sizeof(a)) == 0);
    CHECK(listen(s->fd, 8) == 0);
    getsockname(s->fd, (struct sockaddr *)&a, &alen);
    s->port = ntohs(a.sin_port);
    CHECK(pthread_create(&s->th, NULL, responder_serve, s) == 0);
}

/* Wait for the replies to be given, and stop listening. */
static void responder_stop(struct responder *s)
{
    pthread_join(s->th, NULL);
    close(s->fd);
}

#endif
