/* SPDX-License-Identifier: Apache-2.0 */
/* jsonx_test.c - strict parsing and canonical dumping through jsonx.h. */
#include "../../../common/common.h"
#include "../../../common/jsonx.h"
#include "../test.h"

static err_t parse(const char *s, json_t **out, struct error *e)
{
    return jsonx_parse(s, strlen(s), out, e);
}

static void test_parse(void)
{
    struct error e = {0};
    const char *msg = e.msg;
    json_t *v = NULL;

    CHECK_OK(parse("{\"a\":1,\"b\":[true,null]}", &v, &e));
    CHECK_EQ_INT(json_integer_value(json_object_get(v, "a")), 1);
    CHECK_EQ_INT(json_array_size(json_object_get(v, "b")), 2);
    json_decref(v);
    v = NULL;
    CHECK_OK(parse("[1,2]", &v, &e));
    CHECK(json_is_array(v));
    json_decref(v);
    v = NULL;

    e = (struct error){0};
    CHECK_EQ_INT(parse("{\"a\":1,\n  \"b\": }", &v, &e), ERR_INVAL);
    CHECK(v == NULL);
    CHECK(strstr(msg, "line 2") != NULL);
    CHECK(strstr(msg, "column") != NULL);

    e = (struct error){0};
    CHECK_EQ_INT(parse("{\"a\":1,\"a\":2}", &v, &e), ERR_INVAL);
    CHECK(v == NULL);
    CHECK(strstr(msg, "line 1") != NULL);
    CHECK(strstr(msg, "duplicate") != NULL);

    /* \u0000 in a string: said so, not in jansson's words (a flag name) */
    e = (struct error){0};
    CHECK_EQ_INT(parse("{\"a\":\"x\\u0000y\"}", &v, &e), ERR_INVAL);
    CHECK(v == NULL);
    CHECK(strstr(msg, "a string holds \\u0000") != NULL);
    CHECK(strstr(msg, "JSON_ALLOW_NUL") == NULL);

    e = (struct error){0};
    CHECK_EQ_INT(jsonx_parse("", 0, &v, &e), ERR_INVAL);
    CHECK(v == NULL);
    CHECK(strstr(msg, "empty") != NULL);

    e = (struct error){0};
    CHECK_EQ_INT(parse("{} {}", &v, &e), ERR_INVAL);
    CHECK(v == NULL);
    CHECK(msg[0] != '\0');

    /* only the first 'len' bytes count */
    CHECK_OK(jsonx_parse("{\"x\":1}garbage", 7, &v, &e));
    CHECK_EQ_INT(json_integer_value(json_object_get(v, "x")), 1);
    json_decref(v);
}

static void test_check_keys(void)
{
    static const char *const allowed[] = {"id", "health", NULL};
    struct error e = {0};
    const char *msg = e.msg;
    json_t *o = json_pack("{s:s,s:s}", "id", "a", "health", "Healthy");

    CHECK_OK(jsonx_check_keys(o, allowed, "devices[]", &e));
    json_object_set_new(o, "colour", json_string("red"));
    CHECK_EQ_INT(jsonx_check_keys(o, allowed, "devices[]", &e), ERR_INVAL);
    CHECK(strstr(msg, "colour") != NULL);
    CHECK(strstr(msg, "devices[].colour") != NULL);
    e = (struct error){0};
    CHECK_EQ_INT(jsonx_check_keys(o, allowed, NULL, &e), ERR_INVAL);
    CHECK(strstr(msg, "\"colour\"") != NULL);
    json_decref(o);
    o = json_object();
    CHECK_OK(jsonx_check_keys(o, allowed, NULL, &e));
    json_decref(o);
}

static void test_dumps(void)
{
    json_t *o = json_pack("{s:i,s:s,s:[i,i],s:{s:i,s:i}}", "zeta", 1, "alpha", "x", "mid", 2, 1,
                          "obj", "b", 2, "a", 1);
    char *s = jsonx_dumps(o), *line;
    size_t len = 0;

    CHECK_STREQ(s, "{\"alpha\":\"x\",\"mid\":[2,1],\"obj\":{\"a\":1,\"b\":2},\"zeta\":1}");
    /* a line keeps the insertion order */
    line = jsonx_dumps_line(o, &len);
    CHECK_STREQ(line, "{\"zeta\":1,\"alpha\":\"x\",\"mid\":[2,1],\"obj\":{\"b\":2,\"a\":1}}\n");
    CHECK_EQ_INT(len, strlen(s) + 1);
    free(s);
    free(line);
    json_decref(o);
    o = json_string("x");
    s = jsonx_dumps(o); /* any value, not only containers */
    CHECK_STREQ(s, "\"x\"");
    free(s);
    json_decref(o);
}

static void test_object(void)
{
    json_t *kept = json_string("shared"), *o, *want;

    o = jsonx_object("name", json_incref(kept), "n", json_integer(2), "list", json_array(), NULL);
    want = json_pack("{s:O,s:i,s:[]}", "name", kept, "n", 2, "list");
    CHECK(o != NULL && json_equal(o, want));
    CHECK_EQ_INT(kept->refcount, 3); /* ours, want's and o's */
    json_decref(o);
    json_decref(want);
    CHECK_EQ_INT(kept->refcount, 1);
    o = jsonx_object(NULL, NULL, NULL); /* no pairs */
    CHECK(o != NULL && json_is_object(o) && json_object_size(o) == 0);
    json_decref(o);
    /* a NULL value fails, and every value is released, before it and after */
    o = jsonx_object("a", json_incref(kept), "b", NULL, "c", json_incref(kept), NULL);
    CHECK(o == NULL);
    CHECK_EQ_INT(kept->refcount, 1);
    json_decref(kept);
}

/* Invalid UTF-8 becomes U+FFFD byte by byte (as Go's encoding/json writes
 * it); valid text, of every sequence length, is kept as it is. */
static void test_string_lossy(void)
{
    static const char *const cases[][2] = {
        {"", ""},
        {"plain", "plain"},
        {"\xC3\xA9\xE2\x82\xAC\xF0\x9D\x84\x9E", "\xC3\xA9\xE2\x82\xAC\xF0\x9D\x84\x9E"},
        {"a\xFF"
         "b",
         "a\xEF\xBF\xBD"
         "b"},
        {"a\xC3", "a\xEF\xBF\xBD"},               /* cut after the first byte */
        {"\xE2\x82", "\xEF\xBF\xBD\xEF\xBF\xBD"}, /* cut, then a lone continuation */
        {"\xC0\xAF", "\xEF\xBF\xBD\xEF\xBF\xBD"}, /* overlong */
        {"\xE0\x80\xAF", "\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD"},
        {"\xED\xA0\x80", "\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD"},                 /* a surrogate */
        {"\xF4\x90\x80\x80", "\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD"}, /* > U+10FFFF */
        {"\xF4\x8F\xBF\xBF", "\xF4\x8F\xBF\xBF"},                                 /* U+10FFFF */
        {"\xED\x9F\xBF", "\xED\x9F\xBF"},                                         /* U+D7FF */
        {"\xF8\x88\x80\x80\x80", "\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD"},
    };
    char buf[64];
    json_t *v, *raw;
    size_t i, j;

    for (i = 0; i < ARRAY_SIZE(cases); i++) {
        v = jsonx_string_lossy(cases[i][0]);
        CHECK(v != NULL);
        CHECK_STREQ(json_string_value(v), cases[i][1]);
        json_decref(v);
    }
    /* whatever the bytes, a string jansson takes, and valid input unchanged */
    srand(7);
    for (i = 0; i < 20000; i++) {
        size_t n = (size_t)rand() % (sizeof(buf) - 1);

        for (j = 0; j < n; j++)
            buf[j] = (char)(1 + rand() % 255);
        buf[n] = '\0';
        v = jsonx_string_lossy(buf);
        raw = json_string(buf); /* NULL: not valid UTF-8 */
        CHECK(v != NULL);
        if (v && raw)
            CHECK_STREQ(json_string_value(v), buf);
        json_decref(v);
        json_decref(raw);
    }
}

/* Sorted by strcmp; 'unique' keeps one of each; 'drop' leaves one value out. */
static void test_sorted_strings(void)
{
    json_t *in = json_pack("[s,s,s,s,s]", "nvidia1", "GPU-a", "nvidia1", "0000:3b", "gpu-0");
    json_t *out;
    char *t;

    out = jsonx_sorted_strings(in, false, NULL);
    t = jsonx_dumps(out);
    CHECK_STREQ(t, "[\"0000:3b\",\"GPU-a\",\"gpu-0\",\"nvidia1\",\"nvidia1\"]");
    free(t);
    json_decref(out);
    out = jsonx_sorted_strings(in, true, "gpu-0");
    t = jsonx_dumps(out);
    CHECK_STREQ(t, "[\"0000:3b\",\"GPU-a\",\"nvidia1\"]");
    free(t);
    json_decref(out);
    json_array_clear(in);
    out = jsonx_sorted_strings(in, true, NULL);
    CHECK_EQ_INT(json_array_size(out), 0);
    json_decref(out);
    json_decref(in);
}

TEST_MAIN(test_sorted_strings, test_parse, test_check_keys, test_dumps, test_object,
          test_string_lossy)
