/* SPDX-License-Identifier: Apache-2.0 */
/* http_route.c - which handler of api.c's route table a request goes to,
 * and whether it may go there: the path's segments, the Allow header of a
 * 405, what the metrics-only listener serves, and the access rules (a
 * loopback Host and the write token over TCP, read-only kubelet mode,
 * shutdown) and body rules (content type, not empty). Answers nothing
 * itself: http_request.c does with what these return. */
#define LOG_MOD "http"
#include "../common/common.h"
#include "http_int.h"
#include "token.h"

#include <arpa/inet.h>
#include <assert.h>
#include <strings.h>

/* ---- routing ---- */

/* Split 'path' (modified in place) into segments. False on an empty segment. */
bool http_split_path(char *p, const char **seg, size_t *n)
{
    assert(p && seg && n);
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
 * stars) has exactly the segments 'seg'; a star matches any one segment, a
 * final "**" one or more (a name with slashes: a DRA device's pool/device). */
static bool pattern_matches(const char *pattern, const char *const *seg, size_t n)
{
    const char *p = pattern, *end;
    size_t i, len;

    for (i = 0; i < n; i++) {
        if (*p == '\0')
            return false;
        if (strcmp(p, "**") == 0)
            return true;
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

void http_allow_header(char *buf, size_t cap, const char *const *seg, size_t n)
{
    size_t i, len = 0;

    assert(buf && cap > 0);
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
const struct api_route *http_route(const struct listener *l, const char *method,
                                   const struct api_req *r, bool *known)
{
    const struct api_route *rt;

    assert(known);
    rt = find_route(method, r->seg, r->nseg, known);
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

/* Why 'l' refuses 'rt' to this request: the Status message into 'e' and,
 * returned, a reason for the debug log (no header's value, no token word).
 * NULL when it does not. */
static const char *refusal(const struct listener *l, struct MHD_Connection *conn,
                           const struct api_route *rt, struct error *e)
{
    const struct api *api = l->h->api;

    if (l->tcp && !host_ok(MHD_lookup_connection_value(conn, MHD_HEADER_KIND, "Host"))) {
        errorf(e, ERR_FORBIDDEN, "the Host header must name the loopback interface");
        return "Host is not loopback";
    }
    if (!rt->write)
        return NULL;
    if (l->tcp && !api->token) {
        errorf(e, ERR_FORBIDDEN,
               "writes over TCP are disabled: configure --write-token-file, or use the unix "
               "socket");
        return "TCP is read-only";
    }
    if (l->tcp && !token_check(api->token, MHD_lookup_connection_value(conn, MHD_HEADER_KIND,
                                                                       "Authorization"))) {
        errorf(e, ERR_FORBIDDEN, "writes over TCP need a valid bearer token");
        return "no valid write credential";
    }
    if (rt->binding_write && api->kubelet_mode) {
        errorf(e, ERR_FORBIDDEN, "devices and bindings are read-only with source kubelet");
        return "read-only with source kubelet";
    }
    return NULL;
}

err_t http_check_access(const struct listener *l, struct MHD_Connection *conn,
                        const struct api_route *rt, struct error *e)
{
    const char *why = refusal(l, conn, rt, e);

    if (why) {
        log_debug("refused %s %s on %s: %s", rt->method, rt->label,
                  l->tcp ? "TCP" : "the unix socket", why);
        return ERR_FORBIDDEN;
    }
    if (rt->write && l->h->api->stopping)
        return errorf(e, ERR_UNAVAIL, "podresd is shutting down");
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
size_t http_unescape(void *cls, struct MHD_Connection *conn, char *s)
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

err_t http_check_body(struct MHD_Connection *conn, const char *body, size_t len,
                      const struct api_route *rt, struct error *e)
{
    const char *ct = MHD_lookup_connection_value(conn, MHD_HEADER_KIND, "Content-Type");

    if (!rt->has_body)
        return ERR_OK;
    if (ct && !media_is(ct, "application/json") &&
        !(strcmp(rt->method, "PATCH") == 0 && media_is(ct, "application/merge-patch+json")))
        return errorf(e, ERR_MEDIATYPE,
                      "Content-Type \"%.100s\" is not supported: send application/json", ct);
    if (!body || len == 0)
        return errorf(e, ERR_INVAL, "request body is empty; expected a JSON object");
    if (memchr(body, '\0', len))
        return errorf(e, ERR_INVAL, "request body contains a NUL byte");
    return ERR_OK;
}
