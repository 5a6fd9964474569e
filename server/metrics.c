/* SPDX-License-Identifier: Apache-2.0 */
/* metrics.c - fixed-size tables: routes are known at start, status codes
 * are few. */
#include "../common/common.h"
#include "metrics.h"

#include <pthread.h>
#include <stdarg.h>

#define MAX_CODES 24
static const double bounds[] = {0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025,
                                0.05,   0.1,   0.25,   0.5,   1,    2.5};
#define NB ARRAY_SIZE(bounds)

struct route_stats {
    const char *method;          /* label; borrowed */
    const char *path;            /* label; borrowed */
    int codes[MAX_CODES];        /* status codes seen */
    uint64_t counts[MAX_CODES];  /* requests per code */
    uint64_t buckets[NB];        /* cumulative later; raw per bucket here */
    uint64_t n;                  /* timed requests */
    double sum;                  /* seconds */
};

/* Lock: 'mu' guards 'stats'. */
struct metrics {
    pthread_mutex_t mu;
    size_t n;                 /* number of routes, plus one for unmatched */
    struct route_stats *stats; /* one per route */
};

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

int metrics_printf(char **buf, size_t *len, size_t *cap, const char *fmt, ...)
{
    va_list ap;
    int n;

    for (;;) {
        va_start(ap, fmt);
        n = vsnprintf(*buf ? *buf + *len : NULL, *buf ? *cap - *len : 0, fmt, ap);
        va_end(ap);
        if (n < 0)
            return -1;
        if (*buf && *len + (size_t)n < *cap) {
            *len += (size_t)n;
            return 0;
        }
        size_t ncap = *cap ? *cap * 2 : 8192;
        while (ncap < *len + (size_t)n + 1)
            ncap *= 2;
        char *nb = realloc(*buf, ncap);
        if (!nb)
            return -1;
        *buf = nb;
        *cap = ncap;
    }
}

int metrics_render(struct metrics *m, char **buf, size_t *len, size_t *cap)
{
    size_t i, j;
    int rc = 0;
    uint64_t cum;

    pthread_mutex_lock(&m->mu);
    rc |= metrics_printf(buf, len, cap,
                         "# HELP podresd_http_requests_total HTTP requests by route and code.\n"
                         "# TYPE podresd_http_requests_total counter\n");
    for (i = 0; i < m->n; i++) {
        for (j = 0; j < MAX_CODES && m->stats[i].codes[j]; j++)
            rc |= metrics_printf(buf, len, cap,
                                 "podresd_http_requests_total{method=\"%s\",route=\"%s\",code=\"%d\"} "
                                 "%llu\n",
                                 m->stats[i].method, m->stats[i].path, m->stats[i].codes[j],
                                 (unsigned long long)m->stats[i].counts[j]);
    }
    rc |= metrics_printf(buf, len, cap,
                         "# HELP podresd_http_request_duration_seconds Request latency by route.\n"
                         "# TYPE podresd_http_request_duration_seconds histogram\n");
    for (i = 0; i < m->n; i++) {
        struct route_stats *r = &m->stats[i];

        if (!r->n)
            continue;
        cum = 0;
        for (j = 0; j < NB; j++) {
            cum += r->buckets[j];
            rc |= metrics_printf(
                buf, len, cap,
                "podresd_http_request_duration_seconds_bucket{method=\"%s\",route=\"%s\",le=\"%g\"} "
                "%llu\n",
                r->method, r->path, bounds[j], (unsigned long long)cum);
        }
        rc |= metrics_printf(
            buf, len, cap,
            "podresd_http_request_duration_seconds_bucket{method=\"%s\",route=\"%s\",le=\"+Inf\"}"
            " %llu\n"
            "podresd_http_request_duration_seconds_sum{method=\"%s\",route=\"%s\"} %.6f\n"
            "podresd_http_request_duration_seconds_count{method=\"%s\",route=\"%s\"} %llu\n",
            r->method, r->path, (unsigned long long)r->n, r->method, r->path, r->sum, r->method,
            r->path, (unsigned long long)r->n);
    }
    pthread_mutex_unlock(&m->mu);
    return rc ? -1 : 0;
}
