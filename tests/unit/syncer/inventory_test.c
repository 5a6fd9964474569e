/* SPDX-License-Identifier: Apache-2.0 */
/* inventory_test.c - the NodeDevices status made from podresd's devices (the
 * view, order, totals, bound, condition) and the writes inventory_sync makes
 * or does not make, through syncer/inventory.h, against a canned server. */
#include "../../../common/common.h"
#include "../../../common/clock.h"
#include "../../../syncer/inventory.h"
#include "../../../syncer/queue.h"
#include "../test.h"
#include "../kube/responder.h"

#define CHECK_PREFIX(s, prefix)                                                                    \
    TEST_REPORT(strncmp((s), (prefix), strlen(prefix)) == 0, "\"%.80s\" does not start \"%s\"",    \
                (s), (prefix))

static json_t *parse(const char *text)
{
    json_error_t e;
    json_t *v = json_loads(text, 0, &e);

    TEST_REPORT(v != NULL, "bad test JSON: %s", e.text);
    return v;
}

/* 'devs' keyed as the feed keys them, from podresd Devices. */
static json_t *devices(const char *podresd_list)
{
    json_t *list = parse(podresd_list), *all = json_object(), *v;
    char key[300];
    size_t i;

    json_array_foreach(list, i, v) {
        CHECK(inventory_key(v, key, sizeof(key)));
        json_object_set_new(all, key, inventory_device(v));
    }
    json_decref(list);
    return all;
}

static void test_device_view(void)
{
    json_t *d = parse("{\"resourceName\":\"a.com/gpu\",\"id\":\"g0\",\"health\":\"Healthy\","
                      "\"topology\":{\"nodes\":[{\"ID\":1},{\"ID\":3}]},\"properties\":{\"m\":"
                      "\"H100\"},\"holder\":{\"namespace\":\"d\"},\"reservedFor\":null,"
                      "\"revision\":7}");
    json_t *v = inventory_device(d), *want;
    char key[64];

    want = parse("{\"resourceName\":\"a.com/gpu\",\"id\":\"g0\",\"health\":\"Healthy\","
                 "\"topology\":{\"nodes\":[{\"id\":1},{\"id\":3}]},\"properties\":{\"m\":"
                 "\"H100\"}}");
    CHECK(json_equal(v, want));
    CHECK(inventory_key(d, key, sizeof(key)));
    CHECK_STREQ(key, "a.com/gpu/g0");
    json_decref(v);
    json_decref(want);
    json_decref(d);
    /* no properties, no topology, health other than Healthy */
    d = parse("{\"resourceName\":\"a.com/gpu\",\"id\":\"g1\",\"health\":\"Unknown\"}");
    v = inventory_device(d);
    want = parse("{\"resourceName\":\"a.com/gpu\",\"id\":\"g1\",\"health\":\"Unhealthy\","
                 "\"topology\":{\"nodes\":[]}}");
    CHECK(json_equal(v, want));
    json_decref(v);
    json_decref(want);
    json_decref(d);
    /* a MIG slice names its GPU; a whole device (physical = its own id) does not */
    d = parse("{\"resourceName\":\"gpu.example.com\",\"id\":\"p/mig-1\",\"health\":\"Healthy\","
              "\"physical\":\"GPU-1111\",\"aliases\":[\"MIG-aa\"],\"holder\":{\"claim\":{"
              "\"namespace\":\"ml\",\"name\":\"c\"}}}");
    v = inventory_device(d);
    want = parse("{\"resourceName\":\"gpu.example.com\",\"id\":\"p/mig-1\",\"health\":\"Healthy\","
                 "\"topology\":{\"nodes\":[]},\"aliases\":[\"MIG-aa\"],\"physical\":\"GPU-1111\"}");
    CHECK(json_equal(v, want));
    CHECK(inventory_key(d, key, sizeof(key)));
    CHECK_STREQ(key, "gpu.example.com/p/mig-1");
    json_decref(v);
    json_decref(want);
    json_decref(d);
    d = parse("{\"resourceName\":\"a.com/gpu\",\"id\":\"g2\",\"health\":\"Healthy\","
              "\"physical\":\"g2\",\"aliases\":[]}");
    v = inventory_device(d);
    want = parse("{\"resourceName\":\"a.com/gpu\",\"id\":\"g2\",\"health\":\"Healthy\","
                 "\"topology\":{\"nodes\":[]}}");
    CHECK(json_equal(v, want));
    json_decref(v);
    json_decref(want);
    json_decref(d);
    d = parse("{\"id\":\"g1\"}");
    CHECK(inventory_device(d) == NULL);
    CHECK(!inventory_key(d, key, sizeof(key)));
    json_decref(d);
}

static void test_status(void)
{
    json_t *devs = devices(
        "[{\"resourceName\":\"z.com/nic\",\"id\":\"n0\",\"health\":\"Healthy\"},"
        "{\"resourceName\":\"a.com/gpu\",\"id\":\"g1\",\"health\":\"Unhealthy\"},"
        "{\"resourceName\":\"a.com/gpu\",\"id\":\"g0\",\"health\":\"Healthy\"}]");
    json_t *st = inventory_status(devs, 42, NULL, "2026-01-01T00:00:00Z"), *again, *cond;

    CHECK(st != NULL);
    CHECK_EQ_INT(json_integer_value(json_object_get(st, "observedRevision")), 42);
    CHECK_STREQ(json_string_value(json_object_get(st, "summary")), "a.com/gpu=2,z.com/nic=1");
    CHECK_EQ_INT(json_integer_value(json_object_get(st, "unhealthy")), 1);
    CHECK(json_is_false(json_object_get(st, "truncated")));
    CHECK_STREQ(
        json_string_value(json_object_get(json_array_get(json_object_get(st, "devices"), 0), "id")),
        "g0");
    CHECK_STREQ(
        json_string_value(json_object_get(json_array_get(json_object_get(st, "devices"), 2), "id")),
        "n0");
    CHECK_EQ_INT(json_integer_value(json_object_get(
                     json_array_get(json_object_get(st, "resources"), 0), "healthy")),
                 1);
    CHECK_EQ_INT(json_integer_value(
                     json_object_get(json_array_get(json_object_get(st, "resources"), 0), "total")),
                 2);
    cond = json_array_get(json_object_get(st, "conditions"), 0);
    CHECK_STREQ(json_string_value(json_object_get(cond, "type")), "Truncated");
    CHECK_STREQ(json_string_value(json_object_get(cond, "status")), "False");
    /* later, at another revision, nothing changed: the same, time kept */
    again = inventory_status(devs, 50, st, "2026-02-02T00:00:00Z");
    CHECK(inventory_same(st, again));
    CHECK(!json_equal(st, again));
    CHECK_STREQ(json_string_value(json_object_get(
                    json_array_get(json_object_get(again, "conditions"), 0), "lastTransitionTime")),
                "2026-01-01T00:00:00Z");
    json_decref(again);
    /* a health change is a change */
    json_object_set_new(json_object_get(devs, "a.com/gpu/g1"), "health", json_string("Healthy"));
    again = inventory_status(devs, 51, st, "2026-02-02T00:00:00Z");
    CHECK(!inventory_same(st, again));
    CHECK_EQ_INT(json_integer_value(json_object_get(again, "unhealthy")), 0);
    json_decref(again);
    json_decref(st);
    json_decref(devs);
    /* none */
    devs = json_object();
    st = inventory_status(devs, 0, NULL, "2026-01-01T00:00:00Z");
    CHECK_STREQ(json_string_value(json_object_get(st, "summary")), "");
    CHECK_EQ_INT(json_array_size(json_object_get(st, "devices")), 0);
    json_decref(st);
    json_decref(devs);
}

/* Over INVENTORY_MAX_DEVICES: the first in order listed, all counted, the
 * condition says so. */
static void test_status_bound(void)
{
    json_t *devs = json_object(), *st, *cond;
    char key[64], id[32];
    int i, n = INVENTORY_MAX_DEVICES + 10;

    for (i = 0; i < n; i++) {
        snprintf(id, sizeof(id), "g%05d", i);
        snprintf(key, sizeof(key), "a.com/gpu/%s", id);
        json_object_set_new(devs, key,
                            json_pack("{s:s,s:s,s:s,s:{s:[]}}", "resourceName", "a.com/gpu", "id",
                                      id, "health", "Healthy", "topology", "nodes"));
    }
    st = inventory_status(devs, 1, NULL, "2026-01-01T00:00:00Z");
    CHECK_EQ_INT(json_array_size(json_object_get(st, "devices")), INVENTORY_MAX_DEVICES);
    CHECK(json_is_true(json_object_get(st, "truncated")));
    CHECK_EQ_INT(json_integer_value(
                     json_object_get(json_array_get(json_object_get(st, "resources"), 0), "total")),
                 n);
    CHECK_STREQ(
        json_string_value(json_object_get(
            json_array_get(json_object_get(st, "devices"), INVENTORY_MAX_DEVICES - 1), "id")),
        "g04095");
    cond = json_array_get(json_object_get(st, "conditions"), 0);
    CHECK_STREQ(json_string_value(json_object_get(cond, "status")), "True");
    CHECK(strstr(json_string_value(json_object_get(cond, "message")), "4096 of 4106 devices") !=
          NULL);
    json_decref(st);
    json_decref(devs);
}

static void test_due(void)
{
    struct inventory inv = {.interval_ms = 1000};

    CHECK_EQ_INT(inventory_due(&inv, 5000), 0);
    inv.last_write_ms = 5000;
    CHECK_EQ_INT(inventory_due(&inv, 5200), 800);
    CHECK_EQ_INT(inventory_due(&inv, 6000), 0);
}

struct world {
    struct responder srv;
    struct kubeconfig kc;
    struct rest *kube;
    struct cache *devs, *nd;
    struct inventory inv;
    char url[64];
};

static void world_start(struct world *w, const struct reply *r, int n)
{
    struct rest_opts o = {.max_attempts = 1};
    json_t *empty;

    memset(w, 0, sizeof(*w));
    responder_start(&w->srv, r, n);
    snprintf(w->url, sizeof(w->url), "http://127.0.0.1:%d", w->srv.port);
    w->kc.server = w->url;
    o.kc = &w->kc;
    w->kube = rest_new(&o);
    w->devs = cache_new(NULL, NULL);
    w->nd = cache_new(NULL, NULL);
    w->inv = (struct inventory){
        .node = "node-a", .kube = w->kube, .devs = w->devs, .nd = w->nd, .interval_ms = 1000};
    empty = json_object();
    cache_replace(w->devs, empty); /* synced, and empty */
    cache_replace(w->nd, empty);
    json_decref(empty);
}

static void world_free(struct world *w)
{
    responder_stop(&w->srv);
    rest_free(w->kube);
    cache_free(w->devs);
    cache_free(w->nd);
}

static void add_device(struct world *w, const char *id, const char *health)
{
    json_t *d = json_pack("{s:s,s:s,s:s}", "resourceName", "a.com/gpu", "id", id, "health", health);
    json_t *v = inventory_device(d);
    char key[64];

    snprintf(key, sizeof(key), "a.com/gpu/%s", id);
    cache_set(w->devs, key, v, false);
    json_decref(v);
    json_decref(d);
}

/* No object yet: the Node's uid is read, the object created owned by it,
 * its status patched; the same inventory again writes nothing; a change
 * within the interval waits; after it, one status patch. */
static void test_sync_create_then_quiet(void)
{
    const struct reply r[] = {
        {HEAD_200 "{\"metadata\":{\"name\":\"node-a\",\"uid\":\"u-1\"}}", NULL, 0},
        {"HTTP/1.1 201 Created\r\nContent-Type: application/json\r\nConnection: close\r\n\r\n"
         "{\"metadata\":{\"name\":\"node-a\",\"resourceVersion\":\"5\"},\"spec\":{}}",
         NULL, 0},
        {HEAD_200 "{}", NULL, 0},
        {HEAD_200 "{}", NULL, 0},
    };
    struct world w;
    bool wrote = false;
    uint64_t again = 0;
    struct error err = {0};
    json_t *obj, *st;

    CHECK_OK(rest_global_init());
    world_start(&w, r, 4);
    add_device(&w, "g0", "Healthy");
    w.inv.revision = 3;
    CHECK_OK(inventory_sync(&w.inv, &wrote, &again, &err));
    CHECK(wrote);
    CHECK_EQ_INT(again, 0);
    CHECK_PREFIX(w.srv.req[0], "GET /api/v1/nodes/node-a HTTP");
    CHECK_PREFIX(w.srv.req[1], "POST /apis/podres.dev/v1alpha1/nodedevices HTTP");
    CHECK(strstr(w.srv.req[1], "\"ownerReferences\":[{") != NULL);
    CHECK(strstr(w.srv.req[1], "\"uid\":\"u-1\"") != NULL);
    CHECK(strstr(w.srv.req[1], "\"podres.dev/node\":\"node-a\"") != NULL);
    CHECK_PREFIX(w.srv.req[2], "PATCH /apis/podres.dev/v1alpha1/nodedevices/node-a/status HTTP");
    CHECK(strstr(w.srv.req[2], "\"summary\":\"a.com/gpu=1\"") != NULL);
    CHECK_EQ_INT(w.inv.writes, 1);

    /* the informer now holds what was written: nothing to do, at once */
    {
        json_t *devs = json_object();
        char **keys = cache_keys(w.devs, NULL);
        size_t i;

        for (i = 0; keys && keys[i]; i++)
            json_object_set_new(devs, keys[i], cache_get(w.devs, keys[i]));
        st = inventory_status(devs, 3, NULL, "2026-01-01T00:00:00Z");
        obj = json_pack("{s:{s:s},s:o}", "metadata", "name", "node-a", "status", st);
        cache_set(w.nd, "node-a", obj, false);
        json_decref(obj);
        json_decref(devs);
        cache_keys_free(keys);
    }
    w.inv.last_write_ms = 0;
    w.inv.revision = 9; /* another revision alone is no change */
    CHECK_OK(inventory_sync(&w.inv, &wrote, &again, &err));
    CHECK(!wrote);
    CHECK_EQ_INT(w.srv.served, 3);

    /* a device goes Unhealthy just after a write: it waits for the interval */
    add_device(&w, "g0", "Unhealthy");
    w.inv.last_write_ms = clock_mono_ms();
    CHECK_OK(inventory_sync(&w.inv, &wrote, &again, &err));
    CHECK(!wrote);
    CHECK(again > 500 && again <= 1000);
    CHECK_EQ_INT(w.srv.served, 3);
    w.inv.last_write_ms = 0;
    CHECK_OK(inventory_sync(&w.inv, &wrote, &again, &err));
    CHECK(wrote);
    CHECK_PREFIX(w.srv.req[3], "PATCH /apis/podres.dev/v1alpha1/nodedevices/node-a/status HTTP");
    CHECK(strstr(w.srv.req[3], "\"unhealthy\":1") != NULL);
    world_free(&w);
}

/* No Node of that name: nothing created, said and counted, looked at again
 * after 30 s. A 403 is an error, counted. */
static void test_sync_no_node_and_forbidden(void)
{
    const struct reply r[] = {
        {"HTTP/1.1 404 Not Found\r\nContent-Type: application/json\r\nConnection: close\r\n\r\n"
         "{\"kind\":\"Status\",\"code\":404,\"message\":\"nodes \\\"node-a\\\" not found\"}",
         NULL, 0},
        {HEAD_200 "{\"metadata\":{\"name\":\"node-a\",\"uid\":\"u-1\"}}", NULL, 0},
        {"HTTP/1.1 403 Forbidden\r\nContent-Type: application/json\r\nConnection: close\r\n\r\n"
         "{\"kind\":\"Status\",\"code\":403,\"message\":\"denied by policy\"}",
         NULL, 0},
    };
    struct world w;
    bool wrote = true;
    uint64_t again = 0;
    struct error err = {0};
    struct strbuf sb = STRBUF_INIT;

    world_start(&w, r, 3);
    CHECK_OK(inventory_sync(&w.inv, &wrote, &again, &err));
    CHECK(!wrote);
    CHECK_EQ_INT(again, 30000);
    CHECK_EQ_INT(w.inv.skipped[INVENTORY_SKIP_NO_NODE], 1);
    CHECK_EQ_INT(inventory_sync(&w.inv, &wrote, &again, &err), ERR_FORBIDDEN);
    CHECK(strstr(err.msg, "denied by policy") != NULL);
    CHECK_EQ_INT(w.inv.failures, 1);
    CHECK_OK(inventory_render(&w.inv, &sb));
    CHECK(strstr(sb.buf, "podres_syncer_inventory_skipped_total{reason=\"no_node\"} 1\n") != NULL);
    CHECK(strstr(sb.buf, "podres_syncer_inventory_failures_total 1\n") != NULL);
    strbuf_release(&sb);
    world_free(&w);
}

TEST_MAIN(test_device_view, test_status, test_status_bound, test_due, test_sync_create_then_quiet,
          test_sync_no_node_and_forbidden)
