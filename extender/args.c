/* SPDX-License-Identifier: Apache-2.0 */
/* args.c - kube-scheduler's extender bodies and a Pod's device requests.
 * Names are checked as DNS-1123 subdomains before any of them reaches a URL
 * path, so a path is never built from unchecked bytes. */
#include "../common/common.h"
#include "../common/jsonx.h"
#include "args.h"

/* Most devices one container may ask for of one resource: more than any
 * node holds, small enough that sums cannot overflow. */
#define MAX_QUANTITY 100000

bool args_is_name(const char *s)
{
    size_t n = s ? strlen(s) : 0, i;

    if (n == 0 || n > ARGS_NAME_MAX)
        return false;
    for (i = 0; i < n; i++) {
        char c = s[i];
        bool alnum = (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9');

        if (!alnum && c != '-' && c != '.')
            return false;
        if (!alnum && (i == 0 || i == n - 1))
            return false;
    }
    return true;
}

/* An extended resource: domain/name, the domain not kubernetes.io (nor a
 * subdomain of it), and not a quota name (requests.*). */
static bool is_extended(const char *r)
{
    const char *slash = strchr(r, '/');
    size_t d = slash ? (size_t)(slash - r) : 0;

    if (!slash || d == 0 || slash[1] == '\0' || strncmp(r, "requests.", 9) == 0)
        return false;
    if (d >= 13 && strncmp(slash - 13, "kubernetes.io", 13) == 0 && (d == 13 || slash[-14] == '.'))
        return false;
    return true;
}

/* A quantity that is a whole number of devices: a string of digits (the
 * API server's canonical form for one) or a JSON integer. */
static bool whole(const json_t *q, long *out)
{
    const char *s = json_string_value(q);
    char *end;
    long v;

    if (json_is_integer(q)) {
        v = (long)json_integer_value(q);
    } else {
        if (!s || *s < '0' || *s > '9' || strlen(s) > 9)
            return false;
        v = strtol(s, &end, 10);
        if (*end)
            return false;
    }
    if (v < 0 || v > MAX_QUANTITY)
        return false;
    *out = v;
    return true;
}

/* One container's requests into 'reqs' ({R:n}), added to 'totals'. */
static err_t container_requests(const json_t *c, json_t *reqs, json_t *totals, struct error *e)
{
    const json_t *res = json_object_get(c, "resources");
    const json_t *lim = json_object_get(res, "limits"), *rq = json_object_get(res, "requests");
    const char *cname = json_string_value(json_object_get(c, "name")), *r;
    const json_t *from[] = {lim, rq}, *q;
    size_t i;
    long v;

    for (i = 0; i < ARRAY_SIZE(from); i++) {
        if (from[i] && !json_is_object(from[i]))
            return errorf(e, ERR_INVAL, "container '%.63s': resources.%s is not an object",
                          cname ? cname : "?", i ? "requests" : "limits");
        json_object_foreach((json_t *)from[i], r, q) {
            if (!is_extended(r) || json_object_get(reqs, r) || (i == 1 && json_object_get(lim, r)))
                continue;
            if (!whole(q, &v))
                return errorf(e, ERR_INVAL,
                              "container '%.63s': %.316s is not a whole number of devices",
                              cname ? cname : "?", r);
            if (v == 0)
                continue;
            json_object_set_new(reqs, r, json_integer(v));
            json_object_set_new(totals, r,
                                json_integer(json_integer_value(json_object_get(totals, r)) + v));
        }
    }
    return ERR_OK;
}

err_t args_pod_requests(const json_t *pod, json_t **containers, json_t **totals, struct error *e)
{
    const json_t *list = json_object_get(json_object_get(pod, "spec"), "containers"), *c;
    json_t *all = json_array(), *tot = json_object(), *reqs;
    const char *cname;
    err_t rc = ERR_OK;
    size_t i;

    if (!all || !tot) {
        rc = errorf(e, ERR_NOMEM, "out of memory");
        goto out;
    }
    if (list && !json_is_array(list)) {
        rc = errorf(e, ERR_INVAL, "Pod.spec.containers is not an array");
        goto out;
    }
    json_array_foreach(list, i, c) {
        cname = json_string_value(json_object_get(c, "name"));
        if (!cname || !*cname || strlen(cname) > 63) {
            rc = errorf(e, ERR_INVAL, "Pod.spec.containers[%zu] has no usable name", i);
            goto out;
        }
        reqs = json_object();
        rc = reqs ? container_requests(c, reqs, tot, e) : errorf(e, ERR_NOMEM, "out of memory");
        if (!rc && json_object_size(reqs))
            json_array_append_new(
                all, jsonx_object("name", json_string(cname), "requests", json_incref(reqs), NULL));
        json_decref(reqs);
        if (rc)
            goto out;
    }
    *containers = all;
    *totals = tot;
    return ERR_OK;
out:
    json_decref(all);
    json_decref(tot);
    return rc;
}

/* The candidate names: NodeNames, else the names of Nodes.items. */
static err_t node_names(struct args *a, struct error *e)
{
    const json_t *nn = json_object_get(a->doc, "NodeNames"), *v;
    const json_t *items = json_object_get(json_object_get(a->doc, "Nodes"), "items");
    const json_t *from = json_is_array(nn) ? nn : items;
    size_t i;

    a->node_list = !json_is_array(nn);
    if (!json_is_array(from))
        return errorf(e, ERR_INVAL, "ExtenderArgs has neither NodeNames nor Nodes.items");
    a->names = json_array();
    if (!a->names)
        return errorf(e, ERR_NOMEM, "out of memory");
    json_array_foreach(from, i, v) {
        const json_t *s = a->node_list ? json_object_get(json_object_get(v, "metadata"), "name")
                                       : v;

        if (!json_is_string(s))
            return errorf(e, ERR_INVAL, "%s[%zu] is not a node name",
                          a->node_list ? "Nodes.items" : "NodeNames", i);
        json_array_append(a->names, (json_t *)s);
    }
    return ERR_OK;
}

/* The pod's namespace and name, and the candidate nodes. */
static err_t pod_and_nodes(struct args *a, const json_t *pod, struct error *e)
{
    const json_t *md = json_object_get(pod, "metadata");
    const char *ns = json_string_value(json_object_get(md, "namespace"));
    const char *name = json_string_value(json_object_get(md, "name"));
    const json_t *uid = json_object_get(md, "uid");

    if (!json_is_object(a->doc) || !json_is_object(pod))
        return errorf(e, ERR_INVAL, "ExtenderArgs has no Pod object");
    if (!args_is_name(ns) || !args_is_name(name))
        return errorf(e, ERR_INVAL, "Pod has no valid metadata.namespace and metadata.name");
    if (uid && (!json_is_string(uid) || json_string_length(uid) >= sizeof(a->uid)))
        return errorf(e, ERR_INVAL, "Pod.metadata.uid is not a uid");
    str_copy(a->ns, sizeof(a->ns), ns);
    str_copy(a->name, sizeof(a->name), name);
    str_copy(a->uid, sizeof(a->uid), uid ? json_string_value(uid) : "");
    return node_names(a, e);
}

err_t args_parse(const char *body, size_t len, struct args *a, struct error *e)
{
    const json_t *pod;
    err_t rc;

    memset(a, 0, sizeof(*a));
    rc = jsonx_parse(body, len, &a->doc, e);
    if (rc)
        goto out;
    pod = json_object_get(a->doc, "Pod");
    rc = pod_and_nodes(a, pod, e);
    if (rc)
        goto out;
    rc = args_pod_requests(pod, &a->requests, &a->totals, e);
out:
    if (rc)
        args_release(a);
    return rc;
}

void args_release(struct args *a)
{
    json_decref(a->doc);
    json_decref(a->names);
    json_decref(a->requests);
    json_decref(a->totals);
    memset(a, 0, sizeof(*a));
}

/* Field 'key' of 'doc' as a valid name into 'out'. */
static err_t name_field(const json_t *doc, const char *key, char *out, size_t cap, struct error *e)
{
    const char *s = json_string_value(json_object_get(doc, key));

    if (!args_is_name(s))
        return errorf(e, ERR_INVAL, "ExtenderBindingArgs.%s is %s", key,
                      s ? "not a valid name" : "missing");
    str_copy(out, cap, s);
    return ERR_OK;
}

err_t args_parse_bind(const char *body, size_t len, struct args_bind *b, struct error *e)
{
    json_t *doc = NULL;
    const json_t *uid;
    err_t rc = jsonx_parse(body, len, &doc, e);

    if (rc)
        return rc;
    memset(b, 0, sizeof(*b));
    uid = json_object_get(doc, "PodUID");
    if (!json_is_object(doc)) {
        rc = errorf(e, ERR_INVAL, "ExtenderBindingArgs is not an object");
        goto out;
    }
    rc = name_field(doc, "PodNamespace", b->ns, sizeof(b->ns), e);
    if (rc)
        goto out;
    rc = name_field(doc, "PodName", b->name, sizeof(b->name), e);
    if (rc)
        goto out;
    rc = name_field(doc, "Node", b->node, sizeof(b->node), e);
    if (rc)
        goto out;
    if (!json_is_string(uid) || json_string_length(uid) == 0 ||
        json_string_length(uid) >= sizeof(b->uid)) {
        rc = errorf(e, ERR_INVAL, "ExtenderBindingArgs.PodUID is %s",
                    uid ? "not a uid" : "missing (bind checks the pod by its uid)");
        goto out;
    }
    str_copy(b->uid, sizeof(b->uid), json_string_value(uid));
out:
    json_decref(doc);
    return rc;
}
