/* SPDX-License-Identifier: Apache-2.0 */
/* rest_test.c - the REST client through kube/rest.h: query escaping, the
 * gate (token bucket, stop), retries with Retry-After, status mapping and
 * NDJSON streams, against a tiny HTTP responder thread in this process
 * (one connection at a time, Connection: close, canned answers). rest.c
 * is included to feed its static on_body() a stream in small pieces. */
#include "../../../kube/rest.c"
#include "../test.h"
#include "responder.h"

#include <arpa/inet.h>
#include <curl/curl.h>
#include <dlfcn.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define CHECK_HAS(msg, part)                                                                       \
    TEST_REPORT(strstr((msg), (part)) != NULL, "\"%s\" lacks \"%s\"", (msg), (part))

static void sleep_ms(long ms)
{
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};

    nanosleep(&ts, NULL);
}

/* A client of http://127.0.0.1:port. */
struct client {
    char server[64];      /* the URL */
    struct kubeconfig kc; /* with only 'server' */
    struct rest_opts o;   /* options */
    struct rest *k;       /* the client */
};

static void client_new(struct client *c, int port, struct rest_gate *g, struct rest_stats *st,
                       int attempts)
{
    memset(c, 0, sizeof(*c));
    snprintf(c->server, sizeof(c->server), "http://127.0.0.1:%d", port);
    c->kc.server = c->server;
    c->o.kc = &c->kc;
    c->o.gate = g;
    c->o.stats = st;
    c->o.max_attempts = attempts;
    c->k = rest_new(&c->o);
    CHECK(c->k != NULL);
}

#define JSON_200(body)                                                                             \
    "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nConnection: "                            \
    "close\r\n\r\n" body
#define STATUS(code, text, message)                                                                \
    "HTTP/1.1 " #code " " text "\r\nContent-Type: application/json\r\nConnection: close\r\n\r\n"   \
    "{\"kind\":\"Status\",\"apiVersion\":\"v1\",\"status\":\"Failure\","                           \
    "\"message\":\"" message "\",\"code\":" #code "}\n"

/* ---- tests ---- */

/* rest_global_init starts libcurl without OpenSSL: libssh2 is initialised
 * first without its crypto, and the GnuTLS build of libcurl does not start
 * OpenSSL either. libssh2's OpenSSL initialisation, or OpenSSL's libcurl,
 * loads OpenSSL's built-in engines: ENGINE_get_first() then finds one. */
static void test_setup(void)
{
    void *p, *(*engine_first)(void);

    CHECK_OK(rest_global_init());
    p = dlsym(RTLD_DEFAULT, "ENGINE_get_first");
    CHECK(p != NULL); /* libcrypto is loaded (libssh2's dependency) */
    if (p) {
        memcpy(&engine_first, &p, sizeof(p));
        CHECK(engine_first() == NULL);
    }
}

static void test_escape(void)
{
    char out[128], small[8];

    rest_escape("podres.dev/node=n-1_x~", out, sizeof(out));
    CHECK_STREQ(out, "podres.dev%2Fnode%3Dn-1_x~");
    rest_escape("a b&c?d+e,f", out, sizeof(out));
    CHECK_STREQ(out, "a%20b%26c%3Fd%2Be%2Cf");
    rest_escape("\xc3\xa9%", out, sizeof(out));
    CHECK_STREQ(out, "%C3%A9%25");
    rest_escape("", out, sizeof(out));
    CHECK_STREQ(out, "");

    /* truncation: NUL-terminated, within cap, never half an escape */
    memset(small, 'Z', sizeof(small));
    rest_escape("////////", small, sizeof(small));
    CHECK(memchr(small, '\0', sizeof(small)) != NULL);
    CHECK_STREQ(small, "%2F%2F");
    rest_escape("abcdefghijkl", small, sizeof(small));
    CHECK(strlen(small) < sizeof(small));
    CHECK(strncmp("abcdefghijkl", small, strlen(small)) == 0);
}

static void test_gate_sleep_stop(void)
{
    struct rest_gate *g = rest_gate_new(0, 0);
    uint64_t t0;

    CHECK(g != NULL);
    CHECK(!rest_gate_stopped(g));
    CHECK(!rest_gate_stopped(NULL));
    t0 = clock_mono_ms();
    CHECK(rest_gate_sleep(g, 60));
    CHECK(clock_mono_ms() - t0 >= 59);
    CHECK(rest_gate_sleep(NULL, 1));
    rest_gate_stop(g);
    CHECK(rest_gate_stopped(g));
    t0 = clock_mono_ms();
    CHECK(!rest_gate_sleep(g, 10000));
    CHECK(clock_mono_ms() - t0 < 500);
    rest_gate_free(g);
    rest_gate_free(NULL);
}

static void *stop_later(void *arg)
{
    sleep_ms(80);
    rest_gate_stop(arg);
    return NULL;
}

static void test_gate_stop_wakes_sleeper(void)
{
    struct rest_gate *g = rest_gate_new(10, 1);
    pthread_t th;
    uint64_t t0 = clock_mono_ms(), el;

    CHECK_OK(pthread_create(&th, NULL, stop_later, g));
    CHECK(!rest_gate_sleep(g, 20000));
    el = clock_mono_ms() - t0;
    pthread_join(th, NULL);
    CHECK(el >= 70);
    CHECK(el < 2000);
    rest_gate_free(g);
}

static void test_stopped_gate_sends_nothing(void)
{
    struct rest_gate *g = rest_gate_new(0, 0);
    struct client c;
    struct error err = {0};
    json_t *out = json_true();

    client_new(&c, 1, g, NULL, 2);
    rest_gate_stop(g);
    CHECK_EQ_INT(rest_do(c.k, "GET", "/api/v1/pods", NULL, NULL, &out, &err), ERR_UNAVAIL);
    CHECK(out == json_true());
    CHECK_EQ_INT(rest_stream(c.k, "/api/v1/pods?watch=true", NULL, NULL, &err), ERR_OK);
    rest_free(c.k);
    rest_gate_free(g);
}

static void test_token_bucket(void)
{
    const struct reply ok = {JSON_200("{}"), NULL, 0};
    const struct reply r[4] = {ok, ok, ok, ok};
    struct responder s;
    struct rest_gate *g;
    struct client c;
    struct error err = {0};
    json_t *out;
    uint64_t t0;
    int i, fails = 0;

    responder_start(&s, r, 4);
    t0 = clock_mono_ms();
    g = rest_gate_new(20, 2); /* 2 at once, then one per 50 ms */
    client_new(&c, s.port, g, NULL, 1);
    for (i = 0; i < 4; i++) {
        out = NULL;
        if (rest_do(c.k, "GET", "/x", NULL, NULL, &out, &err))
            fails++;
        json_decref(out);
    }
    responder_stop(&s);
    CHECK_EQ_INT(fails, 0);
    CHECK_EQ_INT(s.served, 4);
    CHECK(s.arrived_ms[2] - t0 >= 45); /* the third waited for a token */
    CHECK(s.arrived_ms[3] - t0 >= 95); /* the fourth for another */
    CHECK(s.arrived_ms[3] - t0 < 3000);
    rest_free(c.k);
    rest_gate_free(g);
}

static void test_refused_retries(void)
{
    struct rest_gate *g = rest_gate_new(0, 0);
    struct rest_stats *st = rest_stats_new();
    struct strbuf sb = STRBUF_INIT;
    struct client c;
    struct error err = {0};
    json_t *out = json_true();
    uint64_t t0 = clock_mono_ms();

    client_new(&c, 1, g, st, 3);
    CHECK_EQ_INT(rest_do(c.k, "GET", "/api/v1/pods", NULL, NULL, &out, &err), ERR_UPSTREAM);
    CHECK(out == json_true());
    CHECK(err.msg[0] != '\0');
    CHECK(clock_mono_ms() - t0 >= 190); /* backed off at least once between tries */
    CHECK(clock_mono_ms() - t0 < 10000);
    CHECK_OK(rest_stats_render(st, &sb));
    CHECK(sb.buf != NULL);
    if (sb.buf) {
        CHECK_HAS(sb.buf, "# TYPE podres_syncer_api_retries_total counter");
        CHECK_HAS(sb.buf, "podres_syncer_api_retries_total 2\n");
        CHECK_HAS(sb.buf, "podres_syncer_api_requests_total{verb=\"GET\",code=\"0\"} 3\n");
    }
    strbuf_release(&sb);
    rest_free(c.k);
    rest_stats_free(st);
    rest_gate_free(g);
}

static void test_retry_after(void)
{
    const struct reply r[2] = {
        {"HTTP/1.1 429 Too Many Requests\r\nRetry-After: 1\r\nContent-Type: "
         "application/json\r\n"
         "Connection: close\r\n\r\n{\"kind\":\"Status\",\"message\":\"slow "
         "down\",\"code\":429}",
         NULL, 0},
        {JSON_200("{\"kind\":\"Pod\",\"metadata\":{\"name\":\"p\"}}"), NULL, 0},
    };
    struct rest_gate *g = rest_gate_new(0, 0);
    struct rest_stats *st = rest_stats_new();
    struct strbuf sb = STRBUF_INIT;
    struct responder s;
    struct client c;
    struct error err = {0};
    json_t *out = NULL;

    responder_start(&s, r, 2);
    client_new(&c, s.port, g, st, 4);
    CHECK_OK(rest_do(c.k, "GET", "/api/v1/namespaces/d/pods/p", NULL, NULL, &out, &err));
    responder_stop(&s);
    CHECK_EQ_INT(s.served, 2);
    CHECK(s.arrived_ms[1] >= s.sent_ms[0] + 990); /* Retry-After: 1 honoured */
    CHECK(s.arrived_ms[1] < s.sent_ms[0] + 5000);
    CHECK_STREQ(json_string_value(json_object_get(json_object_get(out, "metadata"), "name")), "p");
    CHECK(strncmp(s.req[0], "GET /api/v1/namespaces/d/pods/p HTTP/1.1\r\n", 42) == 0);
    CHECK_HAS(s.req[1], "Accept: application/json");
    json_decref(out);
    CHECK_OK(rest_stats_render(st, &sb));
    if (sb.buf) {
        CHECK_HAS(sb.buf, "podres_syncer_api_retries_total 1\n");
        CHECK_HAS(sb.buf, "podres_syncer_api_requests_total{verb=\"GET\",code=\"429\"} 1\n");
        CHECK_HAS(sb.buf, "podres_syncer_api_requests_total{verb=\"GET\",code=\"200\"} 1\n");
    }
    strbuf_release(&sb);
    rest_free(c.k);
    rest_stats_free(st);
    rest_gate_free(g);
}

/* One request answered by 'reply'; the code rest_do returned and 'e'. */
static err_t one(const char *reply, const char *method, const json_t *body, const char *ctype,
                 json_t **out, struct error *e, char *req, size_t reqcap)
{
    const struct reply r = {reply, NULL, 0};
    struct responder s;
    struct client c;
    err_t rc;

    responder_start(&s, &r, 1);
    client_new(&c, s.port, NULL, NULL, 1);
    rc = rest_do(c.k, method, "/apis/podres.dev/v1alpha1/namespaces/d/devicebindings/b", body,
                 ctype, out, e);
    responder_stop(&s);
    if (req)
        snprintf(req, reqcap, "%s", s.req[0]);
    rest_free(c.k);
    return rc;
}

static void test_status_mapping(void)
{
    static const struct {
        const char *reply; /* canned answer */
        err_t want;        /* rest_do's answer */
        const char *msg;   /* part of msg */
    } cases[] = {
        {STATUS(404, "Not Found", "devicebindings \\\"b\\\" not found"), ERR_NOTFOUND,
         "devicebindings \"b\" not found"},
        {STATUS(409, "Conflict", "the object has been modified"), ERR_CONFLICT,
         "the object has been modified"},
        {STATUS(422, "Unprocessable Entity", "spec.nodeName: Required value"), ERR_UNPROCESSABLE,
         "spec.nodeName: Required value"},
        {STATUS(410, "Gone", "too old resource version"), ERR_GONE, "too old"},
        {STATUS(403, "Forbidden", "cannot get resource"), ERR_FORBIDDEN, "cannot get"},
        {STATUS(400, "Bad Request", "bad patch"), ERR_INVAL, "bad patch"},
        {STATUS(500, "Internal Server Error", "etcd is sad"), ERR_UPSTREAM, "etcd is sad"},
        {"HTTP/1.1 418 Teapot\r\nConnection: close\r\n\r\nshort and "
         "stout\nsecond line",
         ERR_INVAL, "HTTP 418: short and stout"},
    };
    size_t i;
    struct error err = {0};
    json_t *out;

    for (i = 0; i < ARRAY_SIZE(cases); i++) {
        out = json_true();
        err = (struct error){0};
        CHECK_EQ_INT(one(cases[i].reply, "GET", NULL, NULL, &out, &err, NULL, 0), cases[i].want);
        CHECK_HAS(err.msg, cases[i].msg);
        CHECK(out == json_true()); /* untouched on failure */
    }
}

static void test_bodies(void)
{
    char req[4096];
    struct error err = {0};
    json_t *body = json_pack("{s:{s:s}}", "metadata", "name", "b"), *out = NULL;

    /* POST sends the JSON with the default type */
    CHECK_OK(one(JSON_200("{\"ok\":true}"), "POST", body, NULL, &out, &err, req, sizeof(req)));
    CHECK(json_is_true(json_object_get(out, "ok")));
    json_decref(out);
    CHECK(strncmp(req, "POST /apis/podres.dev/", 22) == 0);
    CHECK_HAS(req, "Content-Type: application/json\r\n");
    CHECK_HAS(req, "\r\n\r\n{\"metadata\":{\"name\":\"b\"}}");

    /* PATCH with the caller's type */
    out = NULL;
    CHECK_OK(one(JSON_200("{}"), "PATCH", body, "application/merge-patch+json", &out, &err, req,
                 sizeof(req)));
    CHECK(strncmp(req, "PATCH ", 6) == 0);
    CHECK_HAS(req, "Content-Type: application/merge-patch+json\r\n");
    json_decref(out);

    /* an empty answer is null */
    out = NULL;
    CHECK_OK(one("HTTP/1.1 200 OK\r\nContent-Length: 0\r\nConnection: close\r\n\r\n", "DELETE",
                 NULL, NULL, &out, &err, req, sizeof(req)));
    CHECK(json_is_null(out));
    CHECK(strncmp(req, "DELETE ", 7) == 0);
    json_decref(out);

    /* a 200 that is not JSON */
    out = NULL;
    err = (struct error){0};
    CHECK_EQ_INT(one(JSON_200("<html>"), "GET", NULL, NULL, &out, &err, NULL, 0), ERR_UPSTREAM);
    CHECK_HAS(err.msg, "not JSON");
    json_decref(out);
    json_decref(body);
}

/* BUG (kube/rest.c, rest_do): on a 200 whose body is not JSON rest_do returns
 * ERR_UPSTREAM but has already stored json_loadb()'s NULL in *out, while
 * kube.h promises "*out untouched on failure". Left out of TEST_MAIN until
 * rest_do parses into a local first. */
static void test_bad_json_leaves_out(void)
{
    struct error err = {0};
    json_t *out = json_true();

    CHECK_EQ_INT(one(JSON_200("<html>"), "GET", NULL, NULL, &out, &err, NULL, 0), ERR_UPSTREAM);
    CHECK(out == json_true());
}

/* Stream lines seen by on_line. */
struct lines {
    int n;             /* calls */
    int stop_after;    /* return false after this many (0: never) */
    char names[8][32]; /* metadata.name of each */
    uint64_t at[8];    /* when each arrived */
};

static bool on_line(void *ctx, json_t *line)
{
    struct lines *l = ctx;
    const char *name = json_string_value(
        json_object_get(json_object_get(json_object_get(line, "object"), "metadata"), "name"));

    if (l->n < 8) {
        snprintf(l->names[l->n], sizeof(l->names[0]), "%s", name ? name : "?");
        l->at[l->n] = clock_mono_ms();
    }
    l->n++;
    return !(l->stop_after && l->n >= l->stop_after);
}

#define EV(type, name)                                                                             \
    "{\"type\":\"" type "\",\"object\":{\"metadata\":{\"name\":\"" name "\"}}}"                    \
    "\n"
#define STREAM_HEAD                                                                                \
    "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nConnection: "                            \
    "close\r\n\r\n"

/* Stream one canned answer; the result of rest_stream. */
static err_t stream(const struct reply *r, struct lines *l, struct error *e)
{
    struct rest_gate *g = rest_gate_new(0, 0);
    struct responder s;
    struct client c;
    err_t rc;

    responder_start(&s, r, 1);
    client_new(&c, s.port, g, NULL, 1);
    rc = rest_stream(c.k, "/api/v1/pods?watch=true", on_line, l, e);
    responder_stop(&s);
    CHECK_HAS(s.req[0], "GET /api/v1/pods?watch=true HTTP/1.1");
    rest_free(c.k);
    rest_gate_free(g);
    return rc;
}

static void test_stream(void)
{
    const struct reply lines = {STREAM_HEAD EV("ADDED", "a") EV("MODIFIED", "b"),
                                "\n" EV("DELETED", "c"), 200};
    const struct reply bad = {STREAM_HEAD EV("ADDED", "a") "not json\n" EV("ADDED", "z"), NULL, 0};
    const struct reply split = {STREAM_HEAD "{\"type\":\"ADDED\",\"object\":{\"meta",
                                "data\":{\"name\":\"s\"}}}\n", 100};
    struct lines l = {0};
    struct error err = {0};

    /* lines one by one, the last one after a pause; server end: ERR_OK */
    CHECK_OK(stream(&lines, &l, &err));
    CHECK_EQ_INT(l.n, 3);
    CHECK_STREQ(l.names[0], "a");
    CHECK_STREQ(l.names[1], "b");
    CHECK_STREQ(l.names[2], "c");
    CHECK(l.at[2] - l.at[0] >= 150); /* the first two were delivered before the pause */

    /* a line split across writes is delivered whole */
    memset(&l, 0, sizeof(l));
    CHECK_OK(stream(&split, &l, &err));
    CHECK_EQ_INT(l.n, 1);
    CHECK_STREQ(l.names[0], "s");

    /* fn returning false ends the stream: ERR_OK */
    memset(&l, 0, sizeof(l));
    l.stop_after = 1;
    CHECK_OK(stream(&lines, &l, &err));
    CHECK_EQ_INT(l.n, 1);

    /* a line that is not JSON: ERR_UPSTREAM, nothing after it */
    memset(&l, 0, sizeof(l));
    err = (struct error){0};
    CHECK_EQ_INT(stream(&bad, &l, &err), ERR_UPSTREAM);
    CHECK_EQ_INT(l.n, 1);
    CHECK_HAS(err.msg, "not JSON");
}

/* 'head' then 'n' bytes of an event line whose "pad" field fills it out,
 * the newline last when 'end'. New. */
static char *long_line(size_t n, bool end)
{
    static const char pre[] = "{\"type\":\"ADDED\",\"object\":{\"metadata\":{\"name\":\"big\"},"
                              "\"pad\":\"";
    size_t head = strlen(STREAM_HEAD), p = strlen(pre);
    char *s = malloc(head + n + 2);

    CHECK(s != NULL);
    memcpy(s, STREAM_HEAD, head);
    memcpy(s + head, pre, p);
    memset(s + head + p, 'x', n - p - 3);
    memcpy(s + head + n - 3, "\"}}", 3);
    s[head + n] = end ? '\n' : '\0';
    s[head + n + 1] = '\0';
    return s;
}

/* A line that never ends is dropped past 16 MiB, logged (not buffered to
 * the 64 MiB limit of an answer); a 15 MiB line is delivered. */
static void test_stream_long_line(void)
{
    struct reply r = {NULL, NULL, 0};
    struct lines l = {0};
    char *body;
    struct error err = {0};

    body = long_line(17u << 20, false);
    r.head = body;
    err = (struct error){0};
    CHECK_EQ_INT(stream(&r, &l, &err), ERR_UPSTREAM);
    CHECK_EQ_INT(l.n, 0);
    CHECK_HAS(err.msg, "longer than 16 MiB");
    free(body);

    body = long_line(15u << 20, true);
    r.head = body;
    memset(&l, 0, sizeof(l));
    CHECK_OK(stream(&r, &l, &err));
    CHECK_EQ_INT(l.n, 1);
    CHECK_STREQ(l.names[0], "big");
    free(body);
}

static bool count_line(void *ctx, json_t *line)
{
    (void)line;
    (*(int *)ctx)++;
    return true;
}

/* The bytes of a line are searched for its newline once, not again with
 * each piece that arrives: after every piece without the line's end, all
 * bytes held are known to hold no newline, so the next search starts at the
 * new piece (an 8 MiB line in 128-byte pieces would otherwise search 275 GB). */
static void test_stream_pieces(void)
{
    int lines = 0;
    struct xfer x = {.fn = count_line, .ctx = &lines, .status = 200};
    char *body = long_line(8u << 20, true), *p = body + strlen(STREAM_HEAD);
    size_t left = strlen(p), n, rescans = 0;

    while (left) {
        n = left < 128 ? left : 128;
        if (on_body(p, 1, n, &x) != n)
            break;
        if (!lines && x.scanned != x.len)
            rescans++;
        p += n;
        left -= n;
    }
    CHECK_EQ_INT(left, 0);
    CHECK_EQ_INT(lines, 1);
    CHECK_EQ_INT(x.len, 0);
    CHECK_EQ_INT(rescans, 0);
    free(x.body);
    free(body);
}

/* A newline inside bytes already searched is not looked for again: one
 * poked there after the first piece is skipped, and the line ends at the
 * newline of the second piece. */
static void test_stream_no_rescan(void)
{
    int lines = 0;
    struct xfer x = {.fn = count_line, .ctx = &lines, .status = 200};
    char first[] = "[1, ", second[] = "2]\n";

    CHECK_EQ_INT(on_body(first, 1, 4, &x), 4);
    CHECK_EQ_INT(x.scanned, 4);
    x.body[3] = '\n';
    CHECK_EQ_INT(on_body(second, 1, 3, &x), 3);
    CHECK_EQ_INT(lines, 1);
    CHECK(!x.bad_line);
    CHECK_EQ_INT(x.len, 0);
    free(x.body);
}

/* An error Status without a trailing newline is mapped, not delivered. */
static void test_stream_status(void)
{
    const struct reply gone = {"HTTP/1.1 410 Gone\r\nContent-Type: "
                               "application/json\r\nConnection: close\r\n\r\n"
                               "{\"kind\":\"Status\",\"message\":\"too old "
                               "resource version\",\"code\":410}",
                               NULL, 0};
    struct lines l = {0};
    struct error err = {0};

    err = (struct error){0};
    CHECK_EQ_INT(stream(&gone, &l, &err), ERR_GONE);
    CHECK_EQ_INT(l.n, 0);
    CHECK_HAS(err.msg, "too old resource version");
}

/* BUG (kube/rest.c: on_body/deliver_lines, rest_stream): the body of an
 * error answer is fed to the line callback as if it were a watch event when
 * it ends with a newline, as the API server's Status bodies do (Go's
 * json.Encoder appends one). 'fn' then sees the Status object, and the
 * consumed body leaves msg as a bare "HTTP 404". Left out of TEST_MAIN until
 * kube.c delivers lines only for a 2xx answer. */
static void test_stream_status_newline(void)
{
    const struct reply nf = {STATUS(404, "Not Found", "namespaces \\\"x\\\" not found"), NULL, 0};
    struct lines l = {0};
    struct error err = {0};

    err = (struct error){0};
    CHECK_EQ_INT(stream(&nf, &l, &err), ERR_NOTFOUND);
    CHECK_EQ_INT(l.n, 0);
    CHECK_HAS(err.msg, "namespaces \"x\" not found");
}

/* "Too large resource version" in each form client-go's reflector knows
 * (isTooLargeResourceVersionError), and nothing else. */
static void test_too_large(void)
{
    static const char *const yes[] = {
        /* 1.18.6 on, as kube-apiserver 1.36 sends it */
        "{\"kind\":\"Status\",\"status\":\"Failure\",\"message\":\"Timeout: Too large "
        "resource version: 5000, current: 100\",\"reason\":\"Timeout\",\"details\":{\"causes\":"
        "[{\"reason\":\"ResourceVersionTooLarge\",\"message\":\"Too large resource version\"}],"
        "\"retryAfterSeconds\":1},\"code\":504}",
        /* 1.17.0 to 1.18.5: the cause's message */
        "{\"reason\":\"Timeout\",\"message\":\"Timeout: x\",\"details\":{\"causes\":[{"
        "\"message\":\"Too large resource version\"}]},\"code\":504}",
        /* before: the message */
        "{\"reason\":\"Timeout\",\"message\":\"Too large resource version: 5, current: 3\"}",
    };
    static const char *const no[] = {
        "{\"reason\":\"Timeout\",\"message\":\"Timeout: request did not complete\",\"code\":504}",
        "{\"reason\":\"Expired\",\"message\":\"too old resource version: 1 (2)\",\"code\":410}",
        "{\"reason\":\"InternalError\",\"message\":\"Too large resource version\",\"details\":{"
        "\"causes\":[{\"message\":\"Too large resource version\"}]},\"code\":500}",
        "{\"details\":{\"causes\":\"ResourceVersionTooLarge\"}}",
        "[\"ResourceVersionTooLarge\"]",
    };
    json_t *v;
    size_t i;

    for (i = 0; i < ARRAY_SIZE(yes); i++) {
        v = json_loads(yes[i], 0, NULL);
        TEST_REPORT(v && rest_status_too_large(v), "not too large: %s", yes[i]);
        json_decref(v);
    }
    for (i = 0; i < ARRAY_SIZE(no); i++) {
        v = json_loads(no[i], 0, NULL);
        TEST_REPORT(v && !rest_status_too_large(v), "too large: %s", no[i]);
        json_decref(v);
    }
    CHECK(!rest_status_too_large(NULL));
}

/* rest_last_status: the answer of the last request that failed with a
 * status, as JSON; nothing after a success or a transport failure. */
static void test_last_status(void)
{
    const struct reply r[] = {
        {STATUS(404, "Not Found", "devicebindings \\\"b\\\" not found"), NULL, 0},
        {JSON_200("{}"), NULL, 0},
        {STATUS(504, "Gateway Timeout", "Timeout: Too large resource version: 9, current: 1"), NULL,
         0},
    };
    struct responder s;
    struct client c;
    struct lines l = {0};
    json_t *out = NULL;
    struct error err = {0};

    responder_start(&s, r, 3);
    client_new(&c, s.port, NULL, NULL, 1);
    CHECK(rest_last_status(c.k) == NULL);
    CHECK_EQ_INT(rest_do(c.k, "GET", "/x", NULL, NULL, &out, &err), ERR_NOTFOUND);
    CHECK_EQ_INT(json_integer_value(json_object_get(rest_last_status(c.k), "code")), 404);
    CHECK_OK(rest_do(c.k, "GET", "/x", NULL, NULL, &out, &err));
    json_decref(out);
    CHECK(rest_last_status(c.k) == NULL);
    CHECK_EQ_INT(rest_stream(c.k, "/x?watch=true", on_line, &l, &err), ERR_UPSTREAM);
    CHECK_EQ_INT(json_integer_value(json_object_get(rest_last_status(c.k), "code")), 504);
    CHECK_EQ_INT(l.n, 0);
    responder_stop(&s);
    rest_free(c.k);
}

static void test_cleanup(void)
{
    rest_global_cleanup();
}

TEST_MAIN(test_setup, test_escape, test_gate_sleep_stop, test_gate_stop_wakes_sleeper,
          test_stopped_gate_sends_nothing, test_token_bucket, test_refused_retries,
          test_retry_after, test_status_mapping, test_bodies, test_stream, test_stream_long_line,
          test_stream_pieces, test_stream_no_rescan, test_stream_status, test_stream_status_newline,
          test_bad_json_leaves_out, test_too_large, test_last_status, test_cleanup)
