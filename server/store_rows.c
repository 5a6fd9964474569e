/* SPDX-License-Identifier: Apache-2.0 */
/* store_rows.c - the rows and events the store's writes share: device keys
 * and rows, containers arrays, the Device events of devices that change
 * hands, and the end of a write that answers one object. */
#define LOG_MOD "store"
#include "../common/common.h"
#include "../common/jsonw.h"
#include "store_rows.h"
#include "store_view.h"

#include <assert.h>

/* ---- keys and device events ---- */

void st_dev_key(char *key, const char *resource, const char *id)
{
    str_join(key, KEY_MAX, resource, '|', id);
}

/* Split "resource|id" in place. */
const char *st_key_split(char *key)
{
    char *bar = strchr(key, '|');

    assert(bar); /* a key of st_dev_key() */
    *bar = '\0';
    return bar + 1;
}

err_t st_emit_device(struct store *st, const char *type, const char *resource, const char *id)
{
    struct jsonw w = JSONW_INIT;
    err_t rc = db_exec(st->commit.db, "UPDATE devices SET revision=? WHERE resource=? AND id=?",
                       "utt", changelog_next(&st->log), resource, id);

    if (rc)
        return rc;
    rc = st_device_text(st->commit.db, resource, id, 0, &w);
    if (!rc)
        rc = changelog_emit_text(&st->log, type, "Device", "", w.sb.buf, w.sb.len);
    jsonw_release(&w);
    return rc;
}

err_t st_emit_device_deleted(struct store *st, const char *resource, const char *id)
{
    struct jsonw w = JSONW_INIT;
    err_t rc = st_device_text(st->commit.db, resource, id, changelog_next(&st->log), &w);

    if (rc)
        goto out;
    rc = changelog_emit_text(&st->log, "DELETED", "Device", "", w.sb.buf, w.sb.len);
    if (rc)
        goto out;
    rc = db_exec(st->commit.db, "DELETE FROM devices WHERE resource=? AND id=?", "tt", resource,
                 id);
    if (rc)
        goto out;
    rc = db_exec(st->commit.db, "DELETE FROM bindings WHERE resource=? AND device_id=? AND pod=''",
                 "tt", resource, id);
out:
    jsonw_release(&w);
    return rc;
}

/* ---- device rows ---- */

void st_devseen_free(struct devseen *l)
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

/* Put the row 's' (st_devrow_get()'s columns) in front of '*l'. */
static err_t devseen_add(struct devseen **l, const char *resource, const char *id, sqlite3_stmt *s)
{
    const char *v[8] = {
        resource,      id,           db_text(s, 0), db_text(s, 2), db_text(s, 6), db_text(s, 7),
        db_text(s, 8), db_text(s, 5)};
    size_t len[ARRAY_SIZE(v)], n = 0, i;
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
    e->physical = v[5];
    e->aliases = v[6];
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

err_t st_devrow_get(struct store *st, const char *resource, const char *id, struct devrow *d,
                    struct devseen **seen)
{
    sqlite3_stmt *s = NULL;
    bool row = false;
    err_t rc = db_prep(st->commit.db, &s,
                       "SELECT d.health,d.removed,d.numa,b.namespace||'/'||b.pod,b.container,"
                       "r.namespace||'/'||r.pod,d.properties,d.physical,d.aliases FROM devices d "
                       "LEFT JOIN bindings b "
                       "ON b.resource=d.resource AND b.device_id=d.id AND b.pod<>'' LEFT JOIN "
                       "reserved r ON r.resource=d.resource AND r.device_id=d.id WHERE "
                       "d.resource=? AND d.id=?",
                       "tt", resource, id);

    memset(d, 0, sizeof(*d));
    if (rc)
        return rc;
    rc = db_step(st->commit.db, s, &row);
    if (rc || !row)
        goto out;
    d->found = true;
    str_copy(d->health, sizeof(d->health), db_text(s, 0));
    d->removed = sqlite3_column_int(s, 1) != 0;
    str_copy(d->holder, sizeof(d->holder), db_text(s, 3));
    str_copy(d->container, sizeof(d->container), db_text(s, 4));
    str_copy(d->reserved, sizeof(d->reserved), db_text(s, 5));
    d->numa = db_json(s, 2);
    if (seen)
        rc = devseen_add(seen, resource, id, s);
out:
    db_done(s);
    return rc;
}

/* Add the rows (resource, id, value) of 's' to 'map' as key -> value; 's'
 * (may be NULL: nothing to add) is done with. */
/* ---- maps of devices, containers arrays ---- */

err_t st_map_rows(struct store *st, sqlite3_stmt *s, json_t *map)
{
    char key[KEY_MAX];
    bool row;
    err_t rc = ERR_OK;

    while (s && !rc) {
        rc = db_step(st->commit.db, s, &row);
        if (rc || !row)
            break;
        st_dev_key(key, db_text(s, 0), db_text(s, 1));
        if (json_object_set_new(map, key, json_string(db_text(s, 2))))
            rc = ERR_NOMEM;
    }
    db_done(s);
    return rc;
}

/* *out = 'map' when 'rc' is ERR_OK, else 'map' is freed; returns 'rc'. */
err_t st_map_out(err_t rc, json_t *map, json_t **out)
{
    if (rc) {
        json_decref(map);
        return rc;
    }
    *out = map;
    return ERR_OK;
}

/* Sum of NUMA ids of 'ids' into sorted unique 'numa'. */
void st_numa_union(json_t *numa, const json_t *ids)
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

/* Call 'fn' for every device id of 'containers' ([{"name","devices":[{"resourceName",
 * "deviceIds"}]}]) in order; stops at the first error and returns it. */
err_t st_each_device(struct store *st, const json_t *containers, st_device_fn fn, void *ctx)
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

/* ---- the end of a write ---- */

/* A write whose answer is one object, as st_write() runs it. */
struct json_op {
    st_json_body body; /* the write */
    void *args;        /* its arguments */
    json_t *obj;       /* the answer's object, once it succeeded; new */
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
err_t st_write_json(struct store *st, const char *key, st_json_body body, void *args, json_t **out)
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

/* ---- devices changing hands ---- */

/* Fill the device's columns of 't' for its event: from the row the write
 * kept ('seen'), else from 's' (emit_rebound's SELECT). */
static void rebound_cols(struct devtext *t, const struct devseen *seen, sqlite3_stmt *s)
{
    if (seen) {
        t->health = seen->health;
        t->numa = seen->numa;
        t->properties = seen->properties;
        t->physical = seen->physical;
        t->aliases = seen->aliases;
        t->resv_ns = seen->resv_ns;
        t->resv_name = seen->resv_name;
        return;
    }
    t->health = db_text(s, 0);
    t->numa = db_text(s, 1);
    t->properties = db_text(s, 2);
    t->resv_ns = db_text_or_null(s, 4);
    t->resv_name = db_text(s, 5);
    t->physical = db_text(s, 6);
    t->aliases = db_text(s, 7);
}

/* Its bindings row for the device's new holder: the pod 'by', in
 * 'container'; with none ('by' NULL), a 'gone' device's row goes and
 * another's keeps pod ''. Each written row is stamped with the next
 * revision. */
static err_t rebound_row(struct store *st, const char *resource, const char *id,
                         const struct pod_key *by, const char *container, bool gone)
{
    err_t rc;

    if (by) {
        rc = db_exec(st->commit.db,
                     "INSERT OR REPLACE INTO bindings(resource,device_id,namespace,pod,container,"
                     "revision) VALUES(?,?,?,?,?,?)",
                     "tttttu", resource, id, by->ns, by->name, container, changelog_next(&st->log));
        return rc ? rc : st_hist_bind(st, resource, id, by->ns, by->name, by->uid, container);
    }
    if (gone)
        rc = db_exec(st->commit.db, "DELETE FROM bindings WHERE resource=? AND device_id=?", "tt",
                     resource, id);
    else
        rc = db_exec(st->commit.db,
                     "UPDATE bindings SET namespace='',pod='',container='',revision=? WHERE "
                     "resource=? AND device_id=?",
                     "utt", changelog_next(&st->log), resource, id);
    return rc ? rc : st_hist_unbind(st, resource, id);
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
    rc = db_prep(
        st->commit.db, s,
        "SELECT health,numa,properties,removed,r.namespace,r.pod,d.physical,d.aliases "
        "FROM devices d LEFT JOIN reserved r ON r.resource=d.resource AND r.device_id=d.id WHERE "
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
 * again (by->seen). (UPDATE .. RETURNING would read it in the same
 * statement, but SQLite runs it through a temporary table, which costs more
 * than an UPDATE and a SELECT.) */
static err_t emit_rebound(struct store *st, const char *resource, const char *id,
                          const struct pod_key *by, const char *container)
{
    const struct devseen *seen = by ? devseen_find(by->seen, resource, id) : NULL;
    sqlite3_stmt *s = NULL;
    struct jsonw w = JSONW_INIT;
    bool row, gone;
    err_t rc = rebound_read(st, resource, id, seen, &s, &row);

    if (rc)
        goto out;
    gone = !by && (!row || sqlite3_column_int(s, 3) != 0);
    rc = rebound_row(st, resource, id, by, container, gone);
    if (rc || !row)
        goto out;
    rc = rebound_text(st, &w, resource, id, by, container, seen, s);
    db_done(s);
    s = NULL;
    if (rc)
        goto out;
    rc = changelog_emit_text(&st->log, gone ? "DELETED" : "MODIFIED", "Device", "", w.sb.buf,
                             w.sb.len);
    if (!rc && gone)
        rc = db_exec(st->commit.db, "DELETE FROM devices WHERE resource=? AND id=?", "tt", resource,
                     id);
out:
    db_done(s);
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
    id = st_key_split(k);
    if (bound)
        return emit_rebound(st, k, id, NULL, NULL);
    rc = st_devrow_get(st, k, id, &d, NULL);
    json_decref(d.numa);
    if (!rc && d.found && d.removed && !d.holder[0])
        return st_emit_device_deleted(st, k, id);
    if (!rc && d.found)
        return st_emit_device(st, "MODIFIED", k, id);
    return rc;
}

/* Emit the Device events for keys ("resource|id" -> container) that changed
 * between 'before' and 'after': MODIFIED for keys new in 'after', with
 * another value, or all of them when 'force'; for keys only in 'before',
 * DELETED when the device is removed and now unbound, else MODIFIED. With
 * 'bound', the maps are that pod's bindings before and after the write:
 * the bindings rows of the keys that changed are written here (it holds the
 * keys of 'after', nobody the others), the others are already right. */
err_t st_emit_key_changes(struct store *st, json_t *before, json_t *after, bool force,
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
                rc = emit_rebound(st, k, st_key_split(k), bound, json_string_value(v));
            else
                rc = st_emit_device(st, "MODIFIED", k, st_key_split(k));
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
