/* SPDX-License-Identifier: Apache-2.0 */
/* store_resv.c - reservations (pre-assignments): their state (Pending,
 * Bound, Conflict, with a message saying why) re-evaluated inside every
 * write that can change it, and the reservation writes. Device keys in the
 * in-memory maps are "resource|id". */
#define LOG_MOD "store"
#include "../common/common.h"
#include "../common/jsonx.h"
#include "store_rows.h"
#include "store_view.h"

#include <inttypes.h>

#define POD_REF_MAX 512  /* "ns/name" of a pod */
#define RESV_MSG_MAX 700 /* a reservation's message, NUL included */

static err_t emit_reservation(struct store *st, const char *type, const char *ns, const char *name)
{
    json_t *obj = NULL;
    err_t rc = st_reservation_json(st->commit.db, ns, name, &obj);

    if (!rc)
        rc = changelog_emit(&st->log, type, "Reservation", ns, obj);
    json_decref(obj);
    return rc;
}

/* Map key -> "" of the devices reserved for pod ns/name; new. */
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

/* ---- a reservation's state ---- */

/* The state a reservation has, or should have. */
struct resv_state {
    const char *state;      /* Pending, Bound or Conflict; static */
    char msg[RESV_MSG_MAX]; /* why Conflict, else "" */
};

static err_t add_key(struct store *st, const char *container, const char *resource, const char *id,
                     void *ctx)
{
    char buf[KEY_MAX + 80];

    (void)st;
    snprintf(buf, sizeof(buf), "%s:%s/%s", container, resource, id);
    return json_array_append_new(ctx, json_string(buf)) ? ERR_NOMEM : ERR_OK;
}

/* "container:resource/id" for each device of a containers array, sorted;
 * new, or NULL if out of memory. */
static json_t *container_keys(const json_t *containers)
{
    json_t *keys = json_array(), *out = NULL;

    if (keys && !st_each_device(NULL, containers, add_key, keys))
        out = jsonx_sorted_strings(keys, false, NULL);
    json_decref(keys);
    return out;
}

/* The strings of 'keys' joined by ", " into 'out', cut to 'cap' bytes. */
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

/* Why the reserved devices cannot be honoured now (st_each_device). */
struct blocker {
    const char *self;      /* "ns/name" of the reservation */
    struct resv_state *rs; /* its state: Conflict and the reason, once found */
};

static err_t check_reserved_device(struct store *st, const char *container, const char *res,
                                   const char *id, void *ctx)
{
    struct blocker *b = ctx;
    char *msg = b->rs->msg;
    struct devrow d;
    err_t rc = st_devrow_get(st, res, id, &d, NULL);

    (void)container;
    json_decref(d.numa);
    if (rc)
        return rc;
    if (!d.found || d.removed)
        snprintf(msg, RESV_MSG_MAX, "device %s %s is not registered", res, id);
    else if (strcmp(d.health, "Healthy") != 0)
        snprintf(msg, RESV_MSG_MAX, "device %s %s is Unhealthy", res, id);
    else if (d.holder[0] && strcmp(d.holder, b->self) != 0)
        snprintf(msg, RESV_MSG_MAX, "device %s %s is bound to %s", res, id, d.holder);
    return msg[0] ? ERR_CONFLICT : ERR_OK; /* ERR_CONFLICT only stops the walk */
}

/* The state of a reservation whose pod is not bound: Pending, or Conflict
 * when a reserved device cannot be had now. */
static err_t resv_unbound(struct store *st, const char *ns, const char *name,
                          const json_t *containers, struct resv_state *rs)
{
    char self[POD_REF_MAX];
    struct blocker b = {self, rs};
    err_t rc;

    str_join(self, sizeof(self), ns, '/', name);
    rc = st_each_device(st, containers, check_reserved_device, &b);
    rs->state = rs->msg[0] ? "Conflict" : "Pending";
    return rc == ERR_CONFLICT ? ERR_OK : rc;
}

/* The state of a reservation whose pod is bound to the devices of
 * 'bound' (its containers): Bound when they are the reserved ones. */
static err_t resv_bound(const json_t *bound, const json_t *containers, struct resv_state *rs)
{
    json_t *want = container_keys(containers), *have = container_keys(bound);
    char a[300], b[300];
    err_t rc = want && have ? ERR_OK : ERR_NOMEM;

    if (!rc && json_equal(want, have)) {
        rs->state = "Bound";
    } else if (!rc) {
        keys_text(have, a, sizeof(a));
        keys_text(want, b, sizeof(b));
        snprintf(rs->msg, sizeof(rs->msg), "pod is bound to [%s], pre-assigned [%s]", a, b);
        rs->state = "Conflict";
    }
    json_decref(want);
    json_decref(have);
    return rc;
}

/* The state the reservation of pod ns/name for 'containers' should have now. */
static err_t resv_compute(struct store *st, const char *ns, const char *name,
                          const json_t *containers, struct resv_state *rs)
{
    json_t *pod = NULL;
    err_t rc = st_pod_json(st->commit.db, ns, name, &pod);

    rs->state = "Pending";
    rs->msg[0] = '\0';
    if (rc == ERR_NOTFOUND)
        return resv_unbound(st, ns, name, containers, rs);
    if (!rc)
        rc = resv_bound(json_object_get(pod, "containers"), containers, rs);
    json_decref(pod);
    return rc;
}

/* A reservation's row as its refresh reads it. */
struct resv_row {
    char state[16];         /* its state */
    char msg[RESV_MSG_MAX]; /* its message */
    json_t *containers;     /* its containers; new */
};

/* Reservation ns/name into *r; ERR_NOTFOUND without one. */
static err_t resv_row_get(struct store *st, const char *ns, const char *name, struct resv_row *r)
{
    sqlite3_stmt *s = NULL;
    err_t rc = db_row(st->commit.db, &s,
                      "SELECT state,message,containers FROM reservations WHERE namespace=? AND "
                      "name=?",
                      "tt", ns, name);

    if (rc)
        return rc;
    str_copy(r->state, sizeof(r->state), db_text(s, 0));
    str_copy(r->msg, sizeof(r->msg), db_text(s, 1));
    r->containers = db_json(s, 2);
    db_done(s);
    return ERR_OK;
}

err_t st_resv_refresh(struct store *st, const char *ns, const char *name)
{
    struct resv_row r = {.containers = NULL};
    struct resv_state rs;
    err_t rc = resv_row_get(st, ns, name, &r);

    if (rc == ERR_NOTFOUND)
        return ERR_OK;
    if (rc)
        return rc;
    rc = resv_compute(st, ns, name, r.containers, &rs);
    if (rc || (strcmp(rs.state, r.state) == 0 && strcmp(rs.msg, r.msg) == 0))
        goto out;
    rc = db_exec(st->commit.db,
                 "UPDATE reservations SET state=?,message=?,revision=? WHERE namespace=? AND "
                 "name=?",
                 "ttutt", rs.state, rs.msg, changelog_next(&st->log), ns, name);
    if (!rc)
        rc = emit_reservation(st, "MODIFIED", ns, name);
out:
    json_decref(r.containers);
    return rc;
}

err_t st_resv_refresh_all(struct store *st)
{
    sqlite3_stmt *s = NULL;
    json_t *pods = json_array(), *p;
    size_t i;
    bool row;
    err_t rc = pods ? db_prep(st->commit.db, &s, "SELECT namespace||'/'||name FROM reservations",
                              NULL)
                    : ERR_NOMEM;
    char ref[POD_REF_MAX];

    while (!rc) {
        rc = db_step(st->commit.db, s, &row);
        if (rc || !row)
            break;
        if (json_array_append_new(pods, json_string(db_text(s, 0))))
            rc = ERR_NOMEM;
    }
    db_done(s);
    /* "ns/name": a namespace has no '/' */
    json_array_foreach(rc ? NULL : pods, i, p) {
        str_copy(ref, sizeof(ref), json_string_value(p));
        *strchr(ref, '/') = '\0';
        rc = st_resv_refresh(st, ref, ref + strlen(ref) + 1);
        if (rc)
            break;
    }
    json_decref(pods);
    return rc;
}

/* ---- putting one ---- */

/* Why a device cannot be reserved for pod 'self' (st_each_device). */
struct claim {
    const char *self; /* "ns/name" of the reservation */
    struct error *e;  /* the reason of a refusal */
};

/* Who holds device 'resource' 'id' by the rows of 'table' (bindings or
 * reserved): "ns/pod" into 'who' (POD_REF_MAX bytes), "" for nobody (a
 * let-go device's bindings row has pod ''; no reserved row has). */
static err_t holder_get(struct store *st, const char *table, const char *resource, const char *id,
                        char *who)
{
    char sql[160];
    sqlite3_stmt *s = NULL;
    bool row = false;
    err_t rc;

    snprintf(sql, sizeof(sql),
             "SELECT namespace||'/'||pod FROM %s WHERE resource=? AND device_id=? AND pod<>''",
             table);
    who[0] = '\0';
    rc = db_prep(st->commit.db, &s, sql, "tt", resource, id);
    if (rc)
        return rc;
    rc = db_step(st->commit.db, s, &row);
    if (!rc && row)
        str_copy(who, POD_REF_MAX, db_text(s, 0));
    db_done(s);
    return rc;
}

/* ERR_CONFLICT when the device is bound to or reserved for another pod. */
static err_t check_claim(struct store *st, const char *container, const char *res, const char *id,
                         void *ctx)
{
    static const char *const tables[] = {"bindings", "reserved"};
    static const char *const what[] = {"bound to", "reserved for"};
    const struct claim *cl = ctx;
    char who[POD_REF_MAX];
    size_t i;
    err_t rc;

    (void)container;
    for (i = 0; i < ARRAY_SIZE(tables); i++) {
        rc = holder_get(st, tables[i], res, id, who);
        if (rc)
            return rc;
        if (who[0] && strcmp(who, cl->self) != 0)
            return errorf(cl->e, ERR_CONFLICT, "device %s %s is %s pod %s", res, id, what[i], who);
    }
    return ERR_OK;
}

/* The topology of device group 'g' (of a reservation), as a bind stores a
 * pod's: the union of its devices' NUMA nodes, from the devices registered
 * now (one not registered yet adds none). */
static err_t group_topology(struct store *st, json_t *g)
{
    const char *r = json_string_value(json_object_get(g, "resourceName"));
    json_t *numa = json_array(), *id;
    struct devrow d;
    size_t k;
    err_t rc = numa ? ERR_OK : ERR_NOMEM;

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
    return rc;
}

/* Sort the ids of every group of 'containers' in place and add its
 * topology. */
static err_t resv_groups(struct store *st, json_t *containers)
{
    json_t *c, *g;
    size_t i, j;
    err_t rc;

    json_array_foreach(containers, i, c) {
        json_array_foreach(json_object_get(c, "devices"), j, g) {
            json_object_set_new(g, "deviceIds",
                                jsonx_sorted_strings(json_object_get(g, "deviceIds"), false, NULL));
            rc = group_topology(st, g);
            if (rc)
                return rc;
        }
    }
    return ERR_OK;
}

/* Check each reserved device of 'in' is not bound or reserved elsewhere;
 * on ERR_OK *out is the stored form (new): ids sorted, topology added. */
static err_t resv_check(struct store *st, const char *ns, const char *name, const json_t *in,
                        struct error *e, json_t **out)
{
    char self[POD_REF_MAX];
    struct claim cl = {self, e};
    json_t *res;
    err_t rc;

    str_join(self, sizeof(self), ns, '/', name);
    rc = st_each_device(st, in, check_claim, &cl);
    if (rc)
        return rc;
    res = json_deep_copy(in);
    if (!res)
        return ERR_NOMEM;
    return st_map_out(resv_groups(st, res), res, out);
}

static err_t insert_reserved(struct store *st, const char *container, const char *resource,
                             const char *id, void *ctx)
{
    const struct store_pod *pod = ctx;

    (void)container;
    return db_exec(st->commit.db,
                   "INSERT OR IGNORE INTO reserved(resource,device_id,namespace,pod) "
                   "VALUES(?,?,?,?)",
                   "tttt", resource, id, pod->ns, pod->name);
}

/* Write the reservation of pod ns/name ('stored', as 'text'), new or not
 * ('exists'), its reserved rows and their devices' events. */
static err_t resv_write(struct store *st, const struct store_pod *pod, const json_t *stored,
                        const char *text, bool exists)
{
    struct store_pod owner = *pod;
    json_t *before = NULL, *after = NULL;
    struct resv_state rs;
    err_t rc = pod_reserved(st, pod->ns, pod->name, &before);

    if (rc)
        goto out;
    rc = db_exec(st->commit.db, "DELETE FROM reserved WHERE namespace=? AND pod=?", "tt", pod->ns,
                 pod->name);
    if (rc)
        goto out;
    rc = st_each_device(st, stored, insert_reserved, &owner);
    if (rc)
        goto out;
    rc = resv_compute(st, pod->ns, pod->name, stored, &rs);
    if (rc)
        goto out;
    rc = db_exec(st->commit.db,
                 "INSERT OR REPLACE INTO reservations(namespace,name,containers,state,message,"
                 "revision) VALUES(?,?,?,?,?,?)",
                 "tttttu", pod->ns, pod->name, text, rs.state, rs.msg, changelog_next(&st->log));
    if (rc)
        goto out;
    rc = emit_reservation(st, exists ? "MODIFIED" : "ADDED", pod->ns, pod->name);
    if (rc)
        goto out;
    rc = pod_reserved(st, pod->ns, pod->name, &after);
    if (!rc)
        rc = st_emit_key_changes(st, before, after, false, NULL);
out:
    json_decref(before);
    json_decref(after);
    return rc;
}

/* A reservation put as st_write_json() runs it. */
struct resv_put {
    struct store_pod pod;     /* the pod it is for (no uid) */
    const json_t *containers; /* validated */
    struct error *e;          /* why it failed */
    struct store_outcome did; /* what it did */
};

/* The canonical text of the containers of reservation ns/name, or NULL
 * (*text) when there is none. */
static err_t old_text(struct store *st, const struct store_pod *pod, char **text)
{
    json_t *old = NULL;
    err_t rc = st_reservation_json(st->commit.db, pod->ns, pod->name, &old);

    *text = NULL;
    if (rc)
        return rc;
    *text = jsonx_dumps(json_object_get(old, "containers"));
    json_decref(old);
    return *text ? ERR_OK : ERR_NOMEM;
}

static err_t resv_put_run(struct store *st, void *args, json_t **obj)
{
    struct resv_put *a = args;
    json_t *stored = NULL;
    char *text = NULL, *was = NULL;
    err_t rc = resv_check(st, a->pod.ns, a->pod.name, a->containers, a->e, &stored);

    if (rc)
        return rc;
    text = jsonx_dumps(stored);
    rc = text ? old_text(st, &a->pod, &was) : ERR_NOMEM;
    a->did.created = rc == ERR_NOTFOUND;
    if (rc == ERR_NOTFOUND)
        rc = ERR_OK;
    if (rc)
        goto out;
    a->did.changed = !was || strcmp(was, text) != 0;
    if (a->did.changed)
        rc = resv_write(st, &a->pod, stored, text, !a->did.created);
    else
        rc = st_resv_refresh(st, a->pod.ns, a->pod.name);
    if (!rc)
        rc = st_reservation_json(st->commit.db, a->pod.ns, a->pod.name, obj);
out:
    json_decref(stored);
    free(text);
    free(was);
    return rc;
}

err_t store_reservation_put(struct store *st, const char *ns, const char *name,
                            const json_t *containers, struct error *e, json_t **out,
                            struct store_outcome *did)
{
    struct resv_put a = {{ns, name, NULL}, containers, e, {false, false}};
    err_t rc = st_write_json(st, "reservation", resv_put_run, &a, out);

    if (!rc)
        *did = a.did;
    return rc;
}

/* ---- deleting one ---- */

struct resv_delete {
    const char *ns, *name; /* the reservation */
    uint64_t rev;          /* its revision as a precondition, or 0 */
    struct error *e;       /* why it failed */
};

/* Emit DELETED for the reservation, with its last state in *obj (new),
 * when it is there and of the revision the delete requires. */
static err_t resv_deleted(struct store *st, const struct resv_delete *a, json_t **obj)
{
    uint64_t was;
    err_t rc = st_reservation_json(st->commit.db, a->ns, a->name, obj);

    if (rc == ERR_NOTFOUND)
        return errorf(a->e, ERR_NOTFOUND, "reservation %s/%s not found", a->ns, a->name);
    if (rc)
        return rc;
    was = (uint64_t)json_integer_value(json_object_get(*obj, "revision"));
    if (a->rev && a->rev != was)
        return errorf(a->e, ERR_CONFLICT,
                      "reservation %s/%s has revision %" PRIu64 ", not %" PRIu64
                      " (the precondition's)",
                      a->ns, a->name, was, a->rev);
    if (json_object_set_new(*obj, "revision", json_integer((json_int_t)changelog_next(&st->log))))
        return ERR_NOMEM;
    return changelog_emit(&st->log, "DELETED", "Reservation", a->ns, *obj);
}

static err_t resv_delete_run(struct store *st, void *args, json_t **obj)
{
    struct resv_delete *a = args;
    json_t *before = NULL, *none = json_object();
    err_t rc = none ? resv_deleted(st, a, obj) : ERR_NOMEM;

    if (rc)
        goto out;
    rc = pod_reserved(st, a->ns, a->name, &before);
    if (rc)
        goto out;
    rc = db_exec(st->commit.db, "DELETE FROM reserved WHERE namespace=? AND pod=?", "tt", a->ns,
                 a->name);
    if (rc)
        goto out;
    rc = db_exec(st->commit.db, "DELETE FROM reservations WHERE namespace=? AND name=?", "tt",
                 a->ns, a->name);
    if (!rc)
        rc = st_emit_key_changes(st, before, none, false, NULL);
out:
    json_decref(before);
    json_decref(none);
    return rc;
}

err_t store_reservation_delete(struct store *st, const char *ns, const char *name, uint64_t rev,
                               struct error *e, json_t **out)
{
    struct resv_delete a = {ns, name, rev, e};

    return st_write_json(st, "reservation", resv_delete_run, &a, out);
}
