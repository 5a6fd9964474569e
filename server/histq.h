/* SPDX-License-Identifier: Apache-2.0 */
/* histq.h - the query parameters of GET /v1/history and GET /v1/usage
 * (docs/API.md, History and usage) and RFC 3339 times. Pure: no I/O, thread-safe. Every
 * problem is ERR_INVAL (400) with 'e' naming the parameter: an unknown or
 * repeated parameter, a bad value or time, an inverted window, a missing
 * or contradictory selector. Strings in the result are borrowed from the
 * values passed in. */
#ifndef PODRES_HISTQ_H
#define PODRES_HISTQ_H
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "../common/err.h"

#define HISTQ_LIMIT_DEFAULT 1000 /* intervals in one answer without ?limit */
#define HISTQ_LIMIT_MAX 10000    /* the largest ?limit */
#define HISTQ_TIME_MAX 96        /* room for a formatted time (24 bytes and NUL) */

enum histq_sel {
    HISTQ_DEVICE, /* ?device=ID[&resource=R] */
    HISTQ_POD,    /* ?namespace=NS&name=POD */
    HISTQ_AT,     /* ?at=T[&resource=R] */
};

enum histq_by {
    HISTQ_BY_NAMESPACE,
    HISTQ_BY_POD,
    HISTQ_BY_DEVICE
};

/* One query. Times are Unix milliseconds; an absent bound of a window is
 * INT64_MIN or INT64_MAX. */
struct histq {
    enum histq_sel sel;     /* history: what selects the intervals */
    enum histq_by by;       /* usage: the groups */
    const char *resource;   /* or NULL */
    const char *device;     /* HISTQ_DEVICE */
    const char *ns, *name;  /* HISTQ_POD */
    bool health;            /* kind=health: Unhealthy intervals (HISTQ_DEVICE only) */
    int64_t from_ms, to_ms; /* the window [from, to) */
    int64_t at_ms;          /* HISTQ_AT */
    uint64_t after;         /* ?continue: only intervals with a larger id */
    size_t limit;           /* intervals in one answer */
};

/* Parse the 'n' parameters keys[i]=vals[i] (a value may be NULL: "?a")
 * of /v1/history ('usage' false) or /v1/usage ('usage' true) into *q,
 * untouched on failure. 'e' may be NULL: the message is dropped. */
err_t histq_parse(const char *const *keys, const char *const *vals, size_t n, bool usage,
                  struct histq *q, struct error *e) WARN_UNUSED;

/* An RFC 3339 date-time ("2024-05-01T03:00:00Z", "...T05:00:00.25+02:00";
 * 'T' and 'Z' in either case; fractions beyond milliseconds are cut) as
 * Unix milliseconds. Years 0001 to 9999. ERR_INVAL otherwise. */
err_t histq_parse_time(const char *s, int64_t *ms) WARN_UNUSED;
/* 'ms' as "YYYY-MM-DDTHH:MM:SS.mmmZ" into 'buf' (HISTQ_TIME_MAX bytes). */
void histq_format_time(int64_t ms, char *buf);

#endif
