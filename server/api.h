/* SPDX-License-Identifier: Apache-2.0 */
/* api.h - podresd's REST handlers and the route table http.c dispatches
 * with. Handlers never build SQL and never touch libmicrohttpd except to
 * create a streaming or text response. */
#ifndef PODRES_API_H
#define PODRES_API_H
#include <jansson.h>
#include <microhttpd.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "../common/err.h"
#include "feed.h"
#include "metrics.h"
#include "store.h"
#include "stream.h"

struct token;
struct watch_cache;

#define API_MAX_SEGS 8

/* Shared by every request; read-only after start except where noted. */
struct api {
    struct store *store;     /* borrowed */
    struct feed *feed;       /* borrowed */
    struct metrics *metrics; /* borrowed */
    struct token *token;     /* write token for TCP (token.h), or NULL; borrowed */
    bool kubelet_mode;       /* devices and bindings are read-only */
    const char *node_name;   /* for /version; borrowed */
    /* Readiness hook of the binding source; NULL = always ready. Sets
     * 'why' (errorf) when not ready. Thread-safe. */
    bool (*source_ready)(void *ctx, struct error *why);
    /* The binding source's own metrics, appended to GET /metrics; NULL = none. */
    err_t (*source_metrics)(void *ctx, struct strbuf *sb);
    void *source_ctx;      /* argument of source_ready and source_metrics */
    volatile int stopping; /* set once at shutdown */
    /* The snapshots watchers share and the count of what they hold
     * (api_watch_init), or NULL: each watcher then holds its own copy. */
    struct watch_cache *watch_cache;
};

/* One request, as http.c hands it to a handler. */
struct api_req {
    struct api *api;               /* borrowed */
    struct MHD_Connection *conn;   /* for query arguments */
    const char *seg[API_MAX_SEGS]; /* path segments; borrowed */
    size_t nseg;                   /* how many */
    const char *body;              /* request body (NUL-terminated) or NULL */
    size_t body_len;               /* its length */
    struct error err;              /* the Status message on failure */
};

/* What a handler answers on ERR_OK: a JSON body, or a ready response. */
struct api_resp {
    int status;               /* HTTP status */
    json_t *json;             /* new, or NULL */
    char *text;               /* new JSON text instead of 'json', or NULL */
    size_t text_len;          /* its length */
    struct MHD_Response *raw; /* new, or NULL (takes precedence) */
    bool stream;              /* a long-lived stream (left out of latency) */
    /* A stream served by the stream loop (takes precedence over all above):
     * http.c hands it the socket; src->free(src_cls) is its to call. */
    const struct stream_src *src;
    void *src_cls;
    const char *content_type; /* of the stream; static */
};

typedef err_t (*api_handler)(struct api_req *r, struct api_resp *out);

struct api_route {
    const char *method;  /* GET, PUT, ... */
    const char *pattern; /* "v1/namespaces/{*}/pods": a star segment matches any one */
    const char *label;   /* metrics label */
    api_handler fn;      /* the handler */
    bool write;          /* needs write access */
    bool binding_write;  /* refused in kubelet mode */
    bool has_body;       /* takes a JSON body */
    const char *params;  /* query parameters taken, "a,b" ("" none); NULL: the handler
                          * checks its own (history, usage) */
};

/* ERR_INVAL, with 'r->msg' naming it and the accepted ones, when the request
 * has a query parameter 'rt' does not take (or one twice): a misspelt filter
 * would otherwise be ignored and answer everything. */
err_t api_check_params(struct api_req *r, const struct api_route *rt) WARN_UNUSED;

extern const struct api_route api_routes[];
extern const size_t api_nroutes;

/* GET /v1/watch (api_watch.c). */
err_t api_watch(struct api_req *r, struct api_resp *out);
/* Let watchers that start at the same revision with the same filter share
 * one serialised snapshot, and count the bytes all watchers hold unsent
 * (their buffers, each snapshot once): sets api->watch_cache. 'budget'
 * bytes, or 0 for none, is what they may hold together (api_watch_serve).
 * ERR_NOMEM or ERR_OK. */
err_t api_watch_init(struct api *api, size_t budget) WARN_UNUSED;
/* Have the stream loop 's' keep the watchers within the budget: past it,
 * the watchers furthest behind are shed, each ending with an ERROR 429
 * TooManyRequests line when it can be sent (stream.h, streams_set_budget)
 * and counted in podresd_watch_dropped_total{reason="memory"}. Call before
 * 's' serves a watch; a no-op without a budget. */
void api_watch_serve(struct api *api, struct streams *s);
/* Drop api->watch_cache (after the streams are gone). No-op when unset. */
void api_watch_release(struct api *api);

/* GET /v1/history, GET /v1/usage and GET /v1/devices/{id} (api_history.c). */
err_t api_history(struct api_req *r, struct api_resp *out);
err_t api_usage(struct api_req *r, struct api_resp *out);
err_t api_device_get(struct api_req *r, struct api_resp *out);

/* GET /ui: the device timeline page, HTML (api_ui.c). */
err_t api_ui(struct api_req *r, struct api_resp *out);

/* Query argument 'name' or NULL. */
const char *api_arg(struct api_req *r, const char *name);

/* The path's segments from 'from' on joined by '/' into 'buf' (a name that
 * holds slashes: a DRA device's pool/device); false when it does not fit. */
bool api_path_rest(const struct api_req *r, size_t from, char *buf, size_t cap);

#endif
