/* SPDX-License-Identifier: Apache-2.0 */
/* config_test.c - podresd settings through config.h. */
#include "../../../common/common.h"
#include "../../../common/jsonx.h"
#include "../../../server/config.h"
#include "../test.h"

#include <sys/stat.h>
#include <unistd.h>

static char tmpdir[] = "/tmp/config_test.XXXXXX";

/* Write 'text' to tmpdir/name; the path goes to 'path'. */
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

static void test_defaults(void)
{
    struct config c;

    setenv("NODE_NAME", "node-7", 1);
    CHECK_OK(config_init(&c));
    CHECK_STREQ(c.db, "/var/lib/podresd/podresd.db");
    CHECK_STREQ(c.socket, "/run/podresd/podresd.sock");
    CHECK(c.listen == NULL);
    CHECK_STREQ(c.node_name, "node-7");
    CHECK_STREQ(c.source, "api");
    CHECK_STREQ(c.kubelet_socket, "/var/lib/kubelet/pod-resources/kubelet.sock");
    CHECK_EQ_INT(c.kubelet_interval_ms, 2000);
    CHECK(c.write_token_file == NULL);
    CHECK_EQ_INT(c.history, 10000);
    CHECK_STREQ(c.log_format, "text");
    CHECK_STREQ(c.log_level, "info");
    CHECK(c.devices == NULL);
    config_release(&c);

    unsetenv("NODE_NAME");
    CHECK_OK(config_init(&c));
    CHECK(c.node_name != NULL && c.node_name[0] != '\0');
    config_release(&c);
}

static void test_set(void)
{
    struct config c;
    struct error e = {0};
    char token[512], longpath[200];

    CHECK_OK(config_init(&c));
    CHECK_OK(config_set(&c, "node-name", "n1", &e));
    CHECK_STREQ(c.node_name, "n1");
    CHECK_OK(config_set(&c, "node_name", "n2", &e));
    CHECK_STREQ(c.node_name, "n2");
    CHECK_OK(config_set(&c, "listen", "127.0.0.1:9444", &e));
    CHECK_STREQ(c.listen, "127.0.0.1:9444");
    write_file("token", "secret\n", token, sizeof(token));
    CHECK_OK(chmod(token, 0600));
    CHECK_OK(config_set(&c, "write-token-file", token, &e));
    CHECK_STREQ(c.write_token_file, token);
    CHECK_OK(config_set(&c, "source", "kubelet", &e));
    CHECK_STREQ(c.source, "kubelet");
    CHECK_OK(config_set(&c, "kubelet-interval", "1500ms", &e));
    CHECK_EQ_INT(c.kubelet_interval_ms, 1500);
    CHECK_OK(config_set(&c, "kubelet_interval", "1m30s", &e));
    CHECK_EQ_INT(c.kubelet_interval_ms, 90000);
    CHECK_OK(config_set(&c, "history", "5", &e));
    CHECK_EQ_INT(c.history, 5);
    CHECK_OK(config_set(&c, "log-format", "json", &e));
    CHECK_STREQ(c.log_format, "json");
    CHECK_OK(config_set(&c, "log_level", "debug", &e));
    CHECK_STREQ(c.log_level, "debug");
    CHECK_OK(config_set(&c, "db", "/tmp/x.db", &e));
    CHECK_STREQ(c.db, "/tmp/x.db");

    e = (struct error){0};
    CHECK_EQ_INT(config_set(&c, "colour", "red", &e), ERR_INVAL);
    CHECK(strstr(e.msg, "colour") != NULL);
    e = (struct error){0};
    CHECK_EQ_INT(config_set(&c, "source", "docker", &e), ERR_INVAL);
    CHECK(strstr(e.msg, "source") != NULL && strstr(e.msg, "docker") != NULL);
    CHECK_STREQ(c.source, "kubelet");
    CHECK_EQ_INT(config_set(&c, "source", "api|kubelet", &e), ERR_INVAL);
    CHECK_EQ_INT(config_set(&c, "source", "", &e), ERR_INVAL);
    CHECK_EQ_INT(config_set(&c, "log-level", "trace", &e), ERR_INVAL);
    CHECK_EQ_INT(config_set(&c, "log-format", "xml", &e), ERR_INVAL);
    e = (struct error){0};
    CHECK_EQ_INT(config_set(&c, "kubelet-interval", "-3s", &e), ERR_INVAL);
    CHECK(strstr(e.msg, "kubelet_interval") != NULL);
    CHECK_EQ_INT(config_set(&c, "kubelet-interval", "soon", &e), ERR_INVAL);
    CHECK_EQ_INT(config_set(&c, "kubelet-interval", "0s", &e), ERR_INVAL);
    e = (struct error){0};
    CHECK_EQ_INT(config_set(&c, "history", "0", &e), ERR_INVAL);
    CHECK(strstr(e.msg, "history") != NULL);
    CHECK_EQ_INT(config_set(&c, "history", "-1", &e), ERR_INVAL);
    CHECK_EQ_INT(config_set(&c, "history", "ten", &e), ERR_INVAL);
    CHECK_EQ_INT(config_set(&c, "history", "1000000000", &e), ERR_INVAL);
    CHECK_EQ_INT(c.history, 5);
    CHECK_EQ_INT(config_set(&c, "db", "", &e), ERR_INVAL);
    CHECK_STREQ(c.db, "/tmp/x.db");

    /* listen: a loopback HOST:PORT, the port all digits, 0..65535 */
    CHECK_OK(config_set(&c, "listen", "[::1]:0", &e));
    CHECK_OK(config_set(&c, "listen", "localhost:65535", &e));
    CHECK_STREQ(c.listen, "localhost:65535");
    static const char *const bad_listen[] = {"127.0.0.1:abc", "127.0.0.1:",      "127.0.0.1:80x",
                                             "127.0.0.1:-1",  "127.0.0.1:65536", "127.0.0.1:123456",
                                             "0.0.0.0:9444",  "10.0.0.1:9444",   "[::]:9444",
                                             "9444",          "nonsense",        ":9444"};
    for (size_t i = 0; i < ARRAY_SIZE(bad_listen); i++) {
        e = (struct error){0};
        CHECK_EQ_INT(config_set(&c, "listen", bad_listen[i], &e), ERR_INVAL);
        CHECK(strstr(e.msg, "\"listen\"") != NULL && strstr(e.msg, bad_listen[i]) != NULL);
    }
    CHECK_STREQ(c.listen, "localhost:65535");
    /* a token file that cannot be read, a socket path too long for sun_path */
    e = (struct error){0};
    CHECK_EQ_INT(config_set(&c, "write-token-file", "/nonexistent/token", &e), ERR_INVAL);
    CHECK(strstr(e.msg, "write_token_file") != NULL && strstr(e.msg, "No such file") != NULL);
    CHECK_STREQ(c.write_token_file, token);
    /* one that group or others may read: refused, naming the file and mode */
    CHECK_OK(chmod(token, 0640));
    e = (struct error){0};
    CHECK_EQ_INT(config_set(&c, "write-token-file", token, &e), ERR_INVAL);
    CHECK(strstr(e.msg, "write_token_file") != NULL && strstr(e.msg, "0640") != NULL &&
          strstr(e.msg, token) != NULL);
    CHECK_OK(chmod(token, 0600));
    memset(longpath, 'a', sizeof(longpath) - 1);
    longpath[0] = '/';
    longpath[sizeof(longpath) - 1] = '\0';
    e = (struct error){0};
    CHECK_EQ_INT(config_set(&c, "socket", longpath, &e), ERR_INVAL);
    CHECK(strstr(e.msg, "\"socket\"") != NULL && strstr(e.msg, "too long") != NULL);
    longpath[107] = '\0'; /* 107 bytes and the NUL fill sun_path */
    CHECK_OK(config_set(&c, "socket", longpath, &e));
    longpath[107] = 'a'; /* 108: one too many */
    longpath[108] = '\0';
    CHECK_EQ_INT(config_set(&c, "socket", longpath, &e), ERR_INVAL);
    config_release(&c);
    CHECK_OK(unlink(token));
}

static void test_load(void)
{
    struct config c;
    struct error e = {0};
    char path[512], *s;

    write_file("good.yaml",
               "db: var/podresd.db\n"
               "socket: var/podresd.sock\n"
               "listen: 127.0.0.1:9444\n"
               "node_name: dev-node\n"
               "source: api\n"
               "history: 500\n"
               "kubelet_interval: 5s\n"
               "log_format: json\n"
               "log_level: warn\n"
               "devices:\n"
               "  - resourceName: example.com/gpu\n"
               "    devices:\n"
               "      - {id: gpu-1, topology: {nodes: [{ID: 1}]}, properties: {model: a100}}\n"
               "      - {id: gpu-0, topology: {nodes: [{ID: 0}]}}\n"
               "  - resourceName: example.com/nic\n"
               "    devices:\n"
               "      - {id: nic-0, health: Unhealthy}\n",
               path, sizeof(path));
    CHECK_OK(config_init(&c));
    CHECK_OK(config_load(&c, path, &e));
    CHECK_STREQ(c.db, "var/podresd.db");
    CHECK_STREQ(c.socket, "var/podresd.sock");
    CHECK_STREQ(c.listen, "127.0.0.1:9444");
    CHECK_STREQ(c.node_name, "dev-node");
    CHECK_EQ_INT(c.history, 500);
    CHECK_EQ_INT(c.kubelet_interval_ms, 5000);
    CHECK_STREQ(c.log_format, "json");
    CHECK_STREQ(c.log_level, "warn");
    s = jsonx_dumps(c.devices);
    CHECK_STREQ(s, "[{\"devices\":[{\"aliases\":[],\"health\":\"Healthy\",\"id\":\"gpu-1\","
                   "\"numa\":[1],\"physical\":\"\",\"properties\":{\"model\":\"a100\"}},"
                   "{\"aliases\":[],\"health\":\"Healthy\",\"id\":\"gpu-0\",\"numa\":[0],"
                   "\"physical\":\"\",\"properties\":{}}],\"resourceName\":\"example.com/gpu\"},"
                   "{\"devices\":[{\"aliases\":[],\"health\":\"Unhealthy\",\"id\":\"nic-0\","
                   "\"numa\":[],\"physical\":\"\",\"properties\":{}}],"
                   "\"resourceName\":\"example.com/nic\"}]");
    free(s);
    config_release(&c);
    unlink(path);

    /* an unknown key: the message names the key and the file */
    write_file("bad-key.yaml", "history: 5\nlisten_port: 9\n", path, sizeof(path));
    CHECK_OK(config_init(&c));
    e = (struct error){0};
    CHECK_EQ_INT(config_load(&c, path, &e), ERR_INVAL);
    CHECK(strstr(e.msg, "listen_port") != NULL);
    CHECK(strstr(e.msg, path) != NULL);
    config_release(&c);
    unlink(path);

    /* a bad value */
    write_file("bad-value.yaml", "history: 0\n", path, sizeof(path));
    CHECK_OK(config_init(&c));
    e = (struct error){0};
    CHECK_EQ_INT(config_load(&c, path, &e), ERR_INVAL);
    CHECK(strstr(e.msg, "history") != NULL);
    CHECK(strstr(e.msg, path) != NULL);
    config_release(&c);
    unlink(path);

    /* a value of the wrong type */
    write_file("bad-type.yaml", "log_level: [info]\n", path, sizeof(path));
    CHECK_OK(config_init(&c));
    e = (struct error){0};
    CHECK_EQ_INT(config_load(&c, path, &e), ERR_INVAL);
    CHECK(strstr(e.msg, "log_level") != NULL);
    CHECK(strstr(e.msg, path) != NULL);
    config_release(&c);
    unlink(path);

    /* a bad device */
    write_file("bad-device.yaml",
               "devices:\n  - resourceName: example.com/gpu\n    devices:\n"
               "      - {id: gpu-0}\n      - {id: gpu-0}\n",
               path, sizeof(path));
    CHECK_OK(config_init(&c));
    e = (struct error){0};
    CHECK_EQ_INT(config_load(&c, path, &e), ERR_INVAL);
    CHECK(strstr(e.msg, "devices[0]") != NULL);
    CHECK(strstr(e.msg, path) != NULL);
    CHECK(c.devices == NULL);
    config_release(&c);
    unlink(path);

    write_file("bad-entry.yaml",
               "devices:\n  - resourceName: example.com/gpu\n    devices: []\n    extra: 1\n", path,
               sizeof(path));
    CHECK_OK(config_init(&c));
    e = (struct error){0};
    CHECK_EQ_INT(config_load(&c, path, &e), ERR_INVAL);
    CHECK(strstr(e.msg, "devices[0]") != NULL);
    config_release(&c);
    unlink(path);

    /* YAML syntax errors and missing files name the file */
    write_file("bad-yaml.yaml", "a: [1\n", path, sizeof(path));
    CHECK_OK(config_init(&c));
    e = (struct error){0};
    CHECK_EQ_INT(config_load(&c, path, &e), ERR_INVAL);
    CHECK(strstr(e.msg, path) != NULL && strstr(e.msg, "line") != NULL);
    unlink(path);
    e = (struct error){0};
    CHECK_EQ_INT(config_load(&c, path, &e), ERR_IO);
    CHECK(strstr(e.msg, path) != NULL);
    config_release(&c);
}

static void test_apply(void)
{
    struct config c;
    struct error e = {0};
    json_t *doc = json_pack("{s:i,s:s}", "history", 42, "log-level", "err");

    CHECK_OK(config_init(&c));
    CHECK_OK(config_apply(&c, doc, &e));
    CHECK_EQ_INT(c.history, 42);
    CHECK_STREQ(c.log_level, "err");
    json_decref(doc);
    doc = json_array();
    CHECK_EQ_INT(config_apply(&c, doc, &e), ERR_INVAL);
    json_decref(doc);
    doc = json_pack("{s:b}", "db", 1);
    e = (struct error){0};
    CHECK_EQ_INT(config_apply(&c, doc, &e), ERR_INVAL);
    CHECK(strstr(e.msg, "db") != NULL);
    json_decref(doc);
    doc = json_pack("{s:s}", "devices", "none");
    e = (struct error){0};
    CHECK_EQ_INT(config_apply(&c, doc, &e), ERR_INVAL);
    CHECK(strstr(e.msg, "devices") != NULL);
    json_decref(doc);
    config_release(&c);
}

/* Regression (was a bug): a static device list with an invalid resource name
 * leaks the validated device array (server/config.c static_devices). */
static void test_static_devices_bad_resource(void)
{
    struct config c;
    struct error e = {0};
    json_t *doc = json_loads(
        "{\"devices\":[{\"resourceName\":\"gpu\",\"devices\":[{\"id\":\"a\"}]}]}", 0, NULL);

    CHECK_OK(config_init(&c));
    CHECK_EQ_INT(config_apply(&c, doc, &e), ERR_INVAL);
    CHECK(strstr(e.msg, "gpu") != NULL);
    json_decref(doc);
    config_release(&c);
}

/* identity: rules are compiled to be checked and kept as given */
static void test_identity(void)
{
    struct config c;
    struct error e = {0};
    char path[512], *s;

    write_file("identity.yaml",
               "identity:\n"
               "  - resource: example.com/nic\n"
               "    pattern: '(?<physical>[a-z]+[0-9]+)v[0-9]+'\n"
               "  - resource: '*'\n"
               "    pattern: '^(?P<alias_pci>[0-9a-f:.]+)/card[0-9]+$'\n",
               path, sizeof(path));
    CHECK_OK(config_init(&c));
    CHECK(c.identity == NULL);
    CHECK_OK(config_load(&c, path, &e));
    s = jsonx_dumps(c.identity);
    CHECK_STREQ(s, "[{\"pattern\":\"(?<physical>[a-z]+[0-9]+)v[0-9]+\",\"resource\":"
                   "\"example.com/nic\"},{\"pattern\":\"^(?P<alias_pci>[0-9a-f:.]+)/card[0-9]+$\","
                   "\"resource\":\"*\"}]");
    free(s);
    config_release(&c);
    unlink(path);

    /* an empty key is no rules */
    write_file("identity-empty.yaml", "identity:\n", path, sizeof(path));
    CHECK_OK(config_init(&c));
    CHECK_OK(config_load(&c, path, &e));
    CHECK(c.identity == NULL);
    config_release(&c);
    unlink(path);

    /* a bad pattern: the message names the entry's pattern and the file */
    write_file("identity-bad.yaml",
               "identity:\n"
               "  - {resource: '*', pattern: '(?<physical>x)y'}\n"
               "  - {resource: '*', pattern: '(?<physical>x'}\n",
               path, sizeof(path));
    CHECK_OK(config_init(&c));
    e = (struct error){0};
    CHECK_EQ_INT(config_load(&c, path, &e), ERR_INVAL);
    CHECK(strstr(e.msg, "key \"identity[1].pattern\"") != NULL);
    CHECK(strstr(e.msg, "Unmatched") != NULL);
    CHECK(strstr(e.msg, path) != NULL);
    CHECK(c.identity == NULL);
    config_release(&c);
    unlink(path);

    /* a group of another name, a key of another kind */
    write_file("identity-name.yaml", "identity:\n  - {resource: a.io/b, pattern: '(?<gpu>x)y'}\n",
               path, sizeof(path));
    CHECK_OK(config_init(&c));
    e = (struct error){0};
    CHECK_EQ_INT(config_load(&c, path, &e), ERR_INVAL);
    CHECK(strstr(e.msg, "identity[0].pattern") != NULL && strstr(e.msg, "\"gpu\"") != NULL);
    config_release(&c);
    unlink(path);
    write_file("identity-map.yaml", "identity: {resource: a.io/b, pattern: '(?<physical>x)y'}\n",
               path, sizeof(path));
    CHECK_OK(config_init(&c));
    e = (struct error){0};
    CHECK_EQ_INT(config_load(&c, path, &e), ERR_INVAL);
    CHECK(strstr(e.msg, "key \"identity\"") != NULL && strstr(e.msg, path) != NULL);
    config_release(&c);
    unlink(path);
}

static void setup(void)
{
    CHECK(mkdtemp(tmpdir) != NULL);
}

static void teardown(void)
{
    CHECK_OK(rmdir(tmpdir));
}

TEST_MAIN(setup, test_defaults, test_set, test_load, test_apply, test_static_devices_bad_resource,
          test_identity, teardown)
