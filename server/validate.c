/* SPDX-License-Identifier: Apache-2.0 */
/* validate.c - request body validation. Every function walks the body once,
 * builds a canonical copy and rejects anything it does not understand. */
#include "../common/common.h"
#include "../common/jsonx.h"
#include "../common/names.h"
#include "validate.h"

#include <stdarg.h>

#define MAX_ITEMS 4096  /* containers, devices per request */
#define MAX_COUNT 1024  /* devices asked for in one request entry */
#define MAX_TTL_S 86400 /* one day */

__attribute__((format(printf, 4, 5))) static err_t bad(char *msg, size_t cap, err_t rc,
                                                       const char *fmt, ...)
{
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(msg, cap, fmt, ap);
    va_end(ap);
    return rc;
}

static err_t need_type(const json_t *v, json_type t, const char *field, char *msg, size_t cap)
{
    static const char *names[] = {"object", "array",   "string",  "integer",
                                  "number", "boolean", "boolean", "null"};

    if (v && json_typeof(v) == t)
        return ERR_OK;
    if (!v)
        return bad(msg, cap, ERR_UNPROCESSABLE, "%s: Required value", field);
    return bad(msg, cap, ERR_INVAL, "field \"%s\" must be a JSON %s", field, names[t]);
}

int validate_uid(const char *uid)
{
    size_t i, n = strlen(uid);

    if (n > 128)
        return 0;
    for (i = 0; i < n; i++) {
        char c = uid[i];

        if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
              c == '-' || c == '.' || c == '_'))
            return 0;
    }
    return 1;
}

/* topology {"nodes":[{"ID":n}]} -> sorted unique [n...]. */
static err_t topology(const json_t *t, json_t **numa, char *msg, size_t cap)
{
    static const char *const tkeys[] = {"nodes", NULL}, *const nkeys[] = {"ID", NULL};
    json_t *nodes, *n, *id, *out;
    size_t i, j;
    err_t rc;

    out = json_array();
    if (!out)
        return ERR_NOMEM;
    *numa = out;
    if (!t || json_is_null(t))
        return ERR_OK;
    rc = need_type(t, JSON_OBJECT, "topology", msg, cap);
    if (!rc)
        rc = jsonx_check_keys(t, tkeys, "topology", msg, cap);
    nodes = json_object_get(t, "nodes");
    if (!rc && nodes && !json_is_null(nodes))
        rc = need_type(nodes, JSON_ARRAY, "topology.nodes", msg, cap);
    json_array_foreach(rc ? NULL : nodes, i, n) {
        rc = need_type(n, JSON_OBJECT, "topology.nodes[]", msg, cap);
        if (!rc)
            rc = jsonx_check_keys(n, nkeys, "topology.nodes[]", msg, cap);
        id = json_object_get(n, "ID");
        if (!rc)
            rc = need_type(id, JSON_INTEGER, "topology.nodes[].ID", msg, cap);
        if (!rc && (json_integer_value(id) < 0 || json_integer_value(id) > 4095))
            rc = bad(msg, cap, ERR_UNPROCESSABLE, "topology.nodes[].ID must be 0..4095");
        if (rc)
            break;
        for (j = 0; j < json_array_size(out); j++) {
            if (json_integer_value(json_array_get(out, j)) >= json_integer_value(id))
                break;
        }
        if (j == json_array_size(out) ||
            json_integer_value(json_array_get(out, j)) != json_integer_value(id))
            json_array_insert_new(out, j, json_integer(json_integer_value(id)));
    }
    if (rc) {
        json_decref(out);
        *numa = NULL;
    }
    return rc;
}

static err_t properties(const json_t *p, json_t **out, char *msg, size_t cap)
{
    const char *k;
    json_t *v;

    if (!p || json_is_null(p)) {
        *out = json_object();
        return *out ? ERR_OK : ERR_NOMEM;
    }
    if (need_type(p, JSON_OBJECT, "properties", msg, cap))
        return ERR_INVAL;
    json_object_foreach((json_t *)p, k, v) {
        if (!json_is_string(v))
            return bad(msg, cap, ERR_INVAL, "properties.%s must be a string", k);
        if (strlen(k) == 0 || strlen(k) > 253 || strlen(json_string_value(v)) > 4096)
            return bad(msg, cap, ERR_UNPROCESSABLE,
                       "properties.%s: keys are 1..253 and values at most 4096 bytes", k);
    }
    *out = json_deep_copy(p);
    return *out ? ERR_OK : ERR_NOMEM;
}

static err_t one_device(const json_t *d, json_t *seen, json_t **out, char *msg, size_t cap)
{
    static const char *const keys[] = {"id", "health", "topology", "properties", NULL};
    const json_t *id = json_object_get(d, "id"), *h = json_object_get(d, "health");
    const char *health = "Healthy";
    json_t *numa = NULL, *props = NULL;
    err_t rc = need_type(d, JSON_OBJECT, "devices[]", msg, cap);

    if (!rc)
        rc = jsonx_check_keys(d, keys, "devices[]", msg, cap);
    if (!rc)
        rc = need_type(id, JSON_STRING, "devices[].id", msg, cap);
    if (!rc && !names_is_device_id(json_string_value(id)))
        rc = bad(msg, cap, ERR_UNPROCESSABLE,
                 "devices[].id \"%s\" is invalid: use 1..253 of [A-Za-z0-9._:-]",
                 json_string_value(id));
    if (!rc && json_object_get(seen, json_string_value(id)))
        rc = bad(msg, cap, ERR_UNPROCESSABLE, "devices[].id \"%s\" is listed twice",
                 json_string_value(id));
    if (!rc && h) {
        rc = need_type(h, JSON_STRING, "devices[].health", msg, cap);
        health = json_string_value(h);
        if (!rc && strcmp(health, "Healthy") != 0 && strcmp(health, "Unhealthy") != 0)
            rc = bad(msg, cap, ERR_UNPROCESSABLE, "devices[].health must be Healthy or Unhealthy");
    }
    if (!rc)
        rc = topology(json_object_get(d, "topology"), &numa, msg, cap);
    if (!rc)
        rc = properties(json_object_get(d, "properties"), &props, msg, cap);
    if (!rc) {
        json_object_set_new(seen, json_string_value(id), json_true());
        *out = json_pack("{s:O,s:s,s:o,s:o}", "id", id, "health", health, "numa", numa,
                         "properties", props);
        return *out ? ERR_OK : ERR_NOMEM;
    }
    json_decref(numa);
    json_decref(props);
    return rc;
}

err_t validate_devices_put(const json_t *body, json_t **devices, uint64_t *ttl_ms, char *msg,
                           size_t cap)
{
    static const char *const keys[] = {"devices", "ttlSeconds", NULL};
    json_t *list = json_object_get(body, "devices"), *ttl = json_object_get(body, "ttlSeconds");
    json_t *out = json_array(), *seen = json_object(), *d, *c;
    size_t i;
    err_t rc = need_type(body, JSON_OBJECT, "body", msg, cap);

    if (!rc)
        rc = jsonx_check_keys(body, keys, NULL, msg, cap);
    if (!rc)
        rc = need_type(list, JSON_ARRAY, "devices", msg, cap);
    if (!rc && json_array_size(list) > MAX_ITEMS)
        rc = bad(msg, cap, ERR_UNPROCESSABLE, "too many devices (at most 4096)");
    if (!rc && ttl && !json_is_null(ttl)) {
        rc = need_type(ttl, JSON_INTEGER, "ttlSeconds", msg, cap);
        if (!rc && (json_integer_value(ttl) < 1 || json_integer_value(ttl) > MAX_TTL_S))
            rc = bad(msg, cap, ERR_UNPROCESSABLE, "ttlSeconds must be 1..86400");
    }
    json_array_foreach(rc ? NULL : list, i, d) {
        rc = one_device(d, seen, &c, msg, cap);
        if (rc)
            break;
        json_array_append_new(out, c);
    }
    json_decref(seen);
    if (rc) {
        json_decref(out);
        return rc;
    }
    *devices = out;
    *ttl_ms = ttl && json_is_integer(ttl) ? (uint64_t)json_integer_value(ttl) * 1000 : 0;
    return ERR_OK;
}

err_t validate_health_patch(const json_t *body, const char **health, char *msg, size_t cap)
{
    static const char *const keys[] = {"health", NULL};
    const json_t *h = json_object_get(body, "health");
    err_t rc = need_type(body, JSON_OBJECT, "body", msg, cap);

    if (!rc)
        rc = jsonx_check_keys(body, keys, NULL, msg, cap);
    if (!rc)
        rc = need_type(h, JSON_STRING, "health", msg, cap);
    if (!rc && strcmp(json_string_value(h), "Healthy") != 0 &&
        strcmp(json_string_value(h), "Unhealthy") != 0)
        rc = bad(msg, cap, ERR_UNPROCESSABLE, "health must be Healthy or Unhealthy");
    if (!rc)
        *health = json_string_value(h);
    return rc;
}

/* [{"resourceName","deviceIds"}] checked; 'seen' catches a device twice in a pod. */
/* A group's topology, if given, is a topology like a device's. */
static err_t group_topology(const json_t *t, char *msg, size_t cap)
{
    json_t *numa = NULL;
    err_t rc = topology(t, &numa, msg, cap);

    json_decref(numa);
    return rc;
}

static err_t device_groups(const json_t *groups, json_t *seen, json_t **out, char *msg, size_t cap)
{
    static const char *const keys[] = {"resourceName", "deviceIds", "topology", NULL};
    json_t *res = json_array(), *g, *r, *ids, *id;
    size_t i, j;
    char key[600];
    err_t rc = ERR_OK;

    if (groups && !json_is_null(groups))
        rc = need_type(groups, JSON_ARRAY, "containers[].devices", msg, cap);
    json_array_foreach(rc ? NULL : groups, i, g) {
        rc = need_type(g, JSON_OBJECT, "containers[].devices[]", msg, cap);
        if (!rc)
            rc = jsonx_check_keys(g, keys, "containers[].devices[]", msg, cap);
        r = json_object_get(g, "resourceName");
        ids = json_object_get(g, "deviceIds");
        if (!rc)
            rc = need_type(r, JSON_STRING, "containers[].devices[].resourceName", msg, cap);
        if (!rc && !names_is_resource_name(json_string_value(r)))
            rc = bad(msg, cap, ERR_UNPROCESSABLE,
                     "resourceName \"%s\" is invalid: use domain/name, e.g. vendor.com/gpu",
                     json_string_value(r));
        if (!rc)
            rc = need_type(ids, JSON_ARRAY, "containers[].devices[].deviceIds", msg, cap);
        if (!rc) /* checked, then left out: the store derives it from the devices */
            rc = group_topology(json_object_get(g, "topology"), msg, cap);
        if (!rc && (json_array_size(ids) == 0 || json_array_size(ids) > MAX_COUNT))
            rc = bad(msg, cap, ERR_UNPROCESSABLE, "deviceIds of \"%s\" must list 1..1024 ids",
                     json_string_value(r));
        json_array_foreach(rc ? NULL : ids, j, id) {
            rc = need_type(id, JSON_STRING, "containers[].devices[].deviceIds[]", msg, cap);
            if (!rc && !names_is_device_id(json_string_value(id)))
                rc = bad(msg, cap, ERR_UNPROCESSABLE, "device id \"%s\" is invalid%s",
                         json_string_value(id), "");
            if (!rc)
                str_join(key, sizeof(key), json_string_value(r), '|', json_string_value(id));
            if (!rc && json_object_get(seen, key))
                rc = bad(msg, cap, ERR_UNPROCESSABLE, "device %s %s is listed twice in the pod",
                         json_string_value(r), json_string_value(id));
            if (rc)
                break;
            json_object_set_new(seen, key, json_true());
        }
        if (rc)
            break;
        json_array_append_new(
            res, jsonx_object("resourceName", json_incref(r), "deviceIds", json_incref(ids), NULL));
    }
    if (rc) {
        json_decref(res);
        return rc;
    }
    *out = res;
    return ERR_OK;
}

static err_t int_list(const json_t *v, const char *field, json_t **out, char *msg, size_t cap)
{
    json_t *x;
    size_t i;

    if (!v || json_is_null(v)) {
        *out = json_array();
        return ERR_OK;
    }
    if (need_type(v, JSON_ARRAY, field, msg, cap))
        return ERR_INVAL;
    json_array_foreach(v, i, x) {
        if (!json_is_integer(x))
            return bad(msg, cap, ERR_INVAL, "%s[] must be integers", field);
        if (json_integer_value(x) < 0 || json_integer_value(x) > 1048575)
            return bad(msg, cap, ERR_UNPROCESSABLE, "%s[] must be 0..1048575", field);
    }
    *out = json_deep_copy(v);
    return ERR_OK;
}

static err_t memory_list(const json_t *v, json_t **out, char *msg, size_t cap)
{
    static const char *const keys[] = {"memoryType", "size", "topology", NULL};
    json_t *res = json_array(), *m, *t, *s, *numa = NULL;
    size_t i;
    err_t rc = ERR_OK;

    if (v && !json_is_null(v))
        rc = need_type(v, JSON_ARRAY, "containers[].memory", msg, cap);
    json_array_foreach(rc || !v ? NULL : v, i, m) {
        rc = need_type(m, JSON_OBJECT, "containers[].memory[]", msg, cap);
        if (!rc)
            rc = jsonx_check_keys(m, keys, "containers[].memory[]", msg, cap);
        t = json_object_get(m, "memoryType");
        s = json_object_get(m, "size");
        if (!rc)
            rc = need_type(t, JSON_STRING, "containers[].memory[].memoryType", msg, cap);
        if (!rc)
            rc = need_type(s, JSON_INTEGER, "containers[].memory[].size", msg, cap);
        if (!rc && json_integer_value(s) < 0)
            rc = bad(msg, cap, ERR_UNPROCESSABLE, "memory size must be >= 0");
        if (!rc && strlen(json_string_value(t)) > 63)
            rc = bad(msg, cap, ERR_UNPROCESSABLE, "memoryType must be at most 63 bytes");
        if (!rc)
            rc = topology(json_object_get(m, "topology"), &numa, msg, cap);
        if (rc)
            break;
        json_array_append_new(res, json_pack("{s:O,s:O,s:o}", "memoryType", t, "size", s,
                                             "topology", json_pack("{s:[]}", "nodes")));
        {
            json_t *nodes = json_object_get(json_object_get(json_array_get(res, i), "topology"),
                                            "nodes"),
                   *n;
            size_t j;

            json_array_foreach(numa, j, n)
                json_array_append_new(nodes, json_pack("{s:O}", "ID", n));
        }
        json_decref(numa);
        numa = NULL;
    }
    if (rc) {
        json_decref(res);
        return rc;
    }
    *out = res;
    return ERR_OK;
}

/* Common container checks; 'kind' selects the fields allowed. */
enum ckind {
    C_BIND,
    C_ALLOC,
    C_RESV
};

static err_t container_name(const json_t *c, json_t *names, char *msg, size_t cap)
{
    const json_t *n = json_object_get(c, "name");
    err_t rc = need_type(n, JSON_STRING, "containers[].name", msg, cap);

    if (!rc && !names_is_dns1123_label(json_string_value(n)))
        rc = bad(msg, cap, ERR_UNPROCESSABLE,
                 "container name \"%s\" is invalid: a DNS-1123 label is required",
                 json_string_value(n));
    if (!rc && json_object_get(names, json_string_value(n)))
        rc = bad(msg, cap, ERR_UNPROCESSABLE, "container name \"%s\" is listed twice",
                 json_string_value(n));
    if (!rc)
        json_object_set_new(names, json_string_value(n), json_true());
    return rc;
}

static err_t requests(const json_t *r, json_t **out, char *msg, size_t cap)
{
    const char *k;
    json_t *v;

    err_t rc = need_type(r, JSON_OBJECT, "containers[].requests", msg, cap);

    if (rc)
        return rc;
    json_object_foreach((json_t *)r, k, v) {
        if (!names_is_resource_name(k))
            return bad(msg, cap, ERR_UNPROCESSABLE, "requests: resource name \"%s\" is invalid", k);
        if (!json_is_integer(v))
            return bad(msg, cap, ERR_INVAL, "requests.%s must be an integer", k);
        if (json_integer_value(v) < 0 || json_integer_value(v) > MAX_COUNT)
            return bad(msg, cap, ERR_UNPROCESSABLE, "requests.%s must be 0..1024", k);
    }
    *out = json_deep_copy(r);
    return *out ? ERR_OK : ERR_NOMEM;
}

static err_t one_container(const json_t *c, enum ckind kind, json_t *names, json_t *seen,
                           json_t **out, char *msg, size_t cap)
{
    static const char *const bkeys[] = {"name", "devices", "cpuIds", "memory", NULL};
    static const char *const akeys[] = {"name", "requests", NULL};
    static const char *const rkeys[] = {"name", "devices", NULL};
    json_t *devs = NULL, *cpus = NULL, *mem = NULL, *req = NULL, *name;
    err_t rc = need_type(c, JSON_OBJECT, "containers[]", msg, cap);

    if (!rc)
        rc = jsonx_check_keys(c,
                              kind == C_BIND    ? bkeys
                              : kind == C_ALLOC ? akeys
                                                : rkeys,
                              "containers[]", msg, cap);
    if (!rc)
        rc = container_name(c, names, msg, cap);
    if (!rc && kind == C_ALLOC)
        rc = requests(json_object_get(c, "requests"), &req, msg, cap);
    if (!rc && kind != C_ALLOC)
        rc = device_groups(json_object_get(c, "devices"), seen, &devs, msg, cap);
    if (!rc && kind == C_BIND)
        rc = int_list(json_object_get(c, "cpuIds"), "containers[].cpuIds", &cpus, msg, cap);
    if (!rc && kind == C_BIND)
        rc = memory_list(json_object_get(c, "memory"), &mem, msg, cap);
    if (rc) {
        json_decref(devs);
        json_decref(cpus);
        json_decref(mem);
        json_decref(req);
        return rc;
    }
    name = json_incref(json_object_get(c, "name"));
    if (kind == C_ALLOC)
        *out = jsonx_object("name", name, "requests", req, NULL);
    else if (kind == C_RESV)
        *out = jsonx_object("name", name, "devices", devs, NULL);
    else
        *out = jsonx_object("name", name, "devices", devs, "cpuIds", cpus, "memory", mem, NULL);
    return *out ? ERR_OK : ERR_NOMEM;
}

static err_t containers(const json_t *body, enum ckind kind, json_t **out, char *msg, size_t cap)
{
    json_t *list = json_object_get(body, "containers");
    json_t *res = json_array(), *names = json_object(), *seen = json_object(), *c, *cc;
    size_t i;
    err_t rc = need_type(list, JSON_ARRAY, "containers", msg, cap);

    if (!rc && json_array_size(list) > MAX_ITEMS)
        rc = bad(msg, cap, ERR_UNPROCESSABLE, "too many containers");
    json_array_foreach(rc ? NULL : list, i, c) {
        rc = one_container(c, kind, names, seen, &cc, msg, cap);
        if (rc)
            break;
        json_array_append_new(res, cc);
    }
    json_decref(names);
    json_decref(seen);
    if (rc) {
        json_decref(res);
        return rc;
    }
    *out = res;
    return ERR_OK;
}

static err_t uid_field(const json_t *body, const char **uid, char *msg, size_t cap)
{
    const json_t *u = json_object_get(body, "uid");

    *uid = "";
    if (!u || json_is_null(u))
        return ERR_OK;
    if (need_type(u, JSON_STRING, "uid", msg, cap))
        return ERR_INVAL;
    if (!validate_uid(json_string_value(u)))
        return bad(msg, cap, ERR_UNPROCESSABLE, "uid \"%s\" is invalid: use [A-Za-z0-9._-]",
                   json_string_value(u));
    *uid = json_string_value(u);
    return ERR_OK;
}

static err_t pod_like(const json_t *body, enum ckind kind, const char **uid, json_t **out,
                      char *msg, size_t cap)
{
    static const char *const keys[] = {"uid", "containers", NULL};
    static const char *const rkeys[] = {"containers", NULL};
    const char *u = "";
    err_t rc = need_type(body, JSON_OBJECT, "body", msg, cap);

    if (!rc)
        rc = jsonx_check_keys(body, kind == C_RESV ? rkeys : keys, NULL, msg, cap);
    if (!rc && kind != C_RESV)
        rc = uid_field(body, &u, msg, cap);
    if (!rc)
        rc = containers(body, kind, out, msg, cap);
    if (!rc && uid)
        *uid = u;
    return rc;
}

err_t validate_pod_put(const json_t *body, const char **uid, json_t **containers_out, char *msg,
                       size_t cap)
{
    return pod_like(body, C_BIND, uid, containers_out, msg, cap);
}

err_t validate_allocate(const json_t *body, const char **uid, json_t **request, char *msg,
                        size_t cap)
{
    return pod_like(body, C_ALLOC, uid, request, msg, cap);
}

err_t validate_reservation(const json_t *body, json_t **containers_out, char *msg, size_t cap)
{
    return pod_like(body, C_RESV, NULL, containers_out, msg, cap);
}

/* ---- DELETE ---- */

/* preconditions.uid: a pod's uid, as ?uid= (both: they must agree). */
static err_t precondition_uid(const json_t *v, int has_uid, const char **uid, char *msg, size_t cap)
{
    const char *s = json_string_value(v);

    if (!has_uid)
        return bad(msg, cap, ERR_INVAL, "preconditions.uid: a reservation has no uid");
    if (!s || !validate_uid(s))
        return bad(msg, cap, ERR_INVAL, "preconditions.uid is not a valid uid");
    if (*uid && strcmp(*uid, s) != 0)
        return bad(msg, cap, ERR_INVAL,
                   "query uid=\"%.200s\" and preconditions.uid \"%.200s\" differ", *uid, s);
    *uid = s;
    return ERR_OK;
}

/* preconditions.resourceVersion: the object's revision, as a decimal string. */
static err_t precondition_rev(const json_t *v, uint64_t *rev, char *msg, size_t cap)
{
    const char *s = json_string_value(v);
    char *end = NULL;
    uint64_t n = 0;

    errno = 0;
    if (s && *s >= '1' && *s <= '9' && strspn(s, "0123456789") == strlen(s))
        n = strtoull(s, &end, 10);
    if (!s || !end || *end || errno)
        return bad(msg, cap, ERR_INVAL,
                   "preconditions.resourceVersion must be the object's revision as a string, "
                   "e.g. \"42\"");
    *rev = n;
    return ERR_OK;
}

/* The body's own fields: a DeleteOptions, not a dry run. */
static err_t delete_body(const json_t *body, char *msg, size_t cap)
{
    const json_t *k = json_object_get(body, "kind"), *v = json_object_get(body, "dryRun");
    const char *kind = json_string_value(k);

    if (!json_is_object(body))
        return bad(msg, cap, ERR_INVAL, "request body must be a JSON object");
    if (k && (!kind || strcmp(kind, "DeleteOptions") != 0))
        return bad(msg, cap, ERR_INVAL,
                   "the body of a DELETE is DeleteOptions, not kind \"%.100s\"", kind ? kind : "?");
    if (v && !json_is_null(v) && !(json_is_array(v) && json_array_size(v) == 0))
        return bad(msg, cap, ERR_INVAL,
                   "dryRun is not supported: a DELETE here is never a dry run");
    return ERR_OK;
}

err_t validate_delete_options(const json_t *body, int has_uid, const char **uid, uint64_t *rev,
                              char *msg, size_t cap)
{
    const json_t *pre = json_object_get(body, "preconditions"), *v;
    const char *u = *uid;
    uint64_t r = 0;
    err_t rc = delete_body(body, msg, cap);

    if (!rc && pre && !json_is_null(pre) && !json_is_object(pre))
        rc = bad(msg, cap, ERR_INVAL, "preconditions must be an object");
    v = json_object_get(rc ? NULL : pre, "uid");
    if (v && !json_is_null(v))
        rc = precondition_uid(v, has_uid, &u, msg, cap);
    v = json_object_get(rc ? NULL : pre, "resourceVersion");
    if (v && !json_is_null(v))
        rc = precondition_rev(v, &r, msg, cap);
    if (!rc) {
        *uid = u;
        *rev = r;
    }
    return rc;
}
