/* SPDX-License-Identifier: Apache-2.0 */
/* model.c - the views of kubectl-podres from NodeDevices and DeviceBindings:
 * an index of every device a DeviceBinding holds or reserves, keyed by node,
 * resource and id, then the rows. It decides what the states mean (model.h),
 * not how they are printed. */
#define LOG_MOD "plugin"
#include "../common/common.h"
#include "model.h"

#define LABEL_NODE "podres.dev/node"
#define COND_PREASSIGNED "PreassignmentHonored"
#define KEY_MAX 1024

/* obj.a.b as a string, or NULL ('b' NULL: obj.a). */
static const char *str_at(const json_t *obj, const char *a, const char *b)
{
    const json_t *v = json_object_get(obj, a);

    if (b)
        v = json_object_get(v, b);
    return json_string_value(v);
}

static const char *or_empty(const char *s)
{
    return s ? s : "";
}

/* The node a DeviceBinding's status (or spec) is about. */
static const char *dvb_node(const json_t *dvb, bool status)
{
    const char *n = str_at(json_object_get(dvb, status ? "status" : "spec"), "nodeName", NULL);

    if (n && *n)
        return n;
    return str_at(json_object_get(dvb, "metadata"), "labels", LABEL_NODE);
}

/* When the holding began (model.h). */
static const char *dvb_since(const json_t *dvb, bool held)
{
    const json_t *conds = json_object_get(json_object_get(dvb, "status"), "conditions"), *c;
    size_t i;

    json_array_foreach(held ? conds : NULL, i, c) {
        if (strcmp(or_empty(str_at(c, "type", NULL)), COND_PREASSIGNED) == 0 &&
            strcmp(or_empty(str_at(c, "status", NULL)), "True") == 0 &&
            str_at(c, "lastTransitionTime", NULL))
            return str_at(c, "lastTransitionTime", NULL);
    }
    return str_at(dvb, "metadata", "creationTimestamp");
}

static void dev_key(char *buf, size_t cap, const char *node, const char *res, const char *id)
{
    snprintf(buf, cap, "%s\n%s\n%s", node, res, id);
}

/* ---- the index of holders ---- */

/* What the index says of one DeviceBinding's containers. */
struct holding {
    const json_t *dvb; /* the DeviceBinding */
    const char *node;  /* the node of these containers */
    const char *state; /* "held" or "reserved" */
    const char *since; /* RFC 3339, or NULL */
    const char *phase; /* status.phase, or NULL */
};

/* The DRA claim of device group 'd' that 'id' was allocated through: the
 * one whose deviceIds list it, else the group's only claim when it lists
 * none; NULL for none (a device plugin's group has no claims). */
static const json_t *claim_of(const json_t *d, const char *id)
{
    const json_t *claims = json_object_get(d, "claims"), *c, *x;
    size_t i, j;

    json_array_foreach(claims, i, c) {
        json_array_foreach(json_object_get(c, "deviceIds"), j, x) {
            if (strcmp(or_empty(json_string_value(x)), id) == 0)
                return c;
        }
    }
    c = json_array_get(claims, 0);
    return json_array_size(claims) == 1 && !json_object_get(c, "deviceIds") ? c : NULL;
}

/* The holder of a device of 'container', with its DRA 'claim' (or NULL). */
static json_t *holder_of(const struct holding *h, const char *container, const json_t *claim)
{
    const json_t *md = json_object_get(h->dvb, "metadata");
    const char *ns = or_empty(str_at(md, "namespace", NULL));
    json_t *out = json_pack("{s:s,s:s,s:s,s:s,s:s?,s:s?}", "state", h->state, "namespace", ns,
                            "pod", or_empty(str_at(md, "name", NULL)), "container", container,
                            "phase", h->phase, "since", h->since);

    if (out && claim && str_at(claim, "name", NULL) &&
        json_object_set_new(
            out, "claim",
            json_pack("{s:s,s:s}", "namespace",
                      str_at(claim, "namespace", NULL) ? str_at(claim, "namespace", NULL) : ns,
                      "name", str_at(claim, "name", NULL)))) {
        json_decref(out);
        return NULL;
    }
    return out;
}

/* Index every device id of 'containers'; a held device is never replaced
 * by a reservation. -1 when out of memory. */
static int index_containers(json_t *idx, const struct holding *h, const json_t *containers)
{
    const json_t *c, *d, *id;
    const char *old;
    char key[KEY_MAX];
    size_t i, j, k;

    json_array_foreach(containers, i, c) {
        json_array_foreach(json_object_get(c, "devices"), j, d) {
            json_array_foreach(json_object_get(d, "deviceIds"), k, id) {
                if (!json_is_string(id))
                    continue;
                dev_key(key, sizeof(key), h->node, or_empty(str_at(d, "resourceName", NULL)),
                        json_string_value(id));
                old = str_at(idx, key, "state");
                if (old && strcmp(old, "held") == 0)
                    continue;
                if (json_object_set_new(idx, key,
                                        holder_of(h, or_empty(str_at(c, "name", NULL)),
                                                  claim_of(d, json_string_value(id)))) != 0)
                    return -1;
            }
        }
    }
    return 0;
}

/* key -> {state, namespace, pod, container, phase, since}. New, or NULL. */
static json_t *index_holders(const json_t *dvbs)
{
    json_t *idx = json_object();
    const json_t *dvb, *st;
    struct holding h;
    const char *phase;
    size_t i;

    json_array_foreach(json_object_get(dvbs, "items"), i, dvb) {
        st = json_object_get(dvb, "status");
        phase = str_at(st, "phase", NULL);
        h = (struct holding){dvb, dvb_node(dvb, true), "held", dvb_since(dvb, true), phase};
        if (h.node && index_containers(idx, &h, json_object_get(st, "containers")))
            goto out_nomem;
        if (phase && strcmp(phase, "Bound") == 0)
            continue;
        h = (struct holding){dvb, dvb_node(dvb, false), "reserved", dvb_since(dvb, false), phase};
        if (h.node &&
            index_containers(idx, &h, json_object_get(json_object_get(dvb, "spec"), "containers")))
            goto out_nomem;
    }
    return idx;
out_nomem:
    json_decref(idx);
    return NULL;
}

/* ---- rows ---- */

static int cmp_rows(const void *a, const void *b, void *keys)
{
    const char *const *k = keys;
    int r = 0;
    size_t i;

    for (i = 0; k[i] && r == 0; i++)
        r = strcmp(or_empty(str_at(*(json_t *const *)a, k[i], NULL)),
                   or_empty(str_at(*(json_t *const *)b, k[i], NULL)));
    return r;
}

/* Sort the rows of 'arr' by the string fields 'keys' (NULL-terminated). */
static void sort_rows(json_t *arr, const char *const *keys)
{
    size_t i, n = json_array_size(arr);
    json_t **v;

    if (n < 2)
        return;
    v = malloc(n * sizeof(*v));
    if (!v)
        return; /* unsorted beats nothing */
    for (i = 0; i < n; i++)
        v[i] = json_incref(json_array_get(arr, i));
    qsort_r(v, n, sizeof(*v), cmp_rows, (void *)keys);
    json_array_clear(arr);
    for (i = 0; i < n; i++)
        json_array_append_new(arr, v[i]);
    free(v);
}

static bool healthy(const json_t *dev)
{
    return strcmp(or_empty(str_at(dev, "health", NULL)), "Healthy") == 0;
}

static json_t *numa_of(const json_t *dev)
{
    json_t *out = json_array();
    const json_t *n;
    size_t i;

    json_array_foreach(json_object_get(json_object_get(dev, "topology"), "nodes"), i, n) {
        if (json_is_integer(json_object_get(n, "id")))
            json_array_append(out, json_object_get(n, "id"));
    }
    return out;
}

/* One device's row; 'holder' (borrowed) is its index entry or NULL. */
static json_t *device_row(const json_t *dev, const json_t *holder)
{
    const json_t *aliases = json_object_get(dev, "aliases");
    const char *physical = str_at(dev, "physical", NULL);
    json_t *h = holder ? json_deep_copy(holder) : json_null();
    const char *state = holder ? str_at(holder, "state", NULL)
                               : (healthy(dev) ? "free" : "unhealthy");
    json_t *since = holder ? json_incref(json_object_get(holder, "since")) : NULL;

    json_object_del(h, "state");
    json_object_del(h, "since");
    return json_pack(
        "{s:s,s:s,s:s,s:o,s:o,s:o,s:s,s:o,s:o}", "resource",
        or_empty(str_at(dev, "resourceName", NULL)), "id", or_empty(str_at(dev, "id", NULL)),
        "health", str_at(dev, "health", NULL) ? str_at(dev, "health", NULL) : "Unknown", "numa",
        numa_of(dev), "aliases", json_is_array(aliases) ? json_deep_copy(aliases) : json_array(),
        "physical", physical ? json_string(physical) : json_null(), "state", state, "holder", h,
        "since", since ? since : json_null());
}

/* A device's index entry. */
static const json_t *lookup(const json_t *idx, const char *node, const json_t *dev)
{
    char key[KEY_MAX];

    dev_key(key, sizeof(key), node, or_empty(str_at(dev, "resourceName", NULL)),
            or_empty(str_at(dev, "id", NULL)));
    return json_object_get(idx, key);
}

/* ---- nodes ---- */

/* Count one device into its resource's row of 'per' (resource -> row). */
static int count_device(json_t *per, const char *node, const json_t *dev, const json_t *holder)
{
    const char *res = or_empty(str_at(dev, "resourceName", NULL));
    const char *state = holder ? str_at(holder, "state", NULL)
                               : (healthy(dev) ? "free" : "unhealthy");
    json_t *row = json_object_get(per, res), *v;
    char pod[600];

    if (!row) {
        row = json_pack("{s:s,s:s,s:i,s:i,s:i,s:i,s:i,s:i,s:{}}", "node", node, "resource", res,
                        "total", 0, "healthy", 0, "unhealthy", 0, "held", 0, "reserved", 0, "free",
                        0, "podset");
        if (!row || json_object_set_new(per, res, row) != 0)
            return -1;
    }
    v = json_object_get(row, "total");
    json_integer_set(v, json_integer_value(v) + 1);
    v = json_object_get(row, healthy(dev) ? "healthy" : "unhealthy");
    json_integer_set(v, json_integer_value(v) + 1);
    v = json_object_get(row, state);
    if (v && strcmp(state, "unhealthy") != 0)
        json_integer_set(v, json_integer_value(v) + 1);
    if (!holder)
        return 0;
    snprintf(pod, sizeof(pod), "%s/%s", or_empty(str_at(holder, "namespace", NULL)),
             or_empty(str_at(holder, "pod", NULL)));
    return json_object_set_new(json_object_get(row, "podset"), pod, json_true());
}

/* The rows of 'per' into 'rows', with 'pods' counted from the pod sets. */
static int flush_node(json_t *per, json_t *rows)
{
    const char *res;
    json_t *row;

    json_object_foreach(per, res, row) {
        json_object_set_new(
            row, "pods",
            json_integer((json_int_t)json_object_size(json_object_get(row, "podset"))));
        json_object_del(row, "podset");
        if (json_array_append(rows, row) != 0)
            return -1;
    }
    return 0;
}

/* The end of a command's rows: the holders' index freed, the rows sorted by
 * 'keys', or NULL (the rows freed) when building them failed. */
static json_t *finish(json_t *idx, json_t *rows, int bad, const char *const *keys)
{
    json_decref(idx);
    if (bad) {
        json_decref(rows);
        return NULL;
    }
    sort_rows(rows, keys);
    return rows;
}

json_t *model_nodes(const json_t *nds, const json_t *dvbs)
{
    static const char *const keys[] = {"node", "resource", NULL};
    json_t *idx = index_holders(dvbs), *rows = json_array(), *per = NULL;
    const json_t *nd, *dev;
    const char *node;
    size_t i, j;
    int bad = !idx || !rows;

    json_array_foreach(bad ? NULL : json_object_get(nds, "items"), i, nd) {
        node = or_empty(str_at(nd, "metadata", "name"));
        per = json_object();
        bad = !per;
        json_array_foreach(json_object_get(json_object_get(nd, "status"), "devices"), j, dev) {
            bad = bad || count_device(per, node, dev, lookup(idx, node, dev));
        }
        bad = bad || flush_node(per, rows);
        json_decref(per);
        if (bad)
            break;
    }
    return finish(idx, rows, bad, keys);
}

/* ---- node, who ---- */

static const json_t *find_node(const json_t *nds, const char *node)
{
    const json_t *nd;
    size_t i;

    json_array_foreach(json_object_get(nds, "items"), i, nd) {
        if (strcmp(or_empty(str_at(nd, "metadata", "name")), node) == 0)
            return nd;
    }
    return NULL;
}

json_t *model_node(const json_t *nds, const json_t *dvbs, const char *node, bool *found)
{
    static const char *const keys[] = {"resource", "id", NULL};
    const json_t *nd = find_node(nds, node), *dev;
    json_t *idx = index_holders(dvbs), *rows = json_array();
    size_t i;
    int bad = !idx || !rows;

    *found = nd != NULL;
    json_array_foreach(bad ? NULL : json_object_get(json_object_get(nd, "status"), "devices"), i,
                       dev) {
        bad = json_array_append_new(rows, device_row(dev, lookup(idx, node, dev))) != 0;
        if (bad)
            break;
    }
    return finish(idx, rows, bad, keys);
}

static bool names_device(const json_t *dev, const char *device)
{
    const json_t *a;
    size_t i;

    if (strcmp(or_empty(str_at(dev, "id", NULL)), device) == 0)
        return true;
    json_array_foreach(json_object_get(dev, "aliases"), i, a) {
        if (json_is_string(a) && strcmp(json_string_value(a), device) == 0)
            return true;
    }
    return false;
}

/* "node\nname" of each name of 'dev' (its id and aliases) into 'names'. */
static int add_names(json_t *names, const char *node, const json_t *dev)
{
    const json_t *a;
    char key[KEY_MAX];
    size_t i;

    snprintf(key, sizeof(key), "%s\n%s", node, or_empty(str_at(dev, "id", NULL)));
    if (json_object_set_new(names, key, json_true()) != 0)
        return -1;
    json_array_foreach(json_object_get(dev, "aliases"), i, a) {
        snprintf(key, sizeof(key), "%s\n%s", node, or_empty(json_string_value(a)));
        if (json_object_set_new(names, key, json_true()) != 0)
            return -1;
    }
    return 0;
}

/* Whether 'device' covers 'dev' of 'node': it names it (id or alias), or
 * names its physical device, or its physical device is one of 'names' (a
 * covered device of that node, "node\nname"). */
static bool covers(const json_t *dev, const char *node, const char *device, const json_t *names)
{
    const char *phys = str_at(dev, "physical", NULL);
    char key[KEY_MAX];

    if (names_device(dev, device) || (phys && strcmp(phys, device) == 0))
        return true;
    if (!phys)
        return false;
    snprintf(key, sizeof(key), "%s\n%s", node, phys);
    return json_object_get(names, key) != NULL;
}

/* One pass over the listed devices: each covered one not in 'found'
 * ("node\nresource\nid" -> true) is added, its names to 'names'. The number added, or -1 when out
 * of memory. */
static int cover_pass(const json_t *nds, const char *device, json_t *names, json_t *found)
{
    const json_t *nd, *dev;
    const char *node;
    char key[KEY_MAX];
    size_t i, j;
    int added = 0;

    json_array_foreach(json_object_get(nds, "items"), i, nd) {
        node = or_empty(str_at(nd, "metadata", "name"));
        json_array_foreach(json_object_get(json_object_get(nd, "status"), "devices"), j, dev) {
            dev_key(key, sizeof(key), node, or_empty(str_at(dev, "resourceName", NULL)),
                    or_empty(str_at(dev, "id", NULL)));
            if (json_object_get(found, key) || !covers(dev, node, device, names))
                continue;
            if (json_object_set_new(found, key, json_true()) != 0 ||
                add_names(names, node, dev) != 0)
                return -1;
            added++;
        }
    }
    return added;
}

/* Rows of the listed devices that 'device' covers: by id or alias, and,
 * pass after pass, the slices and replicas of those (GPU, MIG instance,
 * its replicas). Each row's index entry is marked seen (deleted from
 * 'idx'). */
static int who_listed(const json_t *nds, json_t *idx, const char *device, json_t *rows)
{
    json_t *names = json_object(), *found = json_object(), *row;
    const json_t *nd, *dev;
    const char *node;
    char key[KEY_MAX];
    size_t i, j;
    int n = names && found ? 1 : -1;

    while (n > 0)
        n = cover_pass(nds, device, names, found);
    json_array_foreach(n < 0 ? NULL : json_object_get(nds, "items"), i, nd) {
        node = or_empty(str_at(nd, "metadata", "name"));
        json_array_foreach(json_object_get(json_object_get(nd, "status"), "devices"), j, dev) {
            dev_key(key, sizeof(key), node, or_empty(str_at(dev, "resourceName", NULL)),
                    or_empty(str_at(dev, "id", NULL)));
            if (!json_object_get(found, key))
                continue;
            row = device_row(dev, lookup(idx, node, dev));
            if (!row || json_object_set_new(row, "node", json_string(node)) != 0 ||
                json_array_append_new(rows, row) != 0)
                n = -1;
            json_object_del(idx, key);
        }
    }
    json_decref(names);
    json_decref(found);
    return n < 0 ? -1 : 0;
}

/* Rows of devices that only a DeviceBinding names (by id). */
static int who_unlisted(json_t *idx, const char *device, json_t *rows)
{
    char node[KEY_MAX], res[KEY_MAX];
    const char *key, *nl, *nl2;
    json_t *holder, *dev, *row;

    json_object_foreach(idx, key, holder) {
        nl = strchr(key, '\n');
        nl2 = nl ? strchr(nl + 1, '\n') : NULL;
        if (!nl2 || strcmp(nl2 + 1, device) != 0)
            continue;
        snprintf(node, sizeof(node), "%.*s", (int)(nl - key), key);
        snprintf(res, sizeof(res), "%.*s", (int)(nl2 - nl - 1), nl + 1);
        dev = json_pack("{s:s,s:s}", "resourceName", res, "id", device);
        row = dev ? device_row(dev, holder) : NULL;
        json_decref(dev);
        if (!row || json_object_set_new(row, "node", json_string(node)) != 0 ||
            json_array_append_new(rows, row) != 0)
            return -1;
    }
    return 0;
}

json_t *model_who(const json_t *nds, const json_t *dvbs, const char *device)
{
    static const char *const keys[] = {"node", "resource", "id", NULL};
    json_t *idx = index_holders(dvbs), *rows = json_array();
    int bad = !idx || !rows;

    bad = bad || who_listed(nds, idx, device, rows) || who_unlisted(idx, device, rows);
    return finish(idx, rows, bad, keys);
}

/* ---- pods ---- */

/* 'containers' with devices, each as {name, state, devices}; their ids
 * appended to 'ids'. */
static json_t *pod_containers(const json_t *containers, const char *state, json_t *ids)
{
    json_t *out = json_array(), *devs;
    const json_t *c, *d, *id;
    size_t i, j, k;

    json_array_foreach(containers, i, c) {
        devs = json_array();
        json_array_foreach(json_object_get(c, "devices"), j, d) {
            if (!json_array_size(json_object_get(d, "deviceIds")))
                continue;
            json_array_append_new(devs, json_pack("{s:s,s:O}", "resourceName",
                                                  or_empty(str_at(d, "resourceName", NULL)),
                                                  "deviceIds", json_object_get(d, "deviceIds")));
            json_array_foreach(json_object_get(d, "deviceIds"), k, id) {
                json_array_append(ids, (json_t *)id);
            }
        }
        if (json_array_size(devs))
            json_array_append_new(out, json_pack("{s:s,s:s,s:o}", "name",
                                                 or_empty(str_at(c, "name", NULL)), "state", state,
                                                 "devices", devs));
        else
            json_decref(devs);
    }
    return out;
}

static json_t *pod_row(const json_t *dvb)
{
    const json_t *st = json_object_get(dvb, "status"), *md = json_object_get(dvb, "metadata");
    const char *phase = str_at(st, "phase", NULL), *node;
    json_t *ids = json_array(),
           *cs = pod_containers(json_object_get(st, "containers"), "held", ids);
    bool held = json_array_size(cs) > 0;

    if (!held && !(phase && strcmp(phase, "Bound") == 0)) {
        json_decref(cs);
        cs = pod_containers(json_object_get(json_object_get(dvb, "spec"), "containers"), "reserved",
                            ids);
    }
    if (!json_array_size(cs)) {
        json_decref(cs);
        json_decref(ids);
        return json_null();
    }
    node = dvb_node(dvb, held);
    return json_pack("{s:s,s:s,s:s,s:s,s:s,s:s,s:o,s:o}", "namespace",
                     or_empty(str_at(md, "namespace", NULL)), "name",
                     or_empty(str_at(md, "name", NULL)), "node", or_empty(node), "phase",
                     or_empty(phase), "podUID", or_empty(str_at(st, "podUID", NULL)), "summary",
                     or_empty(str_at(st, "summary", NULL)), "deviceIds", ids, "containers", cs);
}

json_t *model_pods(const json_t *dvbs)
{
    json_t *rows = json_array(), *row;
    const json_t *dvb;
    size_t i;

    json_array_foreach(rows ? json_object_get(dvbs, "items") : NULL, i, dvb) {
        row = pod_row(dvb);
        if (!row) {
            json_decref(rows);
            return NULL;
        }
        if (json_is_null(row))
            continue;
        if (json_array_append_new(rows, row) != 0) {
            json_decref(rows);
            return NULL;
        }
    }
    return rows;
}
