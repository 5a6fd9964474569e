/* SPDX-License-Identifier: Apache-2.0 */
/* store_test.c - the SQLite store through store.h, with request bodies
 * validated by validate.h as the API does, and a feed attached to watch the
 * events every write publishes. */
#include "../../../common/common.h"
#include "../../../common/clock.h"
#include "../../../common/jsonx.h"
#include "../../../common/strbuf.h"
#include "../../../server/feed.h"
#include "../../../server/store.h"
#include "../../../server/store_int.h"
#include "../../../server/store_view.h"
#include "../../../server/validate.h"
#include "../test.h"

#include <inttypes.h>
#include <pthread.h>
#include <sqlite3.h>
#include <sys/wait.h>
#include <unistd.h>

#define GPU "example.com/gpu"
#define NIC "example.com/nic"

/* Four GPUs: 0 and 1 on NUMA node 0, 2 and 3 on node 1. */
#define FOUR_GPUS                                                                                  \
    "{\"devices\":[{\"id\":\"gpu-0\",\"topology\":{\"nodes\":[{\"ID\":0}]}},"                      \
    "{\"id\":\"gpu-1\",\"topology\":{\"nodes\":[{\"ID\":0}]}},"                                    \
    "{\"id\":\"gpu-2\",\"topology\":{\"nodes\":[{\"ID\":1}]}},"                                    \
    "{\"id\":\"gpu-3\",\"topology\":{\"nodes\":[{\"ID\":1}]},\"properties\":{\"model\":\"x\"}}]}"

struct fx {
    char dir[64];      /* temp directory */
    char path[128];    /* database file */
    struct store *st;  /* the store */
    struct feed *feed; /* attached feed */
    uint64_t cursor;   /* feed cursor */
    uint64_t last_rev; /* revision of the last event seen */
    char *buf;         /* feed buffer */
    size_t len, cap;   /* its use and size */
    char msg[512];     /* the last validation's message */
    struct error err;  /* the last write's error */
};

static void fx_attach_feed(struct fx *f)
{
    f->feed = feed_new(1024, store_revision(f->st));
    CHECK(f->feed != NULL);
    store_set_feed(f->st, f->feed);
    f->cursor = f->last_rev = store_revision(f->st);
}

static int fx_open(struct fx *f, uint64_t history)
{
    struct store_opts o = {.history = history};

    memset(f, 0, sizeof(*f));
    snprintf(f->dir, sizeof(f->dir), "/tmp/store_test.XXXXXX");
    if (!mkdtemp(f->dir)) {
        CHECK(!"mkdtemp");
        return -1;
    }
    snprintf(f->path, sizeof(f->path), "%s/podresd.db", f->dir);
    o.path = f->path;
    CHECK_OK(store_open(&o, &f->st));
    if (!f->st)
        return -1;
    fx_attach_feed(f);
    return 0;
}

/* Close the store (and feed) but keep the files. */
static void fx_close_store(struct fx *f)
{
    store_free(f->st);
    f->st = NULL;
    feed_free(f->feed);
    f->feed = NULL;
}

static void fx_close(struct fx *f)
{
    static const char *const sfx[] = {"", "-wal", "-shm", "-journal"};
    char p[200];
    size_t i;

    fx_close_store(f);
    for (i = 0; i < ARRAY_SIZE(sfx); i++) {
        snprintf(p, sizeof(p), "%s%s", f->path, sfx[i]);
        unlink(p);
    }
    CHECK_OK(rmdir(f->dir));
    free(f->buf);
    f->buf = NULL;
}

/* The key of an event's object: device id, or namespace/name. */
static void obj_key(const char *kind, const json_t *obj, char *out, size_t cap)
{
    if (strcmp(kind, "Device") == 0)
        snprintf(out, cap, "%s", json_string_value(json_object_get(obj, "id")));
    else
        snprintf(out, cap, "%s/%s", json_string_value(json_object_get(obj, "namespace")),
                 json_string_value(json_object_get(obj, "name")));
}

/* Summarise NDJSON lines as "TYPE Kind key;..." into 'out'; with 'chain'
 * check that revisions follow *last one by one and match the object's. */
static int summarise(const char *buf, size_t len, uint64_t *chain, char *out, size_t cap)
{
    size_t at = 0, n = 0, used = 0;

    out[0] = '\0';
    while (at < len) {
        const char *nl = memchr(buf + at, '\n', len - at);
        json_t *ev;
        char key[300];
        const char *kind;
        uint64_t rev;

        if (!nl) {
            CHECK(!"line without newline");
            break;
        }
        ev = json_loadb(buf + at, (size_t)(nl - buf - (ptrdiff_t)at), 0, NULL);
        CHECK(ev != NULL);
        if (!ev)
            break;
        kind = json_string_value(json_object_get(ev, "kind"));
        rev = (uint64_t)json_integer_value(json_object_get(ev, "revision"));
        obj_key(kind ? kind : "", json_object_get(ev, "object"), key, sizeof(key));
        if (chain) {
            if (rev != *chain + 1)
                CHECK_EQ_INT(rev, *chain + 1);
            if ((uint64_t)json_integer_value(
                    json_object_get(json_object_get(ev, "object"), "revision")) != rev)
                CHECK_EQ_INT(
                    json_integer_value(json_object_get(json_object_get(ev, "object"), "revision")),
                    rev);
            *chain = rev;
        }
        used += (size_t)snprintf(out + used, used < cap ? cap - used : 0, "%s%s %s %s",
                                 n ? ";" : "", json_string_value(json_object_get(ev, "type")),
                                 kind ? kind : "?", key);
        json_decref(ev);
        at = (size_t)(nl - buf) + 1;
        n++;
    }
    return (int)n;
}

/* Drain what the feed got since the last call; summary into 'out'. The
 * revisions must be consecutive and end at the store's revision. */
static int fx_events(struct fx *f, char *out, size_t cap)
{
    enum feed_read_result r;
    int n;

    f->len = 0;
    do {
        r = feed_read(f->feed, &f->cursor, NULL, &f->buf, &f->len, &f->cap);
    } while (r == FEED_GOT && f->cursor < feed_head(f->feed));
    CHECK(r == FEED_GOT || r == FEED_EMPTY);
    n = summarise(f->buf, f->len, &f->last_rev, out, cap);
    CHECK_EQ_INT(f->last_rev, store_revision(f->st));
    return n;
}

/* Drain at least 'min' events (checked as above). */
static void fx_some_events(struct fx *f, int min)
{
    char ev[4096];
    int n = fx_events(f, ev, sizeof(ev));

    CHECK(n >= min);
}

/* ---- writes through the validators ---- */

static json_t *J(const char *s)
{
    json_t *v = json_loads(s, 0, NULL);

    if (!v) {
        fprintf(stderr, "bad test JSON: %s\n", s);
        abort();
    }
    return v;
}

static err_t put_devices(struct fx *f, const char *resource, const char *body, bool *changed)
{
    json_t *b = J(body), *devs = NULL, *out = NULL;
    uint64_t ttl = 0;
    bool ch = false;
    err_t rc = validate_devices_put(b, &devs, &ttl, NULL);

    CHECK_OK(rc);
    if (!rc)
        rc = store_resource_put(f->st, resource, devs, ttl, &f->err, &out, &ch);
    if (!rc) {
        CHECK(json_is_array(json_object_get(out, "devices")));
        CHECK_EQ_INT(json_integer_value(json_object_get(out, "revision")), store_revision(f->st));
    }
    if (changed)
        *changed = ch;
    json_decref(out);
    json_decref(devs);
    json_decref(b);
    return rc;
}

/* PUT pod; *out (may be NULL) receives the podResources object. */
static err_t bind(struct fx *f, const char *ns, const char *name, const char *body, bool *created,
                  bool *changed, json_t **pod)
{
    json_t *b = J(body), *cs = NULL, *out = NULL;
    const char *uid = NULL;
    struct store_outcome did = {false, false};
    char *text = NULL;
    size_t len = 0;
    err_t rc = validate_pod_put(b, &uid, &cs, NULL);

    CHECK_OK(rc);
    f->err = (struct error){0};
    if (!rc)
        rc = store_pod_bind(f->st, &(struct store_pod){ns, name, uid}, cs, &f->err, &text, &len,
                            &did);
    if (!rc) {
        /* the answer is compact JSON text of exactly 'len' bytes */
        CHECK(text != NULL && strlen(text) == len);
        out = text ? json_loadb(text, len, 0, NULL) : NULL;
        CHECK(out != NULL);
        free(text);
    }
    if (!rc) {
        CHECK_EQ_INT(json_integer_value(json_object_get(out, "revision")), store_revision(f->st));
        if (pod)
            *pod = json_incref(json_object_get(out, "podResources"));
    }
    if (created)
        *created = did.created;
    if (changed)
        *changed = did.changed;
    json_decref(out);
    json_decref(cs);
    json_decref(b);
    return rc;
}

static err_t allocate(struct fx *f, const char *ns, const char *name, const char *body,
                      bool *created, bool *changed, json_t **pod)
{
    json_t *b = J(body), *req = NULL, *out = NULL;
    const char *uid = NULL;
    struct store_outcome did = {false, false};
    err_t rc = validate_allocate(b, &uid, &req, NULL);

    CHECK_OK(rc);
    f->err = (struct error){0};
    if (!rc)
        rc = store_pod_allocate(f->st, &(struct store_pod){ns, name, uid}, req, &f->err, &out,
                                &did);
    if (!rc) {
        CHECK_EQ_INT(json_integer_value(json_object_get(out, "revision")), store_revision(f->st));
        if (pod)
            *pod = json_incref(json_object_get(out, "podResources"));
    }
    if (created)
        *created = did.created;
    if (changed)
        *changed = did.changed;
    json_decref(out);
    json_decref(req);
    json_decref(b);
    return rc;
}

static err_t reserve(struct fx *f, const char *ns, const char *name, const char *body,
                     json_t **resv)
{
    json_t *b = J(body), *cs = NULL, *out = NULL;
    struct store_outcome did = {false, false};
    err_t rc = validate_reservation(b, &cs, NULL);

    CHECK_OK(rc);
    f->err = (struct error){0};
    if (!rc)
        rc = store_reservation_put(f->st, ns, name, cs, &f->err, &out, &did);
    if (!rc && resv)
        *resv = json_incref(json_object_get(out, "reservation"));
    json_decref(out);
    json_decref(cs);
    json_decref(b);
    return rc;
}

static err_t release(struct fx *f, const char *ns, const char *name, const char *uid)
{
    json_t *out = NULL;
    err_t rc;

    f->err = (struct error){0};
    rc = store_pod_release(f->st, &(struct store_pod){ns, name, uid}, 0, &f->err, &out);
    if (!rc)
        CHECK(json_is_object(json_object_get(out, "podResources")));
    json_decref(out);
    return rc;
}

/* ---- reads ---- */

/* A device of 'resource' from the devices list (new reference) or NULL. */
static json_t *device(struct fx *f, const char *resource, const char *id)
{
    json_t *list = NULL, *d, *found = NULL;
    size_t i;

    CHECK_OK(store_devices_list(f->st, resource, NULL, false, &list));
    json_array_foreach(json_object_get(list, "devices"), i, d) {
        if (strcmp(json_string_value(json_object_get(d, "id")), id) == 0)
            found = json_incref(d);
    }
    json_decref(list);
    return found;
}

/* "ns/name/container" of a device's holder, "-" when free, "missing" when not listed. */
static const char *holder(struct fx *f, const char *resource, const char *id, char *out, size_t cap)
{
    json_t *d = device(f, resource, id), *h;

    if (!d) {
        snprintf(out, cap, "missing");
        return out;
    }
    h = json_object_get(d, "holder");
    if (json_is_null(h))
        snprintf(out, cap, "-");
    else
        snprintf(out, cap, "%s/%s/%s", json_string_value(json_object_get(h, "namespace")),
                 json_string_value(json_object_get(h, "name")),
                 json_string_value(json_object_get(h, "container")));
    json_decref(d);
    return out;
}

static const char *health(struct fx *f, const char *resource, const char *id, char *out, size_t cap)
{
    json_t *d = device(f, resource, id);

    snprintf(out, cap, "%s", d ? json_string_value(json_object_get(d, "health")) : "missing");
    json_decref(d);
    return out;
}

/* "container:resource=id,id;..." of a PodResources. */
static const char *pod_devices(const json_t *pod, char *out, size_t cap)
{
    json_t *c, *g, *id;
    size_t i, j, k, n = 0;

    out[0] = '\0';
    json_array_foreach(json_object_get(pod, "containers"), i, c) {
        n += (size_t)snprintf(out + n, n < cap ? cap - n : 0, "%s%s:", i ? ";" : "",
                              json_string_value(json_object_get(c, "name")));
        json_array_foreach(json_object_get(c, "devices"), j, g) {
            n += (size_t)snprintf(out + n, n < cap ? cap - n : 0, "%s%s=", j ? " " : "",
                                  json_string_value(json_object_get(g, "resourceName")));
            json_array_foreach(json_object_get(g, "deviceIds"), k, id) {
                n += (size_t)snprintf(out + n, n < cap ? cap - n : 0, "%s%s", k ? "," : "",
                                      json_string_value(id));
            }
        }
    }
    return out;
}

static const char *resv_state(struct fx *f, const char *ns, const char *name, char *out, size_t cap)
{
    json_t *r = NULL;

    if (store_reservation_get(f->st, ns, name, &r) == ERR_NOTFOUND) {
        snprintf(out, cap, "missing");
        return out;
    }
    snprintf(out, cap, "%s",
             json_string_value(json_object_get(json_object_get(r, "reservation"), "state")));
    json_decref(r);
    return out;
}

/* ---- tests ---- */

static void quiet(void)
{
    CHECK_OK(log_setup("text", "err"));
}

static void test_open_schema(void)
{
    struct fx f;
    sqlite3 *db = NULL;
    sqlite3_stmt *s = NULL;
    int ver = -1;

    if (fx_open(&f, 100))
        return;
    CHECK_EQ_INT(store_revision(f.st), 0);
    CHECK(store_schema_version() >= 1);
    /* SQLite's memory statistics are off (a global mutex per malloc):
     * with them on, the open store's connections would count here */
    CHECK_EQ_INT(sqlite3_memory_used(), 0);
    {
        int sd = -1;

        CHECK_OK(db_prep(f.st->commit.db, &s, "PRAGMA secure_delete", NULL));
        if (sqlite3_step(s) == SQLITE_ROW)
            sd = sqlite3_column_int(s, 0);
        db_done(s);
        s = NULL;
        CHECK_EQ_INT(sd, 0);
    }
    CHECK_EQ_INT(sqlite3_open_v2(f.path, &db, SQLITE_OPEN_READONLY, NULL), SQLITE_OK);
    CHECK_EQ_INT(sqlite3_prepare_v2(db, "PRAGMA user_version", -1, &s, NULL), SQLITE_OK);
    if (sqlite3_step(s) == SQLITE_ROW)
        ver = sqlite3_column_int(s, 0);
    sqlite3_finalize(s);
    sqlite3_close(db);
    CHECK_EQ_INT(ver, store_schema_version());
    fx_close(&f);
}

static void test_register(void)
{
    struct fx f;
    char ev[1024], b[64];
    bool changed = false;
    json_t *d;

    if (fx_open(&f, 100))
        return;
    CHECK_OK(put_devices(&f, GPU, FOUR_GPUS, &changed));
    CHECK(changed);
    CHECK_EQ_INT(store_revision(f.st), 4);
    CHECK_EQ_INT(fx_events(&f, ev, sizeof(ev)), 4);
    CHECK_STREQ(ev, "ADDED Device gpu-0;ADDED Device gpu-1;ADDED Device gpu-2;ADDED Device gpu-3");
    d = device(&f, GPU, "gpu-3");
    CHECK(d != NULL);
    CHECK_STREQ(json_string_value(json_object_get(d, "health")), "Healthy");
    CHECK_STREQ(json_string_value(json_object_get(d, "resourceName")), GPU);
    CHECK_EQ_INT(
        json_integer_value(json_object_get(
            json_array_get(json_object_get(json_object_get(d, "topology"), "nodes"), 0), "ID")),
        1);
    CHECK_STREQ(json_string_value(json_object_get(json_object_get(d, "properties"), "model")), "x");
    CHECK(json_is_null(json_object_get(d, "holder")));
    CHECK(json_is_null(json_object_get(d, "reservedFor")));
    CHECK_EQ_INT(json_integer_value(json_object_get(d, "revision")), 4);
    json_decref(d);

    /* the same PUT again changes nothing */
    CHECK_OK(put_devices(&f, GPU, FOUR_GPUS, &changed));
    CHECK(!changed);
    CHECK_EQ_INT(store_revision(f.st), 4);
    CHECK_EQ_INT(fx_events(&f, ev, sizeof(ev)), 0);

    /* one device changes, one goes, one is new */
    CHECK_OK(put_devices(&f, GPU,
                         "{\"devices\":[{\"id\":\"gpu-0\",\"topology\":{\"nodes\":[{\"ID\":0}]}},"
                         "{\"id\":\"gpu-1\",\"health\":\"Unhealthy\",\"topology\":{\"nodes\":"
                         "[{\"ID\":0}]}},{\"id\":\"gpu-2\",\"topology\":{\"nodes\":[{\"ID\":1}]}},"
                         "{\"id\":\"gpu-4\"}]}",
                         &changed));
    CHECK(changed);
    CHECK_EQ_INT(store_revision(f.st), 7);
    CHECK_EQ_INT(fx_events(&f, ev, sizeof(ev)), 3);
    CHECK_STREQ(ev, "MODIFIED Device gpu-1;ADDED Device gpu-4;DELETED Device gpu-3");
    CHECK_STREQ(health(&f, GPU, "gpu-1", b, sizeof(b)), "Unhealthy");
    CHECK_STREQ(health(&f, GPU, "gpu-3", b, sizeof(b)), "missing");

    /* another resource is independent; health PATCH */
    CHECK_OK(put_devices(&f, NIC, "{\"devices\":[{\"id\":\"nic-0\"}]}", &changed));
    CHECK_STREQ(health(&f, GPU, "gpu-0", b, sizeof(b)), "Healthy");
    {
        json_t *out = NULL, *list = NULL;

        CHECK_OK(store_device_set_health(f.st, NIC, "nic-0", "Unhealthy", &f.err, &out));
        CHECK_STREQ(json_string_value(json_object_get(json_object_get(out, "device"), "health")),
                    "Unhealthy");
        json_decref(out);
        out = NULL;
        CHECK_EQ_INT(store_device_set_health(f.st, NIC, "nic-9", "Unhealthy", &f.err, &out),
                     ERR_NOTFOUND);
        CHECK(strstr(f.err.msg, "nic-9") != NULL);
        CHECK(out == NULL);
        CHECK_EQ_INT(fx_events(&f, ev, sizeof(ev)), 2);
        CHECK_STREQ(ev, "ADDED Device nic-0;MODIFIED Device nic-0");

        /* filters of the devices list; allocatable lists healthy devices only */
        CHECK_OK(store_devices_list(f.st, NULL, "Unhealthy", false, &list));
        CHECK_EQ_INT(json_array_size(json_object_get(list, "devices")), 2);
        CHECK_EQ_INT(json_integer_value(json_object_get(list, "revision")), store_revision(f.st));
        json_decref(list);
        CHECK_OK(store_devices_list(f.st, NIC, NULL, false, &list));
        CHECK_EQ_INT(json_array_size(json_object_get(list, "devices")), 1);
        json_decref(list);
        CHECK_OK(store_allocatable(f.st, &list));
        CHECK_EQ_INT(json_array_size(json_object_get(list, "devices")), 3); /* gpu-0,2,4 */
        CHECK_STREQ(
            json_string_value(json_array_get(
                json_object_get(json_array_get(json_object_get(list, "devices"), 0), "deviceIds"),
                0)),
            "gpu-0");
        json_decref(list);
    }
    fx_close(&f);
}

static void test_bind(void)
{
    struct fx f;
    char ev[1024], b[128], s[256];
    bool created = false, changed = false;
    json_t *pod = NULL, *list = NULL;
    struct store_stats stats;
    uint64_t rev;

    if (fx_open(&f, 100))
        return;
    CHECK_OK(put_devices(&f, GPU, FOUR_GPUS, NULL));
    CHECK_EQ_INT(fx_events(&f, ev, sizeof(ev)), 4);

    CHECK_OK(
        bind(&f, "default", "a",
             "{\"uid\":\"u1\",\"containers\":[{\"name\":\"main\",\"devices\":[{\"resourceName\":"
             "\"" GPU "\",\"deviceIds\":[\"gpu-2\",\"gpu-0\"]}],\"cpuIds\":[1]}]}",
             &created, &changed, &pod));
    CHECK(created && changed);
    CHECK_STREQ(pod_devices(pod, s, sizeof(s)), "main:" GPU "=gpu-0,gpu-2");
    CHECK_STREQ(json_string_value(json_object_get(pod, "uid")), "u1");
    /* the stored group carries the union of the devices' NUMA nodes */
    {
        json_t *g = json_array_get(
            json_object_get(json_array_get(json_object_get(pod, "containers"), 0), "devices"), 0);
        char *t = jsonx_dumps(json_object_get(g, "topology"));

        CHECK_STREQ(t, "{\"nodes\":[{\"ID\":0},{\"ID\":1}]}");
        free(t);
    }
    json_decref(pod);
    pod = NULL;
    CHECK_STREQ(holder(&f, GPU, "gpu-0", b, sizeof(b)), "default/a/main");
    CHECK_STREQ(holder(&f, GPU, "gpu-2", b, sizeof(b)), "default/a/main");
    CHECK_STREQ(holder(&f, GPU, "gpu-1", b, sizeof(b)), "-");
    {
        json_t *d = device(&f, GPU, "gpu-0");

        CHECK_STREQ(json_string_value(json_object_get(json_object_get(d, "holder"), "uid")), "u1");
        json_decref(d);
    }
    CHECK_EQ_INT(fx_events(&f, ev, sizeof(ev)), 3);
    CHECK_STREQ(ev, "ADDED PodResources default/a;MODIFIED Device gpu-0;MODIFIED Device gpu-2");

    /* the same bind again: no change, no new revision */
    rev = store_revision(f.st);
    CHECK_OK(
        bind(&f, "default", "a",
             "{\"uid\":\"u1\",\"containers\":[{\"name\":\"main\",\"devices\":[{\"resourceName\":"
             "\"" GPU "\",\"deviceIds\":[\"gpu-0\",\"gpu-2\"]}],\"cpuIds\":[1]}]}",
             &created, &changed, &pod));
    CHECK(!created && !changed);
    CHECK_EQ_INT(store_revision(f.st), rev);
    CHECK_EQ_INT(fx_events(&f, ev, sizeof(ev)), 0);
    /* ... and its answer is the pod as stored */
    CHECK_OK(store_pod_get(f.st, "default", "a", &list));
    CHECK(pod && list && json_equal(pod, json_object_get(list, "podResources")));
    json_decref(pod);
    json_decref(list);
    pod = list = NULL;

    /* the same uid with another free device: changed, not created */
    CHECK_OK(
        bind(&f, "default", "a",
             "{\"uid\":\"u1\",\"containers\":[{\"name\":\"main\",\"devices\":[{\"resourceName\":"
             "\"" GPU "\",\"deviceIds\":[\"gpu-3\",\"gpu-0\"]}],\"cpuIds\":[1]}]}",
             &created, &changed, NULL));
    CHECK(!created && changed);
    CHECK_STREQ(holder(&f, GPU, "gpu-2", b, sizeof(b)), "-");
    CHECK_STREQ(holder(&f, GPU, "gpu-3", b, sizeof(b)), "default/a/main");
    CHECK_EQ_INT(fx_events(&f, ev, sizeof(ev)), 3);
    CHECK_STREQ(ev, "MODIFIED PodResources default/a;MODIFIED Device gpu-3;MODIFIED Device gpu-2");
    CHECK_OK(
        bind(&f, "default", "a",
             "{\"uid\":\"u1\",\"containers\":[{\"name\":\"main\",\"devices\":[{\"resourceName\":"
             "\"" GPU "\",\"deviceIds\":[\"gpu-0\",\"gpu-2\"]}],\"cpuIds\":[1]}]}",
             &created, &changed, NULL));
    CHECK(!created && changed);
    CHECK_EQ_INT(fx_events(&f, ev, sizeof(ev)), 3);
    rev = store_revision(f.st);

    /* a device held by another pod: 409 naming the holder; nothing changes */
    CHECK_EQ_INT(bind(&f, "other", "b",
                      "{\"uid\":\"u2\",\"containers\":[{\"name\":\"c\",\"devices\":[{"
                      "\"resourceName\":\"" GPU "\",\"deviceIds\":[\"gpu-1\",\"gpu-2\"]}]}]}",
                      NULL, NULL, NULL),
                 ERR_CONFLICT);
    CHECK(strstr(f.err.msg, "default/a") != NULL);
    CHECK(strstr(f.err.msg, "gpu-2") != NULL);
    CHECK_EQ_INT(store_revision(f.st), rev);
    CHECK_STREQ(holder(&f, GPU, "gpu-1", b, sizeof(b)), "-");
    CHECK_EQ_INT(store_pod_get(f.st, "other", "b", &pod), ERR_NOTFOUND);

    /* an unknown device: 422 */
    CHECK_EQ_INT(bind(&f, "other", "b",
                      "{\"uid\":\"u2\",\"containers\":[{\"name\":\"c\",\"devices\":[{"
                      "\"resourceName\":\"" GPU "\",\"deviceIds\":[\"gpu-9\"]}]}]}",
                      NULL, NULL, NULL),
                 ERR_UNPROCESSABLE);
    CHECK(strstr(f.err.msg, "gpu-9") != NULL);
    CHECK_EQ_INT(bind(&f, "other", "b",
                      "{\"uid\":\"u2\",\"containers\":[{\"name\":\"c\",\"devices\":[{"
                      "\"resourceName\":\"vendor.io/fpga\",\"deviceIds\":[\"gpu-1\"]}]}]}",
                      NULL, NULL, NULL),
                 ERR_UNPROCESSABLE);
    CHECK_EQ_INT(store_revision(f.st), rev);
    CHECK_EQ_INT(fx_events(&f, ev, sizeof(ev)), 0);

    /* reads */
    CHECK_OK(store_pod_get(f.st, "default", "a", &pod));
    CHECK_STREQ(json_string_value(json_object_get(json_object_get(pod, "podResources"), "name")),
                "a");
    CHECK_EQ_INT(json_integer_value(json_object_get(pod, "revision")), rev);
    json_decref(pod);
    pod = NULL;
    CHECK_OK(bind(&f, "other", "b",
                  "{\"uid\":\"u2\",\"containers\":[{\"name\":\"c\",\"devices\":[{"
                  "\"resourceName\":\"" GPU "\",\"deviceIds\":[\"gpu-1\"]}]}]}",
                  &created, &changed, NULL));
    CHECK(created && changed);
    CHECK_OK(bind(&f, "other", "empty", "{\"containers\":[{\"name\":\"c\"}]}", NULL, NULL, NULL));
    CHECK_OK(store_pods_list(f.st, NULL, NULL, &list));
    CHECK_EQ_INT(json_array_size(json_object_get(list, "podResources")), 3);
    json_decref(list);
    CHECK_OK(store_pods_list(f.st, "other", NULL, &list));
    CHECK_EQ_INT(json_array_size(json_object_get(list, "podResources")), 2);
    json_decref(list);
    CHECK_OK(store_pods_list(f.st, NULL, GPU, &list));
    CHECK_EQ_INT(json_array_size(json_object_get(list, "podResources")), 2);
    json_decref(list);
    CHECK_OK(store_devices_list(f.st, GPU, NULL, true, &list));
    CHECK_EQ_INT(json_array_size(json_object_get(list, "devices")), 1); /* gpu-3 */
    json_decref(list);
    CHECK_OK(store_stats(f.st, &stats));
    CHECK_EQ_INT(stats.pods, 3);
    CHECK_EQ_INT(stats.bound_devices, 3);
    store_stats_release(&stats);

    /* a new uid for the same pod replaces the old instance */
    CHECK_OK(
        bind(&f, "default", "a",
             "{\"uid\":\"u9\",\"containers\":[{\"name\":\"main\",\"devices\":[{\"resourceName\":"
             "\"" GPU "\",\"deviceIds\":[\"gpu-3\"]}]}]}",
             &created, &changed, NULL));
    CHECK(created && changed);
    CHECK_STREQ(holder(&f, GPU, "gpu-0", b, sizeof(b)), "-");
    CHECK_STREQ(holder(&f, GPU, "gpu-3", b, sizeof(b)), "default/a/main");
    fx_some_events(&f, 4);
    fx_close(&f);
}

static void test_allocate(void)
{
    struct fx f;
    char ev[1024], s[256], b[128];
    bool created = false, changed = false;
    json_t *p1 = NULL, *p2 = NULL;
    uint64_t rev;

    if (fx_open(&f, 100))
        return;
    CHECK_OK(put_devices(&f, GPU, FOUR_GPUS, NULL));
    CHECK_OK(put_devices(&f, NIC, "{\"devices\":[{\"id\":\"nic-0\"},{\"id\":\"nic-1\"}]}", NULL));
    /* gpu-0 taken: node 0 has one free, node 1 two -> node 1 */
    CHECK_OK(bind(&f, "default", "a",
                  "{\"uid\":\"ua\",\"containers\":[{\"name\":\"c\",\"devices\":[{\"resourceName\":"
                  "\"" GPU "\",\"deviceIds\":[\"gpu-0\"]}]}]}",
                  NULL, NULL, NULL));
    fx_some_events(&f, 1);

    CHECK_OK(allocate(&f, "default", "x",
                      "{\"uid\":\"ux\",\"containers\":[{\"name\":\"c\",\"requests\":{\"" GPU
                      "\":2,\"" NIC "\":1}}]}",
                      &created, &changed, &p1));
    CHECK(created && changed);
    CHECK_STREQ(pod_devices(p1, s, sizeof(s)), "c:" GPU "=gpu-2,gpu-3 " NIC "=nic-0");
    CHECK_STREQ(holder(&f, GPU, "gpu-3", b, sizeof(b)), "default/x/c");
    CHECK_STREQ(holder(&f, NIC, "nic-0", b, sizeof(b)), "default/x/c");
    CHECK_EQ_INT(fx_events(&f, ev, sizeof(ev)), 4);
    CHECK_STREQ(ev, "ADDED PodResources default/x;MODIFIED Device gpu-2;MODIFIED Device gpu-3;"
                    "MODIFIED Device nic-0");

    /* again with the same uid and request: the same answer, nothing new */
    rev = store_revision(f.st);
    CHECK_OK(allocate(&f, "default", "x",
                      "{\"uid\":\"ux\",\"containers\":[{\"name\":\"c\",\"requests\":{\"" NIC
                      "\":1,\"" GPU "\":2}}]}",
                      &created, &changed, &p2));
    CHECK(!created && !changed);
    CHECK(json_equal(p1, p2));
    CHECK_EQ_INT(store_revision(f.st), rev);
    CHECK_EQ_INT(fx_events(&f, ev, sizeof(ev)), 0);
    json_decref(p2);
    p2 = NULL;

    /* same uid, another request: 409 */
    CHECK_EQ_INT(allocate(&f, "default", "x",
                          "{\"uid\":\"ux\",\"containers\":[{\"name\":\"c\",\"requests\":{\"" GPU
                          "\":1}}]}",
                          NULL, NULL, NULL),
                 ERR_CONFLICT);
    CHECK_EQ_INT(store_revision(f.st), rev);

    /* not enough: 409 with counts, atomically for the whole pod */
    CHECK_EQ_INT(allocate(&f, "default", "y",
                          "{\"uid\":\"uy\",\"containers\":[{\"name\":\"a\",\"requests\":{\"" NIC
                          "\":1}},{\"name\":\"b\",\"requests\":{\"" GPU "\":2}}]}",
                          NULL, NULL, NULL),
                 ERR_CONFLICT);
    CHECK(strstr(f.err.msg, "requested 2") != NULL);
    CHECK(strstr(f.err.msg, "available 1") != NULL);
    CHECK(strstr(f.err.msg, GPU) != NULL);
    CHECK_EQ_INT(store_revision(f.st), rev);
    CHECK_STREQ(holder(&f, NIC, "nic-1", b, sizeof(b)), "-");
    CHECK_EQ_INT(store_pod_get(f.st, "default", "y", &p2), ERR_NOTFOUND);

    /* a request of 0 takes nothing; two containers do not share a device */
    CHECK_OK(allocate(&f, "default", "z",
                      "{\"uid\":\"uz\",\"containers\":[{\"name\":\"a\",\"requests\":{\"" GPU
                      "\":0,\"" NIC "\":1}}]}",
                      NULL, NULL, &p2));
    CHECK_STREQ(pod_devices(p2, s, sizeof(s)), "a:" NIC "=nic-1");
    json_decref(p2);
    p2 = NULL;
    CHECK_OK(release(&f, "default", "z", NULL));
    CHECK_OK(release(&f, "default", "x", "ux"));
    CHECK_OK(allocate(&f, "default", "w",
                      "{\"uid\":\"uw\",\"containers\":[{\"name\":\"a\",\"requests\":{\"" GPU
                      "\":1}},{\"name\":\"b\",\"requests\":{\"" GPU "\":1}}]}",
                      NULL, NULL, &p2));
    /* gpu-1 is alone on node 0 now, node 1 has two: each container takes the first choice */
    CHECK_STREQ(pod_devices(p2, s, sizeof(s)), "a:" GPU "=gpu-1;b:" GPU "=gpu-2");
    json_decref(p2);
    json_decref(p1);
    fx_some_events(&f, 1);
    fx_close(&f);
}

static void test_numa_preference(void)
{
    struct fx f;
    char s[256];
    json_t *p = NULL;

    if (fx_open(&f, 100))
        return;
    /* node 0: gpu-a0 gpu-b0; node 1: gpu-a1 gpu-b1 gpu-c1; no topology: gpu-n */
    CHECK_OK(put_devices(&f, GPU,
                         "{\"devices\":[{\"id\":\"gpu-n\"},"
                         "{\"id\":\"gpu-c1\",\"topology\":{\"nodes\":[{\"ID\":1}]}},"
                         "{\"id\":\"gpu-b1\",\"topology\":{\"nodes\":[{\"ID\":1}]}},"
                         "{\"id\":\"gpu-a1\",\"topology\":{\"nodes\":[{\"ID\":1}]}},"
                         "{\"id\":\"gpu-b0\",\"topology\":{\"nodes\":[{\"ID\":0}]}},"
                         "{\"id\":\"gpu-a0\",\"topology\":{\"nodes\":[{\"ID\":0}]}}]}",
                         NULL));
    /* 2 fit on node 0 and node 1: the lower NUMA id */
    CHECK_OK(allocate(&f, "ns", "p1",
                      "{\"uid\":\"1\",\"containers\":[{\"name\":\"c\",\"requests\":"
                      "{\"" GPU "\":2}}]}",
                      NULL, NULL, &p));
    CHECK_STREQ(pod_devices(p, s, sizeof(s)), "c:" GPU "=gpu-a0,gpu-b0");
    {
        json_t *g = json_array_get(
            json_object_get(json_array_get(json_object_get(p, "containers"), 0), "devices"), 0);
        char *t = jsonx_dumps(json_object_get(g, "topology"));

        CHECK_STREQ(t, "{\"nodes\":[{\"ID\":0}]}");
        free(t);
    }
    json_decref(p);
    p = NULL;
    /* 2 more: only node 1 has two */
    CHECK_OK(allocate(&f, "ns", "p2",
                      "{\"uid\":\"2\",\"containers\":[{\"name\":\"c\",\"requests\":"
                      "{\"" GPU "\":2}}]}",
                      NULL, NULL, &p));
    CHECK_STREQ(pod_devices(p, s, sizeof(s)), "c:" GPU "=gpu-a1,gpu-b1");
    json_decref(p);
    p = NULL;
    /* 1 more: node 1 before the device without topology */
    CHECK_OK(allocate(&f, "ns", "p3",
                      "{\"uid\":\"3\",\"containers\":[{\"name\":\"c\",\"requests\":"
                      "{\"" GPU "\":1}}]}",
                      NULL, NULL, &p));
    CHECK_STREQ(pod_devices(p, s, sizeof(s)), "c:" GPU "=gpu-c1");
    json_decref(p);
    p = NULL;
    CHECK_OK(allocate(&f, "ns", "p4",
                      "{\"uid\":\"4\",\"containers\":[{\"name\":\"c\",\"requests\":"
                      "{\"" GPU "\":1}}]}",
                      NULL, NULL, &p));
    CHECK_STREQ(pod_devices(p, s, sizeof(s)), "c:" GPU "=gpu-n");
    json_decref(p);
    fx_some_events(&f, 1);
    fx_close(&f);
}

static void test_reservations(void)
{
    struct fx f;
    char ev[1024], s[256], b[128];
    json_t *p = NULL, *r = NULL, *list = NULL;

    if (fx_open(&f, 100))
        return;
    CHECK_OK(put_devices(&f, GPU, FOUR_GPUS, NULL));
    CHECK_EQ_INT(fx_events(&f, ev, sizeof(ev)), 4);

    /* pre-assign gpu-1 to ns/r: Pending, the device shows reservedFor */
    CHECK_OK(reserve(&f, "ns", "r",
                     "{\"containers\":[{\"name\":\"c\",\"devices\":[{\"resourceName\":\"" GPU
                     "\",\"deviceIds\":[\"gpu-1\"]}]}]}",
                     &r));
    CHECK_STREQ(json_string_value(json_object_get(r, "state")), "Pending");
    json_decref(r);
    r = NULL;
    CHECK_EQ_INT(fx_events(&f, ev, sizeof(ev)), 2);
    CHECK_STREQ(ev, "ADDED Reservation ns/r;MODIFIED Device gpu-1");
    {
        json_t *d = device(&f, GPU, "gpu-1");

        CHECK_STREQ(json_string_value(json_object_get(json_object_get(d, "reservedFor"), "name")),
                    "r");
        json_decref(d);
    }
    CHECK_OK(store_devices_list(f.st, GPU, NULL, true, &list));
    CHECK_EQ_INT(json_array_size(json_object_get(list, "devices")), 3);
    json_decref(list);

    /* another pod's allocate avoids it: node 0 keeps only gpu-0 -> node 1 */
    CHECK_OK(allocate(&f, "ns", "other",
                      "{\"uid\":\"o\",\"containers\":[{\"name\":\"c\","
                      "\"requests\":{\"" GPU "\":2}}]}",
                      NULL, NULL, &p));
    CHECK_STREQ(pod_devices(p, s, sizeof(s)), "c:" GPU "=gpu-2,gpu-3");
    json_decref(p);
    p = NULL;
    CHECK_EQ_INT(fx_events(&f, ev, sizeof(ev)), 3);
    CHECK_STREQ(ev, "ADDED PodResources ns/other;MODIFIED Device gpu-2;MODIFIED Device gpu-3");
    /* and a bind by another pod is refused, naming the reservation */
    CHECK_EQ_INT(bind(&f, "ns", "thief",
                      "{\"uid\":\"t\",\"containers\":[{\"name\":\"c\",\"devices\":[{"
                      "\"resourceName\":\"" GPU "\",\"deviceIds\":[\"gpu-1\"]}]}]}",
                      NULL, NULL, NULL),
                 ERR_CONFLICT);
    CHECK(strstr(f.err.msg, "ns/r") != NULL);

    /* the pod's own allocate uses its reservation as written */
    CHECK_OK(allocate(&f, "ns", "r",
                      "{\"uid\":\"ur\",\"containers\":[{\"name\":\"c\","
                      "\"requests\":{\"" GPU "\":1}}]}",
                      NULL, NULL, &p));
    CHECK_STREQ(pod_devices(p, s, sizeof(s)), "c:" GPU "=gpu-1");
    json_decref(p);
    p = NULL;
    CHECK_STREQ(resv_state(&f, "ns", "r", b, sizeof(b)), "Bound");
    CHECK_STREQ(holder(&f, GPU, "gpu-1", b, sizeof(b)), "ns/r/c");
    CHECK_EQ_INT(fx_events(&f, ev, sizeof(ev)), 3);
    CHECK_STREQ(ev, "ADDED PodResources ns/r;MODIFIED Device gpu-1;MODIFIED Reservation ns/r");

    /* a reservation of a device bound elsewhere: 409 naming the holder */
    CHECK_EQ_INT(reserve(&f, "ns", "late",
                         "{\"containers\":[{\"name\":\"c\",\"devices\":[{\"resourceName\":\"" GPU
                         "\",\"deviceIds\":[\"gpu-2\"]}]}]}",
                         NULL),
                 ERR_CONFLICT);
    CHECK(strstr(f.err.msg, "ns/other") != NULL);
    /* ... or reserved for another pod */
    CHECK_EQ_INT(reserve(&f, "ns", "late",
                         "{\"containers\":[{\"name\":\"c\",\"devices\":[{\"resourceName\":\"" GPU
                         "\",\"deviceIds\":[\"gpu-1\"]}]}]}",
                         NULL),
                 ERR_CONFLICT);
    CHECK_STREQ(resv_state(&f, "ns", "late", b, sizeof(b)), "missing");
    CHECK_EQ_INT(fx_events(&f, ev, sizeof(ev)), 0);

    /* Conflict: ns/z reserved gpu-0 but is bound elsewhere */
    CHECK_OK(release(&f, "ns", "other", NULL));
    CHECK_OK(reserve(&f, "ns", "z",
                     "{\"containers\":[{\"name\":\"c\",\"devices\":[{\"resourceName\":\"" GPU
                     "\",\"deviceIds\":[\"gpu-0\"]}]}]}",
                     NULL));
    CHECK_STREQ(resv_state(&f, "ns", "z", b, sizeof(b)), "Pending");
    CHECK_OK(bind(&f, "ns", "z",
                  "{\"uid\":\"z\",\"containers\":[{\"name\":\"c\",\"devices\":[{"
                  "\"resourceName\":\"" GPU "\",\"deviceIds\":[\"gpu-3\"]}]}]}",
                  NULL, NULL, NULL));
    CHECK_STREQ(resv_state(&f, "ns", "z", b, sizeof(b)), "Conflict");
    {
        json_t *one = NULL;

        CHECK_OK(store_reservation_get(f.st, "ns", "z", &one));
        CHECK(strstr(json_string_value(
                         json_object_get(json_object_get(one, "reservation"), "message")),
                     "gpu-3") != NULL);
        json_decref(one);
    }
    /* released: Pending again */
    CHECK_OK(release(&f, "ns", "z", "z"));
    CHECK_STREQ(resv_state(&f, "ns", "z", b, sizeof(b)), "Pending");
    /* a reserved device that turns Unhealthy: Conflict */
    {
        json_t *out = NULL;

        CHECK_OK(store_device_set_health(f.st, GPU, "gpu-0", "Unhealthy", &f.err, &out));
        json_decref(out);
    }
    CHECK_STREQ(resv_state(&f, "ns", "z", b, sizeof(b)), "Conflict");

    CHECK_OK(store_reservations_list(f.st, &list));
    CHECK_EQ_INT(json_array_size(json_object_get(list, "reservations")), 2);
    json_decref(list);
    {
        json_t *out = NULL;

        CHECK_OK(store_reservation_delete(f.st, "ns", "z", 0, &f.err, &out));
        json_decref(out);
        out = NULL;
        CHECK_EQ_INT(store_reservation_delete(f.st, "ns", "z", 0, &f.err, &out), ERR_NOTFOUND);
    }
    CHECK_STREQ(resv_state(&f, "ns", "z", b, sizeof(b)), "missing");
    {
        json_t *d = device(&f, GPU, "gpu-0");

        CHECK(json_is_null(json_object_get(d, "reservedFor")));
        json_decref(d);
    }
    fx_some_events(&f, 1);
    fx_close(&f);
}

/* A store with FOUR_GPUS and pod ns/a (uid ua, container c) bound to the
 * GPUs of 'ids' (a JSON array), its events read; 0, or -1 when it cannot
 * be opened. */
static int fx_bound_a(struct fx *f, const char *ids)
{
    char body[256];

    if (fx_open(f, 100))
        return -1;
    CHECK_OK(put_devices(f, GPU, FOUR_GPUS, NULL));
    snprintf(body, sizeof(body),
             "{\"uid\":\"ua\",\"containers\":[{\"name\":\"c\",\"devices\":[{\"resourceName\":"
             "\"" GPU "\",\"deviceIds\":%s}]}]}",
             ids);
    CHECK_OK(bind(f, "ns", "a", body, NULL, NULL, NULL));
    fx_some_events(f, 1);
    return 0;
}

static void test_release(void)
{
    struct fx f;
    char ev[1024], b[128];
    uint64_t rev;

    if (fx_bound_a(&f, "[\"gpu-0\"]"))
        return;
    rev = store_revision(f.st);
    CHECK_EQ_INT(release(&f, "ns", "nobody", NULL), ERR_NOTFOUND);
    CHECK(strstr(f.err.msg, "ns/nobody") != NULL);
    CHECK_EQ_INT(release(&f, "ns", "a", "other-uid"), ERR_CONFLICT);
    CHECK(strstr(f.err.msg, "ua") != NULL);
    CHECK_EQ_INT(store_revision(f.st), rev);
    CHECK_STREQ(holder(&f, GPU, "gpu-0", b, sizeof(b)), "ns/a/c");
    CHECK_OK(release(&f, "ns", "a", "ua"));
    CHECK_STREQ(holder(&f, GPU, "gpu-0", b, sizeof(b)), "-");
    CHECK_EQ_INT(fx_events(&f, ev, sizeof(ev)), 2);
    CHECK_STREQ(ev, "DELETED PodResources ns/a;MODIFIED Device gpu-0");
    CHECK_EQ_INT(release(&f, "ns", "a", NULL), ERR_NOTFOUND);
    fx_close(&f);
}

/* The write path's event objects are written as text (st_device_text,
 * st_pod_text); they must be byte for byte what serialising the json_t views
 * gives, for every shape a row can take. */
static void check_device_text(struct fx *f, const char *id)
{
    struct jsonw w = JSONW_INIT, want = JSONW_INIT;
    json_t *obj = NULL;

    CHECK_OK(st_device_json(f->st->commit.db, GPU, id, &obj));
    jsonw_json(&want, obj);
    CHECK_OK(st_device_text(f->st->commit.db, GPU, id, 0, &w));
    CHECK(w.sb.buf && want.sb.buf && strcmp(w.sb.buf, want.sb.buf) == 0);
    if (w.sb.buf && want.sb.buf && strcmp(w.sb.buf, want.sb.buf) != 0)
        fprintf(stderr, "# text %s\n# json %s\n", w.sb.buf, want.sb.buf);
    jsonw_release(&w);
    jsonw_release(&want);
    json_decref(obj);
}

static void test_event_text(void)
{
    struct fx f;
    struct jsonw w = JSONW_INIT, want = JSONW_INIT;
    json_t *obj = NULL, *r = NULL;
    sqlite3_stmt *s = NULL;
    bool row = false;
    const char *ids[] = {"gpu-0", "gpu-1", "gpu-2", "gpu-3", "gpu-4"};
    size_t i;

    if (fx_open(&f, 100))
        return;
    CHECK_OK(
        put_devices(&f, GPU,
                    "{\"devices\":[{\"id\":\"gpu-0\",\"topology\":{\"nodes\":[{\"ID\":0},{\"ID\":"
                    "12}]}},{\"id\":\"gpu-1\"},{\"id\":\"gpu-2\",\"properties\":{\"b\":\"q\\\"\\\\"
                    "\\n\\u0001\",\"a\":\"caf\\u00e9\"}},{\"id\":\"gpu-3\"},{\"id\":\"gpu-4\"}]}",
                    NULL));
    CHECK_OK(bind(&f, "ns", "a",
                  "{\"uid\":\"u-a\",\"containers\":[{\"name\":\"c\",\"devices\":[{"
                  "\"resourceName\":\"" GPU "\",\"deviceIds\":[\"gpu-0\",\"gpu-2\"]}]}]}",
                  NULL, NULL, NULL));
    CHECK_OK(reserve(&f, "ns", "r",
                     "{\"containers\":[{\"name\":\"c\",\"devices\":[{\"resourceName\":\"" GPU
                     "\",\"deviceIds\":[\"gpu-1\"]}]}]}",
                     &r));
    json_decref(r);
    /* a NUMA list in a shape jsonx_dumps never writes takes the slow path */
    CHECK_OK(
        db_exec(f.st->commit.db, "UPDATE devices SET numa=? WHERE id=?", "tt", "[ 3 ,4]", "gpu-3"));
    CHECK_OK(db_exec(f.st->commit.db, "UPDATE devices SET numa=? WHERE id=?", "tt", "[]", "gpu-4"));
    for (i = 0; i < ARRAY_SIZE(ids); i++)
        check_device_text(&f, ids[i]);
    CHECK_EQ_INT(st_device_text(f.st->commit.db, GPU, "gpu-9", 0, &w), ERR_NOTFOUND);
    /* a DELETED event's revision stands in for the row's */
    CHECK_OK(st_device_text(f.st->commit.db, GPU, "gpu-1", 987, &w));
    CHECK(w.sb.buf && strstr(w.sb.buf, ",\"revision\":987}") != NULL);
    jsonw_release(&w);

    /* the pod object from its stored columns */
    CHECK_OK(st_pod_json(f.st->commit.db, "ns", "a", &obj));
    jsonw_json(&want, obj);
    CHECK_OK(db_prep(f.st->commit.db, &s,
                     "SELECT uid,containers,revision FROM pods WHERE namespace='ns' AND name='a'",
                     ""));
    CHECK_OK(db_step(f.st->commit.db, s, &row));
    CHECK(row);
    if (row)
        st_pod_text(&w, "ns", "a", db_text(s, 0), db_text(s, 1),
                    (uint64_t)sqlite3_column_int64(s, 2));
    db_done(s);
    CHECK(w.sb.buf && want.sb.buf && strcmp(w.sb.buf, want.sb.buf) == 0);
    jsonw_release(&w);
    jsonw_release(&want);
    json_decref(obj);
    fx_close(&f);
}

/* Drain the feed and check every Device event against the row: a MODIFIED
 * object is byte for byte the device's view now (each write gives a device
 * one event at most); after DELETED the row is gone. Summary into 'out'. */
static void check_device_events(struct fx *f, char *out, size_t cap)
{
    size_t at;

    fx_events(f, out, cap);
    for (at = 0; at < f->len;) {
        const char *line = f->buf + at, *nl = memchr(line, '\n', f->len - at);
        const char *obj = nl ? strstr(line, "\"object\":") : NULL;
        json_t *ev = nl ? json_loadb(line, (size_t)(nl - line), 0, NULL) : NULL;
        json_t *o = json_object_get(ev, "object");
        const char *type = json_string_value(json_object_get(ev, "type"));
        const char *res = json_string_value(json_object_get(o, "resourceName"));
        const char *id = json_string_value(json_object_get(o, "id"));
        struct jsonw w = JSONW_INIT;
        err_t rc;

        CHECK(ev != NULL && obj != NULL && obj < nl);
        if (!ev || !obj || obj >= nl) {
            json_decref(ev);
            break;
        }
        obj += strlen("\"object\":");
        if (strcmp(json_string_value(json_object_get(ev, "kind")), "Device") == 0) {
            rc = st_device_text(f->st->commit.db, res, id, 0, &w);
            if (strcmp(type, "DELETED") == 0) {
                CHECK_EQ_INT(rc, ERR_NOTFOUND);
                CHECK(json_is_null(json_object_get(o, "holder")));
            } else {
                CHECK_OK(rc);
                CHECK(!rc && w.sb.len == (size_t)(nl - obj - 1) &&
                      memcmp(w.sb.buf, obj, w.sb.len) == 0);
                if (!rc &&
                    (w.sb.len != (size_t)(nl - obj - 1) || memcmp(w.sb.buf, obj, w.sb.len) != 0))
                    fprintf(stderr, "# event %.*s\n# view  %s\n", (int)(nl - obj - 1), obj,
                            w.sb.buf);
            }
        }
        jsonw_release(&w);
        json_decref(ev);
        at = (size_t)(nl - f->buf) + 1;
    }
}

/* Binds read each device they move in the UPDATE that bumps its revision
 * and write its event from that and the holder they know: the events must
 * be what the view of the row says, holder, reservation and all. */
static void test_rebind_event_text(void)
{
    struct fx f;
    json_t *r = NULL;
    char ev[2048];

    if (fx_open(&f, 100))
        return;
    CHECK_OK(
        put_devices(&f, GPU,
                    "{\"devices\":[{\"id\":\"gpu-0\",\"topology\":{\"nodes\":[{\"ID\":0},{\"ID\":"
                    "12}]}},{\"id\":\"gpu-1\",\"properties\":{\"b\":\"q\\\"\\\\\\n\",\"a\":"
                    "\"caf\\u00e9\"}},{\"id\":\"gpu-2\"},{\"id\":\"gpu-3\"}]}",
                    NULL));
    CHECK_OK(reserve(&f, "ns", "r",
                     "{\"containers\":[{\"name\":\"c\",\"devices\":[{\"resourceName\":\"" GPU
                     "\",\"deviceIds\":[\"gpu-1\"]}]}]}",
                     &r));
    json_decref(r);
    fx_some_events(&f, 1);
    /* held and reserved for the same pod */
    CHECK_OK(bind(&f, "ns", "r",
                  "{\"uid\":\"u1\",\"containers\":[{\"name\":\"c\",\"devices\":[{"
                  "\"resourceName\":\"" GPU "\",\"deviceIds\":[\"gpu-1\",\"gpu-0\"]}]}]}",
                  NULL, NULL, NULL));
    check_device_events(&f, ev, sizeof(ev));
    CHECK_STREQ(ev, "ADDED PodResources ns/r;MODIFIED Device gpu-0;MODIFIED Device gpu-1;"
                    "MODIFIED Reservation ns/r");
    /* a new uid: every device again, one moves to another container */
    CHECK_OK(bind(&f, "ns", "r",
                  "{\"uid\":\"u2\",\"containers\":[{\"name\":\"c\",\"devices\":[{"
                  "\"resourceName\":\"" GPU "\",\"deviceIds\":[\"gpu-1\"]}]},{\"name\":\"d\","
                  "\"devices\":[{\"resourceName\":\"" GPU "\",\"deviceIds\":[\"gpu-0\"]}]}]}",
                  NULL, NULL, NULL));
    check_device_events(&f, ev, sizeof(ev));
    CHECK_STREQ(ev, "MODIFIED PodResources ns/r;MODIFIED Device gpu-1;MODIFIED Device gpu-0;"
                    "MODIFIED Reservation ns/r");
    /* gpu-1 let go, still reserved; gpu-0 stays; gpu-2 taken */
    CHECK_OK(bind(&f, "ns", "r",
                  "{\"uid\":\"u2\",\"containers\":[{\"name\":\"d\",\"devices\":[{"
                  "\"resourceName\":\"" GPU "\",\"deviceIds\":[\"gpu-0\",\"gpu-2\"]}]}]}",
                  NULL, NULL, NULL));
    check_device_events(&f, ev, sizeof(ev));
    CHECK_STREQ(ev, "MODIFIED PodResources ns/r;MODIFIED Device gpu-2;MODIFIED Device gpu-1;"
                    "MODIFIED Reservation ns/r");
    /* gpu-2 leaves the set while bound; let go, it is DELETED */
    CHECK_OK(put_devices(
        &f, GPU, "{\"devices\":[{\"id\":\"gpu-0\"},{\"id\":\"gpu-1\"},{\"id\":\"gpu-3\"}]}", NULL));
    check_device_events(&f, ev, sizeof(ev));
    CHECK_OK(bind(&f, "ns", "r",
                  "{\"uid\":\"u2\",\"containers\":[{\"name\":\"d\",\"devices\":[{"
                  "\"resourceName\":\"" GPU "\",\"deviceIds\":[\"gpu-0\",\"gpu-3\"]}]}]}",
                  NULL, NULL, NULL));
    check_device_events(&f, ev, sizeof(ev));
    CHECK_STREQ(ev, "MODIFIED PodResources ns/r;MODIFIED Device gpu-3;DELETED Device gpu-2;"
                    "MODIFIED Reservation ns/r");
    /* release: every device let go */
    CHECK_OK(release(&f, "ns", "r", NULL));
    check_device_events(&f, ev, sizeof(ev));
    CHECK_STREQ(ev, "DELETED PodResources ns/r;MODIFIED Device gpu-0;MODIFIED Device gpu-3;"
                    "MODIFIED Reservation ns/r");
    fx_close(&f);
}

static void test_removed_bound_device(void)
{
    struct fx f;
    char ev[1024], b[128];

    if (fx_open(&f, 100))
        return;
    CHECK_OK(put_devices(&f, GPU, FOUR_GPUS, NULL));
    CHECK_OK(bind(&f, "ns", "a",
                  "{\"uid\":\"ua\",\"containers\":[{\"name\":\"c\",\"devices\":[{\"resourceName\":"
                  "\"" GPU "\",\"deviceIds\":[\"gpu-3\"]}]}]}",
                  NULL, NULL, NULL));
    fx_some_events(&f, 1);
    /* gpu-3 leaves the set while bound: listed Unhealthy, still held */
    CHECK_OK(put_devices(&f, GPU,
                         "{\"devices\":[{\"id\":\"gpu-0\",\"topology\":{\"nodes\":[{\"ID\":0}]}},"
                         "{\"id\":\"gpu-1\",\"topology\":{\"nodes\":[{\"ID\":0}]}},"
                         "{\"id\":\"gpu-2\",\"topology\":{\"nodes\":[{\"ID\":1}]}}]}",
                         NULL));
    CHECK_EQ_INT(fx_events(&f, ev, sizeof(ev)), 1);
    CHECK_STREQ(ev, "MODIFIED Device gpu-3");
    CHECK_STREQ(health(&f, GPU, "gpu-3", b, sizeof(b)), "Unhealthy");
    CHECK_STREQ(holder(&f, GPU, "gpu-3", b, sizeof(b)), "ns/a/c");
    /* not allocatable, not bindable by others */
    {
        json_t *list = NULL;

        CHECK_OK(store_allocatable(f.st, &list));
        CHECK_EQ_INT(json_array_size(json_object_get(list, "devices")), 3);
        json_decref(list);
    }
    /* listed, held by ns/a: 409 as any held device, not 422 "unknown" */
    CHECK_EQ_INT(bind(&f, "ns", "b",
                      "{\"uid\":\"ub\",\"containers\":[{\"name\":\"c\",\"devices\":[{"
                      "\"resourceName\":\"" GPU "\",\"deviceIds\":[\"gpu-3\"]}]}]}",
                      NULL, NULL, NULL),
                 ERR_CONFLICT);
    /* the same PUT again changes nothing */
    {
        uint64_t rev = store_revision(f.st);
        bool changed = true;

        CHECK_OK(
            put_devices(&f, GPU,
                        "{\"devices\":[{\"id\":\"gpu-0\",\"topology\":{\"nodes\":[{\"ID\":0}]}},"
                        "{\"id\":\"gpu-1\",\"topology\":{\"nodes\":[{\"ID\":0}]}},"
                        "{\"id\":\"gpu-2\",\"topology\":{\"nodes\":[{\"ID\":1}]}}]}",
                        &changed));
        CHECK(!changed);
        CHECK_EQ_INT(store_revision(f.st), rev);
    }
    /* released: gone */
    CHECK_OK(release(&f, "ns", "a", NULL));
    CHECK_STREQ(health(&f, GPU, "gpu-3", b, sizeof(b)), "missing");
    CHECK_EQ_INT(fx_events(&f, ev, sizeof(ev)), 2);
    CHECK_STREQ(ev, "DELETED PodResources ns/a;DELETED Device gpu-3");
    fx_close(&f);
}

/* The single integer 'sql' gives on the write connection, -1 on an error
 * (no CHECK here: it is called inside CHECKs). */
static int64_t sql_int(struct fx *f, const char *sql)
{
    sqlite3_stmt *s = NULL;
    int64_t v = -1;

    if (db_prep(f->st->commit.db, &s, sql, NULL) == ERR_OK && sqlite3_step(s) == SQLITE_ROW)
        v = sqlite3_column_int64(s, 0);
    db_done(s);
    return v;
}

/* A held device already Unhealthy leaves its set: nothing a reader sees
 * changes, so no event and no revision; registered again as listed, the
 * same; then released, it stays (registered), where a removed one goes. */
static void test_removed_unhealthy_device(void)
{
    static const char *const three =
        "{\"devices\":[{\"id\":\"gpu-0\",\"topology\":{\"nodes\":[{\"ID\":0}]}},"
        "{\"id\":\"gpu-1\",\"topology\":{\"nodes\":[{\"ID\":0}]}},"
        "{\"id\":\"gpu-2\",\"topology\":{\"nodes\":[{\"ID\":1}]}}]}";
    struct fx f;
    json_t *out = NULL;
    uint64_t rev;
    char ev[1024], b[128], *again;
    size_t n;

    if (fx_bound_a(&f, "[\"gpu-3\"]"))
        return;
    CHECK_OK(store_device_set_health(f.st, GPU, "gpu-3", "Unhealthy", &f.err, &out));
    json_decref(out);
    fx_some_events(&f, 1);
    rev = store_revision(f.st);
    CHECK_OK(put_devices(&f, GPU, three, NULL));
    CHECK_EQ_INT(fx_events(&f, ev, sizeof(ev)), 0);
    CHECK_EQ_INT(store_revision(f.st), rev);
    CHECK_STREQ(health(&f, GPU, "gpu-3", b, sizeof(b)), "Unhealthy");
    CHECK_STREQ(holder(&f, GPU, "gpu-3", b, sizeof(b)), "ns/a/c");
    CHECK_EQ_INT(sql_int(&f, "SELECT removed FROM devices WHERE id='gpu-3'"), 1);
    /* registered again as listed (Unhealthy, same topology and properties) */
    n = strlen(three);
    again = malloc(n + 100);
    CHECK(again != NULL);
    if (!again) {
        fx_close(&f);
        return;
    }
    snprintf(
        again, n + 100,
        "%.*s,{\"id\":\"gpu-3\",\"health\":\"Unhealthy\",\"topology\":{\"nodes\":[{\"ID\":1}]},"
        "\"properties\":{\"model\":\"x\"}}]}",
        (int)(n - 2), three);
    CHECK_OK(put_devices(&f, GPU, again, NULL));
    free(again);
    CHECK_EQ_INT(fx_events(&f, ev, sizeof(ev)), 0);
    CHECK_EQ_INT(store_revision(f.st), rev);
    CHECK_EQ_INT(sql_int(&f, "SELECT removed FROM devices WHERE id='gpu-3'"), 0);
    /* released: registered, so it stays, free */
    CHECK_OK(release(&f, "ns", "a", NULL));
    CHECK_EQ_INT(fx_events(&f, ev, sizeof(ev)), 2);
    CHECK_STREQ(ev, "DELETED PodResources ns/a;MODIFIED Device gpu-3");
    CHECK_STREQ(health(&f, GPU, "gpu-3", b, sizeof(b)), "Unhealthy");
    fx_close(&f);
}

/* Schema 3: a let-go device keeps its bindings row (pod '') with the
 * revision of the change; a bind writes only the rows of devices whose
 * holder changed. Every read must see a let-go row as free, and the
 * device's revision must be the revision of its last event. */
static void test_let_go_rows(void)
{
    struct fx f;
    char ev[1024], b[128];
    json_t *d, *list = NULL;
    struct store_stats stats;
    uint64_t rev;

    if (fx_bound_a(&f, "[\"gpu-0\",\"gpu-1\"]"))
        return;
    CHECK_EQ_INT(sql_int(&f, "SELECT count(*) FROM pods WHERE device_keys="
                             "'" GPU "|gpu-0\n" GPU "|gpu-1'"),
                 1);
    /* a row without key lines (schema 2's, the kubelet mirror's): its
     * containers are walked instead */
    CHECK_OK(db_exec(f.st->commit.db, "UPDATE pods SET device_keys=NULL", NULL));
    /* gpu-0 let go, gpu-1 kept (no event, row untouched), gpu-2 taken */
    CHECK_OK(bind(&f, "ns", "a",
                  "{\"uid\":\"ua\",\"containers\":[{\"name\":\"c\",\"devices\":[{\"resourceName\":"
                  "\"" GPU "\",\"deviceIds\":[\"gpu-1\",\"gpu-2\"]}]}]}",
                  NULL, NULL, NULL));
    CHECK_EQ_INT(fx_events(&f, ev, sizeof(ev)), 3);
    CHECK_STREQ(ev, "MODIFIED PodResources ns/a;MODIFIED Device gpu-2;MODIFIED Device gpu-0");
    rev = store_revision(f.st);
    CHECK_EQ_INT(sql_int(&f, "SELECT count(*) FROM bindings WHERE pod=''"), 1);
    CHECK_EQ_INT(sql_int(&f, "SELECT revision FROM bindings WHERE device_id='gpu-0'"),
                 (int64_t)rev);
    CHECK_EQ_INT(sql_int(&f, "SELECT revision FROM bindings WHERE device_id='gpu-2'"),
                 (int64_t)rev - 1);
    /* the device's revision is its last event's, though its own row is older */
    d = device(&f, GPU, "gpu-0");
    CHECK(d && json_integer_value(json_object_get(d, "revision")) == (json_int_t)rev);
    CHECK(d && json_is_null(json_object_get(d, "holder")));
    json_decref(d);
    CHECK(sql_int(&f, "SELECT revision FROM devices WHERE id='gpu-0'") < (int64_t)rev);
    /* free devices: gpu-0 (let go) and gpu-3 */
    CHECK_OK(store_devices_list(f.st, GPU, NULL, true, &list));
    CHECK_EQ_INT(json_array_size(json_object_get(list, "devices")), 2);
    json_decref(list);
    list = NULL;
    CHECK_OK(store_stats(f.st, &stats));
    CHECK_EQ_INT(stats.bound_devices, 2);
    store_stats_release(&stats);
    /* the pods list by resource finds ns/a, not a pod named by a let-go row */
    CHECK_OK(store_pods_list(f.st, NULL, GPU, &list));
    CHECK_EQ_INT(json_array_size(json_object_get(list, "podResources")), 1);
    json_decref(list);
    list = NULL;
    /* another pod can bind, reserve and allocate a let-go device */
    CHECK_OK(reserve(&f, "ns", "r",
                     "{\"containers\":[{\"name\":\"c\",\"devices\":[{"
                     "\"resourceName\":\"" GPU "\",\"deviceIds\":[\"gpu-0\"]}]}]}",
                     NULL));
    CHECK_OK(store_reservation_delete(f.st, "ns", "r", 0, &f.err, &list));
    json_decref(list);
    list = NULL;
    CHECK_OK(allocate(&f, "ns", "b",
                      "{\"uid\":\"ub\",\"containers\":[{\"name\":\"c\",\"requests\":{\"" GPU
                      "\":2}}]}",
                      NULL, NULL, NULL));
    CHECK_STREQ(holder(&f, GPU, "gpu-0", b, sizeof(b)), "ns/b/c");
    CHECK_STREQ(holder(&f, GPU, "gpu-3", b, sizeof(b)), "ns/b/c");
    fx_some_events(&f, 1);
    /* malformed key lines: the write fails and changes nothing */
    rev = store_revision(f.st);
    CHECK_OK(db_exec(f.st->commit.db, "UPDATE pods SET device_keys='nobar' WHERE name='a'", NULL));
    CHECK_EQ_INT(release(&f, "ns", "a", NULL), ERR_DB);
    CHECK_EQ_INT(store_revision(f.st), rev);
    CHECK_STREQ(holder(&f, GPU, "gpu-1", b, sizeof(b)), "ns/a/c");
    CHECK_OK(db_exec(f.st->commit.db, "UPDATE pods SET device_keys=? WHERE name='a'", "t",
                     GPU "|gpu-1\n" GPU "|gpu-2"));
    /* a release lets every device of the pod go, and only those */
    CHECK_OK(release(&f, "ns", "a", NULL));
    CHECK_EQ_INT(fx_events(&f, ev, sizeof(ev)), 3);
    CHECK_STREQ(ev, "DELETED PodResources ns/a;MODIFIED Device gpu-1;MODIFIED Device gpu-2");
    CHECK_STREQ(holder(&f, GPU, "gpu-1", b, sizeof(b)), "-");
    CHECK_STREQ(holder(&f, GPU, "gpu-0", b, sizeof(b)), "ns/b/c");
    CHECK_EQ_INT(sql_int(&f, "SELECT count(*) FROM bindings WHERE pod=''"), 2);
    /* a let-go device that leaves the set is DELETED, its row with it */
    CHECK_OK(put_devices(&f, GPU,
                         "{\"devices\":[{\"id\":\"gpu-0\",\"topology\":{\"nodes\":[{\"ID\":0}]}},"
                         "{\"id\":\"gpu-3\",\"topology\":{\"nodes\":[{\"ID\":1}]},"
                         "\"properties\":{\"model\":\"x\"}}]}",
                         NULL));
    CHECK_EQ_INT(fx_events(&f, ev, sizeof(ev)), 2);
    CHECK_STREQ(ev, "DELETED Device gpu-1;DELETED Device gpu-2");
    CHECK_EQ_INT(sql_int(&f, "SELECT count(*) FROM bindings WHERE pod=''"), 0);
    CHECK_EQ_INT(sql_int(&f, "SELECT count(*) FROM bindings"), 2);
    fx_close(&f);
}

static void test_ttl(void)
{
    struct fx f;
    char ev[1024], b[64];
    int n = -1;
    json_t *b1 = J("{\"devices\":[{\"id\":\"nic-0\"},{\"id\":\"nic-1\",\"health\":\"Unhealthy\"}],"
                   "\"ttlSeconds\":2}"),
           *devs = NULL, *out = NULL;
    uint64_t ttl = 0;
    bool changed = false;

    if (fx_open(&f, 100)) {
        json_decref(b1);
        return;
    }
    CHECK_OK(put_devices(&f, GPU, FOUR_GPUS, NULL)); /* no heartbeat */
    CHECK_OK(validate_devices_put(b1, &devs, &ttl, NULL));
    CHECK_EQ_INT(ttl, 2000);
    CHECK_OK(store_resource_put(f.st, NIC, devs, ttl, &f.err, &out, &changed));
    json_decref(out);
    CHECK_EQ_INT(fx_events(&f, ev, sizeof(ev)), 6);

    CHECK_OK(store_expire_ttls(f.st, clock_wall_ms(), &n));
    CHECK_EQ_INT(n, 0);
    CHECK_STREQ(health(&f, NIC, "nic-0", b, sizeof(b)), "Healthy");
    CHECK_OK(store_expire_ttls(f.st, clock_wall_ms() + 60000, &n));
    CHECK_EQ_INT(n, 1);
    CHECK_STREQ(health(&f, NIC, "nic-0", b, sizeof(b)), "Unhealthy");
    CHECK_STREQ(health(&f, GPU, "gpu-0", b, sizeof(b)), "Healthy");
    CHECK_EQ_INT(fx_events(&f, ev, sizeof(ev)), 1);
    CHECK_STREQ(ev, "MODIFIED Device nic-0");
    /* a lapsed resource lapses once */
    CHECK_OK(store_expire_ttls(f.st, clock_wall_ms() + 120000, &n));
    CHECK_EQ_INT(n, 0);
    CHECK_EQ_INT(fx_events(&f, ev, sizeof(ev)), 0);
    /* the next PUT (heartbeat) makes them Healthy again */
    out = NULL;
    CHECK_OK(store_resource_put(f.st, NIC, devs, ttl, &f.err, &out, &changed));
    json_decref(out);
    CHECK(changed);
    CHECK_STREQ(health(&f, NIC, "nic-0", b, sizeof(b)), "Healthy");
    CHECK_EQ_INT(fx_events(&f, ev, sizeof(ev)), 1);
    json_decref(devs);
    json_decref(b1);
    fx_close(&f);
}

/* Revisions 1..7: four GPUs, a NIC, then pod ns/a bound to gpu-0. */
static void seed_bound(struct fx *f)
{
    CHECK_OK(put_devices(f, GPU, FOUR_GPUS, NULL));                            /* 1..4 */
    CHECK_OK(put_devices(f, NIC, "{\"devices\":[{\"id\":\"nic-0\"}]}", NULL)); /* 5 */
    CHECK_OK(bind(f, "ns", "a",
                  "{\"uid\":\"ua\",\"containers\":[{\"name\":\"c\",\"devices\":[{\"resourceName\":"
                  "\"" GPU "\",\"deviceIds\":[\"gpu-0\"]}]}]}",
                  NULL, NULL, NULL)); /* 6, 7 */
}

static void test_changes_after(void)
{
    struct fx f;
    char *buf = NULL, sum[1024], ev[1024];
    size_t len = 0, cap = 0;
    uint64_t cur, chain;
    struct feed_filter resv = {"Reservation", NULL};

    if (fx_open(&f, 5))
        return;
    seed_bound(&f); /* 1..7 */
    CHECK_OK(reserve(&f, "ns", "r",
                     "{\"containers\":[{\"name\":\"c\",\"devices\":[{\"resourceName\":\"" GPU
                     "\",\"deviceIds\":[\"gpu-1\"]}]}]}",
                     NULL));                /* 8, 9 */
    CHECK_OK(release(&f, "ns", "a", NULL)); /* 10, 11 */
    CHECK_EQ_INT(store_revision(f.st), 11);
    CHECK_EQ_INT(fx_events(&f, ev, sizeof(ev)), 11);

    /* the last 5 (7..11) are kept */
    cur = 6;
    CHECK_OK(store_changes_after(f.st, &cur, NULL, 100, &buf, &len, &cap));
    CHECK_EQ_INT(cur, 11);
    chain = 6;
    CHECK_EQ_INT(summarise(buf, len, &chain, sum, sizeof(sum)), 5);
    CHECK_STREQ(sum, "MODIFIED Device gpu-0;ADDED Reservation ns/r;MODIFIED Device gpu-1;"
                     "DELETED PodResources ns/a;MODIFIED Device gpu-0");
    /* the same lines as the feed published */
    CHECK(len <= f.len && memcmp(buf, f.buf + (f.len - len), len) == 0);

    /* limit: rows looked at */
    len = 0;
    cur = 6;
    CHECK_OK(store_changes_after(f.st, &cur, NULL, 2, &buf, &len, &cap));
    CHECK_EQ_INT(cur, 8);
    CHECK_EQ_INT(summarise(buf, len, NULL, sum, sizeof(sum)), 2);

    /* a filter: the cursor still advances over every row */
    len = 0;
    cur = 6;
    CHECK_OK(store_changes_after(f.st, &cur, &resv, 100, &buf, &len, &cap));
    CHECK_EQ_INT(cur, 11);
    CHECK_EQ_INT(summarise(buf, len, NULL, sum, sizeof(sum)), 1);
    CHECK_STREQ(sum, "ADDED Reservation ns/r");

    /* up to date: nothing, fine */
    len = 0;
    cur = 11;
    CHECK_OK(store_changes_after(f.st, &cur, NULL, 100, &buf, &len, &cap));
    CHECK_EQ_INT(cur, 11);
    CHECK_EQ_INT(len, 0);

    /* beyond history, or ahead of the store: ERR_GONE, cursor kept */
    cur = 5;
    CHECK_EQ_INT(store_changes_after(f.st, &cur, NULL, 100, &buf, &len, &cap), ERR_GONE);
    CHECK_EQ_INT(cur, 5);
    cur = 0;
    CHECK_EQ_INT(store_changes_after(f.st, &cur, NULL, 100, &buf, &len, &cap), ERR_GONE);
    cur = 12;
    CHECK_EQ_INT(store_changes_after(f.st, &cur, NULL, 100, &buf, &len, &cap), ERR_GONE);
    CHECK_EQ_INT(len, 0);
    free(buf);
    fx_close(&f);
}

/* changelog_head against every layout the ring can have: ring sizes 1..16,
 * heads 0..3 rings on, a full run or a shorter one (a ring laid out anew),
 * and every guess from 0 to past the head. */
static void test_ring_head(void)
{
    static const uint64_t rings[] = {1, 2, 3, 7, 16};
    struct fx f;
    sqlite3 *db;
    uint64_t n, head, len, lo, r, guess, got;
    size_t i;
    int bad = 0, cases = 0;

    if (fx_open(&f, 100))
        return;
    db = f.st->commit.db;
    for (i = 0; i < ARRAY_SIZE(rings); i++) {
        n = rings[i];
        for (head = 0; head <= 3 * n + 2; head++) {
            for (len = 1; len <= n; len = len < n && len * 2 > n ? n : len * 2) {
                CHECK_OK(db_exec(db, "DELETE FROM changes", NULL));
                lo = head >= len ? head - len + 1 : 1;
                for (r = lo; head > 0 && r <= head; r++)
                    CHECK_OK(db_exec(db,
                                     "INSERT INTO changes(slot,revision,kind,event) "
                                     "VALUES(?,?,'Device','{}')",
                                     "uu", r % n, r));
                for (guess = 0; guess <= head + n + 2; guess++) {
                    got = 999999;
                    CHECK_OK(changelog_head(db, n, guess, &got));
                    cases++;
                    if (got != head && bad++ < 5)
                        printf("# ring %" PRIu64 " run %" PRIu64 "..%" PRIu64 " guess %" PRIu64
                               ": head %" PRIu64 "\n",
                               n, lo, head, guess, got);
                }
                if (len == n)
                    break;
            }
        }
    }
    CHECK_EQ_INT(bad, 0);
    CHECK(cases > 1000);
    CHECK_OK(db_exec(db, "DELETE FROM changes", NULL));
    fx_close(&f);
}

/* Close the store and open the same files with another history. */
static int fx_reopen(struct fx *f, uint64_t history)
{
    struct store_opts o = {.path = f->path, .history = history};

    fx_close_store(f);
    CHECK_OK(store_open(&o, &f->st));
    if (!f->st)
        return -1;
    fx_attach_feed(f);
    return 0;
}

/* Close the store and turn its file into a schema 1 database, as an older
 * podresd left it: meta.revision 'rev' and the change log 'rows' inserts. */
static void fx_schema1(struct fx *f, uint64_t rev, const char *rows)
{
    sqlite3 *db = NULL;
    char sql[2048];

    fx_close_store(f);
    snprintf(sql, sizeof(sql),
             "DROP TABLE changes; CREATE TABLE changes (revision INTEGER PRIMARY KEY, kind TEXT "
             "NOT NULL, namespace TEXT NOT NULL DEFAULT '', event TEXT NOT NULL);"
             "DELETE FROM meta WHERE key='ring'; DELETE FROM bindings WHERE pod='';"
             "ALTER TABLE bindings DROP COLUMN revision; ALTER TABLE pods DROP COLUMN device_keys;"
             "CREATE INDEX bindings_pod ON bindings(namespace, pod); DROP TABLE hist_bind;"
             "DROP TABLE hist_health; DROP TABLE hist_pod; DROP TABLE hist_dev;"
             "DROP TABLE hist_usage; UPDATE meta SET value=%" PRIu64
             " WHERE key='revision'; %s PRAGMA user_version=1;",
             rev, rows);
    CHECK_EQ_INT(sqlite3_open_v2(f->path, &db, SQLITE_OPEN_READWRITE, NULL), SQLITE_OK);
    CHECK_EQ_INT(sqlite3_exec(db, sql, NULL, NULL, NULL), SQLITE_OK);
    sqlite3_close(db);
}

/* Open a database with another --history: the ring is laid out anew with the
 * newest revisions that fit, served and extended as before. Then schema 1
 * databases: their log is served after the migration, unless it ends before
 * their revision. */
static void test_ring_layout(void)
{
    struct fx f;
    char *buf = NULL, sum[1024];
    size_t len = 0, cap = 0;
    uint64_t cur, chain;
    int i;

    if (fx_open(&f, 5))
        return;
    seed_bound(&f);                         /* 1..7 */
    CHECK_OK(release(&f, "ns", "a", NULL)); /* 8, 9 */

    /* fewer slots: 7..9 kept */
    if (fx_reopen(&f, 3))
        return;
    CHECK_EQ_INT(store_revision(f.st), 9);
    cur = 6;
    CHECK_OK(store_changes_after(f.st, &cur, NULL, 100, &buf, &len, &cap));
    chain = 6;
    CHECK_EQ_INT(summarise(buf, len, &chain, sum, sizeof(sum)), 3);
    CHECK_STREQ(sum, "MODIFIED Device gpu-0;DELETED PodResources ns/a;MODIFIED Device gpu-0");
    cur = 5;
    CHECK_EQ_INT(store_changes_after(f.st, &cur, NULL, 100, &buf, &len, &cap), ERR_GONE);

    /* more slots: still 7..9, then new revisions after them */
    if (fx_reopen(&f, 50))
        return;
    CHECK_EQ_INT(store_revision(f.st), 9);
    cur = 5;
    CHECK_EQ_INT(store_changes_after(f.st, &cur, NULL, 100, &buf, &len, &cap), ERR_GONE);
    CHECK_EQ_INT(cur, 5);
    for (i = 0; i < 60; i++)
        CHECK_OK(put_devices(&f, NIC,
                             i % 2 ? "{\"devices\":[{\"id\":\"nic-0\"}]}"
                                   : "{\"devices\":[{\"id\":\"nic-0\",\"health\":\"Unhealthy\"}]}",
                             NULL)); /* 10..69 */
    CHECK_EQ_INT(store_revision(f.st), 69);
    len = 0;
    cur = 19;
    CHECK_OK(store_changes_after(f.st, &cur, NULL, 100, &buf, &len, &cap));
    CHECK_EQ_INT(cur, 69);
    chain = 19;
    CHECK_EQ_INT(summarise(buf, len, &chain, sum, sizeof(sum)), 50);
    cur = 18;
    CHECK_EQ_INT(store_changes_after(f.st, &cur, NULL, 100, &buf, &len, &cap), ERR_GONE);

    /* schema 1: rows 3..7, meta.revision 7 */
    fx_schema1(&f, 7,
               "WITH RECURSIVE r(n) AS (SELECT 3 UNION ALL SELECT n+1 FROM r WHERE n<7) INSERT "
               "INTO changes SELECT n,'Device','','{\"revision\":'||n||'}' FROM r;");
    if (fx_reopen(&f, 4))
        return;
    CHECK_EQ_INT(store_revision(f.st), 7);
    len = 0;
    cur = 3;
    CHECK_OK(store_changes_after(f.st, &cur, NULL, 100, &buf, &len, &cap));
    CHECK_EQ_INT(cur, 7);
    CHECK(len > 0 && strstr(buf, "{\"revision\":4}\n{\"revision\":5}\n") == buf);
    cur = 2;
    CHECK_EQ_INT(store_changes_after(f.st, &cur, NULL, 100, &buf, &len, &cap), ERR_GONE);
    CHECK_OK(put_devices(&f, NIC, "{\"devices\":[{\"id\":\"nic-0\",\"health\":\"Unhealthy\"}]}",
                         NULL)); /* 8 */
    CHECK_EQ_INT(store_revision(f.st), 8);

    /* a schema 1 log that ends before meta.revision is not served */
    fx_schema1(&f, 20, "INSERT INTO changes VALUES(17,'Device','','{}'),(18,'Device','','{}');");
    if (fx_reopen(&f, 4))
        return;
    CHECK_EQ_INT(store_revision(f.st), 20);
    cur = 19;
    CHECK_EQ_INT(store_changes_after(f.st, &cur, NULL, 100, &buf, &len, &cap), ERR_GONE);
    cur = 20;
    len = 0;
    CHECK_OK(store_changes_after(f.st, &cur, NULL, 100, &buf, &len, &cap));
    CHECK_EQ_INT(len, 0);
    CHECK_OK(put_devices(&f, NIC, "{\"devices\":[{\"id\":\"nic-0\"}]}", NULL)); /* 21 */
    cur = 20;
    CHECK_OK(store_changes_after(f.st, &cur, NULL, 100, &buf, &len, &cap));
    CHECK_EQ_INT(cur, 21);
    free(buf);
    fx_close(&f);
}

static void test_snapshot(void)
{
    struct fx f;
    char *buf = NULL, sum[1024];
    size_t len = 0, cap = 0;
    uint64_t rev = 0;
    struct feed_filter pods = {"PodResources", NULL}, ns = {NULL, "other"};

    if (fx_open(&f, 100))
        return;
    CHECK_OK(store_snapshot(f.st, NULL, &buf, &len, &cap, &rev));
    CHECK_EQ_INT(len, 0);
    CHECK_EQ_INT(rev, 0);
    CHECK_OK(put_devices(&f, GPU,
                         "{\"devices\":[{\"id\":\"gpu-1\"},{\"id\":\"gpu-0\",\"topology\":"
                         "{\"nodes\":[{\"ID\":0}]}}]}",
                         NULL));
    CHECK_OK(bind(&f, "ns", "a",
                  "{\"uid\":\"ua\",\"containers\":[{\"name\":\"c\",\"devices\":[{\"resourceName\":"
                  "\"" GPU "\",\"deviceIds\":[\"gpu-0\"]}]}]}",
                  NULL, NULL, NULL));
    CHECK_OK(reserve(&f, "other", "r",
                     "{\"containers\":[{\"name\":\"c\",\"devices\":[{\"resourceName\":\"" GPU
                     "\",\"deviceIds\":[\"gpu-1\"]}]}]}",
                     NULL));
    fx_some_events(&f, 1);

    CHECK_OK(store_snapshot(f.st, NULL, &buf, &len, &cap, &rev));
    CHECK_EQ_INT(rev, store_revision(f.st));
    CHECK_EQ_INT(summarise(buf, len, NULL, sum, sizeof(sum)), 4);
    /* in the order of the objects' revisions (each that of its last event),
     * not of their kinds: ns/a 3, gpu-0 4 (bound), other/r 5, gpu-1 6
     * (reserved for it) */
    CHECK_STREQ(sum, "ADDED PodResources ns/a;ADDED Device gpu-0;ADDED Reservation other/r;"
                     "ADDED Device gpu-1");
    /* gpu-0 turns Unhealthy: last */
    {
        json_t *out = NULL;

        CHECK_OK(store_device_set_health(f.st, GPU, "gpu-0", "Unhealthy", &f.err, &out));
        json_decref(out);
    }
    len = 0;
    CHECK_OK(store_snapshot(f.st, NULL, &buf, &len, &cap, &rev));
    CHECK_EQ_INT(summarise(buf, len, NULL, sum, sizeof(sum)), 4);
    CHECK_STREQ(sum, "ADDED PodResources ns/a;ADDED Reservation other/r;ADDED Device gpu-1;"
                     "ADDED Device gpu-0");
    len = 0;
    CHECK_OK(store_snapshot(f.st, &pods, &buf, &len, &cap, &rev));
    CHECK_EQ_INT(summarise(buf, len, NULL, sum, sizeof(sum)), 1);
    CHECK_STREQ(sum, "ADDED PodResources ns/a");
    len = 0;
    CHECK_OK(store_snapshot(f.st, &ns, &buf, &len, &cap, &rev));
    CHECK_STREQ((summarise(buf, len, NULL, sum, sizeof(sum)), sum), "ADDED Reservation other/r");
    free(buf);
    fx_close(&f);
}

static void test_persistence(void)
{
    struct fx f;
    struct store_opts o = {.history = 100};
    char ev[1024], b[128];
    uint64_t rev;

    if (fx_open(&f, 100))
        return;
    CHECK_OK(put_devices(&f, GPU, FOUR_GPUS, NULL));
    CHECK_OK(bind(&f, "ns", "a",
                  "{\"uid\":\"ua\",\"containers\":[{\"name\":\"c\",\"devices\":[{\"resourceName\":"
                  "\"" GPU "\",\"deviceIds\":[\"gpu-0\"]}]}]}",
                  NULL, NULL, NULL));
    fx_some_events(&f, 1);
    rev = store_revision(f.st);
    CHECK(rev > 0);
    fx_close_store(&f);

    o.path = f.path;
    CHECK_OK(store_open(&o, &f.st));
    if (!f.st)
        return;
    CHECK_EQ_INT(store_revision(f.st), rev);
    fx_attach_feed(&f);
    CHECK_STREQ(holder(&f, GPU, "gpu-0", b, sizeof(b)), "ns/a/c");
    /* revisions continue, never reused */
    CHECK_OK(release(&f, "ns", "a", NULL));
    CHECK_EQ_INT(store_revision(f.st), rev + 2);
    CHECK_EQ_INT(fx_events(&f, ev, sizeof(ev)), 2);
    /* the change log survived too */
    {
        char *buf = NULL;
        size_t len = 0, cap = 0;
        uint64_t cur = 0, chain = 0;
        char sum[2048];

        CHECK_OK(store_changes_after(f.st, &cur, NULL, 1000, &buf, &len, &cap));
        CHECK_EQ_INT(cur, rev + 2);
        CHECK_EQ_INT(summarise(buf, len, &chain, sum, sizeof(sum)), (int)(rev + 2));
        free(buf);
    }
    fx_close(&f);
}

/* Binding an existing pod again with the same uid but a device that is held
 * elsewhere (or unknown) fails in resolve_containers() (server/store_pods.c)
 * before bind_pod() compares the stored containers with the new ones:
 * ERR_CONFLICT (or ERR_UNPROCESSABLE), nothing changed. */
static void test_rebind_same_uid_conflict(void)
{
    struct fx f;
    char b[128];
    uint64_t rev;

    if (fx_open(&f, 100))
        return;
    CHECK_OK(put_devices(&f, GPU, FOUR_GPUS, NULL));
    CHECK_OK(bind(&f, "ns", "a",
                  "{\"uid\":\"ua\",\"containers\":[{\"name\":\"c\",\"devices\":[{\"resourceName\":"
                  "\"" GPU "\",\"deviceIds\":[\"gpu-0\"]}]}]}",
                  NULL, NULL, NULL));
    CHECK_OK(bind(&f, "ns", "b",
                  "{\"uid\":\"ub\",\"containers\":[{\"name\":\"c\",\"devices\":[{\"resourceName\":"
                  "\"" GPU "\",\"deviceIds\":[\"gpu-1\"]}]}]}",
                  NULL, NULL, NULL));
    rev = store_revision(f.st);
    CHECK_EQ_INT(bind(&f, "ns", "a",
                      "{\"uid\":\"ua\",\"containers\":[{\"name\":\"c\",\"devices\":[{"
                      "\"resourceName\":\"" GPU "\",\"deviceIds\":[\"gpu-1\"]}]}]}",
                      NULL, NULL, NULL),
                 ERR_CONFLICT);
    CHECK(strstr(f.err.msg, "ns/b") != NULL);
    CHECK_EQ_INT(bind(&f, "ns", "a",
                      "{\"uid\":\"ua\",\"containers\":[{\"name\":\"c\",\"devices\":[{"
                      "\"resourceName\":\"" GPU "\",\"deviceIds\":[\"gpu-9\"]}]}]}",
                      NULL, NULL, NULL),
                 ERR_UNPROCESSABLE);
    CHECK_EQ_INT(store_revision(f.st), rev);
    CHECK_STREQ(holder(&f, GPU, "gpu-0", b, sizeof(b)), "ns/a/c");
    fx_close(&f);
}

/* The statement cache (store_int.h): more distinct statements than a
 * connection caches (the rest are prepared and finalised each time), the
 * same statement twice at once (nested use gets a second one), and every one
 * gives the right answer. */
static void test_statement_cache(void)
{
    struct fx f;
    sqlite3 *db = NULL;
    sqlite3_stmt *a = NULL, *b = NULL;
    char sql[64];
    bool row = false;
    int i, round, ok = 0;

    if (fx_open(&f, 100))
        return;
    CHECK_OK(db_read_begin(&f.st->readers, &db));
    for (round = 0; round < 2 && db; round++) {
        for (i = 0; i < 300; i++) {
            snprintf(sql, sizeof(sql), "SELECT %d + ?", i);
            row = false;
            if (db_prep(db, &a, sql, "i", (int64_t)round) == ERR_OK &&
                db_step(db, a, &row) == ERR_OK && row && sqlite3_column_int(a, 0) == i + round)
                ok++;
            db_done(a);
            a = NULL;
        }
    }
    CHECK_EQ_INT(ok, 600);
    if (db) {
        CHECK_OK(db_prep(db, &a, "SELECT ?", "i", (int64_t)1));
        CHECK_OK(db_prep(db, &b, "SELECT ?", "i", (int64_t)2));
        CHECK(a != b);
        CHECK_OK(db_step(db, a, &row));
        CHECK(row && sqlite3_column_int(a, 0) == 1);
        CHECK_OK(db_step(db, b, &row));
        CHECK(row && sqlite3_column_int(b, 0) == 2);
        db_done(b);
        db_done(a);
    }
    db_read_end(&f.st->readers, db);
    fx_close(&f);
}

/* ---- group commit ---- */

#define GC_THREADS 8
#define GC_EACH 32

struct gc_arg {
    struct store *st;
    int t;                 /* thread number */
    err_t ok_rc[GC_EACH];  /* result of each bind that must succeed */
    err_t bad_rc[GC_EACH]; /* result of each bind of the held device */
    uint64_t rev[GC_EACH]; /* revision in each successful answer */
};

static err_t gc_bind(struct store *st, const char *name, const char *dev, uint64_t *rev)
{
    char body[256];
    struct error e = {0};
    struct store_outcome did;
    json_t *b, *cs = NULL, *out = NULL;
    const char *uid = NULL;
    char *text = NULL;
    size_t len = 0;
    err_t rc;

    snprintf(body, sizeof(body),
             "{\"uid\":\"u-%s\",\"containers\":[{\"name\":\"c\",\"devices\":[{\"resourceName\":"
             "\"" NIC "\",\"deviceIds\":[\"%s\"]}]}]}",
             name, dev);
    b = json_loads(body, 0, NULL);
    rc = b ? validate_pod_put(b, &uid, &cs, NULL) : ERR_NOMEM;
    if (!rc)
        rc = store_pod_bind(st, &(struct store_pod){"gc", name, uid}, cs, &e, &text, &len, &did);
    if (!rc)
        out = json_loadb(text, len, 0, NULL);
    free(text);
    if (!rc && rev)
        *rev = (uint64_t)json_integer_value(json_object_get(out, "revision"));
    json_decref(out);
    json_decref(cs);
    json_decref(b);
    return rc;
}

static void *gc_writer(void *p)
{
    struct gc_arg *a = p;
    char name[32], dev[32];
    int i;

    for (i = 0; i < GC_EACH; i++) {
        snprintf(name, sizeof(name), "p-%d-%d", a->t, i);
        snprintf(dev, sizeof(dev), "n-%d", a->t * GC_EACH + i);
        a->ok_rc[i] = gc_bind(a->st, name, dev, &a->rev[i]);
        snprintf(name, sizeof(name), "x-%d-%d", a->t, i);
        a->bad_rc[i] = gc_bind(a->st, name, "held", NULL);
    }
    return NULL;
}

/* Two thirds of them succeed: more than a combiner's batches in a row
 * (COMMIT_COMBINE full batches of COMMIT_BATCH_MAX members), so the first
 * combiner runs that many and one heir the rest */
#define CB_THREADS (COMMIT_COMBINE * COMMIT_BATCH_MAX * 3 / 2 + 60)

struct cb_arg {
    struct store *st;
    int t;        /* thread number */
    err_t rc;     /* its bind's result */
    uint64_t rev; /* the revision in its answer */
};

static void *cb_writer(void *p)
{
    struct cb_arg *a = p;
    char name[32], dev[32];

    snprintf(name, sizeof(name), "c-%d", a->t);
    snprintf(dev, sizeof(dev), "n-%d", a->t);
    /* every third one binds the held device and must fail alone */
    a->rc = gc_bind(a->st, name, a->t % 3 == 0 ? "held" : dev, &a->rev);
    return NULL;
}

static size_t queued(struct store *st)
{
    struct commit_op *op;
    size_t n = 0;

    pthread_mutex_lock(&st->commit.qmu);
    for (op = st->commit.qhead; op; op = op->next)
        n++;
    pthread_mutex_unlock(&st->commit.qmu);
    return n;
}

/* The combiner: with the write lock held by the test, 100 binds queue up
 * behind one combiner; released, it runs 64 in one batch and wakes the next
 * to run the rest. Failed members fail alone, the others are all there,
 * and a device write arriving meanwhile is queued behind them. */
/* st_write ops for test_dropped_batch: write a meta row, or have SQLite
 * drop the whole open batch (as it does on some I/O errors) and fail. */
struct drop_arg {
    struct store *st;
    const char *key; /* the row to write, or NULL: drop the batch */
    err_t rc;        /* st_write's result */
};

static err_t drop_op(struct store *st, void *ctx)
{
    struct drop_arg *a = ctx;

    if (!a->key) {
        sqlite3_exec(st->commit.db, "ROLLBACK;", NULL, NULL, NULL);
        return ERR_IO;
    }
    return db_exec(st->commit.db, "INSERT INTO meta(key,value) VALUES(?,1)", "t", a->key);
}

static void *drop_writer(void *p)
{
    struct drop_arg *a = p;

    a->rc = st_write(a->st, drop_op, a);
    return NULL;
}

/* 1 when the meta row 'key' exists, 0 when not, -1 on an error. */
static int meta_has(struct store *st, const char *key)
{
    sqlite3_stmt *s = NULL;
    bool row = false;
    err_t rc;

    pthread_mutex_lock(&st->commit.mu);
    rc = db_prep(st->commit.db, &s, "SELECT 1 FROM meta WHERE key=?", "t", key);
    if (!rc)
        rc = db_step(st->commit.db, s, &row);
    db_done(s);
    pthread_mutex_unlock(&st->commit.mu);
    return rc ? -1 : row;
}

/* Start a thread of 'fn' for each of the 'n' arguments at 'args' ('size'
 * bytes apart) while the write lock is held, each queued before the next
 * starts, so they run in that order in one combiner's batches; then let go
 * and join them. */
static void run_queued(struct store *st, void *(*fn)(void *), void *args, size_t size, int n)
{
    pthread_t th[8];
    int i, j;

    CHECK(n <= (int)ARRAY_SIZE(th));
    pthread_mutex_lock(&st->commit.mu);
    for (i = 0; i < n && i < (int)ARRAY_SIZE(th); i++) {
        CHECK_OK(pthread_create(&th[i], NULL, fn, (char *)args + (size_t)i * size));
        for (j = 0; j < 2000 && queued(st) < (size_t)i + 1; j++)
            usleep(1000);
    }
    CHECK_EQ_INT(queued(st), n);
    pthread_mutex_unlock(&st->commit.mu);
    while (i-- > 0)
        pthread_join(th[i], NULL);
}

/* A member after which SQLite has dropped the batch: the members before it
 * in that batch are answered 503 and their writes are gone, it gets its own
 * error, and the writes queued after it run in a new batch. */
static void test_dropped_batch(void)
{
    struct fx f;
    struct drop_arg a[3];

    if (fx_open(&f, 1000))
        return;
    a[0] = (struct drop_arg){f.st, "before", ERR_OK};
    a[1] = (struct drop_arg){f.st, NULL, ERR_OK};
    a[2] = (struct drop_arg){f.st, "after", ERR_OK};
    run_queued(f.st, drop_writer, a, sizeof(a[0]), 3);
    CHECK_EQ_INT(a[0].rc, ERR_UNAVAIL);
    CHECK_EQ_INT(a[1].rc, ERR_IO);
    CHECK_OK(a[2].rc);
    CHECK_EQ_INT(meta_has(f.st, "before"), 0);
    CHECK_EQ_INT(meta_has(f.st, "after"), 1);
    fx_close(&f);
}

struct first_arg {
    struct store *st;
    const char *key; /* the row to write */
    err_t fail;      /* then fail with this, or ERR_OK */
    bool discard;    /* then ask to be rolled back */
    err_t rc;        /* st_write's result */
};

static err_t first_op(struct store *st, void *ctx)
{
    struct first_arg *a = ctx;
    err_t rc = db_exec(st->commit.db, "INSERT INTO meta(key,value) VALUES(?,1)", "t", a->key);

    if (!rc && a->discard)
        st_write_discard(st);
    return rc ? rc : a->fail;
}

static void *first_writer(void *p)
{
    struct first_arg *a = p;

    a->rc = st_write(a->st, first_op, a);
    return NULL;
}

/* A member that opens the batch has no savepoint: failing, or discarding
 * itself, it rolls the batch back, and the next write opens a new one. A
 * later member that fails goes back to its savepoint only. Queued: a (fails
 * first), b (discards itself, first again), c (first, good), d (fails after
 * c): only c's row is written, in one COMMIT, and no transaction is left. */
static void test_first_member(void)
{
    struct fx f;
    struct first_arg a[4];
    static const char *const keys[] = {"a", "b", "c", "d"};
    uint64_t commits0;
    int i, open_tx;

    if (fx_open(&f, 1000))
        return;
    for (i = 0; i < 4; i++)
        a[i] = (struct first_arg){f.st, keys[i], i == 0 || i == 3 ? ERR_CONFLICT : ERR_OK, i == 1,
                                  ERR_OK};
    commits0 = f.st->commit.ncommits;
    run_queued(f.st, first_writer, a, sizeof(a[0]), 4);
    CHECK_EQ_INT(a[0].rc, ERR_CONFLICT);
    CHECK_OK(a[1].rc);
    CHECK_OK(a[2].rc);
    CHECK_EQ_INT(a[3].rc, ERR_CONFLICT);
    CHECK_EQ_INT(meta_has(f.st, "a"), 0);
    CHECK_EQ_INT(meta_has(f.st, "b"), 0);
    CHECK_EQ_INT(meta_has(f.st, "c"), 1);
    CHECK_EQ_INT(meta_has(f.st, "d"), 0);
    CHECK_EQ_INT(f.st->commit.ncommits - commits0, 1);
    pthread_mutex_lock(&f.st->commit.mu);
    open_tx = !sqlite3_get_autocommit(f.st->commit.db) || f.st->commit.open;
    pthread_mutex_unlock(&f.st->commit.mu);
    CHECK_EQ_INT(open_tx, 0);
    /* a lone failing write, then a lone good one */
    a[0].key = "e";
    first_writer(&a[0]);
    CHECK_EQ_INT(a[0].rc, ERR_CONFLICT);
    a[2].key = "f";
    first_writer(&a[2]);
    CHECK_OK(a[2].rc);
    CHECK_EQ_INT(meta_has(f.st, "e"), 0);
    CHECK_EQ_INT(meta_has(f.st, "f"), 1);
    fx_close(&f);
}

static void test_combiner(void)
{
    struct fx f;
    struct cb_arg args[CB_THREADS];
    pthread_t th[CB_THREADS];
    struct strbuf body = STRBUF_INIT;
    json_t *pod;
    uint64_t rev0, heirs0, commits0, cur = 0, chain = 0;
    char *buf = NULL, *text, sum[64], name[32];
    size_t len = 0, cap = 0;
    int i, t, ok = 0;

    if (fx_open(&f, 100000))
        return;
    CHECK_OK(strbuf_printf(&body, "{\"devices\":[{\"id\":\"held\"}"));
    for (i = 0; i < CB_THREADS; i++)
        CHECK_OK(strbuf_printf(&body, ",{\"id\":\"n-%d\"}", i));
    CHECK_OK(strbuf_printf(&body, "]}"));
    text = strbuf_detach(&body, &len);
    CHECK_OK(put_devices(&f, NIC, text, NULL));
    free(text);
    len = 0;
    CHECK_OK(gc_bind(f.st, "holder", "held", NULL));
    fx_some_events(&f, 1);
    rev0 = store_revision(f.st);
    heirs0 = f.st->commit.nheirs;
    commits0 = f.st->commit.ncommits;

    pthread_mutex_lock(&f.st->commit.mu);
    for (t = 0; t < CB_THREADS; t++) {
        args[t] = (struct cb_arg){.st = f.st, .t = t};
        CHECK_OK(pthread_create(&th[t], NULL, cb_writer, &args[t]));
    }
    for (i = 0; i < 2000 && queued(f.st) < CB_THREADS; i++)
        usleep(1000);
    CHECK_EQ_INT(queued(f.st), CB_THREADS);
    pthread_mutex_unlock(&f.st->commit.mu);
    /* a device write, while the queue runs */
    CHECK_OK(put_devices(&f, GPU, FOUR_GPUS, NULL));
    for (t = 0; t < CB_THREADS; t++)
        pthread_join(th[t], NULL);

    /* the first combiner ran COMMIT_COMBINE full batches without handing
     * over, then woke exactly one heir for the rest (and the device write,
     * unless that came after, on its own) */
    CHECK_EQ_INT(f.st->commit.nheirs - heirs0, 1);
    CHECK(f.st->commit.ncommits - commits0 >= 3 && f.st->commit.ncommits - commits0 <= 4);
    for (t = 0; t < CB_THREADS; t++) {
        if (t % 3 == 0) {
            CHECK_EQ_INT(args[t].rc, ERR_CONFLICT);
            continue;
        }
        CHECK_OK(args[t].rc);
        CHECK(args[t].rev > rev0 && args[t].rev <= store_revision(f.st));
        ok++;
        snprintf(name, sizeof(name), "c-%d", t);
        pod = NULL;
        CHECK_OK(store_pod_get(f.st, "gc", name, &pod));
        json_decref(pod);
    }
    for (t = 0; t < CB_THREADS; t += 3) {
        snprintf(name, sizeof(name), "c-%d", t);
        pod = NULL;
        CHECK_EQ_INT(store_pod_get(f.st, "gc", name, &pod), ERR_NOTFOUND);
    }
    /* each good bind: the pod and its device; the four GPUs */
    fx_some_events(&f, 2 * ok + 4);
    CHECK_OK(store_changes_after(f.st, &cur, NULL, 100000, &buf, &len, &cap));
    CHECK_EQ_INT(summarise(buf, len, &chain, sum, sizeof(sum)), (int)store_revision(f.st));
    CHECK_EQ_INT(cur, store_revision(f.st));
    free(buf);
    fx_close(&f);
}

/* Writers from 8 threads share COMMITs (fewer commits than writes), every
 * acknowledged write is there (also after a reopen), every refused one
 * (a conflict inside a batch) left nothing behind, and the revisions of the
 * change log and the feed are contiguous. */
static void test_group_commit(void)
{
    struct fx f;
    struct store_opts o = {.history = 100000};
    struct gc_arg args[GC_THREADS];
    pthread_t th[GC_THREADS];
    struct strbuf body = STRBUF_INIT;
    struct store_stats stats;
    json_t *pod;
    uint64_t rev0, cur = 0, chain = 0;
    char *buf = NULL, *text, sum[64], name[32], b[64];
    size_t len = 0, cap = 0;
    int i, t, nchanges;

    if (fx_open(&f, 100000))
        return;
    CHECK_OK(strbuf_printf(&body, "{\"devices\":[{\"id\":\"held\"}"));
    for (i = 0; i < GC_THREADS * GC_EACH; i++)
        CHECK_OK(strbuf_printf(&body, ",{\"id\":\"n-%d\"}", i));
    for (i = 0; i < 200; i++)
        CHECK_OK(strbuf_printf(&body, ",{\"id\":\"s-%d\"}", i));
    CHECK_OK(strbuf_printf(&body, "]}"));
    text = strbuf_detach(&body, &len);
    CHECK_OK(put_devices(&f, NIC, text, NULL));
    free(text);
    len = 0;
    CHECK_OK(gc_bind(f.st, "holder", "held", NULL));
    fx_some_events(&f, 1);
    rev0 = store_revision(f.st);

    for (t = 0; t < GC_THREADS; t++) {
        memset(&args[t], 0, sizeof(args[t]));
        args[t].st = f.st;
        args[t].t = t;
        CHECK_OK(pthread_create(&th[t], NULL, gc_writer, &args[t]));
    }
    for (t = 0; t < GC_THREADS; t++)
        pthread_join(th[t], NULL);
    for (t = 0; t < GC_THREADS; t++) {
        for (i = 0; i < GC_EACH; i++) {
            CHECK_OK(args[t].ok_rc[i]);
            CHECK_EQ_INT(args[t].bad_rc[i], ERR_CONFLICT);
            CHECK(args[t].rev[i] > rev0 && args[t].rev[i] <= store_revision(f.st));
        }
    }
    /* each bind: the pod plus its device's holder change */
    fx_some_events(&f, 2 * GC_THREADS * GC_EACH);
    CHECK_OK(store_stats(f.st, &stats));
    CHECK(stats.writes >= GC_THREADS * GC_EACH);
    printf("# group commit: %llu writes in %llu commits\n", (unsigned long long)stats.writes,
           (unsigned long long)stats.commits);
    CHECK(stats.commits < stats.writes);
    store_stats_release(&stats);
    /* 200 more writes, each its own COMMIT of several pages: over 1000 WAL
     * frames, so a checkpoint has run (or the thread's soon will) */
    for (i = 0; i < 200; i++) {
        snprintf(name, sizeof(name), "s-%d", i);
        CHECK_OK(gc_bind(f.st, name, name, NULL));
    }
    fx_some_events(&f, 400);
    for (i = 0; i < 100; i++) {
        CHECK_OK(store_stats(f.st, &stats));
        t = (int)stats.checkpoints;
        store_stats_release(&stats);
        if (t > 0)
            break;
        usleep(50 * 1000);
    }
    CHECK(t > 0);
    CHECK_OK(store_changes_after(f.st, &cur, NULL, 100000, &buf, &len, &cap));
    nchanges = summarise(buf, len, &chain, sum, sizeof(sum));
    CHECK_EQ_INT(nchanges, (int)store_revision(f.st));
    CHECK_EQ_INT(cur, store_revision(f.st));
    free(buf);

    rev0 = store_revision(f.st);
    fx_close_store(&f);
    o.path = f.path;
    CHECK_OK(store_open(&o, &f.st));
    if (!f.st)
        return;
    fx_attach_feed(&f);
    CHECK_EQ_INT(store_revision(f.st), rev0);
    for (t = 0; t < GC_THREADS; t++) {
        for (i = 0; i < GC_EACH; i++) {
            snprintf(name, sizeof(name), "p-%d-%d", t, i);
            pod = NULL;
            CHECK_OK(store_pod_get(f.st, "gc", name, &pod));
            json_decref(pod);
            snprintf(name, sizeof(name), "x-%d-%d", t, i);
            pod = NULL;
            CHECK_EQ_INT(store_pod_get(f.st, "gc", name, &pod), ERR_NOTFOUND);
            json_decref(pod);
        }
    }
    CHECK_STREQ(holder(&f, NIC, "held", b, sizeof(b)), "gc/holder/c");
    fx_close(&f);
}

/* What the feed saw when a batch was published: whether a checkpoint was
 * still to come, and how many the write connection had done by then. */
struct ckpt_seen {
    struct store *st;
    int due;            /* publishes with a checkpoint still due */
    uint64_t done_then; /* nckpts_commit at the last such publish */
};

static void on_publish_ckpt(void *ctx)
{
    struct ckpt_seen *c = ctx;

    if (!c->st->commit.ckpt.due)
        return;
    c->due++;
    c->done_then = __atomic_load_n(&c->st->commit.ckpt.ndone_here, __ATOMIC_RELAXED);
}

/* One writer at a time: after the batch that takes the WAL past 1000 frames
 * has published its events, the write connection finds no write queued and
 * checkpoints itself, so a watcher never waits for a checkpoint; the log then
 * starts over, so the checkpoint thread is never woken. 400 binds of new pods
 * write 3-4 pages each: past 1000 frames, short of 4000 (where the write
 * connection checkpoints anyway). */
static void test_checkpoint_in_commit(void)
{
    struct ckpt_seen seen = {0};
    struct fx f;
    struct strbuf body = STRBUF_INIT;
    struct store_stats stats;
    uint64_t rev0;
    char *text, name[32];
    size_t len = 0;
    int i;

    if (fx_open(&f, 100000))
        return;
    CHECK_OK(strbuf_printf(&body, "{\"devices\":[{\"id\":\"s-0\"}"));
    for (i = 1; i < 400; i++)
        CHECK_OK(strbuf_printf(&body, ",{\"id\":\"s-%d\"}", i));
    CHECK_OK(strbuf_printf(&body, "]}"));
    text = strbuf_detach(&body, &len);
    CHECK_OK(put_devices(&f, NIC, text, NULL));
    free(text);
    rev0 = store_revision(f.st);
    seen.st = f.st;
    feed_set_notify(f.feed, on_publish_ckpt, &seen);
    for (i = 0; i < 400; i++) {
        snprintf(name, sizeof(name), "s-%d", i);
        CHECK_OK(gc_bind(f.st, name, name, NULL));
        if (seen.due) /* that write's checkpoint came after its events */
            CHECK(__atomic_load_n(&f.st->commit.ckpt.ndone_here, __ATOMIC_RELAXED) >
                  seen.done_then);
    }
    CHECK(seen.due >= 1);
    CHECK(!f.st->commit.ckpt.due);
    CHECK(__atomic_load_n(&f.st->commit.ckpt.ndone_here, __ATOMIC_RELAXED) >= 1);
    CHECK_OK(store_stats(f.st, &stats));
    CHECK_EQ_INT(stats.checkpoints,
                 (int)__atomic_load_n(&f.st->commit.ckpt.ndone_here, __ATOMIC_RELAXED));
    store_stats_release(&stats);
    CHECK_EQ_INT(store_revision(f.st), rev0 + 400 * 2); /* each: the pod, its device */
    fx_close(&f);
}

/* The file is its process's while a store has it open: store_open in
 * another process fails with ERR_UNAVAIL, and the holder writes on. The
 * child is forked before the file is opened here: a fork's copy of SQLite's
 * state would believe it held the file too. */
static void test_other_process(void)
{
    struct fx f;
    int go[2], status = -1;
    pid_t pid;

    CHECK(pipe(go) == 0);
    pid = fork();
    CHECK(pid >= 0);
    if (pid == 0) {
        struct store *st = NULL;
        struct store_opts o = {.history = 100};
        char path[128];
        ssize_t n;
        err_t rc;

        close(go[1]);
        n = read(go[0], path, sizeof(path) - 1);
        if (n <= 0)
            _exit(3);
        path[n] = '\0';
        o.path = path;
        rc = store_open(&o, &st);
        _exit(rc == ERR_UNAVAIL && !st ? 0 : rc == ERR_OK ? 1 : 2);
    }
    close(go[0]);
    if (fx_open(&f, 100) == 0)
        CHECK(write(go[1], f.path, strlen(f.path)) == (ssize_t)strlen(f.path));
    close(go[1]); /* without a path, the child reads none and exits 3 */
    CHECK(waitpid(pid, &status, 0) == pid);
    CHECK(WIFEXITED(status));
    CHECK_EQ_INT(WEXITSTATUS(status), 0); /* 1: it opened the file; 2: another error */
    if (!f.st)
        return;
    CHECK_OK(put_devices(&f, GPU, FOUR_GPUS, NULL));
    CHECK_EQ_INT(store_revision(f.st), 4);
    fx_close(&f);
}

TEST_MAIN(quiet, test_open_schema, test_event_text, test_rebind_event_text,
          test_rebind_same_uid_conflict, test_register, test_bind, test_allocate,
          test_numa_preference, test_reservations, test_release, test_removed_bound_device,
          test_removed_unhealthy_device, test_let_go_rows, test_ttl, test_changes_after,
          test_ring_head, test_ring_layout, test_snapshot, test_persistence, test_combiner,
          test_dropped_batch, test_first_member, test_group_commit, test_checkpoint_in_commit,
          test_statement_cache, test_other_process)
