/* SPDX-License-Identifier: Apache-2.0 */
/* store_write.c - every state change: devices, bindings, allocation,
 * reservations, heartbeats. Each public function is one write transaction;
 * events are emitted in the order the objects change. Device keys in the
 * in-memory sets are "resource|id". */
#define LOG_MOD "store"
#include "../common/common.h"
#include "../common/clock.h"
#include "../common/jsonx.h"
#include "alloc.h"
#include "store_int.h"

#include <inttypes.h>

#define KEY_MAX 600

static void dev_key(char *key, const char *resource, const char *id)
{
    str_join(key, KEY_MAX, resource, '|', id);
}

/* Split "resource|id" in place. */
static const char *key_split(char *key)
{
    char *bar = strchr(key, '|');

    *bar = '\0';
    return bar + 1;
}

/* ---- events ---- */

static err_t emit_device(struct store *st, const char *type, const char *resource, const char *id)
{
    struct jsonw w = JSONW_INIT;
    err_t rc = db_exec(st->commit.db, "UPDATE devices SET revision=? WHERE resource=? AND id=?",
                       "utt", changelog_next(&st->log), resource, id);

    if (!rc)
        rc = st_device_text(st->commit.db, resource, id, 0, &w);
    if (!rc)
        rc = changelog_emit_text(&st->log, type, "Device", "", w.sb.buf, w.sb.len);
    jsonw_release(&w);
    return rc;
}

/* Emit DELETED with the last state of an unbound device, then remove its
 * row and its let-go bindings row, if any. */
static err_t emit_device_deleted(struct store *st, const char *resource, const char *id)
{
    struct jsonw w = JSONW_INIT;
    err_t rc = st_device_text(st->commit.db, resource, id, changelog_next(&st->log), &w);

    if (!rc)
        rc = changelog_emit_text(&st->log, "DELETED", "Device", "", w.sb.buf, w.sb.len);
    if (!rc)
        rc = db_exec(st->commit.db, "DELETE FROM devices WHERE resource=? AND id=?", "tt", resource,
                     id);
    if (!rc)
        rc = db_exec(st->commit.db,
                     "DELETE FROM bindings WHERE resource=? AND device_id=? AND pod=''", "tt",
                     resource, id);
    jsonw_release(&w);
    return rc;
}

/* Emit the pod's event from the values just written (no read back); with
 * 'keep', the object is appended to it too: the write's answer. */
static err_t emit_pod(struct store *st, const char *type, const char *ns, const char *name,
                      const char *uid, const char *containers, struct jsonw *keep)
{
    struct jsonw w = JSONW_INIT;
    err_t rc;

    st_pod_text(&w, ns, name, uid, containers, changelog_next(&st->log));
    rc = jsonw_done(&w);
    if (!rc)
        rc = changelog_emit_text(&st->log, type, "PodResources", ns, w.sb.buf, w.sb.len);
    if (!rc && keep) {
        jsonw_raw(keep, w.sb.buf, w.sb.len);
        rc = jsonw_done(keep);
    }
    jsonw_release(&w);
    return rc;
}

static err_t emit_reservation(struct store *st, const char *type, const char *ns, const char *name)
{
    json_t *obj = NULL;
    err_t rc = st_reservation_json(st->commit.db, ns, name, &obj);

    if (!rc)
        rc = changelog_emit(&st->log, type, "Reservation", ns, obj);
    json_decref(obj);
    return rc;
}

/* ---- small queries ---- */

struct devrow {
    bool found;         /* the row exists */
    char health[16];    /* Healthy or Unhealthy */
    bool removed;       /* no longer registered */
    char holder[512];   /* "ns/pod" or "" */
    char container[64]; /* holder's container */
    char reserved[512]; /* "ns/pod" reserved for, or "" */
    json_t *numa;       /* array of NUMA ids; new */
};

/* A device row that a bind checked (check_device), kept for the device's
 * event (emit_rebound), which then reads no row: inside one write nothing
 * changes the row between the two. One allocation; the strings point into
 * 'text'. */
struct devseen {
    struct devseen *next;                   /* the next row kept, or NULL */
    const char *resource, *id;              /* the device */
    const char *health, *numa, *properties; /* its columns, as stored */
    const char *resv_ns, *resv_name;        /* reserved for; NULL, "" when not */
    char text[];                            /* the strings above */
};

static void devseen_free(struct devseen *l)
{
    struct devseen *next;

    for (; l; l = next) {
        next = l->next;
        free(l);
    }
}

static const struct devseen *devseen_find(const struct devseen *l, const char *resource,
                                          const char *id)
{
    for (; l; l = l->next)
        if (strcmp(l->id, id) == 0 && strcmp(l->resource, resource) == 0)
            return l;
    return NULL;
}

/* Put the row 's' (devrow_get()'s columns) in front of '*l'. */
static err_t devseen_add(struct devseen **l, const char *resource, const char *id, sqlite3_stmt *s)
{
    const char *v[6] = {resource, id, db_text(s, 0), db_text(s, 2), db_text(s, 6), db_text(s, 5)};
    size_t len[6], n = 0, i;
    struct devseen *e;
    char *at, *resv = NULL, *slash;

    for (i = 0; i < ARRAY_SIZE(v); i++)
        n += (len[i] = strlen(v[i])) + 1;
    e = fault_alloc_fails() ? NULL : malloc(sizeof(*e) + n);
    if (!e)
        return ERR_NOMEM;
    at = e->text;
    for (i = 0; i < ARRAY_SIZE(v); i++) {
        resv = memcpy(at, v[i], len[i] + 1); /* the last copy is 'reserved for' */
        v[i] = at;
        at += len[i] + 1;
    }
    e->resource = v[0];
    e->id = v[1];
    e->health = v[2];
    e->numa = v[3];
    e->properties = v[4];
    /* reserved "ns/pod": a namespace has no '/' */
    slash = strchr(resv, '/');
    e->resv_ns = slash ? resv : NULL;
    e->resv_name = slash ? slash + 1 : "";
    if (slash)
        *slash = '\0';
    e->next = *l;
    *l = e;
    return ERR_OK;
}

/* A device's row, with its holder and reservation; with 'seen', the row is
 * also kept there (devseen_add). */
static err_t devrow_get(struct store *st, const char *resource, const char *id, struct devrow *d,
                        struct devseen **seen)
{
    sqlite3_stmt *s = NULL;
    bool row = false;
    err_t rc = db_prep(st->commit.db, &s,
                       "SELECT d.health,d.removed,d.numa,b.namespace||'/'||b.pod,b.container,"
                       "r.namespace||'/'||r.pod,d.properties FROM devices d LEFT JOIN bindings b "
                       "ON b.resource=d.resource AND b.device_id=d.id AND b.pod<>'' LEFT JOIN "
                       "reserved r ON r.resource=d.resource AND r.device_id=d.id WHERE "
                       "d.resource=? AND d.id=?",
                       "tt", resource, id);

    memset(d, 0, sizeof(*d));
    if (!rc)
        rc = db_step(st->commit.db, s, &row);
    if (!rc && row) {
        d->found = true;
        str_copy(d->health, sizeof(d->health), db_text(s, 0));
        d->removed = sqlite3_column_int(s, 1) != 0;
        str_copy(d->holder, sizeof(d->holder), db_text(s, 3));
        str_copy(d->container, sizeof(d->container), db_text(s, 4));
        str_copy(d->reserved, sizeof(d->reserved), db_text(s, 5));
        if (seen)
            rc = devseen_add(seen, resource, id, s);
        d->numa = db_json(s, 2);
    }
    db_done(s);
    return rc;
}

/* Holder / reservation of a device when not in the devices table (a let-go
 * device's bindings row has pod ''; no reserved row has). */
static err_t holder_get(struct store *st, const char *table, const char *resource, const char *id,
                        char *who, size_t cap)
{
    char sql[160];
    sqlite3_stmt *s = NULL;
    bool row = false;
    err_t rc;

    snprintf(sql, sizeof(sql),
             "SELECT namespace||'/'||pod FROM %s WHERE resource=? AND device_id=? AND pod<>''",
             table);
    rc = db_prep(st->commit.db, &s, sql, "tt", resource, id);
    who[0] = '\0';
    if (!rc)
        rc = db_step(st->commit.db, s, &row);
    if (!rc && row)
        str_copy(who, cap, db_text(s, 0));
    db_done(s);
    return rc;
}

/* Add the rows (resource, id, value) of 's' to 'map' as key -> value; 's'
 * (may be NULL: nothing to add) is done with. */
static err_t map_rows(struct store *st, sqlite3_stmt *s, json_t *map)
{
    char key[KEY_MAX];
    bool row;
    err_t rc = ERR_OK;

    while (s && !rc) {
        rc = db_step(st->commit.db, s, &row);
        if (rc || !row)
            break;
        dev_key(key, db_text(s, 0), db_text(s, 1));
        if (json_object_set_new(map, key, json_string(db_text(s, 2))))
            rc = ERR_NOMEM;
    }
    db_done(s);
    return rc;
}

/* *out = 'map' when 'rc' is ERR_OK, else 'map' is freed; returns 'rc'. */
static err_t map_out(err_t rc, json_t *map, json_t **out)
{
    if (rc) {
        json_decref(map);
        return rc;
    }
    *out = map;
    return ERR_OK;
}

/* Map key -> "" of the devices reserved for a pod. */
static err_t pod_reserved(struct store *st, const char *ns, const char *name, json_t **out)
{
    sqlite3_stmt *s = NULL;
    json_t *map = json_object();
    err_t rc = map ? ERR_OK : ERR_NOMEM;

    if (!rc)
        rc = db_prep(st->commit.db, &s,
                     "SELECT resource,device_id,'' FROM reserved WHERE namespace=? AND pod=?", "tt",
                     ns, name);
    if (!rc)
        rc = map_rows(st, s, map);
    return map_out(rc, map, out);
}

/* Sum of NUMA ids of 'ids' into sorted unique 'numa'. */
static void numa_union(json_t *numa, const json_t *ids)
{
    json_t *v, *w;
    size_t i, j;

    json_array_foreach(ids, i, v) {
        bool have = false;

        json_array_foreach(numa, j, w) {
            if (json_integer_value(w) == json_integer_value(v))
                have = true;
        }
        if (!have) {
            for (j = 0; j < json_array_size(numa); j++) {
                if (json_integer_value(json_array_get(numa, j)) > json_integer_value(v))
                    break;
            }
            json_array_insert(numa, j, v);
        }
    }
}

static int cmp_str(const void *a, const void *b)
{
    return strcmp(json_string_value(*(json_t *const *)a), json_string_value(*(json_t *const *)b));
}

/* A new array of the strings of 'arr', sorted. */
static json_t *sorted_strings(const json_t *arr)
{
    size_t n = json_array_size(arr), i;
    json_t **v = calloc(n ? n : 1, sizeof(*v));
    json_t *out = json_array();

    if (!v || !out) {
        free(v);
        json_decref(out);
        return NULL;
    }
    for (i = 0; i < n; i++)
        v[i] = json_array_get(arr, i);
    qsort(v, n, sizeof(*v), cmp_str);
    for (i = 0; i < n; i++)
        json_array_append(out, v[i]);
    free(v);
    return out;
}

/* Called by each_device() for one device of a containers array. */
typedef err_t (*device_fn)(struct store *st, const char *container, const char *resource,
                           const char *id, void *ctx);

/* Call 'fn' for every device id of 'containers' ([{"name","devices":[{"resourceName",
 * "deviceIds"}]}]) in order; stops at the first error and returns it. */
static err_t each_device(struct store *st, const json_t *containers, device_fn fn, void *ctx)
{
    json_t *c, *g, *id;
    size_t i, j, k;
    err_t rc;

    json_array_foreach(containers, i, c) {
        json_array_foreach(json_object_get(c, "devices"), j, g) {
            json_array_foreach(json_object_get(g, "deviceIds"), k, id) {
                rc = fn(st, json_string_value(json_object_get(c, "name")),
                        json_string_value(json_object_get(g, "resourceName")),
                        json_string_value(id), ctx);
                if (rc)
                    return rc;
            }
        }
    }
    return ERR_OK;
}

/* Sort the deviceIds of every group of 'containers' in place. */
static void sort_ids(json_t *containers)
{
    json_t *c, *g;
    size_t i, j;

    json_array_foreach(containers, i, c) {
        json_array_foreach(json_object_get(c, "devices"), j, g)
            json_object_set_new(g, "deviceIds", sorted_strings(json_object_get(g, "deviceIds")));
    }
}

/* ---- reservations' state ---- */

static err_t add_key(struct store *st, const char *container, const char *resource, const char *id,
                     void *ctx)
{
    char buf[KEY_MAX + 80];

    (void)st;
    snprintf(buf, sizeof(buf), "%s:%s/%s", container, resource, id);
    return json_array_append_new(ctx, json_string(buf)) ? ERR_NOMEM : ERR_OK;
}

/* "container:resource/id" for each device of a containers array, sorted. */
static json_t *container_keys(const json_t *containers)
{
    json_t *keys = json_array(), *out = NULL;

    if (keys && !each_device(NULL, containers, add_key, keys))
        out = sorted_strings(keys);
    json_decref(keys);
    return out;
}

static void keys_text(const json_t *keys, char *out, size_t cap)
{
    size_t i, n = 0;
    json_t *v;

    out[0] = '\0';
    json_array_foreach(keys, i, v) {
        n += (size_t)snprintf(out + n, n < cap ? cap - n : 0, "%s%s", i ? ", " : "",
                              json_string_value(v));
        if (n >= cap)
            break;
    }
}

struct blocker {
    const char *self; /* "ns/name" of the reservation */
    char *msg;        /* the reason, "" while none */
    size_t cap;       /* its size */
};

static err_t check_reserved_device(struct store *st, const char *container, const char *res,
                                   const char *id, void *ctx)
{
    struct blocker *b = ctx;
    struct devrow d;
    err_t rc = devrow_get(st, res, id, &d, NULL);

    (void)container;
    json_decref(d.numa);
    if (rc)
        return rc;
    if (!d.found || d.removed)
        snprintf(b->msg, b->cap, "device %s %s is not registered", res, id);
    else if (strcmp(d.health, "Healthy") != 0)
        snprintf(b->msg, b->cap, "device %s %s is Unhealthy", res, id);
    else if (d.holder[0] && strcmp(d.holder, b->self) != 0)
        snprintf(b->msg, b->cap, "device %s %s is bound to %s", res, id, d.holder);
    return b->msg[0] ? ERR_CONFLICT : ERR_OK; /* ERR_CONFLICT only stops the walk */
}

/* Why the reserved devices cannot be honoured now, or "" when they can. */
static err_t resv_blocker(struct store *st, const char *ns, const char *name,
                          const json_t *containers, char *msg, size_t cap)
{
    char self[512];
    struct blocker b = {.self = self, .msg = msg, .cap = cap};
    err_t rc;

    str_join(self, sizeof(self), ns, '/', name);
    msg[0] = '\0';
    rc = each_device(st, containers, check_reserved_device, &b);
    return rc == ERR_CONFLICT ? ERR_OK : rc;
}

/* Compute the state a reservation should have now. */
static err_t resv_compute(struct store *st, const char *ns, const char *name,
                          const json_t *containers, const char **state, char *msg, size_t cap)
{
    json_t *pod = NULL, *want = NULL, *have = NULL;
    char a[300], b[300];
    err_t rc = st_pod_json(st->commit.db, ns, name, &pod);

    msg[0] = '\0';
    if (rc == ERR_NOTFOUND) {
        rc = resv_blocker(st, ns, name, containers, msg, cap);
        *state = msg[0] ? "Conflict" : "Pending";
        return rc;
    }
    if (rc)
        return rc;
    want = container_keys(containers);
    have = container_keys(json_object_get(pod, "containers"));
    if (!want || !have) {
        rc = ERR_NOMEM;
    } else if (json_equal(want, have)) {
        *state = "Bound";
    } else {
        keys_text(have, a, sizeof(a));
        keys_text(want, b, sizeof(b));
        snprintf(msg, cap, "pod is bound to [%s], pre-assigned [%s]", a, b);
        *state = "Conflict";
    }
    json_decref(pod);
    json_decref(want);
    json_decref(have);
    return rc;
}

/* Re-evaluate one reservation; emit MODIFIED when its state changed. */
static err_t resv_refresh(struct store *st, const char *ns, const char *name)
{
    json_t *r = NULL;
    const char *state = "Pending";
    char msg[700];
    err_t rc = st_reservation_json(st->commit.db, ns, name, &r);

    if (rc == ERR_NOTFOUND)
        return ERR_OK;
    if (!rc)
        rc = resv_compute(st, ns, name, json_object_get(r, "containers"), &state, msg, sizeof(msg));
    if (!rc && (strcmp(state, json_string_value(json_object_get(r, "state"))) != 0 ||
                strcmp(msg, json_string_value(json_object_get(r, "message"))) != 0)) {
        rc = db_exec(st->commit.db,
                     "UPDATE reservations SET state=?,message=?,revision=? WHERE namespace=? AND "
                     "name=?",
                     "ttutt", state, msg, changelog_next(&st->log), ns, name);
        if (!rc)
            rc = emit_reservation(st, "MODIFIED", ns, name);
    }
    json_decref(r);
    return rc;
}

err_t st_resv_refresh_all(struct store *st)
{
    sqlite3_stmt *s = NULL;
    json_t *keys = json_array(), *k;
    size_t i;
    bool row;
    err_t rc = db_prep(st->commit.db, &s, "SELECT namespace,name FROM reservations", NULL);

    while (!rc) {
        rc = db_step(st->commit.db, s, &row);
        if (rc || !row)
            break;
        json_array_append_new(keys, json_pack("[s,s]", db_text(s, 0), db_text(s, 1)));
    }
    db_done(s);
    json_array_foreach(keys, i, k) {
        if (!rc)
            rc = resv_refresh(st, json_string_value(json_array_get(k, 0)),
                              json_string_value(json_array_get(k, 1)));
    }
    json_decref(keys);
    return rc;
}

/* ---- the end of a write ---- */

/* Commit, then wrap 'obj' (stolen) as {key: obj, "revision": N}. */
/* A write (run by the combiner, st_write) whose answer is {key: obj}. */
typedef err_t (*json_body)(struct store *st, void *args, json_t **obj);

struct json_op {
    json_body body;
    void *args;
    json_t *obj; /* the answer's object, once it succeeded */
};

static err_t json_op_run(struct store *st, void *ctx)
{
    struct json_op *o = ctx;
    err_t rc = o->body(st, o->args, &o->obj);

    if (rc) {
        json_decref(o->obj);
        o->obj = NULL;
    }
    return rc;
}

/* Run 'body' as one write; once committed, *out = {key: obj, "revision": N}. */
static err_t write_json(struct store *st, const char *key, json_body body, void *args, json_t **out)
{
    struct json_op o = {body, args, NULL};
    err_t rc = st_write(st, json_op_run, &o);

    if (rc) {
        json_decref(o.obj); /* set when only the COMMIT failed */
        return rc;
    }
    *out = st_wrap(key, o.obj, store_revision(st));
    return *out ? ERR_OK : ERR_NOMEM;
}

/* ---- devices ---- */

static err_t put_one_device(struct store *st, const char *resource, const json_t *dev,
                            bool *changed)
{
    const char *id = json_string_value(json_object_get(dev, "id"));
    const char *health = json_string_value(json_object_get(dev, "health"));
    char *numa = jsonx_dumps(json_object_get(dev, "numa"));
    char *props = jsonx_dumps(json_object_get(dev, "properties"));
    sqlite3_stmt *s = NULL;
    bool row = false, same = false, removed = false;
    err_t rc = numa && props ? ERR_OK : ERR_NOMEM;

    if (!rc)
        rc = db_prep(st->commit.db, &s,
                     "SELECT health=? AND numa=? AND properties=?, removed FROM devices "
                     "WHERE resource=? AND id=?",
                     "ttttt", health, numa, props, resource, id);
    if (!rc)
        rc = db_step(st->commit.db, s, &row);
    if (!rc && row) {
        same = sqlite3_column_int(s, 0) != 0;
        removed = sqlite3_column_int(s, 1) != 0;
    }
    db_done(s);
    if (!rc && same && removed) {
        /* a removed device, still held, registered again as it is listed:
         * registered again, and nothing a reader sees changed (no event) */
        rc = db_exec(st->commit.db, "UPDATE devices SET removed=0 WHERE resource=? AND id=?", "tt",
                     resource, id);
        *changed = true;
    } else if (!rc && !same) {
        rc = db_exec(st->commit.db,
                     "INSERT INTO devices(resource,id,health,numa,properties,removed,revision) "
                     "VALUES(?,?,?,?,?,0,?) ON CONFLICT(resource,id) DO UPDATE SET "
                     "health=excluded.health,numa=excluded.numa,properties=excluded.properties,"
                     "removed=0",
                     "tttttu", resource, id, health, numa, props, changelog_next(&st->log));
        if (!rc)
            rc = emit_device(st, row ? "MODIFIED" : "ADDED", resource, id);
        *changed = true;
    }
    free(numa);
    free(props);
    return rc;
}

/* Devices of 'resource' absent from 'keep': delete, or mark removed when bound. */
static err_t drop_missing(struct store *st, const char *resource, const json_t *keep, bool *changed)
{
    sqlite3_stmt *s = NULL;
    json_t *gone = json_array(), *v;
    struct devrow d;
    size_t i;
    bool row;
    err_t rc = db_prep(st->commit.db, &s, "SELECT id FROM devices WHERE resource=?", "t", resource);

    while (!rc) {
        rc = db_step(st->commit.db, s, &row);
        if (rc || !row)
            break;
        if (!json_object_get(keep, db_text(s, 0)))
            json_array_append_new(gone, json_string(db_text(s, 0)));
    }
    db_done(s);
    json_array_foreach(gone, i, v) {
        const char *id = json_string_value(v);

        if (rc)
            break;
        rc = devrow_get(st, resource, id, &d, NULL);
        json_decref(d.numa);
        if (rc)
            break;
        if (!d.holder[0]) {
            rc = emit_device_deleted(st, resource, id);
            *changed = true;
        } else if (!d.removed || strcmp(d.health, "Unhealthy") != 0) {
            rc = db_exec(st->commit.db,
                         "UPDATE devices SET removed=1,health='Unhealthy' WHERE resource=? AND "
                         "id=?",
                         "tt", resource, id);
            /* 'removed' is not in the Device object: an event only when it
             * turns Unhealthy */
            if (!rc && strcmp(d.health, "Unhealthy") != 0)
                rc = emit_device(st, "MODIFIED", resource, id);
            *changed = true;
        }
    }
    json_decref(gone);
    return rc;
}

static err_t devices_of(struct store *st, const char *resource, json_t **out)
{
    sqlite3_stmt *s = NULL;
    json_t *arr = json_array(), *d;
    bool row;
    err_t rc = db_prep(st->commit.db, &s, "SELECT id FROM devices WHERE resource=? ORDER BY id",
                       "t", resource);

    while (!rc) {
        rc = db_step(st->commit.db, s, &row);
        if (rc || !row)
            break;
        rc = st_device_json(st->commit.db, resource, db_text(s, 0), &d);
        if (!rc)
            json_array_append_new(arr, d);
    }
    db_done(s);
    if (rc) {
        json_decref(arr);
        return rc;
    }
    *out = arr;
    return ERR_OK;
}

struct resource_put {
    const char *resource;
    const json_t *devices;
    uint64_t ttl_ms;
    bool *changed;
};

static err_t resource_put_run(struct store *st, void *args, json_t **list)
{
    struct resource_put *a = args;
    const char *resource = a->resource;
    bool *changed = a->changed;
    json_t *keep = json_object(), *dev;
    size_t i;
    err_t rc = keep ? ERR_OK : ERR_NOMEM;

    *changed = false;
    json_array_foreach(a->devices, i, dev) {
        if (!rc)
            rc = put_one_device(st, resource, dev, changed);
        json_object_set(keep, json_string_value(json_object_get(dev, "id")), json_true());
    }
    if (!rc)
        rc = drop_missing(st, resource, keep, changed);
    if (!rc)
        rc = db_exec(st->commit.db,
                     "INSERT OR REPLACE INTO resources(name,ttl_ms,refreshed_ms,expired) "
                     "VALUES(?,?,?,0)",
                     "tuu", resource, a->ttl_ms, clock_wall_ms());
    if (!rc && *changed)
        rc = st_resv_refresh_all(st);
    if (!rc)
        rc = devices_of(st, resource, list);
    json_decref(keep);
    return rc;
}

err_t store_resource_put(struct store *st, const char *resource, const json_t *devices,
                         uint64_t ttl_ms, char *msg, size_t cap, json_t **out, bool *changed)
{
    struct resource_put a = {resource, devices, ttl_ms, changed};

    (void)msg;
    (void)cap;
    *changed = false;
    return write_json(st, "devices", resource_put_run, &a, out);
}

struct set_health {
    const char *resource, *id, *health;
    char *msg;
    size_t cap;
};

static err_t set_health_run(struct store *st, void *args, json_t **obj)
{
    struct set_health *a = args;
    const char *resource = a->resource, *id = a->id, *health = a->health;
    struct devrow d;
    err_t rc = devrow_get(st, resource, id, &d, NULL);

    json_decref(d.numa);
    if (!rc && (!d.found || d.removed)) {
        snprintf(a->msg, a->cap, "device %s %s not found", resource, id);
        rc = ERR_NOTFOUND;
    }
    if (!rc && strcmp(d.health, health) != 0) {
        rc = db_exec(st->commit.db, "UPDATE devices SET health=? WHERE resource=? AND id=?", "ttt",
                     health, resource, id);
        if (!rc)
            rc = emit_device(st, "MODIFIED", resource, id);
        if (!rc)
            rc = st_resv_refresh_all(st);
    }
    if (!rc)
        rc = st_device_json(st->commit.db, resource, id, obj);
    return rc;
}

err_t store_device_set_health(struct store *st, const char *resource, const char *id,
                              const char *health, char *msg, size_t cap, json_t **out)
{
    struct set_health a = {resource, id, health, msg, cap};

    return write_json(st, "device", set_health_run, &a, out);
}

struct expire {
    uint64_t now_ms;
    int expired; /* resources whose heartbeat lapsed */
};

static err_t expire_run(struct store *st, void *ctx)
{
    struct expire *a = ctx;
    int *expired = &a->expired;
    uint64_t now_ms = a->now_ms;
    sqlite3_stmt *s = NULL;
    json_t *lapsed = json_array(), *v, *ids = NULL;
    size_t i, j;
    bool row;
    err_t rc = lapsed ? ERR_OK : ERR_NOMEM;

    *expired = 0;
    if (!rc)
        rc = db_prep(st->commit.db, &s,
                     "SELECT name FROM resources WHERE ttl_ms>0 AND expired=0 AND "
                     "refreshed_ms+ttl_ms<?",
                     "u", now_ms);
    while (!rc) {
        rc = db_step(st->commit.db, s, &row);
        if (rc || !row)
            break;
        json_array_append_new(lapsed, json_string(db_text(s, 0)));
    }
    db_done(s);
    json_array_foreach(lapsed, i, v) {
        const char *res = json_string_value(v);

        if (rc)
            break;
        log_warn("heartbeat of resource '%s' lapsed; its devices are now Unhealthy", res);
        (*expired)++;
        rc = db_exec(st->commit.db, "UPDATE resources SET expired=1 WHERE name=?", "t", res);
        if (!rc)
            rc = devices_of(st, res, &ids);
        json_array_foreach(ids, j, v) {
            const char *id = json_string_value(json_object_get(v, "id"));

            if (rc || strcmp(json_string_value(json_object_get(v, "health")), "Healthy") != 0)
                continue;
            rc = db_exec(st->commit.db,
                         "UPDATE devices SET health='Unhealthy' WHERE resource=? AND id=?", "tt",
                         res, id);
            if (!rc)
                rc = emit_device(st, "MODIFIED", res, id);
        }
        json_decref(ids);
        ids = NULL;
    }
    if (!rc && *expired)
        rc = st_resv_refresh_all(st);
    json_decref(lapsed);
    return rc;
}

err_t store_expire_ttls(struct store *st, uint64_t now_ms, int *expired)
{
    struct expire a = {now_ms, 0};
    err_t rc = st_write(st, expire_run, &a);

    *expired = rc ? 0 : a.expired;
    return rc;
}

/* ---- pods ---- */

/* Check one device of group 'r' for pod 'self' ("ns/name"), adding its NUMA
 * ids to 'numa' and its row to 'seen'. */
static err_t check_device(struct store *st, const char *self, const char *r, const char *id,
                          json_t *numa, struct devseen **seen, char *msg, size_t cap)
{
    struct devrow d;
    err_t rc = devrow_get(st, r, id, &d, seen);

    /* A removed device that another pod still holds is listed (Unhealthy,
     * with its holder): held, 409, as any held device; unknown once free.
     * (Only a row found has a holder.) */
    if (!rc && d.holder[0] && strcmp(d.holder, self) != 0) {
        snprintf(msg, cap, "device %s %s is held by pod %s (container %s)", r, id, d.holder,
                 d.container);
        rc = ERR_CONFLICT;
    } else if (!rc && (!d.found || (d.removed && strcmp(d.holder, self) != 0))) {
        snprintf(msg, cap, "unknown device %s %s", r, id);
        rc = ERR_UNPROCESSABLE;
    } else if (!rc && d.reserved[0] && strcmp(d.reserved, self) != 0) {
        snprintf(msg, cap, "device %s %s is reserved for pod %s", r, id, d.reserved);
        rc = ERR_CONFLICT;
    }
    if (!rc)
        numa_union(numa, d.numa);
    json_decref(d.numa);
    return rc;
}

/* Check the devices of group 'g' (of a container of pod 'self', "ns/name")
 * and append its stored form to 'groups': a new object sharing g's other
 * values, with its ids sorted and its topology added. */
static err_t resolve_group(struct store *st, const char *self, const json_t *g, json_t *groups,
                           struct devseen **seen, char *msg, size_t cap)
{
    const char *r = json_string_value(json_object_get(g, "resourceName"));
    json_t *ng = json_copy((json_t *)g), *numa = json_array(), *id;
    size_t k;
    err_t rc = ng && numa && json_array_append(groups, ng) == 0 ? ERR_OK : ERR_NOMEM;

    json_array_foreach(json_object_get(g, "deviceIds"), k, id) {
        if (rc)
            break;
        rc = check_device(st, self, r, json_string_value(id), numa, seen, msg, cap);
    }
    if (!rc &&
        (json_object_set_new(ng, "deviceIds", sorted_strings(json_object_get(g, "deviceIds"))) ||
         json_object_set_new(ng, "topology", st_topology(numa))))
        rc = ERR_NOMEM;
    json_decref(ng);
    json_decref(numa);
    return rc;
}

/* Check every device of 'containers' for this pod and build the stored form
 * (sorted ids, topology added). The input is not changed: the stored form
 * has new container and group objects that share its other values. The rows
 * read are put in 'seen' (the caller frees it, on failure too). */
static err_t resolve_containers(struct store *st, const char *ns, const char *name,
                                const json_t *containers, struct devseen **seen, char *msg,
                                size_t cap, json_t **out)
{
    json_t *res = json_array(), *c, *g, *nc, *groups, *devs;
    char self[512];
    size_t i, j;
    err_t rc = res ? ERR_OK : ERR_NOMEM;

    str_join(self, sizeof(self), ns, '/', name);
    json_array_foreach(containers, i, c) {
        if (rc)
            break;
        nc = json_copy((json_t *)c); /* shallow: the values are shared */
        if (!nc || json_array_append_new(res, nc) != 0) {
            rc = ERR_NOMEM;
            break;
        }
        devs = json_object_get(c, "devices");
        if (!devs)
            continue;
        groups = json_array();
        if (!groups || json_object_set_new(nc, "devices", groups) != 0) {
            rc = ERR_NOMEM;
            break;
        }
        json_array_foreach(devs, j, g) {
            rc = resolve_group(st, self, g, groups, seen, msg, cap);
            if (rc)
                break;
        }
    }
    if (rc) {
        json_decref(res);
        return rc;
    }
    *out = res;
    return ERR_OK;
}

/* The pod whose bindings a write just replaced. */
struct pod_key {
    const char *ns, *name, *uid;
    const struct devseen *seen; /* the rows of its devices that the write read, or NULL */
};

/* Fill the device's columns of 't' for its event: from the row the write
 * kept ('seen'), else from 's' (emit_rebound's SELECT). */
static void rebound_cols(struct devtext *t, const struct devseen *seen, sqlite3_stmt *s)
{
    if (seen) {
        t->health = seen->health;
        t->numa = seen->numa;
        t->properties = seen->properties;
        t->resv_ns = seen->resv_ns;
        t->resv_name = seen->resv_name;
        return;
    }
    t->health = db_text(s, 0);
    t->numa = db_text(s, 1);
    t->properties = db_text(s, 2);
    t->resv_ns = db_text_or_null(s, 4);
    t->resv_name = db_text(s, 5);
}

/* Its bindings row for the device's new holder: the pod 'by', in
 * 'container'; with none ('by' NULL), a 'gone' device's row goes and
 * another's keeps pod ''. Each written row is stamped with the next
 * revision. */
static err_t rebound_row(struct store *st, const char *resource, const char *id,
                         const struct pod_key *by, const char *container, bool gone)
{
    if (by)
        return db_exec(st->commit.db,
                       "INSERT OR REPLACE INTO bindings(resource,device_id,namespace,pod,container,"
                       "revision) VALUES(?,?,?,?,?,?)",
                       "tttttu", resource, id, by->ns, by->name, container,
                       changelog_next(&st->log));
    if (gone)
        return db_exec(st->commit.db, "DELETE FROM bindings WHERE resource=? AND device_id=?", "tt",
                       resource, id);
    return db_exec(st->commit.db,
                   "UPDATE bindings SET namespace='',pod='',container='',revision=? WHERE "
                   "resource=? AND device_id=?",
                   "utt", changelog_next(&st->log), resource, id);
}

/* The device's row for its event ('row': whether there is one), read into
 * 's' unless the write kept it ('seen'). */
static err_t rebound_read(struct store *st, const char *resource, const char *id,
                          const struct devseen *seen, sqlite3_stmt **s, bool *row)
{
    err_t rc;

    *row = seen != NULL;
    if (seen)
        return ERR_OK;
    rc = db_prep(st->commit.db, s,
                 "SELECT health,numa,properties,removed,r.namespace,r.pod FROM devices d LEFT "
                 "JOIN reserved r ON r.resource=d.resource AND r.device_id=d.id WHERE "
                 "d.resource=? AND d.id=?",
                 "tt", resource, id);
    return rc ? rc : db_step(st->commit.db, *s, row);
}

/* The device's object for its event into 'w' (done): its columns from the
 * kept row 'seen' or from 's', its holder 'by' in 'container' (or none). */
static err_t rebound_text(struct store *st, struct jsonw *w, const char *resource, const char *id,
                          const struct pod_key *by, const char *container,
                          const struct devseen *seen, sqlite3_stmt *s)
{
    struct devtext t = {
        .resource = resource,
        .id = id,
        .holder_ns = by ? by->ns : NULL,
        .holder_name = by ? by->name : NULL,
        .holder_uid = by ? by->uid : NULL,
        .holder_container = container,
        .revision = changelog_next(&st->log),
    };

    rebound_cols(&t, seen, s);
    st_devtext(w, &t);
    return jsonw_done(w);
}

/* Write a device's new holder (the pod 'by', in 'container', or none when
 * 'by' is NULL) into its bindings row, stamped with the next revision, and
 * emit the device's event. The device's own row is not written: its
 * revision is the newer of the two (schema 3). A let-go device keeps its
 * row with pod '', unless it is removed, or not registered at all: then the
 * row goes, and a removed device is DELETED. A device that is not there has
 * no event. Its row is read without the joins of the device view: the
 * holder is known; a device that the write checked for 'by' is not read
 * again (by->seen). (UPDATE .. RETURNING would read it in the same statement,
 * but costs SQLite 3.40 four times an UPDATE and a SELECT: it goes through a
 * temporary table.) */
static err_t emit_rebound(struct store *st, const char *resource, const char *id,
                          const struct pod_key *by, const char *container)
{
    const struct devseen *seen = by ? devseen_find(by->seen, resource, id) : NULL;
    sqlite3_stmt *s = NULL;
    struct jsonw w = JSONW_INIT;
    bool row, gone;
    err_t rc = rebound_read(st, resource, id, seen, &s, &row);

    gone = !by && (!row || sqlite3_column_int(s, 3) != 0);
    if (!rc)
        rc = rebound_row(st, resource, id, by, container, gone);
    if (!rc && row)
        rc = rebound_text(st, &w, resource, id, by, container, seen, s);
    db_done(s);
    if (!rc && row)
        rc = changelog_emit_text(&st->log, gone ? "DELETED" : "MODIFIED", "Device", "", w.sb.buf,
                                 w.sb.len);
    if (!rc && row && gone)
        rc = db_exec(st->commit.db, "DELETE FROM devices WHERE resource=? AND id=?", "tt", resource,
                     id);
    jsonw_release(&w);
    return rc;
}

/* The Device event of 'key' ("resource|id"), which a write took from its
 * pod: with 'bound' (that pod), its bindings row is written too
 * (emit_rebound); without, DELETED when the device is removed and now
 * unbound, else MODIFIED. */
static err_t emit_let_go(struct store *st, const char *key, const struct pod_key *bound)
{
    char k[KEY_MAX];
    const char *id;
    struct devrow d;
    err_t rc;

    str_copy(k, sizeof(k), key);
    id = key_split(k);
    if (bound)
        return emit_rebound(st, k, id, NULL, NULL);
    rc = devrow_get(st, k, id, &d, NULL);
    json_decref(d.numa);
    if (!rc && d.found && d.removed && !d.holder[0])
        return emit_device_deleted(st, k, id);
    if (!rc && d.found)
        return emit_device(st, "MODIFIED", k, id);
    return rc;
}

/* Emit the Device events for keys ("resource|id" -> container) that changed
 * between 'before' and 'after': MODIFIED for keys new in 'after', with
 * another value, or all of them when 'force'; for keys only in 'before',
 * DELETED when the device is removed and now unbound, else MODIFIED. With
 * 'bound', the maps are that pod's bindings before and after the write:
 * the bindings rows of the keys that changed are written here (it holds the
 * keys of 'after', nobody the others), the others are already right. */
static err_t emit_key_changes(struct store *st, json_t *before, json_t *after, bool force,
                              const struct pod_key *bound)
{
    const char *key;
    json_t *v, *w;
    char k[KEY_MAX];
    err_t rc = ERR_OK;

    json_object_foreach(after, key, v) {
        w = json_object_get(before, key);
        if (!rc && (!w || force || !json_equal(v, w))) {
            str_copy(k, sizeof(k), key);
            if (bound)
                rc = emit_rebound(st, k, key_split(k), bound, json_string_value(v));
            else
                rc = emit_device(st, "MODIFIED", k, key_split(k));
            if (rc == ERR_NOTFOUND)
                rc = ERR_OK; /* reserved before it is registered: no device to report */
        }
    }
    json_object_foreach(before, key, v) {
        if (!rc && !json_object_get(after, key))
            rc = emit_let_go(st, key, bound);
    }
    return rc;
}

static err_t map_binding(struct store *st, const char *container, const char *resource,
                         const char *id, void *ctx)
{
    char key[KEY_MAX];

    (void)st;
    dev_key(key, resource, id);
    return json_object_set_new(ctx, key, json_string(container)) ? ERR_NOMEM : ERR_OK;
}

/* Map key -> container of the devices listed in 'containers' (a pod's
 * stored form). */
static err_t binding_map(const json_t *containers, json_t **out)
{
    json_t *map = json_object();
    err_t rc = map ? each_device(NULL, containers, map_binding, map) : ERR_NOMEM;

    if (rc) {
        json_decref(map);
        return rc;
    }
    *out = map;
    return ERR_OK;
}

/* Add 'key' ("resource|id") -> its bindings row's container to 'map' when
 * pod ns/name holds it. */
static err_t held_by(struct store *st, const char *ns, const char *name, const char *key,
                     json_t *map)
{
    char k[KEY_MAX];
    sqlite3_stmt *s = NULL;
    bool row = false;
    err_t rc;

    str_copy(k, sizeof(k), key);
    rc = db_prep(st->commit.db, &s,
                 "SELECT container FROM bindings WHERE resource=? AND device_id=? AND "
                 "namespace=? AND pod=?",
                 "tttt", k, key_split(k), ns, name);
    if (!rc)
        rc = db_step(st->commit.db, s, &row);
    if (!rc && row && json_object_set_new(map, key, json_string(db_text(s, 0))))
        rc = ERR_NOMEM;
    db_done(s);
    return rc;
}

/* Map key -> container of the devices bound to pod ns/name, whose row lists
 * its devices' keys in 'keys' ("resource|id" lines; NULL: not recorded) and
 * its stored containers in 'text'. A pod's bindings are always of devices
 * its stored containers list (a bind and the kubelet reconcile write both
 * together), so each of those is looked up by its key: the bindings table
 * has no index by pod (schema 3). Without the key lines SQLite walks the
 * JSON (half the instructions of jansson's json_loads here, and ~25 k more
 * than the lines); CROSS JOIN keeps the lookups last, by key. */
static err_t pod_bound(struct store *st, const char *ns, const char *name, const char *keys,
                       const char *text, json_t **out)
{
    char key[KEY_MAX];
    const char *at, *nl;
    size_t len;
    sqlite3_stmt *s = NULL;
    json_t *map = json_object();
    err_t rc = map ? ERR_OK : ERR_NOMEM;

    for (at = keys; !rc && at && *at; at += len + (at[len] == '\n')) {
        nl = strchr(at, '\n');
        len = nl ? (size_t)(nl - at) : strlen(at);
        if (len >= sizeof(key) || !memchr(at, '|', len)) {
            rc = db_err(NULL, SQLITE_CORRUPT, "read a pod's device keys");
            break;
        }
        memcpy(key, at, len);
        key[len] = '\0';
        rc = held_by(st, ns, name, key, map);
    }
    if (!rc && !keys)
        rc = db_prep(st->commit.db, &s,
                     "SELECT b.resource,b.device_id,b.container FROM json_each(?1) c CROSS "
                     "JOIN json_each(c.value,'$.devices') g CROSS JOIN json_each(g.value,"
                     "'$.deviceIds') i CROSS JOIN bindings b WHERE b.resource=json_extract("
                     "g.value,'$.resourceName') AND b.device_id=i.value AND b.namespace=?2 AND "
                     "b.pod=?3",
                     "ttt", text, ns, name);
    if (!rc)
        rc = map_rows(st, s, map);
    return map_out(rc, map, out);
}

/* The keys of 'map' as "resource|id" lines (pods.device_keys); new. */
static char *key_lines(const json_t *map)
{
    struct strbuf sb = STRBUF_INIT;
    const char *key;
    json_t *v;
    err_t rc = strbuf_add(&sb, "", 0);

    json_object_foreach((json_t *)map, key, v) {
        if (!rc && sb.len)
            rc = strbuf_add(&sb, "\n", 1);
        if (!rc)
            rc = strbuf_add(&sb, key, strlen(key));
    }
    if (rc) {
        strbuf_release(&sb);
        return NULL;
    }
    return strbuf_detach(&sb, NULL);
}

struct owner {
    const char *ns;   /* the pod's namespace */
    const char *name; /* the pod's name */
};

static err_t insert_reserved(struct store *st, const char *container, const char *resource,
                             const char *id, void *ctx)
{
    const struct owner *o = ctx;

    (void)container;
    return db_exec(st->commit.db,
                   "INSERT OR IGNORE INTO reserved(resource,device_id,namespace,pod) "
                   "VALUES(?,?,?,?)",
                   "tttt", resource, id, o->ns, o->name);
}

struct podrow {
    bool found;        /* the pod exists */
    char uid[256];     /* its uid */
    char *containers;  /* stored JSON; new */
    char *keys;        /* its devices' keys as "resource|id" lines, or NULL; new */
    char *request;     /* stored allocate request or NULL; new */
    uint64_t revision; /* its revision */
};

static err_t podrow_get(struct store *st, const char *ns, const char *name, struct podrow *p)
{
    sqlite3_stmt *s = NULL;
    bool row = false;
    err_t rc = db_prep(st->commit.db, &s,
                       "SELECT uid,containers,request,revision,device_keys FROM pods WHERE "
                       "namespace=? AND name=?",
                       "tt", ns, name);

    memset(p, 0, sizeof(*p));
    if (!rc)
        rc = db_step(st->commit.db, s, &row);
    if (!rc && row) {
        p->found = true;
        str_copy(p->uid, sizeof(p->uid), db_text(s, 0));
        p->containers = strdup(db_text(s, 1));
        if (sqlite3_column_type(s, 2) != SQLITE_NULL)
            p->request = strdup(db_text(s, 2));
        p->revision = (uint64_t)sqlite3_column_int64(s, 3);
        if (sqlite3_column_type(s, 4) != SQLITE_NULL)
            p->keys = strdup(db_text(s, 4));
        if (!p->containers || (sqlite3_column_type(s, 4) != SQLITE_NULL && !p->keys))
            rc = ERR_NOMEM;
    }
    db_done(s);
    return rc;
}

static void podrow_release(struct podrow *p)
{
    free(p->containers);
    free(p->keys);
    free(p->request);
    memset(p, 0, sizeof(*p));
}

/* The shared body of bind and allocate, inside the caller's transaction.
 * 'podtext' (if not NULL) gets the pod's state, new or unchanged. */
static err_t bind_pod(struct store *st, const char *ns, const char *name, const char *uid,
                      const json_t *containers, const char *request, char *msg, size_t cap,
                      bool *created, bool *changed, struct jsonw *podtext)
{
    struct podrow p;
    struct devseen *seen = NULL;
    json_t *stored = NULL, *before = NULL, *after = NULL;
    char *text = NULL, *keys = NULL;
    err_t rc = podrow_get(st, ns, name, &p);

    if (!rc)
        rc = resolve_containers(st, ns, name, containers, &seen, msg, cap, &stored);
    if (!rc)
        text = jsonx_dumps(stored);
    if (!rc && !text)
        rc = ERR_NOMEM;
    if (rc)
        goto out;
    *created = !p.found || strcmp(p.uid, uid) != 0;
    *changed = *created || strcmp(p.containers, text) != 0;
    if (!*changed) {
        if (podtext)
            st_pod_text(podtext, ns, name, p.uid, p.containers, p.revision);
        rc = podtext ? jsonw_done(podtext) : ERR_OK;
        goto out;
    }
    /* the bindings rows are written by emit_key_changes: those that changed */
    rc = p.found ? pod_bound(st, ns, name, p.keys, p.containers, &before) : ERR_OK;
    if (!rc && !before && !(before = json_object()))
        rc = ERR_NOMEM;
    if (!rc)
        rc = binding_map(stored, &after);
    if (!rc && !(keys = key_lines(after)))
        rc = ERR_NOMEM;
    if (!rc)
        rc = db_exec(st->commit.db,
                     "INSERT OR REPLACE INTO pods(namespace,name,uid,containers,request,revision,"
                     "device_keys) VALUES(?,?,?,?,?,?,?)",
                     "tttttut", ns, name, uid, text, request, changelog_next(&st->log), keys);
    if (!rc)
        rc = emit_pod(st, p.found ? "MODIFIED" : "ADDED", ns, name, uid, text, podtext);
    if (!rc)
        rc = emit_key_changes(st, before, after, p.found && strcmp(p.uid, uid) != 0,
                              &(struct pod_key){ns, name, uid, seen});
    if (!rc)
        rc = resv_refresh(st, ns, name);
out:
    podrow_release(&p);
    devseen_free(seen);
    json_decref(stored);
    json_decref(before);
    json_decref(after);
    free(text);
    free(keys);
    return rc;
}

static err_t pod_result(struct store *st, const char *ns, const char *name, json_t **obj)
{
    return st_pod_json(st->commit.db, ns, name, obj);
}

struct bind_op {
    const char *ns, *name, *uid; /* the pod */
    const json_t *containers;    /* validated */
    char *msg;                   /* why it failed, 'cap' bytes */
    size_t cap;
    bool created, changed; /* results */
    struct jsonw doc;      /* the answer, but for its revision */
};

static err_t bind_run(struct store *st, void *ctx)
{
    struct bind_op *b = ctx;
    struct jsonw pod = JSONW_INIT;
    err_t rc = bind_pod(st, b->ns, b->name, b->uid, b->containers, NULL, b->msg, b->cap,
                        &b->created, &b->changed, &pod);

    /* The answer is written before the COMMIT, with room for the revision
     * it gets after: once committed, nothing may fail. */
    if (!rc) {
        jsonw_lit(&b->doc, "{\"podResources\":");
        jsonw_raw(&b->doc, pod.sb.buf, pod.sb.len);
        jsonw_lit(&b->doc, ",\"revision\":");
        jsonw_reserve(&b->doc, 24); /* 20 digits and "}" */
        rc = jsonw_done(&b->doc);
    }
    jsonw_release(&pod);
    if (rc)
        jsonw_release(&b->doc);
    return rc;
}

err_t store_pod_bind(struct store *st, const char *ns, const char *name, const char *uid,
                     const json_t *containers, char *msg, size_t cap, char **out, size_t *len,
                     bool *created, bool *changed)
{
    struct bind_op b = {ns, name, uid, containers, msg, cap, false, false, JSONW_INIT};
    err_t rc = st_write(st, bind_run, &b);

    if (rc) {
        jsonw_release(&b.doc);
        return rc;
    }
    *created = b.created;
    *changed = b.changed;
    jsonw_u64(&b.doc, store_revision(st));
    jsonw_lit(&b.doc, "}");
    *out = jsonw_detach(&b.doc, len);
    return ERR_OK;
}

/* Candidates of 'resource' for pod ns/name, minus 'taken' (keys). */
static err_t candidates(struct store *st, const char *ns, const char *name, const char *resource,
                        const json_t *taken, struct alloc_dev **devs, size_t *n, json_t **keep)
{
    sqlite3_stmt *s = NULL;
    json_t *ids = json_array(), *numa;
    char key[KEY_MAX];
    bool row;
    err_t rc = db_prep(
        st->commit.db, &s,
        "SELECT d.id,d.numa FROM devices d WHERE d.resource=?1 AND d.health='Healthy' AND "
        "d.removed=0 AND NOT EXISTS (SELECT 1 FROM bindings b WHERE b.resource=d.resource AND "
        "b.device_id=d.id AND b.pod<>'' AND NOT (b.namespace=?2 AND b.pod=?3)) AND NOT EXISTS "
        "(SELECT 1 FROM reserved r WHERE r.resource=d.resource AND r.device_id=d.id AND NOT "
        "(r.namespace=?2 AND r.pod=?3)) ORDER BY d.id",
        "ttt", resource, ns, name);

    while (!rc) {
        rc = db_step(st->commit.db, s, &row);
        if (rc || !row)
            break;
        dev_key(key, resource, db_text(s, 0));
        if (json_object_get(taken, key))
            continue;
        numa = db_json(s, 1);
        json_array_append_new(ids, json_pack("[s,I]", db_text(s, 0),
                                             json_array_size(numa)
                                                 ? json_integer_value(json_array_get(numa, 0))
                                                 : (json_int_t)ALLOC_NO_NUMA));
        json_decref(numa);
    }
    db_done(s);
    *n = json_array_size(ids);
    *devs = calloc(*n ? *n : 1, sizeof(**devs));
    if (!rc && !*devs)
        rc = ERR_NOMEM;
    for (size_t i = 0; !rc && i < *n; i++) {
        json_t *e = json_array_get(ids, i);

        (*devs)[i].id = json_string_value(json_array_get(e, 0));
        (*devs)[i].numa = (int)json_integer_value(json_array_get(e, 1));
    }
    *keep = ids; /* owns the id strings */
    return rc;
}

/* Whether any device of 'resource' is registered (not removed). */
static err_t resource_known(struct store *st, const char *resource, bool *known)
{
    sqlite3_stmt *s = NULL;
    err_t rc = db_prep(st->commit.db, &s,
                       "SELECT 1 FROM devices WHERE resource=?1 AND removed=0 LIMIT 1", "t",
                       resource);

    if (!rc)
        rc = db_step(st->commit.db, s, known);
    db_done(s);
    return rc;
}

/* Why 'want' devices of 'resource' cannot be had: a resource the node has
 * no device of is not there at all (ERR_NOTFOUND: a typo, or the wrong
 * node), else there are too few free (ERR_CONFLICT, with the counts). */
static err_t shortage(struct store *st, const char *resource, const char *container, size_t want,
                      size_t n, char *msg, size_t cap)
{
    bool known = true;
    err_t rc = n ? ERR_OK : resource_known(st, resource, &known);

    if (rc)
        return rc;
    if (!known) {
        snprintf(msg, cap,
                 "no device of resource \"%s\" is registered on this node (container %s "
                 "requested %zu)",
                 resource, container, want);
        return ERR_NOTFOUND;
    }
    snprintf(msg, cap, "insufficient %s for container %s: requested %zu, available %zu", resource,
             container, want, n);
    return ERR_CONFLICT;
}

/* Choose 'want' devices of 'resource' into a new ContainerDevices. */
static err_t choose(struct store *st, const char *ns, const char *name, const char *container,
                    const char *resource, size_t want, json_t *taken, char *msg, size_t cap,
                    json_t **group)
{
    struct alloc_dev *devs = NULL;
    size_t n = 0, i, *picked = calloc(want ? want : 1, sizeof(size_t));
    json_t *keep = NULL, *ids = json_array();
    char key[KEY_MAX];
    err_t rc = picked && ids ? ERR_OK : ERR_NOMEM;

    if (!rc)
        rc = candidates(st, ns, name, resource, taken, &devs, &n, &keep);
    if (!rc)
        rc = alloc_choose(devs, n, want, picked);
    if (rc == ERR_CONFLICT)
        rc = shortage(st, resource, container, want, n, msg, cap);
    for (i = 0; !rc && i < want; i++) {
        json_array_append_new(ids, json_string(devs[picked[i]].id));
        dev_key(key, resource, devs[picked[i]].id);
        json_object_set_new(taken, key, json_true());
    }
    if (!rc) {
        *group = json_pack("{s:s,s:O}", "resourceName", resource, "deviceIds", ids);
        if (!*group)
            rc = ERR_NOMEM;
    }
    free(devs);
    free(picked);
    json_decref(keep);
    json_decref(ids);
    return rc;
}

/* Containers for an allocate request, from the reservation or by choice. */
static err_t plan(struct store *st, const char *ns, const char *name, const json_t *request,
                  char *msg, size_t cap, json_t **out)
{
    json_t *resv = NULL, *res = json_array(), *taken = json_object(), *c, *g = NULL, *devs, *v;
    const char *rname;
    size_t i;
    err_t rc = st_reservation_json(st->commit.db, ns, name, &resv);

    if (rc == ERR_OK) {
        json_array_foreach(json_object_get(resv, "containers"), i, c) {
            json_array_append_new(
                res, json_pack("{s:O,s:O,s:[],s:[]}", "name", json_object_get(c, "name"), "devices",
                               json_object_get(c, "devices"), "cpuIds", "memory"));
        }
        goto out;
    }
    if (rc != ERR_NOTFOUND)
        goto out;
    rc = ERR_OK;
    json_array_foreach(request, i, c) {
        devs = json_array();
        json_object_foreach(json_object_get(c, "requests"), rname, v) {
            if (rc || json_integer_value(v) == 0)
                continue;
            rc = choose(st, ns, name, json_string_value(json_object_get(c, "name")), rname,
                        (size_t)json_integer_value(v), taken, msg, cap, &g);
            if (!rc)
                json_array_append_new(devs, g);
        }
        json_array_append_new(res,
                              json_pack("{s:O,s:o,s:[],s:[]}", "name", json_object_get(c, "name"),
                                        "devices", devs, "cpuIds", "memory"));
    }
out:
    json_decref(resv);
    json_decref(taken);
    if (rc) {
        json_decref(res);
        return rc;
    }
    *out = res;
    return ERR_OK;
}

/* A pod write run by the combiner (st_write) whose answer is {key: obj}. */
struct pod_op {
    const char *ns, *name, *uid; /* the pod */
    uint64_t rev;                /* release: its revision as a precondition, or 0 */
    const json_t *request;       /* allocate: the validated request */
    char *req;                   /* allocate: its canonical text */
    char *msg;                   /* why it failed, 'cap' bytes */
    size_t cap;
    bool created, changed; /* allocate's results */
    json_t *obj;           /* the pod: the answer */
};

/* The answer {"podResources": obj, "revision": N} once committed. */
static err_t pod_answer(struct store *st, err_t rc, struct pod_op *o, json_t **out)
{
    if (rc) {
        json_decref(o->obj);
        return rc;
    }
    *out = st_wrap("podResources", o->obj, store_revision(st));
    return *out ? ERR_OK : ERR_NOMEM;
}

/* An allocate whose reservation names a device that is not registered (or
 * removed): the request is fine, the reservation cannot be used now, as
 * when devices are short: 409. (The allocator picks registered devices
 * only; a reservation is used as written.) */
static err_t resv_unusable(struct pod_op *o)
{
    char why[512];

    str_copy(why, sizeof(why), o->msg);
    snprintf(o->msg, o->cap, "the reservation of pod %s/%s cannot be used: %s", o->ns, o->name,
             why);
    return ERR_CONFLICT;
}

/* Bind the devices plan() chose; a reserved device that is not there is
 * the reservation's fault, not the request's. */
static err_t bind_planned(struct store *st, struct pod_op *o, const json_t *containers,
                          struct jsonw *pod)
{
    err_t rc = bind_pod(st, o->ns, o->name, o->uid, containers, o->req, o->msg, o->cap, &o->created,
                        &o->changed, pod);

    return rc == ERR_UNPROCESSABLE ? resv_unusable(o) : rc;
}

static err_t allocate_run(struct store *st, void *ctx)
{
    struct pod_op *o = ctx;
    struct podrow p = {0};
    struct jsonw pod = JSONW_INIT;
    json_t *containers = NULL;
    err_t rc = podrow_get(st, o->ns, o->name, &p);

    o->obj = NULL;
    if (!rc && p.found && strcmp(p.uid, o->uid) == 0) {
        o->created = false;
        o->changed = false;
        if (!p.request || strcmp(p.request, o->req) != 0) {
            snprintf(o->msg, o->cap, "pod %s/%s (uid %s) is already bound %s; release it first",
                     o->ns, o->name, o->uid, p.request ? "with a different request" : "by a bind");
            rc = ERR_CONFLICT;
        }
        goto out;
    }
    if (!rc)
        rc = plan(st, o->ns, o->name, o->request, o->msg, o->cap, &containers);
    if (!rc)
        rc = bind_planned(st, o, containers, &pod);
    if (!rc && pod.sb.len) {
        o->obj = json_loadb(pod.sb.buf, pod.sb.len, 0, NULL);
        rc = o->obj ? ERR_OK : ERR_NOMEM;
    }
out:
    if (!rc && !o->obj)
        rc = pod_result(st, o->ns, o->name, &o->obj);
    jsonw_release(&pod);
    podrow_release(&p);
    json_decref(containers);
    if (rc) {
        json_decref(o->obj);
        o->obj = NULL;
    }
    return rc;
}

err_t store_pod_allocate(struct store *st, const char *ns, const char *name, const char *uid,
                         const json_t *request, char *msg, size_t cap, json_t **out, bool *created,
                         bool *changed)
{
    struct pod_op o = {
        .ns = ns, .name = name, .uid = uid, .request = request, .msg = msg, .cap = cap};
    err_t rc;

    o.req = jsonx_dumps(request);
    if (!o.req)
        return ERR_NOMEM;
    rc = st_write(st, allocate_run, &o);
    free(o.req);
    if (!rc) {
        *created = o.created;
        *changed = o.changed;
    }
    return pod_answer(st, rc, &o, out);
}

/* The pod a release names ('p'): there, and with the uid it gives, if any. */
static err_t release_check(struct pod_op *o, const struct podrow *p)
{
    if (!p->found) {
        snprintf(o->msg, o->cap, "pod %s/%s not found", o->ns, o->name);
        return ERR_NOTFOUND;
    }
    if (o->uid && strcmp(o->uid, p->uid) != 0) {
        snprintf(o->msg, o->cap, "pod %s/%s has uid \"%s\", not \"%s\"", o->ns, o->name, p->uid,
                 o->uid);
        return ERR_CONFLICT;
    }
    if (o->rev && o->rev != p->revision) {
        snprintf(o->msg, o->cap,
                 "pod %s/%s has revision %" PRIu64 ", not %" PRIu64 " (the precondition's)", o->ns,
                 o->name, p->revision, o->rev);
        return ERR_CONFLICT;
    }
    return ERR_OK;
}

static err_t release_run(struct store *st, void *ctx)
{
    struct pod_op *o = ctx;
    struct podrow p;
    json_t *before = NULL, *none = json_object();
    err_t rc = none ? podrow_get(st, o->ns, o->name, &p) : ERR_NOMEM;

    o->obj = NULL;
    if (!rc)
        rc = release_check(o, &p);
    if (!rc)
        rc = pod_bound(st, o->ns, o->name, p.keys, p.containers, &before);
    if (!rc)
        rc = st_pod_json(st->commit.db, o->ns, o->name, &o->obj);
    if (!rc &&
        json_object_set_new(o->obj, "revision", json_integer((json_int_t)changelog_next(&st->log))))
        rc = ERR_NOMEM;
    if (!rc)
        rc = changelog_emit(&st->log, "DELETED", "PodResources", o->ns, o->obj);
    if (!rc)
        rc = db_exec(st->commit.db, "DELETE FROM pods WHERE namespace=? AND name=?", "tt", o->ns,
                     o->name);
    if (!rc)
        rc = emit_key_changes(st, before, none, false, /* no 'after': no uid */
                              &(struct pod_key){o->ns, o->name, NULL, NULL});
    if (!rc)
        rc = resv_refresh(st, o->ns, o->name);
    if (none)
        podrow_release(&p);
    json_decref(before);
    json_decref(none);
    if (rc) {
        json_decref(o->obj);
        o->obj = NULL;
    }
    return rc;
}

err_t store_pod_release(struct store *st, const char *ns, const char *name, const char *uid,
                        uint64_t rev, char *msg, size_t cap, json_t **out)
{
    struct pod_op o = {.ns = ns, .name = name, .uid = uid, .rev = rev, .msg = msg, .cap = cap};

    return pod_answer(st, st_write(st, release_run, &o), &o, out);
}

/* ---- reservations ---- */

struct claim {
    const char *self; /* "ns/name" of the reservation */
    char *msg;        /* the reason of a refusal */
    size_t cap;       /* its size */
};

/* ERR_CONFLICT when the device is bound to or reserved for another pod. */
static err_t check_claim(struct store *st, const char *container, const char *res, const char *id,
                         void *ctx)
{
    static const char *const tables[] = {"bindings", "reserved"};
    static const char *const what[] = {"bound to", "reserved for"};
    const struct claim *cl = ctx;
    char who[512];
    size_t i;
    err_t rc;

    (void)container;
    for (i = 0; i < ARRAY_SIZE(tables); i++) {
        rc = holder_get(st, tables[i], res, id, who, sizeof(who));
        if (rc)
            return rc;
        if (who[0] && strcmp(who, cl->self) != 0) {
            snprintf(cl->msg, cl->cap, "device %s %s is %s pod %s", res, id, what[i], who);
            return ERR_CONFLICT;
        }
    }
    return ERR_OK;
}

/* The topology of each device group of 'containers' (a reservation's), as
 * a bind stores a pod's: the union of its devices' NUMA nodes, from the
 * devices registered now (one not registered yet adds none). */
static err_t resv_topology(struct store *st, json_t *containers)
{
    json_t *c, *g, *id, *numa;
    struct devrow d;
    size_t i, j, k;
    err_t rc = ERR_OK;

    json_array_foreach(containers, i, c) {
        json_array_foreach(json_object_get(c, "devices"), j, g) {
            const char *r = json_string_value(json_object_get(g, "resourceName"));

            numa = json_array();
            rc = numa ? ERR_OK : ERR_NOMEM;
            json_array_foreach(rc ? NULL : json_object_get(g, "deviceIds"), k, id) {
                rc = devrow_get(st, r, json_string_value(id), &d, NULL);
                if (!rc && d.found)
                    numa_union(numa, d.numa);
                json_decref(d.numa);
                if (rc)
                    break;
            }
            if (!rc && json_object_set_new(g, "topology", st_topology(numa)))
                rc = ERR_NOMEM;
            json_decref(numa);
            if (rc)
                return rc;
        }
    }
    return ERR_OK;
}

/* Check each reserved device is not bound or reserved elsewhere; sort ids,
 * add each group's topology. */
static err_t resv_check(struct store *st, const char *ns, const char *name, const json_t *in,
                        char *msg, size_t cap, json_t **out)
{
    char self[512];
    struct claim cl = {.self = self, .msg = msg, .cap = cap};
    json_t *res;
    err_t rc;

    str_join(self, sizeof(self), ns, '/', name);
    rc = each_device(st, in, check_claim, &cl);
    if (rc)
        return rc;
    res = json_deep_copy(in);
    if (!res)
        return ERR_NOMEM;
    sort_ids(res);
    rc = resv_topology(st, res);
    if (rc) {
        json_decref(res);
        return rc;
    }
    *out = res;
    return ERR_OK;
}

static err_t resv_write(struct store *st, const char *ns, const char *name, const json_t *stored,
                        const char *text, bool exists)
{
    json_t *before = NULL, *after = NULL;
    const char *state = "Pending";
    char msg[700];
    err_t rc = pod_reserved(st, ns, name, &before);

    if (!rc)
        rc = db_exec(st->commit.db, "DELETE FROM reserved WHERE namespace=? AND pod=?", "tt", ns,
                     name);
    if (!rc)
        rc = each_device(st, stored, insert_reserved, &(struct owner){ns, name});
    if (!rc)
        rc = resv_compute(st, ns, name, stored, &state, msg, sizeof(msg));
    if (!rc)
        rc = db_exec(st->commit.db,
                     "INSERT OR REPLACE INTO reservations(namespace,name,containers,state,message,"
                     "revision) VALUES(?,?,?,?,?,?)",
                     "tttttu", ns, name, text, state, msg, changelog_next(&st->log));
    if (!rc)
        rc = emit_reservation(st, exists ? "MODIFIED" : "ADDED", ns, name);
    if (!rc)
        rc = pod_reserved(st, ns, name, &after);
    if (!rc)
        rc = emit_key_changes(st, before, after, false, NULL);
    json_decref(before);
    json_decref(after);
    return rc;
}

struct resv_put {
    const char *ns, *name;
    const json_t *containers;
    char *msg;
    size_t cap;
    bool *created, *changed;
};

static err_t resv_put_run(struct store *st, void *args, json_t **obj)
{
    struct resv_put *a = args;
    const char *ns = a->ns, *name = a->name;
    bool *created = a->created, *changed = a->changed;
    json_t *stored = NULL, *old = NULL;
    char *text = NULL, *oldtext = NULL;
    err_t rc = resv_check(st, ns, name, a->containers, a->msg, a->cap, &stored);

    if (!rc)
        text = jsonx_dumps(stored);
    if (!rc && !text)
        rc = ERR_NOMEM;
    if (!rc) {
        rc = st_reservation_json(st->commit.db, ns, name, &old);
        if (rc == ERR_NOTFOUND)
            rc = ERR_OK;
    }
    if (!rc && old)
        oldtext = jsonx_dumps(json_object_get(old, "containers"));
    *created = !old;
    *changed = !old || !oldtext || strcmp(oldtext, text) != 0;
    if (!rc && *changed)
        rc = resv_write(st, ns, name, stored, text, old != NULL);
    else if (!rc)
        rc = resv_refresh(st, ns, name);
    if (!rc)
        rc = st_reservation_json(st->commit.db, ns, name, obj);
    json_decref(stored);
    json_decref(old);
    free(text);
    free(oldtext);
    return rc;
}

err_t store_reservation_put(struct store *st, const char *ns, const char *name,
                            const json_t *containers, char *msg, size_t cap, json_t **out,
                            bool *created, bool *changed)
{
    struct resv_put a = {ns, name, containers, msg, cap, created, changed};

    return write_json(st, "reservation", resv_put_run, &a, out);
}

struct resv_delete {
    const char *ns, *name;
    uint64_t rev; /* its revision as a precondition, or 0 */
    char *msg;
    size_t cap;
};

static err_t resv_delete_run(struct store *st, void *args, json_t **obj)
{
    struct resv_delete *a = args;
    const char *ns = a->ns, *name = a->name;
    json_t *before = NULL, *none = json_object();
    err_t rc = none ? st_reservation_json(st->commit.db, ns, name, obj) : ERR_NOMEM;
    uint64_t was = rc ? 0 : (uint64_t)json_integer_value(json_object_get(*obj, "revision"));

    if (rc == ERR_NOTFOUND)
        snprintf(a->msg, a->cap, "reservation %s/%s not found", ns, name);
    if (!rc && a->rev && a->rev != was) {
        snprintf(a->msg, a->cap,
                 "reservation %s/%s has revision %" PRIu64 ", not %" PRIu64 " (the precondition's)",
                 ns, name, was, a->rev);
        rc = ERR_CONFLICT;
    }
    if (!rc &&
        json_object_set_new(*obj, "revision", json_integer((json_int_t)changelog_next(&st->log))))
        rc = ERR_NOMEM;
    if (!rc)
        rc = changelog_emit(&st->log, "DELETED", "Reservation", ns, *obj);
    if (!rc)
        rc = pod_reserved(st, ns, name, &before);
    if (!rc)
        rc = db_exec(st->commit.db, "DELETE FROM reserved WHERE namespace=? AND pod=?", "tt", ns,
                     name);
    if (!rc)
        rc = db_exec(st->commit.db, "DELETE FROM reservations WHERE namespace=? AND name=?", "tt",
                     ns, name);
    if (!rc)
        rc = emit_key_changes(st, before, none, false, NULL);
    json_decref(before);
    json_decref(none);
    return rc;
}

err_t store_reservation_delete(struct store *st, const char *ns, const char *name, uint64_t rev,
                               char *msg, size_t cap, json_t **out)
{
    struct resv_delete a = {ns, name, rev, msg, cap};

    return write_json(st, "reservation", resv_delete_run, &a, out);
}
