/* SPDX-License-Identifier: Apache-2.0 */
/* grpc.c - unary gRPC over libcurl: HTTP/2 prior knowledge on a unix
 * socket, the 5-byte length prefix, and grpc-status / grpc-message taken
 * from the trailers or from a trailers-only answer (status in the headers).
 * libcurl hands HTTP/2 trailers to the header callback like headers, so one
 * callback reads both. Not a general gRPC client: see grpc.h. */
#define LOG_MOD "grpc"
#include "../common/common.h"
#include "curlfn.h"
#include "grpc.h"

#include <assert.h>
#include <strings.h>
#include <sys/stat.h>

/* Lock: none; one thread uses a client. */
struct grpc {
    CURL *curl;                   /* kept for life (its connection is not: see set_options) */
    struct grpc_opts o;           /* settings (socket path borrowed) */
    char errbuf[CURL_ERROR_SIZE]; /* curl's error text of the last call */
};

/* What one call collects from curl's callbacks. */
struct call {
    uint8_t *body;            /* the answer body; new */
    size_t len, cap;          /* bytes used and allocated */
    size_t limit;             /* body bytes accepted before aborting */
    bool too_large;           /* the body passed 'limit' */
    bool nomem;               /* growing the body failed */
    bool have_status;         /* a grpc-status header or trailer was seen */
    int status;               /* its value */
    bool grpc_type;           /* content-type is application/grpc[+...] */
    char message[256];        /* grpc-message, decoded */
    const volatile int *stop; /* abort when set */
};

err_t grpc_frame(const uint8_t *msg, size_t len, uint8_t **out, size_t *out_len)
{
    uint8_t *f;

    assert(out && out_len && (msg || len == 0));
    if (len > UINT32_MAX)
        return ERR_INVAL;
    f = malloc(len + GRPC_FRAME_HDR);
    if (!f)
        return ERR_NOMEM;
    f[0] = 0;
    f[1] = (uint8_t)(len >> 24);
    f[2] = (uint8_t)(len >> 16);
    f[3] = (uint8_t)(len >> 8);
    f[4] = (uint8_t)len;
    if (len)
        memcpy(f + GRPC_FRAME_HDR, msg, len);
    *out = f;
    *out_len = len + GRPC_FRAME_HDR;
    return ERR_OK;
}

err_t grpc_unframe(const uint8_t *buf, size_t len, size_t max, const uint8_t **msg, size_t *msg_len,
                   struct error *e)
{
    size_t n;

    assert(msg && msg_len);
    if (len < GRPC_FRAME_HDR)
        return errorf(e, ERR_INVAL, "answer of %zu bytes has no complete message prefix", len);
    if (buf[0] != 0)
        return errorf(e, ERR_INVAL, "answer message is compressed (flag %u); none was offered",
                      buf[0]);
    n = (size_t)buf[1] << 24 | (size_t)buf[2] << 16 | (size_t)buf[3] << 8 | (size_t)buf[4];
    if (n > max)
        return errorf(e, ERR_INVAL, "answer message of %zu bytes is over the limit of %zu", n, max);
    if (n != len - GRPC_FRAME_HDR)
        return errorf(e, ERR_INVAL,
                      "answer message says %zu bytes but %zu follow (one message expected)", n,
                      len - GRPC_FRAME_HDR);
    *msg = buf + GRPC_FRAME_HDR;
    *msg_len = n;
    return ERR_OK;
}

void grpc_percent_decode(const char *in, size_t n, char *out, size_t cap)
{
    size_t i = 0, o = 0;
    int hi, lo;

    assert((in || n == 0) && (out || cap == 0));
    if (cap == 0)
        return;
    while (i < n && o + 1 < cap) {
        hi = in[i] == '%' && i + 2 < n ? hexval(in[i + 1]) : -1;
        lo = hi >= 0 ? hexval(in[i + 2]) : -1;
        if (hi >= 0 && lo >= 0) {
            out[o++] = (char)(hi << 4 | lo);
            i += 3;
        } else {
            out[o++] = in[i++];
        }
    }
    out[o] = '\0';
}

int grpc_code_of_http(long http_status)
{
    switch (http_status) {
    case 400:
        return GRPC_INTERNAL;
    case 401:
        return GRPC_UNAUTHENTICATED;
    case 403:
        return GRPC_PERMISSION_DENIED;
    case 404:
        return GRPC_UNIMPLEMENTED;
    case 429:
    case 502:
    case 503:
    case 504:
        return GRPC_UNAVAILABLE;
    default:
        return GRPC_UNKNOWN;
    }
}

/* ---- curl callbacks ---- */

static size_t on_body(char *data, size_t size, size_t nmemb, void *ctx)
{
    struct call *c = ctx;
    size_t n = size * nmemb, ncap;
    uint8_t *nb;

    if (c->len + n > c->limit) {
        c->too_large = true;
        return 0;
    }
    if (c->len + n > c->cap) {
        ncap = c->cap ? c->cap : 16384;
        while (ncap < c->len + n)
            ncap *= 2;
        nb = realloc(c->body, ncap);
        if (!nb) {
            c->nomem = true;
            return 0;
        }
        c->body = nb;
        c->cap = ncap;
    }
    memcpy(c->body + c->len, data, n);
    c->len += n;
    return n;
}

/* 'line' of 'n' bytes starts with header 'name' (any case) and a colon:
 * *val and *vlen locate the value without surrounding white space. */
static bool header_is(const char *line, size_t n, const char *name, const char **val, size_t *vlen)
{
    size_t k = strlen(name);

    if (n <= k || strncasecmp(line, name, k) != 0 || line[k] != ':')
        return false;
    line += k + 1;
    n -= k + 1;
    while (n && (*line == ' ' || *line == '\t')) {
        line++;
        n--;
    }
    while (n && (line[n - 1] == '\r' || line[n - 1] == '\n' || line[n - 1] == ' '))
        n--;
    *val = line;
    *vlen = n;
    return true;
}

/* grpc-status is a decimal 0..16 (anything else counts as UNKNOWN). */
static int parse_status(const char *v, size_t n)
{
    int code = 0;
    size_t i;

    if (n == 0 || n > 2)
        return GRPC_UNKNOWN;
    for (i = 0; i < n; i++) {
        if (v[i] < '0' || v[i] > '9')
            return GRPC_UNKNOWN;
        code = code * 10 + (v[i] - '0');
    }
    return code <= 16 ? code : GRPC_UNKNOWN;
}

/* Headers and trailers alike. */
static size_t on_header(char *line, size_t size, size_t nmemb, void *ctx)
{
    struct call *c = ctx;
    size_t n = size * nmemb, vlen;
    const char *v;

    if (header_is(line, n, "grpc-status", &v, &vlen)) {
        c->have_status = true;
        c->status = parse_status(v, vlen);
    } else if (header_is(line, n, "grpc-message", &v, &vlen)) {
        grpc_percent_decode(v, vlen, c->message, sizeof(c->message));
    } else if (header_is(line, n, "content-type", &v, &vlen)) {
        c->grpc_type = vlen >= 16 && strncasecmp(v, "application/grpc", 16) == 0 &&
                       (vlen == 16 || v[16] == '+' || v[16] == ';');
    }
    return n;
}

static int on_progress(void *ctx, curl_off_t dt, curl_off_t dn, curl_off_t ut, curl_off_t un)
{
    const struct call *c = ctx;

    (void)dt;
    (void)dn;
    (void)ut;
    (void)un;
    return c->stop && *c->stop ? 1 : 0;
}

/* ---- the client ---- */

struct grpc *grpc_new(const struct grpc_opts *o)
{
    struct grpc *g;

    assert(o && o->socket_path && o->timeout_ms > 0);
    g = calloc(1, sizeof(*g));
    if (!g)
        return NULL;
    g->o = *o;
    if (curlfn_load(NULL)) {
        free(g);
        return NULL;
    }
    g->curl = curlfn.easy_init();
    if (!g->curl) {
        free(g);
        return NULL;
    }
    return g;
}

void grpc_free(struct grpc *g)
{
    if (!g)
        return;
    curlfn.easy_cleanup(g->curl);
    free(g);
}

static err_t set_options(struct grpc *g, const char *url, const uint8_t *frame, size_t flen,
                         struct curl_slist *hdrs, struct call *c)
{
    CURL *h = g->curl;
    CURLcode e = CURLE_OK;

    curlfn.easy_reset(h);
    e |= curlfn.easy_setopt(h, CURLOPT_URL, url);
    e |= curlfn.easy_setopt(h, CURLOPT_UNIX_SOCKET_PATH, g->o.socket_path);
    e |= curlfn.easy_setopt(h, CURLOPT_HTTP_VERSION, (long)CURL_HTTP_VERSION_2_PRIOR_KNOWLEDGE);
    e |= curlfn.easy_setopt(h, CURLOPT_POST, 1L);
    e |= curlfn.easy_setopt(h, CURLOPT_POSTFIELDS, (const char *)frame);
    e |= curlfn.easy_setopt(h, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)flen);
    e |= curlfn.easy_setopt(h, CURLOPT_HTTPHEADER, hdrs);
    e |= curlfn.easy_setopt(h, CURLOPT_USERAGENT, "podresd/" PODRES_VERSION);
    e |= curlfn.easy_setopt(h, CURLOPT_TIMEOUT_MS, (long)g->o.timeout_ms);
    e |= curlfn.easy_setopt(h, CURLOPT_CONNECTTIMEOUT_MS, (long)g->o.timeout_ms);
    e |= curlfn.easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
    e |= curlfn.easy_setopt(h, CURLOPT_ERRORBUFFER, g->errbuf);
    e |= curlfn.easy_setopt(h, CURLOPT_WRITEFUNCTION, on_body);
    e |= curlfn.easy_setopt(h, CURLOPT_WRITEDATA, c);
    e |= curlfn.easy_setopt(h, CURLOPT_HEADERFUNCTION, on_header);
    e |= curlfn.easy_setopt(h, CURLOPT_HEADERDATA, c);
    e |= curlfn.easy_setopt(h, CURLOPT_NOPROGRESS, 0L);
    e |= curlfn.easy_setopt(h, CURLOPT_XFERINFOFUNCTION, on_progress);
    e |= curlfn.easy_setopt(h, CURLOPT_XFERINFODATA, c);
    e |= curlfn.easy_setopt(h, CURLOPT_PROTOCOLS_STR, "http");
    /* libcurl 7.88 (Debian 12) fails a second request on a reused
     * prior-knowledge HTTP/2 connection ("Error in the HTTP2 framing layer",
     * curl issue 10634, fixed in 8.0): one connection per call. A unix
     * socket connect is cheap next to a List. */
    e |= curlfn.easy_setopt(h, CURLOPT_FORBID_REUSE, 1L);
    return e == CURLE_OK ? ERR_OK : ERR_NOMEM;
}

/* A transport failure of curl code 'e', described into 'st'. */
static err_t transport_error(struct grpc *g, CURLcode e, const struct call *c,
                             struct grpc_status *st)
{
    struct stat sb;

    if (c->nomem)
        return ERR_NOMEM;
    if (c->too_large) {
        st->code = GRPC_INTERNAL;
        snprintf(st->message, sizeof(st->message), "answer is over the limit of %zu bytes",
                 c->limit - GRPC_FRAME_HDR);
        return ERR_INVAL;
    }
    st->code = e == CURLE_OPERATION_TIMEDOUT ? GRPC_DEADLINE_EXCEEDED : GRPC_UNAVAILABLE;
    if (e == CURLE_ABORTED_BY_CALLBACK)
        st->code = GRPC_CANCELLED;
    if (stat(g->o.socket_path, &sb) != 0) {
        st->no_socket = true;
        snprintf(st->message, sizeof(st->message), "cannot connect to '%s': %s", g->o.socket_path,
                 strerror(errno));
        return ERR_UPSTREAM;
    }
    st->no_socket = e == CURLE_COULDNT_CONNECT;
    snprintf(st->message, sizeof(st->message), "%s",
             g->errbuf[0] ? g->errbuf : curlfn.easy_strerror(e));
    return ERR_UPSTREAM;
}

/* A complete HTTP exchange: check status, content type and grpc-status,
 * then unframe. On ERR_OK the message is moved to the front of c->body. */
static err_t answer(struct grpc *g, struct call *c, size_t max, size_t *msg_len,
                    struct grpc_status *st)
{
    long http = 0;
    const uint8_t *msg = NULL;
    struct error e = {0};
    err_t rc;

    curlfn.easy_getinfo(g->curl, CURLINFO_RESPONSE_CODE, &http);
    st->code = GRPC_INTERNAL;
    if (http != 200) {
        st->code = grpc_code_of_http(http);
        snprintf(st->message, sizeof(st->message), "HTTP status %ld", http);
        return ERR_UPSTREAM;
    }
    if (!c->grpc_type) {
        snprintf(st->message, sizeof(st->message), "answer content type is not application/grpc");
        return ERR_INVAL;
    }
    if (!c->have_status) {
        snprintf(st->message, sizeof(st->message), "answer has no grpc-status");
        return ERR_INVAL;
    }
    st->code = c->status;
    snprintf(st->message, sizeof(st->message), "%s", c->message);
    if (c->status != GRPC_OK)
        return ERR_UPSTREAM;
    rc = grpc_unframe(c->body, c->len, max, &msg, msg_len, &e);
    if (rc) {
        st->code = GRPC_INTERNAL;
        str_copy(st->message, sizeof(st->message), e.msg);
        return rc;
    }
    memmove(c->body, msg, *msg_len);
    return ERR_OK;
}

/* The request headers of a call with a deadline of 'timeout_ms'; new
 * (slist_free_all), or NULL when out of memory. */
static struct curl_slist *call_headers(uint64_t timeout_ms)
{
    const char *const lines[] = {"Content-Type: application/grpc", "TE: trailers", NULL,
                                 "Expect:", "Accept:"};
    struct curl_slist *hdrs = NULL, *h;
    char tmo[64];
    size_t i;

    snprintf(tmo, sizeof(tmo), "grpc-timeout: %llum", (unsigned long long)timeout_ms);
    for (i = 0; i < ARRAY_SIZE(lines); i++) {
        h = curlfn.slist_append(hdrs, lines[i] ? lines[i] : tmo);
        if (!h) {
            curlfn.slist_free_all(hdrs);
            return NULL;
        }
        hdrs = h;
    }
    return hdrs;
}

err_t grpc_call(struct grpc *g, const char *method, const uint8_t *req, size_t req_len,
                uint8_t **resp, size_t *resp_len, struct grpc_status *st)
{
    struct call c = {0};
    struct curl_slist *hdrs = NULL;
    uint8_t *frame = NULL;
    size_t flen = 0, mlen = 0;
    char url[512];
    CURLcode e;
    err_t rc;

    assert(g && method && resp && resp_len && st);
    assert(req || req_len == 0);
    c.limit = g->o.max_recv + GRPC_FRAME_HDR;
    c.stop = g->o.stop;
    memset(st, 0, sizeof(*st));
    st->code = GRPC_INTERNAL;
    g->errbuf[0] = '\0';
    snprintf(url, sizeof(url), "http://localhost%s", method);
    rc = grpc_frame(req, req_len, &frame, &flen);
    if (rc)
        goto out;
    hdrs = call_headers(g->o.timeout_ms);
    if (!hdrs) {
        rc = ERR_NOMEM;
        goto out;
    }
    rc = set_options(g, url, frame, flen, hdrs, &c);
    if (rc)
        goto out;
    e = curlfn.easy_perform(g->curl);
    if (e != CURLE_OK)
        rc = transport_error(g, e, &c, st);
    else
        rc = answer(g, &c, g->o.max_recv, &mlen, st);
    if (rc)
        goto out;
    *resp = c.body ? c.body : malloc(1);
    if (!*resp) {
        rc = ERR_NOMEM;
        goto out;
    }
    c.body = NULL;
    *resp_len = mlen;
out:
    curlfn.easy_setopt(g->curl, CURLOPT_HTTPHEADER, NULL);
    curlfn.slist_free_all(hdrs);
    free(frame);
    free(c.body);
    return rc;
}
