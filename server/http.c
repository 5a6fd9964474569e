/* SPDX-License-Identifier: Apache-2.0 */
/* http.c - the answers of podresd's HTTP server: the one place where an
 * err_t becomes an HTTP status and a Kubernetes Status object, the queueing
 * of JSON and text responses on a libmicrohttpd connection, and the
 * prebuilt 503 given when memory runs out (with the count and the log line
 * of such scarcity). Not the routing (http_route.c), the request life cycle
 * (http_request.c) or the listeners (http_listen.c). */
#define LOG_MOD "http"
#include "../common/common.h"
#include "../common/clock.h"
#include "../common/jsonw.h"
#include "../common/jsonx.h"
#include "http.h"
#include "http_int.h"
#include "metrics.h"

#include <assert.h>
#include <sys/socket.h>

/* Out of memory and out of descriptors are logged at most this often. */
#define SCARCE_LOG_MS 60000

/* The answer to a request when an allocation fails: built at start, so
 * that giving it allocates nothing. */
#define NOMEM_BODY                                                                                 \
    "{\"kind\":\"Status\",\"apiVersion\":\"v1\",\"metadata\":{},\"status\":\"Failure\","           \
    "\"message\":\"podresd is out of memory; retry later\",\"reason\":\"ServiceUnavailable\","     \
    "\"details\":{},\"code\":503}\n"

/* What answering without memory needs, set by http_nomem_prepare (podresd
 * has one struct http): the answers and libmicrohttpd's callbacks reach it
 * without a pointer to the http. */
static struct MHD_Response *nomem_resp; /* the 503 Status, shared by every connection */
static char nomem_raw[512];             /* the same as a whole HTTP answer */
static size_t nomem_raw_len;            /* its length */
static struct metrics *scarce_metrics;  /* counts both kinds of scarcity; borrowed */
static atomic_ullong nomem_logged_ms;   /* monotonic ms of the last log, or 0 */

/* True at most once per SCARCE_LOG_MS for '*last'. */
bool http_log_due(atomic_ullong *last)
{
    unsigned long long now = clock_mono_ms() + SCARCE_LOG_MS, prev = atomic_load(last);

    return (prev == 0 || now - prev >= SCARCE_LOG_MS) &&
           atomic_compare_exchange_strong(last, &prev, now);
}

/* An allocation failed for 'what': counted, and logged once a minute. */
void http_nomem_note(const char *what)
{
    metrics_count(scarce_metrics, METRICS_NOMEM);
    if (http_log_due(&nomem_logged_ms))
        log_warn("out of memory %s: answering 503 (logged once a minute; "
                 "podresd_out_of_memory_total counts them)",
                 what);
}

/* Queue the prebuilt 503; nothing is allocated. */
enum MHD_Result http_queue_nomem(struct MHD_Connection *conn)
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

    assert(reason);
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

/* The newline takes the NUL's place: no copy. */
enum MHD_Result http_queue_text(struct MHD_Connection *conn, struct ctx *c, int status, char *text,
                                size_t n, const char *allow)
{
    struct MHD_Response *resp = NULL;
    enum MHD_Result ret;

    assert(c && (!text || text[n] == '\0'));
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
        http_nomem_note("answering a request");
        c->status = 503;
        return http_queue_nomem(conn);
    }
    ret = MHD_queue_response(conn, (unsigned)status, resp);
    MHD_destroy_response(resp);
    c->status = status;
    return ret;
}

/* json_dumps leaves room after the text: its NUL becomes the newline. */
enum MHD_Result http_queue_json(struct MHD_Connection *conn, struct ctx *c, int status,
                                json_t *body, const char *allow)
{
    char *text = body ? json_dumps(body, JSONW_FLAGS) : NULL;

    json_decref(body);
    return http_queue_text(conn, c, status, text, text ? strlen(text) : 0, allow);
}

enum MHD_Result http_queue_error_allow(struct MHD_Connection *conn, struct ctx *c, err_t rc,
                                       const char *msg, const char *allow)
{
    const char *reason;
    int code = http_status_of(rc, &reason);

    if (rc == ERR_NOMEM)
        http_nomem_note(msg && *msg ? msg : "in a request");
    else if (code >= 500 && rc != ERR_NOSPACE && rc != ERR_UNAVAIL)
        log_warn("request failed: %s%s%s", err_str(rc), msg && *msg ? ": " : "", msg ? msg : "");
    return http_queue_json(conn, c, code,
                           http_status_json(code, reason, msg && *msg ? msg : err_str(rc)), allow);
}

enum MHD_Result http_queue_error(struct MHD_Connection *conn, struct ctx *c, err_t rc,
                                 const char *msg)
{
    return http_queue_error_allow(conn, c, rc, msg, NULL);
}

/* Without the 503 the client of a connection that libmicrohttpd accepted
 * but could not give a thread (it closes the socket next) sees its
 * connection close without an answer. The request, or
 * what of it is in, is read first: closing a TCP socket with unread bytes
 * would send a reset, and the client could lose the answer. */
void http_refuse_nomem(struct MHD_Connection *conn)
{
    const union MHD_ConnectionInfo *ci = MHD_get_connection_info(conn,
                                                                 MHD_CONNECTION_INFO_CONNECTION_FD);
    char junk[4096];
    int i;

    http_nomem_note("starting a connection's thread");
    if (!ci || !nomem_raw_len)
        return;
    for (i = 0; i < 4 && recv(ci->connect_fd, junk, sizeof(junk), MSG_DONTWAIT) > 0; i++)
        ;
    if (send(ci->connect_fd, nomem_raw, nomem_raw_len, MSG_DONTWAIT | MSG_NOSIGNAL) > 0)
        shutdown(ci->connect_fd, SHUT_WR);
}

/* The 503 answered when an allocation fails, as a response for
 * libmicrohttpd and as raw bytes. */
err_t http_nomem_prepare(struct metrics *m)
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

void http_nomem_release(void)
{
    MHD_destroy_response(nomem_resp); /* NULL is a no-op */
    nomem_resp = NULL;
    scarce_metrics = NULL;
}
