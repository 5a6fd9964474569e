/* SPDX-License-Identifier: Apache-2.0 */
/* prom.h - the Prometheus text exposition format (version 0.0.4) written
 * into a strbuf: HELP and TYPE lines, samples with their label values
 * escaped, and histograms with fixed buckets. It is not a registry: each
 * daemon keeps its own counters and writes them out when /metrics is read.
 * A struct prom and a struct prom_hist are not thread-safe: their owner's
 * lock guards them. */
#ifndef PODRES_PROM_H
#define PODRES_PROM_H
#include <stddef.h>
#include <stdint.h>

#include "err.h"
#include "strbuf.h"

#define PROM_BUCKETS_MAX 16     /* bounds a histogram may have */
#define PROM_LATENCY_BUCKETS 12 /* entries of prom_latency_bounds */

/* Request latency buckets in seconds, 0.5 ms to 2.5 s. */
extern const double prom_latency_bounds[PROM_LATENCY_BUCKETS];

/* A writer. The first failure sticks and every later write is skipped, so
 * a page is written line after line and checked once, at the end. */
struct prom {
    struct strbuf *sb; /* the exposition, appended to; borrowed */
    err_t rc;          /* ERR_OK, or the first failure (ERR_NOMEM) */
};

/* clang-format off */
#define PROM_INIT(sb) {(sb), ERR_OK} /* an initialiser, not a block */
/* clang-format on */

/* "# HELP name help" and "# TYPE name type" (counter, gauge, histogram). */
void prom_help(struct prom *p, const char *name, const char *type, const char *help);

/* One sample, "name{labels} value". 'labels' is NULL or name, value pairs
 * ending in NULL: (const char *const[]){"verb", "bind", NULL}; a value is
 * escaped (backslash, double quote, line feed) and NULL stands for "". The
 * value is written by 'fmt' and is at most 127 bytes. */
void prom_sample(struct prom *p, const char *name, const char *const *labels, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

/* A metric of one sample without labels: prom_help, then prom_sample. */
void prom_metric(struct prom *p, const char *name, const char *type, const char *help,
                 const char *fmt, ...) __attribute__((format(printf, 5, 6)));

/* A histogram of fixed upper bounds. */
struct prom_hist {
    const double *bounds;               /* ascending upper bounds; borrowed, static */
    size_t nbounds;                     /* entries of 'bounds', at most PROM_BUCKETS_MAX */
    uint64_t buckets[PROM_BUCKETS_MAX]; /* observations per bound, not cumulative */
    uint64_t count;                     /* every observation, those above the last bound too */
    double sum;                         /* their sum */
};

/* An empty histogram of 'n' (<= PROM_BUCKETS_MAX) 'bounds'. */
void prom_hist_init(struct prom_hist *h, const double *bounds, size_t n);
/* Count 'v' in the first bucket whose bound is >= v. */
void prom_hist_observe(struct prom_hist *h, double v);
/* name_bucket{labels,le="B"} (cumulative) for each bound and "+Inf", then
 * name_sum{labels} and name_count{labels}; 'labels' as for prom_sample. */
void prom_hist_render(struct prom *p, const char *name, const char *const *labels,
                      const struct prom_hist *h);

#endif
