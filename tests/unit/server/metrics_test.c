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
    struct strbuf sb = STRBUF_INIT;
    char *buf;
    size_t len;

    CHECK(m != NULL);
    metrics_set_label(m, 0, "GET", "/v1/pods");
    metrics_set_label(m, 1, "PUT", "/v1/namespaces/{ns}/pods/{name}");
    metrics_set_label(m, 2, "GET", "/nope"); /* the unmatched slot keeps its label */
    metrics_observe(m, 0, 200, 1000, 1);     /* 1 ms */
    metrics_observe(m, 0, 200, 20000, 1);    /* 20 ms */
    metrics_observe(m, 0, 404, 3000000, 1);  /* 3 s: beyond every bucket */
    metrics_observe(m, 1, 200, 10, 0);       /* untimed (a stream) */
    metrics_observe(m, 2, 404, 100, 1);      /* unmatched */
    metrics_observe(m, 99, 500, 100, 1);     /* out of range: ignored */
    metrics_observe(NULL, 0, 200, 1, 1);     /* no-op */

    CHECK_OK(metrics_render(m, &sb));
    buf = sb.buf;
    len = sb.len;
    CHECK(buf != NULL && len == strlen(buf) && sb.cap > len);
    CHECK(has(buf, "# TYPE podresd_http_requests_total counter"));
    CHECK(
        has(buf, "podresd_http_requests_total{method=\"GET\",route=\"/v1/pods\",code=\"200\"} 2"));
    CHECK(
        has(buf, "podresd_http_requests_total{method=\"GET\",route=\"/v1/pods\",code=\"404\"} 1"));
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
    CHECK(
        has(buf, "podresd_http_request_duration_seconds_count{method=\"\",route=\"unmatched\"} 1"));
    /* untimed requests are not in the histogram */
    CHECK(strstr(buf, "duration_seconds_count{method=\"PUT\"") == NULL);

    /* render appends */
    {
        size_t before = len;

        CHECK_OK(metrics_render(m, &sb));
        CHECK(sb.len > 2 * before - 10); /* appended, not replaced */
        CHECK(strncmp(sb.buf + before, "# HELP podresd_http_requests_total", 34) == 0);
    }
    strbuf_release(&sb);
    metrics_free(m);
    metrics_free(NULL);
}

static void test_empty(void)
{
    struct metrics *m = metrics_new(0);
    struct strbuf sb = STRBUF_INIT;

    CHECK_OK(metrics_render(m, &sb));
    CHECK(strstr(sb.buf, "podresd_http_requests_total{") == NULL);
    CHECK(strstr(sb.buf, "_bucket{") == NULL);
    strbuf_release(&sb);
    metrics_free(m);
}

TEST_MAIN(test_render, test_empty)
