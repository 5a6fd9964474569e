/* SPDX-License-Identifier: Apache-2.0 */
/* store_devices.c - the device writes: a resource's device set (register,
 * re-register, drop), one device's health, and the heartbeats that lapse.
 * Each public function is one write; events are emitted in the order the
 * devices change. Not the kubelet's device mirror (store_sync.c). */
#define LOG_MOD "store"
#include "../common/common.h"
#include "../common/clock.h"
#include "../common/jsonx.h"
#include "store_rows.h"
#include "store_view.h"

/* ---- a resource's device set ---- */

/* How a listed device's row compares with what the list says. */
struct listed {
    bool row;     /* the device has a row */
    bool same;    /* with the listed health, NUMA ids, properties and names */
    bool removed; /* and is marked removed (still held) */
};

/* A listed device's columns as stored text. */
struct listed_cols {
    const char *id, *health, *physical;
    char *numa, *props, *aliases; /* new */
};

static err_t listed_get(struct store *st, const char *resource, const struct listed_cols *c,
                        struct listed *l)
{
    sqlite3_stmt *s = NULL;
    err_t rc = db_prep(st->commit.db, &s,
                       "SELECT health=? AND numa=? AND properties=? AND aliases=? AND physical=?,"
                       "removed FROM devices WHERE resource=? AND id=?",
                       "ttttttt", c->health, c->numa, c->props, c->aliases, c->physical, resource,
                       c->id);

    if (rc)
        return rc;
    rc = db_step(st->commit.db, s, &l->row);
    if (!rc && l->row) {
        l->same = sqlite3_column_int(s, 0) != 0;
        l->removed = sqlite3_column_int(s, 1) != 0;
    }
    db_done(s);
    return rc;
}

/* Register one listed device 'dev' ({"id","health","numa","properties",
 * "aliases","physical"}); its names are checked once the whole set is
 * written (st_names_settle). */
static err_t put_one_device(struct store *st, const char *resource, const json_t *dev,
                            bool *changed)
{
    struct listed_cols c = {json_string_value(json_object_get(dev, "id")),
                            json_string_value(json_object_get(dev, "health")),
                            json_string_value(json_object_get(dev, "physical")),
                            NULL,
                            NULL,
                            NULL};
    struct listed l = {false, false, false};
    err_t rc = st_ident_of(st, resource, c.id, dev, &c.physical, &c.aliases);

    c.numa = jsonx_dumps(json_object_get(dev, "numa"));
    c.props = jsonx_dumps(json_object_get(dev, "properties"));
    if (!rc)
        rc = c.numa && c.props ? listed_get(st, resource, &c, &l) : ERR_NOMEM;
    if (rc || (l.same && !l.removed))
        goto out;
    *changed = true;
    if (l.same) {
        /* a removed device, still held, registered again as it is listed:
         * registered again, and nothing a reader sees changed (no event) */
        rc = db_exec(st->commit.db, "UPDATE devices SET removed=0 WHERE resource=? AND id=?", "tt",
                     resource, c.id);
        goto out;
    }
    rc = db_exec(st->commit.db,
                 "INSERT INTO devices(resource,id,health,numa,properties,removed,revision,"
                 "physical,aliases) VALUES(?,?,?,?,?,0,?,?,?) ON CONFLICT(resource,id) DO "
                 "UPDATE SET health=excluded.health,numa=excluded.numa,"
                 "properties=excluded.properties,removed=0,physical=excluded.physical,"
                 "aliases=excluded.aliases",
                 "tttttutt", resource, c.id, c.health, c.numa, c.props, changelog_next(&st->log),
                 c.physical, c.aliases);
    if (!rc)
        rc = st_emit_device(st, l.row ? "MODIFIED" : "ADDED", resource, c.id);
out:
    free(c.numa);
    free(c.props);
    free(c.aliases);
    free((char *)c.physical);
    return rc;
}

/* The ids of 'resource' that 'keep' (a set of ids) does not hold; new. */
static err_t unlisted(struct store *st, const char *resource, const json_t *keep, json_t **out)
{
    sqlite3_stmt *s = NULL;
    json_t *gone = json_array();
    bool row;
    err_t rc = gone ? db_prep(st->commit.db, &s, "SELECT id FROM devices WHERE resource=?", "t",
                              resource)
                    : ERR_NOMEM;

    while (!rc) {
        rc = db_step(st->commit.db, s, &row);
        if (rc || !row)
            break;
        if (!json_object_get(keep, db_text(s, 0)) &&
            json_array_append_new(gone, json_string(db_text(s, 0))))
            rc = ERR_NOMEM;
    }
    db_done(s);
    return st_map_out(rc, gone, out);
}

/* A device no longer listed: deleted when free, else marked removed and
 * Unhealthy while its holder has it. */
static err_t drop_one(struct store *st, const char *resource, const char *id, bool dra,
                      bool *changed)
{
    struct devrow d;
    err_t rc = st_devrow_get(st, resource, id, &d, NULL);

    json_decref(d.numa);
    if (rc)
        return rc;
    if (!d.holder[0]) {
        *changed = true;
        return st_emit_device_deleted(st, resource, id);
    }
    if (dra) { /* a DRA device has no health of its own: bound, not published */
        *changed = *changed || !d.removed;
        return d.removed ? ERR_OK
                         : db_exec(st->commit.db,
                                   "UPDATE devices SET removed=1 WHERE resource=? AND id=?", "tt",
                                   resource, id);
    }
    if (d.removed && strcmp(d.health, "Unhealthy") == 0)
        return ERR_OK;
    *changed = true;
    rc = db_exec(st->commit.db,
                 "UPDATE devices SET removed=1,health='Unhealthy' WHERE resource=? AND id=?", "tt",
                 resource, id);
    /* 'removed' is not in the Device object: an event only when it turns
     * Unhealthy */
    if (!rc && strcmp(d.health, "Unhealthy") != 0)
        rc = st_emit_device(st, "MODIFIED", resource, id);
    return rc;
}

/* Devices of 'resource' absent from 'keep': delete, or mark removed when bound. */
static err_t drop_missing(struct store *st, const char *resource, const json_t *keep, bool dra,
                          bool *changed)
{
    json_t *gone = NULL, *v;
    size_t i;
    err_t rc = unlisted(st, resource, keep, &gone);

    json_array_foreach(rc ? NULL : gone, i, v) {
        rc = drop_one(st, resource, json_string_value(v), dra, changed);
        if (rc)
            break;
    }
    json_decref(gone);
    return rc;
}

/* The Device objects of 'resource', by id; new. */
static err_t devices_of(struct store *st, const char *resource, json_t **out)
{
    sqlite3_stmt *s = NULL;
    json_t *arr = json_array(), *d;
    bool row;
    err_t rc = arr ? db_prep(st->commit.db, &s,
                             "SELECT id FROM devices WHERE resource=? ORDER BY id", "t", resource)
                   : ERR_NOMEM;

    while (!rc) {
        rc = db_step(st->commit.db, s, &row);
        if (rc || !row)
            break;
        rc = st_device_json(st->commit.db, resource, db_text(s, 0), &d);
        if (!rc && json_array_append_new(arr, d))
            rc = ERR_NOMEM;
    }
    db_done(s);
    return st_map_out(rc, arr, out);
}

/* A resource's device set as st_write_json() runs it. */
struct resource_put {
    const char *resource;  /* the resource, or the DRA driver */
    const json_t *devices; /* its devices, validated */
    uint64_t ttl_ms;       /* its heartbeat, 0 for none */
    bool dra;              /* a DRA driver's published devices */
    bool changed;          /* a device changed */
    struct error *e;       /* why it is refused */
};

static err_t resource_put_run(struct store *st, void *args, json_t **list)
{
    struct resource_put *a = args;
    json_t *keep = json_object(), *dev;
    size_t i;
    err_t rc = keep ? ERR_OK : ERR_NOMEM;

    a->changed = false;
    json_array_foreach(a->devices, i, dev) {
        if (!rc)
            rc = put_one_device(st, a->resource, dev, &a->changed);
        json_object_set(keep, json_string_value(json_object_get(dev, "id")), json_true());
    }
    if (!rc)
        rc = drop_missing(st, a->resource, keep, a->dra, &a->changed);
    if (!rc && a->changed)
        rc = st_names_settle(st, a->resource, a->e);
    json_decref(keep);
    if (rc)
        return rc;
    rc = db_exec(st->commit.db,
                 "INSERT OR REPLACE INTO resources(name,ttl_ms,refreshed_ms,expired,dra) "
                 "VALUES(?,?,?,0,?)",
                 "tuui", a->resource, a->ttl_ms, clock_wall_ms(), (int64_t)a->dra);
    if (!rc && a->changed)
        rc = st_resv_refresh_all(st);
    if (!rc)
        rc = devices_of(st, a->resource, list);
    return rc;
}

err_t store_resource_put(struct store *st, const char *resource, const json_t *devices,
                         uint64_t ttl_ms, struct error *e, json_t **out, bool *changed)
{
    struct resource_put a = {resource, devices, ttl_ms, false, false, e};
    err_t rc = st_write_json(st, "devices", resource_put_run, &a, out);

    *changed = !rc && a.changed;
    return rc;
}

err_t store_driver_put(struct store *st, const char *driver, const json_t *devices, struct error *e,
                       json_t **out, bool *changed)
{
    struct resource_put a = {driver, devices, 0, true, false, e};
    err_t rc = st_write_json(st, "devices", resource_put_run, &a, out);

    *changed = !rc && a.changed;
    return rc;
}

/* ---- one device's health ---- */

struct set_health {
    const char *resource, *id, *health; /* the device and its new health */
    struct error *e;                    /* why it failed */
};

static err_t set_health_run(struct store *st, void *args, json_t **obj)
{
    struct set_health *a = args;
    struct devrow d;
    err_t rc = st_devrow_get(st, a->resource, a->id, &d, NULL);

    json_decref(d.numa);
    if (rc)
        return rc;
    if (!d.found || d.removed)
        return errorf(a->e, ERR_NOTFOUND, "device %s %s not found", a->resource, a->id);
    if (strcmp(d.health, a->health) != 0) {
        rc = db_exec(st->commit.db, "UPDATE devices SET health=? WHERE resource=? AND id=?", "ttt",
                     a->health, a->resource, a->id);
        if (!rc)
            rc = st_emit_device(st, "MODIFIED", a->resource, a->id);
        if (!rc)
            rc = st_resv_refresh_all(st);
        if (rc)
            return rc;
    }
    return st_device_json(st->commit.db, a->resource, a->id, obj);
}

err_t store_device_set_health(struct store *st, const char *resource, const char *id,
                              const char *health, struct error *e, json_t **out)
{
    struct set_health a = {resource, id, health, e};

    return st_write_json(st, "device", set_health_run, &a, out);
}

/* ---- heartbeats ---- */

/* The strings of the one-column rows of 's' (given back) into the new *out. */
static err_t column_strings(struct store *st, sqlite3_stmt *s, json_t **out)
{
    json_t *list = json_array();
    bool row;
    err_t rc = list ? ERR_OK : ERR_NOMEM;

    while (!rc) {
        rc = db_step(st->commit.db, s, &row);
        if (rc || !row)
            break;
        if (json_array_append_new(list, json_string(db_text(s, 0))))
            rc = ERR_NOMEM;
    }
    db_done(s);
    return st_map_out(rc, list, out);
}

/* Resource 'res' lapsed: mark it, and its Healthy devices Unhealthy (by id). */
static err_t expire_resource(struct store *st, const char *res)
{
    sqlite3_stmt *s = NULL;
    json_t *ids = NULL, *v;
    size_t i;
    err_t rc = db_exec(st->commit.db, "UPDATE resources SET expired=1 WHERE name=?", "t", res);

    if (!rc)
        rc = db_prep(st->commit.db, &s,
                     "SELECT id FROM devices WHERE resource=? AND health='Healthy' ORDER BY id",
                     "t", res);
    if (!rc)
        rc = column_strings(st, s, &ids);
    json_array_foreach(rc ? NULL : ids, i, v) {
        rc = db_exec(st->commit.db,
                     "UPDATE devices SET health='Unhealthy' WHERE resource=? AND id=?", "tt", res,
                     json_string_value(v));
        if (!rc)
            rc = st_emit_device(st, "MODIFIED", res, json_string_value(v));
        if (rc)
            break;
    }
    json_decref(ids);
    return rc;
}

/* The heartbeats that lapsed before 'now_ms', as st_write() runs it. */
struct expire {
    uint64_t now_ms; /* wall clock */
    int expired;     /* resources whose heartbeat lapsed */
};

static err_t expire_run(struct store *st, void *ctx)
{
    struct expire *a = ctx;
    sqlite3_stmt *s = NULL;
    json_t *lapsed = NULL, *v;
    size_t i;
    err_t rc = db_prep(st->commit.db, &s,
                       "SELECT name FROM resources WHERE ttl_ms>0 AND expired=0 AND "
                       "refreshed_ms+ttl_ms<?",
                       "u", a->now_ms);

    a->expired = 0;
    if (!rc)
        rc = column_strings(st, s, &lapsed);
    json_array_foreach(rc ? NULL : lapsed, i, v) {
        log_warn("heartbeat of resource '%s' lapsed; its devices are now Unhealthy",
                 json_string_value(v));
        a->expired++;
        rc = expire_resource(st, json_string_value(v));
        if (rc)
            break;
    }
    if (!rc && a->expired)
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
