/* SPDX-License-Identifier: Apache-2.0 */
/* prom_test.c - Prometheus text lines through common/prom.h. */
#include "../../../common/common.h"
#include "../../../common/prom.h"
#include "../test.h"

static void test_help_and_samples(void)
{
    struct strbuf sb = STRBUF_INIT;
    struct prom p = PROM_INIT(&sb);

    prom_help(&p, "x_total", "counter", "Things.");
    prom_sample(&p, "x_total", NULL, "%llu", 7ULL);
    prom_sample(&p, "x_total", (const char *const[]){NULL}, "%d", 0);
    prom_sample(&p, "x_total", (const char *const[]){"a", "1", "b", NULL, NULL}, "%.15g", 2.5);
    prom_sample(&p, "x_total", (const char *const[]){"v", "q\"b\\s\nl", NULL}, "%zu", (size_t)3);
    prom_metric(&p, "y", "gauge", "One.", "%d", -1);
    CHECK_OK(p.rc);
    CHECK_STREQ(sb.buf, "# HELP x_total Things.\n"
                        "# TYPE x_total counter\n"
                        "x_total 7\n"
                        "x_total 0\n"
                        "x_total{a=\"1\",b=\"\"} 2.5\n"
                        "x_total{v=\"q\\\"b\\\\s\\nl\"} 3\n"
                        "# HELP y One.\n"
                        "# TYPE y gauge\n"
                        "y -1\n");
    strbuf_release(&sb);
}

static void test_histogram(void)
{
    static const double bounds[] = {0.01, 0.1, 1};
    struct strbuf sb = STRBUF_INIT;
    struct prom p = PROM_INIT(&sb);
    struct prom_hist h;

    prom_hist_init(&h, bounds, ARRAY_SIZE(bounds));
    prom_hist_observe(&h, 0.01); /* a bound is in its own bucket */
    prom_hist_observe(&h, 0.05);
    prom_hist_observe(&h, 0.07);
    prom_hist_observe(&h, 3); /* above every bound: +Inf only */
    CHECK_EQ_INT(h.count, 4);
    prom_hist_render(&p, "lat_seconds", NULL, &h);
    prom_hist_render(&p, "lat_seconds", (const char *const[]){"verb", "bind", NULL}, &h);
    CHECK_OK(p.rc);
    CHECK_STREQ(sb.buf, "lat_seconds_bucket{le=\"0.01\"} 1\n"
                        "lat_seconds_bucket{le=\"0.1\"} 3\n"
                        "lat_seconds_bucket{le=\"1\"} 3\n"
                        "lat_seconds_bucket{le=\"+Inf\"} 4\n"
                        "lat_seconds_sum 3.130000\n"
                        "lat_seconds_count 4\n"
                        "lat_seconds_bucket{verb=\"bind\",le=\"0.01\"} 1\n"
                        "lat_seconds_bucket{verb=\"bind\",le=\"0.1\"} 3\n"
                        "lat_seconds_bucket{verb=\"bind\",le=\"1\"} 3\n"
                        "lat_seconds_bucket{verb=\"bind\",le=\"+Inf\"} 4\n"
                        "lat_seconds_sum{verb=\"bind\"} 3.130000\n"
                        "lat_seconds_count{verb=\"bind\"} 4\n");
    strbuf_release(&sb);
}

/* The latency bounds print as the exposition has always spelled them. */
static void test_latency_bounds(void)
{
    struct strbuf sb = STRBUF_INIT;
    struct prom p = PROM_INIT(&sb);
    struct prom_hist h;

    prom_hist_init(&h, prom_latency_bounds, PROM_LATENCY_BUCKETS);
    prom_hist_render(&p, "l", NULL, &h);
    CHECK_OK(p.rc);
    CHECK(strstr(sb.buf, "l_bucket{le=\"0.0005\"} 0\nl_bucket{le=\"0.001\"} 0\n"
                         "l_bucket{le=\"0.0025\"} 0\n") != NULL);
    CHECK(strstr(sb.buf, "l_bucket{le=\"2.5\"} 0\nl_bucket{le=\"+Inf\"} 0\n") != NULL);
    strbuf_release(&sb);
}

/* A long value is cut, not overrun; a failure sticks. */
static void test_limits(void)
{
    struct strbuf sb = STRBUF_INIT;
    struct prom p = PROM_INIT(&sb);
    char big[300];

    memset(big, '9', sizeof(big) - 1);
    big[sizeof(big) - 1] = '\0';
    prom_sample(&p, "v", NULL, "%s", big);
    CHECK_OK(p.rc);
    CHECK_EQ_INT(sb.len, 1 + 1 + 125 + 1);
    CHECK(sb.buf[sb.len - 1] == '\n');
    p.rc = ERR_NOMEM;
    prom_sample(&p, "w", NULL, "%d", 1);
    CHECK_EQ_INT(sb.len, 1 + 1 + 125 + 1);
    CHECK_EQ_INT(p.rc, ERR_NOMEM);
    strbuf_release(&sb);
}

TEST_MAIN(test_help_and_samples, test_histogram, test_latency_bounds, test_limits)
