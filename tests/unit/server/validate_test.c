/* SPDX-License-Identifier: Apache-2.0 */
/* validate_test.c - request bodies and their canonical forms through validate.h. */
#include "../../../common/common.h"
#include "../../../common/jsonx.h"
#include "../../../server/validate.h"
#include "../test.h"

static json_t *J(const char *s)
{
    json_t *v = json_loads(s, 0, NULL);

    if (!v) {
        fprintf(stderr, "bad test JSON: %s\n", s);
        abort();
    }
    return v;
}

/* Canonical text of 'v' (sorted keys) into a static buffer. */
static const char *T(const json_t *v)
{
    static char buf[4096];
    char *s = v ? jsonx_dumps(v) : NULL;

    snprintf(buf, sizeof(buf), "%s", s ? s : "(null)");
    free(s);
    return buf;
}

/* ---- PUT devices ---- */

static json_t *sentinel(void)
{
    static json_t *s;

    if (!s)
        s = json_string("untouched");
    return s;
}

/* Expect 'rc' and a message containing 'field'; outputs untouched. */
static void devices_bad(const char *body, err_t want, const char *field)
{
    json_t *b = J(body), *out = sentinel();
    uint64_t ttl = 77;
    struct error e = {0};

    CHECK_EQ_INT(validate_devices_put(b, &out, &ttl, &e), want);
    CHECK(out == sentinel());
    CHECK_EQ_INT(ttl, 77);
    if (!strstr(e.msg, field))
        CHECK_STREQ(e.msg, field);
    json_decref(b);
}

static void test_devices_put(void)
{
    json_t *b = J("{\"devices\":[{\"id\":\"gpu-0\",\"topology\":{\"nodes\":[{\"ID\":1},{\"ID\":0},"
                  "{\"ID\":1}]},\"properties\":{\"model\":\"a100\"}},"
                  "{\"id\":\"gpu-1\",\"health\":\"Unhealthy\",\"topology\":null}],"
                  "\"ttlSeconds\":30}");
    json_t *out = NULL;
    uint64_t ttl = 77;
    struct error e = {0};

    CHECK_OK(validate_devices_put(b, &out, &ttl, &e));
    CHECK_STREQ(T(out), "[{\"aliases\":[],\"health\":\"Healthy\",\"id\":\"gpu-0\",\"numa\":[0,1],"
                        "\"physical\":\"\",\"properties\":{\"model\":\"a100\"}},"
                        "{\"aliases\":[],\"health\":\"Unhealthy\",\"id\":\"gpu-1\",\"numa\":[],"
                        "\"physical\":\"\",\"properties\":{}}]");
    CHECK_EQ_INT(ttl, 30000);
    json_decref(out);
    json_decref(b);

    b = J("{\"devices\":[]}");
    out = NULL;
    CHECK_OK(validate_devices_put(b, &out, &ttl, &e));
    CHECK_STREQ(T(out), "[]");
    CHECK_EQ_INT(ttl, 0);
    json_decref(out);
    json_decref(b);

    /* structure: 400 */
    devices_bad("[]", ERR_INVAL, "body");
    devices_bad("{}", ERR_UNPROCESSABLE, "devices");
    devices_bad("{\"devices\":{}}", ERR_INVAL, "devices");
    devices_bad("{\"devices\":[],\"extra\":1}", ERR_INVAL, "extra");
    devices_bad("{\"devices\":[5]}", ERR_INVAL, "devices[]");
    devices_bad("{\"devices\":[{}]}", ERR_UNPROCESSABLE, "devices[].id");
    devices_bad("{\"devices\":[{\"id\":3}]}", ERR_INVAL, "devices[].id");
    devices_bad("{\"devices\":[{\"id\":\"a\",\"colour\":\"red\"}]}", ERR_INVAL, "colour");
    devices_bad("{\"devices\":[{\"id\":\"a\",\"health\":true}]}", ERR_INVAL, "health");
    devices_bad("{\"devices\":[{\"id\":\"a\",\"topology\":[]}]}", ERR_INVAL, "topology");
    devices_bad("{\"devices\":[{\"id\":\"a\",\"topology\":{\"nodes\":[{\"ID\":\"0\"}]}}]}",
                ERR_INVAL, "topology.nodes[].ID");
    devices_bad("{\"devices\":[{\"id\":\"a\",\"topology\":{\"nodes\":[{\"id\":0}]}}]}", ERR_INVAL,
                "topology.nodes[]");
    devices_bad("{\"devices\":[{\"id\":\"a\",\"properties\":{\"k\":1}}]}", ERR_INVAL,
                "properties.k");
    devices_bad("{\"devices\":[],\"ttlSeconds\":\"30\"}", ERR_INVAL, "ttlSeconds");
    /* values: 422 */
    devices_bad("{\"devices\":[{\"id\":\"-bad\"}]}", ERR_UNPROCESSABLE, "devices[].id");
    devices_bad("{\"devices\":[{\"id\":\"a\"},{\"id\":\"a\"}]}", ERR_UNPROCESSABLE, "twice");
    devices_bad("{\"devices\":[{\"id\":\"a\",\"health\":\"Sick\"}]}", ERR_UNPROCESSABLE, "health");
    devices_bad("{\"devices\":[{\"id\":\"a\",\"topology\":{\"nodes\":[{\"ID\":-1}]}}]}",
                ERR_UNPROCESSABLE, "topology.nodes[].ID");
    devices_bad("{\"devices\":[],\"ttlSeconds\":0}", ERR_UNPROCESSABLE, "ttlSeconds");
    devices_bad("{\"devices\":[],\"ttlSeconds\":86401}", ERR_UNPROCESSABLE, "ttlSeconds");
    /* names */
    devices_bad("{\"devices\":[{\"id\":\"a\",\"aliases\":\"x\"}]}", ERR_INVAL, "aliases");
    devices_bad("{\"devices\":[{\"id\":\"a\",\"aliases\":[1]}]}", ERR_UNPROCESSABLE, "aliases");
    devices_bad("{\"devices\":[{\"id\":\"a\",\"aliases\":[\"a b\"]}]}", ERR_UNPROCESSABLE,
                "aliases");
    devices_bad("{\"devices\":[{\"id\":\"a\",\"aliases\":[\"1\",\"2\",\"3\",\"4\",\"5\",\"6\","
                "\"7\",\"8\",\"9\",\"10\",\"11\",\"12\",\"13\",\"14\",\"15\",\"16\",\"17\"]}]}",
                ERR_UNPROCESSABLE, "at most 16");
    devices_bad("{\"devices\":[{\"id\":\"a\",\"physical\":\"\"}]}", ERR_UNPROCESSABLE, "physical");
    devices_bad("{\"devices\":[{\"id\":\"a\",\"physical\":7}]}", ERR_UNPROCESSABLE, "physical");
}

/* Aliases sorted, each once, without the id; physical as given, the
 * device's own id (whole) included. */
static void test_device_names(void)
{
    json_t *b = J("{\"devices\":[{\"id\":\"GPU-a::1\",\"physical\":\"GPU-a\","
                  "\"aliases\":[\"nvidia1\",\"0000:3b:00.0\",\"nvidia1\",\"GPU-a::1\"]},"
                  "{\"id\":\"gpu-2\",\"physical\":\"gpu-2\",\"aliases\":null}]}");
    json_t *out = NULL;
    uint64_t ttl = 0;
    struct error e = {0};

    CHECK_OK(validate_devices_put(b, &out, &ttl, &e));
    CHECK_STREQ(T(json_object_get(json_array_get(out, 0), "aliases")),
                "[\"0000:3b:00.0\",\"nvidia1\"]");
    CHECK_STREQ(json_string_value(json_object_get(json_array_get(out, 0), "physical")), "GPU-a");
    CHECK_STREQ(json_string_value(json_object_get(json_array_get(out, 1), "physical")), "gpu-2");
    CHECK_STREQ(T(json_object_get(json_array_get(out, 1), "aliases")), "[]");
    json_decref(out);
    json_decref(b);
}

/* A DRA driver's devices: POOL/DEVICE ids, no health, topology or heartbeat. */
static void test_driver_put(void)
{
    static const struct {
        const char *body;
        err_t want;
        const char *field;
    } bad[] = {
        {"{\"devices\":[{\"id\":\"gpu-0\"}]}", ERR_UNPROCESSABLE, "POOL/DEVICE"},
        {"{\"devices\":[{\"id\":\"pool/Gpu-0\"}]}", ERR_UNPROCESSABLE, "POOL/DEVICE"},
        {"{\"devices\":[{\"id\":\"p/g\"},{\"id\":\"p/g\"}]}", ERR_UNPROCESSABLE, "twice"},
        {"{\"devices\":[{\"id\":\"p/g\",\"health\":\"Healthy\"}]}", ERR_INVAL, "health"},
        {"{\"devices\":[],\"ttlSeconds\":5}", ERR_INVAL, "ttlSeconds"},
        {"{\"devices\":[{\"id\":5}]}", ERR_INVAL, "devices[].id"},
    };
    json_t *b = J("{\"devices\":[{\"id\":\"node-a/sub/gpu-0\",\"aliases\":[\"GPU-a\"],"
                  "\"properties\":{\"uuid\":\"GPU-a\"},\"physical\":\"GPU-p\"}]}");
    json_t *out = NULL;
    struct error e = {0};
    size_t i;

    CHECK_OK(validate_driver_put(b, &out, &e));
    CHECK_STREQ(T(out), "[{\"aliases\":[\"GPU-a\"],\"health\":\"Healthy\",\"id\":"
                        "\"node-a/sub/gpu-0\",\"numa\":[],\"physical\":\"GPU-p\","
                        "\"properties\":{\"uuid\":\"GPU-a\"}}]");
    json_decref(out);
    json_decref(b);
    for (i = 0; i < ARRAY_SIZE(bad); i++) {
        b = J(bad[i].body);
        out = NULL;
        memset(&e, 0, sizeof(e));
        CHECK_EQ_INT(validate_driver_put(b, &out, &e), bad[i].want);
        CHECK(out == NULL);
        if (!strstr(e.msg, bad[i].field))
            CHECK_STREQ(e.msg, bad[i].field);
        json_decref(b);
    }
}

static void test_health_patch(void)
{
    json_t *b = J("{\"health\":\"Unhealthy\"}");
    const char *h = "untouched";
    struct error e = {0};

    CHECK_OK(validate_health_patch(b, &h, &e));
    CHECK_STREQ(h, "Unhealthy");
    json_decref(b);
    h = "untouched";
    b = J("{\"health\":\"Broken\"}");
    CHECK_EQ_INT(validate_health_patch(b, &h, &e), ERR_UNPROCESSABLE);
    CHECK(strstr(e.msg, "health") != NULL);
    json_decref(b);
    b = J("{\"health\":1}");
    CHECK_EQ_INT(validate_health_patch(b, &h, &e), ERR_INVAL);
    json_decref(b);
    b = J("{}");
    e.msg[0] = '\0';
    CHECK_EQ_INT(validate_health_patch(b, &h, &e), ERR_UNPROCESSABLE);
    CHECK(strstr(e.msg, "health") != NULL);
    json_decref(b);
    b = J("{\"health\":\"Healthy\",\"x\":1}");
    CHECK_EQ_INT(validate_health_patch(b, &h, &e), ERR_INVAL);
    CHECK(strstr(e.msg, "\"x\"") != NULL);
    json_decref(b);
    CHECK_STREQ(h, "untouched");
}

/* ---- pods, allocate, reservations ---- */

enum which {
    POD,
    ALLOC,
    RESV
};

static void pod_bad(enum which w, const char *body, err_t want, const char *field)
{
    json_t *b = J(body), *out = sentinel();
    const char *uid = "untouched";
    struct error e = {0};
    err_t rc = w == POD     ? validate_pod_put(b, &uid, &out, &e)
               : w == ALLOC ? validate_allocate(b, &uid, &out, &e)
                            : validate_reservation(b, &out, &e);

    CHECK_EQ_INT(rc, want);
    CHECK(out == sentinel());
    CHECK_STREQ(uid, "untouched");
    if (!strstr(e.msg, field))
        CHECK_STREQ(e.msg, field);
    json_decref(b);
}

static void test_pod_put(void)
{
    json_t *b = J(
        "{\"uid\":\"u-1\",\"containers\":[{\"name\":\"main\",\"devices\":[{\"resourceName\":"
        "\"nvidia.com/gpu\",\"deviceIds\":[\"g1\",\"g0\"]}],\"cpuIds\":[3,1],"
        "\"memory\":[{\"memoryType\":\"memory\",\"size\":1024,\"topology\":{\"nodes\":"
        "[{\"ID\":1},{\"ID\":0}]}}]},{\"name\":\"side\"}]}");
    json_t *out = NULL;
    const char *uid = NULL;
    struct error e = {0};

    CHECK_OK(validate_pod_put(b, &uid, &out, &e));
    CHECK_STREQ(uid, "u-1");
    CHECK_STREQ(T(out),
                "[{\"cpuIds\":[3,1],\"devices\":[{\"deviceIds\":[\"g1\",\"g0\"],\"resourceName\":"
                "\"nvidia.com/gpu\"}],\"memory\":[{\"memoryType\":\"memory\",\"size\":1024,"
                "\"topology\":{\"nodes\":[{\"ID\":0},{\"ID\":1}]}}],\"name\":\"main\"},"
                "{\"cpuIds\":[],\"devices\":[],\"memory\":[],\"name\":\"side\"}]");
    json_decref(out);
    json_decref(b);

    b = J("{\"containers\":[]}");
    out = NULL;
    uid = NULL;
    CHECK_OK(validate_pod_put(b, &uid, &out, &e));
    CHECK_STREQ(uid, "");
    CHECK_STREQ(T(out), "[]");
    json_decref(out);
    json_decref(b);

    pod_bad(POD, "[]", ERR_INVAL, "body");
    pod_bad(POD, "{}", ERR_UNPROCESSABLE, "containers");
    pod_bad(POD, "{\"containers\":[],\"spec\":{}}", ERR_INVAL, "spec");
    pod_bad(POD, "{\"uid\":5,\"containers\":[]}", ERR_INVAL, "uid");
    pod_bad(POD, "{\"containers\":[{}]}", ERR_UNPROCESSABLE, "containers[].name");
    pod_bad(POD, "{\"containers\":[{\"name\":\"a\",\"requests\":{}}]}", ERR_INVAL, "requests");
    pod_bad(POD, "{\"containers\":[{\"name\":\"a\",\"devices\":{}}]}", ERR_INVAL,
            "containers[].devices");
    pod_bad(POD, "{\"containers\":[{\"name\":\"a\",\"devices\":[{\"deviceIds\":[\"x\"]}]}]}",
            ERR_UNPROCESSABLE, "resourceName");
    pod_bad(POD, "{\"containers\":[{\"name\":\"a\",\"devices\":[{\"resourceName\":\"a.b/c\"}]}]}",
            ERR_UNPROCESSABLE, "deviceIds");
    pod_bad(POD,
            "{\"containers\":[{\"name\":\"a\",\"devices\":[{\"resourceName\":\"a.b/c\","
            "\"deviceIds\":[1]}]}]}",
            ERR_INVAL, "deviceIds[]");
    pod_bad(POD, "{\"containers\":[{\"name\":\"a\",\"cpuIds\":[\"1\"]}]}", ERR_INVAL, "cpuIds");
    pod_bad(POD, "{\"containers\":[{\"name\":\"a\",\"memory\":[{\"size\":1}]}]}", ERR_UNPROCESSABLE,
            "memoryType");
    pod_bad(POD, "{\"uid\":\"bad uid\",\"containers\":[]}", ERR_UNPROCESSABLE, "uid");
    pod_bad(POD, "{\"containers\":[{\"name\":\"Main\"}]}", ERR_UNPROCESSABLE, "container name");
    pod_bad(POD, "{\"containers\":[{\"name\":\"a\"},{\"name\":\"a\"}]}", ERR_UNPROCESSABLE,
            "twice");
    pod_bad(POD,
            "{\"containers\":[{\"name\":\"a\",\"devices\":[{\"resourceName\":\"gpu\","
            "\"deviceIds\":[\"x\"]}]}]}",
            ERR_UNPROCESSABLE, "resourceName");
    pod_bad(POD,
            "{\"containers\":[{\"name\":\"a\",\"devices\":[{\"resourceName\":\"a.b/c\","
            "\"deviceIds\":[]}]}]}",
            ERR_UNPROCESSABLE, "deviceIds");
    pod_bad(POD,
            "{\"containers\":[{\"name\":\"a\",\"devices\":[{\"resourceName\":\"a.b/c\","
            "\"deviceIds\":[\"-x\"]}]}]}",
            ERR_UNPROCESSABLE, "device id");
    /* a group's topology is checked like a device's, then left to the store */
    pod_bad(POD,
            "{\"containers\":[{\"name\":\"a\",\"devices\":[{\"resourceName\":\"a.b/c\","
            "\"deviceIds\":[\"x\"],\"topology\":\"garbage\"}]}]}",
            ERR_INVAL, "topology");
    pod_bad(RESV,
            "{\"containers\":[{\"name\":\"a\",\"devices\":[{\"resourceName\":\"a.b/c\","
            "\"deviceIds\":[\"x\"],\"topology\":{\"nodes\":[{\"ID\":\"0\"}]}}]}]}",
            ERR_INVAL, "topology.nodes[].ID");
    pod_bad(POD,
            "{\"containers\":[{\"name\":\"a\",\"devices\":[{\"resourceName\":\"a.b/c\","
            "\"deviceIds\":[\"x\"],\"topology\":{\"numa\":[]}}]}]}",
            ERR_INVAL, "numa");
    /* resource names Kubernetes keeps for itself */
    pod_bad(POD,
            "{\"containers\":[{\"name\":\"a\",\"devices\":[{\"resourceName\":"
            "\"kubernetes.io/gpu\",\"deviceIds\":[\"x\"]}]}]}",
            ERR_UNPROCESSABLE, "resourceName");
    /* the same device twice in one pod, across containers */
    pod_bad(POD,
            "{\"containers\":[{\"name\":\"a\",\"devices\":[{\"resourceName\":\"a.b/c\","
            "\"deviceIds\":[\"x\"]}]},{\"name\":\"b\",\"devices\":[{\"resourceName\":\"a.b/c\","
            "\"deviceIds\":[\"x\"]}]}]}",
            ERR_UNPROCESSABLE, "twice");
    pod_bad(POD, "{\"containers\":[{\"name\":\"a\",\"cpuIds\":[-1]}]}", ERR_UNPROCESSABLE,
            "cpuIds");
    pod_bad(POD,
            "{\"containers\":[{\"name\":\"a\",\"memory\":[{\"memoryType\":\"m\",\"size\":-1}]}]}",
            ERR_UNPROCESSABLE, "memory");
}

static void test_allocate(void)
{
    json_t *b = J("{\"uid\":\"abc\",\"containers\":[{\"name\":\"c\",\"requests\":"
                  "{\"nvidia.com/gpu\":2,\"example.com/nic\":0}}]}");
    json_t *out = NULL;
    const char *uid = NULL;
    struct error e = {0};

    CHECK_OK(validate_allocate(b, &uid, &out, &e));
    CHECK_STREQ(uid, "abc");
    CHECK_STREQ(T(out), "[{\"name\":\"c\",\"requests\":{\"example.com/nic\":0,"
                        "\"nvidia.com/gpu\":2}}]");
    json_decref(out);
    json_decref(b);

    pod_bad(ALLOC, "{\"containers\":[{\"name\":\"c\"}]}", ERR_UNPROCESSABLE, "requests");
    pod_bad(ALLOC, "{\"containers\":[{\"name\":\"c\",\"requests\":[]}]}", ERR_INVAL, "requests");
    pod_bad(ALLOC, "{\"containers\":[{\"name\":\"c\",\"requests\":{\"a.b/c\":\"2\"}}]}", ERR_INVAL,
            "a.b/c");
    pod_bad(ALLOC, "{\"containers\":[{\"name\":\"c\",\"requests\":{},\"devices\":[]}]}", ERR_INVAL,
            "devices");
    pod_bad(ALLOC, "{\"containers\":[{\"name\":\"c\",\"requests\":{\"gpu\":1}}]}",
            ERR_UNPROCESSABLE, "gpu");
    pod_bad(ALLOC, "{\"containers\":[{\"name\":\"c\",\"requests\":{\"a.b/c\":-1}}]}",
            ERR_UNPROCESSABLE, "a.b/c");
    pod_bad(ALLOC, "{\"containers\":[{\"name\":\"c\",\"requests\":{\"a.b/c\":1025}}]}",
            ERR_UNPROCESSABLE, "a.b/c");
    pod_bad(ALLOC, "{\"uid\":\"../x/\",\"containers\":[]}", ERR_UNPROCESSABLE, "uid");
}

static void test_reservation(void)
{
    json_t *b = J("{\"containers\":[{\"name\":\"c\",\"devices\":[{\"resourceName\":\"a.b/gpu\","
                  "\"deviceIds\":[\"g2\"]}]}]}");
    json_t *out = NULL;
    struct error e = {0};

    CHECK_OK(validate_reservation(b, &out, &e));
    CHECK_STREQ(T(out), "[{\"devices\":[{\"deviceIds\":[\"g2\"],\"resourceName\":\"a.b/gpu\"}],"
                        "\"name\":\"c\"}]");
    json_decref(out);
    json_decref(b);
    /* a well-formed topology in a group is taken and left out */
    b = J("{\"containers\":[{\"name\":\"c\",\"devices\":[{\"resourceName\":\"a.b/gpu\","
          "\"deviceIds\":[\"g2\"],\"topology\":{\"nodes\":[{\"ID\":1}]}}]}]}");
    out = NULL;
    CHECK_OK(validate_reservation(b, &out, &e));
    CHECK_STREQ(T(out), "[{\"devices\":[{\"deviceIds\":[\"g2\"],\"resourceName\":\"a.b/gpu\"}],"
                        "\"name\":\"c\"}]");
    json_decref(out);
    json_decref(b);

    pod_bad(RESV, "{\"uid\":\"x\",\"containers\":[]}", ERR_INVAL, "uid");
    pod_bad(RESV, "{\"containers\":[{\"name\":\"c\",\"cpuIds\":[]}]}", ERR_INVAL, "cpuIds");
    pod_bad(RESV, "{\"containers\":[{\"name\":\"c_d\"}]}", ERR_UNPROCESSABLE, "container name");
}

static void test_uid(void)
{
    char b[200];

    CHECK(validate_uid(""));
    CHECK(validate_uid("0b7e2c1a-1111-4a4a-9d9d-abcdefabcdef"));
    CHECK(validate_uid("A.b_c-9"));
    memset(b, 'a', 128);
    b[128] = '\0';
    CHECK(validate_uid(b));
    b[128] = 'a';
    b[129] = '\0';
    CHECK(!validate_uid(b));
    CHECK(!validate_uid("a b"));
    CHECK(!validate_uid("a/b"));
    CHECK(!validate_uid("a\"b"));
}

/* ---- DELETE: DeleteOptions ---- */

/* A refused body: ERR_INVAL, a message containing 'why', outputs untouched. */
static void delete_bad(const char *body, int has_uid, const char *query_uid, const char *why)
{
    json_t *b = J(body);
    const char *uid = query_uid;
    uint64_t rev = 77;
    struct error e = {0};

    CHECK_EQ_INT(validate_delete_options(b, has_uid, &uid, &rev, &e), ERR_INVAL);
    CHECK(uid == query_uid);
    CHECK_EQ_INT(rev, 77);
    if (!strstr(e.msg, why))
        CHECK_STREQ(e.msg, why);
    json_decref(b);
}

static void test_delete_options(void)
{
    json_t *b;
    const char *uid;
    uint64_t rev;
    struct error e = {0};

    /* what kubectl and client-go send: nothing to hold */
    b = J("{\"kind\":\"DeleteOptions\",\"apiVersion\":\"v1\",\"propagationPolicy\":"
          "\"Background\",\"gracePeriodSeconds\":0,\"dryRun\":[]}");
    uid = "q";
    rev = 5;
    CHECK_OK(validate_delete_options(b, 1, &uid, &rev, &e));
    CHECK_STREQ(uid, "q");
    CHECK_EQ_INT(rev, 0);
    json_decref(b);
    /* preconditions: uid (with the same ?uid=) and the revision */
    b = J("{\"preconditions\":{\"uid\":\"u-1\",\"resourceVersion\":\"18446744073709551615\"}}");
    uid = "u-1";
    CHECK_OK(validate_delete_options(b, 1, &uid, &rev, &e));
    CHECK_STREQ(uid, "u-1");
    CHECK(rev == UINT64_MAX);
    uid = NULL;
    CHECK_OK(validate_delete_options(b, 1, &uid, &rev, &e));
    CHECK_STREQ(uid, "u-1");
    json_decref(b);
    b = J("{\"preconditions\":{\"uid\":null,\"resourceVersion\":null}}");
    uid = NULL;
    CHECK_OK(validate_delete_options(b, 0, &uid, &rev, &e));
    CHECK(uid == NULL);
    CHECK_EQ_INT(rev, 0);
    json_decref(b);

    delete_bad("[]", 1, NULL, "JSON object");
    delete_bad("{\"kind\":\"Pod\"}", 1, NULL, "not kind \"Pod\"");
    delete_bad("{\"kind\":7}", 1, NULL, "DeleteOptions");
    delete_bad("{\"dryRun\":[\"All\"]}", 1, NULL, "dryRun");
    delete_bad("{\"dryRun\":\"All\"}", 1, NULL, "dryRun");
    delete_bad("{\"preconditions\":[]}", 1, NULL, "preconditions must be an object");
    delete_bad("{\"preconditions\":{\"uid\":\"u\"}}", 0, NULL, "a reservation has no uid");
    delete_bad("{\"preconditions\":{\"uid\":\"a b\"}}", 1, NULL, "not a valid uid");
    delete_bad("{\"preconditions\":{\"uid\":1}}", 1, NULL, "not a valid uid");
    delete_bad("{\"preconditions\":{\"uid\":\"b\"}}", 1, "a", "differ");
    delete_bad("{\"preconditions\":{\"uid\":\"u\",\"resourceVersion\":\"x\"}}", 1, NULL,
               "resourceVersion");
    static const char *const revs[] = {"7",      "\"\"",   "\"0\"",
                                       "\"07\"", "\"+7\"", "\" 7\"",
                                       "\"7 \"", "\"-1\"", "\"18446744073709551616\""};
    for (size_t i = 0; i < ARRAY_SIZE(revs); i++) {
        char body[128];

        snprintf(body, sizeof(body), "{\"preconditions\":{\"resourceVersion\":%s}}", revs[i]);
        delete_bad(body, 1, NULL, "resourceVersion must be the object's revision");
    }
}

static void test_free_sentinel(void)
{
    json_decref(sentinel());
}

TEST_MAIN(test_device_names, test_driver_put, test_devices_put, test_health_patch, test_pod_put,
          test_allocate, test_reservation, test_uid, test_delete_options, test_free_sentinel)
