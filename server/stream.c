/* SPDX-License-Identifier: Apache-2.0 */
/* stream.c - the stream loop: one thread, one epoll set, every watch stream.
 * A stream costs its struct and whatever its source buffers; the kernel
 * keeps the socket's bytes. Writes never block: what does not fit waits for
 * EPOLLOUT, and nothing more is pulled from the source until it is out, so
 * a slow client holds back only its own cursor. What the sources hold for
 * their streams may be bounded (streams_set_budget): past the bound the
 * streams furthest behind are shed, oldest first. */
#define LOG_MOD "stream"
#include "../common/common.h"
#include "../common/clock.h"
#include "peeruid.h"
#include "stream.h"

#include <assert.h>
#include <fcntl.h>
#include <linux/sockios.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdatomic.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#define PULLS_PER_TURN 16 /* then the other streams get their turn */
#define EVENTS_PER_WAIT 64
#define MAX_WAIT_MS 60000
#define NEVER UINT64_MAX
#define PEER_LEN 17         /* a kind, then up to 16 bytes of address or a uid */
#define KEY_LOCAL_USER 0xfe /* a key's kind: a local user on loopback TCP */
#define SHED_LOG_MS 10000   /* at most one log line about sheds this often */

/* A stream whose source holds bytes, when the budget is exceeded. */
struct cand {
    struct stream *st; /* borrowed */
    uint64_t age;      /* of its oldest held bytes: lower is older */
    size_t bytes;      /* held */
};

/* The watches of one client: a TCP peer address, the local user of a
 * loopback TCP connection, or the user of a unix socket connection. */
struct peer {
    unsigned char addr[PEER_LEN]; /* as peer_of() writes it */
    size_t n;                     /* streams open */
};

struct stream {
    struct stream *prev, *next; /* in 'live' (loop thread) or 'incoming' */
    int fd;
    const struct stream_src *src;
    void *cls;
    bool chunked;                 /* HTTP/1.1 chunks, else raw until close */
    char *head;                   /* the response head, freed once written */
    char size_line[24];           /* the current chunk's size line */
    struct iovec iov[5];          /* bytes not yet written: head, size, data, CRLF, end */
    int iov_at, iov_n;            /* first unwritten entry, entries used */
    int chunk_at;                 /* entry where the queued chunk starts, or -1 */
    void *chunk_base;             /* that entry's start as queued */
    uint64_t wake_ms;             /* pull by then even without a kick */
    uint64_t progress_ms;         /* last write that took bytes */
    bool ending;                  /* the last bytes are queued: close when out */
    bool want_out;                /* EPOLLOUT is in the interest set */
    bool pull_now;                /* serve at the next turn */
    bool dead;                    /* the client went away: close at this turn */
    bool tcp;                     /* counted in the TCP budget, else the unix socket's */
    unsigned char peer[PEER_LEN]; /* its client, as client_of() writes it */
    int held;                     /* bytes written and not yet read (SIOCOUTQ) */
    uint64_t read_ms;             /* last time the client was seen reading */
};

struct streams {
    pthread_t th;
    int ep;                   /* the epoll set */
    int efd;                  /* eventfd: kicks, adoptions, stop */
    struct stream_limits lim; /* the budgets */
    uint64_t stall_ms;        /* drop a client taking nothing this long */
    pthread_mutex_t mu;       /* guards 'incoming', 'stopping', the counts, 'peers' */
    struct stream *incoming;  /* adopted, not yet in the loop */
    bool stopping;
    size_t n_unix, n_tcp; /* streams of each budget */
    struct peer *peers;   /* clients with streams, lim.unix_max + lim.tcp_max slots */
    size_t npeers;        /* used in 'peers' */
    atomic_size_t count;  /* adopted and not yet freed */
    atomic_bool kicked;   /* a kick is pending in 'efd' */
    struct stream *live;  /* the loop thread's own list */
    /* The budget as set (guarded by 'mu'), then as the loop uses it. */
    size_t set_max;                 /* bytes */
    size_t (*set_total)(void *ctx); /* what all sources hold; NULL: no budget */
    void *set_ctx;                  /* its argument */
    size_t max_held;                /* the loop's copies of the three: bytes */
    size_t (*total)(void *ctx);     /* set_total */
    void *total_ctx;                /* set_ctx */
    struct cand *cand;              /* room for every stream admitted */
    size_t ncand;                   /* its entries */
    size_t shed_unlogged;           /* sheds not logged yet */
    size_t shed_all;                /* sheds since start */
    uint64_t shed_logged_ms;        /* the last log line about them */
    bool shed_ever_logged;          /* whether there was one */
};

static void wake_loop(struct streams *s)
{
    uint64_t one = 1;

    /* Only fails when the counter is full, and then the loop wakes anyway. */
    if (write(s->efd, &one, sizeof(one)) < 0 && errno != EAGAIN)
        log_warn("cannot wake the stream loop: %s", strerror(errno));
}

void streams_kick(void *arg)
{
    struct streams *s = arg;

    if (atomic_load(&s->count) == 0 || atomic_exchange(&s->kicked, true))
        return;
    wake_loop(s);
}

size_t streams_count(struct streams *s)
{
    return atomic_load(&s->count);
}

/* The slot of 'key' in 'peers', or NULL. Caller holds 'mu'. */
static struct peer *find_peer(struct streams *s, const unsigned char *key)
{
    size_t i;

    for (i = 0; i < s->npeers; i++) {
        if (memcmp(s->peers[i].addr, key, PEER_LEN) == 0)
            return &s->peers[i];
    }
    return NULL;
}

/* Count 'st' in its budgets, or ERR_UNAVAIL when one is spent. The unix
 * socket's budget is its own: TCP clients, who need no privilege, cannot
 * take the syncer's watch; and within each budget one client (a user, a
 * remote address) holds at most its share. Caller holds 'mu'. */
static err_t admit(struct streams *s, struct stream *st)
{
    size_t *n = st->tcp ? &s->n_tcp : &s->n_unix;
    size_t max = st->tcp ? s->lim.tcp_max : s->lim.unix_max;
    size_t each = st->tcp ? s->lim.per_peer : s->lim.per_uid;
    struct peer *p = find_peer(s, st->peer);

    if (*n >= max || each == 0 || (p && p->n >= each))
        return ERR_UNAVAIL;
    if (!p) {
        p = &s->peers[s->npeers++]; /* fewer clients than streams: it fits */
        memcpy(p->addr, st->peer, PEER_LEN);
        p->n = 0;
    }
    p->n++;
    (*n)++;
    return ERR_OK;
}

/* Undo admit(). Caller holds 'mu'. */
static void release(struct streams *s, struct stream *st)
{
    struct peer *p;

    if (st->tcp)
        s->n_tcp--;
    else
        s->n_unix--;
    p = find_peer(s, st->peer);
    assert(p && p->n > 0);
    if (--p->n == 0)
        *p = s->peers[--s->npeers];
}

/* The client of 'fd' into 'key': for a unix socket its user, for loopback
 * TCP its local user (a peer of 127.0.0.1 is any user of the machine),
 * else the peer's address; true for TCP. A user that cannot be told is
 * one client of all such. */
static bool client_of(int fd, unsigned char *key)
{
    struct sockaddr_storage ss;
    socklen_t len = sizeof(ss);
    uid_t uid;
    bool known;

    memset(key, 0, PEER_LEN);
    if (getpeername(fd, (struct sockaddr *)&ss, &len) != 0)
        return false;
    if (ss.ss_family != AF_INET && ss.ss_family != AF_INET6) {
        key[0] = AF_UNIX;
        if (peer_uid(fd, &uid))
            memcpy(key + 1, &uid, sizeof(uid));
        return false;
    }
    known = peer_is_loopback((struct sockaddr *)&ss) && peer_uid(fd, &uid);
    if (known) {
        key[0] = KEY_LOCAL_USER;
        memcpy(key + 1, &uid, sizeof(uid));
    } else {
        key[0] = (unsigned char)ss.ss_family;
        if (ss.ss_family == AF_INET)
            memcpy(key + 1, &((struct sockaddr_in *)&ss)->sin_addr, 4);
        else
            memcpy(key + 1, &((struct sockaddr_in6 *)&ss)->sin6_addr, 16);
    }
    return true;
}

static void stream_free(struct streams *s, struct stream *st)
{
    /* epoll forgets a descriptor at close() only when no other descriptor
     * names the same socket, and libmicrohttpd's may still (http.c swaps it
     * out after the hand-over): without this, events for the freed stream
     * keep coming. It fails harmlessly for one never added. */
    epoll_ctl(s->ep, EPOLL_CTL_DEL, st->fd, NULL);
    close(st->fd);
    pthread_mutex_lock(&s->mu);
    release(s, st);
    pthread_mutex_unlock(&s->mu);
    atomic_fetch_sub(&s->count, 1); /* before the source knows it is gone */
    st->src->free(st->cls);
    free(st->head);
    free(st);
}

static void unlink_live(struct streams *s, struct stream *st)
{
    if (st->prev)
        st->prev->next = st->next;
    else
        s->live = st->next;
    if (st->next)
        st->next->prev = st->prev;
}

static void set_want_out(struct streams *s, struct stream *st, bool on)
{
    struct epoll_event ev = {.events = EPOLLIN | EPOLLRDHUP | (on ? EPOLLOUT : 0u), .data.ptr = st};

    if (st->want_out == on)
        return;
    if (epoll_ctl(s->ep, EPOLL_CTL_MOD, st->fd, &ev) == 0)
        st->want_out = on;
    else
        st->dead = true;
}

/* Bytes written to 'fd' that its client has not read yet: for a unix
 * socket what waits in the client's queue, for TCP what the client has not
 * acknowledged (its window closes when it stops reading). */
static int unread(int fd)
{
    int n = 0;

    if (ioctl(fd, SIOCOUTQ, &n) != 0)
        return 0;
    return n;
}

/* Look at what the client has left unread: none, or less than at the last
 * look, means it reads. */
static void note_reading(struct stream *st, uint64_t now)
{
    int n = unread(st->fd);

    if (n == 0 || n < st->held)
        st->read_ms = now;
    st->held = n;
}

/* Write what the socket takes. 1: all out; 0: some wait; -1: the client is gone. */
static int write_out(struct stream *st, uint64_t now)
{
    struct msghdr mh = {0};
    ssize_t n;

    while (st->iov_at < st->iov_n) {
        mh.msg_iov = st->iov + st->iov_at;
        mh.msg_iovlen = (size_t)(st->iov_n - st->iov_at);
        n = sendmsg(st->fd, &mh, MSG_NOSIGNAL);
        if (n < 0) {
            if (errno == EINTR)
                continue;
            return errno == EAGAIN || errno == EWOULDBLOCK ? 0 : -1;
        }
        st->progress_ms = now;
        while (n > 0 && st->iov_at < st->iov_n) {
            struct iovec *v = &st->iov[st->iov_at];
            size_t k = (size_t)n < v->iov_len ? (size_t)n : v->iov_len;

            v->iov_base = (char *)v->iov_base + k;
            v->iov_len -= k;
            n -= (ssize_t)k;
            if (v->iov_len == 0)
                st->iov_at++;
        }
    }
    st->iov_at = st->iov_n = 0;
    st->chunk_at = -1;
    if (st->head) {
        free(st->head);
        st->head = NULL;
    }
    return 1;
}

/* write_out(), noting before and after whether the client reads. */
static int flush(struct stream *st, uint64_t now)
{
    int r;

    note_reading(st, now);
    r = write_out(st, now);
    if (r >= 0)
        note_reading(st, now);
    return r;
}

/* A client that has read nothing for the stall time: with bytes waiting
 * here (the socket is full), or with bytes in the socket only. The second
 * is looked at again first: the client may read without a sign here. */
static bool stalled(struct streams *s, struct stream *st, uint64_t now)
{
    if (st->iov_n && now - st->progress_ms >= s->stall_ms)
        return true;
    if (!st->held || now - st->read_ms < s->stall_ms)
        return false;
    note_reading(st, now);
    return st->held && now - st->read_ms >= s->stall_ms;
}

static void queue(struct stream *st, const char *data, size_t len)
{
    st->chunk_at = st->iov_n;
    if (st->chunked) {
        int n = snprintf(st->size_line, sizeof(st->size_line), "%zx\r\n", len);

        st->iov[st->iov_n++] = (struct iovec){st->size_line, (size_t)n};
    }
    st->iov[st->iov_n++] = (struct iovec){(void *)data, len};
    if (st->chunked)
        st->iov[st->iov_n++] = (struct iovec){(void *)"\r\n", 2};
    st->chunk_base = st->iov[st->chunk_at].iov_base;
}

/* Write, then pull and write while the socket takes it. May close 'st'. */
static void serve(struct streams *s, struct stream *st, uint64_t now)
{
    const char *data;
    size_t len;
    int pulls = 0, r;

    st->pull_now = false;
    for (;;) {
        if (st->iov_n) {
            r = flush(st, now);
            if (r < 0) {
                st->dead = true;
                return;
            }
            if (r == 0) {
                set_want_out(s, st, true);
                return;
            }
            if (st->ending) {
                st->dead = true;
                return;
            }
        }
        set_want_out(s, st, false);
        if (pulls++ == PULLS_PER_TURN) {
            st->pull_now = true;
            return;
        }
        st->wake_ms = NEVER;
        data = NULL;
        len = 0;
        switch (st->src->pull(st->cls, now, &data, &len, &st->wake_ms)) {
        case STREAM_DATA:
            if (len)
                queue(st, data, len);
            break;
        case STREAM_IDLE:
            return;
        case STREAM_END:
            if (st->chunked)
                st->iov[st->iov_n++] = (struct iovec){(void *)"0\r\n\r\n", 5};
            st->ending = true;
            if (!st->iov_n)
                st->dead = true;
            if (st->dead)
                return;
            break;
        }
    }
}

/* Read and drop what the client sends. False when it has gone. */
static bool drain_input(struct stream *st)
{
    char buf[1024];
    ssize_t n = recv(st->fd, buf, sizeof(buf), MSG_DONTWAIT);

    if (n > 0)
        return true;
    return n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR);
}

/* Move adopted streams into the loop; returns the 'stopping' flag. */
static bool take_incoming(struct streams *s, uint64_t now)
{
    struct stream *st, *next;
    bool stopping;

    pthread_mutex_lock(&s->mu);
    st = s->incoming;
    s->incoming = NULL;
    stopping = s->stopping;
    s->max_held = s->set_max;
    s->total = s->set_total;
    s->total_ctx = s->set_ctx;
    pthread_mutex_unlock(&s->mu);
    for (; st; st = next) {
        struct epoll_event ev = {.events = EPOLLIN | EPOLLRDHUP, .data.ptr = st};

        next = st->next;
        st->prev = NULL;
        st->next = s->live;
        if (s->live)
            s->live->prev = st;
        s->live = st;
        st->progress_ms = now;
        st->read_ms = now;
        st->pull_now = true;
        if (epoll_ctl(s->ep, EPOLL_CTL_ADD, st->fd, &ev) != 0)
            st->dead = true;
    }
    return stopping;
}

static int wait_ms(struct streams *s, uint64_t now)
{
    uint64_t due = s->shed_unlogged ? s->shed_logged_ms + SHED_LOG_MS : NEVER, t;
    struct stream *st;

    for (st = s->live; st; st = st->next) {
        if (st->pull_now || st->dead)
            return 0;
        t = st->iov_n ? st->progress_ms + s->stall_ms : st->wake_ms;
        if (t < due)
            due = t;
        if (st->held && st->read_ms + s->stall_ms < due)
            due = st->read_ms + s->stall_ms;
    }
    if (due == NEVER)
        return -1;
    if (due <= now)
        return 0;
    return due - now > MAX_WAIT_MS ? MAX_WAIT_MS : (int)(due - now);
}

/* Mark the streams of 'n' epoll events dead, or to be served now; true when
 * the loop's eventfd was among them (a stream came in, or a publish). */
static bool take_events(struct streams *s, const struct epoll_event *ev, int n)
{
    struct stream *st;
    uint64_t junk;
    bool kicked = false;
    int i;

    for (i = 0; i < n; i++) {
        st = ev[i].data.ptr;
        if (!st) {
            if (read(s->efd, &junk, sizeof(junk)) < 0 && errno != EAGAIN)
                log_warn("cannot read the stream loop's eventfd: %s", strerror(errno));
            /* Cleared before pulling: a publish from now on kicks again. */
            atomic_store(&s->kicked, false);
            kicked = true;
            continue;
        }
        if (ev[i].events & (EPOLLERR | EPOLLHUP))
            st->dead = true;
        else if ((ev[i].events & (EPOLLIN | EPOLLRDHUP)) && !drain_input(st))
            st->dead = true;
        if (ev[i].events & EPOLLOUT)
            st->pull_now = true;
    }
    return kicked;
}

/* Serve each live stream that is due (all of them when 'kicked' or
 * 'stopping'), then drop it if it is dead, stalled, or the loop stops. */
static void sweep(struct streams *s, uint64_t now, bool kicked, bool stopping)
{
    struct stream *st, *next;

    for (st = s->live; st; st = next) {
        next = st->next;
        if (!st->dead && (kicked || stopping || st->pull_now || (!st->iov_n && st->wake_ms <= now)))
            serve(s, st, now);
        if (!st->dead && stalled(s, st, now)) {
            log_debug("dropping a watch client that read nothing for %llu ms",
                      (unsigned long long)s->stall_ms);
            st->dead = true;
        }
        if (st->dead || stopping) {
            unlink_live(s, st);
            stream_free(s, st);
        }
    }
}

/* Whether no byte of the queued chunk has been written yet, so that other
 * bytes may take its place without breaking the framing. */
static bool chunk_untouched(const struct stream *st)
{
    if (st->chunk_at < 0 || st->iov_at < st->chunk_at)
        return true;
    return st->iov_at == st->chunk_at && st->iov[st->chunk_at].iov_base == st->chunk_base;
}

/* End 'st' for the budget: its source lets go of what it holds, at once.
 * Its last bytes replace the queued chunk if none of it is out; a chunk
 * half written cannot be finished without the bytes just let go, so the
 * stream is closed instead. */
static void shed(struct stream *st)
{
    const char *data = NULL;
    size_t len = 0;
    bool whole = chunk_untouched(st);

    st->src->shed(st->cls, &data, &len);
    if (st->chunk_at >= 0)
        st->iov_n = st->chunk_at; /* bytes of the source: gone */
    if (!whole) {
        st->iov_n = 0;
        st->dead = true;
        return;
    }
    if (len)
        queue(st, data, len);
    if (st->chunked)
        st->iov[st->iov_n++] = (struct iovec){(void *)"0\r\n\r\n", 5};
    st->ending = true;
    st->pull_now = true;
    if (st->iov_at >= st->iov_n)
        st->dead = true;
}

static int cand_cmp(const void *a, const void *b)
{
    const struct cand *x = a, *y = b;

    if (x->age != y->age)
        return x->age < y->age ? -1 : 1;
    return x->bytes > y->bytes ? -1 : x->bytes < y->bytes;
}

/* Count 'n' sheds and log them, at most once every SHED_LOG_MS. */
static void log_sheds(struct streams *s, uint64_t now, size_t n)
{
    s->shed_unlogged += n;
    s->shed_all += n;
    if (!s->shed_unlogged || (s->shed_ever_logged && now - s->shed_logged_ms < SHED_LOG_MS))
        return;
    log_warn("dropped %zu watch stream%s over the watch memory budget (%zu KiB): the clients "
             "furthest behind, which did not read what waited for them (%zu since start)",
             s->shed_unlogged, s->shed_unlogged == 1 ? "" : "s", s->max_held / 1024, s->shed_all);
    s->shed_unlogged = 0;
    s->shed_logged_ms = now;
    s->shed_ever_logged = true;
}

/* While the sources hold more than the budget, shed the streams whose held
 * bytes are oldest (the most bytes first among equals). */
static void keep_budget(struct streams *s, uint64_t now)
{
    struct stream *st;
    size_t n = 0, i, shed_n = 0;

    if (s->total && s->total(s->total_ctx) > s->max_held) {
        for (st = s->live; st && n < s->ncand; st = st->next) {
            if (st->dead || st->ending || !st->src->held)
                continue;
            s->cand[n].st = st;
            s->cand[n].bytes = st->src->held(st->cls, &s->cand[n].age);
            if (s->cand[n].bytes)
                n++;
        }
        qsort(s->cand, n, sizeof(*s->cand), cand_cmp);
        for (i = 0; i < n && s->total(s->total_ctx) > s->max_held; i++) {
            shed(s->cand[i].st);
            shed_n++;
        }
    }
    log_sheds(s, now, shed_n);
}

static void *loop(void *arg)
{
    struct streams *s = arg;
    struct epoll_event ev[EVENTS_PER_WAIT];
    uint64_t now = clock_mono_ms();
    bool kicked, stopping = false;
    int n;

    for (;;) {
        n = epoll_wait(s->ep, ev, EVENTS_PER_WAIT, wait_ms(s, now));
        now = clock_mono_ms();
        kicked = take_events(s, ev, n);
        if (kicked)
            stopping = take_incoming(s, now);
        sweep(s, now, kicked, stopping);
        if (stopping)
            return NULL;
        keep_budget(s, now);
    }
}

err_t streams_start(const struct stream_limits *lim, unsigned stall_s, struct streams **out)
{
    struct streams *s = calloc(1, sizeof(*s));
    struct epoll_event ev = {.events = EPOLLIN, .data.ptr = NULL};
    err_t rc = ERR_NOMEM;

    assert(lim && out);
    if (!s)
        return ERR_NOMEM;
    s->ep = -1;
    s->efd = -1;
    pthread_mutex_init(&s->mu, NULL);
    atomic_init(&s->count, 0);
    atomic_init(&s->kicked, false);
    s->lim = *lim;
    s->stall_ms = (uint64_t)stall_s * 1000;
    s->peers = calloc(lim->unix_max + lim->tcp_max + 1, sizeof(*s->peers));
    s->ncand = lim->unix_max + lim->tcp_max;
    s->cand = calloc(s->ncand ? s->ncand : 1, sizeof(*s->cand));
    if (!s->peers || !s->cand)
        goto out;
    rc = ERR_IO;
    s->ep = epoll_create1(EPOLL_CLOEXEC);
    s->efd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    if (s->ep < 0 || s->efd < 0 || epoll_ctl(s->ep, EPOLL_CTL_ADD, s->efd, &ev) != 0 ||
        pthread_create(&s->th, NULL, loop, s) != 0) {
        log_err("cannot start the stream loop: %s", strerror(errno));
        goto out;
    }
    *out = s;
    return ERR_OK;
out:
    if (s->ep >= 0)
        close(s->ep);
    if (s->efd >= 0)
        close(s->efd);
    pthread_mutex_destroy(&s->mu);
    free(s->peers);
    free(s->cand);
    free(s);
    return rc;
}

void streams_set_budget(struct streams *s, size_t max, size_t (*total)(void *ctx), void *ctx)
{
    assert(atomic_load(&s->count) == 0); /* before the first adoption */
    pthread_mutex_lock(&s->mu);
    s->set_max = max;
    s->set_total = total;
    s->set_ctx = ctx;
    pthread_mutex_unlock(&s->mu);
}

err_t streams_adopt(struct streams *s, int fd, const char *head, bool chunked,
                    const struct stream_src *src, void *cls)
{
    struct stream *st = fault_alloc_fails() ? NULL : calloc(1, sizeof(*st));
    err_t rc = ERR_NOMEM;
    int fl;

    assert(fd >= 0 && head && src && src->pull && src->free);
    assert(!src->held == !src->shed); /* both, or neither */
    if (st)
        st->head = strdup(head);
    if (!st || !st->head)
        goto fail;
    fl = fcntl(fd, F_GETFL);
    if (fl < 0 || fcntl(fd, F_SETFL, fl | O_NONBLOCK) < 0) {
        rc = ERR_IO;
        goto fail;
    }
    st->fd = fd;
    st->src = src;
    st->cls = cls;
    st->chunked = chunked;
    st->wake_ms = NEVER;
    st->chunk_at = -1;
    st->tcp = client_of(fd, st->peer);
    st->iov[st->iov_n++] = (struct iovec){st->head, strlen(st->head)};
    pthread_mutex_lock(&s->mu);
    rc = s->stopping ? ERR_UNAVAIL : admit(s, st);
    if (rc) {
        pthread_mutex_unlock(&s->mu);
        goto fail;
    }
    atomic_fetch_add(&s->count, 1);
    st->next = s->incoming;
    s->incoming = st;
    pthread_mutex_unlock(&s->mu);
    atomic_store(&s->kicked, true);
    wake_loop(s);
    return ERR_OK;
fail:
    if (st)
        free(st->head);
    free(st);
    close(fd);
    src->free(cls);
    return rc;
}

void streams_stop(struct streams *s)
{
    if (!s)
        return;
    pthread_mutex_lock(&s->mu);
    s->stopping = true;
    pthread_mutex_unlock(&s->mu);
    atomic_store(&s->kicked, true);
    wake_loop(s);
    pthread_join(s->th, NULL);
    /* Adopted after the loop's last look: never served. */
    while (s->incoming) {
        struct stream *st = s->incoming;

        s->incoming = st->next;
        stream_free(s, st);
    }
    close(s->ep);
    close(s->efd);
    pthread_mutex_destroy(&s->mu);
    free(s->peers);
    free(s->cand);
    free(s);
}
