/* SPDX-License-Identifier: Apache-2.0 */
/* cfg_test.c - YAML to JSON, durations and integers through cfg.h. */
#include "../../../common/common.h"
#include "../../../common/cfg.h"
#include "../test.h"

#include <unistd.h>

/* cfg_yaml_parse with its message copied to 'msg'. */
static err_t parse(const char *yaml, json_t **out, char *msg, size_t cap)
{
    struct error e = {0};
    err_t rc = cfg_yaml_parse(yaml, strlen(yaml), out, &e);

    str_copy(msg, cap, e.msg);
    CHECK_EQ_INT(e.code, rc);
    return rc;
}

static void test_yaml_scalars(void)
{
    char msg[256] = "";
    json_t *doc = NULL;

    CHECK_OK(parse("i: 42\nn: -7\nt: true\nf: false\nz: null\ntl: ~\ne:\ns: hello\n"
                   "q: \"42\"\nsq: 'true'\nd: 1.5\nh: 0x10\nlist: [1, two]\n",
                   &doc, msg, sizeof(msg)));
    CHECK(json_is_integer(json_object_get(doc, "i")));
    CHECK_EQ_INT(json_integer_value(json_object_get(doc, "i")), 42);
    CHECK_EQ_INT(json_integer_value(json_object_get(doc, "n")), -7);
    CHECK(json_is_true(json_object_get(doc, "t")));
    CHECK(json_is_false(json_object_get(doc, "f")));
    CHECK(json_is_null(json_object_get(doc, "z")));
    CHECK(json_is_null(json_object_get(doc, "tl")));
    CHECK(json_is_null(json_object_get(doc, "e")));
    CHECK_STREQ(json_string_value(json_object_get(doc, "s")), "hello");
    /* quoted scalars stay strings */
    CHECK_STREQ(json_string_value(json_object_get(doc, "q")), "42");
    CHECK_STREQ(json_string_value(json_object_get(doc, "sq")), "true");
    /* not integers: strings */
    CHECK_STREQ(json_string_value(json_object_get(doc, "d")), "1.5");
    CHECK_STREQ(json_string_value(json_object_get(doc, "h")), "0x10");
    CHECK_EQ_INT(json_array_size(json_object_get(doc, "list")), 2);
    CHECK_EQ_INT(json_integer_value(json_array_get(json_object_get(doc, "list"), 0)), 1);
    CHECK_STREQ(json_string_value(json_array_get(json_object_get(doc, "list"), 1)), "two");
    json_decref(doc);
}

static void test_yaml_documents(void)
{
    char msg[256] = "";
    json_t *doc = NULL;

    CHECK_OK(parse("", &doc, msg, sizeof(msg)));
    CHECK(json_is_object(doc) && json_object_size(doc) == 0);
    json_decref(doc);
    doc = NULL;
    CHECK_OK(parse("# only a comment\n", &doc, msg, sizeof(msg)));
    CHECK(json_is_object(doc) && json_object_size(doc) == 0);
    json_decref(doc);
    doc = NULL;
    CHECK_OK(parse("a:\n  b:\n    - {c: 1}\n", &doc, msg, sizeof(msg)));
    CHECK_EQ_INT(json_integer_value(json_object_get(
                     json_array_get(json_object_get(json_object_get(doc, "a"), "b"), 0), "c")),
                 1);
    json_decref(doc);
    doc = NULL;
    CHECK_EQ_INT(parse("a: 1\n---\nb: 2\n", &doc, msg, sizeof(msg)), ERR_INVAL);
    CHECK(doc == NULL);
    CHECK(strstr(msg, "one YAML document") != NULL);
}

static void test_yaml_refusals(void)
{
    char msg[256] = "", deep[CFG_MAX_DEPTH * 2 + 8], ok[CFG_MAX_DEPTH * 2 + 8];
    json_t *doc = NULL;
    int i;

    msg[0] = '\0';
    CHECK_EQ_INT(parse("a: &x 1\nb: *x\n", &doc, msg, sizeof(msg)), ERR_INVAL);
    CHECK(doc == NULL);
    CHECK(strstr(msg, "alias") != NULL);
    CHECK(strstr(msg, "line 2") != NULL);

    msg[0] = '\0';
    CHECK_EQ_INT(parse("a: 1\nb: 2\na: 3\n", &doc, msg, sizeof(msg)), ERR_INVAL);
    CHECK(doc == NULL);
    CHECK(strstr(msg, "duplicate key") != NULL);
    CHECK(strstr(msg, "line 3") != NULL);

    msg[0] = '\0';
    CHECK_EQ_INT(parse("a: [1, 2\n", &doc, msg, sizeof(msg)), ERR_INVAL);
    CHECK(doc == NULL);
    CHECK(strstr(msg, "line ") != NULL && strstr(msg, "column ") != NULL);

    msg[0] = '\0';
    CHECK_EQ_INT(parse("? [a]\n: b\n", &doc, msg, sizeof(msg)), ERR_INVAL);
    CHECK(doc == NULL);

    /* CFG_MAX_DEPTH nested flow sequences pass, one more fails */
    for (i = 0; i < CFG_MAX_DEPTH; i++) {
        ok[i] = '[';
        ok[CFG_MAX_DEPTH + i] = ']';
    }
    ok[2 * CFG_MAX_DEPTH] = '\0';
    CHECK_OK(parse(ok, &doc, msg, sizeof(msg)));
    json_decref(doc);
    doc = NULL;
    for (i = 0; i <= CFG_MAX_DEPTH; i++) {
        deep[i] = '[';
        deep[CFG_MAX_DEPTH + 1 + i] = ']';
    }
    deep[2 * CFG_MAX_DEPTH + 2] = '\0';
    msg[0] = '\0';
    CHECK_EQ_INT(parse(deep, &doc, msg, sizeof(msg)), ERR_INVAL);
    CHECK(doc == NULL);
    CHECK(strstr(msg, "nesting") != NULL);
}

static void test_yaml_load(void)
{
    char dir[] = "/tmp/cfg_test.XXXXXX", path[256];
    struct error e = {0};
    json_t *doc = NULL;
    FILE *f;

    CHECK(mkdtemp(dir) != NULL);
    snprintf(path, sizeof(path), "%s/c.yaml", dir);
    f = fopen(path, "w");
    CHECK(f != NULL);
    if (f) {
        fputs("history: 5\nsource: api\n", f);
        fclose(f);
    }
    CHECK_OK(cfg_yaml_load(path, &doc, &e));
    CHECK_EQ_INT(json_integer_value(json_object_get(doc, "history")), 5);
    CHECK_STREQ(json_string_value(json_object_get(doc, "source")), "api");
    json_decref(doc);
    doc = NULL;
    unlink(path);
    CHECK_EQ_INT(cfg_yaml_load(path, &doc, &e), ERR_IO);
    CHECK(doc == NULL);
    CHECK_EQ_INT(e.code, ERR_IO);
    CHECK(strstr(e.msg, "cannot open") != NULL);
    rmdir(dir);
}

static void test_duration(void)
{
    uint64_t ms = 7;

    CHECK_OK(cfg_parse_duration("1500ms", &ms));
    CHECK_EQ_INT(ms, 1500);
    CHECK_OK(cfg_parse_duration("2s", &ms));
    CHECK_EQ_INT(ms, 2000);
    CHECK_OK(cfg_parse_duration("1m30s", &ms));
    CHECK_EQ_INT(ms, 90000);
    CHECK_OK(cfg_parse_duration("10m", &ms));
    CHECK_EQ_INT(ms, 600000);
    CHECK_OK(cfg_parse_duration("1h", &ms));
    CHECK_EQ_INT(ms, 3600000);
    CHECK_OK(cfg_parse_duration("1h2m3s4ms", &ms));
    CHECK_EQ_INT(ms, 3723004);
    CHECK_OK(cfg_parse_duration("5", &ms));
    CHECK_EQ_INT(ms, 5000);
    CHECK_OK(cfg_parse_duration("0s", &ms));
    CHECK_EQ_INT(ms, 0);
    ms = 7;
    CHECK_EQ_INT(cfg_parse_duration("-3s", &ms), ERR_INVAL);
    CHECK_EQ_INT(cfg_parse_duration("", &ms), ERR_INVAL);
    CHECK_EQ_INT(cfg_parse_duration(NULL, &ms), ERR_INVAL);
    CHECK_EQ_INT(cfg_parse_duration("+3s", &ms), ERR_INVAL);
    CHECK_EQ_INT(cfg_parse_duration("3x", &ms), ERR_INVAL);
    CHECK_EQ_INT(cfg_parse_duration("s", &ms), ERR_INVAL);
    CHECK_EQ_INT(cfg_parse_duration("1s2", &ms), ERR_INVAL);
    CHECK_EQ_INT(cfg_parse_duration("1m 30s", &ms), ERR_INVAL);
    CHECK_EQ_INT(cfg_parse_duration("1.5s", &ms), ERR_INVAL);
    CHECK_EQ_INT(cfg_parse_duration("99999999999999999999s", &ms), ERR_INVAL);
    CHECK_EQ_INT(cfg_parse_duration("18446744073709551615h", &ms), ERR_INVAL);
    CHECK_EQ_INT(ms, 7); /* untouched on failure */
}

static void test_parse_int(void)
{
    long long v = 7;

    CHECK_OK(cfg_parse_int("42", 0, 100, &v));
    CHECK_EQ_INT(v, 42);
    CHECK_OK(cfg_parse_int("-5", -10, 10, &v));
    CHECK_EQ_INT(v, -5);
    CHECK_OK(cfg_parse_int("100", 0, 100, &v));
    CHECK_EQ_INT(v, 100);
    v = 7;
    CHECK_EQ_INT(cfg_parse_int("101", 0, 100, &v), ERR_INVAL);
    CHECK_EQ_INT(cfg_parse_int("-1", 0, 100, &v), ERR_INVAL);
    CHECK_EQ_INT(cfg_parse_int("", 0, 100, &v), ERR_INVAL);
    CHECK_EQ_INT(cfg_parse_int(NULL, 0, 100, &v), ERR_INVAL);
    CHECK_EQ_INT(cfg_parse_int("12abc", 0, 100, &v), ERR_INVAL);
    CHECK_EQ_INT(cfg_parse_int("1e2", 0, 1000, &v), ERR_INVAL);
    CHECK_EQ_INT(cfg_parse_int("99999999999999999999", 0, 100, &v), ERR_INVAL);
    CHECK_EQ_INT(v, 7); /* untouched on failure */
}

/* Regression (was a bug): a second document that starts with a directive is
 * refused, but its DOCUMENT-START event (holding the version/tag directives)
 * is never yaml_event_delete()d: LeakSanitizer reports a leak (common/cfg.c
 * document()). */
static void test_second_document_with_directive(void)
{
    char msg[256] = "";
    json_t *doc = NULL;

    CHECK_EQ_INT(parse("a: 1\n...\n%YAML 1.1\n---\nb: 2\n", &doc, msg, sizeof(msg)), ERR_INVAL);
    CHECK(doc == NULL);
    CHECK(strstr(msg, "one YAML document") != NULL);
}

TEST_MAIN(test_second_document_with_directive, test_yaml_scalars, test_yaml_documents,
          test_yaml_refusals, test_yaml_load, test_duration, test_parse_int)
