/* SPDX-License-Identifier: Apache-2.0 */
/* jsonw_test.c - the JSON text writer through common/jsonw.h, against
 * jansson's own output (JSONW_FLAGS) for the same values. */
#include "../../../common/common.h"
#include "../../../common/jsonw.h"
#include "../test.h"

#include <stdint.h>

/* What jansson writes for string 's'. */
static char *jansson_str(const char *s)
{
    json_t *j = json_string(s);
    char *t = j ? json_dumps(j, JSONW_FLAGS | JSON_ENCODE_ANY) : NULL;

    json_decref(j);
    return t;
}

static void check_str(const char *s)
{
    struct jsonw w = JSONW_INIT;
    char *want = jansson_str(s), *got;

    jsonw_str(&w, s);
    got = jsonw_detach(&w, NULL);
    CHECK(want != NULL && got != NULL);
    if (want && got)
        CHECK_STREQ(got, want);
    free(want);
    free(got);
}

static void test_strings(void)
{
    static const char *const cases[] = {
        "",
        "plain",
        "quote\" back\\slash /slash",
        "\b\f\n\r\t",
        "\x01\x02\x1f\x7f end",
        "caf\xc3\xa9 \xe2\x80\xa8 \xf0\x9f\x98\x80",
        "ends with escape\n",
    };
    char all[33];
    size_t i;

    for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
        check_str(cases[i]);
    for (i = 0; i < 32; i++) /* every control byte */
        all[i] = (char)(i + 1 == 32 ? ' ' : i + 1);
    all[32] = '\0';
    check_str(all);
}

/* Random ASCII strings, control bytes and quotes included. */
static void test_strings_random(void)
{
    unsigned seed = 12345;
    char s[64];
    int n, i, k;

    for (n = 0; n < 2000; n++) {
        int len = (int)((seed = seed * 1103515245u + 12345u) >> 16) % 60;

        for (i = 0; i < len; i++) {
            seed = seed * 1103515245u + 12345u;
            k = (int)(seed >> 16) % 128;
            s[i] = (char)(k ? k : 'x');
        }
        s[len] = '\0';
        check_str(s);
    }
}

static void test_numbers_and_json(void)
{
    struct jsonw w = JSONW_INIT;
    json_t *obj = json_pack("{s:s,s:[i,i],s:n,s:b}", "b", "x\"y", "a", 1, -2, "z", "t", 1);
    char *want = json_dumps(obj, JSONW_FLAGS), *got;
    size_t len = 0;

    jsonw_lit(&w, "[");
    jsonw_u64(&w, 0);
    jsonw_lit(&w, ",");
    jsonw_u64(&w, 18446744073709551615u);
    jsonw_lit(&w, ",");
    jsonw_u64(&w, 42);
    jsonw_lit(&w, ",");
    jsonw_json(&w, obj);
    jsonw_raw(&w, "]xyz", 1);
    CHECK_OK(jsonw_done(&w));
    got = jsonw_detach(&w, &len);
    CHECK(got != NULL && want != NULL);
    if (got && want) {
        char expect[256];

        snprintf(expect, sizeof(expect), "[0,18446744073709551615,42,%s]", want);
        CHECK_STREQ(got, expect);
        CHECK_EQ_INT(len, strlen(expect));
    }
    CHECK(w.sb.buf == NULL && w.sb.len == 0 && jsonw_done(&w) == ERR_OK);
    free(got);
    free(want);
    json_decref(obj);
}

static void test_empty_and_release(void)
{
    struct jsonw w = JSONW_INIT;
    char *s = jsonw_detach(&w, NULL);

    CHECK(s != NULL && s[0] == '\0'); /* nothing written is still a text */
    free(s);
    jsonw_lit(&w, "abc");
    jsonw_release(&w);
    CHECK(w.sb.buf == NULL && jsonw_done(&w) == ERR_OK);
}

/* Once failed, later writes do nothing and detach gives NULL. */
static void test_sticky_error(void)
{
    struct jsonw w = JSONW_INIT;

    jsonw_lit(&w, "{");
    jsonw_json(&w, NULL); /* not a value: fails */
    CHECK_EQ_INT(jsonw_done(&w), ERR_NOMEM);
    jsonw_lit(&w, "more");
    jsonw_str(&w, "more");
    jsonw_u64(&w, 7);
    CHECK_STREQ(w.sb.buf, "{");
    CHECK(jsonw_detach(&w, NULL) == NULL);
    CHECK(w.sb.buf == NULL && jsonw_done(&w) == ERR_OK);
}

static void test_reserve(void)
{
    struct jsonw w = JSONW_INIT;
    char *before;

    jsonw_lit(&w, "{\"revision\":");
    jsonw_reserve(&w, 24);
    CHECK_OK(jsonw_done(&w));
    before = w.sb.buf;
    jsonw_u64(&w, UINT64_MAX);
    jsonw_lit(&w, "}");
    CHECK(w.sb.buf == before);
    CHECK_STREQ(w.sb.buf, "{\"revision\":18446744073709551615}");
    jsonw_release(&w);
}

/* jsonw_sorted must write what jansson's JSON_SORT_KEYS writes. */
static void check_sorted(const json_t *v)
{
    struct jsonw w = JSONW_INIT;
    char *want = json_dumps(v, JSONW_FLAGS | JSON_SORT_KEYS | JSON_ENCODE_ANY), *got;

    jsonw_sorted(&w, v);
    got = jsonw_detach(&w, NULL);
    CHECK(want != NULL && got != NULL);
    if (want && got && strcmp(got, want) != 0)
        CHECK_STREQ(got, want);
    free(want);
    free(got);
}

static unsigned rnd(unsigned *seed, unsigned n)
{
    *seed = *seed * 1103515245u + 12345u;
    return (*seed >> 16) % n;
}

/* A random value: objects of up to 20 keys (more than the writer keeps on
 * its stack), keys that share prefixes, UTF-8 and escapes, every type. */
static json_t *random_json(unsigned *seed, int depth)
{
    static const char *const keys[] = {"a",         "ab",       "b",     "B",  "_",
                                       "a b",       "\xc3\xa9", "z\"q",  "\t", "",
                                       "deviceIds", "topology", "nodes", "ID"};
    json_t *v, *c;
    unsigned i, n;
    char k[16];

    switch (depth > 3 ? 2 + rnd(seed, 6) : rnd(seed, 8)) {
    case 0:
        v = json_object();
        n = rnd(seed, 21);
        for (i = 0; i < n; i++) {
            c = random_json(seed, depth + 1);
            if (rnd(seed, 2))
                json_object_set_new(v, keys[rnd(seed, ARRAY_SIZE(keys))], c);
            else {
                snprintf(k, sizeof(k), "k%u", rnd(seed, 40));
                json_object_set_new(v, k, c);
            }
        }
        return v;
    case 1:
        v = json_array();
        n = rnd(seed, 5);
        for (i = 0; i < n; i++)
            json_array_append_new(v, random_json(seed, depth + 1));
        return v;
    case 2:
        return json_string(keys[rnd(seed, ARRAY_SIZE(keys))]);
    case 3:
        return json_integer((json_int_t)rnd(seed, 2000000) - 1000000);
    case 4:
        return json_real((double)rnd(seed, 100000) / 7.0);
    case 5:
        return json_true();
    case 6:
        return json_false();
    default:
        return json_null();
    }
}

static void test_sorted(void)
{
    static const char *const texts[] = {
        "{}",
        "[]",
        "\"x\"",
        "0",
        "-9223372036854775807",
        "1.5",
        "1e300",
        "true",
        "null",
        "[{\"name\":\"main\",\"devices\":[{\"resourceName\":\"vendor.com/gpu\","
        "\"deviceIds\":[\"gpu-1\",\"gpu-0\"],\"topology\":{\"nodes\":[{\"ID\":0}]}}]}]",
        "{\"b\":1,\"a\":{\"d\":[1,{\"f\":2,\"e\":3}],\"c\":\"\\u0001\\\"\"},\"\\u00e9\":0,"
        "\"A\":null}",
    };
    json_t *v;
    unsigned seed = 4242;
    size_t i;

    for (i = 0; i < ARRAY_SIZE(texts); i++) {
        v = json_loads(texts[i], JSON_DECODE_ANY, NULL);
        CHECK(v != NULL);
        if (v)
            check_sorted(v);
        json_decref(v);
    }
    /* a string and a key with a NUL byte go through jansson itself */
    v = json_pack("{s:s#}", "k", "a\0b", (size_t)3);
    json_object_setn_new(v, "n\0ul", 4, json_integer(1));
    json_object_set_new(v, "n", json_integer(2));
    check_sorted(v);
    json_decref(v);
    v = json_pack("[s#,{s:s#}]", "a\0b", (size_t)3, "k", "\0", (size_t)1);
    check_sorted(v);
    json_decref(v);
    {
        struct jsonw w = JSONW_INIT;

        jsonw_sorted(&w, NULL); /* not a value: fails, as jsonw_json */
        CHECK_EQ_INT(jsonw_done(&w), ERR_NOMEM);
        CHECK(jsonw_detach(&w, NULL) == NULL);
    }
    for (i = 0; i < 3000; i++) {
        v = random_json(&seed, 0);
        check_sorted(v);
        json_decref(v);
    }
}

/* Many strings into one buffer, plain and escaped, across its growth: the
 * same bytes as jansson writes for each, one after the other. */
static void test_strings_appended(void)
{
    struct jsonw w = JSONW_INIT;
    struct strbuf want = STRBUF_INIT;
    char s[40], *one;
    int i;

    for (i = 0; i < 300; i++) {
        snprintf(s, sizeof(s), i % 7 ? "device-%d" : "quote\"%d\n", i);
        jsonw_str(&w, s);
        jsonw_lit(&w, ",");
        one = jansson_str(s);
        CHECK(one != NULL);
        CHECK_OK(strbuf_add(&want, one ? one : "", one ? strlen(one) : 0));
        CHECK_OK(strbuf_add(&want, ",", 1));
        free(one);
    }
    CHECK_OK(jsonw_done(&w));
    CHECK_EQ_INT(w.sb.len, want.len);
    CHECK_STREQ(w.sb.buf, want.buf);
    jsonw_release(&w);
    strbuf_release(&want);
}

/* A real reads back as the decimal it came from (JSONW_FLAGS), not as the
 * 17 digits of its nearest double. */
static void test_reals(void)
{
    static const struct {
        double v;
        const char *want;
    } cases[] = {{349 / 1000.0, "[0.349]"},
                 {0.1, "[0.1]"},
                 {1.5, "[1.5]"},
                 {-2.25e-7, "[-2.25e-7]"},
                 {123456789012.345, "[123456789012.345]"}};
    size_t i;

    for (i = 0; i < ARRAY_SIZE(cases); i++) {
        struct jsonw w = JSONW_INIT;
        json_t *a = json_pack("[f]", cases[i].v);
        char *got;

        jsonw_json(&w, a);
        got = jsonw_detach(&w, NULL);
        CHECK(got != NULL);
        if (got)
            CHECK_STREQ(got, cases[i].want);
        free(got);
        json_decref(a);
    }
}

TEST_MAIN(test_reserve, test_strings, test_strings_appended, test_strings_random,
          test_numbers_and_json, test_empty_and_release, test_sticky_error, test_sorted, test_reals)
