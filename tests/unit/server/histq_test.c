/* SPDX-License-Identifier: Apache-2.0 */
/* histq_test.c - the /v1/history and /v1/usage parameters and RFC 3339
 * times, through histq.h. */
#include "../../../common/common.h"
#include "../../../server/histq.h"
#include "../test.h"

static void test_time(void)
{
    char buf[HISTQ_TIME_MAX];
    int64_t ms = 7;

    CHECK_OK(histq_parse_time("1970-01-01T00:00:00Z", &ms));
    CHECK_EQ_INT(ms, 0);
    CHECK_OK(histq_parse_time("2024-05-01T03:00:00.123Z", &ms));
    CHECK_EQ_INT(ms, 1714532400123LL);
    CHECK_OK(histq_parse_time("2024-05-01t05:00:00.1234567+02:00", &ms));
    CHECK_EQ_INT(ms, 1714532400123LL);
    CHECK_OK(histq_parse_time("2024-02-29T00:00:00-00:30", &ms));
    CHECK_EQ_INT(ms, 1709166600000LL);
    CHECK_OK(histq_parse_time("1969-12-31T23:59:59.5Z", &ms));
    CHECK_EQ_INT(ms, -500);
    histq_format_time(-500, buf);
    CHECK_STREQ(buf, "1969-12-31T23:59:59.500Z");
    histq_format_time(1714532400123LL, buf);
    CHECK_STREQ(buf, "2024-05-01T03:00:00.123Z");
    ms = 7;
    CHECK_EQ_INT(histq_parse_time("2023-02-29T00:00:00Z", &ms), ERR_INVAL);
    CHECK_EQ_INT(histq_parse_time("2024-05-01T03:00:00", &ms), ERR_INVAL);
    CHECK_EQ_INT(histq_parse_time("2024-05-01 03:00:00Z", &ms), ERR_INVAL);
    CHECK_EQ_INT(histq_parse_time("2024-05-01T24:00:00Z", &ms), ERR_INVAL);
    CHECK_EQ_INT(histq_parse_time("2024-05-01T03:00:00.Z", &ms), ERR_INVAL);
    CHECK_EQ_INT(histq_parse_time("2024-05-01T03:00:00+2:00", &ms), ERR_INVAL);
    CHECK_EQ_INT(histq_parse_time("2024-05-01T03:00:00Zjunk", &ms), ERR_INVAL);
    CHECK_EQ_INT(histq_parse_time("0000-01-01T00:00:00Z", &ms), ERR_INVAL);
    CHECK_EQ_INT(histq_parse_time("", &ms), ERR_INVAL);
    CHECK_EQ_INT(ms, 7); /* untouched on failure */
}

static err_t parse(const char *spec, bool usage, struct histq *q, struct error *e)
{
    static char copy[512];
    const char *keys[16], *vals[16];
    char *p, *amp, *eq;
    size_t n = 0;

    snprintf(copy, sizeof(copy), "%s", spec);
    for (p = copy; p && *p && n < 16; p = amp) {
        amp = strchr(p, '&');
        if (amp)
            *amp++ = '\0';
        eq = strchr(p, '=');
        if (eq)
            *eq++ = '\0';
        keys[n] = p;
        vals[n++] = eq;
    }
    memset(e, 0, sizeof(*e));
    return histq_parse(keys, vals, n, usage, q, e);
}

#define BAD(spec, usage, word)                                                                     \
    do {                                                                                           \
        CHECK_EQ_INT(parse(spec, usage, &q, &e), ERR_INVAL);                                       \
        CHECK(strstr(e.msg, word) != NULL);                                                        \
    } while (0)

static void test_history_params(void)
{
    struct histq q;
    struct error e;

    CHECK_OK(parse("device=gpu-0&resource=example.com/gpu&from=2024-05-01T00:00:00Z&limit=5&"
                   "continue=42",
                   false, &q, &e));
    CHECK_EQ_INT(q.sel, HISTQ_DEVICE);
    CHECK_STREQ(q.device, "gpu-0");
    CHECK_STREQ(q.resource, "example.com/gpu");
    CHECK_EQ_INT(q.from_ms, 1714521600000LL);
    CHECK_EQ_INT(q.to_ms, INT64_MAX);
    CHECK_EQ_INT(q.limit, 5);
    CHECK_EQ_INT(q.after, 42);
    CHECK(!q.health);
    CHECK_OK(parse("namespace=ml&name=train-0", false, &q, &e));
    CHECK_EQ_INT(q.sel, HISTQ_POD);
    CHECK_EQ_INT(q.limit, HISTQ_LIMIT_DEFAULT);
    CHECK_EQ_INT(q.from_ms, INT64_MIN);
    CHECK_OK(parse("at=2024-05-01T00:00:00Z", false, &q, &e));
    CHECK_EQ_INT(q.sel, HISTQ_AT);
    CHECK_EQ_INT(q.at_ms, 1714521600000LL);
    CHECK_OK(parse("device=gpu-0&kind=health", false, &q, &e));
    CHECK(q.health);
    BAD("device=gpu-0&colour=red", false, "colour");
    BAD("device=gpu-0&device=gpu-1", false, "twice");
    BAD("device", false, "value");
    BAD("", false, "exactly one");
    BAD("device=gpu-0&at=2024-05-01T00:00:00Z", false, "exactly one");
    BAD("name=x", false, "namespace");
    BAD("device=gpu-0&from=2024-05-02T00:00:00Z&to=2024-05-01T00:00:00Z", false, "to=");
    BAD("device=gpu-0&from=monday", false, "from=");
    BAD("device=gpu-0&limit=10001", false, "limit");
    BAD("device=gpu-0&limit=-1", false, "limit");
    BAD("device=gpu-0&continue=1x", false, "continue");
    BAD("device=gpu 0", false, "device");
    BAD("namespace=ML&name=x", false, "namespace");
    BAD("at=2024-05-01T00:00:00Z&limit=3", false, "limit");
    BAD("namespace=ml&name=x&kind=health", false, "kind");
    BAD("device=gpu-0&kind=bindings", false, "kind");
    BAD("device=gpu-0&by=pod", false, "by");
}

static void test_usage_params(void)
{
    struct histq q;
    struct error e;

    CHECK_OK(parse("from=2024-05-01T00:00:00Z&to=2024-06-01T00:00:00Z", true, &q, &e));
    CHECK_EQ_INT(q.by, HISTQ_BY_NAMESPACE);
    CHECK_EQ_INT(q.to_ms - q.from_ms, 31LL * 86400000);
    CHECK_OK(parse("from=2024-05-01T00:00:00Z&to=2024-05-01T00:00:00Z&by=device&"
                   "resource=example.com/gpu",
                   true, &q, &e));
    CHECK_EQ_INT(q.by, HISTQ_BY_DEVICE);
    CHECK_OK(parse("from=2024-05-01T00:00:00Z&to=2024-05-02T00:00:00Z&by=pod", true, &q, &e));
    CHECK_EQ_INT(q.by, HISTQ_BY_POD);
    BAD("from=2024-05-01T00:00:00Z&to=2024-06-01T00:00:00Z&by=team", true, "by=");
    BAD("from=2024-05-01T00:00:00Z", true, "to=");
    BAD("to=2024-05-01T00:00:00Z", true, "from=");
    BAD("from=2024-05-02T00:00:00Z&to=2024-05-01T00:00:00Z", true, "to=");
    BAD("from=2024-05-01T00:00:00Z&to=2024-06-01T00:00:00Z&device=gpu-0", true, "device");
}

TEST_MAIN(test_time, test_history_params, test_usage_params)
