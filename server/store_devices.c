/* SPDX-License-Identifier: Apache-2.0 */
/* store_devices.c - the device writes: a resource's device set (register,
 * re-register, drop), one device's health, and the heartbeats that lapse.
 * Each public function is one write; events are emitted in the order the
 * devices change. */
#define LOG_MOD "store"
#include "../common/common.h"
#include "../common/clock.h"
#include "../common/jsonx.h"
#include "store_rows.h"
#include "store_view.h"

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
            rc = st_emit_device(st, row ? "MODIFIED" : "ADDED", resource, id);
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
        rc = st_devrow_get(st, resource, id, &d, NULL);
        json_decref(d.numa);
        if (rc)
            break;
        if (!d.holder[0]) {
            rc = st_emit_device_deleted(st, resource, id);
            *changed = true;
        } else if (!d.removed || strcmp(d.health, "Unhealthy") != 0) {
            rc = db_exec(st->commit.db,
                         "UPDATE devices SET removed=1,health='Unhealthy' WHERE resource=? AND "
                         "id=?",
                         "tt", resource, id);
            /* 'removed' is not in the Device object: an event only when it
             * turns Unhealthy */
            if (!rc && strcmp(d.health, "Unhealthy") != 0)
                rc = st_emit_device(st, "MODIFIED", resource, id);
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
    return st_write_json(st, "devices", resource_put_run, &a, out);
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
    err_t rc = st_devrow_get(st, resource, id, &d, NULL);

    json_decref(d.numa);
    if (!rc && (!d.found || d.removed)) {
        snprintf(a->msg, a->cap, "device %s %s not found", resource, id);
        rc = ERR_NOTFOUND;
    }
    if (!rc && strcmp(d.health, health) != 0) {
        rc = db_exec(st->commit.db, "UPDATE devices SET health=? WHERE resource=? AND id=?", "ttt",
                     health, resource, id);
        if (!rc)
            rc = st_emit_device(st, "MODIFIED", resource, id);
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

    return st_write_json(st, "device", set_health_run, &a, out);
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
                rc = st_emit_device(st, "MODIFIED", res, id);
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
