/* SPDX-License-Identifier: Apache-2.0 */
/* histq.c - the query parameters of /v1/history and /v1/usage, and RFC 3339
 * times (histq.h). Only parsing: the store runs the query. */
#define LOG_MOD "histq"
#include "../common/common.h"
#include "../common/names.h"
#include "histq.h"

#include <assert.h>
#include <inttypes.h>
#include <time.h>

/* The parameters as given, before they are checked. */
struct raw {
    const char *device, *resource, *ns, *name, *at, *from, *to, *kind, *limit, *cont, *by;
};

#define H 1 /* a parameter of /v1/history */
#define U 2 /* a parameter of /v1/usage */

static const struct param {
    const char *key;
    size_t off; /* in struct raw */
    int where;  /* H, U or both */
} params[] = {
    {"device", offsetof(struct raw, device), H},
    {"resource", offsetof(struct raw, resource), H | U},
    {"namespace", offsetof(struct raw, ns), H},
    {"name", offsetof(struct raw, name), H},
    {"at", offsetof(struct raw, at), H},
    {"from", offsetof(struct raw, from), H | U},
    {"to", offsetof(struct raw, to), H | U},
    {"kind", offsetof(struct raw, kind), H},
    {"limit", offsetof(struct raw, limit), H},
    {"continue", offsetof(struct raw, cont), H},
    {"by", offsetof(struct raw, by), U},
};

/* Sort the parameters into 'r': each known to this endpoint, once, with a value. */
static err_t collect(const char *const *keys, const char *const *vals, size_t n, int where,
                     struct raw *r, struct error *e)
{
    const char **slot;
    size_t i, j;

    for (i = 0; i < n; i++) {
        for (j = 0; j < ARRAY_SIZE(params); j++) {
            if ((params[j].where & where) && strcmp(params[j].key, keys[i]) == 0)
                break;
        }
        if (j == ARRAY_SIZE(params))
            return errorf(e, ERR_INVAL, "unknown query parameter \"%.100s\"", keys[i]);
        slot = (const char **)((char *)r + params[j].off);
        if (*slot)
            return errorf(e, ERR_INVAL, "query parameter %s is given twice", keys[i]);
        if (!vals[i] || !vals[i][0])
            return errorf(e, ERR_INVAL, "query parameter %s needs a value", keys[i]);
        *slot = vals[i];
    }
    return ERR_OK;
}

/* ---- RFC 3339 ---- */

/* Days from 1970-01-01 to y-m-d (proleptic Gregorian; H. Hinnant's days_from_civil). */
static int64_t days_from_civil(int64_t y, int m, int d)
{
    int64_t era, yoe, doy, doe;

    y -= m <= 2;
    era = (y >= 0 ? y : y - 399) / 400;
    yoe = y - era * 400;
    doy = (153 * (m + (m > 2 ? -3 : 9)) + 2) / 5 + d - 1;
    doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    return era * 146097 + doe - 719468;
}

static int month_days(int y, int m)
{
    static const int days[] = {31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
    bool leap = (y % 4 == 0 && y % 100 != 0) || y % 400 == 0;

    return m == 2 && leap ? 29 : days[m - 1];
}

/* 'n' digits at *p as a number, advancing *p; -1 when they are not digits. */
static int digits(const char **p, int n)
{
    int v = 0;

    for (; n > 0; n--, (*p)++) {
        if (**p < '0' || **p > '9')
            return -1;
        v = v * 10 + (**p - '0');
    }
    return v;
}

/* The fraction after a '.' at *p, as milliseconds (more digits are cut). */
static int fraction_ms(const char **p)
{
    int ms = 0, n = 0;

    if (**p != '.')
        return 0;
    (*p)++;
    if (**p < '0' || **p > '9')
        return -1;
    for (; **p >= '0' && **p <= '9'; (*p)++, n++) {
        if (n < 3)
            ms = ms * 10 + (**p - '0');
    }
    for (; n < 3; n++)
        ms *= 10;
    return ms;
}

/* The offset at *p ("Z", "+hh:mm", "-hh:mm") in minutes east; the string must end there. */
static err_t zone_minutes(const char *p, int *min)
{
    int sign, h, m;

    if ((*p == 'Z' || *p == 'z') && p[1] == '\0') {
        *min = 0;
        return ERR_OK;
    }
    if (*p != '+' && *p != '-')
        return ERR_INVAL;
    sign = *p++ == '-' ? -1 : 1;
    h = digits(&p, 2);
    if (h < 0 || h > 23 || *p++ != ':')
        return ERR_INVAL;
    m = digits(&p, 2);
    if (m < 0 || m > 59 || *p != '\0')
        return ERR_INVAL;
    *min = sign * (h * 60 + m);
    return ERR_OK;
}

static bool fields_valid(const int *v)
{
    return v[0] >= 1 && v[1] >= 1 && v[1] <= 12 && v[2] >= 1 && v[2] <= month_days(v[0], v[1]) &&
           v[3] <= 23 && v[4] <= 59 && v[5] <= 60;
}

/* "YYYY-MM-DDTHH:MM:SS" into v[0..5], *p past it. */
static err_t date_time(const char **p, int *v)
{
    static const char sep[] = "--T::";
    int i;

    for (i = 0; i < 6; i++) {
        v[i] = digits(p, i == 0 ? 4 : 2);
        if (v[i] < 0)
            return ERR_INVAL;
        if (i == 5)
            break;
        if (**p != sep[i] && !(i == 2 && **p == 't'))
            return ERR_INVAL;
        (*p)++;
    }
    return ERR_OK;
}

err_t histq_parse_time(const char *s, int64_t *ms)
{
    const char *p = s;
    int v[6], frac, zone;

    assert(s && ms);
    if (date_time(&p, v))
        return ERR_INVAL;
    frac = fraction_ms(&p);
    if (frac < 0 || zone_minutes(p, &zone) || !fields_valid(v))
        return ERR_INVAL;
    *ms = ((days_from_civil(v[0], v[1], v[2]) * 86400 + v[3] * 3600 + v[4] * 60 + v[5] -
            (int64_t)zone * 60) *
           1000) +
          frac;
    return ERR_OK;
}

void histq_format_time(int64_t ms, char *buf)
{
    int64_t sec = ms >= 0 ? ms / 1000 : (ms - 999) / 1000;
    time_t t = (time_t)sec;
    struct tm tm;

    assert(buf);
    if (!gmtime_r(&t, &tm)) {
        snprintf(buf, HISTQ_TIME_MAX, "1970-01-01T00:00:00.000Z");
        return;
    }
    snprintf(buf, HISTQ_TIME_MAX, "%04d-%02d-%02dT%02d:%02d:%02d.%03dZ", tm.tm_year + 1900,
             tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec, (int)(ms - sec * 1000));
}

/* ---- the parameters ---- */

static err_t time_param(const char *key, const char *v, int64_t *ms, struct error *e)
{
    if (histq_parse_time(v, ms))
        return errorf(e, ERR_INVAL,
                      "query %s=\"%.100s\" is not an RFC 3339 time (e.g. 2024-05-01T03:00:00Z)",
                      key, v);
    return ERR_OK;
}

static err_t window(const struct raw *r, struct histq *q, struct error *e)
{
    q->from_ms = INT64_MIN;
    q->to_ms = INT64_MAX;
    if (r->from && time_param("from", r->from, &q->from_ms, e))
        return ERR_INVAL;
    if (r->to && time_param("to", r->to, &q->to_ms, e))
        return ERR_INVAL;
    if (q->to_ms < q->from_ms)
        return errorf(e, ERR_INVAL, "query to=\"%.100s\" is before from=\"%.100s\"", r->to,
                      r->from);
    return ERR_OK;
}

static err_t names(const struct raw *r, struct error *e)
{
    if (r->resource && !names_is_resource_or_driver(r->resource))
        return errorf(e, ERR_INVAL, "query resource=\"%.200s\" is not a valid resource name",
                      r->resource);
    if (r->device && !names_is_device_name(r->device))
        return errorf(e, ERR_INVAL, "query device=\"%.200s\" is not a valid device name",
                      r->device);
    if (r->ns && !names_is_dns1123_label(r->ns))
        return errorf(e, ERR_INVAL, "query namespace=\"%.200s\" is not a valid namespace", r->ns);
    if (r->name && !names_is_dns1123_subdomain(r->name))
        return errorf(e, ERR_INVAL, "query name=\"%.200s\" is not a valid pod name", r->name);
    return ERR_OK;
}

/* An unsigned decimal number without sign or leading junk, at most 'max'. */
static bool number(const char *s, uint64_t max, uint64_t *v)
{
    char *end;

    if (*s < '0' || *s > '9')
        return false;
    errno = 0;
    *v = strtoull(s, &end, 10);
    return errno == 0 && *end == '\0' && *v <= max;
}

static err_t paging(const struct raw *r, struct histq *q, struct error *e)
{
    uint64_t v;

    q->limit = HISTQ_LIMIT_DEFAULT;
    q->after = 0;
    if (r->limit && (!number(r->limit, HISTQ_LIMIT_MAX, &v) || v == 0))
        return errorf(e, ERR_INVAL, "query limit=\"%.100s\" must be a number from 1 to %d",
                      r->limit, HISTQ_LIMIT_MAX);
    if (r->limit)
        q->limit = (size_t)v;
    if (r->cont && !number(r->cont, INT64_MAX, &q->after))
        return errorf(e, ERR_INVAL, "query continue=\"%.100s\" is not a token this server gave",
                      r->cont);
    return ERR_OK;
}

/* at= answers one interval a device: no window, no pages. */
static err_t at_alone(const struct raw *r, struct error *e)
{
    const char *other = r->from ? "from" : r->to ? "to" : r->limit ? "limit" : "continue";

    if (r->from || r->to || r->limit || r->cont)
        return errorf(e, ERR_INVAL, "query %s does not go with at=", other);
    return ERR_OK;
}

/* Which of device, namespace&name and at selects the intervals. */
static err_t selector(const struct raw *r, struct histq *q, struct error *e)
{
    int n = (r->device != NULL) + (r->ns || r->name) + (r->at != NULL);

    if (n != 1)
        return errorf(e, ERR_INVAL,
                      "query needs exactly one of device=ID, namespace=NS&name=POD or "
                      "at=TIME");
    if ((r->ns != NULL) != (r->name != NULL))
        return errorf(e, ERR_INVAL, "query %s needs %s too", r->ns ? "namespace" : "name",
                      r->ns ? "name" : "namespace");
    q->sel = r->device ? HISTQ_DEVICE : r->ns ? HISTQ_POD : HISTQ_AT;
    if (r->resource && q->sel == HISTQ_POD)
        return errorf(e, ERR_INVAL, "query resource is for device= and at= queries");
    return q->sel == HISTQ_AT ? at_alone(r, e) : ERR_OK;
}

static err_t kind(const struct raw *r, struct histq *q, struct error *e)
{
    q->health = false;
    if (!r->kind || strcmp(r->kind, "binding") == 0)
        return ERR_OK;
    if (strcmp(r->kind, "health") != 0)
        return errorf(e, ERR_INVAL, "query kind=\"%.100s\" must be binding or health", r->kind);
    if (q->sel != HISTQ_DEVICE)
        return errorf(e, ERR_INVAL, "query kind=health needs device=ID");
    q->health = true;
    return ERR_OK;
}

static err_t history(const struct raw *r, struct histq *q, struct error *e)
{
    if (selector(r, q, e) || kind(r, q, e) || window(r, q, e))
        return ERR_INVAL;
    if (r->at && time_param("at", r->at, &q->at_ms, e))
        return ERR_INVAL;
    return paging(r, q, e);
}

static err_t usage_of(const struct raw *r, struct histq *q, struct error *e)
{
    if (!r->from || !r->to)
        return errorf(e, ERR_INVAL, "query %s=TIME is required", r->from ? "to" : "from");
    if (!r->by || strcmp(r->by, "namespace") == 0)
        q->by = HISTQ_BY_NAMESPACE;
    else if (strcmp(r->by, "pod") == 0)
        q->by = HISTQ_BY_POD;
    else if (strcmp(r->by, "device") == 0)
        q->by = HISTQ_BY_DEVICE;
    else
        return errorf(e, ERR_INVAL, "query by=\"%.100s\" must be namespace, pod or device", r->by);
    return window(r, q, e);
}

err_t histq_parse(const char *const *keys, const char *const *vals, size_t n, bool usage,
                  struct histq *q, struct error *e)
{
    struct raw r = {0};
    struct histq t = {0};
    err_t rc;

    assert(q);
    assert(n == 0 || (keys && vals));
    rc = collect(keys, vals, n, usage ? U : H, &r, e);
    if (rc)
        return rc;
    rc = names(&r, e);
    if (rc)
        return rc;
    rc = usage ? usage_of(&r, &t, e) : history(&r, &t, e);
    if (rc)
        return rc;
    t.resource = r.resource;
    t.device = r.device;
    t.ns = r.ns;
    t.name = r.name;
    *q = t;
    return ERR_OK;
}
