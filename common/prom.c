/* SPDX-License-Identifier: Apache-2.0 */
/* prom.c - Prometheus text lines. A label set is written again on each line
 * of a histogram rather than kept pre-rendered: a scrape is rare, and the
 * writer then needs no buffer of its own. */
#include "common.h"
#include "prom.h"

#include <assert.h>
#include <stdarg.h>

const double prom_latency_bounds[PROM_LATENCY_BUCKETS] = {0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025,
                                                          0.05,   0.1,   0.25,   0.5,   1,    2.5};

static void add(struct prom *p, const char *s, size_t n)
{
    if (!p->rc)
        p->rc = strbuf_add(p->sb, s, n);
}

static void add_str(struct prom *p, const char *s)
{
    add(p, s, strlen(s));
}

/* 's' as a label value: backslash, double quote and line feed escaped. */
static void add_escaped(struct prom *p, const char *s)
{
    size_t run;

    while (s && *s) {
        run = strcspn(s, "\\\"\n");
        add(p, s, run);
        s += run;
        if (*s) {
            add(p, *s == '\n' ? "\\n" : *s == '"' ? "\\\"" : "\\\\", 2);
            s++;
        }
    }
}

/* name suffix{labels,le="le"}, without braces when there are no labels. */
static void series(struct prom *p, const char *name, const char *suffix, const char *const *labels,
                   const char *le)
{
    size_t i;

    add_str(p, name);
    add_str(p, suffix);
    if (!(labels && labels[0]) && !le)
        return;
    add(p, "{", 1);
    for (i = 0; labels && labels[i]; i += 2) {
        if (i)
            add(p, ",", 1);
        add_str(p, labels[i]);
        add(p, "=\"", 2);
        add_escaped(p, labels[i + 1]);
        add(p, "\"", 1);
    }
    if (le) {
        add_str(p, i ? ",le=\"" : "le=\"");
        add_str(p, le);
        add(p, "\"", 1);
    }
    add(p, "}", 1);
}

/* " value\n" */
static void value(struct prom *p, const char *fmt, va_list ap)
    __attribute__((format(printf, 2, 0)));

static void value(struct prom *p, const char *fmt, va_list ap)
{
    char text[128];
    int n;

    text[0] = ' ';
    n = vsnprintf(text + 1, sizeof(text) - 2, fmt, ap);
    if (n < 0)
        n = 0;
    if ((size_t)n > sizeof(text) - 3)
        n = (int)(sizeof(text) - 3);
    text[n + 1] = '\n';
    add(p, text, (size_t)n + 2);
}

static void sample(struct prom *p, const char *name, const char *suffix, const char *const *labels,
                   const char *le, const char *fmt, ...) __attribute__((format(printf, 6, 7)));

static void sample(struct prom *p, const char *name, const char *suffix, const char *const *labels,
                   const char *le, const char *fmt, ...)
{
    va_list ap;

    series(p, name, suffix, labels, le);
    va_start(ap, fmt);
    value(p, fmt, ap);
    va_end(ap);
}

void prom_help(struct prom *p, const char *name, const char *type, const char *help)
{
    add(p, "# HELP ", 7);
    add_str(p, name);
    add(p, " ", 1);
    add_str(p, help);
    add(p, "\n# TYPE ", 8);
    add_str(p, name);
    add(p, " ", 1);
    add_str(p, type);
    add(p, "\n", 1);
}

void prom_sample(struct prom *p, const char *name, const char *const *labels, const char *fmt, ...)
{
    va_list ap;

    series(p, name, "", labels, NULL);
    va_start(ap, fmt);
    value(p, fmt, ap);
    va_end(ap);
}

void prom_metric(struct prom *p, const char *name, const char *type, const char *help,
                 const char *fmt, ...)
{
    va_list ap;

    prom_help(p, name, type, help);
    series(p, name, "", NULL, NULL);
    va_start(ap, fmt);
    value(p, fmt, ap);
    va_end(ap);
}

void prom_hist_init(struct prom_hist *h, const double *bounds, size_t n)
{
    assert(n <= PROM_BUCKETS_MAX);
    memset(h, 0, sizeof(*h));
    h->bounds = bounds;
    h->nbounds = n;
}

void prom_hist_observe(struct prom_hist *h, double v)
{
    size_t i;

    for (i = 0; i < h->nbounds; i++) {
        if (v <= h->bounds[i]) {
            h->buckets[i]++;
            break;
        }
    }
    h->count++;
    h->sum += v;
}

void prom_hist_render(struct prom *p, const char *name, const char *const *labels,
                      const struct prom_hist *h)
{
    uint64_t cum = 0;
    char le[32];
    size_t i;

    for (i = 0; i < h->nbounds; i++) {
        cum += h->buckets[i];
        snprintf(le, sizeof(le), "%g", h->bounds[i]);
        sample(p, name, "_bucket", labels, le, "%llu", (unsigned long long)cum);
    }
    sample(p, name, "_bucket", labels, "+Inf", "%llu", (unsigned long long)h->count);
    sample(p, name, "_sum", labels, NULL, "%.6f", h->sum);
    sample(p, name, "_count", labels, NULL, "%llu", (unsigned long long)h->count);
}
