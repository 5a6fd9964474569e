/* SPDX-License-Identifier: Apache-2.0 */
/* view.c - nodes' inventories and the devices taken from them. A device is
 * taken while any owner counts it: a DeviceBinding ("dvb:ns/name": its
 * status devices, and its spec devices while not Bound) or an assumption of
 * bind ("assume:ns/name"). Counts, not flags, because one device is counted
 * by a pre-assignment and the binding that honours it at once, or by an
 * assumption and the DeviceBinding it wrote. Each node caches its devices'
 * busy flags and recomputes them when a count of it changed, so a filter
 * over thousands of nodes reads flags, not maps. */
#include "../common/common.h"
#include "../common/clock.h"
#include "../common/jsonx.h"
#include "fit.h"
#include "view.h"

#include <assert.h>
#include <pthread.h>
#include <time.h>

/* A resource named by --resource counts as listed by this many nodes. */
#define STATIC_RESOURCE (1 << 30)

struct node {
    char *name;           /* the node's (and its NodeDevices') name */
    struct fit_dev *devs; /* sorted by resource, then id */
    size_t ndev;          /* entries of devs */
    json_t *res;          /* resource names it lists: name -> true */
    bool dirty;           /* a taken count changed: busy flags to recompute */
};

/* Lock: 'mu' guards every other field. */
struct view {
    pthread_mutex_t mu;
    struct node **nodes; /* sorted by name */
    size_t n, cap;       /* nodes used, allocated */
    json_t *taken;       /* node -> {"res\nid": count} */
    json_t *contrib;     /* owner -> {node: {"res\nid": true}}, what it counts */
    json_t *assumed;     /* "ns/name" -> {"uid": s, "until": ms} */
    json_t *managed;     /* resource -> how many nodes list it (+STATIC_RESOURCE) */
    uint64_t assume_ms;  /* how long an assumption lives unseen */
};

struct view *view_new(uint64_t assume_ms)
{
    struct view *v = calloc(1, sizeof(*v));

    if (!v)
        return NULL;
    pthread_mutex_init(&v->mu, NULL);
    v->taken = json_object();
    v->contrib = json_object();
    v->assumed = json_object();
    v->managed = json_object();
    v->assume_ms = assume_ms;
    if (!v->taken || !v->contrib || !v->assumed || !v->managed) {
        view_free(v);
        return NULL;
    }
    return v;
}

static void node_free(struct node *nd)
{
    size_t i;

    if (!nd)
        return;
    for (i = 0; i < nd->ndev; i++) {
        free(nd->devs[i].res);
        free(nd->devs[i].id);
        free(nd->devs[i].key);
    }
    free(nd->devs);
    free(nd->name);
    json_decref(nd->res);
    free(nd);
}

void view_free(struct view *v)
{
    size_t i;

    if (!v)
        return;
    for (i = 0; i < v->n; i++)
        node_free(v->nodes[i]);
    free(v->nodes);
    json_decref(v->taken);
    json_decref(v->contrib);
    json_decref(v->assumed);
    json_decref(v->managed);
    pthread_mutex_destroy(&v->mu);
    free(v);
}

void view_add_resource(struct view *v, const char *res)
{
    pthread_mutex_lock(&v->mu);
    json_object_set_new(
        v->managed, res,
        json_integer(json_integer_value(json_object_get(v->managed, res)) + STATIC_RESOURCE));
    pthread_mutex_unlock(&v->mu);
}

/* ---- nodes ---- */

/* The index of node 'name', or where it would go (*found false). */
static size_t find(const struct view *v, const char *name, bool *found)
{
    size_t lo = 0, hi = v->n, mid;
    int c;

    *found = false;
    while (lo < hi) {
        mid = lo + (hi - lo) / 2;
        c = strcmp(v->nodes[mid]->name, name);
        if (c == 0) {
            *found = true;
            return mid;
        }
        if (c < 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

static struct node *node_of(const struct view *v, const char *name)
{
    bool found;
    size_t i = find(v, name, &found);

    return found ? v->nodes[i] : NULL;
}

static void mark_dirty(struct view *v, const char *name)
{
    struct node *nd = node_of(v, name);

    if (nd)
        nd->dirty = true;
}

/* Busy flags from the taken counts, if they changed. */
static void refresh(struct view *v, struct node *nd)
{
    const json_t *t;
    size_t i;

    if (!nd->dirty)
        return;
    t = json_object_get(v->taken, nd->name);
    for (i = 0; i < nd->ndev; i++)
        nd->devs[i].busy = t && json_integer_value(json_object_get(t, nd->devs[i].key)) > 0;
    nd->dirty = false;
}

static int by_res_id(const void *a, const void *b)
{
    const struct fit_dev *x = a, *y = b;
    int c = strcmp(x->res, y->res);

    return c ? c : strcmp(x->id, y->id);
}

/* The lowest NUMA node id of a device's topology, -1 when none. */
static int numa_of(const json_t *dev)
{
    const json_t *n;
    size_t i;
    json_int_t best = -1, id;

    json_array_foreach(json_object_get(json_object_get(dev, "topology"), "nodes"), i, n) {
        id = json_integer_value(json_object_get(n, "id"));
        if (json_is_integer(json_object_get(n, "id")) && id >= 0 && id < 4096 &&
            (best < 0 || id < best))
            best = id;
    }
    return (int)best;
}

/* A node from a NodeDevices object; new, or NULL if out of memory. */
static struct node *node_from(const char *name, const json_t *obj)
{
    const json_t *devs = json_object_get(json_object_get(obj, "status"), "devices"), *d;
    struct node *nd = calloc(1, sizeof(*nd));
    const char *res, *id;
    size_t i, n = json_array_size(devs);

    if (!nd || !(nd->name = strdup(name)) || !(nd->res = json_object()) ||
        (n && !(nd->devs = calloc(n, sizeof(*nd->devs))))) {
        node_free(nd);
        return NULL;
    }
    json_array_foreach(devs, i, d) {
        struct fit_dev *f = &nd->devs[nd->ndev];

        res = json_string_value(json_object_get(d, "resourceName"));
        id = json_string_value(json_object_get(d, "id"));
        if (!res || !id)
            continue;
        f->res = strdup(res);
        f->id = strdup(id);
        f->key = malloc(strlen(res) + strlen(id) + 2);
        nd->ndev++;
        if (!f->res || !f->id || !f->key) {
            node_free(nd);
            return NULL;
        }
        str_join(f->key, strlen(res) + strlen(id) + 2, res, '\n', id);
        f->numa = numa_of(d);
        f->healthy = json_is_string(json_object_get(d, "health")) &&
                     strcmp(json_string_value(json_object_get(d, "health")), "Healthy") == 0;
        json_object_set_new(nd->res, res, json_true());
    }
    if (nd->ndev > 1)
        qsort(nd->devs, nd->ndev, sizeof(*nd->devs), by_res_id);
    nd->dirty = true;
    return nd;
}

/* Count (delta +1) or uncount (-1) the resources 'nd' lists. */
static void count_resources(struct view *v, const struct node *nd, int delta)
{
    const char *r;
    json_t *x;
    json_int_t c;

    json_object_foreach(nd->res, r, x) {
        c = json_integer_value(json_object_get(v->managed, r)) + delta;
        if (c > 0)
            json_object_set_new(v->managed, r, json_integer(c));
        else
            json_object_del(v->managed, r);
    }
}

/* Put 'nd' (steals; NULL: remove) at node 'name'. */
static void put_node(struct view *v, const char *name, struct node *nd)
{
    bool found;
    size_t i = find(v, name, &found);
    struct node **grown;

    if (found) {
        count_resources(v, v->nodes[i], -1);
        node_free(v->nodes[i]);
        if (nd) {
            v->nodes[i] = nd;
        } else {
            memmove(&v->nodes[i], &v->nodes[i + 1], (v->n - i - 1) * sizeof(*v->nodes));
            v->n--;
        }
    } else if (nd) {
        if (v->n == v->cap) {
            grown = realloc(v->nodes, (v->cap ? v->cap * 2 : 64) * sizeof(*v->nodes));
            if (!grown) {
                log_err("out of memory adding node '%s'", name);
                node_free(nd);
                return;
            }
            v->nodes = grown;
            v->cap = v->cap ? v->cap * 2 : 64;
        }
        memmove(&v->nodes[i + 1], &v->nodes[i], (v->n - i) * sizeof(*v->nodes));
        v->nodes[i] = nd;
        v->n++;
    }
    if (nd)
        count_resources(v, nd, 1);
}

void view_set_node(struct view *v, const char *name, const json_t *obj)
{
    struct node *nd = NULL;

    assert(name);
    if (obj) {
        nd = node_from(name, obj);
        if (!nd) {
            log_err("out of memory reading NodeDevices '%s'", name);
            return;
        }
    }
    pthread_mutex_lock(&v->mu);
    put_node(v, name, nd);
    pthread_mutex_unlock(&v->mu);
}

/* ---- taken devices ---- */

/* Add 'delta' to the count of every device of 'c' ({node: {key: true}}). */
static void count_taken(struct view *v, const json_t *c, int delta)
{
    const char *node, *key;
    json_t *keys, *x, *t;
    json_int_t n;

    json_object_foreach((json_t *)c, node, keys) {
        t = json_object_get(v->taken, node);
        if (!t && delta > 0) {
            t = json_object();
            json_object_set_new(v->taken, node, t);
        }
        json_object_foreach(keys, key, x) {
            n = json_integer_value(json_object_get(t, key)) + delta;
            if (n > 0)
                json_object_set_new(t, key, json_integer(n));
            else
                json_object_del(t, key);
        }
        if (t && json_object_size(t) == 0)
            json_object_del(v->taken, node);
        mark_dirty(v, node);
    }
}

/* What 'owner' counts is now 'c' (steals; NULL: nothing). */
static void contribute(struct view *v, const char *owner, json_t *c)
{
    json_t *old = json_object_get(v->contrib, owner);

    if (old)
        count_taken(v, old, -1);
    if (c && json_object_size(c)) {
        count_taken(v, c, 1);
        json_object_set_new(v->contrib, owner, c);
    } else {
        json_decref(c);
        json_object_del(v->contrib, owner);
    }
}

/* Add the devices of 'containers' ([{"devices":[{"resourceName","deviceIds"}]}])
 * on 'node' to 'c'. */
static void add_devices(json_t *c, const char *node, const json_t *containers)
{
    const json_t *ctr, *d, *id;
    json_t *keys;
    const char *res;
    char key[600];
    size_t i, j, k;

    if (!node || !*node || !json_array_size(containers))
        return;
    keys = json_object_get(c, node);
    if (!keys) {
        keys = json_object();
        json_object_set_new(c, node, keys);
    }
    json_array_foreach(containers, i, ctr) {
        json_array_foreach(json_object_get(ctr, "devices"), j, d) {
            res = json_string_value(json_object_get(d, "resourceName"));
            json_array_foreach(json_object_get(d, "deviceIds"), k, id) {
                if (!res || !json_is_string(id))
                    continue;
                str_join(key, sizeof(key), res, '\n', json_string_value(id));
                json_object_set_new(keys, key, json_true());
            }
        }
    }
}

/* What a DeviceBinding takes (new): its status devices on its status node
 * (or its label's), and its spec devices on spec.nodeName unless Bound. */
static json_t *binding_takes(const json_t *obj)
{
    const json_t *st = json_object_get(obj, "status"), *spec = json_object_get(obj, "spec");
    const char *phase = json_string_value(json_object_get(st, "phase"));
    const char *snode = json_string_value(json_object_get(st, "nodeName"));
    json_t *c = json_object();

    if (!c)
        return NULL;
    if (!snode)
        snode = json_string_value(json_object_get(
            json_object_get(json_object_get(obj, "metadata"), "labels"), "podres.dev/node"));
    add_devices(c, snode, json_object_get(st, "containers"));
    if (!phase || strcmp(phase, "Bound") != 0)
        add_devices(c, json_string_value(json_object_get(spec, "nodeName")),
                    json_object_get(spec, "containers"));
    return c;
}

/* Whether 'obj' names a Pod of 'uid' among its owners. */
static bool owned_by(const json_t *obj, const char *uid)
{
    const json_t *o;
    size_t i;

    json_array_foreach(json_object_get(json_object_get(obj, "metadata"), "ownerReferences"), i, o) {
        const char *u = json_string_value(json_object_get(o, "uid"));

        if (u && strcmp(u, uid) == 0)
            return true;
    }
    return false;
}

static void drop_assumption(struct view *v, const char *key)
{
    char owner[600];

    str_join(owner, sizeof(owner), "assume", ':', key);
    contribute(v, owner, NULL);
    json_object_del(v->assumed, key);
}

/* Assumptions past their time: the DeviceBinding never showed. */
static void expire(struct view *v)
{
    uint64_t t = clock_mono_ms();
    const char *key;
    json_t *a, *tmp;

    json_object_foreach_safe(v->assumed, tmp, key, a) {
        if ((uint64_t)json_integer_value(json_object_get(a, "until")) <= t) {
            log_info("choice for pod '%s' not seen in a DeviceBinding in time; freeing its "
                     "devices",
                     key);
            drop_assumption(v, key);
        }
    }
}

void view_set_binding(struct view *v, const char *key, const json_t *obj)
{
    json_t *c = obj ? binding_takes(obj) : NULL;
    const json_t *a;
    const char *uid;
    char owner[600];

    str_join(owner, sizeof(owner), "dvb", ':', key);
    pthread_mutex_lock(&v->mu);
    contribute(v, owner, c);
    a = json_object_get(v->assumed, key);
    uid = json_string_value(json_object_get(a, "uid"));
    /* The informer shows the pre-assignment bind wrote: it counts now. */
    if (a && obj && json_array_size(json_object_get(json_object_get(obj, "spec"), "containers")) &&
        (!uid || !*uid || owned_by(obj, uid)))
        drop_assumption(v, key);
    pthread_mutex_unlock(&v->mu);
}

void view_unassume(struct view *v, const char *key)
{
    pthread_mutex_lock(&v->mu);
    drop_assumption(v, key);
    pthread_mutex_unlock(&v->mu);
}

size_t view_nodes(struct view *v)
{
    size_t n;

    pthread_mutex_lock(&v->mu);
    n = v->n;
    pthread_mutex_unlock(&v->mu);
    return n;
}

size_t view_assumed(struct view *v)
{
    size_t n;

    pthread_mutex_lock(&v->mu);
    n = json_object_size(v->assumed);
    pthread_mutex_unlock(&v->mu);
    return n;
}

/* ---- filter, prioritize, choose ---- */

static bool managed(const struct view *v, const char *res)
{
    return json_object_get(v->managed, res) != NULL;
}

/* Whether 'totals' asks for any managed resource. */
static bool wants_managed(const struct view *v, const json_t *totals)
{
    const char *r;
    json_t *x;

    json_object_foreach((json_t *)totals, r, x) {
        if (managed(v, r))
            return true;
    }
    return false;
}

/* Why node 'name' cannot hold 'totals', into 'why' (ERR_CONFLICT); false
 * when it can. */
static bool unfit(struct view *v, const char *name, const json_t *totals, struct error *why)
{
    struct node *nd = node_of(v, name);
    char *buf = why->msg;
    size_t len = 0, free_n, cap = sizeof(why->msg);
    json_int_t want;
    const char *r;
    json_t *x;

    if (!nd) {
        errorf(why, ERR_CONFLICT, "node has no NodeDevices");
        return true;
    }
    refresh(v, nd);
    *why = (struct error){0};
    json_object_foreach((json_t *)totals, r, x) {
        want = json_integer_value(x);
        if (!managed(v, r))
            continue;
        free_n = fit_free(nd->devs, nd->ndev, r);
        if (free_n >= (size_t)want || len + 1 >= cap)
            continue;
        len += (size_t)snprintf(buf + len, cap - len, "%s%s: %zu free healthy, %lld requested",
                                len ? "; " : "", r, free_n, (long long)want);
        if (len >= cap)
            len = cap - 1;
    }
    why->code = buf[0] ? ERR_CONFLICT : ERR_OK;
    return buf[0] != '\0';
}

err_t view_filter(struct view *v, const json_t *names, const json_t *totals, json_t **fit,
                  json_t **failed)
{
    json_t *ok = json_array(), *bad = json_object(), *n;
    const char *name;
    struct error why;
    bool check;
    size_t i;

    if (!ok || !bad) {
        json_decref(ok);
        json_decref(bad);
        return ERR_NOMEM;
    }
    pthread_mutex_lock(&v->mu);
    expire(v);
    check = wants_managed(v, totals);
    json_array_foreach(names, i, n) {
        name = json_string_value(n);
        if (!name)
            continue;
        if (check && unfit(v, name, totals, &why))
            json_object_set_new(bad, name, json_string(why.msg));
        else
            json_array_append(ok, n);
    }
    pthread_mutex_unlock(&v->mu);
    *fit = ok;
    *failed = bad;
    return ERR_OK;
}

/* One node's placement of a request: NUMA nodes spanned and devices left. */
struct place {
    int numa;    /* NUMA nodes needed, summed over the resources; -1: does not fit */
    size_t left; /* free devices of the requested resources after placement */
    size_t rank; /* distinct (numa, left) pairs better than this one */
};

static struct place place_on(struct view *v, const char *name, const json_t *totals)
{
    struct place p = {.numa = 0};
    struct node *nd = node_of(v, name);
    size_t free_n;
    json_int_t want;
    const char *r;
    json_t *x;
    int k;

    if (!nd)
        return (struct place){.numa = -1};
    refresh(v, nd);
    json_object_foreach((json_t *)totals, r, x) {
        want = json_integer_value(x);
        if (!managed(v, r))
            continue;
        k = fit_numa_needed(nd->devs, nd->ndev, r, (size_t)want);
        if (k < 0)
            return (struct place){.numa = -1};
        free_n = fit_free(nd->devs, nd->ndev, r);
        p.numa += k;
        p.left += free_n - (size_t)want;
    }
    return p;
}

static int by_place(const void *a, const void *b)
{
    const struct place *x = *(const struct place *const *)a, *y = *(const struct place *const *)b;

    if (x->numa != y->numa)
        return x->numa < y->numa ? -1 : 1;
    return (x->left > y->left) - (x->left < y->left);
}

/* Rank the fitting places: equal (numa, left) pairs share a rank; returns
 * the number of distinct pairs. */
static size_t rank_places(struct place *p, size_t n)
{
    struct place **order = calloc(n ? n : 1, sizeof(*order));
    size_t i, m = 0, distinct = 0;

    if (!order)
        return 0;
    for (i = 0; i < n; i++) {
        if (p[i].numa >= 0)
            order[m++] = &p[i];
    }
    qsort(order, m, sizeof(*order), by_place);
    for (i = 0; i < m; i++) {
        if (i > 0 && by_place(&order[i - 1], &order[i]) != 0)
            distinct++;
        order[i]->rank = distinct;
    }
    free(order);
    return m ? distinct + 1 : 0;
}

err_t view_prioritize(struct view *v, const json_t *names, const json_t *totals, json_t **out)
{
    size_t n = json_array_size(names), i, distinct;
    struct place *p = calloc(n ? n : 1, sizeof(*p));
    json_t *list = json_array(), *name;
    json_int_t score;
    bool check;

    if (!p || !list) {
        free(p);
        json_decref(list);
        return ERR_NOMEM;
    }
    pthread_mutex_lock(&v->mu);
    expire(v);
    check = wants_managed(v, totals);
    json_array_foreach(names, i, name) {
        p[i] = json_is_string(name) ? place_on(v, json_string_value(name), totals)
                                    : (struct place){.numa = -1};
    }
    pthread_mutex_unlock(&v->mu);
    distinct = rank_places(p, n);
    json_array_foreach(names, i, name) {
        if (!json_is_string(name))
            continue;
        score = !check || p[i].numa < 0 || !distinct ? 0
                                                     : 10 - (json_int_t)(p[i].rank * 10 / distinct);
        json_array_append_new(
            list, jsonx_object("Host", json_incref(name), "Score", json_integer(score), NULL));
    }
    free(p);
    *out = list;
    return ERR_OK;
}

/* Choose one container's devices of 'reqs' ({R:n}) on 'nd' into 'devices'
 * ([{"resourceName","deviceIds"}]) and 'takes' ({"res\nid": true}). */
static err_t choose_container(struct view *v, struct node *nd, const json_t *reqs, json_t *devices,
                              json_t *takes, struct error *e)
{
    const char *r;
    json_t *x, *ids;
    size_t want, *idx, i;

    json_object_foreach((json_t *)reqs, r, x) {
        want = (size_t)json_integer_value(x);
        if (!managed(v, r))
            continue;
        idx = calloc(want, sizeof(*idx));
        if (!idx)
            return errorf(e, ERR_NOMEM, "out of memory");
        if (!fit_choose(nd->devs, nd->ndev, r, want, idx)) {
            free(idx);
            return errorf(e, ERR_CONFLICT, "%s: %zu free healthy, %zu requested", r,
                          fit_free(nd->devs, nd->ndev, r), want);
        }
        ids = json_array();
        for (i = 0; i < want; i++) {
            json_array_append_new(ids, json_string(nd->devs[idx[i]].id));
            json_object_set_new(takes, nd->devs[idx[i]].key, json_true());
        }
        json_array_append_new(devices,
                              jsonx_object("resourceName", json_string(r), "deviceIds", ids, NULL));
        free(idx);
    }
    return ERR_OK;
}

/* Choose for every container of 'requests'; *takes gets what they take. */
static err_t choose_all(struct view *v, struct node *nd, const json_t *requests, json_t *out,
                        json_t *takes, struct error *e)
{
    const json_t *c;
    json_t *devices;
    err_t rc = ERR_OK;
    size_t i;

    json_array_foreach(requests, i, c) {
        devices = json_array();
        if (!devices)
            return errorf(e, ERR_NOMEM, "out of memory");
        rc = choose_container(v, nd, json_object_get(c, "requests"), devices, takes, e);
        if (!rc && json_array_size(devices))
            json_array_append_new(out, jsonx_object("name", json_incref(json_object_get(c, "name")),
                                                    "devices", json_incref(devices), NULL));
        json_decref(devices);
        if (rc)
            return rc;
    }
    return ERR_OK;
}

/* Remember the choice 'takes' of pod 'key' on 'node' until its DeviceBinding shows. */
static void assume(struct view *v, const char *node, const char *key, const char *uid,
                   json_t *takes)
{
    json_t *c = json_object();
    char owner[600];

    str_join(owner, sizeof(owner), "assume", ':', key);
    json_object_set(c, node, takes);
    contribute(v, owner, c);
    json_object_set_new(v->assumed, key,
                        jsonx_object("uid", json_string(uid), "until",
                                     json_integer((json_int_t)(clock_mono_ms() + v->assume_ms)),
                                     NULL));
}

err_t view_choose(struct view *v, const char *node, const char *key, const char *uid,
                  const json_t *requests, json_t **containers, struct error *e)
{
    json_t *out, *takes, *totals;
    const json_t *c;
    struct node *nd;
    err_t rc = ERR_OK;
    size_t i;

    assert(node && key && uid && containers);
    out = json_array();
    takes = json_object();
    totals = json_object();
    if (!out || !takes || !totals) {
        rc = errorf(e, ERR_NOMEM, "out of memory");
        goto out;
    }
    json_array_foreach(requests, i, c) {
        json_object_update(totals, json_object_get(c, "requests"));
    }
    pthread_mutex_lock(&v->mu);
    expire(v);
    drop_assumption(v, key); /* a bind of the same pod again: its old choice goes */
    nd = node_of(v, node);
    if (!wants_managed(v, totals)) {
        rc = ERR_OK;
    } else if (!nd) {
        rc = errorf(e, ERR_CONFLICT, "node '%s' has no NodeDevices", node);
    } else {
        refresh(v, nd);
        rc = choose_all(v, nd, requests, out, takes, e);
        nd->dirty = true; /* flags back from the counts: chosen ones stay busy via assume() */
        if (!rc && json_object_size(takes))
            assume(v, node, key, uid, takes);
    }
    pthread_mutex_unlock(&v->mu);
out:
    json_decref(takes);
    json_decref(totals);
    if (rc) {
        json_decref(out);
        return rc;
    }
    *containers = out;
    return ERR_OK;
}
