/* SPDX-License-Identifier: Apache-2.0 */
/* fuzz_histq.c - libFuzzer target for the query parameters of /v1/history
 * and /v1/usage and their RFC 3339 times (histq.h). The input is a query
 * string without '?': '&' separates parameters, the first '=' splits key
 * and value (none: a NULL value, as libmicrohttpd gives "?a"); the first
 * byte's low bit picks usage. Any input must give ERR_OK with a consistent
 * query or ERR_INVAL with a message; a time that parses formats back to a
 * time that parses to the same instant. */
#include "../../common/common.h"
#include "../../server/histq.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define MAXP 16

static void check_time(const char *s)
{
    char buf[HISTQ_TIME_MAX];
    int64_t ms, back;

    if (histq_parse_time(s, &ms))
        return;
    histq_format_time(ms, buf);
    if (ms >= 0 && ms < 253402300800000LL && (histq_parse_time(buf, &back) || back != ms))
        abort();
}

static void check_query(const struct histq *q, bool usage)
{
    if (q->to_ms < q->from_ms)
        abort();
    if (!usage && (q->limit < 1 || q->limit > HISTQ_LIMIT_MAX))
        abort();
    if (!usage && q->sel == HISTQ_DEVICE && !q->device)
        abort();
    if (!usage && q->sel == HISTQ_POD && (!q->ns || !q->name))
        abort();
    if (q->health && q->sel != HISTQ_DEVICE)
        abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const char *keys[MAXP], *vals[MAXP];
    char *buf, *p, *amp, *eq;
    struct error e = {0};
    struct histq q;
    size_t n = 0;
    bool usage;
    err_t rc;

    if (size < 1 || size > 4096)
        return 0;
    usage = data[0] & 1;
    buf = strndup((const char *)data + 1, size - 1);
    if (!buf)
        return 0;
    check_time(buf);
    for (p = buf; p && n < MAXP; p = amp) {
        amp = strchr(p, '&');
        if (amp)
            *amp++ = '\0';
        eq = strchr(p, '=');
        if (eq)
            *eq++ = '\0';
        keys[n] = p;
        vals[n++] = eq;
    }
    rc = histq_parse(keys, vals, n, usage, &q, &e);
    if (rc != ERR_OK && rc != ERR_INVAL)
        abort();
    if (rc == ERR_INVAL && !e.msg[0])
        abort();
    if (!rc)
        check_query(&q, usage);
    free(buf);
    return 0;
}
