/* SPDX-License-Identifier: Apache-2.0 */
/* http_int.h - what the parts of podresd's HTTP server share, and nothing
 * else includes: the server, its listeners and their libmicrohttpd daemons
 * (http_listen.c), the connections the warden tracks (http_warden.c), the
 * state of one request (http_request.c), routing and access rules
 * (http_route.c) and the answers (http.c). The public face is http.h. */
#ifndef PODRES_HTTP_INT_H
#define PODRES_HTTP_INT_H
#include <microhttpd.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "../common/err.h"
#include "api.h"
#include "http.h"
#include "metrics.h"

/* One listener and its libmicrohttpd daemon. Set up by http_start
 * (listen_fd and limit before the daemon starts), read-only after. */
struct listener {
    struct http *h;       /* back pointer */
    struct MHD_Daemon *d; /* the daemon, or NULL: not configured or not started */
    int listen_fd;        /* its listening socket */
    unsigned limit;       /* libmicrohttpd's connection limit of the daemon */
    bool tcp;             /* loopback TCP (token rules apply) */
    bool metrics_only;    /* --metrics-listen: /metrics, /healthz, /readyz alone */
};

/* One connection of libmicrohttpd from its accept to its close, in
 * http.conns under http.mu. Its descriptor is valid until http_on_conn() is
 * told of the close: libmicrohttpd tells before it closes, and waits for mu. */
struct conn {
    struct conn *prev, *next; /* in http.conns */
    struct listener *l;       /* its listener */
    int fd;                   /* libmicrohttpd's descriptor */
    bool busy;                /* a request's head is in and not yet answered */
    bool shut;                /* shut down by the warden */
    bool has_uid;             /* 'uid' is known (a unix socket connection) */
    uid_t uid;                /* its peer's user */
    uint64_t since_ms;        /* accepted, or its last answer ended (monotonic) */
};

/* The server. Lock: 'mu' guards 'conns' (and each conn's busy, shut and
 * since_ms), 'stop' and 'reserve_fd' once the warden runs; the rest is set
 * by http_start and read-only until http_stop. */
struct http {
    struct api *api;         /* borrowed */
    struct listener unix_l;  /* the unix socket */
    struct listener tcp_l;   /* loopback TCP, if configured */
    struct listener mx_l;    /* the metrics-only listener, if configured */
    struct streams *streams; /* the watch streams of both listeners */
    char *socket_path;       /* to remove at stop */
    pthread_mutex_t mu;      /* guards 'conns', 'stop', 'reserve_fd' */
    pthread_cond_t cv;       /* wakes the warden to stop */
    struct conn *conns;      /* every open connection */
    pthread_t warden;        /* enforces the head deadline, sheds idle TCP */
    bool warden_on;          /* 'warden' runs */
    bool stop;               /* the warden ends */
    int reserve_fd;          /* /dev/null, let go to accept at the fd limit; -1: spent */
};

/* Per request state, from the URI callback to the completion callback,
 * which frees it; one connection's thread alone touches it. */
struct ctx {
    char *body;      /* accumulated body */
    size_t len, cap; /* used and allocated */
    size_t declared; /* Content-Length, when given and within HTTP_BODY_MAX */
    bool too_large;  /* over HTTP_BODY_MAX */
    bool chunked;    /* the body comes in chunks (Transfer-Encoding: chunked) */
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

/* Set on a connection's thread that has just handed its socket to the
 * stream loop (http_request.c): libmicrohttpd's "closing connection"
 * message that follows is not an error (http_mhd_log). Cleared by the
 * completion callback. */
extern _Thread_local bool http_handed_over;

/* ---- answers (http.c) ---- */

/* Get ready to answer without memory: the prebuilt 503, counted in 'm'
 * (borrowed until http_nomem_release). ERR_NOMEM. */
err_t http_nomem_prepare(struct metrics *m) WARN_UNUSED;
/* Drop what http_nomem_prepare made. */
void http_nomem_release(void);
/* True at most once a minute for '*last' (monotonic ms of the last time). */
bool http_log_due(atomic_ullong *last);
/* An allocation failed for 'what': counted, and logged once a minute. */
void http_nomem_note(const char *what);
/* Queue the prebuilt 503; allocates nothing. */
enum MHD_Result http_queue_nomem(struct MHD_Connection *conn);
/* Write the prebuilt 503 straight to the socket of a connection that
 * libmicrohttpd accepted but could not give a thread. */
void http_refuse_nomem(struct MHD_Connection *conn);
/* Answer 'text' (steals it: NUL-terminated JSON of 'n' bytes, or NULL when
 * out of memory) with a newline; 'allow' is an Allow header or NULL. Sets
 * c->answered and c->status. */
enum MHD_Result http_queue_text(struct MHD_Connection *conn, struct ctx *c, int status, char *text,
                                size_t n, const char *allow);
/* Answer 'body' (steals it; NULL when out of memory) as http_queue_text. */
enum MHD_Result http_queue_json(struct MHD_Connection *conn, struct ctx *c, int status,
                                json_t *body, const char *allow);
/* Answer the Status of 'rc' with 'msg' (or err_str(rc) when empty). */
enum MHD_Result http_queue_error(struct MHD_Connection *conn, struct ctx *c, err_t rc,
                                 const char *msg);
/* The same with an Allow header (405). */
enum MHD_Result http_queue_error_allow(struct MHD_Connection *conn, struct ctx *c, err_t rc,
                                       const char *msg, const char *allow);

/* ---- routing and access rules (http_route.c) ---- */

/* Split 'p' (modified in place) into at most API_MAX_SEGS segments 'seg'
 * (pointing into p). False on an empty segment or too many. */
bool http_split_path(char *p, const char **seg, size_t *n);
/* The methods served on the path 'seg' as an Allow value, into 'buf'. */
void http_allow_header(char *buf, size_t cap, const char *const *seg, size_t n);
/* The route 'l' serves for 'method' on r->seg, or NULL; *known tells a
 * path served with other methods (405) from an unknown one (404). */
const struct api_route *http_route(const struct listener *l, const char *method,
                                   const struct api_req *r, bool *known);
/* May the request call 'rt' on 'l'? ERR_FORBIDDEN (a Host that is not
 * loopback on TCP; a write over TCP without a token configured or a valid
 * bearer token; a device or binding write in kubelet mode) or ERR_UNAVAIL
 * (a write while stopping), with the Status message in 'e'. */
err_t http_check_access(const struct listener *l, struct MHD_Connection *conn,
                        const struct api_route *rt, struct error *e) WARN_UNUSED;
/* Is the request's body ('len' bytes, or NULL) what 'rt' takes? Its
 * content type (ERR_MEDIATYPE), not empty, no NUL byte (ERR_INVAL); the
 * message in 'e'. */
err_t http_check_body(struct MHD_Connection *conn, const char *body, size_t len,
                      const struct api_route *rt, struct error *e) WARN_UNUSED;
/* libmicrohttpd's unescape callback: %00 stays as it is. */
size_t http_unescape(void *cls, struct MHD_Connection *conn, char *s);

/* ---- the request life cycle (http_request.c): libmicrohttpd's callbacks ---- */

void *http_on_uri(void *cls, const char *uri, struct MHD_Connection *conn);
enum MHD_Result http_on_request(void *cls, struct MHD_Connection *conn, const char *url,
                                const char *method, const char *version, const char *upload_data,
                                size_t *upload_data_size, void **con_cls);
void http_on_completed(void *cls, struct MHD_Connection *conn, void **con_cls,
                       enum MHD_RequestTerminationCode toe);

/* ---- connections (http_warden.c) ---- */

/* The warden's lock and condition; its thread starts with
 * http_warden_start once the listeners are up. */
void http_warden_init(struct http *h);
err_t http_warden_start(struct http *h) WARN_UNUSED;
/* Stop and join the warden thread, if it runs. */
void http_warden_stop(struct http *h);
/* A request's head is in ('busy'), or its answer is over. */
void http_conn_mark(struct listener *l, struct MHD_Connection *conn, bool busy);
/* libmicrohttpd's connection notice (cls: the listener). */
void http_on_conn(void *cls, struct MHD_Connection *conn, void **socket_context,
                  enum MHD_ConnectionNotificationCode toe);
/* libmicrohttpd's logger (cls: the listener); acts on a failed accept. */
void http_mhd_log(void *cls, const char *fmt, va_list ap) __attribute__((format(printf, 2, 0)));

#endif
