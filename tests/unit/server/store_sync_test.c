/* SPDX-License-Identifier: Apache-2.0 */
/* store_sync_test.c - the kubelet reconcile through store.h: the first sync
 * adds everything, the same snapshot again writes nothing, a change emits
 * only its events, bound devices that leave the allocatable set turn
 * Unhealthy, pods leave with DELETED, bad snapshots change nothing. */
#include "../../../common/common.h"
#include "../../../server/feed.h"
#include "../../../server/store.h"
#include "../../../server/validate.h"
#include "../test.h"

#include <unistd.h>

struct fx {
    char dir[64];      /* temp directory */
    char path[128];    /* database file */
    struct store *st;  /* the store */
    struct feed *feed; /* attached feed */
    uint64_t cursor;   /* feed cursor */
    char *buf;         /* feed lines */
    size_t len, cap;   /* their use and size */
};

static void fx_open(struct fx *f)
{
    struct store_opts o = {.history = 1000};

    memset(f, 0, sizeof(*f));
    snprintf(f->dir, sizeof(f->dir), "/tmp/store_sync_test.XXXXXX");
    CHECK(mkdtemp(f->dir) != NULL);
    snprintf(f->path, sizeof(f->path), "%s/podresd.db", f->dir);
    o.path = f->path;
    CHECK_OK(store_open(&o, &f->st));
    f->feed = feed_new(1024, store_revision(f->st));
    store_set_feed(f->st, f->feed);
    f->cursor = store_revision(f->st);
}

static void fx_close(struct fx *f)
{
    static const char *const sfx[] = {"", "-wal", "-shm"};
    char p[200];
    size_t i;

    store_free(f->st);
    feed_free(f->feed);
    for (i = 0; i < ARRAY_SIZE(sfx); i++) {
        snprintf(p, sizeof(p), "%s%s", f->path, sfx[i]);
        unlink(p);
    }
    CHECK_OK(rmdir(f->dir));
    free(f->buf);
}

/* Sync the snapshot in JSON text 'snap'; returns the store's answer. */
static err_t sync_text(struct fx *f, const char *snap, bool *changed)
{
    json_t *s = json_loads(snap, 0, NULL);
    err_t rc;

    CHECK(s != NULL);
    rc = store_kubelet_sync(f->st, s, changed);
    json_decref(s);
    return rc;
}

/* The new feed events as "TYPE Kind key" lines joined by ';'. */
static const char *events(struct fx *f, char *out, size_t cap)
{
    size_t at = 0, used = 0;

    f->len = 0;
    feed_read(f->feed, &f->cursor, &(struct feed_filter){0}, &f->buf, &f->len, &f->cap);
    out[0] = '\0';
    while (at < f->len) {
        const char *nl = memchr(f->buf + at, '\n', f->len - at);
        json_t *ev = json_loadb(f->buf + at, (size_t)(nl - f->buf) - at, 0, NULL);
        json_t *o = json_object_get(ev, "object");
        const char *kind = json_string_value(json_object_get(ev, "kind"));

        used += (size_t)snprintf(
            out + used, cap - used, "%s%s %s %s", used ? ";" : "",
            json_string_value(json_object_get(ev, "type")), kind,
            json_string_value(json_object_get(o, strcmp(kind, "Device") == 0 ? "id" : "name")));
        json_decref(ev);
        at = (size_t)(nl - f->buf) + 1;
    }
    return out;
}

#define ALLOC2                                                                                     \
    "\"devices\":[{\"resourceName\":\"example.com/gpu\",\"id\":\"g0\",\"topology\":{\"nodes\":"    \
    "[{\"ID\":0}]}},{\"resourceName\":\"example.com/gpu\",\"id\":\"g1\",\"topology\":{\"nodes\":"  \
    "[{\"ID\":1}]}}]"
#define POD_A(ids, cpus)                                                                           \
    "{\"namespace\":\"ml\",\"name\":\"a\",\"containers\":[{\"name\":\"c\",\"devices\":[{"          \
    "\"resourceName\":\"example.com/gpu\",\"deviceIds\":" ids ",\"topology\":{\"nodes\":[]}}],"    \
    "\"cpuIds\":" cpus ",\"memory\":[]}]}"
#define POD_B                                                                                      \
    "{\"namespace\":\"web\",\"name\":\"b\",\"containers\":[{\"name\":\"n\",\"devices\":[]}]}"

static void test_first_and_same(void)
{
    struct fx f;
    char ev[2048];
    bool changed = false;
    uint64_t rev;
    json_t *out = NULL;

    fx_open(&f);
    CHECK_OK(sync_text(
        &f, "{\"pods\":[" POD_A("[\"g1\",\"g0\"]", "[1,2]") "," POD_B "]," ALLOC2 "}", &changed));
    CHECK(changed);
    CHECK_STREQ(events(&f, ev, sizeof(ev)),
                "ADDED PodResources a;ADDED PodResources b;ADDED Device g0;ADDED Device g1");
    rev = store_revision(f.st);
    CHECK_EQ_INT(rev, 4);
    CHECK_OK(store_pod_get(f.st, "ml", "a", &out));
    CHECK_STREQ(json_string_value(json_object_get(json_object_get(out, "podResources"), "uid")),
                "");
    json_decref(out);
    CHECK_OK(store_devices_list(f.st, NULL, NULL, false, &out));
    CHECK_STREQ(
        json_string_value(json_object_get(
            json_object_get(json_array_get(json_object_get(out, "devices"), 0), "holder"), "name")),
        "a");
    json_decref(out);
    /* The same state again (ids in another order): nothing written. */
    CHECK_OK(sync_text(
        &f, "{\"pods\":[" POD_B "," POD_A("[\"g0\",\"g1\"]", "[1,2]") "]," ALLOC2 "}", &changed));
    CHECK(!changed);
    CHECK_EQ_INT(store_revision(f.st), rev);
    CHECK_STREQ(events(&f, ev, sizeof(ev)), "");
    fx_close(&f);
}

static void test_changes_only(void)
{
    struct fx f;
    char ev[2048];
    bool changed = false;
    json_t *out = NULL, *d;

    fx_open(&f);
    CHECK_OK(
        sync_text(&f, "{\"pods\":[" POD_A("[\"g0\",\"g1\"]", "[1]") "]," ALLOC2 "}", &changed));
    events(&f, ev, sizeof(ev));
    /* More CPUs only: one pod event, no device event. */
    CHECK_OK(
        sync_text(&f, "{\"pods\":[" POD_A("[\"g0\",\"g1\"]", "[1,3]") "]," ALLOC2 "}", &changed));
    CHECK(changed);
    CHECK_STREQ(events(&f, ev, sizeof(ev)), "MODIFIED PodResources a");
    /* g1 leaves the allocatable set but stays bound: Unhealthy, still listed. */
    CHECK_OK(sync_text(
        &f,
        "{\"pods\":[" POD_A("[\"g0\",\"g1\"]",
                            "[1,3]") "],\"devices\":[{"
                                     "\"resourceName\":\"example.com/gpu\",\"id\":\"g0\"}]}",
        &changed));
    CHECK_STREQ(events(&f, ev, sizeof(ev)), "MODIFIED Device g0;MODIFIED Device g1");
    CHECK_OK(store_devices_list(f.st, NULL, "Unhealthy", false, &out));
    d = json_array_get(json_object_get(out, "devices"), 0);
    CHECK_STREQ(json_string_value(json_object_get(d, "id")), "g1");
    CHECK_EQ_INT(
        json_integer_value(json_object_get(
            json_array_get(json_object_get(json_object_get(d, "topology"), "nodes"), 0), "ID")),
        1);
    json_decref(out);
    /* The pod goes: DELETED pod, g1 (not allocatable, unbound) DELETED, g0 freed. */
    CHECK_OK(sync_text(&f,
                       "{\"pods\":[],\"devices\":[{\"resourceName\":\"example.com/gpu\","
                       "\"id\":\"g0\"}]}",
                       &changed));
    CHECK_STREQ(events(&f, ev, sizeof(ev)),
                "DELETED PodResources a;DELETED Device g1;MODIFIED Device g0");
    CHECK_OK(store_pods_list(f.st, NULL, NULL, &out));
    CHECK_EQ_INT(json_array_size(json_object_get(out, "podResources")), 0);
    json_decref(out);
    fx_close(&f);
}

static void test_bad_snapshots(void)
{
    static const char *const bad[] = {
        "{}",
        "{\"pods\":[],\"devices\":{}}",
        "{\"pods\":[{\"namespace\":\"\",\"name\":\"a\",\"containers\":[]}],\"devices\":[]}",
        "{\"pods\":[{\"namespace\":\"n\",\"name\":\"a\"}],\"devices\":[]}",
        "{\"pods\":[{\"namespace\":\"n\",\"name\":\"a\",\"containers\":[{\"devices\":[]}]}],"
        "\"devices\":[]}",
        "{\"pods\":[{\"namespace\":\"n\",\"name\":\"a\",\"containers\":[{\"name\":\"c\","
        "\"devices\":[{\"resourceName\":\"r/x\",\"deviceIds\":[\"\"]}]}]}],\"devices\":[]}",
        "{\"pods\":[],\"devices\":[{\"resourceName\":\"r/x\"}]}",
        "{\"pods\":[3],\"devices\":[]}",
    };
    struct fx f;
    bool changed = true;
    size_t i;

    fx_open(&f);
    for (i = 0; i < ARRAY_SIZE(bad); i++) {
        changed = true;
        CHECK_EQ_INT(sync_text(&f, bad[i], &changed), ERR_INVAL);
        CHECK(!changed);
    }
    CHECK_EQ_INT(store_revision(f.st), 0);
    fx_close(&f);
}

/* A device listed for two containers stays with the first. */
static void test_double_listing(void)
{
    struct fx f;
    char ev[2048];
    bool changed;
    json_t *out = NULL;

    fx_open(&f);
    CHECK_OK(
        sync_text(&f,
                  "{\"pods\":[" POD_A(
                      "[\"g0\"]",
                      "[]") ",{\"namespace\":\"ml\",\"name\":"
                            "\"z\",\"containers\":[{\"name\":\"c\",\"devices\":[{\"resourceName\":"
                            "\"example.com/gpu\",\"deviceIds\":[\"g0\"]}]}]}]," ALLOC2 "}",
                  &changed));
    CHECK(changed);
    events(&f, ev, sizeof(ev));
    CHECK_OK(store_devices_list(f.st, NULL, NULL, false, &out));
    CHECK_STREQ(
        json_string_value(json_object_get(
            json_object_get(json_array_get(json_object_get(out, "devices"), 0), "holder"), "name")),
        "a");
    json_decref(out);
    out = NULL;
    /* the kubelet lists pods in no fixed order: the same pods the other way
     * round change nothing, and the device stays with "a" (its pod sorts
     * first) */
    CHECK_OK(sync_text(&f,
                       "{\"pods\":[{\"namespace\":\"ml\",\"name\":\"z\",\"containers\":[{\"name\":"
                       "\"c\",\"devices\":[{\"resourceName\":\"example.com/gpu\",\"deviceIds\":["
                       "\"g0\"]}]}]}," POD_A("[\"g0\"]", "[]") "]," ALLOC2 "}",
                       &changed));
    CHECK(!changed);
    CHECK_STREQ(events(&f, ev, sizeof(ev)), "");
    fx_close(&f);
}

/* A pod listed twice (an old and a new instance) is one pod with both's
 * containers (in the order of their text, as the List's order is none):
 * each device it holds is one it lists. */
static void test_pod_listed_twice(void)
{
    struct fx f;
    char ev[2048];
    bool changed;
    json_t *out = NULL, *d;
    size_t i;

    fx_open(&f);
    CHECK_OK(sync_text(
        &f, "{\"pods\":[" POD_A("[\"g0\"]", "[]") "," POD_A("[\"g1\"]", "[1]") "]," ALLOC2 "}",
        &changed));
    CHECK(changed);
    events(&f, ev, sizeof(ev));
    CHECK_OK(store_pod_get(f.st, "ml", "a", &out));
    d = json_object_get(json_object_get(out, "podResources"), "containers");
    CHECK_EQ_INT(json_array_size(d), 2);
    CHECK_STREQ(
        json_string_value(json_array_get(
            json_object_get(json_array_get(json_object_get(json_array_get(d, 0), "devices"), 0),
                            "deviceIds"),
            0)),
        "g1");
    CHECK_STREQ(
        json_string_value(json_array_get(
            json_object_get(json_array_get(json_object_get(json_array_get(d, 1), "devices"), 0),
                            "deviceIds"),
            0)),
        "g0");
    json_decref(out);
    out = NULL;
    CHECK_OK(store_devices_list(f.st, NULL, NULL, false, &out));
    json_array_foreach(json_object_get(out, "devices"), i, d)
        CHECK_STREQ(json_string_value(json_object_get(json_object_get(d, "holder"), "name")), "a");
    CHECK_EQ_INT(json_array_size(json_object_get(out, "devices")), 2);
    json_decref(out);
    /* the same answer again, and its pods the other way round: nothing
     * changes */
    CHECK_OK(sync_text(
        &f, "{\"pods\":[" POD_A("[\"g0\"]", "[]") "," POD_A("[\"g1\"]", "[1]") "]," ALLOC2 "}",
        &changed));
    CHECK(!changed);
    CHECK_OK(sync_text(
        &f, "{\"pods\":[" POD_A("[\"g1\"]", "[1]") "," POD_A("[\"g0\"]", "[]") "]," ALLOC2 "}",
        &changed));
    CHECK(!changed);
    fx_close(&f);
}

/* A database the write API used first has let-go bindings rows (schema 3:
 * pod ''). The reconcile neither takes them for bindings nor trips over
 * them when it binds their devices, and drops them with their devices. */
static void test_after_api_mode(void)
{
    struct fx f;
    char ev[2048];
    struct error e = {0};
    struct store_outcome did;
    struct store_stats stats;
    bool changed = false;
    json_t *b, *devs = NULL, *cs = NULL, *out = NULL;
    const char *uid = NULL;
    char *text = NULL;
    size_t len = 0;
    uint64_t ttl = 0;

    fx_open(&f);
    b = json_loads("{\"devices\":[{\"id\":\"g0\"},{\"id\":\"g1\"}]}", 0, NULL);
    CHECK_OK(validate_devices_put(b, &devs, &ttl, NULL));
    CHECK_OK(store_resource_put(f.st, "example.com/gpu", devs, 0, &e, &out, &changed));
    json_decref(out);
    json_decref(devs);
    json_decref(b);
    b = json_loads("{\"uid\":\"u\",\"containers\":[{\"name\":\"c\",\"devices\":[{\"resourceName\":"
                   "\"example.com/gpu\",\"deviceIds\":[\"g0\",\"g1\"]}]}]}",
                   0, NULL);
    CHECK_OK(validate_pod_put(b, &uid, &cs, NULL));
    CHECK_OK(store_pod_bind(f.st, &(struct store_pod){"api", "p", uid}, cs, &e, &text, &len, &did));
    free(text);
    json_decref(cs);
    json_decref(b);
    out = NULL;
    CHECK_OK(store_pod_release(f.st, &(struct store_pod){"api", "p", NULL}, 0, &e, &out));
    json_decref(out);
    events(&f, ev, sizeof(ev));
    /* now the kubelet's view: g0 held by ml/a, g1 not listed any more */
    CHECK_OK(sync_text(
        &f,
        "{\"pods\":[" POD_A(
            "[\"g0\"]", "[]") "],\"devices\":[{\"resourceName\":"
                              "\"example.com/gpu\",\"id\":\"g0\",\"topology\":{\"nodes\":[]}}]}",
        &changed));
    CHECK(changed);
    CHECK_STREQ(events(&f, ev, sizeof(ev)),
                "DELETED Device g1;ADDED PodResources a;MODIFIED Device g0");
    out = NULL;
    CHECK_OK(store_devices_list(f.st, NULL, NULL, false, &out));
    CHECK_EQ_INT(json_array_size(json_object_get(out, "devices")), 1);
    CHECK_STREQ(
        json_string_value(json_object_get(
            json_object_get(json_array_get(json_object_get(out, "devices"), 0), "holder"), "name")),
        "a");
    json_decref(out);
    out = NULL;
    CHECK_OK(store_stats(f.st, &stats));
    CHECK_EQ_INT(stats.bound_devices, 1);
    store_stats_release(&stats);
    /* the same snapshot again: nothing to do */
    CHECK_OK(sync_text(
        &f,
        "{\"pods\":[" POD_A(
            "[\"g0\"]", "[]") "],\"devices\":[{\"resourceName\":"
                              "\"example.com/gpu\",\"id\":\"g0\",\"topology\":{\"nodes\":[]}}]}",
        &changed));
    CHECK(!changed);
    fx_close(&f);
}

TEST_MAIN(test_first_and_same, test_changes_only, test_bad_snapshots, test_double_listing,
          test_pod_listed_twice, test_after_api_mode)
