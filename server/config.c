/* SPDX-License-Identifier: Apache-2.0 */
/* config.c - the option table shared by the YAML file and the flags. */
#include "../common/common.h"
#include "../common/cfg.h"
#include "../common/names.h"
#include "config.h"
#include "validate.h"

#include <unistd.h>

enum opt_type { T_STR, T_DURATION, T_COUNT, T_ENUM };

struct opt {
    const char *key;      /* file spelling */
    enum opt_type type;   /* how to parse */
    size_t off;           /* field offset in struct config */
    const char *choices;  /* for T_ENUM: "|a|b|" */
};

#define OFF(f) offsetof(struct config, f)
static const struct opt opts[] = {
    {"db", T_STR, OFF(db), NULL},
    {"socket", T_STR, OFF(socket), NULL},
    {"listen", T_STR, OFF(listen), NULL},
    {"node_name", T_STR, OFF(node_name), NULL},
    {"source", T_ENUM, OFF(source), "|api|kubelet|"},
    {"kubelet_socket", T_STR, OFF(kubelet_socket), NULL},
    {"kubelet_interval", T_DURATION, OFF(kubelet_interval_ms), NULL},
    {"write_token_file", T_STR, OFF(write_token_file), NULL},
    {"history", T_COUNT, OFF(history), NULL},
    {"log_format", T_ENUM, OFF(log_format), "|text|json|"},
    {"log_level", T_ENUM, OFF(log_level), "|err|warn|info|debug|"},
};

static err_t set_str(char **field, const char *v)
{
    char *s = strdup(v);

    if (!s)
        return ERR_NOMEM;
    free(*field);
    *field = s;
    return ERR_OK;
}

err_t config_init(struct config *c)
{
    const char *node = getenv("NODE_NAME");
    char host[256] = "localhost";
    err_t rc = ERR_OK;

    memset(c, 0, sizeof(*c));
    if (!node || !*node) {
        if (gethostname(host, sizeof(host) - 1) != 0)
            snprintf(host, sizeof(host), "localhost");
        node = host;
    }
    rc |= set_str(&c->db, "/var/lib/podresd/podresd.db");
    rc |= set_str(&c->socket, "/run/podresd/podresd.sock");
    rc |= set_str(&c->node_name, node);
    rc |= set_str(&c->source, "api");
    rc |= set_str(&c->kubelet_socket, "/var/lib/kubelet/pod-resources/kubelet.sock");
    rc |= set_str(&c->log_format, "text");
    rc |= set_str(&c->log_level, "info");
    c->kubelet_interval_ms = 2000;
    c->history = 10000;
    return rc ? ERR_NOMEM : ERR_OK;
}

void config_release(struct config *c)
{
    size_t i;

    for (i = 0; i < ARRAY_SIZE(opts); i++) {
        if (opts[i].type == T_STR || opts[i].type == T_ENUM)
            free(*(char **)((char *)c + opts[i].off));
    }
    json_decref(c->devices);
    memset(c, 0, sizeof(*c));
}

static const struct opt *find(const char *key)
{
    char k[64];
    size_t i;

    snprintf(k, sizeof(k), "%s", key);
    for (i = 0; k[i]; i++) {
        if (k[i] == '-')
            k[i] = '_';
    }
    for (i = 0; i < ARRAY_SIZE(opts); i++) {
        if (strcmp(opts[i].key, k) == 0)
            return &opts[i];
    }
    return NULL;
}

err_t config_set(struct config *c, const char *key, const char *value, char *msg, size_t cap)
{
    const struct opt *o = find(key);
    void *field;
    char pat[80];
    long long n;

    if (!o) {
        snprintf(msg, cap, "unknown key \"%s\"", key);
        return ERR_INVAL;
    }
    field = (char *)c + o->off;
    switch (o->type) {
    case T_STR:
        if (*value)
            return set_str(field, value);
        break;
    case T_ENUM:
        snprintf(pat, sizeof(pat), "|%s|", value);
        if (*value && !strchr(value, '|') && strstr(o->choices, pat))
            return set_str(field, value);
        snprintf(msg, cap, "key \"%s\": \"%s\" is not one of %s", o->key, value, o->choices);
        return ERR_INVAL;
    case T_DURATION: {
        uint64_t ms = 0;

        if (!cfg_parse_duration(value, &ms) && ms > 0) {
            *(uint64_t *)field = ms;
            return ERR_OK;
        }
        break;
    }
    case T_COUNT:
        if (!cfg_parse_int(value, 1, 100000000, &n)) {
            *(uint64_t *)field = (uint64_t)n;
            return ERR_OK;
        }
        break;
    }
    snprintf(msg, cap, "key \"%s\": bad value \"%s\"", o->key, value);
    return ERR_INVAL;
}

/* devices: [{resourceName, devices: [...]}] -> validated. */
static err_t static_devices(struct config *c, const json_t *list, char *msg, size_t cap)
{
    json_t *out = json_array(), *e, *devs, *body;
    char why[512] = "";
    size_t i;
    uint64_t ttl;
    err_t rc = json_is_array(list) ? ERR_OK : ERR_INVAL;

    if (rc)
        snprintf(msg, cap, "key \"devices\": must be a list of {resourceName, devices}");
    json_array_foreach(rc ? NULL : list, i, e) {
        const char *res = json_string_value(json_object_get(e, "resourceName"));

        if (!json_is_object(e) || !res || json_object_size(e) != 2) {
            snprintf(msg, cap, "key \"devices[%zu]\": needs exactly resourceName and devices", i);
            rc = ERR_INVAL;
            break;
        }
        if (!names_is_resource_name(res)) {
            snprintf(msg, cap, "key \"devices[%zu]\" (%s): invalid resource name: use "
                     "domain/name", i, res);
            rc = ERR_INVAL;
            break;
        }
        body = json_pack("{s:O}", "devices", json_object_get(e, "devices"));
        rc = body ? validate_devices_put(body, &devs, &ttl, why, sizeof(why)) : ERR_NOMEM;
        json_decref(body);
        if (rc) {
            snprintf(msg, cap, "key \"devices[%zu]\" (%s): %s", i, res, why);
            break;
        }
        json_array_append_new(out, json_pack("{s:s,s:o}", "resourceName", res, "devices", devs));
    }
    if (rc) {
        json_decref(out);
        return rc == ERR_UNPROCESSABLE ? ERR_INVAL : rc;
    }
    json_decref(c->devices);
    c->devices = out;
    return ERR_OK;
}

err_t config_apply(struct config *c, const json_t *doc, char *msg, size_t cap)
{
    const char *key;
    json_t *v;
    char num[32];
    err_t rc;

    if (!json_is_object(doc)) {
        snprintf(msg, cap, "the document must be a mapping of keys");
        return ERR_INVAL;
    }
    json_object_foreach((json_t *)doc, key, v) {
        if (strcmp(key, "devices") == 0) {
            rc = static_devices(c, v, msg, cap);
        } else if (json_is_string(v)) {
            rc = config_set(c, key, json_string_value(v), msg, cap);
        } else if (json_is_integer(v)) {
            snprintf(num, sizeof(num), "%lld", (long long)json_integer_value(v));
            rc = config_set(c, key, num, msg, cap);
        } else if (!find(key)) {
            snprintf(msg, cap, "unknown key \"%s\"", key);
            rc = ERR_INVAL;
        } else {
            snprintf(msg, cap, "key \"%s\": must be a string or a number", key);
            rc = ERR_INVAL;
        }
        if (rc)
            return rc;
    }
    return ERR_OK;
}

err_t config_load(struct config *c, const char *path, char *msg, size_t cap)
{
    json_t *doc = NULL;
    char why[512] = "";
    err_t rc = cfg_yaml_load(path, &doc, why, sizeof(why));

    if (!rc)
        rc = config_apply(c, doc, why, sizeof(why));
    json_decref(doc);
    if (rc)
        snprintf(msg, cap, "config file '%s': %s", path, why);
    return rc;
}
