/* SPDX-License-Identifier: Apache-2.0 */
/* http_listen.c - the listeners of podresd's HTTP server and its life
 * cycle: the unix socket (its directory, a stale socket replaced), the
 * loopback TCP listener, the metrics-only listener, their libmicrohttpd
 * daemons (one each), and the descriptor budgets they share. Not what happens on a connection
 * (http_request.c, http_warden.c). */
#define LOG_MOD "http"
#include "../common/common.h"
#include "http.h"
#include "http_int.h"
#include "stream.h"

#include <arpa/inet.h>
#include <assert.h>
#include <fcntl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#define LISTEN_BACKLOG 1024 /* the connection limit: a burst of clients waits, not fails */

/* Watch streams of one TCP client: a remote address, or on loopback one
 * local user (any can open loopback TCP connections). With this and a TCP
 * budget of half the connection limit (the unix socket keeps its own, see
 * http_start) one cannot hold every stream. */
#define WATCH_PER_PEER 64

/* The share of the unix socket's connections and watches one user may
 * hold: the rest stays for the others (the syncer, a device plugin). */
#define UNIX_PER_UID_PERCENT 50

/* Descriptors kept out of every budget: the database and its WAL, the
 * listening sockets and the daemons' wake-up descriptors, the stream
 * loop's, the kubelet's connection, a watch's two during its hand-over. */
#define FD_RESERVE 64

/* The descriptors each listener may hold: connections, and watch streams
 * handed over to the stream loop. */
struct fd_budget {
    unsigned unix_conns, tcp_conns; /* libmicrohttpd connection limits */
    struct stream_limits watches;   /* the stream loop's budgets */
};

/* ---- listeners ---- */

/* Refuse anything at 'path' that is not a stale socket. */
static err_t clear_socket_path(const char *path)
{
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    struct stat sb;
    int fd, r;

    if (lstat(path, &sb) != 0)
        return errno == ENOENT ? ERR_OK : ERR_IO;
    if (!S_ISSOCK(sb.st_mode)) {
        log_err("cannot listen on '%s': the path exists and is not a socket%s", path,
                S_ISLNK(sb.st_mode) ? " (a symlink)" : "");
        return ERR_IO;
    }
    fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return ERR_IO;
    snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", path);
    r = connect(fd, (struct sockaddr *)&sa, sizeof(sa));
    close(fd);
    if (r == 0) {
        log_err("cannot listen on '%s': another process is serving it", path);
        return ERR_IO;
    }
    if (unlink(path) != 0) {
        log_err("cannot remove stale socket '%s': %s", path, strerror(errno));
        return ERR_IO;
    }
    return ERR_OK;
}

static err_t make_socket_dir(const char *path)
{
    char dir[sizeof(((struct sockaddr_un *)0)->sun_path)];
    char *slash;
    struct stat sb;

    snprintf(dir, sizeof(dir), "%s", path);
    slash = strrchr(dir, '/');
    if (!slash || slash == dir)
        return ERR_OK;
    *slash = '\0';
    if (mkdir(dir, 0750) == 0 || errno == EEXIST) {
        if (lstat(dir, &sb) != 0 || !S_ISDIR(sb.st_mode)) {
            log_err("cannot use socket directory '%s': not a directory", dir);
            return ERR_IO;
        }
        /* A directory others may write to (found so: podresd makes its own
         * 0750) lets them put their own socket in place of podresd's. */
        if (sb.st_mode & S_IWOTH)
            log_warn("socket directory '%s' is writable by everyone (mode %04o): anyone can "
                     "replace podresd's socket; use a private directory",
                     dir, (unsigned)(sb.st_mode & 07777));
        return ERR_OK;
    }
    log_err("cannot create socket directory '%s': %s", dir, strerror(errno));
    return ERR_IO;
}

static err_t unix_listen(const char *path, int *out)
{
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    mode_t old;
    int fd;
    err_t rc;

    if (strlen(path) >= sizeof(sa.sun_path)) {
        log_err("cannot listen on '%s': the path is too long for a unix socket", path);
        return ERR_INVAL;
    }
    rc = make_socket_dir(path);
    if (rc)
        return rc;
    rc = clear_socket_path(path);
    if (rc)
        return rc;
    snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", path);
    fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return ERR_IO;
    old = umask(0117);
    if (bind(fd, (struct sockaddr *)&sa, sizeof(sa)) != 0 || chmod(path, 0660) != 0 ||
        listen(fd, LISTEN_BACKLOG) != 0) {
        umask(old);
        log_err("cannot listen on '%s': %s", path, strerror(errno));
        close(fd);
        return ERR_IO;
    }
    umask(old);
    *out = fd;
    return ERR_OK;
}

/* 'host' ("[v6]", v4 or localhost; modified) and 'port' as an address;
 * only a loopback one unless 'any'. */
static err_t parse_host(char *host, uint16_t port, bool any, struct sockaddr_storage *ss,
                        socklen_t *len)
{
    struct sockaddr_in *v4 = (struct sockaddr_in *)ss;
    struct sockaddr_in6 *v6 = (struct sockaddr_in6 *)ss;
    size_t n = strlen(host);

    memset(ss, 0, sizeof(*ss));
    if (host[0] == '[' && host[n - 1] == ']') {
        host[n - 1] = '\0';
        v6->sin6_family = AF_INET6;
        v6->sin6_port = htons(port);
        *len = sizeof(*v6);
        if (inet_pton(AF_INET6, host + 1, &v6->sin6_addr) != 1 ||
            (!any && !IN6_IS_ADDR_LOOPBACK(&v6->sin6_addr)))
            return ERR_INVAL;
        return ERR_OK;
    }
    v4->sin_family = AF_INET;
    v4->sin_port = htons(port);
    *len = sizeof(*v4);
    if (inet_pton(AF_INET, strcmp(host, "localhost") == 0 ? "127.0.0.1" : host, &v4->sin_addr) !=
            1 ||
        (!any && (ntohl(v4->sin_addr.s_addr) >> 24) != 127))
        return ERR_INVAL;
    return ERR_OK;
}

/* Parse "host:port" / "[v6]:port" (numeric, or localhost); only loopback
 * addresses are accepted unless 'any'. */
static err_t parse_listen(const char *spec, bool any, struct sockaddr_storage *ss, socklen_t *len)
{
    char host[64];
    const char *colon = strrchr(spec, ':');
    long port;
    size_t n;

    if (!colon)
        return ERR_INVAL;
    n = strspn(colon + 1, "0123456789");
    if (n == 0 || n > 5 || colon[1 + n] != '\0')
        return ERR_INVAL; /* "HOST:", "HOST:abc", "HOST:80x": not a port */
    port = strtol(colon + 1, NULL, 10);
    n = (size_t)(colon - spec);
    if (port > 65535 || n == 0 || n >= sizeof(host))
        return ERR_INVAL;
    memcpy(host, spec, n);
    host[n] = '\0';
    return parse_host(host, (uint16_t)port, any, ss, len);
}

const char *http_listen_check(const char *spec)
{
    struct sockaddr_storage ss;
    socklen_t len;

    return parse_listen(spec, false, &ss, &len)
               ? "give a loopback HOST:PORT (127.0.0.1:9444, [::1]:9444 "
                 "or localhost:9444; port 0: the kernel picks one)"
               : NULL;
}

const char *http_metrics_listen_check(const char *spec)
{
    struct sockaddr_storage ss;
    socklen_t len;

    return parse_listen(spec, true, &ss, &len)
               ? "give a numeric HOST:PORT (10.0.0.7:9446, [fd00::7]:9446, 0.0.0.0:9446, "
                 "127.0.0.1:9446 or localhost:9446)"
               : NULL;
}

const char *http_socket_check(const char *path)
{
    struct sockaddr_un sa;

    return strlen(path) >= sizeof(sa.sun_path)
               ? "too long for a unix socket path (at most 107 bytes)"
               : NULL;
}

/* Log the address 'fd' is bound to: the port the kernel picked for ":0". */
static void log_bound(int fd, const char *spec, const char *what)
{
    struct sockaddr_storage ss;
    socklen_t len = sizeof(ss);
    char host[INET6_ADDRSTRLEN] = "?";
    unsigned port = 0;

    if (getsockname(fd, (struct sockaddr *)&ss, &len) != 0)
        return;
    if (ss.ss_family == AF_INET6) {
        const struct sockaddr_in6 *v6 = (const struct sockaddr_in6 *)&ss;

        inet_ntop(AF_INET6, &v6->sin6_addr, host, sizeof(host));
        port = ntohs(v6->sin6_port);
        log_info("listening on [%s]:%u (%s; asked for %s)", host, port, what, spec);
        return;
    }
    inet_ntop(AF_INET, &((const struct sockaddr_in *)&ss)->sin_addr, host, sizeof(host));
    port = ntohs(((const struct sockaddr_in *)&ss)->sin_port);
    log_info("listening on %s:%u (%s; asked for %s)", host, port, what, spec);
}

/* A listening socket on 'spec', any address when 'any', else loopback. A
 * plain bind: the port must be free (a second podresd on it fails). */
static err_t tcp_listen(const char *spec, bool any, int *out)
{
    struct sockaddr_storage ss;
    socklen_t len = 0;
    int fd, one = 1;

    if (parse_listen(spec, any, &ss, &len)) {
        log_err("cannot listen on '%s': give a %sHOST:PORT (127.0.0.1:9444 or [::1]:9444)", spec,
                any ? "numeric " : "loopback ");
        return ERR_INVAL;
    }
    fd = socket(ss.ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return ERR_IO;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    if (bind(fd, (struct sockaddr *)&ss, len) != 0 || listen(fd, LISTEN_BACKLOG) != 0) {
        log_err("cannot listen on '%s': %s", spec, strerror(errno));
        close(fd);
        return ERR_IO;
    }
    *out = fd;
    return ERR_OK;
}

/* Start the daemon of 'l' on 'fd'. A listener that takes writes runs a
 * thread per connection: a write waits for its COMMIT, and in a shared
 * thread it would stall every connection there. The TCP listener without a
 * token is read-only: its answers come from the cache or one short read,
 * and a watch leaves for the stream loop, so one polling thread serves all
 * its connections, and a monitoring agent that polls with a new connection
 * each time costs no thread start. poll, not epoll: epoll would keep a
 * handed-over socket registered under libmicrohttpd's freed connection
 * (see http_request.c, hand_over). 'limit': connections of the daemon. */
static err_t start_daemon(struct listener *l, int fd, bool shared, unsigned limit,
                          const struct http_opts *o)
{
    unsigned flags = MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_POLL | MHD_USE_ERROR_LOG |
                     MHD_USE_ITC | (shared ? 0u : (unsigned)MHD_USE_THREAD_PER_CONNECTION);

    assert(!l->d);
    l->limit = limit;
    l->listen_fd = fd;
    /* one option and its values a line */
    /* clang-format off */
    struct MHD_Daemon *d = MHD_start_daemon(
        flags, 0, NULL, NULL, http_on_request, l,
        MHD_OPTION_EXTERNAL_LOGGER, http_mhd_log, l,
        MHD_OPTION_LISTEN_SOCKET, fd,
        MHD_OPTION_CONNECTION_LIMIT, limit,
        MHD_OPTION_CONNECTION_TIMEOUT, o->timeout_s,
        MHD_OPTION_PER_IP_CONNECTION_LIMIT, l->tcp ? limit : 0,
        /* 8 MiB, glibc's usual default. glibc keeps exited threads' stacks
         * for reuse, 40 MiB of them in all, and each kept stack holds its
         * top pages: the larger the stack, the fewer are kept after a burst
         * of connections (docs/DESIGN.md, Code for speed). */
        MHD_OPTION_THREAD_STACK_SIZE, (size_t)(8 * 1024 * 1024),
        /* 16 KiB per connection (default 32): headers beyond it get 431. */
        MHD_OPTION_CONNECTION_MEMORY_LIMIT, (size_t)(16 * 1024),
        MHD_OPTION_UNESCAPE_CALLBACK, http_unescape, NULL,
        MHD_OPTION_URI_LOG_CALLBACK, http_on_uri, NULL,
        MHD_OPTION_NOTIFY_COMPLETED, http_on_completed, l,
        MHD_OPTION_NOTIFY_CONNECTION, http_on_conn, l,
        MHD_OPTION_END);
    /* clang-format on */

    if (!d) {
        log_err("cannot start the HTTP server");
        close(fd);
        return ERR_IO;
    }
    l->d = d;
    return ERR_OK;
}

/* The TCP listener: a thread per connection when it takes writes (a token
 * is configured), else one polling thread. */
static err_t start_tcp(struct listener *l, const struct http_opts *o, unsigned limit)
{
    bool writable = l->h->api->token != NULL;
    int fd = -1;
    err_t rc;

    if (!o->listen)
        return ERR_OK;
    rc = tcp_listen(o->listen, false, &fd);
    if (rc)
        return rc;
    log_bound(fd, o->listen, "the loopback API");
    return start_daemon(l, fd, !writable, limit, o);
}

/* The metrics-only listener: one polling daemon (scrapes and probes are
 * short reads), no token and no Host rule (it answers on the pod IP), and
 * nothing but GET /metrics, /healthz and /readyz (http_route). */
static err_t start_metrics(struct listener *l, const struct http_opts *o)
{
    int fd = -1;
    err_t rc;

    if (!o->metrics_listen)
        return ERR_OK;
    rc = tcp_listen(o->metrics_listen, true, &fd);
    if (rc)
        return rc;
    log_bound(fd, o->metrics_listen, "metrics, /healthz and /readyz only");
    return start_daemon(l, fd, true, HTTP_METRICS_CONNS, o);
}

/* Raise the soft limit of descriptors to the hard one: the default soft
 * limit (often 1024) is below what the budgets need. */
static rlim_t raise_nofile(void)
{
    struct rlimit rl;

    if (getrlimit(RLIMIT_NOFILE, &rl) != 0)
        return 1024;
    if (rl.rlim_cur < rl.rlim_max) {
        rlim_t want = rl.rlim_max;

        rl.rlim_cur = want;
        if (setrlimit(RLIMIT_NOFILE, &rl) != 0)
            log_warn("cannot raise the descriptor limit to %llu: %s", (unsigned long long)want,
                     strerror(errno));
        if (getrlimit(RLIMIT_NOFILE, &rl) != 0)
            return 1024;
    }
    return rl.rlim_cur;
}

/* 'x' of 'need' descriptors, scaled down when only 'avail' are there. */
static size_t scaled(size_t x, rlim_t avail, size_t need)
{
    size_t v = need > avail ? (size_t)((x * (size_t)avail) / need) : x;

    return v ? v : 1;
}

/* The budgets, scaled down to fit the descriptor limit with FD_RESERVE to
 * spare: at the limit libmicrohttpd 0.9.75 retries accept() in a busy loop
 * (a listener with no connection) and the unix socket stops answering, so
 * the limit must never be reached. The syncer watches over the unix
 * socket: TCP clients, who need no privilege, cannot take its budget. */
static void fd_budget(const struct http_opts *o, struct fd_budget *b)
{
    size_t c = o->conn_limit, need = 2 * c + (o->listen ? c + c / 2 : 0) +
                                     (o->metrics_listen ? HTTP_METRICS_CONNS : 0);
    rlim_t lim = raise_nofile(), avail = lim > FD_RESERVE ? lim - FD_RESERVE : 0;

    b->unix_conns = (unsigned)scaled(c, avail, need);
    b->tcp_conns = (unsigned)scaled(c, avail, need);
    b->watches.unix_max = scaled(c, avail, need);
    b->watches.per_uid = b->watches.unix_max * UNIX_PER_UID_PERCENT / 100;
    b->watches.per_uid = b->watches.per_uid ? b->watches.per_uid : 1;
    b->watches.tcp_max = scaled(c / 2, avail, need);
    b->watches.per_peer = b->watches.tcp_max < WATCH_PER_PEER ? b->watches.tcp_max : WATCH_PER_PEER;
    if (need > avail)
        log_warn("the descriptor limit (%llu) is below the %zu podresd can use: at most %u "
                 "connections and %zu watches a listener",
                 (unsigned long long)lim, need + FD_RESERVE, b->unix_conns, b->watches.unix_max);
}

/* The unix socket's listener, when one is configured. */
static err_t start_unix(struct http *h, const struct http_opts *o, unsigned limit)
{
    int fd = -1;
    err_t rc;

    if (!o->socket_path)
        return ERR_OK;
    rc = unix_listen(o->socket_path, &fd);
    if (rc)
        return rc;
    h->socket_path = strdup(o->socket_path);
    return start_daemon(&h->unix_l, fd, false, limit, o);
}

/* The listeners' back pointers and kinds, and the warden's lock. */
static void init_listeners(struct http *h, struct api *api)
{
    h->api = api;
    h->unix_l.h = h;
    h->tcp_l.h = h;
    h->tcp_l.tcp = true;
    h->mx_l.h = h;
    h->mx_l.metrics_only = true;
    http_warden_init(h);
}

err_t http_start(struct api *api, const struct http_opts *opts, struct http **out)
{
    struct fd_budget b;
    struct http *h = calloc(1, sizeof(*h));
    err_t rc;

    assert(api && opts && out);
    if (!h)
        return ERR_NOMEM;
    h->reserve_fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
    if (h->reserve_fd < 0 || http_nomem_prepare(api->metrics)) {
        log_err("cannot prepare for running out of descriptors or memory: %s", strerror(errno));
        if (h->reserve_fd >= 0)
            close(h->reserve_fd);
        free(h);
        return ERR_IO;
    }
    init_listeners(h, api);
    fd_budget(opts, &b);
    rc = streams_start(&b.watches, opts->timeout_s, &h->streams);
    if (rc)
        goto out;
    api_watch_serve(api, h->streams);
    if (api->feed)
        feed_set_notify(api->feed, streams_kick, h->streams);
    rc = start_unix(h, opts, b.unix_conns);
    if (rc)
        goto out;
    rc = start_tcp(&h->tcp_l, opts, b.tcp_conns);
    if (rc)
        goto out;
    rc = start_metrics(&h->mx_l, opts);
    if (rc)
        goto out;
    rc = http_warden_start(h);
out:
    if (rc) {
        http_stop(h); /* what started stops */
        return rc;
    }
    *out = h;
    return ERR_OK;
}

static void quiesce(struct listener *l)
{
    MHD_socket fd;

    if (!l->d)
        return;
    fd = MHD_quiesce_daemon(l->d);
    if (fd != MHD_INVALID_SOCKET)
        close(fd);
}

static void stop_daemon(struct listener *l)
{
    if (l->d)
        MHD_stop_daemon(l->d);
    l->d = NULL;
}

void http_quiesce(struct http *h)
{
    if (!h)
        return;
    quiesce(&h->unix_l);
    quiesce(&h->tcp_l);
    quiesce(&h->mx_l);
}

void http_stop(struct http *h)
{
    if (!h)
        return;
    http_warden_stop(h);
    stop_daemon(&h->unix_l);
    stop_daemon(&h->tcp_l);
    stop_daemon(&h->mx_l);
    if (h->api->feed)
        feed_set_notify(h->api->feed, NULL, NULL);
    streams_stop(h->streams);
    if (h->socket_path)
        unlink(h->socket_path);
    free(h->socket_path);
    if (h->reserve_fd >= 0)
        close(h->reserve_fd);
    http_nomem_release();
    pthread_cond_destroy(&h->cv);
    pthread_mutex_destroy(&h->mu);
    free(h);
}
