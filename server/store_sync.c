/* SPDX-License-Identifier: Apache-2.0 */
/* store_sync.c - the kubelet reconcile: the kubelet's pods, bindings and
 * devices (a snapshot built by source_kubelet.c) diffed against the tables
 * in one write transaction. Only real changes are written and emitted; with
 * none the transaction is rolled back, so a steady kubelet costs no disk
 * write and no revision. Reservations are left alone. Rows are keyed
 * "a\x1fb" (the snapshot has no control characters; see source_kubelet.c)
 * and compared in the order they were first seen, which is the order of
 * the events. */
#define LOG_MOD "store"
#include "../common/common.h"
#include "../common/jsonx.h"
#include "store_int.h"
#include "store_view.h"

#include <assert.h>

#define NAME_MAX_LEN 1024 /* longest name or id accepted from a snapshot */
#define SYNC_KEY_MAX (3 * NAME_MAX_LEN + 4)

/* One pod, device or binding, wanted or stored, as the reconcile compares
 * it. Its strings are copies in one block ('mem'). */
struct srow {
    char *mem;       /* the key and the strings below; new */
    const char *key; /* "ns\x1fname" (pod) or "resource\x1fid" (device, binding) */
    union {
        struct {
            const char *ns, *name; /* the pod */
            const char *uid;       /* stored: its uid */
            const char *text;      /* its containers' canonical text */
            json_t *containers;    /* wanted: its containers; new */
        } pod;
        struct {
            const char *res, *id; /* the device */
            const char *health;   /* Healthy or Unhealthy */
            const char *numa;     /* NUMA ids as JSON text; "" (wanted, removed, no
                                     topology given): what it has stored */
            bool removed;         /* bound but not allocatable */
        } dev;
        struct {
            const char *res, *id;             /* the device */
            const char *ns, *pod, *container; /* its holder */
            const char *claim;                /* DRA claim "ns/name", or "" */
        } bind;
    };
};

/* Rows in the order they were first put, found by key. */
struct stable {
    struct srow *rows; /* the rows */
    size_t n;          /* rows used */
    size_t room;       /* rows allocated */
    json_t *index;     /* key -> its place in 'rows' (an integer) */
};

/* The wanted state and the stored one, keyed like the tables. */
struct sync {
    struct store *st;        /* the store, inside the write transaction */
    struct stable want_pods; /* the kubelet's pods */
    struct stable want_devs; /* its devices: allocatable, or bound and not */
    struct stable want_bind; /* its bindings */
    struct stable have_pods; /* the stored pods */
    struct stable have_devs; /* the stored devices */
    struct stable have_bind; /* the stored bindings (not the let-go rows) */
    struct stable touched;   /* devices whose holder changed (the key only) */
    size_t events;           /* events emitted so far */
};

static void key2(char *key, const char *a, const char *b)
{
    snprintf(key, SYNC_KEY_MAX, "%s\x1f%s", a, b);
}

/* ---- rows and tables ---- */

#define SROW_STRINGS_MAX 6 /* strings of a row, its key aside */

/* Give 'r' the key 'key' and copies of the 'n' strings 'vals' in one new
 * block: *dst[k] points at the copy of vals[k]. Frees the block it had. */
static err_t srow_fill(struct srow *r, const char *key, size_t n, const char *const *vals,
                       const char **const *dst)
{
    size_t len[SROW_STRINGS_MAX], klen = strlen(key) + 1, total = klen, k;
    char *mem, *at;

    assert(n <= SROW_STRINGS_MAX);
    for (k = 0; k < n; k++)
        total += (len[k] = strlen(vals[k])) + 1;
    mem = malloc(total);
    if (!mem)
        return ERR_NOMEM;
    r->key = memcpy(mem, key, klen);
    at = mem + klen;
    for (k = 0; k < n; k++) {
        *dst[k] = memcpy(at, vals[k], len[k] + 1);
        at += len[k] + 1;
    }
    free(r->mem);
    r->mem = mem;
    return ERR_OK;
}

static err_t stable_init(struct stable *t)
{
    memset(t, 0, sizeof(*t));
    t->index = json_object();
    return t->index ? ERR_OK : ERR_NOMEM;
}

/* Free the rows; the pods' containers with them. */
static void stable_release(struct stable *t, bool pods)
{
    size_t i;

    for (i = 0; i < t->n; i++) {
        if (pods)
            json_decref(t->rows[i].pod.containers);
        free(t->rows[i].mem);
    }
    free(t->rows);
    json_decref(t->index);
}

/* The row of 'key', or NULL. Valid till the next stable_slot(). */
static struct srow *stable_get(const struct stable *t, const char *key)
{
    json_t *at = json_object_get(t->index, key);

    return at ? &t->rows[json_integer_value(at)] : NULL;
}

/* The row of 'key' to fill (*out): the one there, in its place, or a new
 * empty one, last. Valid till the next stable_slot(). */
static err_t stable_slot(struct stable *t, const char *key, struct srow **out)
{
    struct srow *r = stable_get(t, key);

    if (r) {
        *out = r;
        return ERR_OK;
    }
    if (t->n == t->room) {
        size_t room = t->room ? 2 * t->room : 64;

        r = realloc(t->rows, room * sizeof(*r));
        if (!r)
            return ERR_NOMEM;
        t->rows = r;
        t->room = room;
    }
    if (json_object_set_new(t->index, key, json_integer((json_int_t)t->n)))
        return ERR_NOMEM;
    r = &t->rows[t->n++];
    memset(r, 0, sizeof(*r));
    *out = r;
    return ERR_OK;
}

/* Put a device row of 'key' in 't'. */
static err_t put_dev(struct stable *t, const char *key, const char *res, const char *id,
                     const char *health, const char *numa, bool removed)
{
    const char *vals[] = {res, id, health, numa};
    struct srow *r;
    err_t rc = stable_slot(t, key, &r);

    if (!rc)
        rc = srow_fill(
            r, key, 4, vals,
            (const char **const[]){&r->dev.res, &r->dev.id, &r->dev.health, &r->dev.numa});
    if (!rc)
        r->dev.removed = removed;
    return rc;
}

/* A binding: device res/id held by container 'c' of pod ns/name, through
 * DRA claim 'claim' ("ns/name", or ""). */
struct bind_of {
    const char *res, *id, *ns, *name, *c, *claim;
};

/* Put the binding row 'b' of 'key' in 't'. */
static err_t put_bind(struct stable *t, const char *key, const struct bind_of *b)
{
    const char *vals[] = {b->res, b->id, b->ns, b->name, b->c, b->claim};
    struct srow *r;
    err_t rc = stable_slot(t, key, &r);

    if (rc)
        return rc;
    return srow_fill(r, key, 6, vals,
                     (const char **const[]){&r->bind.res, &r->bind.id, &r->bind.ns, &r->bind.pod,
                                            &r->bind.container, &r->bind.claim});
}

/* ---- the wanted state ---- */

/* A non-empty string of at most NAME_MAX_LEN bytes, or NULL. */
static const char *name_of(const json_t *obj, const char *field)
{
    const char *s = json_string_value(json_object_get(obj, field));

    return s && s[0] && strlen(s) <= NAME_MAX_LEN ? s : NULL;
}

static int cmp_json_str(const void *a, const void *b)
{
    return strcmp(json_string_value(*(json_t *const *)a), json_string_value(*(json_t *const *)b));
}

static int cmp_group(const void *a, const void *b)
{
    return strcmp(json_string_value(json_object_get(*(json_t *const *)a, "resourceName")),
                  json_string_value(json_object_get(*(json_t *const *)b, "resourceName")));
}

/* Sort the array 'arr' in place with 'cmp'. */
static err_t sort_array(json_t *arr, int (*cmp)(const void *, const void *))
{
    size_t n = json_array_size(arr), i;
    json_t **v = calloc(n ? n : 1, sizeof(*v));

    if (!v)
        return ERR_NOMEM;
    for (i = 0; i < n; i++)
        v[i] = json_incref(json_array_get(arr, i));
    qsort(v, n, sizeof(*v), cmp);
    json_array_clear(arr);
    for (i = 0; i < n; i++)
        json_array_append_new(arr, v[i]);
    free(v);
    return json_array_size(arr) == n ? ERR_OK : ERR_NOMEM;
}

/* Sorted unique NUMA ids of a topology {"nodes":[{"ID":n}]}, as JSON text;
 * new, or NULL if out of memory. */
static char *numa_text(const json_t *topology)
{
    json_t *ids = json_array(), *n, *w;
    size_t i, j;
    char *text = NULL;
    bool have;

    json_array_foreach(json_object_get(topology, "nodes"), i, n) {
        json_int_t id = json_integer_value(json_object_get(n, "ID"));

        have = false;
        json_array_foreach(ids, j, w) {
            have = have || json_integer_value(w) == id;
        }
        for (j = 0; !have && j < json_array_size(ids); j++) {
            if (json_integer_value(json_array_get(ids, j)) > id)
                break;
        }
        if (!have)
            json_array_insert_new(ids, j, json_integer(id));
    }
    if (ids)
        text = jsonx_dumps(ids);
    json_decref(ids);
    return text;
}

static err_t want_device(struct sync *s, const char *res, const char *id, const char *health,
                         const json_t *topology, bool removed)
{
    char key[SYNC_KEY_MAX];
    char *numa = numa_text(topology);
    err_t rc;

    if (!numa)
        return ERR_NOMEM;
    if (removed && strcmp(numa, "[]") == 0)
        numa[0] = '\0'; /* no topology in the pod: keep what the device had */
    key2(key, res, id);
    rc = put_dev(&s->want_devs, key, res, id, health, numa, removed);
    free(numa);
    return rc;
}

static err_t want_allocatable(struct sync *s, const json_t *devices)
{
    const char *res, *id;
    json_t *d;
    size_t i;
    err_t rc;

    json_array_foreach(devices, i, d) {
        res = name_of(d, "resourceName");
        id = name_of(d, "id");
        if (!res || !id)
            return ERR_INVAL;
        rc = want_device(s, res, id, "Healthy", json_object_get(d, "topology"), false);
        if (rc)
            return rc;
    }
    return ERR_OK;
}

/* Binding 'b', of a device group with 'topology': the binding (the first
 * container listing the device keeps it, pods in build_want's order), and the device when it is not
 * allocatable: Unhealthy, or for a DRA device (one with a claim), which has
 * no health of its own, Healthy; both marked removed (not registered). */
static err_t want_bound(struct sync *s, const struct bind_of *b, const json_t *topology)
{
    char key[SYNC_KEY_MAX];
    err_t rc;

    key2(key, b->res, b->id);
    if (stable_get(&s->want_bind, key)) {
        log_debug("device %s %s is listed for two containers; kept for the first", b->res, b->id);
        return ERR_OK;
    }
    rc = put_bind(&s->want_bind, key, b);
    if (!rc && !stable_get(&s->want_devs, key))
        rc = want_device(s, b->res, b->id, b->claim[0] ? "Healthy" : "Unhealthy", topology, true);
    return rc;
}

/* The claim "ns/name" through which a DRA group (one with "claims") holds
 * device 'id', into 'buf'; "" for other groups. */
static void claim_of(const json_t *g, const char *id, char *buf, size_t cap)
{
    json_t *cl, *v;
    size_t i, j;

    buf[0] = '\0';
    json_array_foreach(json_object_get(g, "claims"), i, cl) {
        json_array_foreach(json_object_get(cl, "deviceIds"), j, v) {
            if (json_is_string(v) && strcmp(json_string_value(v), id) == 0) {
                snprintf(buf, cap, "%s/%s", json_string_value(json_object_get(cl, "namespace")),
                         json_string_value(json_object_get(cl, "name")));
                return;
            }
        }
    }
}

/* One device group of container 'c' of pod ns/name: its ids sorted in
 * place, each bound. */
static err_t want_group(struct sync *s, const char *ns, const char *name, const char *c, json_t *g)
{
    const char *res = name_of(g, "resourceName"), *id;
    json_t *ids = json_object_get(g, "deviceIds"), *v;
    char claim[2 * NAME_MAX_LEN + 2];
    size_t i;
    err_t rc = res && json_is_array(ids) ? sort_array(ids, cmp_json_str) : ERR_INVAL;

    if (!json_object_get(g, "topology"))
        json_object_set_new(g, "topology", json_pack("{s:[]}", "nodes"));
    json_array_foreach(ids, i, v) {
        id = json_string_value(v);
        if (rc || !id || !id[0] || strlen(id) > NAME_MAX_LEN)
            return rc ? rc : ERR_INVAL;
        claim_of(g, id, claim, sizeof(claim));
        rc = want_bound(s, &(struct bind_of){res, id, ns, name, c, claim},
                        json_object_get(g, "topology"));
    }
    return rc;
}

/* One container of pod ns/name: device groups sorted by resource, each walked. */
static err_t want_container(struct sync *s, const char *ns, const char *name, json_t *c)
{
    const char *cn = name_of(c, "name");
    json_t *groups = json_object_get(c, "devices"), *g;
    size_t j;
    err_t rc = cn && json_is_array(groups) ? sort_array(groups, cmp_group) : ERR_INVAL;

    json_array_foreach(groups, j, g) {
        if (rc)
            break;
        rc = json_is_object(g) && name_of(g, "resourceName") ? want_group(s, ns, name, cn, g)
                                                             : ERR_INVAL;
    }
    return rc;
}

/* Put the wanted pod ns/name of key 'key' with containers 'cs' (stolen). A
 * pod listed twice (an old and a new instance: the List has no uid) is one
 * pod with the containers of both, so that every device bound to it is one
 * it lists: the first's containers followed by these. */
static err_t put_want_pod(struct sync *s, const char *key, const char *ns, const char *name,
                          json_t *cs)
{
    struct srow *r = stable_get(&s->want_pods, key);
    char *text = NULL;
    err_t rc = ERR_NOMEM;

    if (r && json_array_extend(r->pod.containers, cs))
        goto out;
    if (r) {
        json_decref(cs);
        cs = json_incref(r->pod.containers);
    }
    text = jsonx_dumps(cs);
    if (!text)
        goto out;
    rc = stable_slot(&s->want_pods, key, &r);
    if (!rc)
        rc = srow_fill(r, key, 3, (const char *[]){ns, name, text},
                       (const char **const[]){&r->pod.ns, &r->pod.name, &r->pod.text});
    if (rc)
        goto out;
    json_decref(r->pod.containers);
    r->pod.containers = cs;
    cs = NULL;
out:
    json_decref(cs);
    free(text);
    return rc;
}

/* A pod: its canonical containers and their text. */
static err_t want_pod(struct sync *s, const json_t *pod)
{
    const char *ns = name_of(pod, "namespace"), *name = name_of(pod, "name");
    json_t *cs = json_deep_copy(json_object_get(pod, "containers")), *c;
    char key[SYNC_KEY_MAX];
    size_t i;
    err_t rc = ns && name && json_is_array(cs) ? ERR_OK : ERR_INVAL;

    json_array_foreach(cs, i, c) {
        if (!rc)
            rc = json_is_object(c) ? want_container(s, ns, name, c) : ERR_INVAL;
    }
    if (rc) {
        json_decref(cs);
        return rc;
    }
    key2(key, ns, name);
    return put_want_pod(s, key, ns, name, cs);
}

/* qsort order of the List's pods: by namespace and name, then (a pod
 * listed twice) by their text. */
static int pod_order(const void *a, const void *b)
{
    const json_t *x = *(const json_t *const *)a, *y = *(const json_t *const *)b;
    const char *xs, *ys;
    char *xt, *yt;
    int c;

    xs = json_string_value(json_object_get(x, "namespace"));
    ys = json_string_value(json_object_get(y, "namespace"));
    c = strcmp(xs ? xs : "", ys ? ys : "");
    if (c)
        return c;
    xs = json_string_value(json_object_get(x, "name"));
    ys = json_string_value(json_object_get(y, "name"));
    c = strcmp(xs ? xs : "", ys ? ys : "");
    if (c)
        return c;
    xt = jsonx_dumps(x);
    yt = jsonx_dumps(y);
    c = xt && yt ? strcmp(xt, yt) : 0;
    free(xt);
    free(yt);
    return c;
}

/* The kubelet lists pods in no fixed order (a Go map's), and the first pod
 * listing a device keeps it (want_bound), so the pods are taken in
 * pod_order: an unchanged List is the same wanted state from poll to poll. */
static err_t build_want(struct sync *s, const json_t *snap)
{
    const json_t *pods = json_object_get(snap, "pods"), *devs = json_object_get(snap, "devices");
    size_t i, n = json_array_size(pods);
    json_t **sorted;
    err_t rc;

    if (!json_is_array(pods) || !json_is_array(devs))
        return ERR_INVAL;
    sorted = calloc(n ? n : 1, sizeof(*sorted));
    if (!sorted)
        return ERR_NOMEM;
    for (i = 0; i < n; i++)
        sorted[i] = json_array_get(pods, i);
    qsort(sorted, n, sizeof(*sorted), pod_order);
    rc = want_allocatable(s, devs);
    for (i = 0; !rc && i < n; i++)
        rc = json_is_object(sorted[i]) ? want_pod(s, sorted[i]) : ERR_INVAL;
    free(sorted);
    return rc;
}

/* ---- the stored state ---- */

/* Each row of 'sql' (no argument) as put(s, q). */
static err_t load_rows(struct sync *s, const char *sql,
                       err_t (*put)(struct sync *s, sqlite3_stmt *q))
{
    sqlite3 *db = s->st->commit.db;
    sqlite3_stmt *q = NULL;
    bool row;
    err_t rc = db_prep(db, &q, sql, NULL);

    while (!rc) {
        rc = db_step(db, q, &row);
        if (rc || !row)
            break;
        rc = put(s, q);
    }
    db_done(q);
    return rc;
}

/* namespace,name,uid,containers */
static err_t have_pod(struct sync *s, sqlite3_stmt *q)
{
    const char *vals[] = {db_text(q, 0), db_text(q, 1), db_text(q, 2), db_text(q, 3)};
    char key[SYNC_KEY_MAX];
    struct srow *r;
    err_t rc;

    key2(key, vals[0], vals[1]);
    rc = stable_slot(&s->have_pods, key, &r);
    if (rc)
        return rc;
    return srow_fill(r, key, 4, vals,
                     (const char **const[]){&r->pod.ns, &r->pod.name, &r->pod.uid, &r->pod.text});
}

/* resource,id,health,numa,removed */
static err_t have_dev(struct sync *s, sqlite3_stmt *q)
{
    char key[SYNC_KEY_MAX];

    key2(key, db_text(q, 0), db_text(q, 1));
    return put_dev(&s->have_devs, key, db_text(q, 0), db_text(q, 1), db_text(q, 2), db_text(q, 3),
                   sqlite3_column_int(q, 4) != 0);
}

/* resource,device_id,namespace,pod,container,claim */
static err_t have_bind(struct sync *s, sqlite3_stmt *q)
{
    char key[SYNC_KEY_MAX];

    key2(key, db_text(q, 0), db_text(q, 1));
    return put_bind(&s->have_bind, key,
                    &(struct bind_of){db_text(q, 0), db_text(q, 1), db_text(q, 2), db_text(q, 3),
                                      db_text(q, 4), db_text(q, 5)});
}

/* resource,id,numa of a device a DRA driver published: wanted as it is. */
static err_t want_published_row(struct sync *s, sqlite3_stmt *q)
{
    char key[SYNC_KEY_MAX];

    key2(key, db_text(q, 0), db_text(q, 1));
    return put_dev(&s->want_devs, key, db_text(q, 0), db_text(q, 1), "Healthy", db_text(q, 2),
                   false);
}

/* The devices DRA drivers published through podres-syncer (PUT
 * /v1/drivers): the kubelet does not list them, and they stay, bound or
 * not. Read in the transaction, as the stored state is. */
static err_t want_published(struct sync *s)
{
    return load_rows(s,
                     "SELECT d.resource,d.id,d.numa FROM devices d JOIN resources r ON "
                     "r.name=d.resource WHERE r.dra=1 AND d.removed=0",
                     want_published_row);
}

static err_t load_have(struct sync *s)
{
    err_t rc = load_rows(s, "SELECT namespace,name,uid,containers FROM pods", have_pod);

    if (!rc)
        rc = load_rows(s, "SELECT resource,id,health,numa,removed FROM devices", have_dev);
    if (!rc) /* not the let-go devices' rows (schema 3) */
        rc = load_rows(s,
                       "SELECT resource,device_id,namespace,pod,container,claim FROM bindings "
                       "WHERE pod<>''",
                       have_bind);
    return rc;
}

/* ---- applying the difference ---- */

/* Emit 'type' of the pod ns/name or the device resource/id, after stamping the next revision. */
static err_t emit_view(struct sync *s, const char *type, const char *kind, const char *a,
                       const char *b)
{
    struct store *st = s->st;
    json_t *obj = NULL;
    bool pod = strcmp(kind, "PodResources") == 0;
    err_t rc = pod ? st_pod_json(st->commit.db, a, b, &obj)
                   : st_device_json(st->commit.db, a, b, &obj);

    if (rc)
        return rc;
    if (json_object_set_new(obj, "revision", json_integer((json_int_t)changelog_next(&st->log)))) {
        rc = ERR_NOMEM;
        goto out;
    }
    rc = changelog_emit(&st->log, type, kind, pod ? a : "", obj);
    if (!rc)
        s->events++;
out:
    json_decref(obj);
    return rc;
}

static err_t drop_pods(struct sync *s)
{
    const struct srow *p;
    size_t i;
    err_t rc = ERR_OK;

    for (i = 0; !rc && i < s->have_pods.n; i++) {
        p = &s->have_pods.rows[i];
        if (stable_get(&s->want_pods, p->key))
            continue;
        rc = emit_view(s, "DELETED", "PodResources", p->pod.ns, p->pod.name);
        if (!rc)
            rc = db_exec(s->st->commit.db, "DELETE FROM pods WHERE namespace=? AND name=?", "tt",
                         p->pod.ns, p->pod.name);
    }
    return rc;
}

static bool same_owner(const struct srow *a, const struct srow *b)
{
    return a && b && strcmp(a->bind.ns, b->bind.ns) == 0 && strcmp(a->bind.pod, b->bind.pod) == 0 &&
           strcmp(a->bind.container, b->bind.container) == 0 &&
           strcmp(a->bind.claim, b->bind.claim) == 0;
}

/* Note that the holder of device 'key' changed. */
static err_t touch(struct sync *s, const char *key)
{
    struct srow *r;
    err_t rc = stable_slot(&s->touched, key, &r);

    return rc ? rc : srow_fill(r, key, 0, NULL, NULL);
}

/* Rewrite the bindings whose owner changed; remember their devices. */
static err_t rebind(struct sync *s)
{
    const struct srow *v;
    size_t i;
    err_t rc = ERR_OK;

    for (i = 0; !rc && i < s->have_bind.n; i++) {
        v = &s->have_bind.rows[i];
        if (same_owner(v, stable_get(&s->want_bind, v->key)))
            continue;
        rc = db_exec(s->st->commit.db, "DELETE FROM bindings WHERE resource=? AND device_id=?",
                     "tt", v->bind.res, v->bind.id);
        if (!rc)
            rc = st_hist_unbind(s->st, v->bind.res, v->bind.id);
        if (!rc)
            rc = touch(s, v->key);
    }
    for (i = 0; !rc && i < s->want_bind.n; i++) {
        v = &s->want_bind.rows[i];
        if (same_owner(v, stable_get(&s->have_bind, v->key)))
            continue;
        rc = db_exec(s->st->commit.db,
                     "INSERT OR REPLACE INTO bindings(resource,device_id,namespace,pod,"
                     "container,claim) VALUES(?,?,?,?,?,?)",
                     "tttttt", v->bind.res, v->bind.id, v->bind.ns, v->bind.pod, v->bind.container,
                     v->bind.claim);
        if (!rc)
            rc = st_hist_bind(s->st, v->bind.res, v->bind.id, v->bind.ns, v->bind.pod,
                              "" /* the kubelet gives no uid */, v->bind.container);
        if (!rc)
            rc = touch(s, v->key);
    }
    return rc;
}

static err_t drop_devices(struct sync *s)
{
    const struct srow *d;
    size_t i;
    err_t rc = ERR_OK;

    for (i = 0; !rc && i < s->have_devs.n; i++) {
        d = &s->have_devs.rows[i];
        if (stable_get(&s->want_devs, d->key))
            continue;
        rc = emit_view(s, "DELETED", "Device", d->dev.res, d->dev.id);
        if (!rc)
            rc = db_exec(s->st->commit.db, "DELETE FROM devices WHERE resource=? AND id=?", "tt",
                         d->dev.res, d->dev.id);
        if (!rc) /* a let-go row left by the write API */
            rc = db_exec(s->st->commit.db,
                         "DELETE FROM bindings WHERE resource=? AND device_id=? AND pod=''", "tt",
                         d->dev.res, d->dev.id);
    }
    return rc;
}

static err_t put_pods(struct sync *s)
{
    const struct srow *p, *h;
    size_t i;
    err_t rc = ERR_OK;

    for (i = 0; !rc && i < s->want_pods.n; i++) {
        p = &s->want_pods.rows[i];
        h = stable_get(&s->have_pods, p->key);
        if (h && h->pod.uid[0] == '\0' && strcmp(h->pod.text, p->pod.text) == 0)
            continue;
        rc = db_exec(s->st->commit.db,
                     "INSERT OR REPLACE INTO pods(namespace,name,uid,containers,request,revision) "
                     "VALUES(?,?,'',?,NULL,?)",
                     "tttu", p->pod.ns, p->pod.name, p->pod.text, changelog_next(&s->st->log));
        if (!rc)
            rc = emit_view(s, h ? "MODIFIED" : "ADDED", "PodResources", p->pod.ns, p->pod.name);
    }
    return rc;
}

/* The identity of a device new to the store: the rules' physical id and
 * aliases (*physical, *aliases new). The kubelet's word is not refused: an
 * id that is another device's alias stands, and aliases that name another
 * device are left out; either is logged and counted. */
static err_t new_identity(struct sync *s, const struct srow *d, const char **physical,
                          char **aliases)
{
    struct error e = {0};
    err_t rc = st_ident_of(s->st, d->dev.res, d->dev.id, NULL, physical, aliases);

    if (!rc)
        rc = st_names_check(s->st, d->dev.res, d->dev.id, "[]", true, &e);
    if (rc == ERR_CONFLICT) {
        log_warn("kubelet device %s %s: %s; a lookup by that name finds both", d->dev.res,
                 d->dev.id, error_msg(&e));
        st_alias_conflict_count(s->st);
        rc = ERR_OK;
    }
    if (rc || strcmp(*aliases, "[]") == 0)
        return rc;
    rc = st_names_check(s->st, d->dev.res, d->dev.id, *aliases, false, &e);
    if (rc != ERR_CONFLICT)
        return rc;
    log_warn("kubelet device %s %s: its aliases are left out: %s", d->dev.res, d->dev.id,
             error_msg(&e));
    st_alias_conflict_count(s->st);
    memcpy(*aliases, "[]", 3); /* fits: the text was longer */
    return ERR_OK;
}

/* Write wanted device 'd', stored as 'h' (NULL: not stored), whose NUMA
 * ids are 'numa', and emit its event. A stored device keeps its identity
 * (a DRA driver's published aliases among them). */
static err_t put_device(struct sync *s, const struct srow *d, const struct srow *h,
                        const char *numa)
{
    const char *physical = NULL;
    char *aliases = NULL;
    err_t rc = h ? ERR_OK : new_identity(s, d, &physical, &aliases);

    if (!rc)
        rc = db_exec(s->st->commit.db,
                     "INSERT INTO devices(resource,id,health,numa,properties,removed,revision,"
                     "physical,aliases) VALUES(?,?,?,?,'{}',?,?,ifnull(?,''),ifnull(?,'[]')) "
                     "ON CONFLICT(resource,id) DO UPDATE SET health=excluded.health,"
                     "numa=excluded.numa,removed=excluded.removed,revision=excluded.revision",
                     "ttttiutt", d->dev.res, d->dev.id, d->dev.health, numa,
                     (int64_t)d->dev.removed, changelog_next(&s->st->log), physical, aliases);
    free((char *)physical);
    free(aliases);
    return rc ? rc : emit_view(s, h ? "MODIFIED" : "ADDED", "Device", d->dev.res, d->dev.id);
}

static err_t put_devices(struct sync *s)
{
    const struct srow *d, *h;
    const char *numa;
    size_t i;
    err_t rc = ERR_OK;

    for (i = 0; !rc && i < s->want_devs.n; i++) {
        d = &s->want_devs.rows[i];
        h = stable_get(&s->have_devs, d->key);
        numa = d->dev.numa[0] ? d->dev.numa : h ? h->dev.numa : "[]";
        if (h && strcmp(d->dev.health, h->dev.health) == 0 && strcmp(numa, h->dev.numa) == 0 &&
            d->dev.removed == h->dev.removed && !stable_get(&s->touched, d->key))
            continue;
        rc = put_device(s, d, h, numa);
    }
    return rc;
}

static void sync_release(struct sync *s)
{
    stable_release(&s->want_pods, true);
    stable_release(&s->want_devs, false);
    stable_release(&s->want_bind, false);
    stable_release(&s->have_pods, false);
    stable_release(&s->have_devs, false);
    stable_release(&s->have_bind, false);
    stable_release(&s->touched, false);
}

static err_t sync_init(struct sync *s, struct store *st)
{
    struct stable *tables[] = {&s->want_pods, &s->want_devs, &s->want_bind, &s->have_pods,
                               &s->have_devs, &s->have_bind, &s->touched};
    size_t i;
    err_t rc = ERR_OK;

    memset(s, 0, sizeof(*s));
    s->st = st;
    for (i = 0; i < ARRAY_SIZE(tables); i++) {
        if (stable_init(tables[i]))
            rc = ERR_NOMEM;
    }
    return rc;
}

/* Inside the transaction: every difference, in event order. */
static err_t apply(struct sync *s)
{
    static err_t (*const steps[])(struct sync * s) = {want_published, load_have, drop_pods,  rebind,
                                                      drop_devices,   put_pods,  put_devices};
    size_t i;
    err_t rc = ERR_OK;

    for (i = 0; !rc && i < ARRAY_SIZE(steps); i++)
        rc = steps[i](s);
    return rc;
}

static err_t sync_run(struct store *st, void *ctx)
{
    struct sync *s = ctx;
    err_t rc = apply(s);

    if (!rc && s->events > 0)
        rc = st_resv_refresh_all(st); /* the kubelet's choice decides pre-assignments */
    if (!rc && s->events == 0)
        st_write_discard(st); /* nothing changed: keep nothing, not even a no-op write */
    return rc;
}

/* The node's allocatable CPUs and memory, kept in memory for
 * /v1/allocatable: no object of the feed holds them, and the kubelet gives
 * them again at every poll (readiness waits for the first). */
static void alloc_rest_set(struct store *st, const json_t *snap)
{
    json_t *cpu_ids = json_object_get(snap, "cpuIds"), *memory = json_object_get(snap, "memory");

    cpu_ids = json_is_array(cpu_ids) ? json_incref(cpu_ids) : NULL;
    memory = json_is_array(memory) ? json_incref(memory) : NULL;
    pthread_mutex_lock(&st->amu);
    json_decref(st->cpu_ids);
    json_decref(st->memory);
    st->cpu_ids = cpu_ids;
    st->memory = memory;
    pthread_mutex_unlock(&st->amu);
}

err_t store_kubelet_sync(struct store *st, const json_t *snap, bool *changed)
{
    struct sync s;
    err_t rc;

    assert(snap);
    rc = sync_init(&s, st);
    *changed = false;
    if (!rc)
        rc = build_want(&s, snap);
    if (!rc)
        rc = st_write(st, sync_run, &s);
    *changed = rc == ERR_OK && s.events > 0;
    sync_release(&s);
    if (!rc)
        alloc_rest_set(st, snap);
    return rc;
}
