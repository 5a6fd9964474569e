/* SPDX-License-Identifier: Apache-2.0 */
/* reconcile_test.c - the decisions of reconcile_key that need no API
 * write, through
 * syncer/reconcile.h. The API client points at http://127.0.0.1:1, so an
 * unexpected request fails (ERR_UPSTREAM) instead of passing unnoticed. */
#include "../../../common/common.h"
#include "../../../common/clock.h"
#include "../../../syncer/dvb.h"
#include "../../../syncer/queue.h"
#include "../../../syncer/reconcile.h"
#include "../test.h"
#include "../kube/responder.h"

#include <curl/curl.h>

static json_t *parse(const char *text)
{
    json_error_t e;
    json_t *v = json_loads(text, 0, &e);

    TEST_REPORT(v != NULL, "bad test JSON: %s", e.text);
    return v;
}

/* ---- reconcile_key without the network ---- */

struct world {
    struct kubeconfig kc; /* server http://127.0.0.1:1 */
    struct rest *kube;    /* one attempt, no gate */
    struct reconciler r;  /* the reconciler under test */
};

static void world_new(struct world *w)
{
    struct rest_opts o = {0};

    memset(w, 0, sizeof(*w));
    w->kc.server = (char *)"http://127.0.0.1:1";
    o.kc = &w->kc;
    o.max_attempts = 1;
    w->kube = rest_new(&o);
    CHECK(w->kube != NULL);
    w->r.node = "node-a";
    w->r.kube = w->kube;
    w->r.pd = w->kube;
    w->r.ttl_ms = 60000;
    w->r.pr = cache_new(NULL, NULL);
    w->r.resv = cache_new(NULL, NULL);
    w->r.pods = cache_new(NULL, NULL);
    w->r.crs = cache_new(NULL, NULL);
}

static void world_free(struct world *w)
{
    reconcile_release(&w->r);
    cache_free(w->r.pr);
    cache_free(w->r.resv);
    cache_free(w->r.pods);
    cache_free(w->r.crs);
    rest_free(w->kube);
}

static void put(struct cache *c, const char *key, const char *text)
{
    json_t *v = parse(text);

    cache_set(c, key, v, false);
    json_decref(v);
}

#define PR_DEV                                                                                     \
    "{\"namespace\":\"d\",\"name\":\"p\",\"uid\":\"u1\",\"revision\":4,"                           \
    "\"containers\":[{\"name\":"                                                                   \
    "\"c\",\"devices\":[{\"resourceName\":\"a.com/"                                                \
    "x\",\"deviceIds\":[\"x0\"]}]}]}"
#define PR_NODEV                                                                                   \
    "{\"namespace\":\"d\",\"name\":\"p\",\"uid\":\"u1\",\"revision\":4,"                           \
    "\"containers\":[{\"name\":"                                                                   \
    "\"c\",\"devices\":[]}]}"
#define POD(uid) "{\"metadata\":{\"namespace\":\"d\",\"name\":\"p\",\"uid\":\"" uid "\"}}"
#define CR_DELETING                                                                                \
    "{\"metadata\":{\"namespace\":\"d\",\"name\":\"p\",\"uid\":\"cr1\","                           \
    "\"resourceVersion\":\"5\","                                                                   \
    "\"deletionTimestamp\":\"2025-01-01T00:00:00Z\",\"labels\":{\"podres.dev/"                     \
    "node\":\"node-a\"}},"                                                                         \
    "\"spec\":{\"nodeName\":\"node-a\"}}"
#define CR_PLAIN                                                                                   \
    "{\"metadata\":{\"namespace\":\"d\",\"name\":\"p\",\"uid\":\"cr1\","                           \
    "\"resourceVersion\":\"5\","                                                                   \
    "\"labels\":{\"podres.dev/"                                                                    \
    "node\":\"node-a\"}},\"spec\":{\"nodeName\":\"node-a\"}}"

/* Run reconcile_key on "d/p" and check it neither wrote nor failed. */
static void check_quiet(struct world *w, const char *key, int line)
{
    bool wrote = true;
    uint64_t requeue = 77;
    struct error err = {ERR_INVAL, "stale"};
    err_t rc = reconcile_key(&w->r, key, &wrote, &requeue, &err);

    TEST_REPORT(rc == ERR_OK, "(line %d) reconcile_key returned %d: %s", line, (int)rc, err.msg);
    TEST_REPORT(!wrote, "(line %d) wrote", line);
    TEST_REPORT(requeue == 0, "(line %d) requeue %llu", line, (unsigned long long)requeue);
    TEST_REPORT(err.msg[0] == '\0', "(line %d) msg \"%s\"", line, err.msg);
}
#define CHECK_QUIET(w, key) check_quiet((w), (key), __LINE__)

static void test_key_nothing_to_do(void)
{
    struct world w;

    CHECK_OK(rest_global_init());
    world_new(&w);
    /* nothing anywhere */
    CHECK_QUIET(&w, "d/p");
    /* podresd knows the pod but it holds no devices, and there is no CR */
    put(w.r.pr, "d/p", PR_NODEV);
    CHECK_QUIET(&w, "d/p");
    /* ... even with the API Pod present */
    put(w.r.pods, "d/p", POD("u1"));
    CHECK_QUIET(&w, "d/p");
    /* not a key */
    CHECK_QUIET(&w, "no-slash");
    CHECK_EQ_INT(cache_size(w.r.crs), 0);
    world_free(&w);
}

static void test_key_waits_for_pod(void)
{
    struct world w;

    world_new(&w);
    /* devices but no API Pod: no owner yet, wait */
    put(w.r.pr, "d/p", PR_DEV);
    CHECK_QUIET(&w, "d/p");
    /* a Pod without a uid is no better */
    put(w.r.pods, "d/p", "{\"metadata\":{\"namespace\":\"d\",\"name\":\"p\"}}");
    CHECK_QUIET(&w, "d/p");
    /* podresd and the API server disagree on the instance: wait */
    put(w.r.pods, "d/p", POD("u2"));
    CHECK_QUIET(&w, "d/p");
    CHECK_EQ_INT(cache_size(w.r.crs), 0);
    world_free(&w);
}

static void test_key_deleting_cr(void)
{
    struct world w;

    world_new(&w);
    /* a CR going away is left alone, whatever podresd says */
    put(w.r.crs, "d/p", CR_DELETING);
    CHECK_QUIET(&w, "d/p"); /* no devices: would otherwise delete */
    put(w.r.pr, "d/p", PR_DEV);
    put(w.r.pods, "d/p", POD("u1"));
    CHECK_QUIET(&w, "d/p"); /* devices and Pod: would otherwise patch */
    CHECK_EQ_INT(cache_size(w.r.crs), 1);
    world_free(&w);
}

#define CR_OWNED(owners)                                                                           \
    "{\"metadata\":{\"namespace\":\"d\",\"name\":\"p\",\"uid\":\"cr1\","                           \
    "\"resourceVersion\":\"5\",\"labels\":{\"podres.dev/node\":\"node-a\"},"                       \
    "\"ownerReferences\":[" owners "]},\"spec\":{\"nodeName\":\"node-a\"}}"
#define OWNER_POD(uid) "{\"apiVersion\":\"v1\",\"kind\":\"Pod\",\"name\":\"p\",\"uid\":\"" uid "\"}"
#define POD_GOING(uid)                                                                             \
    "{\"metadata\":{\"namespace\":\"d\",\"name\":\"p\",\"uid\":\"" uid "\","                       \
    "\"deletionTimestamp\":\"2025-01-01T00:00:00Z\"}}"

/* A pod gone from the API server, or going, or another instance of its
 * name: the garbage collector removes its DeviceBinding through the
 * ownerReference, so the syncer writes nothing (the world's client fails
 * any request loudly). */
static void test_key_gc_deletes(void)
{
    struct world w;
    bool wrote = true;
    uint64_t requeue = 0;
    struct error err = {0};

    world_new(&w);
    put(w.r.crs, "d/p", CR_OWNED(OWNER_POD("u1")));
    CHECK_QUIET(&w, "d/p"); /* no Pod, no devices */
    put(w.r.pods, "d/p", POD_GOING("u1"));
    CHECK_QUIET(&w, "d/p"); /* the Pod is going */
    put(w.r.pods, "d/p", POD("u2"));
    CHECK_QUIET(&w, "d/p"); /* another instance of that name */
    CHECK_EQ_INT(cache_size(w.r.crs), 1);
    /* the owner stays but its devices went: the syncer deletes */
    put(w.r.pods, "d/p", POD("u1"));
    CHECK_EQ_INT(reconcile_key(&w.r, "d/p", &wrote, &requeue, &err), ERR_UPSTREAM);
    /* another owner keeps the object alive: the syncer deletes */
    cache_del(w.r.pods, "d/p");
    put(w.r.crs, "d/p",
        CR_OWNED(OWNER_POD("u1") ",{\"apiVersion\":\"x.io/v1\",\"kind\":\"PodGroup\","
                                 "\"name\":\"g\",\"uid\":\"g1\"}"));
    CHECK_EQ_INT(reconcile_key(&w.r, "d/p", &wrote, &requeue, &err), ERR_UPSTREAM);
    /* devices, the Pod going and no DeviceBinding: none is made */
    cache_del(w.r.crs, "d/p");
    put(w.r.pr, "d/p", PR_DEV);
    put(w.r.pods, "d/p", POD_GOING("u1"));
    CHECK_QUIET(&w, "d/p");
    CHECK_EQ_INT(cache_size(w.r.crs), 0);
    reconcile_release(&w.r);
    world_free(&w);
}

/* The control: a decision that does call the API fails loudly here. */
static void test_key_write_fails_loudly(void)
{
    struct world w;
    bool wrote = true;
    uint64_t requeue = 77;
    struct error err = {0};

    world_new(&w);
    put(w.r.crs, "d/p", CR_PLAIN); /* ours, no devices: delete it */
    CHECK_EQ_INT(reconcile_key(&w.r, "d/p", &wrote, &requeue, &err), ERR_UPSTREAM);
    CHECK(!wrote);
    CHECK(err.msg[0] != '\0');
    CHECK_EQ_INT(cache_size(w.r.crs), 1); /* still there: try again later */

    /* devices and Pod, no CR: create it */
    put(w.r.pr, "d/q", PR_DEV);
    put(w.r.pods, "d/q", POD("u1"));
    wrote = true;
    CHECK_EQ_INT(reconcile_key(&w.r, "d/q", &wrote, &requeue, &err), ERR_UPSTREAM);
    CHECK(!wrote);
    world_free(&w);
    rest_global_cleanup();
}

#define CR_OF(label)                                                                               \
    "{\"metadata\":{\"namespace\":\"d\",\"name\":\"p\",\"uid\":\"cr1\","                           \
    "\"resourceVersion\":\"5\"" label "},\"spec\":{\"nodeName\":\"node-b\"}}"
#define LABELS_B ",\"labels\":{\"podres.dev/node\":\"node-b\"}"

/* Another node's DeviceBinding in the cache (a server that ignored the
 * label selector): never written, whatever this node's state calls for;
 * each skip counted, logged once per key and label. */
static void test_key_foreign_label(void)
{
    struct world w;
    bool wrote = true;
    uint64_t requeue = 0;
    struct error err = {0};

    world_new(&w);
    put(w.r.crs, "d/p", CR_OF(LABELS_B)); /* no devices: ours would be deleted */
    CHECK_QUIET(&w, "d/p");
    CHECK_EQ_INT(reconcile_skipped(&w.r, RECONCILE_SKIP_FOREIGN_LABEL), 1);
    CHECK_STREQ(json_string_value(json_object_get(w.r.foreign, "d/p")), "node-b");
    put(w.r.pr, "d/p", PR_DEV); /* devices and Pod: ours would be patched */
    put(w.r.pods, "d/p", POD("u1"));
    CHECK_QUIET(&w, "d/p");
    CHECK_EQ_INT(reconcile_skipped(&w.r, RECONCILE_SKIP_FOREIGN_LABEL), 2);
    put(w.r.crs, "d/p", CR_OF("")); /* labelled for no node */
    CHECK_QUIET(&w, "d/p");
    CHECK_EQ_INT(reconcile_skipped(&w.r, RECONCILE_SKIP_FOREIGN_LABEL), 3);
    CHECK_STREQ(json_string_value(json_object_get(w.r.foreign, "d/p")), "");
    /* a pre-assignment of another node's is no reservation of this node's */
    put(w.r.crs, "d/p",
        "{\"metadata\":{\"namespace\":\"d\",\"name\":\"p\",\"uid\":\"cr1\"" LABELS_B "},"
        "\"spec\":{\"containers\":[{\"name\":\"c\",\"devices\":[{\"resourceName\":\"a.com/x\","
        "\"deviceIds\":[\"x0\"]}]}]}}");
    CHECK_QUIET(&w, "d/p");
    CHECK_EQ_INT(cache_size(w.r.crs), 1); /* not deleted from the cache either */
    /* a reservation of this node's under that key goes (podresd: port 1) */
    put(w.r.resv, "d/p", "{\"namespace\":\"d\",\"name\":\"p\",\"containers\":[]}");
    CHECK_EQ_INT(reconcile_key(&w.r, "d/p", &wrote, &requeue, &err), ERR_UPSTREAM);
    CHECK(!wrote);
    /* ours again: no longer remembered */
    cache_del(w.r.resv, "d/p");
    put(w.r.crs, "d/p", CR_PLAIN);
    CHECK_EQ_INT(reconcile_key(&w.r, "d/p", &wrote, &requeue, &err), ERR_UPSTREAM);
    CHECK_EQ_INT(json_object_size(w.r.foreign), 0);
    CHECK_EQ_INT(reconcile_skipped(&w.r, RECONCILE_SKIP_FOREIGN_LABEL), 5);
    reconcile_release(&w.r);
    reconcile_release(&w.r); /* twice is fine */
    world_free(&w);
}

/* What the code under test logs, caught: stderr goes to a file between
 * capture_start() and capture_end(). */
static int saved_stderr = -1;
static FILE *captured;

static void capture_start(void)
{
    fflush(stderr);
    captured = tmpfile();
    saved_stderr = dup(2);
    CHECK(captured && saved_stderr >= 0 && dup2(fileno(captured), 2) == 2);
}

static void capture_end(char *out, size_t cap)
{
    size_t n;

    fflush(stderr);
    dup2(saved_stderr, 2);
    close(saved_stderr);
    rewind(captured);
    n = fread(out, 1, cap - 1, captured);
    out[n] = '\0';
    fclose(captured);
    fputs(out, stderr); /* still in the test's output */
}

/* How many times 'part' occurs in 's'. */
static int count_of(const char *s, const char *part)
{
    int n = 0;

    for (s = strstr(s, part); s; s = strstr(s + 1, part))
        n++;
    return n;
}

/* A binding with devices that is not mirrored, and why: no Pod, another
 * instance of it, the CRD missing (the worker's word). Each look counted
 * by reason, each reason said once at info until the binding is mirrored. */
static void test_key_skip_reasons(void)
{
    struct world w;
    char log[4096];

    world_new(&w);
    put(w.r.pr, "d/p", PR_DEV);
    capture_start();
    CHECK_QUIET(&w, "d/p");
    CHECK_QUIET(&w, "d/p");
    put(w.r.pods, "d/p", POD("u2"));
    CHECK_QUIET(&w, "d/p");
    CHECK_QUIET(&w, "d/p");
    reconcile_skip(&w.r, "d/p", RECONCILE_SKIP_CRD_MISSING, "DeviceBindings are not served");
    reconcile_skip(&w.r, "d/q", RECONCILE_SKIP_CRD_MISSING, "no devices: not counted");
    capture_end(log, sizeof(log));
    CHECK_EQ_INT(reconcile_skipped(&w.r, RECONCILE_SKIP_NO_POD), 2);
    CHECK_EQ_INT(reconcile_skipped(&w.r, RECONCILE_SKIP_POD_UID), 2);
    CHECK_EQ_INT(reconcile_skipped(&w.r, RECONCILE_SKIP_CRD_MISSING), 1);
    CHECK_EQ_INT(reconcile_skipped(&w.r, RECONCILE_SKIP_FOREIGN_LABEL), 0);
    CHECK_EQ_INT(count_of(log, "not mirroring the binding of pod d/p (no_pod): no Pod of that "
                               "name on node 'node-a' in the API server"),
                 1);
    CHECK_EQ_INT(count_of(log, "not mirroring the binding of pod d/p (pod_uid_mismatch): podresd "
                               "has pod uid 'u1', the API server's Pod uid 'u2'"),
                 1);
    CHECK_EQ_INT(count_of(log, "(crd_missing): DeviceBindings are not served"), 1);
    CHECK_EQ_INT(count_of(log, "d/q"), 0);
    CHECK_STREQ(reconcile_skip_name(RECONCILE_SKIP_POD_UID), "pod_uid_mismatch");
    world_free(&w);
}

#define PRE_CR                                                                                     \
    "{\"metadata\":{\"namespace\":\"d\",\"name\":\"q\",\"uid\":\"cr2\",\"resourceVersion\":"       \
    "\"6\",\"creationTimestamp\":\"2099-01-01T00:00:00Z\",\"labels\":{\"podres.dev/node\":"        \
    "\"node-a\"}},\"spec\":{\"containers\":[{\"name\":\"c\",\"devices\":[{\"resourceName\":"       \
    "\"a.com/x\",\"deviceIds\":[\"x0\"]}]}]}}"
#define RESV(name) "{\"namespace\":\"d\",\"name\":\"" name "\",\"containers\":[]}"

/* A reservation without a DeviceBinding's pre-assignment behind it is
 * removed (podresd, at port 1, fails here: tried again); one made outside a
 * DeviceBinding is said once, one this reconciler placed is not. */
static void test_key_stray_reservation(void)
{
    struct world w;
    bool wrote;
    uint64_t requeue;
    char log[4096];
    struct error err = {0};

    world_new(&w);
    put(w.r.resv, "d/p", RESV("p"));
    put(w.r.crs, "d/q", PRE_CR); /* its reservation fails, but is this object's */
    capture_start();
    CHECK_EQ_INT(reconcile_key(&w.r, "d/p", &wrote, &requeue, &err), ERR_UPSTREAM);
    CHECK_EQ_INT(reconcile_key(&w.r, "d/p", &wrote, &requeue, &err), ERR_UPSTREAM);
    CHECK_EQ_INT(reconcile_key(&w.r, "d/q", &wrote, &requeue, &err), ERR_UPSTREAM);
    cache_del(w.r.crs, "d/q"); /* the pre-assignment goes: its reservation with it */
    put(w.r.resv, "d/q", RESV("q"));
    CHECK_EQ_INT(reconcile_key(&w.r, "d/q", &wrote, &requeue, &err), ERR_UPSTREAM);
    capture_end(log, sizeof(log));
    CHECK_EQ_INT(count_of(log, "removing reservation d/p made outside a DeviceBinding: this "
                               "node's reservations are owned by DeviceBindings; pre-assign with "
                               "a DeviceBinding instead"),
                 1);
    CHECK_EQ_INT(count_of(log, "removing reservation d/q"), 0);
    world_free(&w);
}

#define CHECK_PREFIX(s, prefix)                                                                    \
    TEST_REPORT(strncmp((s), (prefix), strlen(prefix)) == 0, "\"%.80s\" does not start \"%s\"",    \
                (s), (prefix))

/* As read: a DELETE refused (409) because the object by that name is now
 * another node's; read again, it is left alone and leaves the cache. */
static void test_key_foreign_as_read(void)
{
    const struct reply r[] = {
        {"HTTP/1.1 409 Conflict\r\nContent-Type: application/json\r\nConnection: close\r\n\r\n"
         "{\"kind\":\"Status\",\"code\":409,\"message\":\"Precondition failed: UID\"}",
         NULL, 0},
        {HEAD_200 "{\"metadata\":{\"namespace\":\"d\",\"name\":\"p\",\"uid\":\"cr9\","
                  "\"resourceVersion\":\"9\"" LABELS_B "}}",
         NULL, 0},
    };
    struct responder s;
    struct world w;
    struct rest_opts o = {.max_attempts = 1};
    bool wrote = true;
    uint64_t requeue = 0;
    char url[64];
    struct error err = {0};

    responder_start(&s, r, 2);
    world_new(&w);
    snprintf(url, sizeof(url), "http://127.0.0.1:%d", s.port);
    w.kc.server = url;
    o.kc = &w.kc;
    rest_free(w.kube);
    w.kube = rest_new(&o);
    w.r.kube = w.kube;
    put(w.r.crs, "d/p", CR_PLAIN); /* ours, as cached; no devices: delete */
    CHECK_EQ_INT(reconcile_key(&w.r, "d/p", &wrote, &requeue, &err), ERR_FORBIDDEN);
    CHECK(!wrote);
    CHECK(strstr(err.msg, "labelled for node 'node-b', not node 'node-a'") != NULL);
    CHECK_PREFIX(s.req[0], "DELETE /apis/podres.dev/v1alpha1/namespaces/d/devicebindings/p HTTP");
    CHECK_PREFIX(s.req[1], "GET /apis/podres.dev/v1alpha1/namespaces/d/devicebindings/p HTTP");
    CHECK_EQ_INT(cache_size(w.r.crs), 0);
    CHECK_EQ_INT(reconcile_skipped(&w.r, RECONCILE_SKIP_FOREIGN_LABEL), 1);
    responder_stop(&s);
    reconcile_release(&w.r);
    world_free(&w);
}

/* Point the world's API client at the responder 's'; 'url' holds its address. */
static void world_serve(struct world *w, const struct responder *s, char *url, size_t cap)
{
    struct rest_opts o = {.max_attempts = 1};

    snprintf(url, cap, "http://127.0.0.1:%d", s->port);
    w->kc.server = url;
    o.kc = &w->kc;
    rest_free(w->kube);
    w->kube = rest_new(&o);
    CHECK(w->kube != NULL);
    w->r.kube = w->kube;
}

/* The metadata field 'field' of the JSON body of request 'req', in 'out'
 * ("" when it has none). */
static void req_meta(const char *req, const char *field, char *out, size_t cap)
{
    const char *body = strstr(req, "\r\n\r\n");
    json_t *v = body ? json_loads(body + 4, 0, NULL) : NULL;
    const char *s = json_string_value(json_object_get(json_object_get(v, "metadata"), field));

    snprintf(out, cap, "%s", s ? s : "");
    json_decref(v);
}

#define CHECK_REQ_META(req, field, want)                                                           \
    do {                                                                                           \
        char got_[128];                                                                            \
        req_meta((req), (field), got_, sizeof(got_));                                              \
        CHECK_STREQ(got_, (want));                                                                 \
    } while (0)

#define DVB_PATH "/apis/podres.dev/v1alpha1/namespaces/d/devicebindings/p"
#define HEAD_409                                                                                   \
    "HTTP/1.1 409 Conflict\r\nContent-Type: application/json\r\nConnection: close\r\n\r\n"         \
    "{\"kind\":\"Status\",\"code\":409,\"message\":\"Operation cannot be fulfilled on "            \
    "devicebindings.podres.dev \\\"p\\\": the object has been modified\"}"

/* Each merge patch holds only for the object as read: its uid and
 * resourceVersion ride in the patch's metadata. The status patch after an
 * owner patch names the object that patch answered with. */
static void test_key_patch_preconditions(void)
{
    const struct reply r[] = {
        {HEAD_200 "{\"metadata\":{\"namespace\":\"d\",\"name\":\"p\",\"uid\":\"cr1\","
                  "\"resourceVersion\":\"6\",\"labels\":{\"podres.dev/node\":\"node-a\"},"
                  "\"ownerReferences\":[" OWNER_POD("u1") "]},\"spec\":{\"nodeName\":"
                                                          "\"node-a\"}}",
         NULL, 0},
        {HEAD_200 "{\"metadata\":{\"namespace\":\"d\",\"name\":\"p\",\"uid\":\"cr1\","
                  "\"resourceVersion\":\"7\",\"labels\":{\"podres.dev/node\":\"node-a\"}}}",
         NULL, 0},
    };
    struct responder s;
    struct world w;
    bool wrote = false;
    uint64_t requeue = 0;
    char url[64];
    struct error err = {0};

    responder_start(&s, r, 2);
    world_new(&w);
    world_serve(&w, &s, url, sizeof(url));
    put(w.r.pr, "d/p", PR_DEV);
    put(w.r.pods, "d/p", POD("u1"));
    put(w.r.crs, "d/p", CR_PLAIN); /* no owner, no status: both patches */
    CHECK_OK(reconcile_key(&w.r, "d/p", &wrote, &requeue, &err));
    CHECK(wrote);
    responder_stop(&s);
    CHECK_EQ_INT(s.served, 2);
    CHECK_PREFIX(s.req[0], "PATCH " DVB_PATH " HTTP");
    CHECK(strstr(s.req[0], "\"ownerReferences\"") != NULL);
    CHECK_REQ_META(s.req[0], "uid", "cr1");
    CHECK_REQ_META(s.req[0], "resourceVersion", "5");
    CHECK_PREFIX(s.req[1], "PATCH " DVB_PATH "/status HTTP");
    CHECK(strstr(s.req[1], "\"status\"") != NULL);
    CHECK_REQ_META(s.req[1], "uid", "cr1");
    CHECK_REQ_META(s.req[1], "resourceVersion", "6");
    world_free(&w);
}

/* A status patch refused (409) because the object was deleted and made
 * again since it was read: read again, the new one (this node's) replaces
 * the cached one and the next patch names it; made again for another node,
 * it is left alone, leaves the cache and is counted. */
static void test_key_patch_replaced(void)
{
    const struct reply r[] = {
        {HEAD_409, NULL, 0},
        {HEAD_200 "{\"metadata\":{\"namespace\":\"d\",\"name\":\"p\",\"uid\":\"cr9\","
                  "\"resourceVersion\":\"9\",\"labels\":{\"podres.dev/node\":\"node-a\"},"
                  "\"ownerReferences\":[" OWNER_POD("u1") "]}}",
         NULL, 0},
        {HEAD_200 "{}", NULL, 0},
        {HEAD_409, NULL, 0},
        {HEAD_200 "{\"metadata\":{\"namespace\":\"d\",\"name\":\"p\",\"uid\":\"cr10\","
                  "\"resourceVersion\":\"10\"" LABELS_B "}}",
         NULL, 0},
    };
    struct responder s;
    struct world w;
    bool wrote = true;
    uint64_t requeue = 0;
    char url[64];
    struct error err = {0};
    json_t *cached;

    responder_start(&s, r, 5);
    world_new(&w);
    world_serve(&w, &s, url, sizeof(url));
    put(w.r.pr, "d/p", PR_DEV);
    put(w.r.pods, "d/p", POD("u1"));
    put(w.r.crs, "d/p", CR_OWNED(OWNER_POD("u1"))); /* owned: the status patch only */
    CHECK_EQ_INT(reconcile_key(&w.r, "d/p", &wrote, &requeue, &err), ERR_CONFLICT);
    CHECK(!wrote);
    CHECK(strstr(err.msg, "the object has been modified") != NULL);
    cached = cache_get(w.r.crs, "d/p");
    CHECK_STREQ(dvb_meta(cached, "uid"), "cr9");
    json_decref(cached);
    CHECK_OK(reconcile_key(&w.r, "d/p", &wrote, &requeue, &err));
    CHECK(wrote);
    /* made again for node-b */
    put(w.r.crs, "d/p", CR_OWNED(OWNER_POD("u1")));
    CHECK_EQ_INT(reconcile_key(&w.r, "d/p", &wrote, &requeue, &err), ERR_FORBIDDEN);
    CHECK(strstr(err.msg, "labelled for node 'node-b', not node 'node-a'") != NULL);
    CHECK_EQ_INT(cache_size(w.r.crs), 0);
    CHECK_EQ_INT(reconcile_skipped(&w.r, RECONCILE_SKIP_FOREIGN_LABEL), 1);
    responder_stop(&s);
    CHECK_EQ_INT(s.served, 5);
    CHECK_PREFIX(s.req[0], "PATCH " DVB_PATH "/status HTTP");
    CHECK_REQ_META(s.req[0], "uid", "cr1");
    CHECK_REQ_META(s.req[0], "resourceVersion", "5");
    CHECK_PREFIX(s.req[1], "GET " DVB_PATH " HTTP");
    CHECK_PREFIX(s.req[2], "PATCH " DVB_PATH "/status HTTP");
    CHECK_REQ_META(s.req[2], "uid", "cr9");
    CHECK_REQ_META(s.req[2], "resourceVersion", "9");
    CHECK_REQ_META(s.req[3], "uid", "cr1");
    CHECK_PREFIX(s.req[4], "GET " DVB_PATH " HTTP");
    world_free(&w);
}

/* Another syncer on this podresd: a stray reservation removed once comes
 * back, and the DeviceBinding of its name pre-assigns it for node-b. The
 * writes stop for good: nothing more is sent, each key comes back after
 * FENCE_RECHECK_MS, and the fence says why. */
static void test_key_stray_of_another_syncer(void)
{
    const struct reply r[] = {
        {HEAD_200 "{}", NULL, 0},
        {HEAD_200 "{\"metadata\":{\"namespace\":\"d\",\"name\":\"p\",\"uid\":\"cr9\","
                  "\"resourceVersion\":\"9\"" LABELS_B "},\"spec\":{\"containers\":[{\"name\":"
                  "\"c\",\"devices\":[{\"resourceName\":\"a.com/x\",\"deviceIds\":[\"x0\"]}]}]}}",
         NULL, 0},
    };
    struct responder s;
    struct world w;
    struct rest_opts o = {.max_attempts = 1};
    bool wrote = true;
    uint64_t requeue = 0;
    char url[64];
    struct error err = {0}, why = {0};

    responder_start(&s, r, 2);
    world_new(&w);
    snprintf(url, sizeof(url), "http://127.0.0.1:%d", s.port);
    w.kc.server = url;
    o.kc = &w.kc;
    rest_free(w.kube);
    w.kube = rest_new(&o);
    w.r.kube = w.kube;
    w.r.pd = w.kube;
    put(w.r.resv, "d/p", RESV("p"));
    CHECK_OK(reconcile_key(&w.r, "d/p", &wrote, &requeue, &err));
    CHECK_EQ_INT(requeue, 0);
    CHECK(!fence_stopped(&w.r.fence, &why));
    /* it comes back */
    CHECK_OK(reconcile_key(&w.r, "d/p", &wrote, &requeue, &err));
    CHECK(requeue >= FENCE_RECHECK_MS);
    CHECK(fence_stopped(&w.r.fence, &why));
    CHECK(strstr(why.msg, "another podres-syncer writes this podresd's reservations (node "
                          "'node-b'; this one is node 'node-a')") != NULL);
    CHECK_OK(reconcile_key(&w.r, "d/q", &wrote, &requeue, &err));
    CHECK(!wrote && requeue > 0);
    responder_stop(&s);
    CHECK_EQ_INT(s.served, 2);
    CHECK_PREFIX(s.req[0], "DELETE /v1/reservations/d/p HTTP");
    CHECK_PREFIX(s.req[1], "GET /apis/podres.dev/v1alpha1/namespaces/d/devicebindings/p HTTP");
    world_free(&w);
}

/* A pre-assignment's key is kept only while it or a reservation of this
 * reconciler's is there: 1000 that expired before their pod arrived (no
 * reservation taken) and were deleted leave nothing behind. */
static void test_key_expired_forgotten(void)
{
    struct world w;
    bool wrote;
    uint64_t requeue;
    struct error err = {0};
    char key[64], text[1024];
    int i;
    err_t rc;

    world_new(&w);
    for (i = 0; i < 1000; i++) {
        snprintf(key, sizeof(key), "d/q%d", i);
        snprintf(text, sizeof(text),
                 "{\"metadata\":{\"namespace\":\"d\",\"name\":\"q%d\",\"uid\":\"c%d\","
                 "\"resourceVersion\":\"6\",\"creationTimestamp\":\"2000-01-01T00:00:00Z\","
                 "\"labels\":{\"podres.dev/node\":\"node-a\"}},\"spec\":{\"containers\":[{"
                 "\"name\":\"c\",\"devices\":[{\"resourceName\":\"a.com/x\",\"deviceIds\":["
                 "\"x0\"]}]}]}}",
                 i, i);
        put(w.r.crs, key, text);
        rc = reconcile_key(&w.r, key, &wrote, &requeue, &err);
        CHECK_EQ_INT(rc, ERR_UPSTREAM); /* expired; the status patch fails at port 1 */
        cache_del(w.r.crs, key);        /* the DeviceBinding goes */
        CHECK_OK(reconcile_key(&w.r, key, &wrote, &requeue, &err));
    }
    CHECK_EQ_INT(json_object_size(w.r.reserved), 0);
    CHECK_EQ_INT(json_object_size(w.r.placed), 0);
    world_free(&w);
}

/* A pre-assignment whose PUT podresd refused (409), then deleted, leaves
 * no key; one whose PUT podresd took, deleted while its reservation is not
 * in the cache (gone, or not seen yet), is released and leaves none. */
static void test_key_refused_and_placed_forgotten(void)
{
    const struct reply r[] = {
        {"HTTP/1.1 409 Conflict\r\nContent-Type: application/json\r\nConnection: close\r\n\r\n"
         "{\"kind\":\"Status\",\"code\":409,\"message\":\"device x0 is held\"}",
         NULL, 0},
        {HEAD_200 "{\"reservation\":{\"state\":\"Pending\"}}", NULL, 0},
        {"HTTP/1.1 404 Not Found\r\nContent-Type: application/json\r\nConnection: close\r\n\r\n"
         "{\"kind\":\"Status\",\"code\":404,\"message\":\"no reservation d/q\"}",
         NULL, 0},
    };
    struct responder s;
    struct world w;
    struct kubeconfig kc = {0};
    struct rest_opts o = {.kc = &kc, .max_attempts = 1};
    bool wrote;
    uint64_t requeue;
    char url[64];
    struct error err = {0};
    err_t rc;

    responder_start(&s, r, 3);
    world_new(&w);
    snprintf(url, sizeof(url), "http://127.0.0.1:%d", s.port);
    kc.server = url;
    w.r.pd = rest_new(&o); /* podresd answers; the API server (port 1) fails */
    put(w.r.crs, "d/q", PRE_CR);
    rc = reconcile_key(&w.r, "d/q", &wrote, &requeue, &err);
    CHECK_EQ_INT(rc, ERR_UPSTREAM); /* refused; the status patch fails */
    cache_del(w.r.crs, "d/q");
    CHECK_OK(reconcile_key(&w.r, "d/q", &wrote, &requeue, &err));
    CHECK_EQ_INT(json_object_size(w.r.reserved), 0);
    CHECK_EQ_INT(s.served, 1);

    put(w.r.crs, "d/q", PRE_CR);
    rc = reconcile_key(&w.r, "d/q", &wrote, &requeue, &err);
    CHECK_EQ_INT(rc, ERR_UPSTREAM); /* taken; the status patch fails */
    CHECK(json_object_get(w.r.placed, "d/q") != NULL);
    cache_del(w.r.crs, "d/q");
    CHECK_OK(reconcile_key(&w.r, "d/q", &wrote, &requeue, &err));
    responder_stop(&s);
    CHECK_EQ_INT(s.served, 3);
    CHECK_PREFIX(s.req[0], "PUT /v1/reservations/d/q HTTP");
    CHECK_PREFIX(s.req[1], "PUT /v1/reservations/d/q HTTP");
    CHECK_PREFIX(s.req[2], "DELETE /v1/reservations/d/q HTTP");
    CHECK_EQ_INT(json_object_size(w.r.reserved), 0);
    CHECK_EQ_INT(json_object_size(w.r.placed), 0);
    rest_free(w.r.pd);
    world_free(&w);
}

/* A DeviceBinding it made, collected while podresd still binds the pod and
 * the Pod cache still has the Pod (its deletion not seen yet): the Pod is
 * asked of the server, and gone there, nothing is made again; the Pod still
 * there (the object deleted by hand), it is made again. */
static void test_key_collected_not_made_again(void)
{
    const char *made = HEAD_200
        "{\"metadata\":{\"namespace\":\"d\",\"name\":\"p\",\"uid\":\"cr1\","
        "\"resourceVersion\":\"6\",\"labels\":{\"podres.dev/node\":\"node-a\"},"
        "\"ownerReferences\":[" OWNER_POD("u1") "]},\"spec\":{\"nodeName\":"
                                                "\"node-a\"}}";
    const struct reply r[] = {
        {made, NULL, 0}, /* the create */
        {made, NULL, 0}, /* its status */
        {"HTTP/1.1 404 Not Found\r\nContent-Type: application/json\r\nConnection: close\r\n\r\n"
         "{\"kind\":\"Status\",\"code\":404,\"reason\":\"NotFound\"}",
         NULL, 0},                     /* the Pod, gone */
        {HEAD_200 POD("u1"), NULL, 0}, /* the Pod, there */
        {made, NULL, 0},               /* made again */
        {made, NULL, 0},               /* its status */
    };
    struct responder s;
    struct world w;
    bool wrote = false;
    uint64_t requeue = 0;
    char url[64];
    struct error err = {0};

    responder_start(&s, r, 6);
    world_new(&w);
    world_serve(&w, &s, url, sizeof(url));
    put(w.r.pr, "d/p", PR_DEV);
    put(w.r.pods, "d/p", POD("u1"));
    CHECK_OK(reconcile_key(&w.r, "d/p", &wrote, &requeue, &err));
    CHECK(wrote);
    cache_del(w.r.crs, "d/p"); /* the collector's DELETE, seen before the Pod's */
    wrote = true;
    CHECK_OK(reconcile_key(&w.r, "d/p", &wrote, &requeue, &err));
    CHECK(!wrote);
    CHECK_EQ_INT(reconcile_skipped(&w.r, RECONCILE_SKIP_NO_POD), 1);
    CHECK_OK(reconcile_key(&w.r, "d/p", &wrote, &requeue, &err)); /* the Pod there again */
    CHECK(wrote);
    responder_stop(&s);
    CHECK_EQ_INT(s.served, 6);
    CHECK_PREFIX(s.req[0], "POST ");
    CHECK_PREFIX(s.req[2], "GET /api/v1/namespaces/d/pods/p HTTP");
    CHECK_PREFIX(s.req[3], "GET /api/v1/namespaces/d/pods/p HTTP");
    CHECK_PREFIX(s.req[4], "POST ");
    world_free(&w);
}

TEST_MAIN(test_key_collected_not_made_again, test_key_nothing_to_do, test_key_waits_for_pod,
          test_key_deleting_cr, test_key_gc_deletes, test_key_foreign_label,
          test_key_foreign_as_read, test_key_skip_reasons, test_key_stray_reservation,
          test_key_stray_of_another_syncer, test_key_write_fails_loudly, test_key_expired_forgotten,
          test_key_refused_and_placed_forgotten, test_key_patch_preconditions,
          test_key_patch_replaced)
