/* SPDX-License-Identifier: Apache-2.0 */
/* dvb_test.c - the DeviceBinding's JSON through syncer/dvb.h: the status
 * the syncer writes, conditions and the part of a Pod the informer keeps. */
#include "../../../common/common.h"
#include "../../../syncer/dvb.h"
#include "../test.h"

static json_t *parse(const char *text)
{
    json_error_t e;
    json_t *v = json_loads(text, 0, &e);

    TEST_REPORT(v != NULL, "bad test JSON: %s", e.text);
    return v;
}

/* CHECK that 'got' equals the JSON 'want_text'; prints both otherwise. */
static void check_json(const json_t *got, const char *want_text, int line)
{
    json_t *want = parse(want_text);
    char *g = got ? json_dumps(got, JSON_SORT_KEYS | JSON_COMPACT) : NULL;
    char *w = want ? json_dumps(want, JSON_SORT_KEYS | JSON_COMPACT) : NULL;

    TEST_REPORT(got && want && json_equal(got, want), "(line %d)\n#  got  %s\n#  want %s", line,
                g ? g : "(null)", w ? w : "(null)");
    free(g);
    free(w);
    json_decref(want);
}
#define CHECK_JSON(got, want) check_json((got), (want), __LINE__)

static void test_has_devices(void)
{
    json_t *v;

    CHECK(!dvb_has_devices(NULL));
    v = parse("{}");
    CHECK(!dvb_has_devices(v));
    json_decref(v);
    v = parse("{\"containers\":[{\"name\":\"a\",\"devices\":[]},{\"name\":\"b\"}]}");
    CHECK(!dvb_has_devices(v));
    json_decref(v);
    v = parse("{\"containers\":[{\"name\":\"a\",\"devices\":[{\"resourceName\":"
              "\"a.com/x\","
              "\"deviceIds\":[]}]}]}");
    CHECK(!dvb_has_devices(v));
    json_decref(v);
    v = parse("{\"containers\":[{\"name\":\"a\",\"devices\":[]},{\"name\":\"b\","
              "\"devices\":"
              "[{\"resourceName\":\"a.com/x\",\"deviceIds\":[\"x0\"]}]}]}");
    CHECK(dvb_has_devices(v));
    json_decref(v);
}

static void test_status_one(void)
{
    json_t *pr = parse("{\"namespace\":\"d\",\"name\":\"p\",\"uid\":\"u1\",\"revision\":7,"
                       "\"containers\":[{\"name\":\"main\",\"devices\":[{\"resourceName\":"
                       "\"nvidia.com/"
                       "gpu\",\"deviceIds\":[\"g0\",\"g1\"],\"topology\":{\"nodes\":"
                       "[{\"ID\":0}]}}]}]}");
    json_t *st = dvb_status(pr, "u1", "node-a");

    CHECK_JSON(st, "{\"nodeName\":\"node-a\",\"podUID\":\"u1\",\"phase\":\"Bound\","
                   "\"summary\":\"nvidia.com/gpu=2\",\"boundDevices\":\"g0,g1\","
                   "\"observedRevision\":7,\"containers\":"
                   "[{\"name\":\"main\",\"devices\":[{\"resourceName\":\"nvidia.com/gpu\","
                   "\"deviceIds\":[\"g0\",\"g1\"],\"topology\":{\"nodes\":[{\"id\":0}]}}]}]"
                   "}");
    json_decref(st);
    json_decref(pr);
}

/* A DRA group (the kubelet's dynamicResources, as podresd makes them) keeps
 * its claims; a claim without a name is dropped; a device plugin's group
 * in the same container has none. */
static void test_status_dra(void)
{
    json_t *pr = parse("{\"namespace\":\"ml\",\"name\":\"p\",\"revision\":3,\"containers\":[{"
                       "\"name\":\"main\",\"devices\":[{\"resourceName\":\"gpu.example.com\","
                       "\"deviceIds\":[\"pool-a/gpu-0\"],\"topology\":{\"nodes\":[]},"
                       "\"claims\":[{\"namespace\":\"ml\",\"name\":\"claim-1\",\"deviceIds\":["
                       "\"pool-a/gpu-0\"]},{\"deviceIds\":[]}]},{\"resourceName\":\"a.com/nic\","
                       "\"deviceIds\":[\"n0\"]}],\"dynamicResources\":[{\"claimName\":"
                       "\"claim-1\"}]}]}");
    json_t *st = dvb_status(pr, "u1", "node-a");

    CHECK_JSON(st, "{\"nodeName\":\"node-a\",\"podUID\":\"u1\",\"phase\":\"Bound\","
                   "\"summary\":\"a.com/nic=1,gpu.example.com=1\",\"boundDevices\":"
                   "\"pool-a/gpu-0,n0\",\"observedRevision\":3,\"containers\":[{\"name\":"
                   "\"main\",\"devices\":[{\"resourceName\":\"gpu.example.com\",\"deviceIds\":"
                   "[\"pool-a/gpu-0\"],\"topology\":{\"nodes\":[]},\"claims\":[{\"namespace\":"
                   "\"ml\",\"name\":\"claim-1\",\"deviceIds\":[\"pool-a/gpu-0\"]}]},{"
                   "\"resourceName\":\"a.com/nic\",\"deviceIds\":[\"n0\"],\"topology\":{"
                   "\"nodes\":[]}}]}]}");
    json_decref(st);
    json_decref(pr);
}

static void test_status_several(void)
{
    json_t *pr = parse("{\"namespace\":\"d\",\"name\":\"p\",\"revision\":12,\"containers\":["
                       "{\"name\":\"main\",\"devices\":["
                       "  {\"resourceName\":\"b.com/y\",\"deviceIds\":[\"y0\",\"y1\"],"
                       "   \"topology\":{\"nodes\":[{\"ID\":0}]}},"
                       "  {\"resourceName\":\"a.com/x\",\"deviceIds\":[\"x0\"],"
                       "   \"topology\":{\"nodes\":[{\"ID\":1},{\"ID\":2}]}}]},"
                       "{\"name\":\"sidecar\",\"devices\":[]},"
                       "{\"name\":\"idle\",\"devices\":[{\"resourceName\":\"c.com/"
                       "z\",\"deviceIds\":[]}]},"
                       "{\"name\":\"second\",\"devices\":[{\"resourceName\":\"b.com/"
                       "y\",\"deviceIds\":[\"y2\"],"
                       "   \"topology\":{\"nodes\":[{\"ID\":1}]}}]}]}");
    json_t *st = dvb_status(pr, "uid-9", "n2");

    CHECK_JSON(st, "{\"nodeName\":\"n2\",\"podUID\":\"uid-9\",\"phase\":\"Bound\","
                   "\"summary\":\"a.com/x=1,b.com/"
                   "y=3\",\"boundDevices\":\"y0,y1,x0,y2\",\"observedRevision\":12,\"containers\":["
                   "{\"name\":\"main\",\"devices\":["
                   " {\"resourceName\":\"b.com/y\",\"deviceIds\":[\"y0\",\"y1\"],"
                   "  \"topology\":{\"nodes\":[{\"id\":0}]}},"
                   " {\"resourceName\":\"a.com/x\",\"deviceIds\":[\"x0\"],"
                   "  \"topology\":{\"nodes\":[{\"id\":1},{\"id\":2}]}}]},"
                   "{\"name\":\"second\",\"devices\":["
                   " {\"resourceName\":\"b.com/y\",\"deviceIds\":[\"y2\"],"
                   "  \"topology\":{\"nodes\":[{\"id\":1}]}}]}]}");
    json_decref(st);
    json_decref(pr);
}

/* The kubelet lists one group per device and NUMA node, so a container
 * may have several groups of one resource: the status has one (the CRD
 * keys the groups by resourceName), where the first was, with the union of
 * their ids and NUMA nodes in order, and their claims; podresd's JSON is
 * left as it was. */
static void test_status_merged(void)
{
    const char *text =
        "{\"revision\":5,\"containers\":[{\"name\":\"main\",\"devices\":["
        "{\"resourceName\":\"a.com/x\",\"deviceIds\":[\"x0\"],\"topology\":{\"nodes\":[{\"ID\":0}]}},"
        "{\"resourceName\":\"b.com/y\",\"deviceIds\":[\"y0\"]},"
        "{\"resourceName\":\"a.com/x\",\"deviceIds\":[\"x1\",\"x0\"],\"topology\":{\"nodes\":["
        "{\"ID\":1},{\"ID\":0}]}},"
        "{\"resourceName\":\"gpu.example.com\",\"deviceIds\":[\"p/g0\"],\"claims\":[{\"namespace\":"
        "\"ml\",\"name\":\"c1\",\"deviceIds\":[\"p/g0\"]}]},"
        "{\"resourceName\":\"gpu.example.com\",\"deviceIds\":[\"p/g1\"],\"claims\":[{\"namespace\":"
        "\"ml\",\"name\":\"c2\",\"deviceIds\":[\"p/g1\"]},{\"namespace\":\"ml\",\"name\":\"c1\","
        "\"deviceIds\":[\"p/g0\"]}]}]}]}";
    json_t *pr = parse(text), *before = parse(text);
    json_t *st = dvb_status(pr, "u1", "node-a");

    CHECK_JSON(st, "{\"nodeName\":\"node-a\",\"podUID\":\"u1\",\"phase\":\"Bound\",\"summary\":"
                   "\"a.com/x=2,b.com/y=1,gpu.example.com=2\",\"boundDevices\":"
                   "\"x0,x1,y0,p/g0,p/g1\",\"observedRevision\":5,\"containers\":[{\"name\":"
                   "\"main\",\"devices\":["
                   "{\"resourceName\":\"a.com/x\",\"deviceIds\":[\"x0\",\"x1\"],\"topology\":{"
                   "\"nodes\":[{\"id\":0},{\"id\":1}]}},"
                   "{\"resourceName\":\"b.com/y\",\"deviceIds\":[\"y0\"],\"topology\":{"
                   "\"nodes\":[]}},"
                   "{\"resourceName\":\"gpu.example.com\",\"deviceIds\":[\"p/g0\",\"p/g1\"],"
                   "\"topology\":{\"nodes\":[]},\"claims\":[{\"namespace\":\"ml\",\"name\":\"c1\","
                   "\"deviceIds\":[\"p/g0\"]},{\"namespace\":\"ml\",\"name\":\"c2\","
                   "\"deviceIds\":[\"p/g1\"]}]}]}]}");
    CHECK(json_equal(pr, before));
    json_decref(st);
    json_decref(before);
    json_decref(pr);
}

static void test_status_summary_order(void)
{
    /* three resources given in reverse order */
    json_t *pr = parse("{\"containers\":[{\"name\":\"c\",\"devices\":["
                       "{\"resourceName\":\"z.io/c\",\"deviceIds\":[\"1\"]},"
                       "{\"resourceName\":\"m.io/b\",\"deviceIds\":[\"1\",\"2\"]},"
                       "{\"resourceName\":\"a.io/a\",\"deviceIds\":[\"1\",\"2\",\"3\"]}]}]}");
    json_t *st = dvb_status(pr, "u", "n");

    CHECK_STREQ(json_string_value(json_object_get(st, "summary")), "a.io/a=3,m.io/b=2,z.io/c=1");
    CHECK_EQ_INT(json_integer_value(json_object_get(st, "observedRevision")), 0); /* none given */
    json_decref(st);
    json_decref(pr);
}

static void test_status_empty(void)
{
    json_t *pr = parse("{\"revision\":3,\"containers\":[{\"name\":\"a\",\"devices\":[]}]}");
    json_t *st = dvb_status(pr, "u", "n");

    CHECK_JSON(st, "{\"nodeName\":\"n\",\"podUID\":\"u\",\"phase\":\"Bound\","
                   "\"summary\":\"\",\"boundDevices\":\"\","
                   "\"observedRevision\":3,\"containers\":[]}");
    json_decref(st);
    st = dvb_status(NULL, "", "n"); /* no devices yet */
    CHECK_JSON(st, "{\"nodeName\":\"n\",\"podUID\":\"\",\"phase\":\"Bound\","
                   "\"summary\":\"\",\"boundDevices\":\"\","
                   "\"observedRevision\":0,\"containers\":[]}");
    json_decref(st);
    json_decref(pr);
}

static void test_condition(void)
{
    json_t *old = parse("{\"type\":\"PreassignmentHonored\",\"status\":\"True\",\"reason\":\"R\","
                        "\"message\":\"\",\"lastTransitionTime\":\"2024-01-01T00:00:00Z\"}");
    json_t *c;

    c = dvb_condition("PreassignmentHonored", "True", "Honored", "ok", old, "2025-06-01T00:00:00Z");
    CHECK_JSON(c, "{\"type\":\"PreassignmentHonored\",\"status\":\"True\",\"reason\":"
                  "\"Honored\","
                  "\"message\":\"ok\",\"lastTransitionTime\":\"2024-01-01T00:00:00Z\"}");
    json_decref(c);
    c = dvb_condition("PreassignmentHonored", "False", "Conflict", "held", old,
                      "2025-06-01T00:00:00Z");
    CHECK_STREQ(json_string_value(json_object_get(c, "lastTransitionTime")),
                "2025-06-01T00:00:00Z");
    CHECK_STREQ(json_string_value(json_object_get(c, "status")), "False");
    json_decref(c);
    c = dvb_condition("X", "True", "R", "", NULL, "2025-06-01T00:00:00Z");
    CHECK_STREQ(json_string_value(json_object_get(c, "lastTransitionTime")),
                "2025-06-01T00:00:00Z");
    json_decref(c);
    json_decref(old);
}

/* The Pod informer keeps metadata name, namespace, uid, resourceVersion and
 * deletionTimestamp. */
static void test_pod_view(void)
{
    json_t *pod = json_loads(
        "{\"kind\":\"Pod\",\"metadata\":{\"name\":\"p\",\"namespace\":\"ns\",\"uid\":\"u1\","
        "\"resourceVersion\":\"42\",\"deletionTimestamp\":\"2025-01-01T00:00:00Z\","
        "\"labels\":{\"a\":\"b\"},\"managedFields\":[{}]},"
        "\"spec\":{\"nodeName\":\"n\",\"containers\":[{\"name\":\"c\"}]},"
        "\"status\":{\"phase\":\"Running\"}}",
        0, NULL);
    json_t *want = json_loads("{\"metadata\":{\"name\":\"p\",\"namespace\":\"ns\",\"uid\":"
                              "\"u1\",\"resourceVersion\":\"42\","
                              "\"deletionTimestamp\":\"2025-01-01T00:00:00Z\"}}",
                              0, NULL);
    json_t *v = dvb_pod_view(pod), *empty;

    CHECK(pod && want && v);
    CHECK(json_equal(v, want));
    /* a Pod without metadata keeps an empty one */
    empty = dvb_pod_view(json_object_get(pod, "spec"));
    CHECK(empty && json_object_size(json_object_get(empty, "metadata")) == 0);
    json_decref(empty);
    json_decref(v);
    json_decref(want);
    json_decref(pod);
}

TEST_MAIN(test_pod_view, test_has_devices, test_status_one, test_status_dra, test_status_several,
          test_status_merged, test_status_summary_order, test_status_empty, test_condition)
