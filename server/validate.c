/* SPDX-License-Identifier: Apache-2.0 */
/* validate.c - request body validation. Every function walks the body once,
 * builds a canonical copy and rejects anything it does not understand. Not
 * the store's rules (a device bound elsewhere, a pod that exists): those
 * need the database and live in the store. */
#include "../common/common.h"
#include "../common/jsonx.h"
#include "../common/names.h"
#include "validate.h"

#include <assert.h>

#define MAX_ITEMS 4096  /* containers, devices per request */
#define MAX_ALIASES 16  /* aliases of a device */
#define MAX_COUNT 1024  /* devices asked for in one request entry */
#define MAX_TTL_S 86400 /* one day */

static err_t need_type(const json_t *v, json_type t, const char *field, struct error *e)
{
    static const char *names[] = {"object", "array",   "string",  "integer",
                                  "number", "boolean", "boolean", "null"};

    if (v && json_typeof(v) == t)
        return ERR_OK;
    if (!v)
        return errorf(e, ERR_UNPROCESSABLE, "%s: Required value", field);
    return errorf(e, ERR_INVAL, "field \"%s\" must be a JSON %s", field, names[t]);
}

/* 'v', called 'field', is an object with no key beyond 'allowed'. */
static err_t need_object(const json_t *v, const char *const *allowed, const char *field,
                         struct error *e)
{
    err_t rc = need_type(v, JSON_OBJECT, field, e);

    return rc ? rc : jsonx_check_keys(v, allowed, field, e);
}

/* The request body is an object with no key beyond 'allowed'. */
static err_t need_body(const json_t *body, const char *const *allowed, struct error *e)
{
    err_t rc = need_type(body, JSON_OBJECT, "body", e);

    return rc ? rc : jsonx_check_keys(body, allowed, NULL, e);
}

static bool health_valid(const char *h)
{
    return strcmp(h, "Healthy") == 0 || strcmp(h, "Unhealthy") == 0;
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

/* ---- devices ---- */

/* One topology.nodes[] entry {"ID":n}: its n in *id. */
static err_t numa_node(const json_t *n, json_int_t *id, struct error *e)
{
    static const char *const keys[] = {"ID", NULL};
    const json_t *v = json_object_get(n, "ID");
    err_t rc = need_object(n, keys, "topology.nodes[]", e);

    if (rc)
        return rc;
    rc = need_type(v, JSON_INTEGER, "topology.nodes[].ID", e);
    if (rc)
        return rc;
    if (json_integer_value(v) < 0 || json_integer_value(v) > 4095)
        return errorf(e, ERR_UNPROCESSABLE, "topology.nodes[].ID must be 0..4095");
    *id = json_integer_value(v);
    return ERR_OK;
}

/* Put 'id' into the ascending array 'arr' unless it is there. */
static err_t insert_sorted(json_t *arr, json_int_t id)
{
    size_t j, n = json_array_size(arr);

    for (j = 0; j < n; j++) {
        if (json_integer_value(json_array_get(arr, j)) >= id)
            break;
    }
    if (j < n && json_integer_value(json_array_get(arr, j)) == id)
        return ERR_OK;
    return json_array_insert_new(arr, j, json_integer(id)) ? ERR_NOMEM : ERR_OK;
}

/* The nodes of topology 't' (an object), sorted and unique, into 'numa'. */
static err_t topology_nodes(const json_t *t, json_t *numa, struct error *e)
{
    static const char *const keys[] = {"nodes", NULL};
    const json_t *nodes = json_object_get(t, "nodes");
    json_t *n;
    json_int_t id = 0;
    size_t i;
    err_t rc = need_object(t, keys, "topology", e);

    if (rc)
        return rc;
    if (nodes && !json_is_null(nodes)) {
        rc = need_type(nodes, JSON_ARRAY, "topology.nodes", e);
        if (rc)
            return rc;
    }
    json_array_foreach(nodes, i, n) {
        rc = numa_node(n, &id, e);
        if (rc)
            return rc;
        rc = insert_sorted(numa, id);
        if (rc)
            return rc;
    }
    return ERR_OK;
}

/* topology {"nodes":[{"ID":n}]}, absent or null -> sorted unique [n...]. */
static err_t topology(const json_t *t, json_t **numa, struct error *e)
{
    json_t *out = json_array();
    err_t rc = out ? ERR_OK : ERR_NOMEM;

    if (!rc && t && !json_is_null(t))
        rc = topology_nodes(t, out, e);
    if (rc) {
        json_decref(out);
        return rc;
    }
    *numa = out;
    return ERR_OK;
}

static err_t properties(const json_t *p, json_t **out, struct error *e)
{
    const char *k;
    json_t *v;

    if (!p || json_is_null(p)) {
        *out = json_object();
        return *out ? ERR_OK : ERR_NOMEM;
    }
    if (need_type(p, JSON_OBJECT, "properties", e))
        return ERR_INVAL;
    json_object_foreach((json_t *)p, k, v) {
        if (!json_is_string(v))
            return errorf(e, ERR_INVAL, "properties.%s must be a string", k);
        if (names_has_control(k))
            return errorf(e, ERR_UNPROCESSABLE,
                          "properties: a key holds a control character; keys are printable text");
        if (strlen(k) == 0 || strlen(k) > 253 || strlen(json_string_value(v)) > 4096)
            return errorf(e, ERR_UNPROCESSABLE,
                          "properties.%s: keys are 1..253 and values at most 4096 bytes", k);
    }
    *out = json_deep_copy(p);
    return *out ? ERR_OK : ERR_NOMEM;
}

/* devices[].id: valid, and not in 'seen' (the ids before it). */
static err_t device_id(const json_t *id, const json_t *seen, struct error *e)
{
    err_t rc = need_type(id, JSON_STRING, "devices[].id", e);

    if (rc)
        return rc;
    if (!names_is_device_id(json_string_value(id)))
        return errorf(e, ERR_UNPROCESSABLE,
                      "devices[].id \"%s\" is invalid: use 1..253 of [A-Za-z0-9._:/-]",
                      json_string_value(id));
    if (json_object_get(seen, json_string_value(id)))
        return errorf(e, ERR_UNPROCESSABLE, "devices[].id \"%s\" is listed twice",
                      json_string_value(id));
    return ERR_OK;
}

/* devices[].health: Healthy when absent. */
static err_t device_health(const json_t *h, const char **health, struct error *e)
{
    err_t rc;

    *health = "Healthy";
    if (!h)
        return ERR_OK;
    rc = need_type(h, JSON_STRING, "devices[].health", e);
    if (rc)
        return rc;
    if (!health_valid(json_string_value(h)))
        return errorf(e, ERR_UNPROCESSABLE, "devices[].health must be Healthy or Unhealthy");
    *health = json_string_value(h);
    return ERR_OK;
}

/* devices[].aliases: 0..MAX_ALIASES names, into a new sorted array without
 * duplicates and without the device's own id. */
static err_t device_aliases(const json_t *a, const char *id, json_t **out, struct error *e)
{
    json_t *v;
    size_t i;

    if (!a || json_is_null(a)) {
        *out = json_array();
        return *out ? ERR_OK : ERR_NOMEM;
    }
    if (need_type(a, JSON_ARRAY, "devices[].aliases", e))
        return ERR_INVAL;
    if (json_array_size(a) > MAX_ALIASES)
        return errorf(e, ERR_UNPROCESSABLE, "devices[].aliases of \"%s\": at most 16", id);
    json_array_foreach(a, i, v) {
        if (!names_is_alias(json_string_value(v)))
            return errorf(e, ERR_UNPROCESSABLE,
                          "devices[].aliases of \"%s\": \"%.300s\" is invalid: use 1..253 of "
                          "[A-Za-z0-9._:/-]",
                          id, json_is_string(v) ? json_string_value(v) : "(not a string)");
    }
    *out = jsonx_sorted_strings(a, true, id);
    return *out ? ERR_OK : ERR_NOMEM;
}

/* devices[].physical: "" when absent; the device's own id says it is whole
 * (and wins over the identity rules, store_ident.c). */
static err_t device_physical(const json_t *p, const char *id, const char **out, struct error *e)
{
    *out = "";
    if (!p || json_is_null(p))
        return ERR_OK;
    if (!names_is_alias(json_string_value(p)))
        return errorf(e, ERR_UNPROCESSABLE,
                      "devices[].physical of \"%s\" is invalid: use 1..253 of [A-Za-z0-9._:/-]",
                      id);
    *out = json_string_value(p);
    return ERR_OK;
}

/* The fields of a device entry that name it: id, aliases, physical. */
static err_t device_names(const json_t *d, json_t *seen, bool dra, json_t **aliases,
                          const char **physical, struct error *e)
{
    const json_t *id = json_object_get(d, "id");
    err_t rc;

    if (dra) {
        rc = need_type(id, JSON_STRING, "devices[].id", e);
        if (!rc && !names_is_dra_device_id(json_string_value(id)))
            rc = errorf(e, ERR_UNPROCESSABLE,
                        "devices[].id \"%.300s\" is invalid: use POOL/DEVICE (DNS-1123 "
                        "subdomains, a DNS-1123 label)",
                        json_string_value(id));
        if (!rc && json_object_get(seen, json_string_value(id)))
            rc = errorf(e, ERR_UNPROCESSABLE, "devices[].id \"%s\" is listed twice",
                        json_string_value(id));
    } else {
        rc = device_id(id, seen, e);
    }
    if (!rc)
        rc = device_physical(json_object_get(d, "physical"), json_string_value(id), physical, e);
    if (!rc)
        rc = device_aliases(json_object_get(d, "aliases"), json_string_value(id), aliases, e);
    return rc;
}

static err_t one_device(const json_t *d, json_t *seen, bool dra, json_t **out, struct error *e)
{
    static const char *const keys[] = {"id",      "health",   "topology", "properties",
                                       "aliases", "physical", NULL};
    static const char *const dra_keys[] = {"id", "properties", "aliases", "physical", NULL};
    json_t *id = json_object_get(d, "id"), *numa = NULL, *props = NULL, *aliases = NULL;
    const char *health, *physical;
    err_t rc = need_object(d, dra ? dra_keys : keys, "devices[]", e);

    if (rc)
        goto out;
    rc = device_names(d, seen, dra, &aliases, &physical, e);
    if (rc)
        goto out;
    rc = device_health(json_object_get(d, "health"), &health, e);
    if (rc)
        goto out;
    rc = topology(json_object_get(d, "topology"), &numa, e);
    if (rc)
        goto out;
    rc = properties(json_object_get(d, "properties"), &props, e);
    if (rc)
        goto out;
    json_object_set_new(seen, json_string_value(id), json_true());
    /* "o" takes numa, props and aliases, on failure too */
    *out = json_pack("{s:O,s:s,s:o,s:o,s:o,s:s}", "id", id, "health", health, "numa", numa,
                     "properties", props, "aliases", aliases, "physical", physical);
    numa = NULL;
    props = NULL;
    aliases = NULL;
    rc = *out ? ERR_OK : ERR_NOMEM;
out:
    json_decref(numa);
    json_decref(props);
    json_decref(aliases);
    return rc;
}

/* ttlSeconds: none when absent or null, else 1..MAX_TTL_S; *ttl_ms. */
static err_t ttl_field(const json_t *ttl, uint64_t *ttl_ms, struct error *e)
{
    err_t rc;

    *ttl_ms = 0;
    if (!ttl || json_is_null(ttl))
        return ERR_OK;
    rc = need_type(ttl, JSON_INTEGER, "ttlSeconds", e);
    if (rc)
        return rc;
    if (json_integer_value(ttl) < 1 || json_integer_value(ttl) > MAX_TTL_S)
        return errorf(e, ERR_UNPROCESSABLE, "ttlSeconds must be 1..86400");
    *ttl_ms = (uint64_t)json_integer_value(ttl) * 1000;
    return ERR_OK;
}

/* The devices of a device set body ('dra': of a DRA driver, without health,
 * topology and ttlSeconds). */
static err_t devices_put(const json_t *body, bool dra, json_t **devices, uint64_t *ttl_ms,
                         struct error *e)
{
    static const char *const keys[] = {"devices", "ttlSeconds", NULL};
    static const char *const dra_keys[] = {"devices", NULL};
    const json_t *list = json_object_get(body, "devices");
    json_t *out = json_array(), *seen = json_object(), *d, *c = NULL;
    uint64_t ttl = 0;
    size_t i;
    err_t rc = out && seen ? need_body(body, dra ? dra_keys : keys, e) : ERR_NOMEM;

    assert(devices && ttl_ms);
    if (rc)
        goto out;
    rc = need_type(list, JSON_ARRAY, "devices", e);
    if (rc)
        goto out;
    if (json_array_size(list) > MAX_ITEMS) {
        rc = errorf(e, ERR_UNPROCESSABLE, "too many devices (at most 4096)");
        goto out;
    }
    rc = ttl_field(json_object_get(body, "ttlSeconds"), &ttl, e);
    if (rc)
        goto out;
    json_array_foreach(list, i, d) {
        rc = one_device(d, seen, dra, &c, e);
        if (rc)
            goto out;
        json_array_append_new(out, c);
    }
    *devices = out;
    *ttl_ms = ttl;
    out = NULL;
out:
    json_decref(seen);
    json_decref(out);
    return rc;
}

err_t validate_devices_put(const json_t *body, json_t **devices, uint64_t *ttl_ms, struct error *e)
{
    return devices_put(body, false, devices, ttl_ms, e);
}

err_t validate_driver_put(const json_t *body, json_t **devices, struct error *e)
{
    uint64_t ttl_ms;

    return devices_put(body, true, devices, &ttl_ms, e);
}

err_t validate_health_patch(const json_t *body, const char **health, struct error *e)
{
    static const char *const keys[] = {"health", NULL};
    const json_t *h = json_object_get(body, "health");
    err_t rc = need_body(body, keys, e);

    assert(health);
    if (rc)
        return rc;
    rc = need_type(h, JSON_STRING, "health", e);
    if (rc)
        return rc;
    if (!health_valid(json_string_value(h)))
        return errorf(e, ERR_UNPROCESSABLE, "health must be Healthy or Unhealthy");
    *health = json_string_value(h);
    return ERR_OK;
}

/* ---- containers ---- */

/* A group's topology, if given, is a topology like a device's. */
static err_t group_topology(const json_t *t, struct error *e)
{
    json_t *numa = NULL;
    err_t rc = topology(t, &numa, e);

    json_decref(numa);
    return rc;
}

/* The deviceIds of resource 'r': valid ids, none already in the pod
 * ('seen', keyed "resource|id"), which gets them. */
static err_t group_ids(const json_t *r, const json_t *ids, json_t *seen, struct error *e)
{
    const char *res = json_string_value(r), *s;
    char key[600];
    json_t *id;
    size_t j;
    err_t rc;

    if (json_array_size(ids) == 0 || json_array_size(ids) > MAX_COUNT)
        return errorf(e, ERR_UNPROCESSABLE, "deviceIds of \"%s\" must list 1..1024 ids", res);
    json_array_foreach(ids, j, id) {
        rc = need_type(id, JSON_STRING, "containers[].devices[].deviceIds[]", e);
        if (rc)
            return rc;
        s = json_string_value(id);
        if (!names_is_device_id(s))
            return errorf(e, ERR_UNPROCESSABLE, "device id \"%s\" is invalid", s);
        str_join(key, sizeof(key), res, '|', s);
        if (json_object_get(seen, key))
            return errorf(e, ERR_UNPROCESSABLE, "device %s %s is listed twice in the pod", res, s);
        json_object_set_new(seen, key, json_true());
    }
    return ERR_OK;
}

/* One {"resourceName","deviceIds"[,"topology"]} of a container. */
static err_t one_group(const json_t *g, json_t *seen, json_t **out, struct error *e)
{
    static const char *const keys[] = {"resourceName", "deviceIds", "topology", NULL};
    json_t *r = json_object_get(g, "resourceName"), *ids = json_object_get(g, "deviceIds");
    err_t rc = need_object(g, keys, "containers[].devices[]", e);

    if (rc)
        return rc;
    rc = need_type(r, JSON_STRING, "containers[].devices[].resourceName", e);
    if (rc)
        return rc;
    if (!names_is_resource_name(json_string_value(r)))
        return errorf(e, ERR_UNPROCESSABLE,
                      "resourceName \"%s\" is invalid: use domain/name, e.g. vendor.com/gpu",
                      json_string_value(r));
    rc = need_type(ids, JSON_ARRAY, "containers[].devices[].deviceIds", e);
    if (rc)
        return rc;
    /* checked, then left out: the store derives it from the devices */
    rc = group_topology(json_object_get(g, "topology"), e);
    if (rc)
        return rc;
    rc = group_ids(r, ids, seen, e);
    if (rc)
        return rc;
    *out = jsonx_object("resourceName", json_incref(r), "deviceIds", json_incref(ids), NULL);
    return *out ? ERR_OK : ERR_NOMEM;
}

/* [{"resourceName","deviceIds"}] checked; 'seen' catches a device twice in a pod. */
static err_t device_groups(const json_t *groups, json_t *seen, json_t **out, struct error *e)
{
    json_t *res = json_array(), *g, *item = NULL;
    size_t i;
    err_t rc = res ? ERR_OK : ERR_NOMEM;

    if (rc)
        goto out;
    if (groups && !json_is_null(groups)) {
        rc = need_type(groups, JSON_ARRAY, "containers[].devices", e);
        if (rc)
            goto out;
    }
    json_array_foreach(groups, i, g) {
        rc = one_group(g, seen, &item, e);
        if (rc)
            goto out;
        json_array_append_new(res, item);
    }
    *out = res;
    res = NULL;
out:
    json_decref(res);
    return rc;
}

static err_t int_list(const json_t *v, const char *field, json_t **out, struct error *e)
{
    json_t *x;
    size_t i;

    if (!v || json_is_null(v)) {
        *out = json_array();
        return *out ? ERR_OK : ERR_NOMEM;
    }
    if (need_type(v, JSON_ARRAY, field, e))
        return ERR_INVAL;
    json_array_foreach(v, i, x) {
        if (!json_is_integer(x))
            return errorf(e, ERR_INVAL, "%s[] must be integers", field);
        if (json_integer_value(x) < 0 || json_integer_value(x) > 1048575)
            return errorf(e, ERR_UNPROCESSABLE, "%s[] must be 0..1048575", field);
    }
    *out = json_deep_copy(v);
    return *out ? ERR_OK : ERR_NOMEM;
}

/* One containers[].memory[] entry, its topology as {"nodes":[{"ID":n}]}
 * with the nodes sorted and unique. */
static err_t one_memory(const json_t *m, json_t **out, struct error *e)
{
    static const char *const keys[] = {"memoryType", "size", "topology", NULL};
    json_t *t = json_object_get(m, "memoryType"), *s = json_object_get(m, "size");
    json_t *numa = NULL, *nodes, *n;
    size_t j;
    err_t rc = need_object(m, keys, "containers[].memory[]", e);

    if (rc)
        return rc;
    rc = need_type(t, JSON_STRING, "containers[].memory[].memoryType", e);
    if (rc)
        return rc;
    rc = need_type(s, JSON_INTEGER, "containers[].memory[].size", e);
    if (rc)
        return rc;
    if (json_integer_value(s) < 0)
        return errorf(e, ERR_UNPROCESSABLE, "memory size must be >= 0");
    if (strlen(json_string_value(t)) > 63)
        return errorf(e, ERR_UNPROCESSABLE, "memoryType must be at most 63 bytes");
    rc = topology(json_object_get(m, "topology"), &numa, e);
    if (rc)
        return rc;
    nodes = json_array();
    json_array_foreach(numa, j, n)
        json_array_append_new(nodes, json_pack("{s:O}", "ID", n));
    json_decref(numa);
    /* "o" takes 'nodes', on failure too */
    *out = json_pack("{s:O,s:O,s:{s:o}}", "memoryType", t, "size", s, "topology", "nodes", nodes);
    return *out ? ERR_OK : ERR_NOMEM;
}

static err_t memory_list(const json_t *v, json_t **out, struct error *e)
{
    json_t *res = json_array(), *m, *item = NULL;
    size_t i;
    err_t rc = res ? ERR_OK : ERR_NOMEM;

    if (rc)
        goto out;
    if (v && !json_is_null(v)) {
        rc = need_type(v, JSON_ARRAY, "containers[].memory", e);
        if (rc)
            goto out;
    }
    json_array_foreach(v, i, m) {
        rc = one_memory(m, &item, e);
        if (rc)
            goto out;
        json_array_append_new(res, item);
    }
    *out = res;
    res = NULL;
out:
    json_decref(res);
    return rc;
}

/* Common container checks; 'kind' selects the fields allowed. */
enum ckind {
    C_BIND,
    C_ALLOC,
    C_RESV
};

static err_t container_name(const json_t *c, json_t *names, struct error *e)
{
    const json_t *n = json_object_get(c, "name");
    err_t rc = need_type(n, JSON_STRING, "containers[].name", e);

    if (rc)
        return rc;
    if (!names_is_dns1123_label(json_string_value(n)))
        return errorf(e, ERR_UNPROCESSABLE,
                      "container name \"%s\" is invalid: a DNS-1123 label is required",
                      json_string_value(n));
    if (json_object_get(names, json_string_value(n)))
        return errorf(e, ERR_UNPROCESSABLE, "container name \"%s\" is listed twice",
                      json_string_value(n));
    json_object_set_new(names, json_string_value(n), json_true());
    return ERR_OK;
}

static err_t requests(const json_t *r, json_t **out, struct error *e)
{
    const char *k;
    json_t *v;
    err_t rc = need_type(r, JSON_OBJECT, "containers[].requests", e);

    if (rc)
        return rc;
    json_object_foreach((json_t *)r, k, v) {
        if (!names_is_resource_name(k))
            return errorf(e, ERR_UNPROCESSABLE, "requests: resource name \"%s\" is invalid", k);
        if (!json_is_integer(v))
            return errorf(e, ERR_INVAL, "requests.%s must be an integer", k);
        if (json_integer_value(v) < 0 || json_integer_value(v) > MAX_COUNT)
            return errorf(e, ERR_UNPROCESSABLE, "requests.%s must be 0..1024", k);
    }
    *out = json_deep_copy(r);
    return *out ? ERR_OK : ERR_NOMEM;
}

/* An allocate's container: {"name","requests"}. */
static err_t alloc_container(const json_t *c, json_t **out, struct error *e)
{
    json_t *req = NULL;
    err_t rc = requests(json_object_get(c, "requests"), &req, e);

    if (rc)
        return rc;
    *out = jsonx_object("name", json_incref(json_object_get(c, "name")), "requests", req, NULL);
    return *out ? ERR_OK : ERR_NOMEM;
}

/* A reservation's container: {"name","devices"}. */
static err_t resv_container(const json_t *c, json_t *seen, json_t **out, struct error *e)
{
    json_t *devs = NULL;
    err_t rc = device_groups(json_object_get(c, "devices"), seen, &devs, e);

    if (rc)
        return rc;
    *out = jsonx_object("name", json_incref(json_object_get(c, "name")), "devices", devs, NULL);
    return *out ? ERR_OK : ERR_NOMEM;
}

/* A binding's container: {"name","devices","cpuIds","memory"}. */
static err_t bind_container(const json_t *c, json_t *seen, json_t **out, struct error *e)
{
    json_t *devs = NULL, *cpus = NULL, *mem = NULL;
    err_t rc = device_groups(json_object_get(c, "devices"), seen, &devs, e);

    if (rc)
        goto out;
    rc = int_list(json_object_get(c, "cpuIds"), "containers[].cpuIds", &cpus, e);
    if (rc)
        goto out;
    rc = memory_list(json_object_get(c, "memory"), &mem, e);
    if (rc)
        goto out;
    /* jsonx_object takes the values, on failure too */
    *out = jsonx_object("name", json_incref(json_object_get(c, "name")), "devices", devs, "cpuIds",
                        cpus, "memory", mem, NULL);
    devs = NULL;
    cpus = NULL;
    mem = NULL;
    rc = *out ? ERR_OK : ERR_NOMEM;
out:
    json_decref(devs);
    json_decref(cpus);
    json_decref(mem);
    return rc;
}

static err_t one_container(const json_t *c, enum ckind kind, json_t *names, json_t *seen,
                           json_t **out, struct error *e)
{
    static const char *const bkeys[] = {"name", "devices", "cpuIds", "memory", NULL};
    static const char *const akeys[] = {"name", "requests", NULL};
    static const char *const rkeys[] = {"name", "devices", NULL};
    static const char *const *const keys[] = {
        [C_BIND] = bkeys, [C_ALLOC] = akeys, [C_RESV] = rkeys};
    err_t rc = need_object(c, keys[kind], "containers[]", e);

    if (rc)
        return rc;
    rc = container_name(c, names, e);
    if (rc)
        return rc;
    if (kind == C_ALLOC)
        return alloc_container(c, out, e);
    return kind == C_RESV ? resv_container(c, seen, out, e) : bind_container(c, seen, out, e);
}

static err_t containers(const json_t *body, enum ckind kind, json_t **out, struct error *e)
{
    const json_t *list = json_object_get(body, "containers");
    json_t *res = json_array(), *names = json_object(), *seen = json_object(), *c, *cc = NULL;
    size_t i;
    err_t rc = res && names && seen ? need_type(list, JSON_ARRAY, "containers", e) : ERR_NOMEM;

    if (rc)
        goto out;
    if (json_array_size(list) > MAX_ITEMS) {
        rc = errorf(e, ERR_UNPROCESSABLE, "too many containers");
        goto out;
    }
    json_array_foreach(list, i, c) {
        rc = one_container(c, kind, names, seen, &cc, e);
        if (rc)
            goto out;
        json_array_append_new(res, cc);
    }
    *out = res;
    res = NULL;
out:
    json_decref(seen);
    json_decref(names);
    json_decref(res);
    return rc;
}

static err_t uid_field(const json_t *body, const char **uid, struct error *e)
{
    const json_t *u = json_object_get(body, "uid");

    *uid = "";
    if (!u || json_is_null(u))
        return ERR_OK;
    if (need_type(u, JSON_STRING, "uid", e))
        return ERR_INVAL;
    if (!validate_uid(json_string_value(u)))
        return errorf(e, ERR_UNPROCESSABLE, "uid \"%s\" is invalid: use [A-Za-z0-9._-]",
                      json_string_value(u));
    *uid = json_string_value(u);
    return ERR_OK;
}

static err_t pod_like(const json_t *body, enum ckind kind, const char **uid, json_t **out,
                      struct error *e)
{
    static const char *const keys[] = {"uid", "containers", NULL};
    static const char *const rkeys[] = {"containers", NULL};
    const char *u = "";
    err_t rc = need_body(body, kind == C_RESV ? rkeys : keys, e);

    assert(out);
    if (rc)
        return rc;
    if (kind != C_RESV) {
        rc = uid_field(body, &u, e);
        if (rc)
            return rc;
    }
    rc = containers(body, kind, out, e);
    if (rc)
        return rc;
    if (uid)
        *uid = u;
    return ERR_OK;
}

err_t validate_pod_put(const json_t *body, const char **uid, json_t **containers_out,
                       struct error *e)
{
    return pod_like(body, C_BIND, uid, containers_out, e);
}

err_t validate_allocate(const json_t *body, const char **uid, json_t **request, struct error *e)
{
    return pod_like(body, C_ALLOC, uid, request, e);
}

err_t validate_reservation(const json_t *body, json_t **containers_out, struct error *e)
{
    return pod_like(body, C_RESV, NULL, containers_out, e);
}

/* ---- DELETE ---- */

/* preconditions.uid: a pod's uid, as ?uid= (both: they must agree). */
static err_t precondition_uid(const json_t *v, int has_uid, const char **uid, struct error *e)
{
    const char *s = json_string_value(v);

    if (!has_uid)
        return errorf(e, ERR_INVAL, "preconditions.uid: a reservation has no uid");
    if (!s || !validate_uid(s))
        return errorf(e, ERR_INVAL, "preconditions.uid is not a valid uid");
    if (*uid && strcmp(*uid, s) != 0)
        return errorf(e, ERR_INVAL, "query uid=\"%.200s\" and preconditions.uid \"%.200s\" differ",
                      *uid, s);
    *uid = s;
    return ERR_OK;
}

/* preconditions.resourceVersion: the object's revision, as a decimal string. */
static err_t precondition_rev(const json_t *v, uint64_t *rev, struct error *e)
{
    const char *s = json_string_value(v);
    char *end = NULL;
    uint64_t n = 0;

    errno = 0;
    if (s && *s >= '1' && *s <= '9' && strspn(s, "0123456789") == strlen(s))
        n = strtoull(s, &end, 10);
    if (!s || !end || *end || errno)
        return errorf(e, ERR_INVAL,
                      "preconditions.resourceVersion must be the object's revision as a string, "
                      "e.g. \"42\"");
    *rev = n;
    return ERR_OK;
}

/* The body's own fields: a DeleteOptions, not a dry run. */
static err_t delete_body(const json_t *body, struct error *e)
{
    const json_t *k = json_object_get(body, "kind"), *v = json_object_get(body, "dryRun");
    const char *kind = json_string_value(k);

    if (!json_is_object(body))
        return errorf(e, ERR_INVAL, "request body must be a JSON object");
    if (k && (!kind || strcmp(kind, "DeleteOptions") != 0))
        return errorf(e, ERR_INVAL, "the body of a DELETE is DeleteOptions, not kind \"%.100s\"",
                      kind ? kind : "?");
    if (v && !json_is_null(v) && !(json_is_array(v) && json_array_size(v) == 0))
        return errorf(e, ERR_INVAL, "dryRun is not supported: a DELETE here is never a dry run");
    return ERR_OK;
}

err_t validate_delete_options(const json_t *body, int has_uid, const char **uid, uint64_t *rev,
                              struct error *e)
{
    const json_t *pre = json_object_get(body, "preconditions");
    const json_t *pu = json_object_get(pre, "uid"), *pr = json_object_get(pre, "resourceVersion");
    const char *u;
    uint64_t r = 0;
    err_t rc = delete_body(body, e);

    assert(uid && rev);
    u = *uid;
    if (rc)
        return rc;
    if (pre && !json_is_null(pre) && !json_is_object(pre))
        return errorf(e, ERR_INVAL, "preconditions must be an object");
    if (pu && !json_is_null(pu)) {
        rc = precondition_uid(pu, has_uid, &u, e);
        if (rc)
            return rc;
    }
    if (pr && !json_is_null(pr)) {
        rc = precondition_rev(pr, &r, e);
        if (rc)
            return rc;
    }
    *uid = u;
    *rev = r;
    return ERR_OK;
}
