/* SPDX-License-Identifier: Apache-2.0 */
/* metrics.c - /metrics, /healthz and /readyz of podres-syncer. Each
 * module renders its own counters (rest.h, inventory.h, events.h, dra.h); the
 * daemon-wide gauges, the skip counts and the sync-lag histogram are
 * rendered here. */
#define LOG_MOD "main"
#include "../common/common.h"
#include "../common/clock.h"
#include "../common/prom.h"
#include "../common/strbuf.h"
#include "metrics.h"
#include "worker.h"

#include <microhttpd.h>
#include <netdb.h>

/* How long the API server may fail an informer's requests before /readyz
 * says so: an API server restarting or a connection re-established is not
 * news. */
#define READY_GRACE_MS 15000

/* ---- the sync-lag histogram ---- */

static const double lag_bounds[] = {0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60};

void metrics_lag_init(struct lag *l)
{
    pthread_mutex_init(&l->mu, NULL);
    prom_hist_init(&l->h, lag_bounds, ARRAY_SIZE(lag_bounds));
}

void metrics_lag_observe(struct lag *l, double s)
{
    pthread_mutex_lock(&l->mu);
    prom_hist_observe(&l->h, s);
    pthread_mutex_unlock(&l->mu);
}

/* ---- /metrics and /healthz ---- */

/* /readyz: synced, and no informer failing for longer than READY_GRACE_MS;
 * else false and 'why' names the first that is not. */
static bool ready(struct syncer *s, struct error *why)
{
    struct error fence = {0};

    if (nodefeed_mismatch(&s->feed, why))
        return false;
    if (fence_stopped(&s->rec.fence, &fence)) {
        if (__atomic_load_n(&s->node_missing, __ATOMIC_RELAXED) == 1)
            errorf(why, ERR_UNAVAIL, "%s; node '%s' is no Node in the API server", fence.msg,
                   s->set.node_name);
        else
            errorf(why, ERR_UNAVAIL, "%s", fence.msg);
        return false;
    }
    if (!cache_synced(s->pr)) {
        errorf(why, ERR_UNAVAIL, "podresd's state not listed yet");
        return false;
    }
    return informer_ready(&s->inf_pods, READY_GRACE_MS, why) &&
           informer_ready(&s->inf_crs, READY_GRACE_MS, why) &&
           (informer_missing(&s->inf_nd) || informer_ready(&s->inf_nd, READY_GRACE_MS, why)) &&
           (informer_missing(&s->inf_rs) || informer_ready(&s->inf_rs, READY_GRACE_MS, why));
}

/* The node-name checks: a Node missing, writes stopped (another syncer). */
static void render_guards(struct syncer *s, struct prom *p)
{
    int missing = __atomic_load_n(&s->node_missing, __ATOMIC_RELAXED);

    prom_metric(p, "podres_syncer_node_missing", "gauge",
                "1 when the API server has no Node named --node-name (a typo?), 0 when it has or "
                "before it was asked.",
                "%d", missing == 1);
    prom_metric(p, "podres_syncer_node_mismatch", "gauge",
                "1 while podresd serves another node than --node-name (nothing is synced).", "%d",
                (int)nodefeed_mismatch(&s->feed, NULL));
    prom_metric(p, "podres_syncer_writes_stopped", "gauge",
                "1 while writes are stopped because another podres-syncer writes this podresd's "
                "reservations.",
                "%d", (int)fence_stopped(&s->rec.fence, NULL));
}

/* Bindings not mirrored, by reason. */
static void render_skipped(struct syncer *s, struct prom *p)
{
    size_t i;

    prom_help(p, "podres_syncer_skipped_total", "counter",
              "Bindings not mirrored each time one was looked at, by reason (foreign_label: the "
              "DeviceBinding is labelled for another node, or none; no_pod: no Pod of that name "
              "on this node; pod_uid_mismatch: the Pod is another instance than podresd's; "
              "crd_missing: DeviceBindings are not served).");
    for (i = 0; i < RECONCILE_SKIP_N; i++)
        prom_sample(
            p, "podres_syncer_skipped_total",
            (const char *const[]){"reason", reconcile_skip_name((enum reconcile_skip)i), NULL},
            "%llu", (unsigned long long)reconcile_skipped(&s->rec, (enum reconcile_skip)i));
}

static err_t render_metrics(struct syncer *s, struct strbuf *sb)
{
    struct prom p = PROM_INIT(sb);

    p.rc = rest_stats_render(s->stats, sb);
    prom_metric(&p, "podres_syncer_queue_depth", "gauge", "Keys waiting to be reconciled.", "%zu",
                queue_len(s->queue));
    prom_metric(&p, "podres_syncer_last_resync_timestamp_seconds", "gauge",
                "Time of the last full resync.", "%lld", (long long)s->last_resync);
    prom_metric(&p, "podres_syncer_podresd_revision", "gauge", "Last podresd revision seen.",
                "%llu", (unsigned long long)s->feed.revision);
    prom_metric(&p, "podres_syncer_devicebindings", "gauge",
                "DeviceBindings of this node in the cache.", "%zu", cache_size(s->crs));
    render_skipped(s, &p);
    prom_help(&p, "podres_syncer_sync_lag_seconds", "histogram",
              "From a change seen on the node to the API server's acknowledgement.");
    pthread_mutex_lock(&s->lag.mu);
    prom_hist_render(&p, "podres_syncer_sync_lag_seconds", NULL, &s->lag.h);
    pthread_mutex_unlock(&s->lag.mu);
    if (!p.rc)
        p.rc = inventory_render(&s->inv, sb);
    if (!p.rc)
        p.rc = events_render(&s->events, sb);
    if (!p.rc)
        p.rc = dra_render(&s->dra, sb);
    render_guards(s, &p);
    return p.rc;
}

/* /readyz: 200 "ok", or 503 "not ready: REASON" into 'sb'; 500 when out of
 * memory. */
static unsigned readyz(struct syncer *s, struct strbuf *sb)
{
    struct error why = {0};

    if (ready(s, &why))
        return strbuf_add(sb, "ok", 2) ? 500 : 200;
    return strbuf_printf(sb, "not ready: %s", why.msg) ? 500 : 503;
}

static enum MHD_Result on_http(void *cls, struct MHD_Connection *conn, const char *url,
                               const char *method, const char *version, const char *data,
                               size_t *size, void **con_cls)
{
    struct syncer *s = cls;
    struct strbuf sb = STRBUF_INIT;
    struct MHD_Response *resp;
    unsigned status = 200;
    const char *text = NULL;
    enum MHD_Result ret;
    size_t len;
    char *body;

    (void)version;
    (void)data;
    (void)size;
    if (!*con_cls) {
        *con_cls = s; /* answer on the second call (libmicrohttpd 0.9.75 keep-alive) */
        return MHD_YES;
    }
    if (strcmp(method, "GET") != 0 && strcmp(method, "HEAD") != 0) {
        status = 405;
        text = "method not allowed\n";
    } else if (strcmp(url, "/metrics") == 0) {
        status = render_metrics(s, &sb) ? 500 : 200;
    } else if (strcmp(url, "/healthz") == 0) {
        text = "ok";
    } else if (strcmp(url, "/readyz") == 0) {
        status = readyz(s, &sb);
    } else {
        status = 404;
        text = "not found\n";
    }
    if (text && strbuf_add(&sb, text, strlen(text)))
        status = 500;
    body = strbuf_detach(&sb, &len);
    resp = body ? MHD_create_response_from_buffer(len, body, MHD_RESPMEM_MUST_FREE)
                : MHD_create_response_from_buffer(0, NULL, MHD_RESPMEM_PERSISTENT);
    if (!resp) {
        free(body);
        return MHD_NO;
    }
    MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE, "text/plain; version=0.0.4");
    ret = MHD_queue_response(conn, status, resp);
    MHD_destroy_response(resp);
    return ret;
}

err_t metrics_start(struct syncer *s)
{
    char host[256];
    const char *colon;
    struct addrinfo hints = {.ai_socktype = SOCK_STREAM, .ai_flags = AI_NUMERICHOST};
    struct addrinfo *ai = NULL;
    size_t n;

    if (!s->set.metrics_listen || !*s->set.metrics_listen)
        return ERR_OK;
    colon = strrchr(s->set.metrics_listen, ':');
    n = colon ? (size_t)(colon - s->set.metrics_listen) : 0;
    if (!colon || n == 0 || n >= sizeof(host)) {
        log_err("cannot listen on '%s': give HOST:PORT", s->set.metrics_listen);
        return ERR_INVAL;
    }
    snprintf(host, sizeof(host), "%.*s", (int)n, s->set.metrics_listen);
    if (host[0] == '[' && host[n - 1] == ']') {
        memmove(host, host + 1, n - 2);
        host[n - 2] = '\0';
    }
    if (getaddrinfo(strcmp(host, "localhost") == 0 ? "127.0.0.1" : host, colon + 1, &hints, &ai)) {
        log_err("cannot listen on '%s': not a numeric address", s->set.metrics_listen);
        return ERR_INVAL;
    }
    s->http = MHD_start_daemon(MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_POLL |
                                   (ai->ai_family == AF_INET6 ? MHD_USE_IPv6 : 0),
                               0, NULL, NULL, on_http, s, MHD_OPTION_SOCK_ADDR, ai->ai_addr,
                               MHD_OPTION_CONNECTION_LIMIT, 64u, MHD_OPTION_CONNECTION_TIMEOUT, 10u,
                               MHD_OPTION_END);
    freeaddrinfo(ai);
    if (!s->http) {
        log_err("cannot listen on '%s': %s", s->set.metrics_listen, strerror(errno));
        return ERR_IO;
    }
    return ERR_OK;
}
