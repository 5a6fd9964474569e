/* SPDX-License-Identifier: Apache-2.0 */
/* grpc_test.c - gRPC framing, grpc-status / grpc-message parsing from
 * headers and trailers, the receive limit, and a call to a missing socket.
 * Includes grpc.c to reach the curl callbacks. */
#include "../../../server/grpc.c"
#include "../test.h"

static void test_frame_roundtrip(void)
{
    const uint8_t msg[] = {0x0a, 0x01, 0x70};
    uint8_t *f = NULL;
    const uint8_t *m = NULL;
    size_t flen = 0, mlen = 0;
    struct error e = {0};

    CHECK_OK(grpc_frame(msg, sizeof(msg), &f, &flen));
    CHECK_EQ_INT(flen, 8);
    CHECK_EQ_INT(f[0], 0);
    CHECK_EQ_INT(f[4], 3);
    CHECK_OK(grpc_unframe(f, flen, 16, &m, &mlen, &e));
    CHECK_EQ_INT(mlen, 3);
    CHECK(m == f + 5);
    free(f);
    CHECK_OK(grpc_frame(NULL, 0, &f, &flen));
    CHECK_EQ_INT(flen, 5);
    CHECK_OK(grpc_unframe(f, flen, 0, &m, &mlen, &e));
    CHECK_EQ_INT(mlen, 0);
    free(f);
}

static void test_unframe_malformed(void)
{
    const uint8_t shortb[] = {0, 0, 0};
    const uint8_t compressed[] = {1, 0, 0, 0, 1, 7};
    const uint8_t truncated[] = {0, 0, 0, 0, 9, 1, 2};
    const uint8_t trailing[] = {0, 0, 0, 0, 1, 1, 0, 0, 0, 0, 0};
    const uint8_t huge[] = {0, 0xff, 0xff, 0xff, 0xff};
    const uint8_t *m = (const uint8_t *)"untouched";
    size_t mlen = 42;
    struct error e = {0};

    CHECK_EQ_INT(grpc_unframe(shortb, sizeof(shortb), 100, &m, &mlen, &e), ERR_INVAL);
    CHECK(strstr(e.msg, "prefix") != NULL);
    CHECK_EQ_INT(grpc_unframe(compressed, sizeof(compressed), 100, &m, &mlen, &e), ERR_INVAL);
    CHECK(strstr(e.msg, "compressed") != NULL);
    CHECK_EQ_INT(grpc_unframe(truncated, sizeof(truncated), 100, &m, &mlen, &e), ERR_INVAL);
    CHECK_EQ_INT(grpc_unframe(trailing, sizeof(trailing), 100, &m, &mlen, &e), ERR_INVAL);
    CHECK_EQ_INT(grpc_unframe(huge, sizeof(huge), 1 << 20, &m, &mlen, &e), ERR_INVAL);
    CHECK(strstr(e.msg, "over the limit") != NULL);
    CHECK_EQ_INT(grpc_unframe(NULL, 0, 100, &m, &mlen, &e), ERR_INVAL);
    CHECK_EQ_INT(mlen, 42);
    CHECK_STREQ((const char *)m, "untouched");
}

static void test_percent_decode(void)
{
    char out[64];

    grpc_percent_decode("too%20many%20requests", 21, out, sizeof(out));
    CHECK_STREQ(out, "too many requests");
    grpc_percent_decode("100%25 %E2%9C%93", 16, out, sizeof(out));
    CHECK_STREQ(out, "100% \xe2\x9c\x93");
    grpc_percent_decode("bad %zz and %4", 14, out, sizeof(out));
    CHECK_STREQ(out, "bad %zz and %4");
    grpc_percent_decode("%41%4", 5, out, sizeof(out));
    CHECK_STREQ(out, "A%4");
    grpc_percent_decode("abcdef", 6, out, 4);
    CHECK_STREQ(out, "abc");
}

/* Feed header lines as libcurl does (with CRLF). */
static void feed_lines(struct call *c, const char *const *lines)
{
    for (; *lines; lines++)
        on_header((char *)*lines, 1, strlen(*lines), c);
}

static void test_headers_and_trailers(void)
{
    static const char *const normal[] = {"HTTP/2 200\r\n", "content-type: application/grpc\r\n",
                                         "\r\n", "grpc-status: 0\r\n", NULL};
    static const char *const only[] = {"HTTP/2 200\r\n",
                                       "Content-Type: application/grpc+proto\r\n",
                                       "Grpc-Status: 8\r\n",
                                       "grpc-message: rejected%20by%20rate%20limit\r\n",
                                       "\r\n",
                                       NULL};
    static const char *const odd[] = {"content-type: application/grpcx\r\n", "grpc-status: 99\r\n",
                                      NULL};
    struct call c;

    memset(&c, 0, sizeof(c));
    feed_lines(&c, normal);
    CHECK(c.have_status);
    CHECK_EQ_INT(c.status, 0);
    CHECK(c.grpc_type);
    memset(&c, 0, sizeof(c));
    feed_lines(&c, only);
    CHECK_EQ_INT(c.status, GRPC_RESOURCE_EXHAUSTED);
    CHECK_STREQ(c.message, "rejected by rate limit");
    CHECK(c.grpc_type);
    memset(&c, 0, sizeof(c));
    feed_lines(&c, odd);
    CHECK(!c.grpc_type);
    CHECK_EQ_INT(c.status, GRPC_UNKNOWN);
    CHECK_EQ_INT(parse_status("14", 2), 14);
    CHECK_EQ_INT(parse_status("", 0), GRPC_UNKNOWN);
    CHECK_EQ_INT(parse_status("-1", 2), GRPC_UNKNOWN);
}

static void test_receive_limit(void)
{
    struct call c = {.limit = 10};
    char data[8] = "abcdefg";

    CHECK_EQ_INT(on_body(data, 1, 6, &c), 6);
    CHECK_EQ_INT(on_body(data, 1, 6, &c), 0);
    CHECK(c.too_large);
    CHECK_EQ_INT(c.len, 6);
    free(c.body);
}

static void test_http_mapping(void)
{
    CHECK_EQ_INT(grpc_code_of_http(404), GRPC_UNIMPLEMENTED);
    CHECK_EQ_INT(grpc_code_of_http(503), GRPC_UNAVAILABLE);
    CHECK_EQ_INT(grpc_code_of_http(429), GRPC_UNAVAILABLE);
    CHECK_EQ_INT(grpc_code_of_http(500), GRPC_UNKNOWN);
}

static void test_missing_socket(void)
{
    struct grpc_opts o = {
        .socket_path = "/nonexistent/kubelet.sock", .timeout_ms = 1000, .max_recv = 1024};
    struct grpc *g = grpc_new(&o);
    struct grpc_status st;
    uint8_t *resp = NULL;
    size_t len = 0;

    CHECK(g != NULL);
    CHECK_EQ_INT(grpc_call(g, "/v1.PodResourcesLister/List", NULL, 0, &resp, &len, &st),
                 ERR_UPSTREAM);
    CHECK(st.no_socket);
    CHECK_EQ_INT(st.code, GRPC_UNAVAILABLE);
    CHECK(strstr(st.message, "No such file") != NULL);
    CHECK(resp == NULL);
    grpc_free(g);
    grpc_free(NULL);
}

TEST_MAIN(test_frame_roundtrip, test_unframe_malformed, test_percent_decode,
          test_headers_and_trailers, test_receive_limit, test_http_mapping, test_missing_socket)
