/* SPDX-License-Identifier: Apache-2.0 */
/* http_request.c - the request life cycle on libmicrohttpd 0.9.75.
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
 * reach the stream's socket. The stream writes its own response head.
 * Not the routing and access rules (http_route.c), nor the building of
 * answers (http.c). */
#define LOG_MOD "http"
#include "../common/common.h"
#include "../common/clock.h"
#include "http_int.h"
#include "stream.h"

#include <fcntl.h>
#include <strings.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

/* Query arguments of one request; more get 400 (see http_on_uri).
 * podresd's routes take at most four. */
#define HTTP_ARGS_MAX 64

#define HTTP_BODY_FIRST (64 * 1024) /* most bytes allocated before they come */

_Thread_local bool http_handed_over;

/* ---- dispatch: from a whole request to its answer ---- */

/* A HEAD of a stream: its head alone, which libmicrohttpd answers on this
 * connection. The stream's source is let go. */
static enum MHD_Result head_only(struct MHD_Connection *conn, struct ctx *c, struct api_resp *out)
{
    struct MHD_Response *resp = MHD_create_response_from_buffer(0, NULL, MHD_RESPMEM_PERSISTENT);
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

/* A descriptor of the connection's socket for the stream loop (*fd), and a
 * fresh socket of the same kind (*dummy) that libmicrohttpd's descriptor
 * (*mhd_fd) will name once the loop has the stream: its shutdown() and
 * close() then touch only that. ERR_IO, with nothing opened. */
static err_t take_socket(struct MHD_Connection *conn, int *mhd_fd, int *fd, int *dummy)
{
    const union MHD_ConnectionInfo *ci = MHD_get_connection_info(conn,
                                                                 MHD_CONNECTION_INFO_CONNECTION_FD);
    socklen_t dlen = sizeof(int);
    int domain = AF_UNIX, d, f;

    if (!ci || getsockopt(ci->connect_fd, SOL_SOCKET, SO_DOMAIN, &domain, &dlen) != 0)
        return ERR_IO;
    d = socket(domain, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (d < 0)
        return ERR_IO;
    f = fcntl(ci->connect_fd, F_DUPFD_CLOEXEC, 0);
    if (f < 0) {
        close(d);
        return ERR_IO;
    }
    *mhd_fd = ci->connect_fd;
    *fd = f;
    *dummy = d;
    return ERR_OK;
}

/* The response head of the stream 'out' into 'buf', dated now. */
static void stream_head(char *buf, size_t cap, const struct api_resp *out, bool chunked)
{
    char date[64];
    struct tm tm;
    time_t t = time(NULL);

    gmtime_r(&t, &tm);
    strftime(date, sizeof(date), "%a, %d %b %Y %H:%M:%S GMT", &tm);
    snprintf(buf, cap,
             "HTTP/1.1 %d OK\r\nDate: %s\r\nContent-Type: %s\r\nCache-Control: no-cache\r\n"
             "Connection: close\r\n%s\r\n",
             out->status, date, out->content_type, chunked ? "Transfer-Encoding: chunked\r\n" : "");
}

/* Give the connection's socket to the stream loop with the response head
 * for 'out' (HTTP/1.1 chunks when 'chunked'); libmicrohttpd then closes its
 * connection (MHD_NO). */
static enum MHD_Result hand_over(struct listener *l, struct MHD_Connection *conn, struct ctx *c,
                                 bool chunked, struct api_resp *out)
{
    char head[512];
    int mhd_fd = -1, fd = -1, dummy = -1;
    err_t rc;

    if (take_socket(conn, &mhd_fd, &fd, &dummy)) {
        out->src->free(out->src_cls);
        return http_queue_error(conn, c, ERR_IO, "cannot take over the connection for the stream");
    }
    stream_head(head, sizeof(head), out, chunked);
    /* On failure 'fd' is closed and libmicrohttpd's descriptor is intact. */
    rc = streams_adopt(l->h->streams, fd, head, chunked, out->src, out->src_cls);
    if (rc) {
        close(dummy);
        return http_queue_error(conn, c, rc,
                                rc == ERR_UNAVAIL ? "too many watch streams are open; retry later"
                                                  : "cannot start the stream");
    }
    /* Onto an open descriptor: needs no new slot, cannot fail for lack of one. */
    if (dup3(dummy, mhd_fd, O_CLOEXEC) < 0)
        log_warn("cannot detach a watch stream from libmicrohttpd: %s", strerror(errno));
    close(dummy);
    c->answered = true;
    c->status = out->status;
    http_handed_over = true;
    return MHD_NO;
}

/* Who may call 'rt', its query parameters, its body; 'e' says what is wrong. */
static err_t check_request(struct listener *l, struct MHD_Connection *conn, struct ctx *c,
                           const struct api_route *rt, struct api_req *r, struct error *e)
{
    err_t rc = http_check_access(l, conn, rt, e);

    if (rc)
        return rc;
    rc = api_check_params(r, rt);
    if (rc)
        return errorf(e, rc, "%s", r->err.msg);
    return http_check_body(conn, c->body, c->len, rt, e);
}

/* Queue what the handler answered in 'out', whose parts it takes. */
static enum MHD_Result answer(struct listener *l, struct MHD_Connection *conn, struct ctx *c,
                              const char *method, const char *version, struct api_resp *out)
{
    enum MHD_Result ret;

    c->stream = out->stream;
    if (out->src && strcmp(method, "HEAD") == 0)
        return head_only(conn, c, out);
    if (out->src)
        return hand_over(l, conn, c, strcmp(version, MHD_HTTP_VERSION_1_0) != 0, out);
    if (out->raw) {
        ret = MHD_queue_response(conn, (unsigned)out->status, out->raw);
        MHD_destroy_response(out->raw);
        json_decref(out->json);
        free(out->text);
        c->answered = true;
        c->status = out->status;
        return ret;
    }
    if (out->text) {
        json_decref(out->json);
        return http_queue_text(conn, c, out->status, out->text, out->text_len, NULL);
    }
    return http_queue_json(conn, c, out->status, out->json, NULL);
}

static enum MHD_Result dispatch(struct listener *l, struct MHD_Connection *conn, struct ctx *c,
                                const char *url, const char *method, const char *version)
{
    struct api_req r = {.api = l->h->api, .conn = conn};
    struct api_resp out = {0};
    struct error e = {0};
    const struct api_route *rt;
    char path[1024], allow[64];
    bool known;
    err_t rc;

    c->route = api_nroutes;
    if (strlen(url) >= sizeof(path) ||
        !http_split_path(memcpy(path, url, strlen(url) + 1), r.seg, &r.nseg))
        return http_queue_error(conn, c, ERR_NOTFOUND, "the path is not served by podresd");
    rt = http_route(l, method, &r, &known);
    if (!rt && !known)
        return http_queue_error(conn, c, ERR_NOTFOUND,
                                l->metrics_only
                                    ? "the metrics listener serves GET /metrics, /healthz "
                                      "and /readyz only"
                                    : "the path is not served by podresd");
    if (!rt) {
        errorf(&e, ERR_METHOD, "method %.16s is not allowed on %.200s", method, url);
        http_allow_header(allow, sizeof(allow), r.seg, r.nseg);
        return http_queue_error_allow(conn, c, ERR_METHOD, e.msg, allow);
    }
    c->route = (size_t)(rt - api_routes);
    /* RFC 9112 3.2: an HTTP/1.1 request without Host is a 400; on TCP the
     * Host is what the DNS-rebinding check reads */
    if (l->tcp && strcmp(version, MHD_HTTP_VERSION_1_0) != 0 &&
        !MHD_lookup_connection_value(conn, MHD_HEADER_KIND, "Host"))
        return http_queue_error(conn, c, ERR_INVAL, "an HTTP/1.1 request needs a Host header");
    rc = check_request(l, conn, c, rt, &r, &e);
    if (rc)
        return http_queue_error(conn, c, rc, e.msg);
    r.body = c->body;
    r.body_len = c->len;
    rc = rt->fn(&r, &out);
    if (rc) {
        free(out.text);
        return http_queue_error(conn, c, rc, r.err.msg);
    }
    return answer(l, conn, c, method, version, &out);
}

static const char *listener_name(const struct listener *l)
{
    return l->metrics_only ? "the metrics listener" : l->tcp ? "TCP" : "the unix socket";
}

/* ---- the MHD callbacks ---- */

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
         * bins per request. One
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
    return http_queue_error(conn, c, ERR_TOOLARGE, msg);
}

/* A chunked body over HTTP_BODY_MAX: no Content-Length said how long it
 * is, and a chunk may declare any size (2^64-1): libmicrohttpd would wait
 * for the rest as long as the client sends, and cannot queue an answer
 * mid-body. So the 413 is written on the socket here, the sending side shut
 * and the connection closed (MHD_NO). */
static enum MHD_Result too_large_now(struct MHD_Connection *conn, struct ctx *c)
{
    const union MHD_ConnectionInfo *ci = MHD_get_connection_info(conn,
                                                                 MHD_CONNECTION_INFO_CONNECTION_FD);
    char msg[96], out[512], *text;
    json_t *st;
    int n;

    snprintf(msg, sizeof(msg), "request body is larger than the limit of %d bytes", HTTP_BODY_MAX);
    st = http_status_json(413, "RequestEntityTooLarge", msg);
    text = st ? json_dumps(st, JSON_COMPACT) : NULL;
    json_decref(st);
    c->answered = true;
    c->status = 413;
    if (ci && text) {
        n = snprintf(out, sizeof(out),
                     "HTTP/1.1 413 Request Entity Too Large\r\nContent-Type: application/json\r\n"
                     "Content-Length: %zu\r\nConnection: close\r\n\r\n%s\n",
                     strlen(text) + 1, text);
        if (n > 0 && (size_t)n < sizeof(out))
            (void)send(ci->connect_fd, out, (size_t)n, MSG_NOSIGNAL | MSG_DONTWAIT);
        shutdown(ci->connect_fd, SHUT_WR);
    }
    free(text);
    return MHD_NO;
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

/* The headers of a request, as framing_header() finds them. */
struct framing {
    const char *clen; /* the first Content-Length */
    bool clen_differ; /* another Content-Length has another value */
    unsigned te;      /* Transfer-Encoding headers */
    bool te_other;    /* one of them is not "chunked" */
    unsigned hosts;   /* Host headers */
    bool host_bad;    /* one is not host[:port] (port 0..65535) */
    char bad[80];     /* the first header whose name is not a token or whose value holds a
                       * control character (its name, escaped), or "" */
};

/* RFC 9110 5.6.2: tchar. */
static bool is_tchar(unsigned char ch)
{
    return (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') ||
           (ch && strchr("!#$%&'*+-.^_`|~", ch));
}

/* The port part of a Host, after its ':': digits, 0 to 65535. */
static bool port_ok(const char *p, const char *end)
{
    unsigned long port = 0;

    if (end - p > 5)
        return false;
    for (; p < end; p++) {
        if (*p < '0' || *p > '9')
            return false;
        port = port * 10 + (unsigned long)(*p - '0');
    }
    return port <= 65535;
}

/* RFC 9110 7.2: Host = uri-host [ ":" port ], and the port a TCP one. The
 * host part is a reg-name, an IPv4 address or a bracketed IPv6 one; here
 * only its bytes are checked (no space, control or delimiter), the
 * loopback rule is http_route.c's. */
static bool host_syntax_ok(const char *v, size_t n)
{
    const char *end = v + n, *colon, *p;

    if (n == 0)
        return false;
    if (*v == '[') {
        p = memchr(v, ']', n);
        if (!p || (p + 1 < end && p[1] != ':'))
            return false;
        colon = p + 1 < end ? p + 1 : NULL;
    } else {
        colon = memchr(v, ':', n);
    }
    for (p = v; p < (colon ? colon : end); p++)
        if ((unsigned char)*p <= ' ' || *p == 0x7f || strchr("/?#@\\\"<>{}|^`", *p))
            return false;
    return !colon || port_ok(colon + 1, end);
}

static void note_bad(struct framing *f, const char *key, size_t key_size)
{
    size_t i, o = 0;

    if (f->bad[0])
        return;
    for (i = 0; i < key_size && o + 5 < sizeof(f->bad); i++) {
        unsigned char ch = (unsigned char)key[i];

        if (ch > ' ' && ch < 0x7f && ch != '\'')
            f->bad[o++] = (char)ch;
        else
            o += (size_t)snprintf(f->bad + o, sizeof(f->bad) - o, "\\x%02x", ch);
    }
    f->bad[o] = '\0';
}

/* A name that is a token, a value without controls (RFC 9110 5.5: CR, LF
 * and NUL are never valid; nor other controls but HTAB). */
static bool field_ok(const char *key, size_t key_size, const char *value, size_t value_size)
{
    size_t i;

    if (key_size == 0)
        return false;
    for (i = 0; i < key_size; i++)
        if (!is_tchar((unsigned char)key[i]))
            return false;
    for (i = 0; i < value_size; i++)
        if (((unsigned char)value[i] < ' ' && value[i] != '\t') || value[i] == 0x7f)
            return false;
    return true;
}

static enum MHD_Result framing_header(void *cls, enum MHD_ValueKind kind, const char *key,
                                      size_t key_size, const char *value, size_t value_size)
{
    struct framing *f = cls;

    (void)kind;
    value = value ? value : "";
    if (!field_ok(key, key_size, value, value_size))
        note_bad(f, key, key_size);
    if (strcasecmp(key, MHD_HTTP_HEADER_CONTENT_LENGTH) == 0) {
        if (f->clen && strcmp(f->clen, value) != 0)
            f->clen_differ = true;
        if (!f->clen)
            f->clen = value;
    } else if (strcasecmp(key, MHD_HTTP_HEADER_TRANSFER_ENCODING) == 0) {
        f->te++;
        f->te_other = f->te_other || strcasecmp(value, "chunked") != 0;
    } else if (strcasecmp(key, MHD_HTTP_HEADER_HOST) == 0) {
        f->hosts++;
        f->host_bad = f->host_bad || !host_syntax_ok(value, value_size);
    }
    return MHD_YES;
}

/* Why the request's headers are refused (RFC 9110, 9112), or NULL, into
 * 'msg'. libmicrohttpd 0.9.75 takes the first of two Content-Length
 * headers, lets Transfer-Encoding win over Content-Length, keeps a header
 * name with a space before its colon ("Transfer-Encoding :") as another
 * header, and takes any Host: a proxy in front that reads them otherwise
 * sees other requests on the connection, or another authority, than podresd
 * (request smuggling). Such a request gets 400 and the connection closes.
 * '*chunked' tells whether the body comes in chunks. */
static const char *framing_error(struct MHD_Connection *conn, char *msg, size_t cap, bool *chunked)
{
    struct framing f = {0};

    MHD_get_connection_values_n(conn, MHD_HEADER_KIND, framing_header, &f);
    *chunked = f.te == 1 && !f.te_other;
    if (f.bad[0]) {
        snprintf(msg, cap,
                 "header '%s': a header's name must be a token (no space before the colon) and "
                 "its value must hold no control character",
                 f.bad);
        return msg;
    }
    if (f.hosts > 1)
        return "more than one Host header";
    if (f.host_bad)
        return "the Host header is not host[:port] with a port of 0 to 65535";
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
 * (16 KiB, see http_listen.c, start_daemon) and, when it runs out (~200
 * short pairs), closes the connection without a byte: the 431 it queues is
 * lost when its parser goes on. So beyond HTTP_ARGS_MAX arguments the query
 * is cut off here, in libmicrohttpd's read buffer that it splits next (the
 * URI is NUL-terminated there and writable: libmicrohttpd writes into it
 * next), and the request is answered 400. The result is the request's
 * context. */
void *http_on_uri(void *cls, const char *uri, struct MHD_Connection *conn)
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
    char msg[256];
    const char *why;

    if (!c) {
        c = calloc(1, sizeof(*c));
        if (!c) {
            http_nomem_note("starting a request");
            return http_queue_nomem(conn);
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
    why = framing_error(conn, msg, sizeof(msg), &c->chunked);
    if (why)
        return http_queue_error(conn, c, ERR_INVAL, why);
    return check_declared(conn, c);
}

enum MHD_Result http_on_request(void *cls, struct MHD_Connection *conn, const char *url,
                                const char *method, const char *version, const char *upload_data,
                                size_t *upload_data_size, void **con_cls)
{
    struct listener *l = cls;
    struct ctx *c = *con_cls;
    char msg[96];

    if (!c || !c->begun) {
        http_conn_mark(l, conn, true);
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
        if (c->too_large && c->chunked)
            return too_large_now(conn, c);
        return MHD_YES;
    }
    if (c->too_large)
        return too_large(conn, c);
    if (c->no_mem)
        return http_queue_error(conn, c, ERR_NOMEM, "out of memory reading the body");
    if (c->many_args) {
        snprintf(msg, sizeof(msg), "the query has more than %d arguments", HTTP_ARGS_MAX);
        return http_queue_error(conn, c, ERR_INVAL, msg);
    }
    return dispatch(l, conn, c, url, method, version);
}

void http_on_completed(void *cls, struct MHD_Connection *conn, void **con_cls,
                       enum MHD_RequestTerminationCode toe)
{
    struct listener *l = cls;
    struct ctx *c = *con_cls;

    (void)toe;
    http_handed_over = false;
    http_conn_mark(l, conn, false);
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
