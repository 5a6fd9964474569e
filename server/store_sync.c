/* SPDX-License-Identifier: Apache-2.0 */
/* store_sync.c - the kubelet reconcile: the kubelet's pods, bindings and
 * devices (a snapshot built by source_kubelet.c) diffed against the tables
 * in one write transaction. Only real changes are written and emitted; with
 * none the transaction is rolled back, so a steady kubelet costs no disk
 * write and no revision. Reservations are left alone. Keys of the in-memory
 * sets are "a\x1fb" (the snapshot has no control characters; see
 * source_kubelet.c). */
#define LOG_MOD "store"
#include "../common/common.h"
#include "../common/jsonx.h"
#include "store_int.h"
#include "store_view.h"

#define NAME_MAX_LEN 1024 /* longest name or id accepted from a snapshot */
#define SYNC_KEY_MAX (3 * NAME_MAX_LEN + 4)

/* The wanted state and the stored one, as objects keyed like the tables. */
struct sync {
    struct store *st;  /* the store, inside the write transaction */
    json_t *want_pods; /* key -> {"ns","name","containers","text"} */
    json_t *want_devs; /* key -> {"r","i","h","n","x"} health, numa text, removed */
    json_t *want_bind; /* key -> owner "ns\x1fname\x1fcontainer" */
    json_t *have_pods; /* key -> {"ns","name","uid","text"} */
    json_t *have_devs; /* key -> {"r","i","h","n","x"} */
    json_t *have_bind; /* key -> owner */
    json_t *touched;   /* device keys whose holder changed */
    size_t events;     /* events emitted so far */
};

static void key2(char *key, const char *a, const char *b)
{
    snprintf(key, SYNC_KEY_MAX, "%s\x1f%s", a, b);
}

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

/* Sorted unique NUMA ids of a topology {"nodes":[{"ID":n}]}, as JSON text; new. */
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

/* ---- the wanted state ---- */

static err_t want_device(struct sync *s, const char *res, const char *id, const char *health,
                         const json_t *topology, bool removed)
{
    char key[SYNC_KEY_MAX];
    char *numa = numa_text(topology);
    json_t *d;

    key2(key, res, id);
    if (numa && removed && strcmp(numa, "[]") == 0)
        numa[0] = '\0'; /* no topology in the pod: keep what the device had */
    d = numa ? json_pack("{s:s,s:s,s:s,s:s,s:b}", "r", res, "i", id, "h", health, "n", numa, "x",
                         removed)
             : NULL;
    free(numa);
    if (!d || json_object_set_new(s->want_devs, key, d))
        return ERR_NOMEM;
    return ERR_OK;
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

/* A binding of device res/id to container c of pod ns/name; "o" compares. */
static json_t *bind_obj(const char *res, const char *id, const char *ns, const char *name,
                        const char *c)
{
    char owner[SYNC_KEY_MAX];

    snprintf(owner, sizeof(owner), "%s\x1f%s\x1f%s", ns, name, c);
    return json_pack("{s:s,s:s,s:s,s:s,s:s,s:s}", "r", res, "i", id, "ns", ns, "pod", name, "c", c,
                     "o", owner);
}

/* One device group of container 'c' of pod ns/name: sorted ids, bindings,
 * and an Unhealthy device for each bound id that is not allocatable. */
static err_t want_group(struct sync *s, const char *ns, const char *name, const char *c, json_t *g)
{
    const char *res = name_of(g, "resourceName"), *id;
    char key[SYNC_KEY_MAX];
    json_t *ids = json_object_get(g, "deviceIds"), *v;
    size_t i;
    err_t rc = res && json_is_array(ids) ? sort_array(ids, cmp_json_str) : ERR_INVAL;

    if (!json_object_get(g, "topology"))
        json_object_set_new(g, "topology", json_pack("{s:[]}", "nodes"));
    json_array_foreach(ids, i, v) {
        id = json_string_value(v);
        if (rc || !id || !id[0] || strlen(id) > NAME_MAX_LEN)
            return rc ? rc : ERR_INVAL;
        key2(key, res, id);
        if (json_object_get(s->want_bind, key)) {
            log_debug("device %s %s is listed for two containers; kept for the first", res, id);
            continue;
        }
        if (json_object_set_new(s->want_bind, key, bind_obj(res, id, ns, name, c)))
            return ERR_NOMEM;
        if (!json_object_get(s->want_devs, key))
            rc = want_device(s, res, id, "Unhealthy", json_object_get(g, "topology"), true);
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

/* A pod listed twice (an old and a new instance: the List has no uid) is
 * one pod with the containers of both, so that every device bound to it is
 * one it lists: *cs becomes the first's containers followed by its own. */
static err_t merge_twin(struct sync *s, const char *key, json_t **cs)
{
    json_t *prev = json_object_get(json_object_get(s->want_pods, key), "containers");

    if (!prev)
        return ERR_OK;
    if (json_array_extend(prev, *cs))
        return ERR_NOMEM;
    json_decref(*cs);
    *cs = json_incref(prev);
    return ERR_OK;
}

/* A pod: its canonical containers and their text. */
static err_t want_pod(struct sync *s, const json_t *pod)
{
    const char *ns = name_of(pod, "namespace"), *name = name_of(pod, "name");
    json_t *cs = json_deep_copy(json_object_get(pod, "containers")), *c, *p = NULL;
    char key[SYNC_KEY_MAX], *text = NULL;
    size_t i;
    err_t rc = ns && name && json_is_array(cs) ? ERR_OK : ERR_INVAL;

    json_array_foreach(cs, i, c) {
        if (!rc)
            rc = json_is_object(c) ? want_container(s, ns, name, c) : ERR_INVAL;
    }
    if (!rc) {
        key2(key, ns, name);
        rc = merge_twin(s, key, &cs);
    }
    if (!rc)
        text = jsonx_dumps(cs);
    if (!rc && text)
        p = json_pack("{s:s,s:s,s:O,s:s}", "ns", ns, "name", name, "containers", cs, "text", text);
    if (!rc && !p)
        rc = ERR_NOMEM;
    if (!rc)
        rc = json_object_set_new(s->want_pods, key, p) ? ERR_NOMEM : ERR_OK;
    json_decref(cs);
    free(text);
    return rc;
}

static err_t build_want(struct sync *s, const json_t *snap)
{
    const json_t *pods = json_object_get(snap, "pods"), *devs = json_object_get(snap, "devices");
    json_t *p;
    size_t i;
    err_t rc;

    if (!json_is_array(pods) || !json_is_array(devs))
        return ERR_INVAL;
    rc = want_allocatable(s, devs);
    json_array_foreach(pods, i, p) {
        if (!rc)
            rc = json_is_object(p) ? want_pod(s, p) : ERR_INVAL;
    }
    return rc;
}

/* ---- the stored state ---- */

static err_t load_have(struct sync *s)
{
    sqlite3 *db = s->st->commit.db;
    sqlite3_stmt *q = NULL;
    char key[SYNC_KEY_MAX];
    bool row;
    err_t rc = db_prep(db, &q, "SELECT namespace,name,uid,containers FROM pods", NULL);

    while (!rc && !(rc = db_step(db, q, &row)) && row) {
        key2(key, db_text(q, 0), db_text(q, 1));
        if (json_object_set_new(s->have_pods, key,
                                json_pack("{s:s,s:s,s:s,s:s}", "ns", db_text(q, 0), "name",
                                          db_text(q, 1), "uid", db_text(q, 2), "text",
                                          db_text(q, 3))))
            rc = ERR_NOMEM;
    }
    db_done(q);
    q = NULL;
    if (!rc)
        rc = db_prep(db, &q, "SELECT resource,id,health,numa,removed FROM devices", NULL);
    while (!rc && !(rc = db_step(db, q, &row)) && row) {
        key2(key, db_text(q, 0), db_text(q, 1));
        if (json_object_set_new(s->have_devs, key,
                                json_pack("{s:s,s:s,s:s,s:s,s:b}", "r", db_text(q, 0), "i",
                                          db_text(q, 1), "h", db_text(q, 2), "n", db_text(q, 3),
                                          "x", sqlite3_column_int(q, 4) != 0)))
            rc = ERR_NOMEM;
    }
    db_done(q);
    q = NULL;
    if (!rc)
        rc = db_prep(db, &q,
                     "SELECT resource,device_id,namespace,pod,container FROM bindings "
                     "WHERE pod<>''", /* not the let-go devices' rows (schema 3) */
                     NULL);
    while (!rc && !(rc = db_step(db, q, &row)) && row) {
        key2(key, db_text(q, 0), db_text(q, 1));
        if (json_object_set_new(s->have_bind, key,
                                bind_obj(db_text(q, 0), db_text(q, 1), db_text(q, 2), db_text(q, 3),
                                         db_text(q, 4))))
            rc = ERR_NOMEM;
    }
    db_done(q);
    return rc;
}

/* ---- applying the difference ---- */

static const char *fld(const json_t *o, const char *k)
{
    const char *v = json_string_value(json_object_get(o, k));

    return v ? v : "";
}

/* Emit 'type' of the pod ns/name or the device resource/id, after stamping the next revision. */
static err_t emit_view(struct sync *s, const char *type, const char *kind, const char *a,
                       const char *b)
{
    json_t *obj = NULL;
    bool pod = strcmp(kind, "PodResources") == 0;
    err_t rc = pod ? st_pod_json(s->st->commit.db, a, b, &obj)
                   : st_device_json(s->st->commit.db, a, b, &obj);

    if (!rc &&
        json_object_set_new(obj, "revision", json_integer((json_int_t)changelog_next(&s->st->log))))
        rc = ERR_NOMEM;
    if (!rc)
        rc = changelog_emit(&s->st->log, type, kind, pod ? a : "", obj);
    if (!rc)
        s->events++;
    json_decref(obj);
    return rc;
}

static err_t drop_pods(struct sync *s)
{
    const char *key;
    json_t *p;
    err_t rc = ERR_OK;

    json_object_foreach(s->have_pods, key, p) {
        if (rc || json_object_get(s->want_pods, key))
            continue;
        rc = emit_view(s, "DELETED", "PodResources", fld(p, "ns"), fld(p, "name"));
        if (!rc)
            rc = db_exec(s->st->commit.db, "DELETE FROM pods WHERE namespace=? AND name=?", "tt",
                         fld(p, "ns"), fld(p, "name"));
    }
    return rc;
}

static bool same_owner(const json_t *a, const json_t *b)
{
    return a && b && strcmp(fld(a, "o"), fld(b, "o")) == 0;
}

/* Rewrite the bindings whose owner changed; remember their devices. */
static err_t rebind(struct sync *s)
{
    const char *key;
    json_t *v;
    err_t rc = ERR_OK;

    json_object_foreach(s->have_bind, key, v) {
        if (rc || same_owner(v, json_object_get(s->want_bind, key)))
            continue;
        rc = db_exec(s->st->commit.db, "DELETE FROM bindings WHERE resource=? AND device_id=?",
                     "tt", fld(v, "r"), fld(v, "i"));
        if (!rc && json_object_set_new(s->touched, key, json_true()))
            rc = ERR_NOMEM;
    }
    json_object_foreach(s->want_bind, key, v) {
        if (rc || same_owner(v, json_object_get(s->have_bind, key)))
            continue;
        rc = db_exec(s->st->commit.db,
                     "INSERT OR REPLACE INTO bindings(resource,device_id,namespace,pod,"
                     "container) VALUES(?,?,?,?,?)",
                     "ttttt", fld(v, "r"), fld(v, "i"), fld(v, "ns"), fld(v, "pod"), fld(v, "c"));
        if (!rc && json_object_set_new(s->touched, key, json_true()))
            rc = ERR_NOMEM;
    }
    return rc;
}

static err_t drop_devices(struct sync *s)
{
    const char *key;
    json_t *d;
    err_t rc = ERR_OK;

    json_object_foreach(s->have_devs, key, d) {
        if (rc || json_object_get(s->want_devs, key))
            continue;
        rc = emit_view(s, "DELETED", "Device", fld(d, "r"), fld(d, "i"));
        if (!rc)
            rc = db_exec(s->st->commit.db, "DELETE FROM devices WHERE resource=? AND id=?", "tt",
                         fld(d, "r"), fld(d, "i"));
        if (!rc) /* a let-go row left by the write API */
            rc = db_exec(s->st->commit.db,
                         "DELETE FROM bindings WHERE resource=? AND device_id=? AND "
                         "pod=''",
                         "tt", fld(d, "r"), fld(d, "i"));
    }
    return rc;
}

static err_t put_pods(struct sync *s)
{
    const char *key;
    json_t *p, *h;
    err_t rc = ERR_OK;

    json_object_foreach(s->want_pods, key, p) {
        h = json_object_get(s->have_pods, key);
        if (rc || (h && fld(h, "uid")[0] == '\0' && strcmp(fld(h, "text"), fld(p, "text")) == 0))
            continue;
        rc = db_exec(s->st->commit.db,
                     "INSERT OR REPLACE INTO pods(namespace,name,uid,containers,request,revision) "
                     "VALUES(?,?,'',?,NULL,?)",
                     "tttu", fld(p, "ns"), fld(p, "name"), fld(p, "text"),
                     changelog_next(&s->st->log));
        if (!rc)
            rc = emit_view(s, h ? "MODIFIED" : "ADDED", "PodResources", fld(p, "ns"),
                           fld(p, "name"));
    }
    return rc;
}

static bool same_device(const json_t *a, const json_t *b)
{
    return strcmp(fld(a, "h"), fld(b, "h")) == 0 && strcmp(fld(a, "n"), fld(b, "n")) == 0 &&
           json_is_true(json_object_get(a, "x")) == json_is_true(json_object_get(b, "x"));
}

static err_t put_devices(struct sync *s)
{
    const char *key;
    json_t *d, *h;
    err_t rc = ERR_OK;

    json_object_foreach(s->want_devs, key, d) {
        h = json_object_get(s->have_devs, key);
        if (!fld(d, "n")[0] && json_object_set_new(d, "n", json_string(h ? fld(h, "n") : "[]")))
            rc = ERR_NOMEM;
        if (rc || (h && same_device(d, h) && !json_object_get(s->touched, key)))
            continue;
        rc = db_exec(s->st->commit.db,
                     "INSERT INTO devices(resource,id,health,numa,properties,removed,revision) "
                     "VALUES(?,?,?,?,'{}',?,?) ON CONFLICT(resource,id) DO UPDATE SET "
                     "health=excluded.health,numa=excluded.numa,removed=excluded.removed,"
                     "revision=excluded.revision",
                     "ttttiu", fld(d, "r"), fld(d, "i"), fld(d, "h"), fld(d, "n"),
                     (int64_t)json_is_true(json_object_get(d, "x")), changelog_next(&s->st->log));
        if (!rc)
            rc = emit_view(s, h ? "MODIFIED" : "ADDED", "Device", fld(d, "r"), fld(d, "i"));
    }
    return rc;
}

static void sync_release(struct sync *s)
{
    json_decref(s->want_pods);
    json_decref(s->want_devs);
    json_decref(s->want_bind);
    json_decref(s->have_pods);
    json_decref(s->have_devs);
    json_decref(s->have_bind);
    json_decref(s->touched);
}

static err_t sync_init(struct sync *s, struct store *st)
{
    json_t **sets[] = {&s->want_pods, &s->want_devs, &s->want_bind, &s->have_pods,
                       &s->have_devs, &s->have_bind, &s->touched};
    size_t i;

    memset(s, 0, sizeof(*s));
    s->st = st;
    for (i = 0; i < ARRAY_SIZE(sets); i++) {
        *sets[i] = json_object();
        if (!*sets[i])
            return ERR_NOMEM;
    }
    return ERR_OK;
}

/* Inside the transaction: every difference, in event order. */
static err_t apply(struct sync *s)
{
    err_t rc = load_have(s);

    if (!rc)
        rc = drop_pods(s);
    if (!rc)
        rc = rebind(s);
    if (!rc)
        rc = drop_devices(s);
    if (!rc)
        rc = put_pods(s);
    if (!rc)
        rc = put_devices(s);
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
    err_t rc = sync_init(&s, st);

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
