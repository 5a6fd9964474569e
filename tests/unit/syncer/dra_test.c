/* SPDX-License-Identifier: Apache-2.0 */
/* dra_test.c - the node's ResourceSlices as podresd's DRA inventory, through
 * syncer/dra.h: the slice view the cache keeps, the device entries made of
 * attributes (properties, aliases, physical), pools and their generations,
 * and the PUTs dra_sync makes or does not make against a canned podresd
 * (a set changed, a driver gone, 409, 413, a failure, a new feed epoch, drivers
 * podresd has from before). */
#include "../../../common/common.h"
#include "../../../syncer/dra.h"
#include "../test.h"
#include "../kube/responder.h"

#define CHECK_PREFIX(s, prefix)                                                                    \
    TEST_REPORT(strncmp((s), (prefix), strlen(prefix)) == 0, "\"%.80s\" does not start \"%s\"",    \
                (s), (prefix))
#define CHECK_HAS(s, part)                                                                         \
    TEST_REPORT(strstr((s), (part)) != NULL, "\"%.300s\" lacks \"%s\"", (s), (part))

#define HEAD(code)                                                                                 \
    "HTTP/1.1 " code "\r\nContent-Type: application/json\r\nConnection: close\r\n\r\n"
#define TOOK HEAD_200 "{\"devices\":[],\"revision\":9}"

static json_t *parse(const char *text)
{
    json_error_t e;
    json_t *v = json_loads(text, 0, &e);

    TEST_REPORT(v != NULL, "bad test JSON: %s (%.60s)", e.text, text);
    return v;
}

/* A ResourceSlice as the API server lists it, with what the view drops. */
#define SLICE_A                                                                                    \
    "{\"apiVersion\":\"resource.k8s.io/v1\",\"kind\":\"ResourceSlice\",\"metadata\":{\"name\":"    \
    "\"node-a-gpu-x1\",\"resourceVersion\":\"7\",\"uid\":\"u\",\"managedFields\":[{}]},"           \
    "\"spec\":{\"driver\":\"gpu.example.com\",\"nodeName\":\"node-a\",\"pool\":{\"name\":"         \
    "\"node-a\",\"generation\":1,\"resourceSliceCount\":1},\"devices\":[{\"name\":\"gpu-1\","      \
    "\"attributes\":{\"uuid\":{\"string\":\"GPU-1111\"},"                                          \
    "\"resource.kubernetes.io/pciBusID\":{\"string\":\"0000:3b:00.0\"},\"index\":{\"int\":1},"     \
    "\"mig\":{\"bool\":false},\"driverVersion\":{\"version\":\"550.1.0\"},"                        \
    "\"model\":{\"string\":\"H100 80GB\"}},\"capacity\":{\"memory\":{\"value\":\"80Gi\"}}},"       \
    "{\"name\":\"gpu-0\",\"attributes\":{\"gpu.example.com/uuid\":{\"string\":\"GPU-0000\"}}}]}}"

static void test_view_and_entries(void)
{
    json_t *slice = parse(SLICE_A), *view = dra_slice_view(slice), *slices, *inv, *want;

    want = parse("{\"metadata\":{\"name\":\"node-a-gpu-x1\",\"resourceVersion\":\"7\"},\"spec\":{"
                 "\"driver\":\"gpu.example.com\",\"nodeName\":\"node-a\",\"pool\":{\"name\":"
                 "\"node-a\",\"generation\":1},\"devices\":[{\"name\":\"gpu-1\",\"attributes\":{"
                 "\"uuid\":{\"string\":\"GPU-1111\"},\"resource.kubernetes.io/pciBusID\":{"
                 "\"string\":\"0000:3b:00.0\"},\"index\":{\"int\":1},\"mig\":{\"bool\":false},"
                 "\"driverVersion\":{\"version\":\"550.1.0\"},\"model\":{\"string\":\"H100 "
                 "80GB\"}}},{\"name\":\"gpu-0\",\"attributes\":{\"gpu.example.com/uuid\":{"
                 "\"string\":\"GPU-0000\"}}}]}}");
    CHECK(json_equal(view, want));
    json_decref(want);
    slices = json_pack("{s:o}", "node-a-gpu-x1", view);
    inv = dra_inventory(slices);
    want = parse("{\"gpu.example.com\":[{\"id\":\"node-a/gpu-0\",\"aliases\":[\"GPU-0000\"],"
                 "\"properties\":{\"gpu.example.com/uuid\":\"GPU-0000\"}},"
                 "{\"id\":\"node-a/gpu-1\",\"aliases\":[\"0000:3b:00.0\",\"GPU-1111\"],"
                 "\"properties\":{\"uuid\":\"GPU-1111\",\"resource.kubernetes.io/pciBusID\":"
                 "\"0000:3b:00.0\",\"index\":\"1\",\"mig\":\"false\",\"driverVersion\":"
                 "\"550.1.0\",\"model\":\"H100 80GB\"}}]}");
    CHECK(json_equal(inv, want));
    json_decref(want);
    json_decref(inv);
    json_decref(slices);
    json_decref(slice);
}

/* A MIG slice names its GPU (parentUUID); a serial is an alias; a value
 * podresd would refuse as a name is a property only; a device without
 * attributes is an entry with its id alone. */
static void test_physical_and_odd_values(void)
{
    json_t *slices = parse(
        "{\"s\":{\"metadata\":{\"name\":\"s\"},\"spec\":{\"driver\":\"gpu.example.com\","
        "\"pool\":{\"name\":\"p/q\",\"generation\":0},\"devices\":["
        "{\"name\":\"mig-1\",\"attributes\":{\"uuid\":{\"string\":\"MIG-aa\"},\"parentUUID\":{"
        "\"string\":\"GPU-1111\"},\"serial\":{\"int\":42},\"x.com/serial\":{\"string\":\"two "
        "words\"},\"y.com/serial\":{\"string\":\"-lead\"}}},{\"name\":\"bare\"},{\"attributes\":{}}]}}}");
    json_t *inv = dra_inventory(slices), *want;

    want = parse("{\"gpu.example.com\":[{\"id\":\"p/q/bare\"},{\"id\":\"p/q/mig-1\",\"physical\":"
                 "\"GPU-1111\",\"aliases\":[\"42\",\"MIG-aa\"],\"properties\":{\"uuid\":"
                 "\"MIG-aa\",\"parentUUID\":\"GPU-1111\",\"serial\":\"42\",\"x.com/serial\":"
                 "\"two words\",\"y.com/serial\":\"-lead\"}}]}");
    CHECK(json_equal(inv, want));
    json_decref(want);
    json_decref(inv);
    json_decref(slices);
}

/* Two drivers, two pools: a pool's older generation does not count (it is
 * being replaced), a device named twice in a pool counts once (the slice
 * first by name), a slice without driver or pool is ignored. */
static void test_pools_and_generations(void)
{
    json_t *slices = parse(
        "{\"b-old\":{\"spec\":{\"driver\":\"gpu.example.com\",\"pool\":{\"name\":\"p\","
        "\"generation\":1},\"devices\":[{\"name\":\"stale\"}]}},"
        "\"b-new\":{\"spec\":{\"driver\":\"gpu.example.com\",\"pool\":{\"name\":\"p\","
        "\"generation\":2},\"devices\":[{\"name\":\"g1\",\"attributes\":{\"m\":{\"string\":"
        "\"second\"}}}]}},"
        "\"a-new\":{\"spec\":{\"driver\":\"gpu.example.com\",\"pool\":{\"name\":\"p\","
        "\"generation\":2},\"devices\":[{\"name\":\"g1\",\"attributes\":{\"m\":{\"string\":"
        "\"first\"}}},{\"name\":\"g0\"}]}},"
        "\"nic\":{\"spec\":{\"driver\":\"nic.example.com\",\"pool\":{\"name\":\"p\"},"
        "\"devices\":[{\"name\":\"eth0\"}]}},"
        "\"junk\":{\"spec\":{\"pool\":{\"name\":\"p\"},\"devices\":[{\"name\":\"x\"}]}}}");
    json_t *inv = dra_inventory(slices), *want;

    want = parse("{\"gpu.example.com\":[{\"id\":\"p/g0\"},{\"id\":\"p/g1\",\"properties\":{"
                 "\"m\":\"first\"}}],\"nic.example.com\":[{\"id\":\"p/eth0\"}]}");
    CHECK(json_equal(inv, want));
    json_decref(want);
    json_decref(inv);
    json_decref(slices);
    slices = json_object();
    inv = dra_inventory(slices);
    CHECK(json_is_object(inv) && json_object_size(inv) == 0);
    json_decref(inv);
    json_decref(slices);
}

/* ---- dra_sync against a canned podresd ---- */

struct world {
    struct responder srv;
    struct kubeconfig kc;
    struct dra d;
    char url[64];
};

static void world_start(struct world *w, const struct reply *r, int n)
{
    struct rest_opts o = {.max_attempts = 1};
    json_t *empty = json_object();

    memset(w, 0, sizeof(*w));
    responder_start(&w->srv, r, n);
    snprintf(w->url, sizeof(w->url), "http://127.0.0.1:%d", w->srv.port);
    w->kc.server = w->url;
    o.kc = &w->kc;
    w->d = (struct dra){
        .pd = rest_new(&o), .slices = cache_new(NULL, NULL), .devs = cache_new(NULL, NULL)};
    cache_replace(w->d.slices, empty);
    cache_replace(w->d.devs, empty);
    json_decref(empty);
}

static void world_free(struct world *w)
{
    responder_stop(&w->srv);
    rest_free(w->d.pd);
    cache_free(w->d.slices);
    cache_free(w->d.devs);
    dra_release(&w->d);
}

/* Slice 'name' of 'driver', pool "p", with devices named in 'names' (a
 * JSON array text), into the cache. */
static void put_slice(struct world *w, const char *name, const char *driver, const char *names)
{
    json_t *devs = parse(names), *list = json_array(), *v, *s;
    size_t i;

    json_array_foreach(devs, i, v)
        json_array_append_new(list, json_pack("{s:O}", "name", v));
    s = json_pack("{s:{s:s},s:{s:s,s:{s:s,s:i},s:o}}", "metadata", "name", name, "spec", "driver",
                  driver, "pool", "name", "p", "generation", 1, "devices", list);
    cache_set(w->d.slices, name, s, false);
    json_decref(s);
    json_decref(devs);
}

static uint64_t pushes(struct world *w, enum dra_result r)
{
    return w->d.pushes[r];
}

/* Each driver's set once; nothing again while nothing changed; a changed
 * set, and an empty one when a driver's slices all went. */
static void test_sync_changes_only(void)
{
    const struct reply r[] = {{TOOK, NULL, 0}, {TOOK, NULL, 0}, {TOOK, NULL, 0}, {TOOK, NULL, 0}};
    struct world w;
    struct error e = {0};
    bool pushed = false;
    struct strbuf sb = STRBUF_INIT;

    CHECK_OK(rest_global_init());
    world_start(&w, r, 4);
    put_slice(&w, "s1", "gpu.example.com", "[\"g0\",\"g1\"]");
    put_slice(&w, "s2", "nic.example.com", "[\"eth0\"]");
    CHECK_OK(dra_sync(&w.d, 1, &pushed, &e));
    CHECK(pushed);
    CHECK_EQ_INT(w.srv.served, 2);
    CHECK(strstr(w.srv.req[0], "PUT /v1/drivers/gpu.example.com/devices HTTP") ||
          strstr(w.srv.req[1], "PUT /v1/drivers/gpu.example.com/devices HTTP"));
    CHECK(strstr(w.srv.req[0], "PUT /v1/drivers/nic.example.com/devices HTTP") ||
          strstr(w.srv.req[1], "PUT /v1/drivers/nic.example.com/devices HTTP"));
    CHECK(strstr(w.srv.req[0], "{\"devices\":[{\"id\":\"p/g0\"},{\"id\":\"p/g1\"}]}") ||
          strstr(w.srv.req[1], "{\"devices\":[{\"id\":\"p/g0\"},{\"id\":\"p/g1\"}]}"));
    CHECK_EQ_INT(w.d.drivers, 2);
    CHECK_EQ_INT(w.d.devices, 3);

    CHECK_OK(dra_sync(&w.d, 1, &pushed, &e));
    CHECK(!pushed);
    CHECK_EQ_INT(w.srv.served, 2);

    put_slice(&w, "s1", "gpu.example.com", "[\"g0\"]");
    CHECK_OK(dra_sync(&w.d, 1, &pushed, &e));
    CHECK(pushed);
    CHECK_EQ_INT(w.srv.served, 3);
    CHECK_PREFIX(w.srv.req[2], "PUT /v1/drivers/gpu.example.com/devices HTTP");
    CHECK_HAS(w.srv.req[2], "{\"devices\":[{\"id\":\"p/g0\"}]}");

    cache_del(w.d.slices, "s2");
    CHECK_OK(dra_sync(&w.d, 1, &pushed, &e));
    CHECK_EQ_INT(w.srv.served, 4);
    CHECK_PREFIX(w.srv.req[3], "PUT /v1/drivers/nic.example.com/devices HTTP");
    CHECK_HAS(w.srv.req[3], "{\"devices\":[]}");
    CHECK_OK(dra_sync(&w.d, 1, &pushed, &e)); /* and that once */
    CHECK(!pushed);
    CHECK_EQ_INT(pushes(&w, DRA_PUSH_OK), 4);
    CHECK_EQ_INT(w.d.drivers, 1);
    CHECK_OK(dra_render(&w.d, &sb));
    CHECK_HAS(sb.buf, "podres_syncer_dra_pushes_total{result=\"ok\"} 4\n");
    CHECK_HAS(sb.buf, "podres_syncer_dra_devices 1\n");
    strbuf_release(&sb);
    world_free(&w);
}

/* A 409 is counted and not sent again until the set changes; a failure is
 * returned, and the set goes again at the next sync; a new epoch (podresd
 * may have restarted) sends every set again. */
static void test_sync_refused_failed_epoch(void)
{
    const struct reply r[] = {
        {HEAD("409 Conflict") "{\"kind\":\"Status\",\"code\":409,\"reason\":\"Conflict\","
                              "\"message\":\"alias GPU-1 of p/g0 names device example.com/gpu "
                              "GPU-1\"}",
         NULL, 0},
        {HEAD("500 Internal Server Error") "{\"kind\":\"Status\",\"code\":500,\"message\":\"disk "
                                           "full\"}",
         NULL, 0},
        {TOOK, NULL, 0},
        {TOOK, NULL, 0},
    };
    struct world w;
    struct error e = {0};
    bool pushed = true;

    world_start(&w, r, 4);
    put_slice(&w, "s1", "gpu.example.com", "[\"g0\"]");
    CHECK_OK(dra_sync(&w.d, 1, &pushed, &e));
    CHECK(!pushed);
    CHECK_EQ_INT(pushes(&w, DRA_PUSH_CONFLICT), 1);
    CHECK_OK(dra_sync(&w.d, 1, &pushed, &e)); /* the same set: not again */
    CHECK_EQ_INT(w.srv.served, 1);

    put_slice(&w, "s1", "gpu.example.com", "[\"g0\",\"g1\"]");
    CHECK(dra_sync(&w.d, 1, &pushed, &e) != ERR_OK);
    CHECK_HAS(e.msg, "disk full");
    CHECK_EQ_INT(pushes(&w, DRA_PUSH_FAILED), 1);
    CHECK_OK(dra_sync(&w.d, 1, &pushed, &e));
    CHECK(pushed);
    CHECK_EQ_INT(w.srv.served, 3);
    CHECK_HAS(w.srv.req[2], "{\"devices\":[{\"id\":\"p/g0\"},{\"id\":\"p/g1\"}]}");

    CHECK_OK(dra_sync(&w.d, 2, &pushed, &e));
    CHECK(pushed);
    CHECK_EQ_INT(w.srv.served, 4);
    CHECK_PREFIX(w.srv.req[3], "PUT /v1/drivers/gpu.example.com/devices HTTP");
    world_free(&w);
}

/* A driver whose last set podresd refused is still one to look at: when
 * its slices all go, podresd is sent the empty set, once. */
static void test_sync_refused_then_gone(void)
{
    const struct reply r[] = {
        {TOOK, NULL, 0},
        {HEAD("409 Conflict") "{\"kind\":\"Status\",\"code\":409,\"reason\":\"Conflict\","
                              "\"message\":\"alias clash\"}",
         NULL, 0},
        {TOOK, NULL, 0},
    };
    struct world w;
    struct error e = {0};
    bool pushed = false;

    world_start(&w, r, 3);
    put_slice(&w, "s1", "gpu.example.com", "[\"g0\"]");
    CHECK_OK(dra_sync(&w.d, 1, &pushed, &e));
    put_slice(&w, "s1", "gpu.example.com", "[\"g0\",\"g1\"]");
    CHECK_OK(dra_sync(&w.d, 1, &pushed, &e));
    CHECK_EQ_INT(pushes(&w, DRA_PUSH_CONFLICT), 1);
    cache_del(w.d.slices, "s1");
    CHECK_OK(dra_sync(&w.d, 1, &pushed, &e));
    CHECK(pushed);
    CHECK_EQ_INT(w.srv.served, 3);
    CHECK_PREFIX(w.srv.req[2], "PUT /v1/drivers/gpu.example.com/devices HTTP");
    CHECK_HAS(w.srv.req[2], "{\"devices\":[]}");
    CHECK_OK(dra_sync(&w.d, 1, &pushed, &e)); /* and that once */
    CHECK(!pushed);
    CHECK_EQ_INT(w.srv.served, 3);
    world_free(&w);
}

/* A set over podresd's body limit (413) is refused as a 422 is: counted as
 * invalid, not a failure, and not sent again until the slices change. */
static void test_sync_too_large(void)
{
    const struct reply r[] = {
        {HEAD("413 Request Entity Too Large") "{\"kind\":\"Status\",\"code\":413,\"reason\":"
                                              "\"RequestEntityTooLarge\",\"message\":\"body "
                                              "over 1048576 bytes\"}",
         NULL, 0},
        {TOOK, NULL, 0},
    };
    struct world w;
    struct error e = {0};
    bool pushed = true;

    world_start(&w, r, 2);
    put_slice(&w, "s1", "gpu.example.com", "[\"g0\"]");
    CHECK_OK(dra_sync(&w.d, 1, &pushed, &e));
    CHECK(!pushed);
    CHECK_EQ_INT(pushes(&w, DRA_PUSH_INVALID), 1);
    CHECK_EQ_INT(pushes(&w, DRA_PUSH_FAILED), 0);
    CHECK_OK(dra_sync(&w.d, 1, &pushed, &e)); /* the same set: not again */
    CHECK_EQ_INT(w.srv.served, 1);
    put_slice(&w, "s1", "gpu.example.com", "[\"g1\"]");
    CHECK_OK(dra_sync(&w.d, 1, &pushed, &e));
    CHECK(pushed);
    CHECK_EQ_INT(w.srv.served, 2);
    world_free(&w);
}

/* Under a new epoch, a driver podresd lists devices of that no slice has
 * (left from before) is sent an empty set, once; a device plugin's resource
 * (with a '/') is not a driver. */
static void test_sync_leftovers(void)
{
    const struct reply r[] = {{TOOK, NULL, 0}};
    json_t *dev = parse("{\"resourceName\":\"old.example.com\",\"id\":\"p/g0\"}");
    json_t *dp = parse("{\"resourceName\":\"example.com/gpu\",\"id\":\"gpu-0\"}");
    struct world w;
    struct error e = {0};
    bool pushed = false;

    world_start(&w, r, 1);
    cache_set(w.d.devs, "old.example.com/p/g0", dev, false);
    cache_set(w.d.devs, "example.com/gpu/gpu-0", dp, false);
    CHECK_OK(dra_sync(&w.d, 1, &pushed, &e));
    CHECK(pushed);
    CHECK_EQ_INT(w.srv.served, 1);
    CHECK_PREFIX(w.srv.req[0], "PUT /v1/drivers/old.example.com/devices HTTP");
    CHECK_HAS(w.srv.req[0], "{\"devices\":[]}");
    CHECK_OK(dra_sync(&w.d, 1, &pushed, &e));
    CHECK(!pushed);
    world_free(&w);
    json_decref(dev);
    json_decref(dp);
    rest_global_cleanup();
}

TEST_MAIN(test_view_and_entries, test_physical_and_odd_values, test_pools_and_generations,
          test_sync_changes_only, test_sync_refused_failed_epoch, test_sync_refused_then_gone,
          test_sync_too_large, test_sync_leftovers)
