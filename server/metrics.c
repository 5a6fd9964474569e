/* SPDX-License-Identifier: Apache-2.0 */
/* metrics.c - fixed-size tables: routes are known at start, status codes
 * are few. */
#include "../common/common.h"
#include "../common/prom.h"
#include "metrics.h"

#include <pthread.h>
#include <stdatomic.h>

#define MAX_CODES 24

struct route_stats {
    const char *method;         /* label; borrowed */
    const char *path;           /* label; borrowed */
    int codes[MAX_CODES];       /* status codes seen */
    uint64_t counts[MAX_CODES]; /* requests per code */
    struct prom_hist latency;   /* timed requests, seconds */
};

/* Lock: 'mu' guards 'stats'; 'events' are atomic. */
struct metrics {
    pthread_mutex_t mu;
    size_t n;                             /* number of routes, plus one for unmatched */
    struct route_stats *stats;            /* one per route */
    atomic_ullong events[METRICS_EVENTS]; /* by enum metrics_event */
};

static const struct {
    const char *name;          /* podresd_<name>_total */
    const char *help;          /* its HELP text */
    const char *const *labels; /* label pairs, as prom_sample takes them, or NULL */
} event_info[METRICS_EVENTS] = {
    [METRICS_NOMEM] = {"out_of_memory",
                       "Requests answered 503 or connections refused because an allocation "
                       "failed.",
                       NULL},
    [METRICS_FD_EXHAUSTED] = {"accept_fd_exhausted",
                              "Accepts that failed for want of a file descriptor.", NULL},
    [METRICS_WATCH_SHED] = {"watch_dropped", "Watch streams ended by podresd, by reason.",
                            (const char *const[]){"reason", "memory", NULL}},
    [METRICS_USER_LIMIT] = {"connections_refused",
                            "Connections closed at once by podresd, by reason (per_user: on the "
                            "unix socket, its user held its share of the connections).",
                            (const char *const[]){"reason", "per_user", NULL}},
};

void metrics_count(struct metrics *m, enum metrics_event e)
{
    if (m && e < METRICS_EVENTS)
        atomic_fetch_add(&m->events[e], 1);
}

struct metrics *metrics_new(size_t n)
{
    struct metrics *m = calloc(1, sizeof(*m));
    size_t i;

    if (!m)
        return NULL;
    m->stats = calloc(n + 1, sizeof(*m->stats));
    if (!m->stats) {
        free(m);
        return NULL;
    }
    m->n = n + 1;
    for (i = 0; i < m->n; i++) {
        m->stats[i].method = "";
        m->stats[i].path = "unmatched";
        prom_hist_init(&m->stats[i].latency, prom_latency_bounds, PROM_LATENCY_BUCKETS);
    }
    pthread_mutex_init(&m->mu, NULL);
    return m;
}

void metrics_set_label(struct metrics *m, size_t i, const char *method, const char *path)
{
    if (i + 1 < m->n) {
        m->stats[i].method = method;
        m->stats[i].path = path;
    }
}

void metrics_free(struct metrics *m)
{
    if (!m)
        return;
    pthread_mutex_destroy(&m->mu);
    free(m->stats);
    free(m);
}

void metrics_observe(struct metrics *m, size_t route, int code, uint64_t us, int timed)
{
    struct route_stats *r;
    double s = (double)us / 1e6;
    size_t i;

    if (!m || route >= m->n)
        return;
    pthread_mutex_lock(&m->mu);
    r = &m->stats[route];
    for (i = 0; i < MAX_CODES; i++) {
        if (r->codes[i] == code || r->codes[i] == 0) {
            r->codes[i] = code;
            r->counts[i]++;
            break;
        }
    }
    if (timed)
        prom_hist_observe(&r->latency, s);
    pthread_mutex_unlock(&m->mu);
}

/* One route's requests by status code. */
static void render_counts(struct prom *p, const struct route_stats *r)
{
    char code[16];
    size_t j;

    for (j = 0; j < MAX_CODES && r->codes[j]; j++) {
        snprintf(code, sizeof(code), "%d", r->codes[j]);
        prom_sample(
            p, "podresd_http_requests_total",
            (const char *const[]){"method", r->method, "route", r->path, "code", code, NULL},
            "%llu", (unsigned long long)r->counts[j]);
    }
}

static void render_events(struct metrics *m, struct prom *p)
{
    char name[96];
    size_t i;

    for (i = 0; i < METRICS_EVENTS; i++) {
        snprintf(name, sizeof(name), "podresd_%s_total", event_info[i].name);
        prom_help(p, name, "counter", event_info[i].help);
        prom_sample(p, name, event_info[i].labels, "%llu",
                    (unsigned long long)atomic_load(&m->events[i]));
    }
}

err_t metrics_render(struct metrics *m, struct strbuf *sb)
{
    static const char latency[] = "podresd_http_request_duration_seconds";
    struct prom p = PROM_INIT(sb);
    const struct route_stats *r;
    size_t i;

    pthread_mutex_lock(&m->mu);
    prom_help(&p, "podresd_http_requests_total", "counter", "HTTP requests by route and code.");
    for (i = 0; i < m->n; i++)
        render_counts(&p, &m->stats[i]);
    prom_help(&p, latency, "histogram", "Request latency by route.");
    for (i = 0; i < m->n; i++) {
        r = &m->stats[i];
        if (r->latency.count)
            prom_hist_render(&p, latency,
                             (const char *const[]){"method", r->method, "route", r->path, NULL},
                             &r->latency);
    }
    render_events(m, &p);
    pthread_mutex_unlock(&m->mu);
    return p.rc;
}

/* ---- per-device series (dcgm-exporter style), from store_device_metrics() ---- */

/* One series: 'metric'{labels of 'keys' from 'o'} value. */
static void series(struct prom *p, const char *metric, const json_t *o, const char *const *keys,
                   double v)
{
    const char *labels[16];
    size_t i, n = 0;

    for (i = 0; keys[i] && n + 3 <= ARRAY_SIZE(labels); i++) {
        labels[n++] = keys[i];
        labels[n++] = json_string_value(json_object_get(o, keys[i]));
    }
    labels[n] = NULL;
    prom_sample(p, metric, labels, "%.15g", v);
}

err_t metrics_render_devices(struct strbuf *sb, const json_t *devs)
{
    static const char *const alloc_keys[] = {"resource", "device",    "namespace",
                                             "pod",      "container", NULL};
    static const char *const health_keys[] = {"resource", "device", NULL};
    static const char *const secs_keys[] = {"namespace", "resource", NULL};
    struct prom p = PROM_INIT(sb);
    const json_t *o;
    size_t i;

    prom_help(&p, "podres_device_allocated", "gauge", "A device held by a container.");
    json_array_foreach(json_object_get(devs, "allocated"), i, o)
        series(&p, "podres_device_allocated", o, alloc_keys, 1);
    prom_help(&p, "podres_device_healthy", "gauge", "1 when the device is Healthy.");
    json_array_foreach(json_object_get(devs, "healthy"), i, o)
        series(&p, "podres_device_healthy", o, health_keys,
               json_is_true(json_object_get(o, "healthy")));
    prom_help(&p, "podres_device_seconds_total", "counter",
              "Seconds devices were held, by namespace and resource.");
    json_array_foreach(json_object_get(devs, "seconds"), i, o)
        series(&p, "podres_device_seconds_total", o, secs_keys,
               json_number_value(json_object_get(o, "seconds")));
    return p.rc;
}
