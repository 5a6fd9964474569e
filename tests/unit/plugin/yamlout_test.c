/* SPDX-License-Identifier: Apache-2.0 */
/* yamlout_test.c - JSON written as YAML through plugin/yamlout.h, read back
 * with the project's libyaml loader (common/cfg.h): the same value, strings
 * that look like numbers, booleans, null or times stay strings. */
#include "../../../common/common.h"
#include "../../../common/cfg.h"
#include "../../../plugin/yamlout.h"
#include "../test.h"

/* Write 'text' (JSON) as YAML, read it back, compare. */
static void round_trip(const char *text)
{
    struct strbuf sb = STRBUF_INIT;
    json_t *in = json_loads(text, 0, NULL), *back = NULL;
    struct error e = {0};

    CHECK(in != NULL);
    CHECK_OK(yamlout_write(in, &sb));
    CHECK_OK(cfg_yaml_parse(sb.buf ? sb.buf : "", sb.len, &back, &e));
    TEST_REPORT(json_equal(in, back), "round trip of %s gave:\n%s", text, sb.buf);
    json_decref(in);
    json_decref(back);
    strbuf_release(&sb);
}

static void test_round_trips(void)
{
    round_trip("{\"items\":[{\"node\":\"node-a\",\"total\":4,\"free\":0,\"numa\":[0,1],"
               "\"aliases\":[],\"holder\":null,\"ok\":true}]}");
    round_trip("{\"items\":[]}");
    round_trip("{\"s\":[\"123\",\"1.5\",\"true\",\"no\",\"null\",\"~\",\"\",\"-\","
               "\"2024-01-01T00:00:00Z\",\"0000:3b:00.0\",\"a: b\",\"#x\",\"[x]\",\"{y}\","
               "\"multi\\nline\",\"quote'\\\"\",\"gpü\",\" lead\",\"trail \",\"*star\",\"&amp\"]}");
    round_trip("{\"nested\":{\"a\":{\"b\":[{\"c\":[[1,2],[]]}]}},\"yes\":\"y\",\"123\":1}");
}

static void test_needs_quotes(void)
{
    CHECK(yamlout_needs_quotes("123"));
    CHECK(yamlout_needs_quotes("True"));
    CHECK(yamlout_needs_quotes("OFF"));
    CHECK(yamlout_needs_quotes(""));
    CHECK(yamlout_needs_quotes("2024-01-01T00:00:00Z"));
    CHECK(!yamlout_needs_quotes("node-a"));
    CHECK(!yamlout_needs_quotes("example.com/gpu"));
}

static void test_layout(void)
{
    struct strbuf sb = STRBUF_INIT;
    json_t *v = json_loads("{\"items\":[{\"node\":\"n1\",\"free\":1}]}", 0, NULL);

    CHECK_OK(yamlout_write(v, &sb));
    CHECK_STREQ(sb.buf, "items:\n- node: n1\n  free: 1\n"); /* block style, keys in order */
    json_decref(v);
    strbuf_release(&sb);
}

TEST_MAIN(test_round_trips, test_needs_quotes, test_layout)
