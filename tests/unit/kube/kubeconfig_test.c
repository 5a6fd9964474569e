/* SPDX-License-Identifier: Apache-2.0 */
/* kubeconfig_test.c - kubeconfig files, $KUBECONFIG, in-cluster and
 * ~/.kube/config through kube/kubeconfig.h. */
#include "../../../common/common.h"
#include "../../../kube/execcred.h"
#include "../../../kube/kubeconfig.h"
#include "../test.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

static char tmpdir[] = "/tmp/kubeconfig_test.XXXXXX";

#define CHECK_HAS(msg, part)                                                                       \
    TEST_REPORT(strstr((msg), (part)) != NULL, "\"%s\" lacks \"%s\"", (msg), (part))

/* Write 'text' to tmpdir/name (directories must exist); the path goes to 'path'. */
static void write_file(const char *name, const char *text, char *path, size_t cap)
{
    FILE *f;

    snprintf(path, cap, "%s/%s", tmpdir, name);
    f = fopen(path, "w");
    CHECK(f != NULL);
    if (f) {
        fputs(text, f);
        fclose(f);
    }
}

static void make_dir(const char *name)
{
    char path[512];

    snprintf(path, sizeof(path), "%s/%s", tmpdir, name);
    CHECK(mkdir(path, 0700) == 0);
}

/* A kubeconfig with one context "main" -> cluster "c1", user "u1"; the extra
 * lines (already indented by four spaces) go into the cluster and the user. */
static void kc_yaml(char *buf, size_t cap, const char *cluster_extra, const char *user_extra)
{
    snprintf(buf, cap,
             "apiVersion: v1\n"
             "kind: Config\n"
             "current-context: main\n"
             "clusters:\n"
             "- name: c1\n"
             "  cluster:\n"
             "    server: https://c1.example:6443\n"
             "%s"
             "contexts:\n"
             "- name: main\n"
             "  context:\n"
             "    cluster: c1\n"
             "    user: u1\n"
             "users:\n"
             "- name: u1\n"
             "  user:\n"
             "%s",
             cluster_extra, user_extra);
}

static err_t parse(const char *text, struct kubeconfig *kc, struct error *e)
{
    return kubeconfig_parse(text, strlen(text), "/etc/kc", kc, e);
}

/* Parse a kc_yaml() document that must fail; returns the code, 'e' says why. */
static err_t parse_bad(const char *cluster_extra, const char *user_extra, struct error *e)
{
    struct kubeconfig kc;
    char text[2048];
    err_t rc;

    memset(&kc, 0, sizeof(kc));
    kc.server = (char *)"untouched";
    kc_yaml(text, sizeof(text), cluster_extra, user_extra);
    rc = parse(text, &kc, e);
    CHECK(rc != ERR_OK);
    CHECK_STREQ(kc.server, "untouched");
    if (!rc) {
        kc.server = NULL;
        kubeconfig_release(&kc);
    }
    return rc;
}

static void test_current_context(void)
{
    static const char text[] = "current-context: b\n"
                               "clusters:\n"
                               "- name: ca\n"
                               "  cluster: {server: 'https://a.example:6443'}\n"
                               "- name: cb\n"
                               "  cluster: {server: 'https://b.example:443/'}\n"
                               "contexts:\n"
                               "- {name: a, context: {cluster: ca, user: ua}}\n"
                               "- {name: b, context: {cluster: cb, user: ub, namespace: x}}\n"
                               "users:\n"
                               "- {name: ua, user: {token: token-a}}\n"
                               "- {name: ub, user: {token: token-b}}\n";
    struct kubeconfig kc;
    struct error err = {0};

    CHECK_OK(parse(text, &kc, &err));
    CHECK_STREQ(kc.server, "https://b.example:443");
    CHECK_STREQ(kc.token, "token-b");
    CHECK(kc.token_file == NULL);
    CHECK(kc.ca_file == NULL && kc.ca_data == NULL);
    CHECK(!kc.insecure);
    CHECK(kc.source == NULL);
    kubeconfig_release(&kc);
}

static void test_token_file_and_paths(void)
{
    struct kubeconfig kc;
    char text[2048];
    struct error err = {0};

    kc_yaml(text, sizeof(text), "    certificate-authority: pki/ca.crt\n",
            "    tokenFile: tok\n"
            "    client-certificate: /abs/cert.pem\n"
            "    client-key: ../key.pem\n");
    CHECK_OK(parse(text, &kc, &err));
    CHECK_STREQ(kc.ca_file, "/etc/kc/pki/ca.crt");
    CHECK_STREQ(kc.token_file, "/etc/kc/tok");
    CHECK(kc.token == NULL);
    CHECK_STREQ(kc.cert_file, "/abs/cert.pem");
    CHECK_STREQ(kc.key_file, "/etc/kc/../key.pem");
    CHECK(kc.cert_data == NULL && kc.key_data == NULL);
    kubeconfig_release(&kc);

    CHECK_OK(kubeconfig_parse(text, strlen(text), "/", &kc, &err));
    CHECK_STREQ(kc.token_file, "/tok");
    kubeconfig_release(&kc);
    CHECK_OK(kubeconfig_parse(text, strlen(text), "/etc/kc/", &kc, &err));
    CHECK_STREQ(kc.token_file, "/etc/kc/tok");
    kubeconfig_release(&kc);
    CHECK_OK(kubeconfig_parse(text, strlen(text), NULL, &kc, &err));
    CHECK_STREQ(kc.token_file, "tok");
    CHECK_STREQ(kc.ca_file, "pki/ca.crt");
    kubeconfig_release(&kc);
}

static void test_data_fields(void)
{
    struct kubeconfig kc;
    char text[2048];
    struct error err = {0};

    /* "CA!", "CERT\n" and "KEY" in base64; the CA data is split over lines. */
    kc_yaml(text, sizeof(text),
            "    certificate-authority-data: |\n"
            "      Q0\n"
            "      Eh\n"
            "    insecure-skip-tls-verify: true\n",
            "    client-certificate-data: Q0VSVAo=\n"
            "    client-key-data: \"S0VZ\"\n");
    CHECK_OK(parse(text, &kc, &err));
    CHECK_EQ_INT(kc.ca_data_len, 3);
    CHECK_STREQ(kc.ca_data, "CA!");
    CHECK_EQ_INT(kc.cert_data_len, 5);
    CHECK_STREQ(kc.cert_data, "CERT\n");
    CHECK_EQ_INT(kc.key_data_len, 3);
    CHECK_STREQ(kc.key_data, "KEY");
    CHECK(kc.insecure);
    CHECK(kc.ca_file == NULL && kc.cert_file == NULL && kc.key_file == NULL);
    CHECK(kc.token == NULL && kc.token_file == NULL);
    kubeconfig_release(&kc);

    /* Binary data keeps its NUL bytes: 0x00 0xff 0x00. */
    kc_yaml(text, sizeof(text), "    certificate-authority-data: AP8A\n", "    token: t\n");
    CHECK_OK(parse(text, &kc, &err));
    CHECK_EQ_INT(kc.ca_data_len, 3);
    CHECK(kc.ca_data && memcmp(kc.ca_data, "\0\xff\0", 3) == 0);
    kubeconfig_release(&kc);
}

/* The whole content of 'path' into 'buf'; its length, or -1. */
static ssize_t slurp(const char *path, char *buf, size_t cap)
{
    int fd = open(path, O_RDONLY);
    ssize_t n;

    if (fd < 0)
        return -1;
    n = read(fd, buf, cap);
    close(fd);
    return n;
}

static void test_data_to_files(void)
{
    struct kubeconfig kc;
    char text[2048], buf[64];
    struct error err = {0};
    int fds[3], i;

    /* CA 0x00 0xff 0x00 (binary), "CERT\n", "KEY"; the token stays as it is. */
    kc_yaml(text, sizeof(text), "    certificate-authority-data: AP8A\n",
            "    client-certificate-data: Q0VSVAo=\n"
            "    client-key-data: S0VZ\n");
    CHECK_OK(parse(text, &kc, &err));
    CHECK_OK(kubeconfig_data_to_files(&kc, &err));
    CHECK(kc.ca_data == NULL && kc.cert_data == NULL && kc.key_data == NULL);
    CHECK(kc.ca_data_len == 0 && kc.cert_data_len == 0 && kc.key_data_len == 0);
    CHECK_EQ_INT(kc.ndata_fds, 3);
    CHECK(kc.ca_file && strncmp(kc.ca_file, "/proc/self/fd/", 14) == 0);
    CHECK_EQ_INT(slurp(kc.ca_file, buf, sizeof(buf)), 3);
    CHECK(memcmp(buf, "\0\xff\0", 3) == 0);
    CHECK_EQ_INT(slurp(kc.cert_file, buf, sizeof(buf)), 5);
    CHECK(memcmp(buf, "CERT\n", 5) == 0);
    CHECK_EQ_INT(slurp(kc.key_file, buf, sizeof(buf)), 3);
    CHECK(memcmp(buf, "KEY", 3) == 0);
    /* Sealed: nobody changes what the client reads. */
    i = open(kc.key_file, O_WRONLY);
    CHECK(i < 0 || write(i, "X", 1) < 0);
    if (i >= 0)
        close(i);
    CHECK_EQ_INT(slurp(kc.key_file, buf, sizeof(buf)), 3);
    for (i = 0; i < 3; i++) {
        fds[i] = kc.data_fds[i];
        CHECK(fcntl(fds[i], F_GETFD) & FD_CLOEXEC);
    }
    kubeconfig_release(&kc);
    for (i = 0; i < 3; i++)
        CHECK(fcntl(fds[i], F_GETFD) < 0); /* closed */

    /* File paths and no data: nothing changes, nothing is opened. */
    kc_yaml(text, sizeof(text), "    certificate-authority: /etc/ca.crt\n", "    token: t\n");
    CHECK_OK(parse(text, &kc, &err));
    CHECK_OK(kubeconfig_data_to_files(&kc, &err));
    CHECK_EQ_INT(kc.ndata_fds, 0);
    CHECK_STREQ(kc.ca_file, "/etc/ca.crt");
    CHECK(kc.cert_file == NULL && kc.key_file == NULL);
    kubeconfig_release(&kc);
}

static void test_bad_base64(void)
{
    static const char *const bad[] = {"Q0E", "Q===", "Q0E=Q0E=", "Q0VS VA==", "!!!!", "Q0=E"};
    char user[256];
    struct error err = {0};
    size_t i;

    for (i = 0; i < ARRAY_SIZE(bad); i++) {
        snprintf(user, sizeof(user),
                 "    token: s3cret-value\n    client-key-data: '%s'\n"
                 "    client-certificate-data: Q0VSVAo=\n",
                 bad[i]);
        CHECK_EQ_INT(parse_bad("", user, &err), ERR_INVAL);
        CHECK_STREQ(err.msg, "user \"u1\": client-key-data is not valid base64");
    }
    CHECK_EQ_INT(parse_bad("    certificate-authority-data: '@@@@'\n", "    token: x\n", &err),
                 ERR_INVAL);
    CHECK_STREQ(err.msg, "cluster \"c1\": certificate-authority-data is not valid base64");
}

static void test_insecure_and_server(void)
{
    static const char text[] = "current-context: x\n"
                               "clusters: [{name: c, cluster: {server: 'k.example:6443//',"
                               " insecure-skip-tls-verify: false}}]\n"
                               "contexts: [{name: x, context: {cluster: c}}]\n";
    struct kubeconfig kc;
    struct error err = {0};

    CHECK_OK(parse(text, &kc, &err));
    CHECK_STREQ(kc.server, "https://k.example:6443");
    CHECK(!kc.insecure);
    CHECK(kc.token == NULL && kc.cert_data == NULL); /* no user: anonymous */
    kubeconfig_release(&kc);

    CHECK_EQ_INT(parse_bad("    insecure-skip-tls-verify: 'yes'\n", "    token: x\n", &err),
                 ERR_INVAL);
    CHECK_STREQ(err.msg, "cluster \"c1\": insecure-skip-tls-verify must be true or false");
    CHECK_EQ_INT(parse_bad("    server: ''\n", "    token: x\n", &err), ERR_INVAL);
}

static void test_missing_references(void)
{
    static const char no_ctx[] = "current-context: a\n"
                                 "contexts: [{name: b, context: {cluster: c}}]\n";
    static const char no_cluster[] = "current-context: a\n"
                                     "contexts: [{name: a, context: {cluster: c, user: u}}]\n"
                                     "users: [{name: u, user: {token: x}}]\n";
    static const char no_user[] = "current-context: a\n"
                                  "clusters: [{name: c, cluster: {server: 'https://h'}}]\n"
                                  "contexts: [{name: a, context: {cluster: c, user: u}}]\n";
    struct kubeconfig kc;
    struct error err = {0};

    CHECK_EQ_INT(parse(no_ctx, &kc, &err), ERR_INVAL);
    CHECK_STREQ(err.msg, "context \"a\" not found");
    CHECK_EQ_INT(parse(no_cluster, &kc, &err), ERR_INVAL);
    CHECK_STREQ(err.msg, "cluster \"c\" not found");
    CHECK_EQ_INT(parse(no_user, &kc, &err), ERR_INVAL);
    CHECK_STREQ(err.msg, "user \"u\" not found");
    CHECK_EQ_INT(parse("clusters: []\n", &kc, &err), ERR_INVAL);
    CHECK_STREQ(err.msg, "current-context is not set");
    CHECK_EQ_INT(parse("", &kc, &err), ERR_INVAL);
    CHECK_EQ_INT(parse("current-context: a\ncontexts: {a: b}\n", &kc, &err), ERR_INVAL);
    CHECK_STREQ(err.msg, "contexts must be a list");
    CHECK_EQ_INT(parse("current-context: a\ncontexts: [7]\n", &kc, &err), ERR_INVAL);
    CHECK_STREQ(err.msg, "contexts[0] must be a mapping with a name");
    CHECK_EQ_INT(parse("current-context: a\ncontexts: [{name: a, context: 3}]\n", &kc, &err),
                 ERR_INVAL);
    CHECK_STREQ(err.msg, "context \"a\": context must be a mapping");
    CHECK_EQ_INT(
        parse("current-context: a\ncontexts: [{name: a, context: {user: u}}]\n", &kc, &err),
        ERR_INVAL);
    CHECK_STREQ(err.msg, "context \"a\": cluster is not set");
    CHECK_EQ_INT(parse("- a list\n", &kc, &err), ERR_INVAL);
    CHECK_EQ_INT(parse("a: [\n", &kc, &err), ERR_INVAL);
    CHECK_HAS(err.msg, "line ");
}

static void test_unsupported_users(void)
{
    struct error err = {0};

    CHECK_EQ_INT(parse_bad("", "    exec:\n      command: aws\n      apiVersion: v1\n", &err),
                 ERR_INVAL);
    CHECK_HAS(err.msg, "user \"u1\": exec is not supported");
    CHECK_EQ_INT(parse_bad("", "    auth-provider: {name: gcp}\n", &err), ERR_INVAL);
    CHECK_HAS(err.msg, "user \"u1\": auth-provider is not supported");
    CHECK_EQ_INT(parse_bad("", "    username: admin\n    password: hunter2\n", &err), ERR_INVAL);
    CHECK_HAS(err.msg, "basic auth");
    CHECK(strstr(err.msg, "hunter2") == NULL);
}

/* kubectl-podres's choices: another context, its namespace, exec users. */
static void test_selection(void)
{
    static const char text[] =
        "current-context: main\n"
        "clusters:\n"
        "- {name: c1, cluster: {server: 'https://c1.example:6443'}}\n"
        "- {name: c2, cluster: {server: 'https://c2.example:6443'}}\n"
        "contexts:\n"
        "- {name: main, context: {cluster: c1, user: u1}}\n"
        "- {name: other, context: {cluster: c2, user: u2, namespace: ml}}\n"
        "- {name: num, context: {cluster: c1, namespace: 123}}\n"
        "- {name: odd, context: {cluster: c1, namespace: [x]}}\n"
        "users:\n"
        "- {name: u1, user: {token: t1}}\n"
        "- name: u2\n"
        "  user:\n"
        "    exec: {command: ./tok.sh, apiVersion: client.authentication.k8s.io/v1, args: [a]}\n";
    struct kubeconfig_sel sel = {.context = "other", .allow_exec = true};
    struct kubeconfig kc = {0};
    struct error err = {0};

    CHECK_OK(kubeconfig_parse(text, strlen(text), "/etc/kc", &kc, &err));
    CHECK_STREQ(kc.server, "https://c1.example:6443"); /* current-context */
    CHECK_STREQ(kc.token, "t1");
    CHECK(kc.namespace == NULL && kc.exec == NULL);
    kubeconfig_release(&kc);
    CHECK_OK(kubeconfig_parse_sel(text, strlen(text), "/etc/kc", &sel, &kc, &err));
    CHECK_STREQ(kc.server, "https://c2.example:6443");
    CHECK_STREQ(kc.namespace, "ml");
    CHECK(kc.exec != NULL);
    if (kc.exec) {
        CHECK_STREQ(kc.exec->command, "/etc/kc/./tok.sh");
        CHECK_STREQ(kc.exec->argv[1], "a");
    }
    kubeconfig_release(&kc);
    sel.allow_exec = false; /* the syncer's behaviour: refused by name */
    CHECK_EQ_INT(kubeconfig_parse_sel(text, strlen(text), "/etc/kc", &sel, &kc, &err), ERR_INVAL);
    CHECK_HAS(err.msg, "user \"u2\": exec is not supported");
    sel.context = "num"; /* plain 123 is a namespace name; a list is none, as before */
    CHECK_OK(kubeconfig_parse_sel(text, strlen(text), "/etc/kc", &sel, &kc, &err));
    CHECK_STREQ(kc.namespace, "123");
    kubeconfig_release(&kc);
    sel.context = "odd";
    CHECK_OK(kubeconfig_parse_sel(text, strlen(text), "/etc/kc", &sel, &kc, &err));
    CHECK(kc.namespace == NULL);
    kubeconfig_release(&kc);
    sel.context = "nope";
    CHECK_EQ_INT(kubeconfig_parse_sel(text, strlen(text), "/etc/kc", &sel, &kc, &err), ERR_INVAL);
    CHECK_HAS(err.msg, "context \"nope\" not found");
    CHECK(kc.server == NULL);
}

static void test_inconsistent_user(void)
{
    struct error err = {0};

    CHECK_EQ_INT(parse_bad("", "    client-certificate: c.pem\n", &err), ERR_INVAL);
    CHECK_STREQ(err.msg, "user \"u1\": client-certificate is set without client-key");
    CHECK_EQ_INT(parse_bad("", "    client-key-data: S0VZ\n", &err), ERR_INVAL);
    CHECK_STREQ(err.msg, "user \"u1\": client-key is set without client-certificate");
    CHECK_EQ_INT(parse_bad("",
                           "    client-certificate: c.pem\n    client-certificate-data: S0VZ\n"
                           "    client-key: k.pem\n",
                           &err),
                 ERR_INVAL);
    CHECK_STREQ(err.msg,
                "user \"u1\": both client-certificate and client-certificate-data are set");
    CHECK_EQ_INT(parse_bad("    certificate-authority: ca.crt\n"
                           "    certificate-authority-data: Q0E=\n",
                           "    token: x\n", &err),
                 ERR_INVAL);
    CHECK_HAS(err.msg, "cluster \"c1\": certificate-authority and certificate-authority-data");
    CHECK_EQ_INT(parse_bad("", "    token: 12345\n", &err), ERR_INVAL);
    CHECK_STREQ(err.msg, "user \"u1\": token must be a string");
}

/* A bearer token is never sent over plain http: the kubeconfig is refused,
 * naming the cluster and the user (not the token). Certificates and no
 * credentials at all are fine there, and so is a token over https. */
static void test_token_over_http(void)
{
    static const char text[] = "current-context: main\n"
                               "clusters:\n"
                               "- {name: plain, cluster: {server: 'http://127.0.0.1:8080'}}\n"
                               "contexts:\n"
                               "- {name: main, context: {cluster: plain, user: robot}}\n"
                               "users:\n"
                               "- {name: robot, user: {%s}}\n";
    struct kubeconfig kc;
    char doc[512];
    struct error err = {0};

    snprintf(doc, sizeof(doc), text, "token: s3cret-token");
    memset(&kc, 0, sizeof(kc));
    CHECK_EQ_INT(parse(doc, &kc, &err), ERR_INVAL);
    CHECK_HAS(err.msg, "cluster \"plain\" has server 'http://127.0.0.1:8080' (plain http)");
    CHECK_HAS(err.msg, "user \"robot\" a bearer token");
    CHECK_HAS(err.msg, "refusing to send the token unencrypted");
    CHECK(strstr(err.msg, "s3cret") == NULL);
    snprintf(doc, sizeof(doc), text, "tokenFile: /run/t");
    CHECK_EQ_INT(parse(doc, &kc, &err), ERR_INVAL);
    CHECK_HAS(err.msg, "(plain http)");
    snprintf(doc, sizeof(doc), text, "client-certificate: c.pem, client-key: k.pem");
    CHECK_OK(parse(doc, &kc, &err));
    kubeconfig_release(&kc);
    snprintf(doc, sizeof(doc), text, "");
    CHECK_OK(parse(doc, &kc, &err));
    CHECK_STREQ(kc.server, "http://127.0.0.1:8080");
    kubeconfig_release(&kc);
}

static void test_load_file(void)
{
    struct kubeconfig kc;
    char text[2048], path[512], other[512], want[600];
    struct error err = {0};

    make_dir("load");
    kc_yaml(text, sizeof(text), "", "    tokenFile: token\n");
    write_file("load/config", text, path, sizeof(path));
    write_file("load/other", "current-context: nope\n", other, sizeof(other));

    setenv("KUBECONFIG", other, 1);
    CHECK_OK(kubeconfig_load(path, &kc, &err)); /* --kubeconfig wins */
    CHECK_STREQ(kc.source, path);
    snprintf(want, sizeof(want), "%s/load/token", tmpdir);
    CHECK_STREQ(kc.token_file, want);
    CHECK_STREQ(kc.server, "https://c1.example:6443");
    kubeconfig_release(&kc);

    CHECK_EQ_INT(kubeconfig_load(NULL, &kc, &err), ERR_INVAL);
    snprintf(want, sizeof(want), "kubeconfig '%s': context \"nope\" not found", other);
    CHECK_STREQ(err.msg, want);

    snprintf(want, sizeof(want), "%s/load/absent", tmpdir);
    CHECK_EQ_INT(kubeconfig_load(want, &kc, &err), ERR_IO);
    CHECK_HAS(err.msg, want);
    CHECK_HAS(err.msg, "cannot open");
    unsetenv("KUBECONFIG");
}

static void test_env_list(void)
{
    struct kubeconfig kc;
    char text[2048], first[512], second[512], list[2048];
    struct error err = {0};

    make_dir("env");
    kc_yaml(text, sizeof(text), "", "    token: first\n");
    write_file("env/first", text, first, sizeof(first));
    kc_yaml(text, sizeof(text), "", "    token: second\n");
    write_file("env/second", text, second, sizeof(second));

    snprintf(list, sizeof(list), "/nonexistent/kc::%s:%s", second, first);
    setenv("KUBECONFIG", list, 1);
    setenv("KUBERNETES_SERVICE_HOST", "10.0.0.1", 1); /* $KUBECONFIG comes first */
    setenv("KUBERNETES_SERVICE_PORT", "443", 1);
    CHECK_OK(kubeconfig_load(NULL, &kc, &err));
    CHECK_STREQ(kc.token, "second");
    CHECK_STREQ(kc.source, second);
    kubeconfig_release(&kc);

    snprintf(list, sizeof(list), "%s:%s", first, second);
    setenv("KUBECONFIG", list, 1);
    CHECK_OK(kubeconfig_load("", &kc, &err)); /* an empty flag is no flag */
    CHECK_STREQ(kc.token, "first");
    kubeconfig_release(&kc);
    unsetenv("KUBECONFIG");
    unsetenv("KUBERNETES_SERVICE_HOST");
    unsetenv("KUBERNETES_SERVICE_PORT");
}

static void test_in_cluster(void)
{
    struct kubeconfig kc;
    char sa[256], path[512];
    struct error err = {0};

    make_dir("sa");
    snprintf(sa, sizeof(sa), "%s/sa", tmpdir);
    write_file("sa/token", "secret-token\n", path, sizeof(path));

    unsetenv("KUBERNETES_SERVICE_HOST");
    CHECK_EQ_INT(kubeconfig_in_cluster(sa, &kc, &err), ERR_NOTFOUND);
    setenv("KUBERNETES_SERVICE_HOST", "10.96.0.1", 1);
    unsetenv("KUBERNETES_SERVICE_PORT");
    CHECK_EQ_INT(kubeconfig_in_cluster(sa, &kc, &err), ERR_INVAL);
    CHECK_HAS(err.msg, "KUBERNETES_SERVICE_PORT");
    setenv("KUBERNETES_SERVICE_PORT", "https", 1);
    CHECK_EQ_INT(kubeconfig_in_cluster(sa, &kc, &err), ERR_INVAL);
    setenv("KUBERNETES_SERVICE_PORT", "443", 1);
    CHECK_EQ_INT(kubeconfig_in_cluster(sa, &kc, &err), ERR_IO); /* no ca.crt yet */
    CHECK_HAS(err.msg, "ca.crt");

    write_file("sa/ca.crt", "-----BEGIN CERTIFICATE-----\n", path, sizeof(path));
    CHECK_OK(kubeconfig_in_cluster(sa, &kc, &err));
    CHECK_STREQ(kc.server, "https://10.96.0.1:443");
    CHECK_STREQ(kc.ca_file, path);
    snprintf(path, sizeof(path), "%s/token", sa);
    CHECK_STREQ(kc.token_file, path);
    CHECK(kc.token == NULL); /* read by the client, so that rotation works */
    CHECK_STREQ(kc.source, "in-cluster");
    kubeconfig_release(&kc);

    setenv("KUBERNETES_SERVICE_HOST", "fd00:10:96::1", 1);
    setenv("KUBERNETES_SERVICE_PORT", "6443", 1);
    CHECK_OK(kubeconfig_in_cluster(sa, &kc, &err));
    CHECK_STREQ(kc.server, "https://[fd00:10:96::1]:6443");
    kubeconfig_release(&kc);
    unsetenv("KUBERNETES_SERVICE_HOST");
    unsetenv("KUBERNETES_SERVICE_PORT");
}

static void test_home_fallback(void)
{
    struct kubeconfig kc;
    char text[2048], home[512], path[512];
    struct error err = {0};

    make_dir("home");
    make_dir("home/.kube");
    make_dir("empty");
    kc_yaml(text, sizeof(text), "", "    token: from-home\n");
    write_file("home/.kube/config", text, path, sizeof(path));
    unsetenv("KUBECONFIG");
    unsetenv("KUBERNETES_SERVICE_HOST");

    snprintf(home, sizeof(home), "%s/home", tmpdir);
    setenv("HOME", home, 1);
    CHECK_OK(kubeconfig_load(NULL, &kc, &err));
    CHECK_STREQ(kc.token, "from-home");
    CHECK_STREQ(kc.source, path);
    kubeconfig_release(&kc);

    /* In-cluster comes before ~/.kube/config: here its files are missing. */
    setenv("KUBERNETES_SERVICE_HOST", "10.96.0.1", 1);
    setenv("KUBERNETES_SERVICE_PORT", "443", 1);
    if (access("/var/run/secrets/kubernetes.io/serviceaccount/token", R_OK) != 0) {
        CHECK_EQ_INT(kubeconfig_load(NULL, &kc, &err), ERR_IO);
        CHECK_HAS(err.msg, "in-cluster");
    }
    unsetenv("KUBERNETES_SERVICE_HOST");
    unsetenv("KUBERNETES_SERVICE_PORT");

    snprintf(home, sizeof(home), "%s/empty", tmpdir);
    setenv("HOME", home, 1);
    setenv("KUBECONFIG", "/nonexistent/a:/nonexistent/b", 1);
    CHECK_EQ_INT(kubeconfig_load(NULL, &kc, &err), ERR_NOTFOUND);
    CHECK_HAS(err.msg, "/empty/.kube/config' does not exist");
    unsetenv("KUBECONFIG");
    unsetenv("HOME");
    CHECK_EQ_INT(kubeconfig_load(NULL, &kc, &err), ERR_NOTFOUND);
}

static void test_no_token_in_messages(void)
{
    struct error err = {0};

    CHECK_EQ_INT(parse_bad("", "    token: tok-s3cret\n    client-key-data: '#'\n", &err),
                 ERR_INVAL);
    CHECK(strstr(err.msg, "tok-s3cret") == NULL);
    CHECK_EQ_INT(parse_bad("", "    token: [tok-s3cret]\n", &err), ERR_INVAL);
    CHECK(strstr(err.msg, "tok-s3cret") == NULL);
}

static void test_release_zeroed(void)
{
    struct kubeconfig kc;

    memset(&kc, 0, sizeof(kc));
    kubeconfig_release(&kc);
    kubeconfig_release(&kc);
    kubeconfig_release(NULL);
    CHECK(kc.server == NULL && kc.source == NULL);
}

static void setup(void)
{
    CHECK(mkdtemp(tmpdir) != NULL);
}

static void cleanup(void)
{
    char cmd[600];

    snprintf(cmd, sizeof(cmd), "rm -rf '%s'", tmpdir);
    CHECK_EQ_INT(system(cmd), 0);
}

TEST_MAIN(setup, test_current_context, test_token_file_and_paths, test_data_fields,
          test_data_to_files, test_bad_base64, test_insecure_and_server, test_missing_references,
          test_unsupported_users, test_selection, test_inconsistent_user, test_token_over_http,
          test_load_file, test_env_list, test_in_cluster, test_home_fallback,
          test_no_token_in_messages, test_release_zeroed, cleanup)
