/* SPDX-License-Identifier: Apache-2.0 */
/* execcred_test.c - exec credential plugins through kube/execcred.h: the
 * block, the ExecCredential output, running a real command (/bin/sh) and
 * keeping its credential until it expires. */
#include "../../../common/common.h"
#include "../../../common/cfg.h"
#include "../../../kube/execcred.h"
#include "../test.h"

#include <unistd.h>

#define V1 "client.authentication.k8s.io/v1"

#define CHECK_HAS(msg, part)                                                                       \
    TEST_REPORT(strstr((msg), (part)) != NULL, "\"%s\" lacks \"%s\"", (msg), (part))

/* Parse YAML 'text' as an exec block. */
static err_t cfg_of(const char *text, const char *dir, struct execcred_cfg **out, struct error *e)
{
    json_t *doc = NULL;
    err_t rc = cfg_yaml_parse(text, strlen(text), &doc, e);

    if (!rc)
        rc = execcred_cfg_parse(doc, dir, out, e);
    json_decref(doc);
    return rc;
}

static void test_cfg(void)
{
    struct execcred_cfg *c = NULL;
    struct error err = {0};

    CHECK_OK(cfg_of("command: bin/get-token\napiVersion: " V1 "\n"
                    "args: [--ttl, 5, true]\nenv: [{name: A, value: 1}, {name: B}]\n"
                    "interactiveMode: Never\ninstallHint: apt install x\n",
                    "/etc/kc", &c, &err));
    if (c) {
        CHECK_STREQ(c->command, "/etc/kc/bin/get-token"); /* relative to the file */
        CHECK_STREQ(c->argv[0], "/etc/kc/bin/get-token");
        CHECK_STREQ(c->argv[1], "--ttl");
        CHECK_STREQ(c->argv[2], "5"); /* YAML's plain scalars, as written */
        CHECK_STREQ(c->argv[3], "true");
        CHECK(c->argv[4] == NULL);
        CHECK_EQ_INT(c->nenv, 2);
        CHECK_STREQ(c->env[0], "A=1");
        CHECK_STREQ(c->env[1], "B=");
        CHECK_EQ_INT(c->interactive, EXECCRED_NEVER);
        CHECK_STREQ(c->install_hint, "apt install x");
    }
    execcred_cfg_free(c);
    c = NULL;
    CHECK_OK(cfg_of("command: aws\napiVersion: client.authentication.k8s.io/v1beta1\n", "/etc/kc",
                    &c, &err));
    if (c) {
        CHECK_STREQ(c->command, "aws"); /* a bare name: $PATH */
        CHECK_EQ_INT(c->interactive, EXECCRED_IF_AVAILABLE);
    }
    execcred_cfg_free(c);
    execcred_cfg_free(NULL);
}

static void test_cfg_bad(void)
{
    static const char *const bad[][2] = {
        {"apiVersion: " V1 "\n", "command is missing"},
        {"command: x\n", "apiVersion must be"},
        {"command: x\napiVersion: client.authentication.k8s.io/v1alpha1\n", "apiVersion must be"},
        {"command: x\napiVersion: " V1 "\nargs: x\n", "args must be a list"},
        {"command: x\napiVersion: " V1 "\nargs: [[a]]\n", "args[0] must be a string"},
        {"command: x\napiVersion: " V1 "\nenv: [{value: a}]\n", "env[0] needs a name"},
        {"command: x\napiVersion: " V1 "\nenv: [{name: 'A=B'}]\n", "env[0] needs a name"},
        {"command: x\napiVersion: " V1 "\ninteractiveMode: Sometimes\n", "interactiveMode"},
    };
    struct execcred_cfg *c = NULL;
    struct error err = {0};
    size_t i;

    for (i = 0; i < ARRAY_SIZE(bad); i++) {
        err = (struct error){0};
        CHECK_EQ_INT(cfg_of(bad[i][0], NULL, &c, &err), ERR_INVAL);
        CHECK_HAS(err.msg, bad[i][1]);
        CHECK(c == NULL);
    }
}

static void test_parse_time(void)
{
    time_t t = 7;

    CHECK_OK(execcred_parse_time("1970-01-01T00:01:00Z", &t));
    CHECK_EQ_INT(t, 60);
    CHECK_OK(execcred_parse_time("1970-01-01T01:00:00.123456+01:00", &t));
    CHECK_EQ_INT(t, 0);
    CHECK_OK(execcred_parse_time("1970-01-01T00:00:00-00:30", &t));
    CHECK_EQ_INT(t, 1800);
    CHECK_EQ_INT(execcred_parse_time("1970-01-01 00:00:00Z", &t), ERR_INVAL);
    CHECK_EQ_INT(execcred_parse_time("1970-01-01T00:00:00", &t), ERR_INVAL);
    CHECK_EQ_INT(execcred_parse_time("1970-01-01T00:00:00+0100", &t), ERR_INVAL);
    CHECK_EQ_INT(t, 1800); /* untouched on failure */
}

static void test_parse(void)
{
    struct execcred_result r = {0};
    struct error err = {0};
    const char *tok = "{\"apiVersion\":\"" V1 "\",\"kind\":\"ExecCredential\",\"status\":"
                      "{\"token\":\"s3cret\",\"expirationTimestamp\":\"1970-01-01T00:02:00Z\"}}";
    const char *cert = "{\"apiVersion\":\"" V1 "\",\"kind\":\"ExecCredential\",\"status\":"
                       "{\"clientCertificateData\":\"C\",\"clientKeyData\":\"K\"}}";

    CHECK_OK(execcred_parse(tok, strlen(tok), V1, &r, &err));
    CHECK_STREQ(r.token, "s3cret");
    CHECK_EQ_INT(r.expiry, 120);
    execcred_result_release(&r);
    CHECK(r.token == NULL);
    CHECK_OK(execcred_parse(cert, strlen(cert), V1, &r, &err));
    CHECK_STREQ(r.cert_data, "C");
    CHECK_STREQ(r.key_data, "K");
    CHECK_EQ_INT(r.expiry, 0);
    execcred_result_release(&r);
}

static void test_parse_bad(void)
{
    static const char *const bad[][2] = {
        {"not json", "not JSON"},
        {"{\"apiVersion\":\"" V1 "\",\"kind\":\"Pod\",\"status\":{\"token\":\"t\"}}", "kind"},
        {"{\"apiVersion\":\"v1\",\"kind\":\"ExecCredential\",\"status\":{\"token\":\"t\"}}",
         "apiVersion"},
        {"{\"apiVersion\":\"" V1 "\",\"kind\":\"ExecCredential\"}", "status is missing"},
        {"{\"apiVersion\":\"" V1 "\",\"kind\":\"ExecCredential\",\"status\":{}}", "neither"},
        {"{\"apiVersion\":\"" V1 "\",\"kind\":\"ExecCredential\",\"status\":{\"token\":5}}",
         "status.token must be a string"},
        {"{\"apiVersion\":\"" V1 "\",\"kind\":\"ExecCredential\",\"status\":"
         "{\"clientKeyData\":\"K\"}}",
         "without status.clientCertificateData"},
        {"{\"apiVersion\":\"" V1 "\",\"kind\":\"ExecCredential\",\"status\":"
         "{\"token\":\"t\",\"expirationTimestamp\":\"tomorrow\"}}",
         "RFC 3339"},
    };
    struct execcred_result r = {0};
    struct error err = {0};
    size_t i;

    for (i = 0; i < ARRAY_SIZE(bad); i++) {
        err = (struct error){0};
        CHECK_EQ_INT(execcred_parse(bad[i][0], strlen(bad[i][0]), V1, &r, &err), ERR_INVAL);
        CHECK_HAS(err.msg, bad[i][1]);
        CHECK(r.token == NULL && r.cert_data == NULL);
    }
}

/* A counter file the command bumps, so a test sees how often it ran. */
static char counter[] = "/tmp/execcred_test.XXXXXX";

static struct execcred_cfg *sh_cfg(const char *script)
{
    char yaml[2048], quoted[1024];
    struct error err = {0};
    struct execcred_cfg *c = NULL;
    size_t i, n = 0;

    for (i = 0; script[i] && n + 2 < sizeof(quoted); i++) { /* YAML single quotes: '' */
        if (script[i] == '\'')
            quoted[n++] = '\'';
        quoted[n++] = script[i];
    }
    quoted[n] = '\0';
    snprintf(yaml, sizeof(yaml),
             "command: /bin/sh\napiVersion: " V1 "\ninteractiveMode: Never\n"
             "env: [{name: COUNTER, value: '%s'}]\nargs: [-c, '%s', sh, arg1]\n",
             counter, quoted);
    CHECK_OK(cfg_of(yaml, NULL, &c, &err));
    return c;
}

static int runs(void)
{
    FILE *f = fopen(counter, "r");
    int n = 0;

    if (f) {
        n = (int)fread((char[64]){0}, 1, 64, f);
        fclose(f);
    }
    return n;
}

static void test_run_and_keep(void)
{
    struct execcred_cfg *c = sh_cfg(
        "printf x >> \"$COUNTER\"; echo \"$KUBERNETES_EXEC_INFO\" | grep -q '\"interactive\":false' "
        "&& printf '{\"apiVersion\":\"%s\",\"kind\":\"ExecCredential\",\"status\":{\"token\":\"t-%s\","
        "\"expirationTimestamp\":\"1970-01-01T00:01:40Z\"}}' " V1 " \"$1\"");
    struct execcred ec = {.cfg = c};
    const struct execcred_result *r = NULL;
    struct error err = {0};

    if (!c)
        return;
    CHECK_OK(execcred_get(&ec, 50, false, &r, &err));
    CHECK(r && r->token && strcmp(r->token, "t-arg1") == 0); /* args reach it, and the info */
    CHECK_EQ_INT(runs(), 1);
    CHECK_OK(execcred_get(&ec, 99, false, &r, &err));
    CHECK_EQ_INT(runs(), 1); /* kept before its expiry */
    CHECK_OK(execcred_get(&ec, 99, true, &r, &err));
    CHECK_EQ_INT(runs(), 2); /* forced (a 401) */
    CHECK_OK(execcred_get(&ec, 100, false, &r, &err));
    CHECK_EQ_INT(runs(), 3); /* expired */
    execcred_release(&ec);
    execcred_cfg_free(c);
}

static void test_run_failures(void)
{
    struct execcred_cfg *c = sh_cfg("echo oops >&2; exit 3");
    struct execcred_result r = {0};
    struct error err = {0};

    if (c) {
        CHECK_EQ_INT(execcred_run(c, &r, &err), ERR_IO);
        CHECK_HAS(err.msg, "exited with status 3");
        execcred_cfg_free(c);
    }
    c = sh_cfg("echo '{}'");
    if (c) {
        CHECK_EQ_INT(execcred_run(c, &r, &err), ERR_INVAL);
        CHECK_HAS(err.msg, "not an ExecCredential");
        free(c->argv[0]);
        c->argv[0] = strdup("/nonexistent/plugin");
        free(c->command);
        c->command = strdup("/nonexistent/plugin");
        CHECK_EQ_INT(execcred_run(c, &r, &err), ERR_IO);
        CHECK_HAS(err.msg, "exited with status 127");
        execcred_cfg_free(c);
    }
    CHECK(r.token == NULL);
}

static void setup(void)
{
    int fd = mkstemp(counter);

    CHECK(fd >= 0);
    if (fd >= 0)
        close(fd);
}

static void cleanup(void)
{
    unlink(counter);
}

TEST_MAIN(setup, test_cfg, test_cfg_bad, test_parse_time, test_parse, test_parse_bad,
          test_run_and_keep, test_run_failures, cleanup)
