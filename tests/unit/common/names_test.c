/* SPDX-License-Identifier: Apache-2.0 */
/* names_test.c - Kubernetes name rules through names.h. */
#include "../../../common/common.h"
#include "../../../common/names.h"
#include "../test.h"

/* A string of 'n' copies of 'c' (n < 512). */
static const char *rep(char *buf, char c, size_t n)
{
    memset(buf, c, n);
    buf[n] = '\0';
    return buf;
}

static void test_label(void)
{
    char b[512];

    CHECK(names_is_dns1123_label("a"));
    CHECK(names_is_dns1123_label("default"));
    CHECK(names_is_dns1123_label("kube-system"));
    CHECK(names_is_dns1123_label("0abc9"));
    CHECK(names_is_dns1123_label(rep(b, 'a', 63)));
    CHECK(!names_is_dns1123_label(rep(b, 'a', 64)));
    CHECK(!names_is_dns1123_label(""));
    CHECK(!names_is_dns1123_label(NULL));
    CHECK(!names_is_dns1123_label("-a"));
    CHECK(!names_is_dns1123_label("a-"));
    CHECK(!names_is_dns1123_label("Abc"));
    CHECK(!names_is_dns1123_label("a.b"));
    CHECK(!names_is_dns1123_label("a_b"));
    CHECK(!names_is_dns1123_label("a b"));
}

static void test_subdomain(void)
{
    char b[512];
    size_t i;

    CHECK(names_is_dns1123_subdomain("a"));
    CHECK(names_is_dns1123_subdomain("my-pod.v1"));
    CHECK(names_is_dns1123_subdomain("nvidia.com"));
    CHECK(!names_is_dns1123_subdomain(""));
    CHECK(!names_is_dns1123_subdomain(NULL));
    CHECK(!names_is_dns1123_subdomain(".a"));
    CHECK(!names_is_dns1123_subdomain("a."));
    CHECK(!names_is_dns1123_subdomain("a..b"));
    CHECK(!names_is_dns1123_subdomain("a.-b"));
    CHECK(!names_is_dns1123_subdomain("A.b"));
    CHECK(!names_is_dns1123_subdomain("a/b"));
    /* 253 characters: "aaa...a.aaa...a" of labels <= 63 */
    for (i = 0; i < 253; i++)
        b[i] = (i % 50 == 49) ? '.' : 'a';
    b[253] = '\0';
    CHECK(names_is_dns1123_subdomain(b));
    b[253] = 'a';
    b[254] = '\0';
    CHECK(!names_is_dns1123_subdomain(b));
    CHECK(!names_is_dns1123_subdomain(rep(b, 'a', 64))); /* one label too long */
}

static void test_resource_name(void)
{
    char b[512];

    CHECK(names_is_resource_name("nvidia.com/gpu"));
    CHECK(names_is_resource_name("example.com/GPU_a.b-c"));
    CHECK(names_is_resource_name("a/b"));
    CHECK(!names_is_resource_name("gpu"));
    CHECK(!names_is_resource_name(NULL));
    CHECK(!names_is_resource_name(""));
    CHECK(!names_is_resource_name("/gpu"));
    CHECK(!names_is_resource_name("nvidia.com/"));
    CHECK(!names_is_resource_name("nvidia.com/gpu/x"));
    /* Kubernetes keeps these: native resources and the quota prefix */
    CHECK(!names_is_resource_name("kubernetes.io/gpu"));
    CHECK(!names_is_resource_name("foo.kubernetes.io/gpu"));
    CHECK(!names_is_resource_name("requests.example.com/gpu"));
    CHECK(names_is_resource_name("kubernetes.example.com/gpu"));
    CHECK(names_is_resource_name("example.com/requests.gpu"));
    CHECK(!names_is_resource_name("Nvidia.com/gpu"));
    CHECK(!names_is_resource_name("nvidia.com/-gpu"));
    CHECK(!names_is_resource_name("nvidia.com/gpu-"));
    CHECK(!names_is_resource_name("nvidia.com/g|pu"));
    memcpy(b, "x.io/", 5);
    rep(b + 5, 'g', 63);
    CHECK(names_is_resource_name(b));
    rep(b + 5, 'g', 64);
    CHECK(!names_is_resource_name(b));
}

static void test_device_id(void)
{
    char b[512];

    CHECK(names_is_device_id("gpu-0"));
    CHECK(names_is_device_id("GPU-8a1f:00.0_x"));
    CHECK(names_is_device_id("0"));
    CHECK(names_is_device_id(rep(b, 'a', 253)));
    CHECK(!names_is_device_id(rep(b, 'a', 254)));
    CHECK(!names_is_device_id(""));
    CHECK(!names_is_device_id(NULL));
    CHECK(!names_is_device_id("-gpu"));
    CHECK(!names_is_device_id(".gpu"));
    CHECK(!names_is_device_id("gpu 0"));
    CHECK(names_is_device_id("MIG-GPU-8a1f/1/0"));
    CHECK(!names_is_device_id("/gpu"));
    CHECK(!names_is_device_id("gpu|0"));
}

static void test_identity_names(void)
{
    char b[512];

    CHECK(names_is_alias("GPU-8a1f0c2e-1111-2222-3333-444455556666"));
    CHECK(names_is_alias("0000:3b:00.0"));
    CHECK(names_is_alias("nvidia0"));
    CHECK(names_is_alias("MIG-GPU-8a1f/1/0"));
    CHECK(names_is_alias(rep(b, 'a', 253)));
    CHECK(!names_is_alias(rep(b, 'a', 254)));
    CHECK(!names_is_alias(""));
    CHECK(!names_is_alias(NULL));
    CHECK(!names_is_alias("/gpu"));
    CHECK(!names_is_alias("gpu 0"));
    CHECK(!names_is_alias("gpu|0"));

    CHECK(names_is_dra_device_id("pool-a/gpu-0"));
    CHECK(names_is_dra_device_id("node-1.example.com/sub/gpu-0"));
    CHECK(!names_is_dra_device_id("gpu-0"));
    CHECK(!names_is_dra_device_id("/gpu-0"));
    CHECK(!names_is_dra_device_id("pool//gpu-0"));
    CHECK(!names_is_dra_device_id("pool/Gpu-0"));
    CHECK(!names_is_dra_device_id("pool/gpu.0"));
    CHECK(!names_is_dra_device_id("pool/"));
    CHECK(!names_is_dra_device_id(NULL));

    /* a lookup name: an alias, or a DRA id past 253 characters */
    CHECK(names_is_device_name("GPU-1/2"));
    CHECK(names_is_device_name("pool-a/gpu-0"));
    {
        char l[64], id[320];

        rep(l, 'a', 60);
        snprintf(id, sizeof(id), "%s.%s.%s.%s/pool/gpu-0", l, l, l, l);
        CHECK(!names_is_alias(id));
        CHECK(names_is_device_name(id));
    }
    CHECK(!names_is_device_name("/gpu"));
    CHECK(!names_is_device_name(NULL));

    CHECK(names_is_resource_or_driver("example.com/gpu"));
    CHECK(names_is_resource_or_driver("gpu.example.com"));
    CHECK(!names_is_resource_or_driver("Gpu.example.com"));
    CHECK(!names_is_resource_or_driver("a/b/c"));
    CHECK(!names_is_resource_or_driver(""));
}

TEST_MAIN(test_label, test_subdomain, test_resource_name, test_device_id, test_identity_names)
