/* SPDX-License-Identifier: Apache-2.0 */
/* store_resv.c - reservations (pre-assignments): their state (Pending,
 * Bound, Conflict) re-evaluated inside the writes that can change it, and
 * the reservation writes. Device keys in the in-memory maps are
 * "resource|id". */
#define LOG_MOD "store"
#include "../common/common.h"
#include "../common/jsonx.h"
#include "store_rows.h"
#include "store_view.h"

#include <inttypes.h>

static err_t emit_reservation(struct store *st, const char *type, const char *ns, const char *name)
{
    json_t *obj = NULL;
    err_t rc = st_reservation_json(st->commit.db, ns, name, &obj);

    if (!rc)
        rc = changelog_emit(&st->log, type, "Reservation", ns, obj);
    json_decref(obj);
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
        rc = st_map_rows(st, s, map);
    return st_map_out(rc, map, out);
}

/* Sort the deviceIds of every group of 'containers' in place. */
static void sort_ids(json_t *containers)
{
    json_t *c, *g;
    size_t i, j;

    json_array_foreach(containers, i, c) {
        json_array_foreach(json_object_get(c, "devices"), j, g)
            json_object_set_new(g, "deviceIds", st_sorted_strings(json_object_get(g, "deviceIds")));
    }
}

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

    if (keys && !st_each_device(NULL, containers, add_key, keys))
        out = st_sorted_strings(keys);
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
    err_t rc = st_devrow_get(st, res, id, &d, NULL);

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
    rc = st_each_device(st, containers, check_reserved_device, &b);
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
err_t st_resv_refresh(struct store *st, const char *ns, const char *name)
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
            rc = st_resv_refresh(st, json_string_value(json_array_get(k, 0)),
                                 json_string_value(json_array_get(k, 1)));
    }
    json_decref(keys);
    return rc;
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
                rc = st_devrow_get(st, r, json_string_value(id), &d, NULL);
                if (!rc && d.found)
                    st_numa_union(numa, d.numa);
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
    rc = st_each_device(st, in, check_claim, &cl);
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
        rc = st_each_device(st, stored, insert_reserved, &(struct owner){ns, name});
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
        rc = st_emit_key_changes(st, before, after, false, NULL);
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
        rc = st_resv_refresh(st, ns, name);
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

    return st_write_json(st, "reservation", resv_put_run, &a, out);
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
        rc = st_emit_key_changes(st, before, none, false, NULL);
    json_decref(before);
    json_decref(none);
    return rc;
}

err_t store_reservation_delete(struct store *st, const char *ns, const char *name, uint64_t rev,
                               char *msg, size_t cap, json_t **out)
{
    struct resv_delete a = {ns, name, rev, msg, cap};

    return st_write_json(st, "reservation", resv_delete_run, &a, out);
}
