/* SPDX-License-Identifier: Apache-2.0 */
/* opts_test.c - the settings table through common/opts.h. */
#include "../../../common/common.h"
#include "../../../common/opts.h"
#include "../test.h"

#define CHECK_HAS(msg, part)                                                                       \
    TEST_REPORT(strstr((msg), (part)) != NULL, "\"%s\" lacks \"%s\"", (msg), (part))

struct settings {
    char *name;       /* OPT_STR */
    char *addr;       /* OPT_STR with a check */
    char *mode;       /* OPT_ENUM */
    uint64_t resync;  /* OPT_DURATION, ms */
    uint64_t workers; /* OPT_COUNT */
    double qps;       /* OPT_NUMBER */
};

/* Good when it has a ':' in it. */
static const char *has_colon(const char *v)
{
    return strchr(v, ':') ? NULL : "needs a colon";
}

static const struct opt table[] = {
    {"addr", OPT_STR, offsetof(struct settings, addr), NULL, has_colon},
    {"node_name", OPT_STR, offsetof(struct settings, name), NULL, NULL},
    {"log_level", OPT_ENUM, offsetof(struct settings, mode), "|debug|info|warn|", NULL},
    {"resync_period", OPT_DURATION, offsetof(struct settings, resync), NULL, NULL},
    {"workers", OPT_COUNT, offsetof(struct settings, workers), NULL, NULL},
    {"qps", OPT_NUMBER, offsetof(struct settings, qps), NULL, NULL},
};

static err_t set(struct settings *s, const char *key, const char *value, char *msg)
{
    return opts_set(table, ARRAY_SIZE(table), s, key, value, msg, 256);
}

static void test_str(void)
{
    struct settings s = {0};
    char msg[256];

    CHECK_OK(set(&s, "node_name", "n1", msg));
    CHECK_STREQ(s.name, "n1");
    CHECK_OK(set(&s, "node-name", "n2", msg)); /* '-' spelling; old value freed */
    CHECK_STREQ(s.name, "n2");
    msg[0] = '\0';
    CHECK_EQ_INT(set(&s, "node-name", "", msg), ERR_INVAL); /* empty is a bad value */
    CHECK_STREQ(s.name, "n2");
    CHECK_HAS(msg, "node_name");
    opts_release(table, ARRAY_SIZE(table), &s);
    CHECK(s.name == NULL);
}

/* A check says why a value is bad; the key, the value and the reason are
 * named and the field keeps its value. Empty stays "a bad value". */
static void test_check(void)
{
    struct settings s = {0};
    char msg[256];

    CHECK_OK(set(&s, "addr", "a:1", msg));
    CHECK_STREQ(s.addr, "a:1");
    msg[0] = '\0';
    CHECK_EQ_INT(set(&s, "addr", "a1", msg), ERR_INVAL);
    CHECK_STREQ(s.addr, "a:1");
    CHECK_HAS(msg, "\"addr\"");
    CHECK_HAS(msg, "\"a1\"");
    CHECK_HAS(msg, "needs a colon");
    msg[0] = '\0';
    CHECK_EQ_INT(set(&s, "addr", "", msg), ERR_INVAL);
    CHECK_HAS(msg, "bad value");
    opts_release(table, ARRAY_SIZE(table), &s);
    CHECK(s.addr == NULL);
}

static void test_enum(void)
{
    struct settings s = {0};
    char msg[256];

    CHECK_OK(set(&s, "log-level", "info", msg));
    CHECK_STREQ(s.mode, "info");
    CHECK_OK(set(&s, "log_level", "debug", msg));
    CHECK_STREQ(s.mode, "debug");
    msg[0] = '\0';
    CHECK_EQ_INT(set(&s, "log_level", "verbose", msg), ERR_INVAL);
    CHECK_STREQ(s.mode, "debug");
    CHECK_HAS(msg, "log_level");
    CHECK_HAS(msg, "verbose");
    CHECK_HAS(msg, "|debug|info|warn|");
    CHECK_EQ_INT(set(&s, "log_level", "", msg), ERR_INVAL);
    CHECK_EQ_INT(set(&s, "log_level", "debug|info", msg), ERR_INVAL); /* no '|' games */
    CHECK_EQ_INT(set(&s, "log_level", "inf", msg), ERR_INVAL);        /* whole choices only */
    CHECK_EQ_INT(set(&s, "log_level", "nfo", msg), ERR_INVAL);
    CHECK_STREQ(s.mode, "debug");
    opts_release(table, ARRAY_SIZE(table), &s);
    CHECK(s.mode == NULL);
}

static void test_duration(void)
{
    struct settings s = {0};
    char msg[256];

    CHECK_OK(set(&s, "resync_period", "1500ms", msg));
    CHECK_EQ_INT(s.resync, 1500);
    CHECK_OK(set(&s, "resync-period", "1m30s", msg));
    CHECK_EQ_INT(s.resync, 90000);
    CHECK_OK(set(&s, "resync-period", "2", msg)); /* bare seconds */
    CHECK_EQ_INT(s.resync, 2000);
    msg[0] = '\0';
    CHECK_EQ_INT(set(&s, "resync_period", "0s", msg), ERR_INVAL); /* must be > 0 */
    CHECK_EQ_INT(s.resync, 2000);
    CHECK_HAS(msg, "resync_period");
    CHECK_HAS(msg, "0s");
    CHECK_EQ_INT(set(&s, "resync_period", "-1s", msg), ERR_INVAL);
    CHECK_EQ_INT(set(&s, "resync_period", "soon", msg), ERR_INVAL);
    CHECK_EQ_INT(set(&s, "resync_period", "", msg), ERR_INVAL);
    CHECK_EQ_INT(s.resync, 2000);
}

static void test_count(void)
{
    struct settings s = {0};
    char msg[256];

    CHECK_OK(set(&s, "workers", "4", msg));
    CHECK_EQ_INT(s.workers, 4);
    CHECK_OK(set(&s, "workers", "1", msg));
    CHECK_EQ_INT(s.workers, 1);
    CHECK_OK(set(&s, "workers", "100000000", msg));
    CHECK_EQ_INT(s.workers, 100000000);
    msg[0] = '\0';
    CHECK_EQ_INT(set(&s, "workers", "0", msg), ERR_INVAL);
    CHECK_HAS(msg, "workers");
    CHECK_EQ_INT(set(&s, "workers", "100000001", msg), ERR_INVAL);
    CHECK_EQ_INT(set(&s, "workers", "-2", msg), ERR_INVAL);
    CHECK_EQ_INT(set(&s, "workers", "3x", msg), ERR_INVAL);
    CHECK_EQ_INT(set(&s, "workers", "", msg), ERR_INVAL);
    CHECK_EQ_INT(s.workers, 100000000);
}

static void test_number(void)
{
    struct settings s = {0};
    char msg[256];

    CHECK_OK(set(&s, "qps", "20", msg));
    CHECK(s.qps == 20.0);
    CHECK_OK(set(&s, "qps", "0.5", msg));
    CHECK(s.qps == 0.5);
    CHECK_OK(set(&s, "qps", "1e3", msg));
    CHECK(s.qps == 1000.0);
    msg[0] = '\0';
    CHECK_EQ_INT(set(&s, "qps", "0", msg), ERR_INVAL);
    CHECK_HAS(msg, "qps");
    CHECK_EQ_INT(set(&s, "qps", "-1", msg), ERR_INVAL);
    CHECK_EQ_INT(set(&s, "qps", "nan", msg), ERR_INVAL);
    CHECK_EQ_INT(set(&s, "qps", "inf", msg), ERR_INVAL);
    CHECK_EQ_INT(set(&s, "qps", "5 ", msg), ERR_INVAL);
    CHECK_EQ_INT(set(&s, "qps", "fast", msg), ERR_INVAL);
    CHECK_EQ_INT(set(&s, "qps", "", msg), ERR_INVAL);
    CHECK(s.qps == 1000.0);
}

static void test_unknown(void)
{
    struct settings s = {0};
    char msg[256];

    msg[0] = '\0';
    CHECK_EQ_INT(set(&s, "nodename", "x", msg), ERR_INVAL);
    CHECK_HAS(msg, "unknown key");
    CHECK_HAS(msg, "nodename");
    CHECK_EQ_INT(set(&s, "node_name_", "x", msg), ERR_INVAL);
    CHECK_EQ_INT(set(&s, "", "x", msg), ERR_INVAL);
    CHECK(s.name == NULL);
}

static void test_apply(void)
{
    struct settings s = {0};
    const char *const skip[] = {"kubeconfig", "listen", NULL};
    char msg[256];
    json_t *doc = json_pack("{s:s,s:s,s:s,s:i,s:f,s:s,s:i}", "node-name", "n7", "log_level", "warn",
                            "resync_period", "10s", "workers", 8, "qps", 2.5, "kubeconfig", "/x",
                            "listen", 99);

    CHECK(doc != NULL);
    CHECK_OK(opts_apply(table, ARRAY_SIZE(table), &s, doc, skip, msg, sizeof(msg)));
    CHECK_STREQ(s.name, "n7");
    CHECK_STREQ(s.mode, "warn");
    CHECK_EQ_INT(s.resync, 10000);
    CHECK_EQ_INT(s.workers, 8);
    CHECK(s.qps == 2.5);
    json_decref(doc);

    /* one setting spelled both ways: refused, whichever comes first */
    doc = json_pack("{s:s,s:s}", "node_name", "a", "node-name", "b");
    CHECK_EQ_INT(opts_apply(table, ARRAY_SIZE(table), &s, doc, skip, msg, sizeof(msg)), ERR_INVAL);
    CHECK(strstr(msg, "duplicate key") != NULL);
    json_decref(doc);

    /* numbers for durations (seconds) and numbers */
    doc = json_pack("{s:i,s:i}", "resync_period", 30, "qps", 50);
    CHECK_OK(opts_apply(table, ARRAY_SIZE(table), &s, doc, NULL, msg, sizeof(msg)));
    CHECK_EQ_INT(s.resync, 30000);
    CHECK(s.qps == 50.0);
    json_decref(doc);

    /* a skipped key is not applied without the skip list */
    doc = json_pack("{s:s}", "kubeconfig", "/x");
    msg[0] = '\0';
    CHECK_EQ_INT(opts_apply(table, ARRAY_SIZE(table), &s, doc, NULL, msg, sizeof(msg)), ERR_INVAL);
    CHECK_HAS(msg, "kubeconfig");
    json_decref(doc);

    /* a bad number leaves the field */
    doc = json_pack("{s:i}", "workers", 0);
    CHECK_EQ_INT(opts_apply(table, ARRAY_SIZE(table), &s, doc, NULL, msg, sizeof(msg)), ERR_INVAL);
    CHECK_EQ_INT(s.workers, 8);
    json_decref(doc);

    /* neither string nor number */
    doc = json_pack("{s:b}", "workers", 1);
    msg[0] = '\0';
    CHECK_EQ_INT(opts_apply(table, ARRAY_SIZE(table), &s, doc, NULL, msg, sizeof(msg)), ERR_INVAL);
    CHECK_HAS(msg, "workers");
    CHECK_HAS(msg, "string or a number");
    json_decref(doc);
    doc = json_pack("{s:[]}", "nosuch", 1);
    msg[0] = '\0';
    CHECK_EQ_INT(opts_apply(table, ARRAY_SIZE(table), &s, doc, NULL, msg, sizeof(msg)), ERR_INVAL);
    CHECK_HAS(msg, "unknown key");
    json_decref(doc);

    /* not a mapping */
    doc = json_array();
    CHECK_EQ_INT(opts_apply(table, ARRAY_SIZE(table), &s, doc, NULL, msg, sizeof(msg)), ERR_INVAL);
    json_decref(doc);
    CHECK_EQ_INT(opts_apply(table, ARRAY_SIZE(table), &s, NULL, NULL, msg, sizeof(msg)), ERR_INVAL);

    /* an empty mapping changes nothing */
    doc = json_object();
    CHECK_OK(opts_apply(table, ARRAY_SIZE(table), &s, doc, skip, msg, sizeof(msg)));
    CHECK_STREQ(s.name, "n7");
    json_decref(doc);

    opts_release(table, ARRAY_SIZE(table), &s);
    CHECK(s.name == NULL && s.mode == NULL);
    CHECK_EQ_INT(s.workers, 8);                 /* non-string fields untouched */
    opts_release(table, ARRAY_SIZE(table), &s); /* twice is fine */
}

TEST_MAIN(test_str, test_check, test_enum, test_duration, test_count, test_number, test_unknown,
          test_apply)
