/* SPDX-License-Identifier: Apache-2.0 */
/* http.c - routing and the request life cycle on libmicrohttpd 0.9.75.
 * Responses are queued on the second call of the access handler, never the
 * first: 0.9.75 closes a keep-alive connection when a response is queued
 * before the request body phase. Only an oversize body is answered at once
 * (and the connection then closed) so it is never read.
 * A watch stream is not left to libmicrohttpd, which would keep a thread
 * (stack, malloc cache, connection pool: ~70 KiB) per stream for its whole
 * life: once accepted, its socket is duplicated and handed to the stream
 * loop (stream.h), and libmicrohttpd's descriptor is replaced (dup3) by a
 * fresh unconnected socket: 0.9.75 calls shutdown(SHUT_WR) on a connection's
 * descriptor when its thread ends, whatever the flags, and that must not
 * reach the stream's socket. The stream writes its own response head. */
#define LOG_MOD "http"
#include "../common/common.h"
#include "../common/clock.h"
#include "../common/jsonx.h"
#include "http.h"
#include "metrics.h"
#include "stream.h"
#include "token.h"

#include <arpa/inet.h>
#include <assert.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#define LISTEN_BACKLOG 1024 /* the connection limit: a burst of clients waits, not fails */

#define SHARDS_MAX 8 /* daemons of the read-only TCP listener, see tcp_shards() */

/* Watch streams of one TCP peer address. Any local user can open loopback
 * TCP connections; with this and a TCP budget of half the connection limit
 * (the unix socket keeps its own, see http_start) one cannot hold every
 * stream. */
#define WATCH_PER_PEER 64

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

/* Query arguments of one request; more get 400 (see on_uri). podresd's
 * routes take at most four. */
#define HTTP_ARGS_MAX 64

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

/* Out of memory and out of descriptors are logged at most this often. */
#define SCARCE_LOG_MS 60000

/* The answer to a request when an allocation fails: built at start, so
 * that giving it allocates nothing. */
#define NOMEM_BODY                                                                                 \
    "{\"kind\":\"Status\",\"apiVersion\":\"v1\",\"metadata\":{},\"status\":\"Failure\","           \
    "\"message\":\"podresd is out of memory; retry later\",\"reason\":\"ServiceUnavailable\","     \
    "\"details\":{},\"code\":503}\n"

struct listener;

/* One daemon's connections, as the warden sees them. */
struct shard {
    struct listener *l;   /* back pointer */
    struct MHD_Daemon *d; /* the daemon */
    int listen_fd;        /* its listening socket */
    unsigned limit;       /* libmicrohttpd's connection limit of the daemon */
};

struct listener {
    struct http *h;                   /* back pointer */
    struct MHD_Daemon *d[SHARDS_MAX]; /* one daemon, or the read-only listener's shards */
    struct shard sh[SHARDS_MAX];      /* their connections, by the same index */
    unsigned nd;                      /* daemons in d */
    bool tcp;                         /* loopback TCP (token rules apply) */
    bool metrics_only;                /* --metrics-listen: /metrics, /healthz, /readyz alone */
};

/* One connection of libmicrohttpd from its accept to its close, in
 * http.conns under http.mu. Its descriptor is valid until on_conn() is told
 * of the close: libmicrohttpd tells before it closes, and waits for mu. */
struct conn {
    struct conn *prev, *next; /* in http.conns */
    struct shard *sh;         /* its daemon */
    int fd;                   /* libmicrohttpd's descriptor */
    bool busy;                /* a request's head is in and not yet answered */
    bool shut;                /* shut down by the warden */
    uint64_t since_ms;        /* accepted, or its last answer ended (monotonic) */
};

struct http {
    struct api *api;         /* borrowed */
    struct listener unix_l;  /* the unix socket */
    struct listener tcp_l;   /* loopback TCP, if configured */
    struct listener mx_l;    /* the metrics-only listener, if configured */
    struct streams *streams; /* the watch streams of both listeners */
    char *socket_path;       /* to remove at stop */
    pthread_mutex_t mu;      /* guards 'conns', the shards' counts, 'stop' */
    pthread_cond_t cv;       /* wakes the warden to stop */
    struct conn *conns;      /* every open connection */
    pthread_t warden;        /* enforces HEAD_DEADLINE_MS, sheds idle TCP */
    bool warden_on;          /* 'warden' runs */
    bool stop;               /* the warden ends */
    int reserve_fd;          /* /dev/null, let go to accept at the fd limit; -1: spent (mu) */
};

/* What answering without memory needs, set by http_start (podresd has one
 * struct http): queue_text and libmicrohttpd's callbacks reach it without
 * a pointer to the http. */
static struct MHD_Response *nomem_resp; /* the 503 Status, shared by every connection */
static char nomem_raw[512];             /* the same as a whole HTTP answer */
static size_t nomem_raw_len;            /* its length */
static struct metrics *scarce_metrics;  /* counts both kinds of scarcity; borrowed */
static atomic_ullong nomem_logged_ms;   /* monotonic ms of the last log, or 0 */
static atomic_ullong nofd_logged_ms;    /* the same for descriptors */

/* Set on a thread-per-connection daemon's thread when libmicrohttpd could
 * not start the thread of the connection it has just accepted: its close
 * notice follows at once, and the client gets nomem_raw. */
static _Thread_local bool thread_failed;

/* Set on a connection's thread that has just handed its socket to the
 * stream loop: libmicrohttpd's "closing connection" message that follows is
 * not an error. Cleared by the completion callback. */
static _Thread_local bool handed_over;

/* Per request state, freed in the completion callback. */
struct ctx {
    char *body;      /* accumulated body */
    size_t len, cap; /* used and allocated */
    size_t declared; /* Content-Length, when given and within HTTP_BODY_MAX */
    bool too_large;  /* over HTTP_BODY_MAX */
    bool no_mem;     /* the body could not be stored: 500 on the final call */
    bool answered;   /* a response was queued */
    size_t route;    /* metrics label index */
    int status;      /* answered status */
    bool stream;     /* a watch stream */
    bool begun;      /* the first call of the access handler is over */
    bool many_args;  /* the query had more than HTTP_ARGS_MAX arguments */
    uint64_t t0_us;  /* start time */
    char method[8];  /* for the debug request log, set only at debug level */
    char path[200];  /* the same: the path without the query, or "" */
};

/* True at most once per SCARCE_LOG_MS for '*last'. */
static bool log_due(atomic_ullong *last)
{
    unsigned long long now = clock_mono_ms() + SCARCE_LOG_MS, prev = atomic_load(last);

    return (prev == 0 || now - prev >= SCARCE_LOG_MS) &&
           atomic_compare_exchange_strong(last, &prev, now);
}

/* An allocation failed for 'what': counted, and logged once a minute. */
static void nomem_note(const char *what)
{
    metrics_count(scarce_metrics, METRICS_NOMEM);
    if (log_due(&nomem_logged_ms))
        log_warn("out of memory %s: answering 503 (logged once a minute; "
                 "podresd_out_of_memory_total counts them)",
                 what);
}

/* Queue the prebuilt 503; nothing is allocated. */
static enum MHD_Result queue_nomem(struct MHD_Connection *conn)
{
    return nomem_resp ? MHD_queue_response(conn, 503, nomem_resp) : MHD_NO;
}

int http_status_of(err_t rc, const char **reason)
{
    static const struct {
        err_t rc;
        int code;
        const char *reason;
    } map[] = {
        {ERR_INVAL, 400, "BadRequest"},
        {ERR_UNPROCESSABLE, 422, "Invalid"},
        {ERR_NOTFOUND, 404, "NotFound"},
        {ERR_CONFLICT, 409, "Conflict"},
        {ERR_FORBIDDEN, 403, "Forbidden"},
        {ERR_GONE, 410, "Expired"},
        {ERR_TOOLARGE, 413, "RequestEntityTooLarge"},
        {ERR_MEDIATYPE, 415, "UnsupportedMediaType"},
        {ERR_METHOD, 405, "MethodNotAllowed"},
        {ERR_NOSPACE, 507, "InsufficientStorage"},
        {ERR_UNAVAIL, 503, "ServiceUnavailable"},
        {ERR_NOMEM, 503, "ServiceUnavailable"},
    };
    size_t i;

    for (i = 0; i < ARRAY_SIZE(map); i++) {
        if (map[i].rc == rc) {
            *reason = map[i].reason;
            return map[i].code;
        }
    }
    *reason = "InternalError";
    return 500;
}

json_t *http_status_json(int code, const char *reason, const char *message)
{
    /* the message may quote a client's bytes, or be cut inside a character */
    return json_pack("{s:s,s:s,s:{},s:s,s:o,s:s,s:{},s:i}", "kind", "Status", "apiVersion", "v1",
                     "metadata", "status", "Failure", "message", jsonx_string_lossy(message),
                     "reason", reason, "details", "code", code);
}

/* Answer 'text' (new, NUL-terminated JSON of 'n' bytes, or NULL when out of
 * memory) followed by a newline, which takes the NUL's place. */
static enum MHD_Result queue_text(struct MHD_Connection *conn, struct ctx *c, int status,
                                  char *text, size_t n, const char *allow)
{
    struct MHD_Response *resp = NULL;
    enum MHD_Result ret;

    if (text) {
        text[n] = '\n';
        resp = MHD_create_response_from_buffer(n + 1, text, MHD_RESPMEM_MUST_FREE);
        if (!resp)
            free(text);
    }
    c->answered = true;
    if (!resp ||
        (allow && MHD_add_response_header(resp, MHD_HTTP_HEADER_ALLOW, allow) != MHD_YES) ||
        MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE, "application/json") !=
            MHD_YES) {
        MHD_destroy_response(resp); /* NULL is a no-op */
        nomem_note("answering a request");
        c->status = 503;
        return queue_nomem(conn);
    }
    ret = MHD_queue_response(conn, (unsigned)status, resp);
    MHD_destroy_response(resp);
    c->status = status;
    return ret;
}

/* json_dumps leaves room after the text: its NUL becomes the newline. */
static enum MHD_Result queue_json(struct MHD_Connection *conn, struct ctx *c, int status,
                                  json_t *body, const char *allow)
{
    char *text = body ? json_dumps(body, JSON_COMPACT) : NULL;

    json_decref(body);
    return queue_text(conn, c, status, text, text ? strlen(text) : 0, allow);
}

static enum MHD_Result queue_error_allow(struct MHD_Connection *conn, struct ctx *c, err_t rc,
                                         const char *msg, const char *allow)
{
    const char *reason;
    int code = http_status_of(rc, &reason);

    if (rc == ERR_NOMEM)
        nomem_note(msg && *msg ? msg : "in a request");
    else if (code >= 500 && rc != ERR_NOSPACE && rc != ERR_UNAVAIL)
        log_warn("request failed: %s%s%s", err_str(rc), msg && *msg ? ": " : "", msg ? msg : "");
    return queue_json(conn, c, code,
                      http_status_json(code, reason, msg && *msg ? msg : err_str(rc)), allow);
}

static enum MHD_Result queue_error(struct MHD_Connection *conn, struct ctx *c, err_t rc,
                                   const char *msg)
{
    return queue_error_allow(conn, c, rc, msg, NULL);
}

/* ---- routing ---- */

/* Split 'path' (modified in place) into segments. False on an empty segment. */
static bool split_path(char *p, const char **seg, size_t *n)
{
    *n = 0;
    if (*p != '/')
        return false;
    p++;
    if (*p == '\0')
        return true;
    for (;;) {
        if (*n == API_MAX_SEGS || *p == '/' || *p == '\0')
            return false;
        seg[(*n)++] = p;
        p = strchr(p, '/');
        if (!p)
            return true;
        *p++ = '\0';
    }
}

/* True when 'pattern' ("v1/resources/{*}/{*}/devices" spelled with bare
 * stars) has exactly the segments 'seg'; a star matches any one segment. */
static bool pattern_matches(const char *pattern, const char *const *seg, size_t n)
{
    const char *p = pattern, *end;
    size_t i, len;

    for (i = 0; i < n; i++) {
        if (*p == '\0')
            return false;
        end = strchr(p, '/');
        len = end ? (size_t)(end - p) : strlen(p);
        if (!(len == 1 && *p == '*') && (strlen(seg[i]) != len || strncmp(p, seg[i], len) != 0))
            return false;
        p += len;
        if (*p == '/')
            p++;
    }
    return *p == '\0';
}

/* The route for method and segments; *path_known tells 405 from 404. A 405
 * has no route: /metrics counts it as unmatched, as a 404. */
static const struct api_route *find_route(const char *method, const char *const *seg, size_t n,
                                          bool *path_known)
{
    size_t i;

    *path_known = false;
    for (i = 0; i < api_nroutes; i++) {
        if (!pattern_matches(api_routes[i].pattern, seg, n))
            continue;
        *path_known = true;
        if (strcmp(api_routes[i].method, method) == 0 ||
            (strcmp(method, "HEAD") == 0 && strcmp(api_routes[i].method, "GET") == 0))
            return &api_routes[i];
    }
    return NULL;
}

static void allow_header(char *buf, size_t cap, const char *const *seg, size_t n)
{
    size_t i, len = 0;

    buf[0] = '\0';
    for (i = 0; i < api_nroutes; i++) {
        if (pattern_matches(api_routes[i].pattern, seg, n))
            len += (size_t)snprintf(buf + len, len < cap ? cap - len : 0, "%s%s", len ? ", " : "",
                                    api_routes[i].method);
        if (len >= cap)
            break;
    }
}

/* What the metrics-only listener serves: reads that show no binding by
 * name beyond what /metrics itself shows, no writes, no watch. */
static bool metrics_route(const struct api_route *rt)
{
    return !rt->write && (strcmp(rt->label, "/metrics") == 0 ||
                          strcmp(rt->label, "/healthz") == 0 || strcmp(rt->label, "/readyz") == 0);
}

/* The route 'l' serves for the request, as find_route; on the metrics-only
 * listener every other request is an unknown path (404). */
static const struct api_route *listener_route(const struct listener *l, const char *method,
                                              const struct api_req *r, bool *known)
{
    const struct api_route *rt = find_route(method, r->seg, r->nseg, known);

    if (l->metrics_only && !(rt && metrics_route(rt))) {
        *known = false;
        return NULL;
    }
    return rt;
}

/* ---- access rules ---- */

/* The rest of a Host value after its host part: nothing, or ':' and a port
 * of at most five digits (RFC 3986: port = *DIGIT). "127.0.0.1:80@evil"
 * is not a loopback Host, whatever a client makes of it. */
static bool host_port_ok(const char *p)
{
    size_t n;

    if (*p == '\0')
        return true;
    if (*p != ':')
        return false;
    n = strspn(p + 1, "0123456789");
    return n <= 5 && p[1 + n] == '\0';
}

/* Host must name the loopback (DNS-rebinding defence on TCP). */
static bool host_ok(const char *host)
{
    char name[256];
    const char *end;
    size_t n;

    if (!host)
        return true; /* HTTP/1.0 without Host */
    if (host[0] == '[') {
        end = strchr(host, ']');
        if (!end)
            return false;
        n = (size_t)(end - host - 1);
        return n == 3 && strncmp(host + 1, "::1", 3) == 0 && host_port_ok(end + 1);
    }
    end = strchr(host, ':');
    n = end ? (size_t)(end - host) : strlen(host);
    if (n == 0 || n >= sizeof(name) || (end && !host_port_ok(end)))
        return false;
    memcpy(name, host, n);
    name[n] = '\0';
    if (strcasecmp(name, "localhost") == 0)
        return true;
    struct in_addr a;
    return inet_pton(AF_INET, name, &a) == 1 && (ntohl(a.s_addr) >> 24) == 127;
}

static err_t check_access(struct listener *l, struct MHD_Connection *conn,
                          const struct api_route *rt, char *msg, size_t cap)
{
    struct api *api = l->h->api;
    const char *why = NULL; /* for the debug log: no header's value, no token word */

    if (l->tcp && !host_ok(MHD_lookup_connection_value(conn, MHD_HEADER_KIND, "Host"))) {
        snprintf(msg, cap, "the Host header must name the loopback interface");
        why = "Host is not loopback";
    } else if (!rt->write) {
        return ERR_OK;
    } else if (l->tcp && !api->token) {
        snprintf(msg, cap,
                 "writes over TCP are disabled: configure --write-token-file, or use "
                 "the unix socket");
        why = "TCP is read-only";
    } else if (l->tcp && !token_check(api->token, MHD_lookup_connection_value(conn, MHD_HEADER_KIND,
                                                                              "Authorization"))) {
        snprintf(msg, cap, "writes over TCP need a valid bearer token");
        why = "no valid write credential";
    } else if (rt->binding_write && api->kubelet_mode) {
        snprintf(msg, cap, "devices and bindings are read-only with source kubelet");
        why = "read-only with source kubelet";
    }
    if (why) {
        log_debug("refused %s %s on %s: %s", rt->method, rt->label,
                  l->tcp ? "TCP" : "the unix socket", why);
        return ERR_FORBIDDEN;
    }
    if (api->stopping) {
        snprintf(msg, cap, "podresd is shutting down");
        return ERR_UNAVAIL;
    }
    return ERR_OK;
}

/* True when the media type of 'ct' (before any ';' parameters) is 'want'. */
static bool media_is(const char *ct, const char *want)
{
    size_t n = strlen(want);

    if (strncasecmp(ct, want, n) != 0)
        return false;
    ct += n;
    while (*ct == ' ' || *ct == '\t')
        ct++;
    return *ct == '\0' || *ct == ';';
}

/* libmicrohttpd's unescape, except that %00 stays as it is: a NUL would cut
 * a name or a uid short after the check. Names with '%' fail validation. */
static size_t unescape(void *cls, struct MHD_Connection *conn, char *s)
{
    char *r = s, *w = s;
    int hi, lo;

    (void)cls;
    (void)conn;
    while (*r) {
        if (r[0] == '%' && (hi = hexval(r[1])) >= 0 && (lo = hexval(r[2])) >= 0 && (hi | lo) != 0) {
            *w++ = (char)(hi * 16 + lo);
            r += 3;
        } else {
            *w++ = *r++;
        }
    }
    *w = '\0';
    return (size_t)(w - s);
}

static err_t check_body(struct MHD_Connection *conn, struct ctx *c, const struct api_route *rt,
                        char *msg, size_t cap)
{
    const char *ct = MHD_lookup_connection_value(conn, MHD_HEADER_KIND, "Content-Type");

    if (!rt->has_body)
        return ERR_OK;
    if (ct && !media_is(ct, "application/json") &&
        !(strcmp(rt->method, "PATCH") == 0 && media_is(ct, "application/merge-patch+json"))) {
        snprintf(msg, cap, "Content-Type \"%.100s\" is not supported: send application/json", ct);
        return ERR_MEDIATYPE;
    }
    if (!c->body || c->len == 0) {
        snprintf(msg, cap, "request body is empty; expected a JSON object");
        return ERR_INVAL;
    }
    if (memchr(c->body, '\0', c->len)) {
        snprintf(msg, cap, "request body contains a NUL byte");
        return ERR_INVAL;
    }
    return ERR_OK;
}

/* Give the connection's socket to the stream loop with the response head
 * for 'out'; libmicrohttpd then closes its connection (MHD_NO). */
static enum MHD_Result hand_over(struct listener *l, struct MHD_Connection *conn, struct ctx *c,
                                 const char *method, const char *version, struct api_resp *out)
{
    const union MHD_ConnectionInfo *ci = MHD_get_connection_info(conn,
                                                                 MHD_CONNECTION_INFO_CONNECTION_FD);
    bool chunked = strcmp(version, MHD_HTTP_VERSION_1_0) != 0;
    char head[512], date[64];
    struct tm tm;
    time_t t = time(NULL);
    socklen_t dlen = sizeof(int);
    int fd = -1, dummy = -1, domain = AF_UNIX;
    err_t rc;

    if (strcmp(method, "HEAD") == 0) {
        /* The head alone: libmicrohttpd answers it on this connection. */
        struct MHD_Response *resp = MHD_create_response_from_buffer(0, NULL,
                                                                    MHD_RESPMEM_PERSISTENT);
        enum MHD_Result ret;

        out->src->free(out->src_cls);
        if (!resp)
            return MHD_NO;
        MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE, out->content_type);
        MHD_add_response_header(resp, MHD_HTTP_HEADER_CACHE_CONTROL, "no-cache");
        ret = MHD_queue_response(conn, (unsigned)out->status, resp);
        MHD_destroy_response(resp);
        c->answered = true;
        c->status = out->status;
        return ret;
    }
    /* A descriptor of the socket for the stream loop, and a fresh socket
     * of the same kind that libmicrohttpd's descriptor will name once the
     * loop has the stream: its shutdown() and close() then touch only that. */
    if (!ci || getsockopt(ci->connect_fd, SOL_SOCKET, SO_DOMAIN, &domain, &dlen) != 0 ||
        (dummy = socket(domain, SOCK_STREAM | SOCK_CLOEXEC, 0)) < 0 ||
        (fd = fcntl(ci->connect_fd, F_DUPFD_CLOEXEC, 0)) < 0) {
        if (dummy >= 0)
            close(dummy);
        out->src->free(out->src_cls);
        return queue_error(conn, c, ERR_IO, "cannot take over the connection for the stream");
    }
    gmtime_r(&t, &tm);
    strftime(date, sizeof(date), "%a, %d %b %Y %H:%M:%S GMT", &tm);
    snprintf(head, sizeof(head),
             "HTTP/1.1 %d OK\r\nDate: %s\r\nContent-Type: %s\r\nCache-Control: no-cache\r\n"
             "Connection: close\r\n%s\r\n",
             out->status, date, out->content_type, chunked ? "Transfer-Encoding: chunked\r\n" : "");
    /* On failure 'fd' is closed and libmicrohttpd's descriptor is intact. */
    rc = streams_adopt(l->h->streams, fd, head, chunked, out->src, out->src_cls);
    if (rc) {
        close(dummy);
        return queue_error(conn, c, rc,
                           rc == ERR_UNAVAIL ? "too many watch streams are open; retry later"
                                             : "cannot start the stream");
    }
    /* Onto an open descriptor: needs no new slot, cannot fail for lack of one. */
    if (dup3(dummy, ci->connect_fd, O_CLOEXEC) < 0)
        log_warn("cannot detach a watch stream from libmicrohttpd: %s", strerror(errno));
    close(dummy);
    c->answered = true;
    c->status = out->status;
    handed_over = true;
    return MHD_NO;
}

/* Who may call it, its query parameters, its body. */
static err_t check_request(struct listener *l, struct MHD_Connection *conn, struct ctx *c,
                           const struct api_route *rt, struct api_req *r)
{
    err_t rc = check_access(l, conn, rt, r->msg, sizeof(r->msg));

    if (!rc)
        rc = api_check_params(r, rt);
    if (!rc)
        rc = check_body(conn, c, rt, r->msg, sizeof(r->msg));
    return rc;
}

static enum MHD_Result dispatch(struct listener *l, struct MHD_Connection *conn, struct ctx *c,
                                const char *url, const char *method, const char *version)
{
    struct api_req r;
    struct api_resp out = {0};
    const struct api_route *rt;
    char path[1024], allow[64];
    bool known;
    err_t rc;

    memset(&r, 0, sizeof(r));
    r.api = l->h->api;
    r.conn = conn;
    c->route = api_nroutes;
    if (strlen(url) >= sizeof(path) ||
        !split_path(memcpy(path, url, strlen(url) + 1), r.seg, &r.nseg))
        return queue_error(conn, c, ERR_NOTFOUND, "the path is not served by podresd");
    rt = listener_route(l, method, &r, &known);
    if (!rt && !known)
        return queue_error(conn, c, ERR_NOTFOUND,
                           l->metrics_only ? "the metrics listener serves GET /metrics, /healthz "
                                             "and /readyz only"
                                           : "the path is not served by podresd");
    if (!rt) {
        snprintf(r.msg, sizeof(r.msg), "method %.16s is not allowed on %.200s", method, url);
        allow_header(allow, sizeof(allow), r.seg, r.nseg);
        return queue_error_allow(conn, c, ERR_METHOD, r.msg, allow);
    }
    c->route = (size_t)(rt - api_routes);
    /* RFC 9112 3.2: an HTTP/1.1 request without Host is a 400; on TCP the
     * Host is what the DNS-rebinding check reads */
    if (l->tcp && strcmp(version, MHD_HTTP_VERSION_1_0) != 0 &&
        !MHD_lookup_connection_value(conn, MHD_HEADER_KIND, "Host"))
        return queue_error(conn, c, ERR_INVAL, "an HTTP/1.1 request needs a Host header");
    rc = check_request(l, conn, c, rt, &r);
    if (rc)
        return queue_error(conn, c, rc, r.msg);
    r.body = c->body;
    r.body_len = c->len;
    rc = rt->fn(&r, &out);
    if (rc) {
        free(out.text);
        return queue_error(conn, c, rc, r.msg);
    }
    c->stream = out.stream;
    if (out.src)
        return hand_over(l, conn, c, method, version, &out);
    if (out.raw) {
        enum MHD_Result ret = MHD_queue_response(conn, (unsigned)out.status, out.raw);

        MHD_destroy_response(out.raw);
        json_decref(out.json);
        free(out.text);
        c->answered = true;
        c->status = out.status;
        return ret;
    }
    if (out.text) {
        json_decref(out.json);
        return queue_text(conn, c, out.status, out.text, out.text_len, NULL);
    }
    return queue_json(conn, c, out.status, out.json, NULL);
}

static const char *listener_name(const struct listener *l)
{
    return l->metrics_only ? "the metrics listener" : l->tcp ? "TCP" : "the unix socket";
}

/* ---- the warden: connections as a whole, beside libmicrohttpd ---- */

static void conn_add(struct shard *sh, struct MHD_Connection *conn, void **socket_context)
{
    const union MHD_ConnectionInfo *ci = MHD_get_connection_info(conn,
                                                                 MHD_CONNECTION_INFO_CONNECTION_FD);
    struct http *h = sh->l->h;
    struct conn *c = ci ? calloc(1, sizeof(*c)) : NULL;

    if (!c)
        return; /* untracked: libmicrohttpd's own timeout alone applies */
    c->sh = sh;
    c->fd = ci->connect_fd;
    c->since_ms = clock_mono_ms();
    pthread_mutex_lock(&h->mu);
    c->next = h->conns;
    if (h->conns)
        h->conns->prev = c;
    h->conns = c;
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

/* Answer the prebuilt 503 on a connection that libmicrohttpd accepted but
 * could not give a thread (it closes the socket next): without it the
 * client sees its connection close without an answer. The request, or
 * what of it is in, is read first: closing a TCP socket with unread bytes
 * would send a reset, and the client could lose the answer. */
static void refuse_nomem(struct MHD_Connection *conn)
{
    const union MHD_ConnectionInfo *ci = MHD_get_connection_info(conn,
                                                                 MHD_CONNECTION_INFO_CONNECTION_FD);
    char junk[4096];
    int i;

    nomem_note("starting a connection's thread");
    if (!ci || !nomem_raw_len)
        return;
    for (i = 0; i < 4 && recv(ci->connect_fd, junk, sizeof(junk), MSG_DONTWAIT) > 0; i++)
        ;
    if (send(ci->connect_fd, nomem_raw, nomem_raw_len, MSG_DONTWAIT | MSG_NOSIGNAL) > 0)
        shutdown(ci->connect_fd, SHUT_WR);
}

/* libmicrohttpd's notice of a connection's accept and of its close (before
 * the close of its descriptor: the warden may shut it down until then). */
static void on_conn(void *cls, struct MHD_Connection *conn, void **socket_context,
                    enum MHD_ConnectionNotificationCode toe)
{
    struct shard *sh = cls;

    if (toe == MHD_CONNECTION_NOTIFY_STARTED) {
        thread_failed = false;
        conn_add(sh, conn, socket_context);
        return;
    }
    if (thread_failed) {
        thread_failed = false;
        refuse_nomem(conn);
    }
    if (*socket_context) {
        conn_del(sh->l->h, *socket_context);
        *socket_context = NULL;
    }
}

/* A request's head is in ('busy'), or its answer is over. */
static void conn_mark(struct listener *l, struct MHD_Connection *conn, bool busy)
{
    const union MHD_ConnectionInfo *ci = MHD_get_connection_info(
        conn, MHD_CONNECTION_INFO_SOCKET_CONTEXT);
    struct conn *c = ci ? ci->socket_context : NULL;

    if (!c)
        return;
    pthread_mutex_lock(&l->h->mu);
    c->busy = busy;
    c->since_ms = clock_mono_ms();
    pthread_mutex_unlock(&l->h->mu);
}

/* Make libmicrohttpd close 'c': its poll sees the end of the stream. */
static void shut(struct conn *c)
{
    shutdown(c->fd, SHUT_RDWR);
    c->shut = true;
}

/* The oldest connection of 'sh' without a request, or NULL. */
static struct conn *oldest_idle(struct http *h, const struct shard *sh)
{
    struct conn *c, *old = NULL;

    for (c = h->conns; c; c = c->next) {
        if (c->sh == sh && !c->busy && !c->shut && (!old || c->since_ms < old->since_ms))
            old = c;
    }
    return old;
}

/* Shed idle connections of 'sh', oldest first, when it is nearly full. */
static void shed(struct http *h, struct shard *sh)
{
    unsigned live = 0;
    struct conn *c;

    for (c = h->conns; c; c = c->next)
        live += c->sh == sh && !c->shut;
    if (live * 100 < sh->limit * SHED_AT_PERCENT)
        return;
    log_debug("shedding idle TCP connections: %u of %u open", live, sh->limit);
    while (live * 100 > sh->limit * SHED_TO_PERCENT) {
        c = oldest_idle(h, sh);
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
    unsigned i;

    for (c = h->conns; c; c = c->next) {
        if (!c->busy && !c->shut && now - c->since_ms >= HEAD_DEADLINE_MS) {
            log_debug("closing a connection without a whole request for %d s",
                      HEAD_DEADLINE_MS / 1000);
            shut(c);
        }
    }
    for (i = 0; i < h->tcp_l.nd; i++)
        shed(h, &h->tcp_l.sh[i]);
    if (h->reserve_fd < 0)
        h->reserve_fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
}

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
 * listeners are up (warden_start). */
static void warden_init(struct http *h)
{
    pthread_condattr_t ca;

    pthread_mutex_init(&h->mu, NULL);
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&h->cv, &ca);
    pthread_condattr_destroy(&ca);
}

static err_t warden_start(struct http *h)
{
    int e = pthread_create(&h->warden, NULL, warden, h);

    if (e) {
        log_err("cannot start the connection warden: %s", strerror(e)); /* not errno */
        return ERR_IO;
    }
    h->warden_on = true;
    return ERR_OK;
}

static void warden_stop(struct http *h)
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

/* ---- the MHD callbacks ---- */

#define HTTP_BODY_FIRST (64 * 1024) /* most bytes allocated before they come */

static bool body_append(struct ctx *c, const char *data, size_t n)
{
    if (c->len + n > HTTP_BODY_MAX) {
        c->too_large = true;
        return false;
    }
    if (c->len + n + 1 > c->cap) {
        /* A declared body gets its size at once, up to HTTP_BODY_FIRST
         * (more only as it comes): a PUT's few hundred bytes stay a small
         * block, where a 4 KiB one cost glibc a consolidation of its fast
         * bins per request (2 % of podresd's CPU at 16 clients, perf). One
         * without Content-Length (chunked) starts at 4 KiB. */
        size_t ncap = c->cap ? c->cap : 4096;
        char *nb;

        if (!c->cap && c->declared)
            ncap = c->declared < HTTP_BODY_FIRST ? c->declared + 1 : HTTP_BODY_FIRST;
        while (ncap < c->len + n + 1)
            ncap *= 2;
        nb = fault_alloc_fails() ? NULL : realloc(c->body, ncap);
        if (!nb)
            return false;
        c->body = nb;
        c->cap = ncap;
    }
    memcpy(c->body + c->len, data, n);
    c->len += n;
    c->body[c->len] = '\0';
    return true;
}

static enum MHD_Result too_large(struct MHD_Connection *conn, struct ctx *c)
{
    char msg[96];

    snprintf(msg, sizeof(msg), "request body is larger than the limit of %d bytes", HTTP_BODY_MAX);
    return queue_error(conn, c, ERR_TOOLARGE, msg);
}

/* The first call of a request: a body its Content-Length declares over
 * HTTP_BODY_MAX is refused. Answering before the body is clean only when
 * the client waits for the answer (Expect: 100-continue): one still sending
 * when libmicrohttpd closes the connection with unread data gets a reset,
 * and curl then reports no answer at all (7 of 200 tries). So a body up to
 * HTTP_DRAIN_MAX is read and dropped, and 413 answered at its end; beyond
 * that, or with Expect, 413 goes at once. */
static enum MHD_Result check_declared(struct MHD_Connection *conn, struct ctx *c)
{
    const char *cl = MHD_lookup_connection_value(conn, MHD_HEADER_KIND, "Content-Length");
    unsigned long long declared = cl ? strtoull(cl, NULL, 10) : 0;
    const char *ex;

    if (declared <= HTTP_BODY_MAX) {
        c->declared = (size_t)declared;
        return MHD_YES;
    }
    ex = MHD_lookup_connection_value(conn, MHD_HEADER_KIND, "Expect");
    if ((ex && strcasecmp(ex, "100-continue") == 0) || declared > HTTP_DRAIN_MAX)
        return too_large(conn, c);
    c->too_large = true; /* the body is dropped as it comes */
    return MHD_YES;
}

/* The framing headers of a request, as framing_header() finds them. */
struct framing {
    const char *clen; /* the first Content-Length */
    bool clen_differ; /* another Content-Length has another value */
    unsigned te;      /* Transfer-Encoding headers */
    bool te_other;    /* one of them is not "chunked" */
};

static enum MHD_Result framing_header(void *cls, enum MHD_ValueKind kind, const char *key,
                                      const char *value)
{
    struct framing *f = cls;

    (void)kind;
    value = value ? value : "";
    if (strcasecmp(key, MHD_HTTP_HEADER_CONTENT_LENGTH) == 0) {
        if (f->clen && strcmp(f->clen, value) != 0)
            f->clen_differ = true;
        if (!f->clen)
            f->clen = value;
    } else if (strcasecmp(key, MHD_HTTP_HEADER_TRANSFER_ENCODING) == 0) {
        f->te++;
        f->te_other = f->te_other || strcasecmp(value, "chunked") != 0;
    }
    return MHD_YES;
}

/* Why the request's body framing is ambiguous (RFC 9112 6.1, 6.3), or NULL.
 * libmicrohttpd 0.9.75 takes the first of two Content-Length headers and
 * lets Transfer-Encoding win over Content-Length: a proxy in front that
 * reads them otherwise sees other requests on the connection than podresd
 * (request smuggling). Such a request gets 400 and the connection closes. */
static const char *framing_error(struct MHD_Connection *conn)
{
    struct framing f = {0};

    MHD_get_connection_values(conn, MHD_HEADER_KIND, framing_header, &f);
    if (f.clen_differ)
        return "Content-Length headers with different values: the body's length is ambiguous";
    if (f.clen && f.te)
        return "Content-Length together with Transfer-Encoding: the body's length is ambiguous";
    if (f.te > 1 || f.te_other)
        return "Transfer-Encoding other than one \"chunked\" is not supported";
    return NULL;
}

/* libmicrohttpd's URI log callback: the request line's URI before the query
 * is split. 0.9.75 stores each query argument in the connection's pool
 * (16 KiB, see start_daemon) and, when it runs out (~200 short pairs),
 * closes the connection without a byte: the 431 it queues is lost when its
 * parser goes on. So beyond HTTP_ARGS_MAX arguments the query is cut off
 * here, in libmicrohttpd's read buffer that it splits next (the URI is
 * NUL-terminated there and writable: libmicrohttpd writes into it next),
 * and the request is answered 400. The result is the request's context. */
static void *on_uri(void *cls, const char *uri, struct MHD_Connection *conn)
{
    struct ctx *c = calloc(1, sizeof(*c));
    char *q = uri ? memchr(uri, '?', strlen(uri)) : NULL;
    size_t n = 1;
    const char *p;

    (void)cls;
    (void)conn;
    if (!c || !q)
        return c;
    for (p = q; *p; p++)
        n += *p == '&';
    if (n > HTTP_ARGS_MAX) {
        q[1] = '\0';
        c->many_args = true;
    }
    return c;
}

/* The first call of a request: its context, then what the headers alone
 * decide. An answer queued here closes the connection (see the top). */
static enum MHD_Result first_call(struct MHD_Connection *conn, struct ctx *c, void **con_cls,
                                  const char *method, const char *url)
{
    const char *why;

    if (!c) {
        c = calloc(1, sizeof(*c));
        if (!c) {
            nomem_note("starting a request");
            return queue_nomem(conn);
        }
        *con_cls = c;
    }
    c->begun = true;
    c->t0_us = clock_mono_us();
    if (log_enabled(LOG_DEBUG)) {
        str_copy(c->method, sizeof(c->method), method);
        str_copy(c->path, sizeof(c->path), url);
    }
    c->route = api_nroutes;
    why = framing_error(conn);
    if (why)
        return queue_error(conn, c, ERR_INVAL, why);
    return check_declared(conn, c);
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *conn, const char *url,
                                  const char *method, const char *version, const char *upload_data,
                                  size_t *upload_data_size, void **con_cls)
{
    struct listener *l = cls;
    struct ctx *c = *con_cls;
    char msg[96];

    if (!c || !c->begun) {
        conn_mark(l, conn, true);
        return first_call(conn, c, con_cls, method, url);
    }
    if (c->answered) {
        *upload_data_size = 0; /* discard */
        return MHD_YES;
    }
    if (*upload_data_size) {
        /* MHD 0.9.75 refuses a response queued while the body still comes:
         * the rest is discarded and the answer given on the final call. */
        if (!c->too_large && !c->no_mem && !body_append(c, upload_data, *upload_data_size))
            c->no_mem = !c->too_large;
        *upload_data_size = 0;
        return MHD_YES;
    }
    if (c->too_large)
        return too_large(conn, c);
    if (c->no_mem)
        return queue_error(conn, c, ERR_NOMEM, "out of memory reading the body");
    if (c->many_args) {
        snprintf(msg, sizeof(msg), "the query has more than %d arguments", HTTP_ARGS_MAX);
        return queue_error(conn, c, ERR_INVAL, msg);
    }
    return dispatch(l, conn, c, url, method, version);
}

static void on_completed(void *cls, struct MHD_Connection *conn, void **con_cls,
                         enum MHD_RequestTerminationCode toe)
{
    struct listener *l = cls;
    struct ctx *c = *con_cls;

    (void)toe;
    handed_over = false;
    conn_mark(l, conn, false);
    if (!c)
        return;
    if (c->answered) {
        uint64_t us = clock_mono_us() - c->t0_us;

        metrics_observe(l->h->api->metrics, c->route, c->status, us, !c->stream);
        /* No header and no body: the Authorization header stays out. */
        if (c->path[0])
            log_debug("%s %s on %s: %d in %.3f ms%s", c->method, c->path, listener_name(l),
                      c->status, (double)us / 1000.0, c->stream ? " (stream handed over)" : "");
    }
    free(c->body);
    free(c);
    *con_cls = NULL;
}

/* The oldest idle TCP connections, up to 'n', are shut. Caller holds mu. */
static void shed_tcp(struct http *h, unsigned n)
{
    struct conn *c, *old;

    while (n--) {
        old = NULL;
        for (c = h->conns; c; c = c->next) {
            if (c->sh->l->tcp && !c->busy && !c->shut && (!old || c->since_ms < old->since_ms))
                old = c;
        }
        if (!old)
            return;
        shut(old);
    }
}

/* Take the connection waiting on 'sh' with the reserve descriptor: one on
 * the unix socket is served, one on TCP closed. Caller holds mu. Returns a
 * unix connection's descriptor to add to the daemon, else -1. */
static int accept_with_reserve(struct http *h, struct shard *sh, struct sockaddr_storage *ss,
                               socklen_t *len)
{
    int fd;

    close(h->reserve_fd);
    *len = sizeof(*ss);
    fd = accept4(sh->listen_fd, (struct sockaddr *)ss, len, SOCK_CLOEXEC | SOCK_NONBLOCK);
    if (fd >= 0 && sh->l->tcp) {
        close(fd);
        fd = -1;
    }
    /* Fails while a unix connection holds its place: the warden retries. */
    h->reserve_fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
    return fd;
}

/* Count an accept that failed for want of resources; log it once a minute. */
static void accept_note(const struct shard *sh, int err)
{
    metrics_count(scarce_metrics,
                  err == EMFILE || err == ENFILE ? METRICS_FD_EXHAUSTED : METRICS_NOMEM);
    if (log_due(&nofd_logged_ms))
        log_warn("cannot accept a connection on %s: %s; closing new TCP connections and "
                 "shedding idle ones for the unix socket's (logged once a minute)",
                 sh->l->tcp ? "TCP" : "the unix socket", strerror(err));
}

/* libmicrohttpd 0.9.75's accept on 'sh' failed with 'err', which it tells
 * only through its logger. Out of descriptors, a listener with no
 * connection retries at once for as long as the connection waits (100 %
 * CPU), and one with connections stops accepting until one of them closes:
 * the unix socket would go deaf. So the waiting connection is taken with
 * the reserve descriptor (served on the unix socket, closed on TCP); for
 * the unix socket idle TCP connections are shed too, to make room for the
 * next one and the reserve; without a reserve the thread backs off before
 * libmicrohttpd retries. */
static void accept_failed(struct shard *sh, int err)
{
    struct http *h = sh->l->h;
    struct sockaddr_storage ss;
    socklen_t len = 0;
    struct timespec pause = {.tv_nsec = ACCEPT_BACKOFF_MS * 1000000L};
    int fd = -1;
    bool took = false;

    if (err != EMFILE && err != ENFILE && err != ENOMEM && err != ENOBUFS)
        return;
    accept_note(sh, err);
    pthread_mutex_lock(&h->mu);
    if (!sh->l->tcp)
        shed_tcp(h, SHED_ON_EMFILE);
    if (h->reserve_fd >= 0 && err != ENOMEM && err != ENOBUFS) {
        fd = accept_with_reserve(h, sh, &ss, &len);
        took = true;
    }
    pthread_mutex_unlock(&h->mu);
    /* It becomes libmicrohttpd's, closed by it even on failure. */
    if (fd >= 0 && MHD_add_connection(sh->d, fd, (struct sockaddr *)&ss, len) != MHD_YES)
        log_debug("cannot hand a connection taken at the descriptor limit to libmicrohttpd");
    if (!took)
        nanosleep(&pause, NULL);
}

/* libmicrohttpd's own messages; 'fmt' is its printf format. Two of them
 * are acted on: a failed accept, and a connection without a thread. */
__attribute__((format(printf, 2, 0))) static void mhd_log(void *cls, const char *fmt, va_list ap)
{
    int err = errno; /* the failed call's, for a failed accept */
    char msg[512];
    size_t n;

    if (strncmp(fmt, "Error accepting connection", 26) == 0)
        accept_failed(cls, err);
    else if (strncmp(fmt, "Failed to create a", 18) == 0)
        thread_failed = true;
    if (handed_over)
        return;
    vsnprintf(msg, sizeof(msg), fmt, ap);
    n = strlen(msg);
    while (n && msg[n - 1] == '\n')
        msg[--n] = '\0';
    log_debug("libmicrohttpd: %s", msg);
}

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
    if (!rc)
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

/* A listening socket on 'spec', any address when 'any', else loopback. With
 * 'shard', SO_REUSEPORT: the kernel spreads new connections over every
 * socket so bound (see tcp_shards). */
static err_t tcp_listen(const char *spec, bool any, bool shard, int *out)
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
    if (shard && setsockopt(fd, SOL_SOCKET, SO_REUSEPORT, &one, sizeof(one)) != 0) {
        log_err("cannot listen on '%s': SO_REUSEPORT: %s", spec, strerror(errno));
        close(fd);
        return ERR_IO;
    }
    if (bind(fd, (struct sockaddr *)&ss, len) != 0 || listen(fd, LISTEN_BACKLOG) != 0) {
        log_err("cannot listen on '%s': %s", spec, strerror(errno));
        close(fd);
        return ERR_IO;
    }
    *out = fd;
    return ERR_OK;
}

/* Shards of the read-only TCP listener: four per CPU, at most SHARDS_MAX.
 * Each is a daemon with one polling thread and its own SO_REUSEPORT socket,
 * so a new connection wakes one thread. Measured on 2 CPUs (docs/
 * BENCHMARKS.md, row 2): with fewer threads, one that the clients' load
 * preempts stalls every connection it holds (keep-alive p99 up to 2x
 * nginx's); libmicrohttpd's own pool shares one socket and wakes every
 * thread on each new connection (8 threads: close 0.7-0.8x nginx). */
static unsigned tcp_shards(void)
{
    long n = sysconf(_SC_NPROCESSORS_ONLN);

    return n < 1 ? 4 : n * 4 >= SHARDS_MAX ? SHARDS_MAX : (unsigned)n * 4;
}

/* Add a daemon on 'fd' to 'l'. A listener that takes writes runs a thread
 * per connection: a write waits for its COMMIT, and in a shared thread it
 * would stall every connection there. The TCP listener without a token is
 * read-only: its answers come from the cache or one short read, and a
 * watch leaves for the stream loop, so each shard's one polling thread
 * serves all its connections, and a monitoring agent that polls with a new
 * connection each time costs no thread start. poll, not epoll: epoll would
 * keep a handed-over socket registered under libmicrohttpd's freed
 * connection (see hand_over). 'limit': connections of this daemon. */
static err_t start_daemon(struct listener *l, int fd, bool shared, unsigned limit,
                          const struct http_opts *o)
{
    unsigned flags = MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_POLL | MHD_USE_ERROR_LOG |
                     MHD_USE_ITC | (shared ? 0u : (unsigned)MHD_USE_THREAD_PER_CONNECTION);
    struct shard *sh = &l->sh[l->nd];

    sh->l = l;
    sh->limit = limit;
    sh->listen_fd = fd;
    /* one option and its values a line */
    /* clang-format off */
    struct MHD_Daemon *d = MHD_start_daemon(
        flags, 0, NULL, NULL, on_request, l,
        MHD_OPTION_EXTERNAL_LOGGER, mhd_log, sh,
        MHD_OPTION_LISTEN_SOCKET, fd,
        MHD_OPTION_CONNECTION_LIMIT, limit,
        MHD_OPTION_CONNECTION_TIMEOUT, o->timeout_s,
        MHD_OPTION_PER_IP_CONNECTION_LIMIT, l->tcp ? limit : 0,
        /* 8 MiB, glibc's usual default. glibc keeps exited threads' stacks
         * for reuse, 40 MiB of them in all, and each kept stack holds its
         * top pages (TLS, the last frames: ~17 KiB): at 1 MiB that was 40
         * stacks, ~0.7 MiB held for good after a burst of connections (100
         * watchers); at 8 MiB it is 5. The price, an mmap for each thread
         * beyond 5 new at once: Connection: close at 32 clients on a thread
         * per connection listener fell from ~20,000 to ~13,000/s. */
        MHD_OPTION_THREAD_STACK_SIZE, (size_t)(8 * 1024 * 1024),
        /* 16 KiB per connection (default 32): headers beyond it get 431. */
        MHD_OPTION_CONNECTION_MEMORY_LIMIT, (size_t)(16 * 1024),
        MHD_OPTION_UNESCAPE_CALLBACK, unescape, NULL,
        MHD_OPTION_URI_LOG_CALLBACK, on_uri, NULL,
        MHD_OPTION_NOTIFY_COMPLETED, on_completed, l,
        MHD_OPTION_NOTIFY_CONNECTION, on_conn, sh,
        MHD_OPTION_END);
    /* clang-format on */

    if (!d) {
        log_err("cannot start the HTTP server");
        close(fd);
        return ERR_IO;
    }
    sh->d = d;
    l->d[l->nd++] = d;
    return ERR_OK;
}

/* True for "HOST:0": a port the kernel picks, different for every socket. */
static bool port_zero(const char *spec)
{
    const char *colon = strrchr(spec, ':');

    return colon && strtol(colon + 1, NULL, 10) == 0;
}

/* The TCP listener: one daemon with a thread per connection when it takes
 * writes (a token is configured), else tcp_shards() polling shards (one on
 * port 0). A plain bind first: the port must be free, not shared with
 * another SO_REUSEPORT listener of the same user (a second podresd). */
static err_t start_tcp(struct listener *l, const struct http_opts *o, unsigned limit)
{
    bool writable = l->h->api->token != NULL;
    unsigned n = writable || port_zero(o->listen) ? 1 : tcp_shards(), i;
    int fd = -1;
    err_t rc = tcp_listen(o->listen, false, false, &fd);

    if (!rc)
        log_bound(fd, o->listen, "the loopback API");
    if (rc || n == 1)
        return rc ? rc : start_daemon(l, fd, !writable, limit, o);
    close(fd);
    for (i = 0; !rc && i < n; i++) {
        rc = tcp_listen(o->listen, false, true, &fd);
        if (!rc)
            rc = start_daemon(l, fd, true, (limit + n - 1) / n, o);
    }
    return rc;
}

/* The metrics-only listener: one polling daemon (scrapes and probes are
 * short reads), no token and no Host rule (it answers on the pod IP), and
 * nothing but GET /metrics, /healthz and /readyz (dispatch). */
static err_t start_metrics(struct listener *l, const struct http_opts *o)
{
    int fd = -1;
    err_t rc = tcp_listen(o->metrics_listen, true, false, &fd);

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
    b->watches.tcp_max = scaled(c / 2, avail, need);
    b->watches.per_peer = b->watches.tcp_max < WATCH_PER_PEER ? b->watches.tcp_max : WATCH_PER_PEER;
    if (need > avail)
        log_warn("the descriptor limit (%llu) is below the %zu podresd can use: at most %u "
                 "connections and %zu watches a listener",
                 (unsigned long long)lim, need + FD_RESERVE, b->unix_conns, b->watches.unix_max);
}

/* The 503 answered when an allocation fails, as a response for
 * libmicrohttpd and as raw bytes. */
static err_t nomem_prepare(struct metrics *m)
{
    static char body[] = NOMEM_BODY;
    int n = snprintf(nomem_raw, sizeof(nomem_raw),
                     "HTTP/1.1 503 Service Unavailable\r\nContent-Type: application/json\r\n"
                     "Content-Length: %zu\r\nConnection: close\r\n\r\n%s",
                     strlen(body), body);

    assert(n > 0 && (size_t)n < sizeof(nomem_raw));
    nomem_raw_len = (size_t)n;
    scarce_metrics = m;
    if (nomem_resp)
        return ERR_OK;
    nomem_resp = MHD_create_response_from_buffer(strlen(body), body, MHD_RESPMEM_PERSISTENT);
    if (!nomem_resp || MHD_add_response_header(nomem_resp, MHD_HTTP_HEADER_CONTENT_TYPE,
                                               "application/json") != MHD_YES)
        return ERR_NOMEM;
    return ERR_OK;
}

err_t http_start(struct api *api, const struct http_opts *opts, struct http **out)
{
    struct fd_budget b;
    struct http *h = calloc(1, sizeof(*h));
    int fd = -1;
    err_t rc = ERR_OK;

    if (!h)
        return ERR_NOMEM;
    h->reserve_fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
    if (h->reserve_fd < 0 || nomem_prepare(api->metrics)) {
        log_err("cannot prepare for running out of descriptors or memory: %s", strerror(errno));
        if (h->reserve_fd >= 0)
            close(h->reserve_fd);
        free(h);
        return ERR_IO;
    }
    h->api = api;
    h->unix_l.h = h;
    h->tcp_l.h = h;
    h->tcp_l.tcp = true;
    h->mx_l.h = h;
    h->mx_l.metrics_only = true;
    warden_init(h);
    fd_budget(opts, &b);
    rc = streams_start(&b.watches, opts->timeout_s, &h->streams);
    if (rc) {
        http_stop(h);
        return rc;
    }
    api_watch_serve(api, h->streams);
    if (api->feed)
        feed_set_notify(api->feed, streams_kick, h->streams);
    if (opts->socket_path) {
        rc = unix_listen(opts->socket_path, &fd);
        if (!rc) {
            h->socket_path = strdup(opts->socket_path);
            rc = start_daemon(&h->unix_l, fd, false, b.unix_conns, opts);
        }
    }
    if (!rc && opts->listen)
        rc = start_tcp(&h->tcp_l, opts, b.tcp_conns);
    if (!rc && opts->metrics_listen)
        rc = start_metrics(&h->mx_l, opts);
    if (!rc)
        rc = warden_start(h);
    if (rc) {
        http_stop(h);
        return rc;
    }
    *out = h;
    return ERR_OK;
}

static void quiesce(struct listener *l)
{
    MHD_socket fd;
    unsigned i;

    for (i = 0; i < l->nd; i++) {
        fd = MHD_quiesce_daemon(l->d[i]);
        if (fd != MHD_INVALID_SOCKET)
            close(fd);
    }
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
    warden_stop(h);
    while (h->unix_l.nd)
        MHD_stop_daemon(h->unix_l.d[--h->unix_l.nd]);
    while (h->tcp_l.nd)
        MHD_stop_daemon(h->tcp_l.d[--h->tcp_l.nd]);
    while (h->mx_l.nd)
        MHD_stop_daemon(h->mx_l.d[--h->mx_l.nd]);
    if (h->api->feed)
        feed_set_notify(h->api->feed, NULL, NULL);
    streams_stop(h->streams);
    if (h->socket_path)
        unlink(h->socket_path);
    free(h->socket_path);
    if (h->reserve_fd >= 0)
        close(h->reserve_fd);
    MHD_destroy_response(nomem_resp);
    nomem_resp = NULL;
    scarce_metrics = NULL;
    pthread_cond_destroy(&h->cv);
    pthread_mutex_destroy(&h->mu);
    free(h);
}
