/* SPDX-License-Identifier: Apache-2.0 */
/* settle.c - bridging a restarted kubelet's gaps (settle.h). */
#define LOG_MOD "kubelet"
#include "../common/common.h"
#include "settle.h"

void settle_failed(struct settle *s)
{
    s->failed = true;
}

bool settle_active(const struct settle *s)
{
    return s->until_ms != 0;
}

static const char *str_of(const json_t *o, const char *key)
{
    return json_string_value(json_object_get(o, key));
}

/* The index in 'pods' of the first pod named ns/name, or -1. */
static long find_pod(const json_t *pods, const char *ns, const char *name)
{
    const char *pns, *pname;
    const json_t *p;
    size_t i;

    json_array_foreach(pods, i, p) {
        pns = str_of(p, "namespace");
        pname = str_of(p, "name");
        if (pns && pname && strcmp(pns, ns) == 0 && strcmp(pname, name) == 0)
            return (long)i;
    }
    return -1;
}

/* Whether a container of 'pod' holds device 'id' of resource 'res'. */
static bool pod_holds(const json_t *pod, const char *res, const char *id)
{
    const json_t *c, *g, *v;
    const char *gres, *gid;
    size_t i, j, k;

    json_array_foreach(json_object_get(pod, "containers"), i, c) {
        json_array_foreach(json_object_get(c, "devices"), j, g) {
            gres = str_of(g, "resourceName");
            if (!gres || strcmp(gres, res) != 0)
                continue;
            json_array_foreach(json_object_get(g, "deviceIds"), k, v) {
                gid = json_string_value(v);
                if (gid && strcmp(gid, id) == 0)
                    return true;
            }
        }
    }
    return false;
}

/* Whether 'b' holds every device that 'a' holds. */
static bool holds_all(const json_t *a, const json_t *b)
{
    const json_t *c, *g, *v;
    const char *res, *id;
    size_t i, j, k;

    json_array_foreach(json_object_get(a, "containers"), i, c) {
        json_array_foreach(json_object_get(c, "devices"), j, g) {
            res = str_of(g, "resourceName");
            json_array_foreach(json_object_get(g, "deviceIds"), k, v) {
                id = json_string_value(v);
                if (res && id && !pod_holds(b, res, id))
                    return false;
            }
        }
    }
    return true;
}

/* The resources of the devices 'prev' that 'devs' has no device of, as the
 * keys of a new object (NULL: out of memory). */
static json_t *lost_resources(const json_t *prev, const json_t *devs)
{
    json_t *have = json_object(), *lost = json_object();
    const json_t *d;
    const char *res;
    size_t i;

    if (!have || !lost)
        goto fail;
    json_array_foreach(devs, i, d) {
        res = str_of(d, "resourceName");
        if (res && json_object_set_new(have, res, json_true()))
            goto fail;
    }
    json_array_foreach(prev, i, d) {
        res = str_of(d, "resourceName");
        if (res && !json_object_get(have, res) && json_object_set_new(lost, res, json_true()))
            goto fail;
    }
    json_decref(have);
    return lost;
fail:
    json_decref(have);
    json_decref(lost);
    return NULL;
}

/* Whether 'pod' holds a device. */
static bool holds_any(const json_t *pod)
{
    const json_t *c, *g;
    size_t i, j;

    json_array_foreach(json_object_get(pod, "containers"), i, c) {
        json_array_foreach(json_object_get(c, "devices"), j, g) {
            if (json_array_size(json_object_get(g, "deviceIds")) > 0)
                return true;
        }
    }
    return false;
}

/* The pods of 'prev' holding devices that 'pods' leaves out, or lists
 * holding fewer, put back into 'pods' as they were. (A pod without devices
 * binds nothing: it goes and comes back with the kubelet's word.) */
static err_t carry_pods(const json_t *prev, json_t *pods, size_t *n)
{
    const json_t *p;
    const char *ns, *name;
    json_t *copy;
    long at;
    size_t i;

    json_array_foreach(prev, i, p) {
        ns = str_of(p, "namespace");
        name = str_of(p, "name");
        if (!ns || !name || !holds_any(p))
            continue;
        at = find_pod(pods, ns, name);
        if (at >= 0 && holds_all(p, json_array_get(pods, (size_t)at)))
            continue;
        copy = json_deep_copy(p);
        if (!copy)
            return ERR_NOMEM;
        if (at >= 0 ? json_array_set_new(pods, (size_t)at, copy)
                    : json_array_append_new(pods, copy))
            return ERR_NOMEM;
        (*n)++;
    }
    return ERR_OK;
}

/* The devices of 'prev' whose resource 'devs' lacks, appended to 'devs'. */
static err_t carry_devices(const json_t *prev, json_t *devs, size_t *n)
{
    json_t *lost = lost_resources(prev, devs), *copy;
    const json_t *d;
    const char *res;
    size_t i;
    err_t rc = lost ? ERR_OK : ERR_NOMEM;

    json_array_foreach(prev, i, d) {
        res = str_of(d, "resourceName");
        if (rc || !res || !json_object_get(lost, res))
            continue;
        copy = json_deep_copy(d);
        if (!copy || json_array_append_new(devs, copy))
            rc = ERR_NOMEM;
        else
            (*n)++;
    }
    json_decref(lost);
    return rc;
}

/* Whether 'snap' lists no allocatable device where 'prev' listed some: how a
 * restarted kubelet answers until its plugins register again. (One plugin
 * gone is not that: the kubelet keeps its devices, Unhealthy, for minutes.) */
static bool all_lost(const json_t *prev, const json_t *snap)
{
    return json_array_size(json_object_get(prev, "devices")) > 0 &&
           json_array_size(json_object_get(snap, "devices")) == 0;
}

/* Open, extend or close the window at 'now'; true while it is open. A
 * failure opens it or, within it, extends it (the kubelet went away again);
 * an allocatable answer emptied only opens it, since what the window keeps
 * would otherwise reopen it for ever. */
static bool window(struct settle *s, const json_t *snap, uint64_t now, struct settle_held *held)
{
    bool failed = s->failed, lost;

    s->failed = false;
    if (s->until_ms && now >= s->until_ms && !failed) {
        s->until_ms = 0;
        log_info("the kubelet's answers are taken as they are again (%d s after its restart "
                 "or outage)",
                 SETTLE_MS / 1000);
        return false; /* and not opened again by what this window kept */
    }
    if (!s->prev)
        return false;
    lost = !failed && !s->until_ms && all_lost(s->prev, snap);
    if (!failed && !lost)
        return s->until_ms != 0;
    s->until_ms = now + SETTLE_MS;
    held->started = true;
    log_info("the kubelet %s: for up to %d s, pods and devices its answers leave out are kept "
             "as they were",
             failed ? "was unreachable or restarted" : "lists no allocatable device (restarted?)",
             SETTLE_MS / 1000);
    return true;
}

err_t settle_apply(struct settle *s, json_t *snap, uint64_t now_ms, struct settle_held *held)
{
    json_t *pods = NULL, *devs = NULL;
    err_t rc = ERR_NOMEM;

    memset(held, 0, sizeof(*held));
    if (!window(s, snap, now_ms ? now_ms : 1, held))
        return ERR_OK;
    pods = json_deep_copy(json_object_get(snap, "pods"));
    devs = json_deep_copy(json_object_get(snap, "devices"));
    if (!pods || !devs)
        goto out;
    rc = carry_pods(json_object_get(s->prev, "pods"), pods, &held->pods);
    if (!rc)
        rc = carry_devices(json_object_get(s->prev, "devices"), devs, &held->devices);
    if (!rc && (json_object_set(snap, "pods", pods) || json_object_set(snap, "devices", devs)))
        rc = ERR_NOMEM;
out:
    if (rc)
        held->pods = held->devices = 0;
    json_decref(pods);
    json_decref(devs);
    return rc;
}

void settle_stored(struct settle *s, json_t *snap)
{
    json_decref(s->prev);
    s->prev = json_incref(snap);
}

void settle_free(struct settle *s)
{
    json_decref(s->prev);
    memset(s, 0, sizeof(*s));
}
