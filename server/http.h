/* SPDX-License-Identifier: Apache-2.0 */
/* http.h - podresd's libmicrohttpd glue: the unix socket, the optional
 * loopback TCP listener and the optional metrics-only listener (any address:
 * GET /metrics, /healthz and /readyz, 404 for the rest), routing, body limits, access rules and the
 * Kubernetes Status answer of every failure. A listener that takes writes
 * runs a thread per connection (a write waits for its COMMIT); the read-only
 * TCP listener (no write token) runs one polling thread for all its
 * connections. Watch streams of both go to one stream loop (stream.h). */
#ifndef PODRES_HTTP_H
#define PODRES_HTTP_H
#include <stddef.h>

#include "../common/err.h"
#include "api.h"

#define HTTP_BODY_MAX (1024 * 1024) /* bytes; larger bodies get 413 */
/* A declared body up to this size, over HTTP_BODY_MAX, is read and dropped
 * before the 413, so that a client still sending sees the answer. */
#define HTTP_DRAIN_MAX (16 * HTTP_BODY_MAX)
/* Connections of the metrics-only listener: a scraper or two and probes. */
#define HTTP_METRICS_CONNS 32

struct http_opts {
    const char *socket_path;    /* unix socket, or NULL */
    const char *listen;         /* "127.0.0.1:9444", "[::1]:9444", or NULL */
    const char *metrics_listen; /* any numeric "HOST:PORT" for metrics alone, or NULL */
    unsigned conn_limit;        /* connections per listener */
    unsigned timeout_s;         /* idle connection timeout, seconds */
};

struct http;

/* Create the listeners and start serving 'api' (borrowed; must outlive the
 * server). The socket's directory is created 0750 if missing; an existing
 * path that is not a socket, or a symlink, is refused; a stale socket is
 * replaced unless something still answers on it. On ERR_OK *out is new. */
err_t http_start(struct api *api, const struct http_opts *opts, struct http **out) WARN_UNUSED;
/* Stop accepting new connections; open ones go on. NULL is a no-op. */
void http_quiesce(struct http *h);
/* Stop accepting, close every connection (streams end first: close the feed
 * before), remove the socket file, free. NULL is a no-op. */
void http_stop(struct http *h);

/* Why 'spec' is not a loopback HOST:PORT to listen on, or NULL when it is
 * one (the 'listen' setting is checked when it is set). */
const char *http_listen_check(const char *spec);
/* Why 'spec' is not a numeric HOST:PORT, of any address, for the
 * metrics-only listener, or NULL when it is one. */
const char *http_metrics_listen_check(const char *spec);
/* Why 'path' cannot be a unix socket's path, or NULL. */
const char *http_socket_check(const char *path);

/* Map an error to its HTTP status and Status reason. */
int http_status_of(err_t rc, const char **reason);
/* A Status object; new. */
json_t *http_status_json(int code, const char *reason, const char *message);

#endif
