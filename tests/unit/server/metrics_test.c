/* SPDX-License-Identifier: Apache-2.0 */
/* metrics_test.c - request counters and histograms through metrics.h. */
#include "../../../common/common.h"
#include "../../../server/metrics.h"
#include "../test.h"

static int has(const char *text, const char *line)
{
    char want[512];

    snprintf(want, sizeof(want), "%s\n", line);
    if (strstr(text, want))
        return 1;
    printf("# missing: %s\n", line);
    return 0;
}

static void test_render(void)
{
    struct metrics *m = metrics_new(2);
    char *buf = NULL;
    size_t len = 0, cap = 0;

    CHECK(m != NULL);
    metrics_set_label(m, 0, "GET", "/v1/pods");
    metrics_set_label(m, 1, "PUT", "/v1/namespaces/{ns}/pods/{name}");
    metrics_set_label(m, 2, "GET", "/nope"); /* the unmatched slot keeps its label */
    metrics_observe(m, 0, 200, 1000, 1);    /* 1 ms */
    metrics_observe(m, 0, 200, 20000, 1);   /* 20 ms */
    metrics_observe(m, 0, 404, 3000000, 1); /* 3 s: beyond every bucket */
    metrics_observe(m, 1, 200, 10, 0);      /* untimed (a stream) */
    metrics_observe(m, 2, 404, 100, 1);     /* unmatched */
    metrics_observe(m, 99, 500, 100, 1);    /* out of range: ignored */
    metrics_observe(NULL, 0, 200, 1, 1);    /* no-op */

    CHECK_OK(metrics_render(m, &buf, &len, &cap));
    CHECK(buf != NULL && len == strlen(buf) && cap > len);
    CHECK(has(buf, "# TYPE podresd_http_requests_total counter"));
    CHECK(has(buf, "podresd_http_requests_total{method=\"GET\",route=\"/v1/pods\",code=\"200\"} 2"));
    CHECK(has(buf, "podresd_http_requests_total{method=\"GET\",route=\"/v1/pods\",code=\"404\"} 1"));
    CHECK(has(buf, "podresd_http_requests_total{method=\"PUT\",route=\"/v1/namespaces/{ns}/pods/"
                   "{name}\",code=\"200\"} 1"));
    CHECK(has(buf, "podresd_http_requests_total{method=\"\",route=\"unmatched\",code=\"404\"} 1"));
    CHECK(strstr(buf, "code=\"500\"") == NULL);
    CHECK(has(buf, "# TYPE podresd_http_request_duration_seconds histogram"));
    CHECK(has(buf, "podresd_http_request_duration_seconds_bucket{method=\"GET\",route=\"/v1/pods\","
                   "le=\"0.0005\"} 0"));
    CHECK(has(buf, "podresd_http_request_duration_seconds_bucket{method=\"GET\",route=\"/v1/pods\","
                   "le=\"0.001\"} 1"));
    CHECK(has(buf, "podresd_http_request_duration_seconds_bucket{method=\"GET\",route=\"/v1/pods\","
                   "le=\"0.025\"} 2"));
    CHECK(has(buf, "podresd_http_request_duration_seconds_bucket{method=\"GET\",route=\"/v1/pods\","
                   "le=\"2.5\"} 2"));
    CHECK(has(buf, "podresd_http_request_duration_seconds_bucket{method=\"GET\",route=\"/v1/pods\","
                   "le=\"+Inf\"} 3"));
    CHECK(has(buf, "podresd_http_request_duration_seconds_sum{method=\"GET\",route=\"/v1/pods\"} "
                   "3.021000"));
    CHECK(has(buf, "podresd_http_request_duration_seconds_count{method=\"GET\",route=\"/v1/pods\"} "
                   "3"));
    CHECK(has(buf, "podresd_http_request_duration_seconds_count{method=\"\",route=\"unmatched\"} 1"));
    /* untimed requests are not in the histogram */
    CHECK(strstr(buf, "duration_seconds_count{method=\"PUT\"") == NULL);

    /* render appends */
    {
        size_t before = len;

        CHECK_OK(metrics_printf(&buf, &len, &cap, "extra_gauge %d\n", 7));
        CHECK_EQ_INT(len, before + strlen("extra_gauge 7\n"));
        CHECK(has(buf, "extra_gauge 7"));
    }
    free(buf);
    metrics_free(m);
    metrics_free(NULL);
}

static void test_printf_grows(void)
{
    char *buf = NULL, big[3000];
    size_t len = 0, cap = 0, i;

    memset(big, 'x', sizeof(big) - 1);
    big[sizeof(big) - 1] = '\0';
    for (i = 0; i < 10; i++)
        CHECK_OK(metrics_printf(&buf, &len, &cap, "%s\n", big));
    CHECK_EQ_INT(len, 10 * sizeof(big));
    CHECK(cap > len && buf[len] == '\0');
    CHECK_EQ_INT(strlen(buf), len);
    free(buf);
}

static void test_empty(void)
{
    struct metrics *m = metrics_new(0);
    char *buf = NULL;
    size_t len = 0, cap = 0;

    CHECK_OK(metrics_render(m, &buf, &len, &cap));
    CHECK(strstr(buf, "podresd_http_requests_total{") == NULL);
    CHECK(strstr(buf, "_bucket{") == NULL);
    free(buf);
    metrics_free(m);
}

TEST_MAIN(test_render, test_printf_grows, test_empty)
