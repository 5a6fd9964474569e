/* SPDX-License-Identifier: Apache-2.0 */
/* args_test.c - ExtenderArgs, ExtenderBindingArgs and a pod's device
 * requests through extender/args.h. */
#include "../../../common/common.h"
#include "../../../extender/args.h"
#include "../test.h"

#define POD                                                                                        \
    "{\"metadata\":{\"name\":\"p\",\"namespace\":\"ml\"},\"spec\":{\"containers\":["               \
    "{\"name\":\"a\",\"resources\":{\"limits\":{\"example.com/gpu\":\"2\",\"cpu\":\"1\","          \
    "\"kubernetes.io/x\":\"1\"}}},"                                                                \
    "{\"name\":\"b\",\"resources\":{\"requests\":{\"example.com/gpu\":\"1\","                      \
    "\"nvidia.com/gpu\":\"0\"}}},"                                                                 \
    "{\"name\":\"c\"}]}}"

static void test_parse_names(void)
{
    const char body[] = "{\"Pod\":" POD ",\"NodeNames\":[\"n1\",\"n2\"]}";
    struct args a;
    struct error e = {0};

    CHECK_OK(args_parse(body, strlen(body), &a, &e));
    CHECK_STREQ(a.ns, "ml");
    CHECK_STREQ(a.name, "p");
    CHECK_STREQ(a.uid, ""); /* none given: filter remembers nothing for bind */
    CHECK(!a.node_list);
    CHECK_EQ_INT(json_array_size(a.names), 2);
    CHECK_EQ_INT(json_integer_value(json_object_get(a.totals, "example.com/gpu")), 3);
    CHECK(json_object_get(a.totals, "cpu") == NULL);
    CHECK(json_object_get(a.totals, "kubernetes.io/x") == NULL);
    CHECK(json_object_get(a.totals, "nvidia.com/gpu") == NULL); /* 0 asks for nothing */
    CHECK_EQ_INT(json_array_size(a.requests), 2);               /* c asks for no device */
    args_release(&a);
}

static void test_parse_nodes(void)
{
    const char body[] = "{\"Pod\":" POD ",\"Nodes\":{\"items\":[{\"metadata\":{\"name\":\"x\"}}]}}";
    struct args a;
    struct error e = {0};

    CHECK_OK(args_parse(body, strlen(body), &a, &e));
    CHECK(a.node_list);
    CHECK_STREQ(json_string_value(json_array_get(a.names, 0)), "x");
    args_release(&a);
}

static void test_parse_bad(void)
{
    const char *bad[] = {
        "{",
        "[]",
        "{\"NodeNames\":[]}",
        "{\"Pod\":{\"metadata\":{\"name\":\"p\",\"namespace\":\"ml\"}}}",
        "{\"Pod\":{\"metadata\":{\"name\":\"../p\",\"namespace\":\"ml\"}},\"NodeNames\":[]}",
        "{\"Pod\":{\"metadata\":{\"name\":\"p\",\"namespace\":\"ml\"}},\"NodeNames\":[1]}",
        "{\"Pod\":{\"metadata\":{\"name\":\"p\",\"namespace\":\"ml\"},\"spec\":{\"containers\":"
        "[{\"name\":\"a\",\"resources\":{\"limits\":{\"example.com/gpu\":\"500m\"}}}]}},"
        "\"NodeNames\":[]}",
    };
    struct args a;
    struct error e = {0};
    size_t i;

    for (i = 0; i < ARRAY_SIZE(bad); i++) {
        e = (struct error){0};
        CHECK_EQ_INT(args_parse(bad[i], strlen(bad[i]), &a, &e), ERR_INVAL);
        CHECK(e.msg[0] != '\0');
    }
}

static void test_parse_bind(void)
{
    const char ok[] =
        "{\"PodName\":\"p\",\"PodNamespace\":\"ml\",\"PodUID\":\"u-1\",\"Node\":\"n1\"}";
    const char bad[] = "{\"PodName\":\"p\",\"PodNamespace\":\"ml/x\",\"Node\":\"n1\"}";
    const char nouid[] = "{\"PodName\":\"p\",\"PodNamespace\":\"ml\",\"Node\":\"n1\"}";
    const char emptyuid[] =
        "{\"PodName\":\"p\",\"PodNamespace\":\"ml\",\"PodUID\":\"\",\"Node\":\"n1\"}";
    struct args_bind b;
    struct error e = {0};

    CHECK_OK(args_parse_bind(ok, strlen(ok), &b, &e));
    CHECK_STREQ(b.name, "p");
    CHECK_STREQ(b.ns, "ml");
    CHECK_STREQ(b.uid, "u-1");
    CHECK_STREQ(b.node, "n1");
    CHECK_EQ_INT(args_parse_bind(bad, strlen(bad), &b, &e), ERR_INVAL);
    CHECK(strstr(error_msg(&e), "PodNamespace") != NULL);
    CHECK_EQ_INT(args_parse_bind(nouid, strlen(nouid), &b, &e), ERR_INVAL); /* bind checks by uid */
    CHECK(strstr(error_msg(&e), "PodUID is missing") != NULL);
    CHECK_EQ_INT(args_parse_bind(emptyuid, strlen(emptyuid), &b, &e), ERR_INVAL);
    CHECK(!args_is_name("-a"));
    CHECK(args_is_name("a.b-c"));
}

TEST_MAIN(test_parse_names, test_parse_nodes, test_parse_bad, test_parse_bind)
