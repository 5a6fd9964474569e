/* SPDX-License-Identifier: Apache-2.0 */
/* metrics.c - fixed-size tables: routes are known at start, status codes
 * are few. */
#include "../common/common.h"
#include "metrics.h"

#include <pthread.h>
#include <stdatomic.h>

#define MAX_CODES 24
static const double bounds[] = {0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025,
                                0.05,   0.1,   0.25,   0.5,   1,    2.5};
#define NB ARRAY_SIZE(bounds)

struct route_stats {
    const char *method;         /* label; borrowed */
    const char *path;           /* label; borrowed */
    int codes[MAX_CODES];       /* status codes seen */
    uint64_t counts[MAX_CODES]; /* requests per code */
    uint64_t buckets[NB];       /* cumulative later; raw per bucket here */
    uint64_t n;                 /* timed requests */
    double sum;                 /* seconds */
};

/* Lock: 'mu' guards 'stats'; 'events' are atomic. */
struct metrics {
    pthread_mutex_t mu;
    size_t n;                             /* number of routes, plus one for unmatched */
    struct route_stats *stats;            /* one per route */
    atomic_ullong events[METRICS_EVENTS]; /* by enum metrics_event */
};

static const struct {
    const char *name;   /* podresd_<name>_total */
    const char *help;   /* its HELP text */
    const char *labels; /* "{...}" or NULL */
} event_info[METRICS_EVENTS] = {
    [METRICS_NOMEM] = {"out_of_memory", "Requests answered 503 or connections refused because "
                                        "an allocation failed."},
    [METRICS_FD_EXHAUSTED] = {"accept_fd_exhausted", "Accepts that failed for want of a file "
                                                     "descriptor."},
    [METRICS_WATCH_SHED] = {"watch_dropped", "Watch streams ended by podresd, by reason.",
                            "{reason=\"memory\"}"},
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
    if (timed) {
        for (i = 0; i < NB; i++) {
            if (s <= bounds[i]) {
                r->buckets[i]++;
                break;
            }
        }
        r->n++;
        r->sum += s;
    }
    pthread_mutex_unlock(&m->mu);
}

/* One route's latency histogram. */
static err_t render_histogram(const struct route_stats *r, struct strbuf *sb)
{
    uint64_t cum = 0;
    size_t j;
    err_t rc = ERR_OK;

    for (j = 0; !rc && j < NB; j++) {
        cum += r->buckets[j];
        rc = strbuf_printf(
            sb,
            "podresd_http_request_duration_seconds_bucket{method=\"%s\",route=\"%s\","
            "le=\"%g\"} %llu\n",
            r->method, r->path, bounds[j], (unsigned long long)cum);
    }
    if (!rc)
        rc = strbuf_printf(
            sb,
            "podresd_http_request_duration_seconds_bucket{method=\"%s\",route=\"%s\",le=\"+Inf\"}"
            " %llu\n"
            "podresd_http_request_duration_seconds_sum{method=\"%s\",route=\"%s\"} %.6f\n"
            "podresd_http_request_duration_seconds_count{method=\"%s\",route=\"%s\"} %llu\n",
            r->method, r->path, (unsigned long long)r->n, r->method, r->path, r->sum, r->method,
            r->path, (unsigned long long)r->n);
    return rc;
}

err_t metrics_render(struct metrics *m, struct strbuf *sb)
{
    size_t i, j;
    err_t rc;

    pthread_mutex_lock(&m->mu);
    rc = strbuf_printf(sb, "# HELP podresd_http_requests_total HTTP requests by route and code.\n"
                           "# TYPE podresd_http_requests_total counter\n");
    for (i = 0; !rc && i < m->n; i++) {
        const struct route_stats *r = &m->stats[i];

        for (j = 0; !rc && j < MAX_CODES && r->codes[j]; j++)
            rc = strbuf_printf(
                sb,
                "podresd_http_requests_total{method=\"%s\",route=\"%s\",code=\"%d\"} "
                "%llu\n",
                r->method, r->path, r->codes[j], (unsigned long long)r->counts[j]);
    }
    if (!rc)
        rc = strbuf_printf(sb, "# HELP podresd_http_request_duration_seconds Request latency by "
                               "route.\n# TYPE podresd_http_request_duration_seconds histogram\n");
    for (i = 0; !rc && i < m->n; i++) {
        if (m->stats[i].n)
            rc = render_histogram(&m->stats[i], sb);
    }
    for (i = 0; !rc && i < METRICS_EVENTS; i++)
        rc = strbuf_printf(sb,
                           "# HELP podresd_%s_total %s\n# TYPE podresd_%s_total counter\n"
                           "podresd_%s_total%s %llu\n",
                           event_info[i].name, event_info[i].help, event_info[i].name,
                           event_info[i].name, event_info[i].labels ? event_info[i].labels : "",
                           (unsigned long long)atomic_load(&m->events[i]));
    pthread_mutex_unlock(&m->mu);
    return rc;
}

/* ---- per-device series (dcgm-exporter style), from store_device_metrics() ---- */

/* 's' as a label value: backslash, quote and line feed escaped. */
static err_t label(struct strbuf *sb, const char *name, const char *s, bool first)
{
    err_t rc = strbuf_printf(sb, "%s%s=\"", first ? "" : ",", name);

    for (; !rc && s && *s; s++) {
        if (*s == '\\' || *s == '"')
            rc = strbuf_printf(sb, "\\%c", *s);
        else if (*s == '\n')
            rc = strbuf_printf(sb, "\\n");
        else
            rc = strbuf_printf(sb, "%c", *s);
    }
    return rc ? rc : strbuf_printf(sb, "\"");
}

/* One series: 'metric'{labels of 'keys' from 'o'} value. */
static err_t series(struct strbuf *sb, const char *metric, const json_t *o, const char *const *keys,
                    const char *const *names, double v)
{
    size_t i;
    err_t rc = strbuf_printf(sb, "%s{", metric);

    for (i = 0; !rc && keys[i]; i++)
        rc = label(sb, names[i], json_string_value(json_object_get(o, keys[i])), i == 0);
    return rc ? rc : strbuf_printf(sb, "} %.15g\n", v);
}

err_t metrics_render_devices(struct strbuf *sb, const json_t *devs)
{
    static const char *const alloc_keys[] = {"resource", "device",    "namespace",
                                             "pod",      "container", NULL};
    static const char *const health_keys[] = {"resource", "device", NULL};
    static const char *const secs_keys[] = {"namespace", "resource", NULL};
    const json_t *o;
    size_t i;
    err_t rc = strbuf_printf(sb, "# HELP podres_device_allocated A device held by a container.\n"
                                 "# TYPE podres_device_allocated gauge\n");

    json_array_foreach(json_object_get(devs, "allocated"), i, o) {
        if (!rc)
            rc = series(sb, "podres_device_allocated", o, alloc_keys, alloc_keys, 1);
    }
    if (!rc)
        rc = strbuf_printf(sb, "# HELP podres_device_healthy 1 when the device is Healthy.\n"
                               "# TYPE podres_device_healthy gauge\n");
    json_array_foreach(json_object_get(devs, "healthy"), i, o) {
        if (!rc)
            rc = series(sb, "podres_device_healthy", o, health_keys, health_keys,
                        json_is_true(json_object_get(o, "healthy")));
    }
    if (!rc)
        rc = strbuf_printf(sb, "# HELP podres_device_seconds_total Seconds devices were held, "
                               "by namespace and resource.\n"
                               "# TYPE podres_device_seconds_total counter\n");
    json_array_foreach(json_object_get(devs, "seconds"), i, o) {
        if (!rc)
            rc = series(sb, "podres_device_seconds_total", o, secs_keys, secs_keys,
                        json_number_value(json_object_get(o, "seconds")));
    }
    return rc;
}
