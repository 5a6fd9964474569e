/* SPDX-License-Identifier: Apache-2.0 */
/* http_warden.c - the connections of podresd's HTTP server as a whole,
 * beside libmicrohttpd: every open connection is tracked from its accept
 * to its close; a warden thread closes those whose request head is late
 * and sheds idle TCP connections of a nearly full daemon; and an accept
 * that fails for want of a descriptor or memory is handled (a reserve
 * descriptor, shedding, a back-off) so the unix socket keeps answering.
 * Not the request life cycle (http_request.c). */
#define LOG_MOD "http"
#include "../common/common.h"
#include "../common/clock.h"
#include "http_int.h"
#include "peeruid.h"

#include <assert.h>
#include <fcntl.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

/* A request's head must be in within this from the connection's accept or
 * its previous answer: libmicrohttpd's timeout restarts at every byte, so a
 * client sending a byte every 10 s would hold its connection for good. */
#define HEAD_DEADLINE_MS 30000

/* The warden sheds idle TCP connections of a daemon at this share of its
 * limit, oldest first, down to SHED_TO_PERCENT: past the limit a new
 * client waits in the backlog until an idle one times out (30 s). */
#define SHED_AT_PERCENT 90
#define SHED_TO_PERCENT 75

/* Idle TCP connections shut, oldest first, each time an accept on the unix
 * socket fails for want of a descriptor. */
#define SHED_ON_EMFILE 8

/* An accept that failed for want of a descriptor or memory, with the
 * reserve spent, waits this long before libmicrohttpd retries: its listener
 * would retry at once, for as long as the connection waits. */
#define ACCEPT_BACKOFF_MS 20

/* Set on a thread-per-connection daemon's thread when libmicrohttpd could
 * not start the thread of the connection it has just accepted: its close
 * notice follows at once, and the client gets the prebuilt 503. */
static _Thread_local bool thread_failed;

/* The share of the unix socket's connections one user may hold: a client
 * that floods it (another user's, one gone wrong) leaves the rest to the
 * syncer and the device plugins. Its connections over it are closed at
 * accept. */
#define UNIX_PER_UID_PERCENT 50

static atomic_ullong nofd_logged_ms; /* monotonic ms of the last log, or 0 */
static atomic_ullong user_logged_ms; /* the same, for the per-user bound */

/* ---- the connections ---- */

/* Make libmicrohttpd close 'c': its poll sees the end of the stream. */
static void shut(struct conn *c)
{
    shutdown(c->fd, SHUT_RDWR);
    c->shut = true;
}

/* Whether the user of 'c', new on the unix socket, holds more than its
 * share of its connections; counted and logged (once a minute) when so.
 * Caller holds 'mu'. */
static bool over_user_share(struct http *h, const struct conn *c)
{
    unsigned share = c->l->limit * UNIX_PER_UID_PERCENT / 100, n = 0;
    const struct conn *o;

    for (o = h->conns; o; o = o->next)
        n += o->l == c->l && o->has_uid && o->uid == c->uid && !o->shut;
    if (n <= (share ? share : 1))
        return false;
    metrics_count(h->api->metrics, METRICS_USER_LIMIT);
    if (http_log_due(&user_logged_ms))
        log_warn("closing a new connection of uid %u on the unix socket: it holds %u of its "
                 "%u connections, the most one user may (logged once a minute)",
                 (unsigned)c->uid, n - 1, c->l->limit);
    return true;
}

static void conn_add(struct listener *l, struct MHD_Connection *conn, void **socket_context)
{
    const union MHD_ConnectionInfo *ci = MHD_get_connection_info(conn,
                                                                 MHD_CONNECTION_INFO_CONNECTION_FD);
    struct http *h = l->h;
    struct conn *c = ci ? calloc(1, sizeof(*c)) : NULL;

    if (!c)
        return; /* untracked: libmicrohttpd's own timeout alone applies */
    c->l = l;
    c->fd = ci->connect_fd;
    c->since_ms = clock_mono_ms();
    c->has_uid = !l->tcp && peer_uid(c->fd, &c->uid);
    pthread_mutex_lock(&h->mu);
    c->next = h->conns;
    if (h->conns)
        h->conns->prev = c;
    h->conns = c;
    if (c->has_uid && over_user_share(h, c))
        shut(c);
    pthread_mutex_unlock(&h->mu);
    *socket_context = c;
}

static void conn_del(struct http *h, struct conn *c)
{
    pthread_mutex_lock(&h->mu);
    if (c->prev)
        c->prev->next = c->next;
    else
        h->conns = c->next;
    if (c->next)
        c->next->prev = c->prev;
    pthread_mutex_unlock(&h->mu);
    free(c);
}

/* libmicrohttpd's notice of a connection's accept and of its close (before
 * the close of its descriptor: the warden may shut it down until then). */
void http_on_conn(void *cls, struct MHD_Connection *conn, void **socket_context,
                  enum MHD_ConnectionNotificationCode toe)
{
    struct listener *l = cls;

    if (toe == MHD_CONNECTION_NOTIFY_STARTED) {
        thread_failed = false;
        conn_add(l, conn, socket_context);
        return;
    }
    if (thread_failed) {
        thread_failed = false;
        http_refuse_nomem(conn);
    }
    if (*socket_context) {
        conn_del(l->h, *socket_context);
        *socket_context = NULL;
    }
}

/* A request's head is in ('busy'), or its answer is over. */
void http_conn_mark(struct listener *l, struct MHD_Connection *conn, bool busy)
{
    const union MHD_ConnectionInfo *ci = MHD_get_connection_info(
        conn, MHD_CONNECTION_INFO_SOCKET_CONTEXT);
    struct conn *c = ci ? ci->socket_context : NULL;

    if (!c)
        return;
    assert(c->l == l); /* the daemon's callbacks name its own listener */
    pthread_mutex_lock(&l->h->mu);
    c->busy = busy;
    c->since_ms = clock_mono_ms();
    pthread_mutex_unlock(&l->h->mu);
}

/* The oldest connection of 'l' without a request, or NULL. */
static struct conn *oldest_idle(struct http *h, const struct listener *l)
{
    struct conn *c, *old = NULL;

    for (c = h->conns; c; c = c->next) {
        if (c->l == l && !c->busy && !c->shut && (!old || c->since_ms < old->since_ms))
            old = c;
    }
    return old;
}

/* Shed idle connections of 'l', oldest first, when it is nearly full. */
static void shed(struct http *h, struct listener *l)
{
    unsigned live = 0;
    struct conn *c;

    for (c = h->conns; c; c = c->next)
        live += c->l == l && !c->shut;
    if (live * 100 < l->limit * SHED_AT_PERCENT)
        return;
    log_debug("shedding idle TCP connections: %u of %u open", live, l->limit);
    while (live * 100 > l->limit * SHED_TO_PERCENT) {
        c = oldest_idle(h, l);
        if (!c)
            return;
        shut(c);
        live--;
    }
}

/* One look a second: a connection whose request head is not in
 * HEAD_DEADLINE_MS after its accept or its last answer is closed; a TCP
 * daemon nearly full sheds idle connections; a spent reserve descriptor is
 * taken again. Called with 'mu' held. */
static void warden_tick(struct http *h)
{
    uint64_t now = clock_mono_ms();
    struct conn *c;

    for (c = h->conns; c; c = c->next) {
        if (!c->busy && !c->shut && now - c->since_ms >= HEAD_DEADLINE_MS) {
            log_debug("closing a connection without a whole request for %d s",
                      HEAD_DEADLINE_MS / 1000);
            shut(c);
        }
    }
    if (h->tcp_l.d)
        shed(h, &h->tcp_l);
    if (h->reserve_fd < 0)
        h->reserve_fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
}

/* ---- the warden thread ---- */

static void *warden(void *arg)
{
    struct http *h = arg;
    struct timespec ts;

    pthread_mutex_lock(&h->mu);
    while (!h->stop) {
        ts = clock_mono_after(1000);
        pthread_cond_timedwait(&h->cv, &h->mu, &ts);
        if (!h->stop)
            warden_tick(h);
    }
    pthread_mutex_unlock(&h->mu);
    return NULL;
}

/* The lock and condition of the warden; its thread starts once the
 * listeners are up (http_warden_start). */
void http_warden_init(struct http *h)
{
    pthread_condattr_t ca;

    pthread_mutex_init(&h->mu, NULL);
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&h->cv, &ca);
    pthread_condattr_destroy(&ca);
}

err_t http_warden_start(struct http *h)
{
    int e;

    assert(!h->warden_on);
    e = pthread_create(&h->warden, NULL, warden, h);
    if (e) {
        log_err("cannot start the connection warden: %s", strerror(e)); /* not errno */
        return ERR_IO;
    }
    h->warden_on = true;
    return ERR_OK;
}

void http_warden_stop(struct http *h)
{
    if (!h->warden_on)
        return;
    pthread_mutex_lock(&h->mu);
    h->stop = true;
    pthread_cond_signal(&h->cv);
    pthread_mutex_unlock(&h->mu);
    pthread_join(h->warden, NULL);
    h->warden_on = false;
}

/* ---- accepts that fail for want of a descriptor or memory ---- */

/* The oldest idle TCP connections, up to 'n', are shut. Caller holds mu. */
static void shed_tcp(struct http *h, unsigned n)
{
    struct conn *c, *old;

    while (n--) {
        old = NULL;
        for (c = h->conns; c; c = c->next) {
            if (c->l->tcp && !c->busy && !c->shut && (!old || c->since_ms < old->since_ms))
                old = c;
        }
        if (!old)
            return;
        shut(old);
    }
}

/* Take the connection waiting on 'l' with the reserve descriptor: one on
 * the unix socket is served, one on TCP closed. Caller holds mu. Returns a
 * unix connection's descriptor to add to the daemon, else -1. */
static int accept_with_reserve(struct http *h, struct listener *l, struct sockaddr_storage *ss,
                               socklen_t *len)
{
    int fd;

    close(h->reserve_fd);
    *len = sizeof(*ss);
    fd = accept4(l->listen_fd, (struct sockaddr *)ss, len, SOCK_CLOEXEC | SOCK_NONBLOCK);
    if (fd >= 0 && l->tcp) {
        close(fd);
        fd = -1;
    }
    /* Fails while a unix connection holds its place: the warden retries. */
    h->reserve_fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
    return fd;
}

/* Count an accept that failed for want of resources; log it once a minute. */
static void accept_note(const struct listener *l, int err)
{
    metrics_count(l->h->api->metrics,
                  err == EMFILE || err == ENFILE ? METRICS_FD_EXHAUSTED : METRICS_NOMEM);
    if (http_log_due(&nofd_logged_ms))
        log_warn("cannot accept a connection on %s: %s; closing new TCP connections and "
                 "shedding idle ones for the unix socket's (logged once a minute)",
                 l->tcp ? "TCP" : "the unix socket", strerror(err));
}

/* libmicrohttpd 0.9.75's accept on 'l' failed with 'err', which it tells
 * only through its logger. Out of descriptors, a listener with no
 * connection retries at once for as long as the connection waits (100 %
 * CPU), and one with connections stops accepting until one of them closes:
 * the unix socket would go deaf. So the waiting connection is taken with
 * the reserve descriptor (served on the unix socket, closed on TCP); for
 * the unix socket idle TCP connections are shed too, to make room for the
 * next one and the reserve; without a reserve the thread backs off before
 * libmicrohttpd retries. */
static void accept_failed(struct listener *l, int err)
{
    struct http *h = l->h;
    struct sockaddr_storage ss;
    socklen_t len = 0;
    struct timespec pause = {.tv_nsec = ACCEPT_BACKOFF_MS * 1000000L};
    int fd = -1;
    bool took = false;

    if (err != EMFILE && err != ENFILE && err != ENOMEM && err != ENOBUFS)
        return;
    accept_note(l, err);
    pthread_mutex_lock(&h->mu);
    if (!l->tcp)
        shed_tcp(h, SHED_ON_EMFILE);
    if (h->reserve_fd >= 0 && err != ENOMEM && err != ENOBUFS) {
        fd = accept_with_reserve(h, l, &ss, &len);
        took = true;
    }
    pthread_mutex_unlock(&h->mu);
    /* It becomes libmicrohttpd's, closed by it even on failure. */
    if (fd >= 0 && MHD_add_connection(l->d, fd, (struct sockaddr *)&ss, len) != MHD_YES)
        log_debug("cannot hand a connection taken at the descriptor limit to libmicrohttpd");
    if (!took)
        nanosleep(&pause, NULL);
}

/* libmicrohttpd's own messages; 'fmt' is its printf format. Two of them
 * are acted on: a failed accept, and a connection without a thread. */
__attribute__((format(printf, 2, 0))) void http_mhd_log(void *cls, const char *fmt, va_list ap)
{
    int err = errno; /* the failed call's, for a failed accept */
    char msg[512];
    size_t n;

    if (strncmp(fmt, "Error accepting connection", 26) == 0)
        accept_failed(cls, err);
    else if (strncmp(fmt, "Failed to create a", 18) == 0)
        thread_failed = true;
    if (http_handed_over)
        return;
    vsnprintf(msg, sizeof(msg), fmt, ap);
    n = strlen(msg);
    while (n && msg[n - 1] == '\n')
        msg[--n] = '\0';
    log_debug("libmicrohttpd: %s", msg);
}
