/* SPDX-License-Identifier: Apache-2.0 */
/* metrics.h - request counters and latency histograms by route, rendered in
 * the Prometheus text format together with gauges the caller supplies.
 * Thread-safe: one mutex. */
#ifndef PODRES_METRICS_H
#define PODRES_METRICS_H
#include <stddef.h>
#include <stdint.h>

#include "../common/err.h"
#include "../common/strbuf.h"

struct metrics;

/* Room for 'n' routes (indices 0..n-1) plus index n for requests no route
 * matched. New, or NULL. */
struct metrics *metrics_new(size_t n);
/* Label route 'i' with 'method' and 'path' (borrowed, static strings). */
void metrics_set_label(struct metrics *m, size_t i, const char *method, const char *path);
void metrics_free(struct metrics *m); /* NULL is a no-op */
/* Count one request of route 'route' (index) answered 'code' after 'us' microseconds;
 * 'timed' false leaves it out of the latency histogram (streams). */
void metrics_observe(struct metrics *m, size_t route, int code, uint64_t us, int timed);
/* Events counted beside the requests, each a podresd_<name>_total counter. */
enum metrics_event {
    METRICS_NOMEM,        /* an allocation failed: 503, or a connection refused */
    METRICS_FD_EXHAUSTED, /* an accept failed for want of a descriptor */
    METRICS_WATCH_SHED,   /* a watch stream was ended for the watchers' memory budget */
    METRICS_USER_LIMIT,   /* a unix socket connection closed: its user held its share */
    METRICS_EVENTS        /* how many */
};
/* Count one 'e'. Lock-free: fine where nothing may be allocated. */
void metrics_count(struct metrics *m, enum metrics_event e);
/* Append the request metrics to 'sb'. */
err_t metrics_render(struct metrics *m, struct strbuf *sb) WARN_UNUSED;

/* ---- per-device series ---- */
#include <jansson.h>
/* Append podres_device_allocated, podres_device_healthy and
 * podres_device_seconds_total from 'devs', store_device_metrics()'s object. */
err_t metrics_render_devices(struct strbuf *sb, const json_t *devs) WARN_UNUSED;

#endif
