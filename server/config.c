/* SPDX-License-Identifier: Apache-2.0 */
/* config.c - podresd's option table and usage, and the static device list
 * and identity rules of its config file. */
#include "../common/common.h"
#include "../common/names.h"
#include "../common/opts.h"
#include "config.h"
#include "http.h"
#include "ident.h"
#include "validate.h"

#include <sys/stat.h>
#include <unistd.h>

#define OFF(f) offsetof(struct config, f)

err_t config_read_token(const char *path, char **out, struct error *e)
{
    char buf[4096];
    struct stat sb;
    FILE *f = fopen(path, "r");
    size_t n;
    err_t rc = ERR_OK;

    if (!f || fstat(fileno(f), &sb) != 0) {
        rc = errorf(e, ERR_IO, "%s", strerror(errno));
        goto out;
    }
    /* As ssh with a private key: a secret others may read is not one, nor
     * one another user owns (and so may rewrite). */
    if (sb.st_uid != geteuid() && sb.st_uid != 0) {
        rc = errorf(e, ERR_INVAL,
                    "owned by uid %u: a token file must be owned by podresd's user (uid %u) or "
                    "root",
                    (unsigned)sb.st_uid, (unsigned)geteuid());
        goto out;
    }
    if (sb.st_mode & 077) {
        rc = errorf(e, ERR_INVAL,
                    "permissions %04o are too open: group or others may read or write it; chmod "
                    "0600 it",
                    (unsigned)(sb.st_mode & 07777));
        goto out;
    }
    n = fread(buf, 1, sizeof(buf) - 1, f);
    buf[n] = '\0';
    while (n && (buf[n - 1] == '\n' || buf[n - 1] == '\r' || buf[n - 1] == ' '))
        buf[--n] = '\0';
    if (n == 0 || strchr(buf, '\n')) {
        rc = errorf(e, ERR_INVAL, "must hold one non-empty line (the token)");
        goto out;
    }
    *out = strdup(buf);
    if (!*out)
        rc = errorf(e, ERR_NOMEM, "out of memory");
out:
    if (f)
        fclose(f);
    return rc;
}

/* The token is read at start: a file config_read_token refuses stops
 * start-up here, with the key named. Start-up is single-threaded. */
static const char *token_file_ok(const char *path)
{
    static struct error why;
    char *token = NULL;
    err_t rc = config_read_token(path, &token, &why);

    free(token);
    return rc ? error_msg(&why) : NULL;
}

static const char usage[] =
    "usage: podresd [--config FILE] [--db PATH] [--socket PATH] [--listen HOST:PORT]\n"
    "               [--metrics-listen HOST:PORT] [--node-name NAME] [--source api|kubelet] [--kubelet-socket PATH]\n"
    "               [--kubelet-interval DURATION] [--write-token-file PATH] [--history N]\n"
    "               [--watch-memory MIB] [--history-retention DURATION]\n"
    "               [--history-max-intervals N]\n"
    "               [--log-format text|json] [--log-level err|warn|info|debug]\n"
    "               [--version] [--help]\n"
    "Serves device bindings as REST/JSON on a unix socket (and loopback TCP);\n"
    "--metrics-listen serves /metrics, /healthz and /readyz alone on any address.\n"
    "Flags win over the YAML config file, whose keys are the flag names with '_'.\n";

static const struct opt opts[] = {
    {"db", OPT_STR, OFF(db), .def = "/var/lib/podresd/podresd.db"},
    {"socket", OPT_STR, OFF(socket), .check = http_socket_check,
     .def = "/run/podresd/podresd.sock"},
    {"listen", OPT_STR, OFF(listen), .check = http_listen_check},
    {"metrics_listen", OPT_STR, OFF(metrics_listen), .check = http_metrics_listen_check},
    {"node_name", OPT_STR, OFF(node_name), .check = names_node_name_check, .env = "NODE_NAME",
     .def_host = true},
    {"source", OPT_ENUM, OFF(source), "|api|kubelet|", .def = "api"},
    {"kubelet_socket", OPT_STR, OFF(kubelet_socket), .check = http_socket_check,
     .def = "/var/lib/kubelet/pod-resources/kubelet.sock"},
    {"kubelet_interval", OPT_DURATION, OFF(kubelet_interval_ms), .def = "2s"},
    {"write_token_file", OPT_STR, OFF(write_token_file), .check = token_file_ok},
    {"history", OPT_COUNT, OFF(history), .def = "10000"},
    {"watch_memory", OPT_COUNT, OFF(watch_memory), .def = "64"},
    {"history_retention", OPT_DURATION, OFF(history_retention_ms), .def = "90d"},
    {"history_max_intervals", OPT_COUNT, OFF(history_max_intervals), .def = "10000000"},
    OPTS_LOG(struct config),
};

static err_t apply_file(void *c, const json_t *doc, struct error *e)
{
    return config_apply(c, doc, e);
}

static const struct opts_spec spec = {"podresd", usage, opts, ARRAY_SIZE(opts), NULL, apply_file};

err_t config_init(struct config *c)
{
    memset(c, 0, sizeof(*c));
    return opts_defaults(opts, ARRAY_SIZE(opts), c, NULL);
}

void config_release(struct config *c)
{
    opts_release(opts, ARRAY_SIZE(opts), c);
    json_decref(c->devices);
    json_decref(c->identity);
    memset(c, 0, sizeof(*c));
}

err_t config_set(struct config *c, const char *key, const char *value, struct error *e)
{
    return opts_set(opts, ARRAY_SIZE(opts), c, key, value, e);
}

/* Each resource once: a second entry would replace the first's set at
 * start, every start (the first's devices added, then deleted). */
static err_t unique_resource(const json_t *list, size_t i, const char *res, struct error *e)
{
    size_t j;

    for (j = 0; j < i; j++) {
        const char *r = json_string_value(json_object_get(json_array_get(list, j), "resourceName"));

        if (r && strcmp(r, res) == 0)
            return errorf(e, ERR_INVAL,
                          "key \"devices[%zu]\" (%s): the resource is listed already "
                          "(devices[%zu]); list its devices once",
                          i, res, j);
    }
    return ERR_OK;
}

/* devices[i], {resourceName, devices}, into *out (new) with its devices
 * validated as a PUT of them would be. */
static err_t one_resource(const json_t *list, size_t i, json_t **out, struct error *e)
{
    const json_t *entry = json_array_get(list, i);
    const char *res = json_string_value(json_object_get(entry, "resourceName"));
    json_t *body, *devs = NULL;
    struct error why = {0};
    uint64_t ttl;
    err_t rc;

    if (!json_is_object(entry) || !res || json_object_size(entry) != 2)
        return errorf(e, ERR_INVAL, "key \"devices[%zu]\": needs exactly resourceName and devices",
                      i);
    if (!names_is_resource_name(res))
        return errorf(e, ERR_INVAL,
                      "key \"devices[%zu]\" (%s): invalid resource name: use domain/name", i, res);
    rc = unique_resource(list, i, res, e);
    if (rc)
        return rc;
    body = json_pack("{s:O}", "devices", json_object_get(entry, "devices"));
    if (!body)
        return errorf(e, ERR_NOMEM, "out of memory");
    rc = validate_devices_put(body, &devs, &ttl, &why);
    json_decref(body);
    if (rc)
        return errorf(e, rc == ERR_UNPROCESSABLE ? ERR_INVAL : rc, "key \"devices[%zu]\" (%s): %s",
                      i, res, error_msg(&why));
    *out = json_pack("{s:s,s:o}", "resourceName", res, "devices", devs);
    return *out ? ERR_OK : errorf(e, ERR_NOMEM, "out of memory");
}

/* devices: [{resourceName, devices: [...]}] -> validated. */
static err_t static_devices(struct config *c, const json_t *list, struct error *e)
{
    json_t *out = NULL, *entry;
    size_t i;
    err_t rc = ERR_OK;

    if (!json_is_array(list))
        return errorf(e, ERR_INVAL, "key \"devices\": must be a list of {resourceName, devices}");
    out = json_array();
    if (!out)
        return errorf(e, ERR_NOMEM, "out of memory");
    for (i = 0; i < json_array_size(list); i++) {
        rc = one_resource(list, i, &entry, e);
        if (rc)
            goto out;
        if (json_array_append_new(out, entry)) {
            rc = errorf(e, ERR_NOMEM, "out of memory");
            goto out;
        }
    }
    json_decref(c->devices);
    c->devices = out;
    out = NULL;
out:
    json_decref(out);
    return rc;
}

/* identity: [{resource, pattern}] -> kept as given once the rules compile,
 * so a bad pattern stops start-up here, naming the key. */
static err_t identity_rules(struct config *c, const json_t *list, struct error *e)
{
    struct ident_rules *rules = NULL;
    json_t *copy = NULL;
    err_t rc = ident_rules_new(list, &rules, e);

    ident_rules_free(rules);
    if (rc || json_is_null(list))
        return rc;
    copy = json_deep_copy(list);
    if (!copy)
        return errorf(e, ERR_NOMEM, "out of memory");
    json_decref(c->identity);
    c->identity = copy;
    return ERR_OK;
}

err_t config_apply(struct config *c, const json_t *doc, struct error *e)
{
    static const char *const skip[] = {"devices", "identity", NULL};
    const json_t *devices = json_object_get(doc, "devices");
    const json_t *identity = json_object_get(doc, "identity");
    err_t rc = opts_apply(opts, ARRAY_SIZE(opts), c, doc, skip, e);

    if (!rc && devices)
        rc = static_devices(c, devices, e);
    if (!rc && identity)
        rc = identity_rules(c, identity, e);
    return rc;
}

err_t config_load(struct config *c, const char *path, struct error *e)
{
    return opts_load_file(&spec, c, path, e);
}

enum opts_next config_load_args(struct config *c, int argc, char **argv)
{
    memset(c, 0, sizeof(*c));
    return opts_load(&spec, c, argc, argv);
}
