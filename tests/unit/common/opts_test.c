/* SPDX-License-Identifier: Apache-2.0 */
/* opts_test.c - the settings table through common/opts.h. */
#include "../../../common/common.h"
#include "../../../common/opts.h"
#include "../test.h"

#include <fcntl.h>
#include <unistd.h>

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
    {"addr", OPT_STR, offsetof(struct settings, addr), .check = has_colon},
    {"node_name", OPT_STR, offsetof(struct settings, name), .def = NULL},
    {"log_level", OPT_ENUM, offsetof(struct settings, mode), "|debug|info|warn|", .def = NULL},
    {"resync_period", OPT_DURATION, offsetof(struct settings, resync), .def = NULL},
    {"workers", OPT_COUNT, offsetof(struct settings, workers), .def = NULL},
    {"qps", OPT_NUMBER, offsetof(struct settings, qps), .def = NULL},
};

/* opts_set with its message copied to 'msg' (256 bytes). */
static err_t set(struct settings *s, const char *key, const char *value, char *msg)
{
    struct error e = {0};
    err_t rc = opts_set(table, ARRAY_SIZE(table), s, key, value, &e);

    str_copy(msg, 256, e.msg);
    CHECK_EQ_INT(e.code, rc);
    return rc;
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
    CHECK_HAS(msg, "allowed: debug, info, warn"); /* the choices, listed cleanly */
    CHECK(strchr(msg, '|') == NULL);
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
    CHECK_HAS(msg, "did you mean \"node_name\"?"); /* one edit away */
    msg[0] = '\0';
    CHECK_EQ_INT(set(&s, "node_nmae", "x", msg), ERR_INVAL);
    CHECK_HAS(msg, "did you mean \"node_name\"?");
    msg[0] = '\0';
    CHECK_EQ_INT(set(&s, "zzz", "x", msg), ERR_INVAL);
    CHECK(strstr(msg, "did you mean") == NULL);
    CHECK_EQ_INT(set(&s, "node_name_", "x", msg), ERR_INVAL);
    CHECK_EQ_INT(set(&s, "", "x", msg), ERR_INVAL);
    CHECK(s.name == NULL);
}

static void test_apply(void)
{
    struct settings s = {0};
    const char *const skip[] = {"kubeconfig", "listen", NULL};
    struct error e = {0};
    json_t *doc = json_pack("{s:s,s:s,s:s,s:i,s:f,s:s,s:i}", "node-name", "n7", "log_level", "warn",
                            "resync_period", "10s", "workers", 8, "qps", 2.5, "kubeconfig", "/x",
                            "listen", 99);

    CHECK(doc != NULL);
    CHECK_OK(opts_apply(table, ARRAY_SIZE(table), &s, doc, skip, &e));
    CHECK_STREQ(s.name, "n7");
    CHECK_STREQ(s.mode, "warn");
    CHECK_EQ_INT(s.resync, 10000);
    CHECK_EQ_INT(s.workers, 8);
    CHECK(s.qps == 2.5);
    json_decref(doc);

    /* one setting spelled both ways: refused, whichever comes first */
    doc = json_pack("{s:s,s:s}", "node_name", "a", "node-name", "b");
    CHECK_EQ_INT(opts_apply(table, ARRAY_SIZE(table), &s, doc, skip, &e), ERR_INVAL);
    CHECK(strstr(e.msg, "duplicate key") != NULL);
    json_decref(doc);

    /* numbers for durations (seconds) and numbers */
    doc = json_pack("{s:i,s:i}", "resync_period", 30, "qps", 50);
    CHECK_OK(opts_apply(table, ARRAY_SIZE(table), &s, doc, NULL, &e));
    CHECK_EQ_INT(s.resync, 30000);
    CHECK(s.qps == 50.0);
    json_decref(doc);

    /* a skipped key is not applied without the skip list */
    doc = json_pack("{s:s}", "kubeconfig", "/x");
    e = (struct error){0};
    CHECK_EQ_INT(opts_apply(table, ARRAY_SIZE(table), &s, doc, NULL, &e), ERR_INVAL);
    CHECK_HAS(e.msg, "kubeconfig");
    json_decref(doc);

    /* a bad number leaves the field */
    doc = json_pack("{s:i}", "workers", 0);
    CHECK_EQ_INT(opts_apply(table, ARRAY_SIZE(table), &s, doc, NULL, &e), ERR_INVAL);
    CHECK_EQ_INT(s.workers, 8);
    json_decref(doc);

    /* neither string nor number */
    doc = json_pack("{s:b}", "workers", 1);
    e = (struct error){0};
    CHECK_EQ_INT(opts_apply(table, ARRAY_SIZE(table), &s, doc, NULL, &e), ERR_INVAL);
    CHECK_HAS(e.msg, "workers");
    CHECK_HAS(e.msg, "string or a number");
    json_decref(doc);
    doc = json_pack("{s:[]}", "nosuch", 1);
    e = (struct error){0};
    CHECK_EQ_INT(opts_apply(table, ARRAY_SIZE(table), &s, doc, NULL, &e), ERR_INVAL);
    CHECK_HAS(e.msg, "unknown key");
    json_decref(doc);

    /* not a mapping */
    doc = json_array();
    CHECK_EQ_INT(opts_apply(table, ARRAY_SIZE(table), &s, doc, NULL, &e), ERR_INVAL);
    json_decref(doc);
    CHECK_EQ_INT(opts_apply(table, ARRAY_SIZE(table), &s, NULL, NULL, &e), ERR_INVAL);

    /* an empty mapping changes nothing */
    doc = json_object();
    CHECK_OK(opts_apply(table, ARRAY_SIZE(table), &s, doc, skip, &e));
    CHECK_STREQ(s.name, "n7");
    json_decref(doc);

    opts_release(table, ARRAY_SIZE(table), &s);
    CHECK(s.name == NULL && s.mode == NULL);
    CHECK_EQ_INT(s.workers, 8);                 /* non-string fields untouched */
    opts_release(table, ARRAY_SIZE(table), &s); /* twice is fine */
}

static void test_suggest(void)
{
    static const char *const flags[] = {"config",     "node-name", "listen",        "log-level",
                                        "log-format", "qps",       "metrics-listen"};
    size_t n = ARRAY_SIZE(flags);
    char long_typo[80];

    CHECK_STREQ(opts_suggest(flags, n, "node-nmae"), "node-name"); /* a swap is one edit */
    CHECK_STREQ(opts_suggest(flags, n, "node_name"), "node-name");
    CHECK_STREQ(opts_suggest(flags, n, "nodename"), "node-name");
    CHECK_STREQ(opts_suggest(flags, n, "lisen"), "listen");
    CHECK_STREQ(opts_suggest(flags, n, "log-levle"), "log-level");
    CHECK_STREQ(opts_suggest(flags, n, "log-lvl"), "log-level"); /* two deletions */
    CHECK_STREQ(opts_suggest(flags, n, "metrics-listn"), "metrics-listen");
    CHECK_STREQ(opts_suggest(flags, n, "qsp"), "qps"); /* short: one edit */
    CHECK(opts_suggest(flags, n, "qq") == NULL);       /* short: two edits is too far */
    CHECK(opts_suggest(flags, n, "kubeconfig") == NULL);
    CHECK(opts_suggest(flags, n, "") == NULL);
    CHECK(opts_suggest(flags, 0, "listen") == NULL);
    CHECK_STREQ(opts_suggest(flags, n, "listen"), "listen"); /* exact: itself */
    memset(long_typo, 'a', sizeof(long_typo) - 1);
    long_typo[sizeof(long_typo) - 1] = '\0';
    CHECK(opts_suggest(flags, n, long_typo) == NULL); /* over 63 bytes */
}

static void test_format_value(void)
{
    struct settings s = {0};
    char msg[256], v[64];

    opts_format_value(&table[1], &s, v, sizeof(v));
    CHECK_STREQ(v, "(none)");
    CHECK_OK(set(&s, "node_name", "n1", msg));
    opts_format_value(&table[1], &s, v, sizeof(v));
    CHECK_STREQ(v, "n1");
    CHECK_OK(set(&s, "resync_period", "90d", msg));
    opts_format_value(&table[3], &s, v, sizeof(v));
    CHECK_STREQ(v, "90d");
    CHECK_OK(set(&s, "resync_period", "1m30s", msg));
    opts_format_value(&table[3], &s, v, sizeof(v));
    CHECK_STREQ(v, "90s");
    CHECK_OK(set(&s, "resync_period", "1500ms", msg));
    opts_format_value(&table[3], &s, v, sizeof(v));
    CHECK_STREQ(v, "1500ms");
    CHECK_OK(set(&s, "workers", "40", msg));
    opts_format_value(&table[4], &s, v, sizeof(v));
    CHECK_STREQ(v, "40");
    CHECK_OK(set(&s, "qps", "2.5", msg));
    opts_format_value(&table[5], &s, v, sizeof(v));
    CHECK_STREQ(v, "2.5");
    opts_release(table, ARRAY_SIZE(table), &s);
}

/* ---- defaults and opts_load ---- */

struct app {
    char *node;       /* env, else host name */
    char *sock;       /* a plain default */
    char *url;        /* no default */
    uint64_t every;   /* a duration */
    double qps;       /* a number */
    char *log_format; /* OPTS_LOG */
    char *log_level;  /* OPTS_LOG */
};

#define APP(f) offsetof(struct app, f)

static const struct opt app_table[] = {
    {"node_name", OPT_STR, APP(node), .env = "OPTS_TEST_NODE", .def_host = true},
    {"sock", OPT_STR, APP(sock), .def = "/run/x.sock"},
    {"url", OPT_STR, APP(url), .def = NULL},
    {"every", OPT_DURATION, APP(every), .def = "5m"},
    {"qps", OPT_NUMBER, APP(qps), .def = "20"},
    OPTS_LOG(struct app),
};

static bool app_once;

static const struct opts_spec app_spec = {
    "opts-test", "usage: opts-test [flags]\n", app_table, ARRAY_SIZE(app_table), &app_once, NULL};

static void test_defaults(void)
{
    struct app a = {0};
    struct error e = {0};

    unsetenv("OPTS_TEST_NODE");
    CHECK_OK(opts_defaults(app_table, ARRAY_SIZE(app_table), &a, &e));
    CHECK(a.node != NULL && a.node[0] != '\0'); /* the host's name */
    CHECK_STREQ(a.sock, "/run/x.sock");
    CHECK(a.url == NULL);
    CHECK_EQ_INT(a.every, 300000);
    CHECK(a.qps == 20.0);
    CHECK_STREQ(a.log_format, "text");
    CHECK_STREQ(a.log_level, "info");
    setenv("OPTS_TEST_NODE", "", 1); /* empty: as if unset */
    CHECK_OK(opts_defaults(app_table, ARRAY_SIZE(app_table), &a, &e));
    CHECK(a.node != NULL && a.node[0] != '\0');
    setenv("OPTS_TEST_NODE", "n-env", 1);
    CHECK_OK(opts_defaults(app_table, ARRAY_SIZE(app_table), &a, &e));
    CHECK_STREQ(a.node, "n-env");
    unsetenv("OPTS_TEST_NODE");
    opts_release(app_table, ARRAY_SIZE(app_table), &a);
}

static char tmpdir[] = "/tmp/opts_test.XXXXXX";

/* Run opts_load on 'args' (NULL-terminated) with stdout and stderr in
 * files; their text goes to 'out' and 'err'. */
static enum opts_next load(struct app *a, const char *const *args, char *out, char *err, size_t cap)
{
    char *argv[16], path[2][256], *buf;
    int argc = 0, saved[2], i, fd;
    enum opts_next next;
    size_t n;
    FILE *f;

    argv[argc++] = (char *)app_spec.prog;
    while (*args && argc < 15)
        argv[argc++] = (char *)*args++;
    argv[argc] = NULL;
    fflush(stdout);
    fflush(stderr);
    for (i = 0; i < 2; i++) {
        snprintf(path[i], sizeof(path[i]), "%s/%s", tmpdir, i ? "err" : "out");
        saved[i] = dup(i + 1);
        fd = open(path[i], O_WRONLY | O_CREAT | O_TRUNC, 0600);
        dup2(fd, i + 1);
        close(fd);
    }
    memset(a, 0, sizeof(*a));
    app_once = false;
    next = opts_load(&app_spec, a, argc, argv);
    fflush(stdout);
    fflush(stderr);
    for (i = 0; i < 2; i++) {
        dup2(saved[i], i + 1);
        close(saved[i]);
        buf = i ? err : out;
        f = fopen(path[i], "r");
        n = f ? fread(buf, 1, cap - 1, f) : 0;
        buf[n] = '\0';
        if (f)
            fclose(f);
        unlink(path[i]);
    }
    return next;
}

static void write_config(const char *text, char *path, size_t cap)
{
    FILE *f;

    snprintf(path, cap, "%s/c.yaml", tmpdir);
    f = fopen(path, "w");
    CHECK(f != NULL);
    if (f) {
        fputs(text, f);
        fclose(f);
    }
}

/* Defaults, then the file, then the flags: the last word wins. */
static void test_load_order(void)
{
    char out[4096], err[4096], cfg[256];
    struct app a;

    setenv("OPTS_TEST_NODE", "n-env", 1);
    write_config("node_name: n-file\nsock: /file.sock\nqps: 7\n", cfg, sizeof(cfg));
    CHECK_EQ_INT(load(&a, (const char *const[]){"--qps", "9", "--config", cfg, "--once", NULL}, out,
                      err, sizeof(out)),
                 OPTS_RUN);
    CHECK_STREQ(a.node, "n-file"); /* the file wins over the environment */
    CHECK_STREQ(a.sock, "/file.sock");
    CHECK(a.qps == 9.0); /* the flag wins over the file, wherever it stands */
    CHECK_EQ_INT(a.every, 300000);
    CHECK(app_once);
    CHECK_STREQ(out, "");
    CHECK_STREQ(err, "");
    opts_release(app_table, ARRAY_SIZE(app_table), &a);
    CHECK_EQ_INT(load(&a, (const char *const[]){NULL}, out, err, sizeof(out)), OPTS_RUN);
    CHECK_STREQ(a.node, "n-env");
    CHECK(!app_once);
    opts_release(app_table, ARRAY_SIZE(app_table), &a);
    unsetenv("OPTS_TEST_NODE");
    unlink(cfg);
}

/* --help shows the defaults (not the file's values); --version; neither
 * reads the file. */
static void test_load_help(void)
{
    char out[4096], err[4096], cfg[256];
    struct app a;

    setenv("OPTS_TEST_NODE", "n-env", 1);
    write_config("qps: 7\n", cfg, sizeof(cfg));
    CHECK_EQ_INT(
        load(&a, (const char *const[]){"--config", cfg, "--help", NULL}, out, err, sizeof(out)),
        OPTS_EXIT_OK);
    CHECK_STREQ(out, "usage: opts-test [flags]\n"
                     "Defaults:\n"
                     "  --node-name                n-env\n"
                     "  --sock                     /run/x.sock\n"
                     "  --url                      (none)\n"
                     "  --every                    5m\n"
                     "  --qps                      20\n"
                     "  --log-format               text\n"
                     "  --log-level                info\n");
    CHECK_STREQ(err, "");
    opts_release(app_table, ARRAY_SIZE(app_table), &a);
    CHECK_EQ_INT(load(&a, (const char *const[]){"-V", NULL}, out, err, sizeof(out)), OPTS_EXIT_OK);
    CHECK_STREQ(out, "opts-test " PODRES_VERSION "\n");
    opts_release(app_table, ARRAY_SIZE(app_table), &a);
    unsetenv("OPTS_TEST_NODE");
    unlink(cfg);
}

/* What is wrong is said once on stderr, naming the flag, key or file. */
static void test_load_errors(void)
{
    char out[4096], err[4096], cfg[256];
    struct app a;

    CHECK_EQ_INT(load(&a, (const char *const[]){"--evrey", "1s", NULL}, out, err, sizeof(out)),
                 OPTS_EXIT_FAIL);
    CHECK_STREQ(err, "opts-test: unknown flag '--evrey'; did you mean --every?\n");
    opts_release(app_table, ARRAY_SIZE(app_table), &a);
    CHECK_EQ_INT(load(&a, (const char *const[]){"--qps", "0", NULL}, out, err, sizeof(out)),
                 OPTS_EXIT_FAIL);
    CHECK_STREQ(err, "opts-test: flag --qps: key \"qps\": bad value \"0\"\n");
    opts_release(app_table, ARRAY_SIZE(app_table), &a);
    CHECK_EQ_INT(load(&a, (const char *const[]){"--url", NULL}, out, err, sizeof(out)),
                 OPTS_EXIT_FAIL);
    CHECK_STREQ(err, "opts-test: flag '--url' needs a value\n");
    opts_release(app_table, ARRAY_SIZE(app_table), &a);
    CHECK_EQ_INT(load(&a, (const char *const[]){"stray", NULL}, out, err, sizeof(out)),
                 OPTS_EXIT_FAIL);
    CHECK_STREQ(err, "opts-test: unexpected argument 'stray'\nusage: opts-test [flags]\n");
    opts_release(app_table, ARRAY_SIZE(app_table), &a);
    write_config("evry: 1s\n", cfg, sizeof(cfg));
    CHECK_EQ_INT(load(&a, (const char *const[]){"--config", cfg, NULL}, out, err, sizeof(out)),
                 OPTS_EXIT_FAIL);
    CHECK(strstr(err, "opts-test: config file '") == err);
    CHECK_HAS(err, cfg);
    CHECK_HAS(err, "unknown key \"evry\"; did you mean \"every\"?");
    opts_release(app_table, ARRAY_SIZE(app_table), &a);
    unlink(cfg);
    CHECK_EQ_INT(load(&a, (const char *const[]){"--config", cfg, NULL}, out, err, sizeof(out)),
                 OPTS_EXIT_FAIL);
    CHECK_HAS(err, "cannot open");
    opts_release(app_table, ARRAY_SIZE(app_table), &a);
    CHECK_STREQ(out, "");
}

static void setup(void)
{
    CHECK(mkdtemp(tmpdir) != NULL);
}

static void teardown(void)
{
    CHECK_OK(rmdir(tmpdir));
}

TEST_MAIN(test_str, test_check, test_enum, test_duration, test_count, test_number, test_unknown,
          test_apply, test_suggest, test_format_value, setup, test_defaults, test_load_order,
          test_load_help, test_load_errors, teardown)
