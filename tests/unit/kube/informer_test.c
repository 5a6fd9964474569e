/* SPDX-License-Identifier: Apache-2.0 */
/* informer_test.c - list+watch against canned API server answers (a
 * responder thread in this process): where lists and watches start from,
 * what ends a watch in a relist, an API server whose state went back (a
 * watch answered "too large resource version", as an ERROR event or as an
 * HTTP 504; a list older than what was seen), and readiness. One step of
 * the informer's loop at a time: informer.c is included for step(). */
#include "../../../kube/informer.c"
#include "../test.h"
#include "responder.h"

#include <curl/curl.h>

#define CHECK_HAS(s, part)                                                                         \
    TEST_REPORT(strstr((s), (part)) != NULL, "\"%s\" lacks \"%s\"", (s), (part))
#define CHECK_LACKS(s, part)                                                                       \
    TEST_REPORT(strstr((s), (part)) == NULL, "\"%s\" has \"%s\"", (s), (part))

#define OBJ(name, rv)                                                                              \
    "{\"metadata\":{\"namespace\":\"ns\",\"name\":\"" name "\",\"resourceVersion\":\"" rv "\"}}"
#define LIST(rv, items)                                                                            \
    HEAD_200 "{\"kind\":\"DeviceBindingList\",\"metadata\":{\"resourceVersion\":\"" rv "\"},"      \
             "\"items\":[" items "]}"
#define EV(type, obj) "{\"type\":\"" type "\",\"object\":" obj "}\n"
#define BOOKMARK(rv) EV("BOOKMARK", "{\"metadata\":{\"resourceVersion\":\"" rv "\"}}")
/* The Status of k8s.io/apiserver's NewTooLargeResourceVersionError, as
 * kube-apiserver 1.36 sends it (storage.NewTooLargeResourceVersionError). */
#define TOO_LARGE                                                                                  \
    "{\"kind\":\"Status\",\"apiVersion\":\"v1\",\"metadata\":{},\"status\":\"Failure\","           \
    "\"message\":\"Timeout: Too large resource version: 5000, current: 100\",\"reason\":"          \
    "\"Timeout\",\"details\":{\"causes\":[{\"reason\":\"ResourceVersionTooLarge\",\"message\":"    \
    "\"Too large resource version\"}],\"retryAfterSeconds\":1},\"code\":504}"
#define EXPIRED                                                                                    \
    "{\"kind\":\"Status\",\"apiVersion\":\"v1\",\"metadata\":{},\"status\":\"Failure\","           \
    "\"message\":\"too old resource version: 4000 (4500)\",\"reason\":\"Expired\",\"code\":410}"

#define A OBJ("a", "4990")
#define B OBJ("b", "4991")
#define C OBJ("c", "90")

/* An informer of /apis/x/devicebindings?labelSelector=l on a responder. */
struct rig {
    struct responder srv; /* the API server */
    struct rest_gate *g;  /* no token bucket */
    char url[64];         /* http://127.0.0.1:PORT */
    struct kubeconfig kc; /* server only */
    struct informer inf;  /* the informer under test */
};

static void rig_start(struct rig *t, const struct reply *r, int n)
{
    struct rest_opts o = {.max_attempts = 1};

    memset(t, 0, sizeof(*t));
    responder_start(&t->srv, r, n);
    snprintf(t->url, sizeof(t->url), "http://127.0.0.1:%d", t->srv.port);
    t->kc.server = t->url;
    t->g = rest_gate_new(0, 0);
    o.kc = &t->kc;
    o.gate = t->g;
    t->inf = (struct informer){.name = "devicebindings",
                               .path = "/apis/x/devicebindings",
                               .query = "labelSelector=l",
                               .kube = rest_new(&o),
                               .gate = t->g,
                               .cache = cache_new(NULL, NULL)};
    CHECK(t->g && t->inf.kube && t->inf.cache);
}

static void rig_stop(struct rig *t)
{
    responder_stop(&t->srv);
    rest_free(t->inf.kube);
    cache_free(t->inf.cache);
    rest_gate_free(t->g);
}

/* The cache's keys, sorted, joined by ','. */
static void keys_of(struct cache *c, char *out, size_t cap)
{
    char **keys = cache_keys(c, NULL);
    const char *k[16];
    size_t i, j, n = 0;

    for (i = 0; keys && keys[i]; i++) {
        if (n < 16)
            k[n++] = keys[i];
    }
    for (i = 1; i < n; i++) {
        for (j = i; j > 0 && strcmp(k[j - 1], k[j]) > 0; j--) {
            const char *x = k[j];

            k[j] = k[j - 1];
            k[j - 1] = x;
        }
    }
    out[0] = '\0';
    for (i = 0; i < n; i++)
        snprintf(out + strlen(out), cap - strlen(out), "%s%s", i ? "," : "", k[i]);
    cache_keys_free(keys);
}

#define CHECK_KEYS(c, want)                                                                        \
    do {                                                                                           \
        char keys_[256];                                                                           \
        keys_of((c), keys_, sizeof(keys_));                                                        \
        CHECK_STREQ(keys_, (want));                                                                \
    } while (0)

static bool is_ready(struct informer *inf, uint64_t grace_ms, struct error *why)
{
    *why = (struct error){0};
    return informer_ready(inf, grace_ms, why);
}

/* The first list comes from the watch cache (resourceVersion=0); the watch
 * from the list's resourceVersion, with bookmarks. */
static void test_list_then_watch(void)
{
    const struct reply r[] = {
        {LIST("5000", A "," B), NULL, 0},
        {HEAD_200 EV("ADDED", OBJ("c", "5001")) BOOKMARK("5002"), NULL, 0},
    };
    struct rig t;
    struct error why;
    long timeout_s;

    rig_start(&t, r, 2);
    CHECK(!is_ready(&t.inf, 60000, &why));
    CHECK_STREQ(why.msg, "devicebindings informer not listed yet");
    CHECK(!informer_current(&t.inf));
    step(&t.inf);
    CHECK_HAS(t.srv.req[0],
              "GET /apis/x/devicebindings?labelSelector=l&resourceVersion=0 HTTP/1.1");
    CHECK(informer_current(&t.inf));
    CHECK_STREQ(t.inf.rv, "5000");
    CHECK(informer_synced(&t.inf));
    CHECK(is_ready(&t.inf, 60000, &why));
    CHECK_KEYS(t.inf.cache, "ns/a,ns/b");
    step(&t.inf);
    CHECK_HAS(t.srv.req[1], "GET /apis/x/devicebindings?labelSelector=l&watch=true&"
                            "allowWatchBookmarks=true&resourceVersion=5000&timeoutSeconds=");
    timeout_s = strtol(strstr(t.srv.req[1], "timeoutSeconds=") + 15, NULL, 10);
    CHECK(timeout_s >= 216 && timeout_s <= 264); /* 240 s give or take 10 % */
    CHECK_STREQ(t.inf.rv, "5002");
    CHECK_KEYS(t.inf.cache, "ns/a,ns/b,ns/c");
    rig_stop(&t);
}

/* After a watch that ran its full time (1 s here) with an event, the next
 * watch resumes; a watch cut short, or silent all along, is followed by a
 * consistent list. */
static void test_resume_or_relist(void)
{
    const struct reply r[] = {
        {LIST("5000", A), NULL, 0},            /* the first list */
        {HEAD_200 BOOKMARK("5001"), "", 1100}, /* a full watch, alive */
        {HEAD_200 BOOKMARK("5002"), NULL, 0},  /* ended at once */
        {LIST("5003", A), NULL, 0},            /* so: a list */
        {HEAD_200, "", 1100},                  /* a full watch, silent */
        {LIST("5004", A), NULL, 0},            /* so: a list */
    };
    struct rig t;

    rig_start(&t, r, 6);
    t.inf.timeout_s = 1;
    step(&t.inf);
    step(&t.inf);
    CHECK(!t.inf.relist);
    step(&t.inf); /* cut short: a list comes next */
    CHECK_HAS(t.srv.req[2], "&resourceVersion=5001&timeoutSeconds=1 ");
    CHECK(t.inf.relist);
    CHECK(informer_synced(&t.inf));   /* nothing known to be stale, */
    CHECK(!informer_current(&t.inf)); /* but perhaps behind */
    step(&t.inf);
    CHECK_HAS(t.srv.req[3], "GET /apis/x/devicebindings?labelSelector=l HTTP/1.1");
    CHECK(informer_current(&t.inf));
    step(&t.inf); /* silent: list again */
    step(&t.inf);
    CHECK_HAS(t.srv.req[5], "GET /apis/x/devicebindings?labelSelector=l HTTP/1.1");
    CHECK_STREQ(t.inf.rv, "5004");
    rig_stop(&t);
}

/* The reset seen through the watch, as the real API server may say it: an
 * ERROR event in a 200 stream, or the HTTP status itself. Either way: not
 * ready, no backoff, a consistent list, and a cache without what vanished. */
static void check_too_large(const struct reply *watch)
{
    const struct reply r[] = {
        {LIST("5000", A "," B), NULL, 0},
        *watch,
        {LIST("100", C), NULL, 0},
        {HEAD_200 BOOKMARK("101"), NULL, 0},
    };
    struct rig t;
    struct error why;
    uint64_t t0;

    rig_start(&t, r, 4);
    step(&t.inf);
    step(&t.inf);
    CHECK(!informer_synced(&t.inf));
    CHECK(!informer_current(&t.inf));
    CHECK(!is_ready(&t.inf, 60000, &why));
    CHECK_STREQ(why.msg,
                "devicebindings informer relisting after the API server's state was reset");
    CHECK(t.inf.reset_logged); /* "current: 100" said it: logged now */
    t0 = clock_mono_ms();
    t.inf.listed_ms = 0; /* the pace and spread of lists are not under test here */
    t.inf.relist_at_ms = 0;
    step(&t.inf);
    CHECK(clock_mono_ms() - t0 < 500); /* the gate did not back off */
    CHECK_HAS(t.srv.req[2], "GET /apis/x/devicebindings?labelSelector=l HTTP/1.1");
    CHECK_KEYS(t.inf.cache, "ns/c");
    CHECK_STREQ(t.inf.rv, "100");
    CHECK(informer_synced(&t.inf));
    CHECK(is_ready(&t.inf, 60000, &why));
    step(&t.inf);
    CHECK_HAS(t.srv.req[3], "&resourceVersion=100&");
    CHECK(!t.inf.reset_logged); /* the watch works: the next reset is news */
    rig_stop(&t);
}

static void test_too_large_event(void)
{
    const struct reply ev = {HEAD_200 "{\"type\":\"ERROR\",\"object\":" TOO_LARGE "}\n", NULL, 0};

    check_too_large(&ev);
}

static void test_too_large_http(void)
{
    const struct reply st = {"HTTP/1.1 504 Gateway Timeout\r\nContent-Type: application/json\r\n"
                             "Retry-After: 1\r\nConnection: close\r\n\r\n" TOO_LARGE "\n",
                             NULL, 0};

    check_too_large(&st);
}

/* A list older than the resourceVersion held (the watch had ended, as the
 * server's does when it restarts): taken, the cache exactly it. */
static void test_list_older(void)
{
    const struct reply r[] = {
        {LIST("5000", A "," B), NULL, 0},
        {HEAD_200 EV("MODIFIED", OBJ("b", "5001")), NULL, 0},
        {LIST("100", C), NULL, 0},
        {HEAD_200 BOOKMARK("101"), NULL, 0},
    };
    struct rig t;

    rig_start(&t, r, 4);
    step(&t.inf);
    step(&t.inf);
    CHECK(!t.inf.reset_logged);
    step(&t.inf);
    CHECK_HAS(t.srv.req[2], "GET /apis/x/devicebindings?labelSelector=l HTTP/1.1");
    CHECK(t.inf.reset_logged);
    CHECK_KEYS(t.inf.cache, "ns/c");
    CHECK_STREQ(t.inf.rv, "100");
    CHECK(informer_synced(&t.inf));
    step(&t.inf);
    CHECK_HAS(t.srv.req[3], "&resourceVersion=100&");
    rig_stop(&t);
}

/* 410, as an ERROR event or as the HTTP status: a consistent list; not
 * ready until it is in. */
static void test_expired(void)
{
    const struct reply r[] = {
        {LIST("5000", A), NULL, 0},
        {HEAD_200 "{\"type\":\"ERROR\",\"object\":" EXPIRED "}\n", NULL, 0},
        {LIST("5100", B), NULL, 0},
        {"HTTP/1.1 410 Gone\r\nContent-Type: application/json\r\nConnection: close\r\n\r\n" EXPIRED,
         NULL, 0},
        {LIST("5200", A), NULL, 0},
    };
    struct rig t;
    struct error why;
    uint64_t t0;
    int i;

    rig_start(&t, r, 5);
    step(&t.inf);
    for (i = 1; i < 5; i += 2) {
        step(&t.inf);
        CHECK(!is_ready(&t.inf, 60000, &why));
        CHECK_STREQ(why.msg, "devicebindings informer relisting after its watch expired");
        /* the list waits a random moment within 2 s, so nodes spread theirs */
        CHECK(t.inf.relist_at_ms && t.inf.relist_at_ms <= clock_mono_ms() + 2000);
        t0 = clock_mono_ms();
        step(&t.inf);
        /* a second after the list before: a server expiring every watch
         * is not asked in a loop */
        TEST_REPORT(clock_mono_ms() - t0 >= 900, "listed again after %llu ms",
                    (unsigned long long)(clock_mono_ms() - t0));
        CHECK_HAS(t.srv.req[i + 1], "GET /apis/x/devicebindings?labelSelector=l HTTP/1.1");
        CHECK(is_ready(&t.inf, 60000, &why));
    }
    CHECK_KEYS(t.inf.cache, "ns/a");
    CHECK(!t.inf.reset_logged); /* newer each time: no reset */
    rig_stop(&t);
}

/* Failing requests: ready within the grace, not after it. */
static void test_failing(void)
{
    const struct reply r[] = {{LIST("5000", A), NULL, 0}};
    struct rig t;
    struct error why;

    rig_start(&t, r, 1);
    step(&t.inf);
    responder_stop(&t.srv); /* nobody listens any more */
    step(&t.inf);           /* the watch: connection refused */
    CHECK(t.inf.relist);
    CHECK(informer_synced(&t.inf));
    CHECK(is_ready(&t.inf, 60000, &why));
    CHECK(!is_ready(&t.inf, 0, &why));
    CHECK_HAS(why.msg, "devicebindings informer failing for 0 s");
    step(&t.inf); /* the list fails too */
    CHECK(!is_ready(&t.inf, 0, &why));
    rest_free(t.inf.kube);
    cache_free(t.inf.cache);
    rest_gate_free(t.g);
}

/* --once lists consistently from the start: no watch follows to catch up. */
static void test_consistent_first_list(void)
{
    const struct reply r[] = {{LIST("5000", A), NULL, 0}};
    struct rig t;

    rig_start(&t, r, 1);
    t.inf.consistent = true;
    CHECK_OK(informer_list(&t.inf));
    CHECK_HAS(t.srv.req[0], "GET /apis/x/devicebindings?labelSelector=l HTTP/1.1");
    CHECK_KEYS(t.inf.cache, "ns/a");
    rig_stop(&t);
}

/* A list without a resourceVersion gives nothing to watch from: a failure. */
static void test_list_without_rv(void)
{
    const struct reply r[] = {{HEAD_200 "{\"kind\":\"List\",\"items\":[" A "]}", NULL, 0}};
    struct rig t;

    rig_start(&t, r, 1);
    CHECK_EQ_INT(informer_list(&t.inf), ERR_UPSTREAM);
    CHECK(!informer_synced(&t.inf));
    CHECK_EQ_INT(cache_size(t.inf.cache), 0);
    rig_stop(&t);
}

/* An answer that is no list (another kind, no string resourceVersion) is
 * an error: the cache keeps what it had, and the lists after it wait 1 s,
 * then 2 s, not once a second (a hot loop on a broken server). */
static void test_not_a_list(void)
{
    const struct reply r[] = {
        {LIST("100", A "," B), NULL, 0},
        {HEAD_200 "{\"kind\":\"Status\",\"apiVersion\":\"v1\",\"metadata\":{\"resourceVersion\":"
                  "\"120\"},\"status\":\"Success\"}",
         NULL, 0},
        {HEAD_200 "{\"kind\":\"DeviceBindingList\",\"metadata\":{\"resourceVersion\":7},"
                  "\"items\":[]}",
         NULL, 0},
        {HEAD_200 "{\"kind\":\"DeviceBindingList\",\"metadata\":{\"resourceVersion\":\"130\"}}",
         NULL, 0},
        {LIST("140", A), NULL, 0},
    };
    uint64_t t0;
    struct rig t;

    rig_start(&t, r, 5);
    CHECK_OK(informer_list(&t.inf));
    CHECK_KEYS(t.inf.cache, "ns/a,ns/b");
    t.inf.relist = true;
    t.inf.listed_ms = clock_mono_ms();
    t0 = clock_mono_ms();
    step(&t.inf); /* a Status: after the usual second */
    CHECK_KEYS(t.inf.cache, "ns/a,ns/b");
    CHECK_STREQ(t.inf.rv, "100");
    step(&t.inf); /* an integer resourceVersion: after 1 s more */
    CHECK_KEYS(t.inf.cache, "ns/a,ns/b");
    step(&t.inf); /* no items: after 2 s more */
    CHECK_KEYS(t.inf.cache, "ns/a,ns/b");
    CHECK(clock_mono_ms() - t0 >= 3900);
    CHECK(informer_synced(&t.inf));
    CHECK_OK(informer_list(&t.inf)); /* a list again (without the 4 s wait) */
    CHECK_KEYS(t.inf.cache, "ns/a");
    CHECK_STREQ(t.inf.rv, "140");
    rig_stop(&t);
}

/* A collection not served (404): said, informer_missing; with missing_ms
 * the next list waits that long, not the usual second; served again, the
 * list is taken and the usual pace is back. */
static void test_missing_pace(void)
{
    const struct reply r[] = {
        {"HTTP/1.1 404 Not Found\r\nContent-Type: application/json\r\nConnection: close\r\n\r\n"
         "{\"kind\":\"Status\",\"code\":404,\"message\":\"the server could not find the "
         "requested resource\"}",
         NULL, 0},
        {LIST("100", A), NULL, 0},
    };
    uint64_t t0;
    struct rig t;

    rig_start(&t, r, 2);
    t.inf.missing_ms = 2500;
    t.inf.missing_hint = "is the API group enabled?";
    CHECK_EQ_INT(informer_list(&t.inf), ERR_NOTFOUND);
    CHECK(informer_missing(&t.inf));
    CHECK(!informer_synced(&t.inf));
    t.inf.listed_ms = clock_mono_ms();
    t0 = clock_mono_ms();
    step(&t.inf);
    CHECK(clock_mono_ms() - t0 >= 2400);
    CHECK(!informer_missing(&t.inf));
    CHECK(informer_synced(&t.inf));
    CHECK_KEYS(t.inf.cache, "ns/a");
    rig_stop(&t);
}

static void test_rv_older(void)
{
    CHECK(rv_older("100", "5000"));
    CHECK(!rv_older("5000", "100"));
    CHECK(!rv_older("5000", "5000"));
    CHECK(rv_older("99", "100")); /* numbers, not strings */
    CHECK(!rv_older("abc", "5000"));
    CHECK(!rv_older("100", "x7"));
    CHECK(!rv_older("", "5000"));
    CHECK(!rv_older("-1", "5000"));
    CHECK(!rv_older("1 ", "5000"));
    CHECK(!rv_older("99999999999999999999999", "5")); /* out of range */
}

static void test_setup(void)
{
    CHECK_OK(rest_global_init());
}

static void test_cleanup(void)
{
    rest_global_cleanup();
}

TEST_MAIN(test_setup, test_rv_older, test_list_then_watch, test_resume_or_relist,
          test_too_large_event, test_too_large_http, test_list_older, test_expired, test_failing,
          test_consistent_first_list, test_list_without_rv, test_not_a_list, test_missing_pace,
          test_cleanup)
