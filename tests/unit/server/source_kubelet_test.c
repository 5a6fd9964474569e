/* SPDX-License-Identifier: Apache-2.0 */
/* source_kubelet_test.c - protobuf decoding into the snapshot (built with
 * protobuf-c as the kubelet would send it), rejection of malformed and
 * hostile answers (every truncation and byte flip of a valid one decodes
 * or fails cleanly), the backoff schedule and readiness before a sync. */
#include "../../../common/common.h"
#include "../../../server/source_kubelet.h"
#include "podresources.pb-c.h"
#include "../test.h"

/* protobuf-c takes char * but never writes through it when packing. */
#define S(lit) ((char *)(uintptr_t)(lit))

/* Serialise one List answer: pod ml/train-0 with one container holding
 * gpu-1 and gpu-0 (NUMA 0), CPUs 4 and 5, 1 GiB of memory and a DRA claim. */
static uint8_t *list_answer(const char *pod_name, size_t *len)
{
    V1__NUMANode n0 = V1__NUMANODE__INIT;
    V1__NUMANode *nodes[] = {&n0};
    V1__TopologyInfo topo = V1__TOPOLOGY_INFO__INIT;
    char *ids[] = {S("gpu-1"), S("gpu-0")};
    V1__ContainerDevices dev = V1__CONTAINER_DEVICES__INIT;
    V1__ContainerDevices *devs[] = {&dev};
    V1__ContainerMemory mem = V1__CONTAINER_MEMORY__INIT;
    V1__ContainerMemory *mems[] = {&mem};
    V1__CDIDevice cdi = V1__CDIDEVICE__INIT;
    V1__CDIDevice *cdis[] = {&cdi};
    V1__ClaimResource claim = V1__CLAIM_RESOURCE__INIT;
    V1__ClaimResource *claims[] = {&claim};
    V1__DynamicResource dyn = V1__DYNAMIC_RESOURCE__INIT;
    V1__DynamicResource *dyns[] = {&dyn};
    int64_t cpus[] = {4, 5};
    V1__ContainerResources c = V1__CONTAINER_RESOURCES__INIT;
    V1__ContainerResources *cs[] = {&c};
    V1__PodResources pod = V1__POD_RESOURCES__INIT;
    V1__PodResources *pods[] = {&pod};
    V1__ListPodResourcesResponse resp = V1__LIST_POD_RESOURCES_RESPONSE__INIT;
    uint8_t *buf;

    n0.id = 0;
    topo.n_nodes = 1;
    topo.nodes = nodes;
    dev.resource_name = S("example.com/gpu");
    dev.n_device_ids = 2;
    dev.device_ids = ids;
    dev.topology = &topo;
    mem.memory_type = S("memory");
    mem.size = 1073741824;
    mem.topology = &topo;
    cdi.name = S("example.com/gpu=gpu0");
    claim.n_cdi_devices = 1;
    claim.cdi_devices = cdis;
    claim.driver_name = S("gpu.example.com");
    claim.pool_name = S("node-a");
    claim.device_name = S("gpu-7");
    dyn.claim_name = S("claim-a");
    dyn.claim_namespace = S("ml");
    dyn.n_claim_resources = 1;
    dyn.claim_resources = claims;
    c.name = S("main");
    c.n_devices = 1;
    c.devices = devs;
    c.n_cpu_ids = 2;
    c.cpu_ids = cpus;
    c.n_memory = 1;
    c.memory = mems;
    c.n_dynamic_resources = 1;
    c.dynamic_resources = dyns;
    pod.name = S(pod_name);
    pod.namespace_ = S("ml");
    pod.n_containers = 1;
    pod.containers = cs;
    resp.n_pod_resources = 1;
    resp.pod_resources = pods;
    *len = v1__list_pod_resources_response__get_packed_size(&resp);
    buf = malloc(*len ? *len : 1);
    v1__list_pod_resources_response__pack(&resp, buf);
    return buf;
}

/* Allocatable: gpu-0..2 without topology, CPUs 0..3, 2 GiB of memory. */
static uint8_t *alloc_answer(size_t *len)
{
    char *ids[] = {S("gpu-0"), S("gpu-1"), S("gpu-2")};
    int64_t cpus[] = {0, 1, 2, 3};
    V1__ContainerDevices dev = V1__CONTAINER_DEVICES__INIT;
    V1__ContainerDevices *devs[] = {&dev};
    V1__ContainerMemory mem = V1__CONTAINER_MEMORY__INIT;
    V1__ContainerMemory *mems[] = {&mem};
    V1__AllocatableResourcesResponse resp = V1__ALLOCATABLE_RESOURCES_RESPONSE__INIT;
    uint8_t *buf;

    dev.resource_name = S("example.com/gpu");
    dev.n_device_ids = 3;
    dev.device_ids = ids;
    mem.memory_type = S("memory");
    mem.size = 2147483648u;
    resp.n_devices = 1;
    resp.devices = devs;
    resp.n_cpu_ids = 4;
    resp.cpu_ids = cpus;
    resp.n_memory = 1;
    resp.memory = mems;
    *len = v1__allocatable_resources_response__get_packed_size(&resp);
    buf = malloc(*len ? *len : 1);
    v1__allocatable_resources_response__pack(&resp, buf);
    return buf;
}

static void test_decode(void)
{
    size_t ll, al;
    uint8_t *l = list_answer("train-0", &ll), *a = alloc_answer(&al);
    json_t *snap = NULL, *c, *d;
    struct error e = {0};
    char *text;

    CHECK_OK(source_kubelet_decode(l, ll, a, al, &snap, &e));
    c = json_array_get(
        json_object_get(json_array_get(json_object_get(snap, "pods"), 0), "containers"), 0);
    text = json_dumps(json_object_get(c, "devices"), JSON_SORT_KEYS | JSON_COMPACT);
    /* the dynamicResources' devices as a group of their driver, with the claim */
    CHECK_STREQ(text, "[{\"deviceIds\":[\"gpu-1\",\"gpu-0\"],\"resourceName\":\"example.com/gpu\","
                      "\"topology\":{\"nodes\":[{\"ID\":0}]}},{\"claims\":[{\"deviceIds\":"
                      "[\"node-a/gpu-7\"],\"name\":\"claim-a\",\"namespace\":\"ml\"}],"
                      "\"deviceIds\":[\"node-a/gpu-7\"],\"resourceName\":\"gpu.example.com\","
                      "\"topology\":{\"nodes\":[]}}]");
    free(text);
    CHECK_EQ_INT(json_integer_value(json_array_get(json_object_get(c, "cpuIds"), 1)), 5);
    d = json_array_get(json_object_get(c, "memory"), 0);
    CHECK_EQ_INT(json_integer_value(json_object_get(d, "size")), 1073741824);
    CHECK_STREQ(json_string_value(json_object_get(d, "memoryType")), "memory");
    d = json_array_get(json_object_get(json_array_get(json_object_get(c, "dynamicResources"), 0),
                                       "claimResources"),
                       0);
    CHECK_STREQ(json_string_value(json_object_get(d, "deviceName")), "gpu-7");
    CHECK_STREQ(json_string_value(
                    json_object_get(json_array_get(json_object_get(d, "cdiDevices"), 0), "name")),
                "example.com/gpu=gpu0");
    CHECK_EQ_INT(json_array_size(json_object_get(snap, "devices")), 3);
    d = json_array_get(json_object_get(snap, "devices"), 2);
    CHECK_STREQ(json_string_value(json_object_get(d, "id")), "gpu-2");
    CHECK_EQ_INT(json_array_size(json_object_get(json_object_get(d, "topology"), "nodes")), 0);
    /* the node's allocatable CPUs and memory */
    d = json_pack("{s:O,s:O}", "cpuIds", json_object_get(snap, "cpuIds"), "memory",
                  json_object_get(snap, "memory"));
    text = json_dumps(d, JSON_SORT_KEYS | JSON_COMPACT);
    json_decref(d);
    CHECK_STREQ(text, "{\"cpuIds\":[0,1,2,3],\"memory\":[{\"memoryType\":\"memory\",\"size\":"
                      "2147483648,\"topology\":{\"nodes\":[]}}]}");
    free(text);
    json_decref(snap);
    free(l);
    free(a);
}

static void test_empty_answers(void)
{
    json_t *snap = NULL;
    struct error e = {0};

    CHECK_OK(source_kubelet_decode((const uint8_t *)"", 0, (const uint8_t *)"", 0, &snap, &e));
    CHECK_EQ_INT(json_array_size(json_object_get(snap, "pods")), 0);
    CHECK_EQ_INT(json_array_size(json_object_get(snap, "devices")), 0);
    json_decref(snap);
}

static void test_reject_bad_names(void)
{
    static const char *const bad[] = {"", "tab\there", "nl\n", "bad\xff utf8"};
    size_t ll, al, i;
    uint8_t *l, *a = alloc_answer(&al);
    json_t *snap = NULL;
    struct error e = {0};

    for (i = 0; i < ARRAY_SIZE(bad); i++) {
        memset(&e, 0, sizeof(e));
        l = list_answer(bad[i], &ll);
        CHECK_EQ_INT(source_kubelet_decode(l, ll, a, al, &snap, &e), ERR_INVAL);
        CHECK(snap == NULL);
        CHECK(strstr(e.msg, "List") != NULL);
        free(l);
    }
    free(a);
}

/* Every truncation and every single-byte change of a valid answer either
 * decodes or is ERR_INVAL; never a crash (ASan/UBSan builds check that). */
static void test_hostile_bytes(void)
{
    size_t ll, al, i, ok = 0, bad = 0;
    uint8_t *l = list_answer("train-0", &ll), *a = alloc_answer(&al);
    uint8_t *m = malloc(ll);
    json_t *snap;
    struct error e = {0};
    err_t rc;

    for (i = 0; i <= ll; i++) {
        snap = NULL;
        rc = source_kubelet_decode(l, i, a, al, &snap, &e);
        rc ? bad++ : ok++;
        CHECK_EQ_INT(rc == ERR_OK || rc == ERR_INVAL, 1);
        json_decref(snap);
    }
    for (i = 0; i < ll * 8; i++) {
        memcpy(m, l, ll);
        m[i / 8] ^= (uint8_t)(1u << (i % 8));
        snap = NULL;
        rc = source_kubelet_decode(m, ll, a, al, &snap, &e);
        if (rc != ERR_OK && rc != ERR_INVAL)
            CHECK_EQ_INT(rc, ERR_INVAL);
        rc ? bad++ : ok++;
        json_decref(snap);
    }
    CHECK(ok > 0 && bad > 0);
    free(m);
    free(l);
    free(a);
}

static void test_backoff(void)
{
    CHECK_EQ_INT(source_kubelet_backoff(200, 0, 0.9), 200);
    CHECK_EQ_INT(source_kubelet_backoff(200, 1, 0), 200);
    CHECK_EQ_INT(source_kubelet_backoff(200, 2, 0), 400);
    CHECK_EQ_INT(source_kubelet_backoff(200, 4, 0), 1600);
    CHECK_EQ_INT(source_kubelet_backoff(200, 30, 0), 3200);       /* 16 intervals */
    CHECK_EQ_INT(source_kubelet_backoff(200, 3, 1.0), 800 + 200); /* + a quarter */
    CHECK_EQ_INT(source_kubelet_backoff(2000, 30, 0), 30000);     /* 30 s cap */
    CHECK_EQ_INT(source_kubelet_backoff(60000, 5, 0), 60000);     /* never under the interval */
    CHECK_EQ_INT(source_kubelet_backoff(200, 1000000, 0), 3200);
}

/* Not ready before any sync (the socket does not exist), and says why. */
static void test_not_ready_before_sync(void)
{
    struct source_kubelet_opts o = {
        .socket_path = "/nonexistent/kubelet.sock", .interval_ms = 50, .store = NULL};
    struct source_kubelet *k = NULL;
    struct error e = {0};

    CHECK_OK(source_kubelet_start(&o, &k));
    CHECK(!source_kubelet_ready(k, &e));
    CHECK(strstr(e.msg, "no successful kubelet sync") != NULL);
    source_kubelet_free(k);
    source_kubelet_free(NULL);
}

/* The 1.36 kubelet lists with each DRA device the CDI ids of the driver's
 * devices before it in the claim: each device keeps its own. A device of
 * another driver, and one whose list is not a longer copy of the one before,
 * keep theirs as sent. */
static void test_repeated_cdi(void)
{
    V1__CDIDevice ca = V1__CDIDEVICE__INIT, cb = V1__CDIDEVICE__INIT, cc = V1__CDIDEVICE__INIT,
                  cz = V1__CDIDEVICE__INIT;
    V1__CDIDevice *l0[] = {&ca}, *l1[] = {&ca, &cb}, *l2[] = {&ca, &cb, &cc}, *l3[] = {&cz},
                  *l4[] = {&cz};
    V1__CDIDevice **lists[] = {l0, l1, l2, l3, l4};
    size_t lens[] = {1, 2, 3, 1, 1};
    const char *drivers[] = {"d.example.com", "d.example.com", "d.example.com", "e.example.com",
                             "e.example.com"};
    const char *names[] = {"dev-0", "dev-1", "dev-2", "dev-3", "dev-4"};
    V1__ClaimResource cr[5], *crs[5];
    V1__DynamicResource dyn = V1__DYNAMIC_RESOURCE__INIT;
    V1__DynamicResource *dyns[] = {&dyn};
    V1__ContainerResources c = V1__CONTAINER_RESOURCES__INIT;
    V1__ContainerResources *cs[] = {&c};
    V1__PodResources pod = V1__POD_RESOURCES__INIT;
    V1__PodResources *pods[] = {&pod};
    V1__ListPodResourcesResponse resp = V1__LIST_POD_RESOURCES_RESPONSE__INIT;
    json_t *snap = NULL, *claims, *x;
    struct error e = {0};
    size_t i, j, ll, n = 0;
    uint8_t *l;
    char got[256] = "";

    ca.name = S("d/x=a");
    cb.name = S("d/x=b");
    cc.name = S("d/x=c");
    cz.name = S("e/x=z");
    for (i = 0; i < 5; i++) {
        v1__claim_resource__init(&cr[i]);
        cr[i].driver_name = S(drivers[i]);
        cr[i].pool_name = S("node-a");
        cr[i].device_name = S(names[i]);
        cr[i].n_cdi_devices = lens[i];
        cr[i].cdi_devices = lists[i];
        crs[i] = &cr[i];
    }
    dyn.claim_name = S("claim-a");
    dyn.claim_namespace = S("ml");
    dyn.n_claim_resources = 5;
    dyn.claim_resources = crs;
    c.name = S("main");
    c.n_dynamic_resources = 1;
    c.dynamic_resources = dyns;
    pod.name = S("p");
    pod.namespace_ = S("ml");
    pod.n_containers = 1;
    pod.containers = cs;
    resp.n_pod_resources = 1;
    resp.pod_resources = pods;
    ll = v1__list_pod_resources_response__get_packed_size(&resp);
    l = malloc(ll);
    v1__list_pod_resources_response__pack(&resp, l);
    CHECK_OK(source_kubelet_decode(l, ll, NULL, 0, &snap, &e));
    claims = json_object_get(
        json_array_get(
            json_object_get(
                json_array_get(
                    json_object_get(json_array_get(json_object_get(snap, "pods"), 0), "containers"),
                    0),
                "dynamicResources"),
            0),
        "claimResources");
    for (i = 0; i < json_array_size(claims) && n < sizeof(got); i++) {
        json_array_foreach(json_object_get(json_array_get(claims, i), "cdiDevices"), j, x) {
            if (n < sizeof(got))
                n += (size_t)snprintf(got + n, sizeof(got) - n, "%s ",
                                      json_string_value(json_object_get(x, "name")));
        }
        if (n < sizeof(got))
            n += (size_t)snprintf(got + n, sizeof(got) - n, "|");
    }
    CHECK_STREQ(got, "d/x=a |d/x=b |d/x=c |e/x=z |e/x=z |");
    json_decref(snap);
    free(l);
}

TEST_MAIN(test_decode, test_repeated_cdi, test_empty_answers, test_reject_bad_names,
          test_hostile_bytes, test_backoff, test_not_ready_before_sync)
