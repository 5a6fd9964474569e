/* SPDX-License-Identifier: Apache-2.0 */
/* store_fx.h - the store tests' fixture: a store in a temporary directory
 * with a feed attached to watch the events every write publishes, writes
 * made through the validators as the API makes them, and short readings of
 * devices, pods and reservations. Included by each tests/unit/server/store
 * test (and the tests of the store's parts); every function is static, and
 * a test uses those it needs. */
#ifndef PODRES_STORE_FX_H
#define PODRES_STORE_FX_H
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

/* A fixture function: each test file uses some of them. */
#define FX_FN static __attribute__((unused))

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
    struct error err;  /* the last write's error */
};

FX_FN void fx_attach_feed(struct fx *f)
{
    f->feed = feed_new(1024, store_revision(f->st));
    CHECK(f->feed != NULL);
    store_set_feed(f->st, f->feed);
    f->cursor = f->last_rev = store_revision(f->st);
}

FX_FN int fx_open(struct fx *f, uint64_t history)
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
FX_FN void fx_close_store(struct fx *f)
{
    store_free(f->st);
    f->st = NULL;
    feed_free(f->feed);
    f->feed = NULL;
}

FX_FN void fx_close(struct fx *f)
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
FX_FN void obj_key(const char *kind, const json_t *obj, char *out, size_t cap)
{
    if (strcmp(kind, "Device") == 0)
        snprintf(out, cap, "%s", json_string_value(json_object_get(obj, "id")));
    else
        snprintf(out, cap, "%s/%s", json_string_value(json_object_get(obj, "namespace")),
                 json_string_value(json_object_get(obj, "name")));
}

/* Summarise NDJSON lines as "TYPE Kind key;..." into 'out'; with 'chain'
 * check that revisions follow *last one by one and match the object's. */
FX_FN int summarise(const char *buf, size_t len, uint64_t *chain, char *out, size_t cap)
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
FX_FN int fx_events(struct fx *f, char *out, size_t cap)
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
FX_FN void fx_some_events(struct fx *f, int min)
{
    char ev[4096];
    int n = fx_events(f, ev, sizeof(ev));

    CHECK(n >= min);
}

FX_FN json_t *J(const char *s)
{
    json_t *v = json_loads(s, 0, NULL);

    if (!v) {
        fprintf(stderr, "bad test JSON: %s\n", s);
        abort();
    }
    return v;
}

FX_FN err_t put_devices(struct fx *f, const char *resource, const char *body, bool *changed)
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
FX_FN err_t bind(struct fx *f, const char *ns, const char *name, const char *body, bool *created,
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

FX_FN err_t allocate(struct fx *f, const char *ns, const char *name, const char *body,
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

FX_FN err_t reserve(struct fx *f, const char *ns, const char *name, const char *body, json_t **resv)
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

FX_FN err_t release(struct fx *f, const char *ns, const char *name, const char *uid)
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

/* A device of 'resource' from the devices list (new reference) or NULL. */
FX_FN json_t *device(struct fx *f, const char *resource, const char *id)
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
FX_FN const char *holder(struct fx *f, const char *resource, const char *id, char *out, size_t cap)
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

FX_FN const char *health(struct fx *f, const char *resource, const char *id, char *out, size_t cap)
{
    json_t *d = device(f, resource, id);

    snprintf(out, cap, "%s", d ? json_string_value(json_object_get(d, "health")) : "missing");
    json_decref(d);
    return out;
}

/* "container:resource=id,id;..." of a PodResources. */
FX_FN const char *pod_devices(const json_t *pod, char *out, size_t cap)
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

FX_FN const char *resv_state(struct fx *f, const char *ns, const char *name, char *out, size_t cap)
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

/* A store with FOUR_GPUS and pod ns/a (uid ua, container c) bound to the
 * GPUs of 'ids' (a JSON array), its events read; 0, or -1 when it cannot
 * be opened. */
FX_FN int fx_bound_a(struct fx *f, const char *ids)
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

/* Close the store and open the same files with another history. */
FX_FN int fx_reopen(struct fx *f, uint64_t history)
{
    struct store_opts o = {.path = f->path, .history = history};

    fx_close_store(f);
    CHECK_OK(store_open(&o, &f->st));
    if (!f->st)
        return -1;
    fx_attach_feed(f);
    return 0;
}

FX_FN void quiet(void)
{
    CHECK_OK(log_setup("text", "err"));
}
#endif
