/* SPDX-License-Identifier: Apache-2.0 */
/* model_test.c - the views from NodeDevices and DeviceBindings JSON through
 * plugin/model.h: states (held beats reserved, Bound pre-assignments are
 * not reservations), counts that add up, since, alias lookup, pods. */
#include "../../../common/common.h"
#include "../../../plugin/model.h"
#include "../test.h"

/* Two nodes: n1 has g0..g3 (g3 Unhealthy, g0 with aliases), n2 has x0. */
static const char nds_text[] =
    "{\"items\":["
    "{\"metadata\":{\"name\":\"n1\"},\"status\":{\"devices\":["
    "{\"resourceName\":\"a.com/gpu\",\"id\":\"g0\",\"health\":\"Healthy\","
    "\"topology\":{\"nodes\":[{\"id\":0},{\"id\":1}]},\"aliases\":[\"nvidia0\",\"0000:3b:00.0\"]},"
    "{\"resourceName\":\"a.com/gpu\",\"id\":\"g1\",\"health\":\"Healthy\"},"
    "{\"resourceName\":\"a.com/gpu\",\"id\":\"g2\",\"health\":\"Healthy\"},"
    "{\"resourceName\":\"a.com/gpu\",\"id\":\"g3\",\"health\":\"Unhealthy\"},"
    "{\"resourceName\":\"a.com/nic\",\"id\":\"nic0\",\"health\":\"Healthy\"}]}},"
    "{\"metadata\":{\"name\":\"n0\"},\"status\":{\"devices\":["
    "{\"resourceName\":\"a.com/gpu\",\"id\":\"x0\",\"health\":\"Healthy\",\"aliases\":[\"nvidia0\"]}"
    "]}}]}";

/* p1 holds g0 (pre-assigned, honoured); p2 reserves g1 and g0 (g0 taken: held
 * wins); p3 is Bound with a stale spec naming g2 (not a reservation); p4
 * holds ghost (no NodeDevices lists it) on n1, found by its label. */
static const char dvbs_text[] =
    "{\"items\":["
    "{\"metadata\":{\"namespace\":\"ml\",\"name\":\"p1\",\"creationTimestamp\":\"2024-01-01T00:00:00Z\"},"
    "\"spec\":{\"nodeName\":\"n1\",\"containers\":[{\"name\":\"main\",\"devices\":"
    "[{\"resourceName\":\"a.com/gpu\",\"deviceIds\":[\"g0\"]}]}]},"
    "\"status\":{\"nodeName\":\"n1\",\"phase\":\"Bound\",\"podUID\":\"u1\",\"summary\":\"a.com/gpu=1\","
    "\"containers\":[{\"name\":\"main\",\"devices\":[{\"resourceName\":\"a.com/gpu\",\"deviceIds\":[\"g0\"]}]}],"
    "\"conditions\":[{\"type\":\"PreassignmentHonored\",\"status\":\"True\","
    "\"lastTransitionTime\":\"2024-01-01T00:05:00Z\"}]}},"
    "{\"metadata\":{\"namespace\":\"ml\",\"name\":\"p2\",\"creationTimestamp\":\"2024-01-02T00:00:00Z\"},"
    "\"spec\":{\"nodeName\":\"n1\",\"containers\":[{\"name\":\"side\",\"devices\":"
    "[{\"resourceName\":\"a.com/gpu\",\"deviceIds\":[\"g1\",\"g0\"]}]}]},"
    "\"status\":{\"phase\":\"Pending\"}},"
    "{\"metadata\":{\"namespace\":\"web\",\"name\":\"p3\",\"creationTimestamp\":\"2024-01-03T00:00:00Z\"},"
    "\"spec\":{\"nodeName\":\"n1\",\"containers\":[{\"name\":\"main\",\"devices\":"
    "[{\"resourceName\":\"a.com/gpu\",\"deviceIds\":[\"g2\"]}]}]},"
    "\"status\":{\"nodeName\":\"n1\",\"phase\":\"Bound\",\"containers\":[{\"name\":\"main\","
    "\"devices\":[{\"resourceName\":\"a.com/nic\",\"deviceIds\":[\"nic0\"]}]}]}},"
    "{\"metadata\":{\"namespace\":\"ml\",\"name\":\"p4\",\"labels\":{\"podres.dev/node\":\"n1\"},"
    "\"creationTimestamp\":\"2024-01-04T00:00:00Z\"},"
    "\"status\":{\"phase\":\"Bound\",\"containers\":[{\"name\":\"main\",\"devices\":"
    "[{\"resourceName\":\"a.com/gpu\",\"deviceIds\":[\"ghost\"]}]}]}}"
    "]}";

static json_t *nds, *dvbs;

static json_t *load(const char *text)
{
    json_error_t e;
    json_t *v = json_loads(text, 0, &e);

    if (!v)
        printf("# bad fixture: %s at %d\n", e.text, e.position);
    return v;
}

static void setup(void)
{
    nds = load(nds_text);
    dvbs = load(dvbs_text);
    CHECK(nds && dvbs);
}

static long long num(const json_t *row, const char *k)
{
    return (long long)json_integer_value(json_object_get(row, k));
}

static const char *str(const json_t *row, const char *a, const char *b)
{
    const json_t *v = json_object_get(row, a);

    return json_string_value(b ? json_object_get(v, b) : v);
}

static void test_nodes(void)
{
    json_t *rows = model_nodes(nds, dvbs);
    const json_t *r;

    CHECK_EQ_INT(json_array_size(rows), 3);
    r = json_array_get(rows, 0); /* sorted: n0 first */
    CHECK_STREQ(str(r, "node", NULL), "n0");
    CHECK_EQ_INT(num(r, "free"), 1);
    r = json_array_get(rows, 1);
    CHECK_STREQ(str(r, "node", NULL), "n1");
    CHECK_STREQ(str(r, "resource", NULL), "a.com/gpu");
    CHECK_EQ_INT(num(r, "total"), 4);
    CHECK_EQ_INT(num(r, "healthy"), 3);
    CHECK_EQ_INT(num(r, "unhealthy"), 1);
    CHECK_EQ_INT(num(r, "held"), 1);     /* g0 */
    CHECK_EQ_INT(num(r, "reserved"), 1); /* g1; g2's spec is Bound's, ignored */
    CHECK_EQ_INT(num(r, "free"), 1);     /* g2 */
    CHECK_EQ_INT(num(r, "pods"), 2);     /* p1, p2 */
    r = json_array_get(rows, 2);
    CHECK_STREQ(str(r, "resource", NULL), "a.com/nic");
    CHECK_EQ_INT(num(r, "held"), 1);
    CHECK_EQ_INT(num(r, "free"), 0);
    json_decref(rows);
}

static void test_node(void)
{
    bool found = false;
    json_t *rows = model_node(nds, dvbs, "n1", &found);
    const json_t *r;

    CHECK(found);
    CHECK_EQ_INT(json_array_size(rows), 5);
    r = json_array_get(rows, 0);
    CHECK_STREQ(str(r, "id", NULL), "g0");
    CHECK_STREQ(str(r, "state", NULL), "held");
    CHECK_STREQ(str(r, "holder", "pod"), "p1");
    CHECK_STREQ(str(r, "holder", "container"), "main");
    CHECK_STREQ(str(r, "since", NULL), "2024-01-01T00:05:00Z"); /* honoured, not created */
    CHECK_EQ_INT(json_array_size(json_object_get(r, "numa")), 2);
    r = json_array_get(rows, 1);
    CHECK_STREQ(str(r, "state", NULL), "reserved");
    CHECK_STREQ(str(r, "holder", "pod"), "p2");
    CHECK_STREQ(str(r, "holder", "container"), "side");
    CHECK_STREQ(str(r, "since", NULL), "2024-01-02T00:00:00Z");
    r = json_array_get(rows, 2);
    CHECK_STREQ(str(r, "state", NULL), "free");
    CHECK(json_is_null(json_object_get(r, "holder")));
    CHECK_STREQ(str(json_array_get(rows, 3), "state", NULL), "unhealthy");
    json_decref(rows);
    rows = model_node(nds, dvbs, "nope", &found);
    CHECK(!found);
    CHECK_EQ_INT(json_array_size(rows), 0);
    json_decref(rows);
}

static void test_who(void)
{
    json_t *rows = model_who(nds, dvbs, "0000:3b:00.0");

    CHECK_EQ_INT(json_array_size(rows), 1);
    CHECK_STREQ(str(json_array_get(rows, 0), "node", NULL), "n1");
    CHECK_STREQ(str(json_array_get(rows, 0), "id", NULL), "g0");
    json_decref(rows);
    rows = model_who(nds, dvbs, "nvidia0"); /* an alias on two nodes: both */
    CHECK_EQ_INT(json_array_size(rows), 2);
    CHECK_STREQ(str(json_array_get(rows, 0), "id", NULL), "x0");
    CHECK_STREQ(str(json_array_get(rows, 1), "id", NULL), "g0");
    json_decref(rows);
    rows = model_who(nds, dvbs, "ghost"); /* only a DeviceBinding names it */
    CHECK_EQ_INT(json_array_size(rows), 1);
    CHECK_STREQ(str(json_array_get(rows, 0), "health", NULL), "Unknown");
    CHECK_STREQ(str(json_array_get(rows, 0), "holder", "pod"), "p4");
    CHECK_STREQ(str(json_array_get(rows, 0), "node", NULL), "n1");
    json_decref(rows);
    rows = model_who(nds, dvbs, "g9");
    CHECK_EQ_INT(json_array_size(rows), 0);
    json_decref(rows);
}

/* DRA: n3 has a GPU (alias GPU-1), a MIG instance of it (physical GPU-1,
 * alias MIG-a) held through claim c1, and a replica of that (physical
 * MIG-a); n4 has another p/gpu-0 and a slice of it. */
static const char dra_nds_text[] =
    "{\"items\":["
    "{\"metadata\":{\"name\":\"n3\"},\"status\":{\"devices\":["
    "{\"resourceName\":\"gpu.example.com\",\"id\":\"p/gpu-0\",\"health\":\"Healthy\","
    "\"aliases\":[\"GPU-1\"]},"
    "{\"resourceName\":\"gpu.example.com\",\"id\":\"p/mig-0\",\"health\":\"Healthy\","
    "\"aliases\":[\"MIG-a\"],\"physical\":\"GPU-1\"},"
    "{\"resourceName\":\"gpu.example.com\",\"id\":\"MIG-a::1\",\"health\":\"Healthy\","
    "\"physical\":\"MIG-a\"},"
    "{\"resourceName\":\"gpu.example.com\",\"id\":\"p/gpu-9\",\"health\":\"Healthy\"}]}},"
    "{\"metadata\":{\"name\":\"n4\"},\"status\":{\"devices\":["
    "{\"resourceName\":\"gpu.example.com\",\"id\":\"p/gpu-0\",\"health\":\"Healthy\"},"
    "{\"resourceName\":\"gpu.example.com\",\"id\":\"p/s-1\",\"health\":\"Healthy\","
    "\"physical\":\"p/gpu-0\"}]}}]}";
static const char dra_dvbs_text[] =
    "{\"items\":["
    "{\"metadata\":{\"namespace\":\"ml\",\"name\":\"p5\",\"creationTimestamp\":\"2024-01-05T00:00:00Z\"},"
    "\"status\":{\"nodeName\":\"n3\",\"phase\":\"Bound\",\"containers\":[{\"name\":\"main\","
    "\"devices\":[{\"resourceName\":\"gpu.example.com\",\"deviceIds\":[\"p/mig-0\"],"
    "\"claims\":[{\"namespace\":\"ml\",\"name\":\"c1\",\"deviceIds\":[\"p/mig-0\"]}]}]}]}}]}";

/* The ids of 'rows', "node:id" joined by ','. */
static void ids_of(const json_t *rows, char *out, size_t cap)
{
    const json_t *r;
    size_t i;

    out[0] = '\0';
    json_array_foreach(rows, i, r)
        snprintf(out + strlen(out), cap - strlen(out), "%s%s:%s", i ? "," : "",
                 str(r, "node", NULL), str(r, "id", NULL));
}

static void test_who_physical_and_claims(void)
{
    json_t *n = load(dra_nds_text), *d = load(dra_dvbs_text), *rows;
    const json_t *r;
    char ids[512];
    bool found;

    rows = model_who(n, d, "GPU-1"); /* its alias: the GPU, its MIG, the MIG's replica */
    ids_of(rows, ids, sizeof(ids));
    CHECK_STREQ(ids, "n3:MIG-a::1,n3:p/gpu-0,n3:p/mig-0");
    r = json_array_get(rows, 2);
    CHECK_STREQ(str(r, "holder", "pod"), "p5");
    CHECK_STREQ(str(json_object_get(r, "holder"), "claim", "name"), "c1");
    CHECK_STREQ(str(json_object_get(r, "holder"), "claim", "namespace"), "ml");
    CHECK_STREQ(str(r, "physical", NULL), "GPU-1");
    CHECK(json_is_null(json_object_get(json_array_get(rows, 1), "physical")));
    json_decref(rows);
    rows = model_who(n, d, "p/gpu-0"); /* the id on two nodes, each with its own slices */
    ids_of(rows, ids, sizeof(ids));
    CHECK_STREQ(ids, "n3:MIG-a::1,n3:p/gpu-0,n3:p/mig-0,n4:p/gpu-0,n4:p/s-1");
    json_decref(rows);
    rows = model_who(n, d, "MIG-a"); /* a MIG: itself and its replica, not its GPU */
    ids_of(rows, ids, sizeof(ids));
    CHECK_STREQ(ids, "n3:MIG-a::1,n3:p/mig-0");
    json_decref(rows);
    rows = model_node(n, d, "n3", &found); /* by id: MIG-a::1, p/gpu-0, p/gpu-9, p/mig-0 */
    CHECK_STREQ(str(json_array_get(rows, 3), "id", NULL), "p/mig-0");
    CHECK_STREQ(str(json_object_get(json_array_get(rows, 3), "holder"), "claim", "name"), "c1");
    CHECK(json_is_null(json_object_get(json_array_get(rows, 2), "holder")));
    json_decref(rows);
    json_decref(n);
    json_decref(d);
}

static void test_pods(void)
{
    json_t *rows = model_pods(dvbs);
    const json_t *r;

    CHECK_EQ_INT(json_array_size(rows), 4);
    r = json_array_get(rows, 1);
    CHECK_STREQ(str(r, "name", NULL), "p2");
    CHECK_STREQ(str(r, "phase", NULL), "Pending");
    CHECK_STREQ(str(r, "node", NULL), "n1");
    CHECK_EQ_INT(json_array_size(json_object_get(r, "deviceIds")), 2);
    CHECK_STREQ(str(json_array_get(json_object_get(r, "containers"), 0), "state", NULL),
                "reserved");
    r = json_array_get(rows, 2); /* Bound: status only, the stale spec is not shown */
    CHECK_STREQ(json_string_value(json_array_get(json_object_get(r, "deviceIds"), 0)), "nic0");
    CHECK_EQ_INT(json_array_size(json_object_get(r, "deviceIds")), 1);
    json_decref(rows);
}

static void test_empty(void)
{
    json_t *none = json_object(), *rows = model_nodes(none, none);

    CHECK_EQ_INT(json_array_size(rows), 0); /* no items at all is not an error */
    json_decref(rows);
    rows = model_pods(none);
    CHECK_EQ_INT(json_array_size(rows), 0);
    json_decref(rows);
    json_decref(none);
}

static void cleanup(void)
{
    json_decref(nds);
    json_decref(dvbs);
}

TEST_MAIN(setup, test_nodes, test_node, test_who, test_who_physical_and_claims, test_pods,
          test_empty, cleanup)
