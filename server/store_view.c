/* SPDX-License-Identifier: Apache-2.0 */
/* store_view.c - rows to the JSON shapes of docs/API.md, and the reads:
 * lists, single objects, the feed's snapshot and its catch-up from the
 * change log. No write is here. */
#define LOG_MOD "store"
#include "../common/common.h"
#include "../common/jsonx.h"
#include "../common/strbuf.h"
#include "store_int.h"
#include "store_view.h"

#include <assert.h>
#include <ctype.h>

/* A device's revision is the newer of its row's and its bindings row's (schema
 * 3: a let-go device keeps its bindings row, with pod ''). */
#define DEVICE_VIEW_SQL                                                                            \
    "SELECT d.resource,d.id,d.health,d.numa,d.properties,max(d.revision,ifnull(b.revision,0)),"    \
    "NULLIF(b.namespace,''),NULLIF(b.pod,''),NULLIF(b.container,''),p.uid,r.namespace,r.pod,"      \
    "d.physical,d.aliases,b.claim "                                                                \
    "FROM devices d LEFT JOIN bindings b ON b.resource=d.resource AND b.device_id=d.id "           \
    "LEFT JOIN pods p ON p.namespace=b.namespace AND p.name=b.pod "                                \
    "LEFT JOIN reserved r ON r.resource=d.resource AND r.device_id=d.id "

/* ---- objects ---- */

json_t *st_wrap(const char *key, json_t *list, uint64_t rev)
{
    json_t *o;

    if (!list)
        return NULL;
    o = json_object();
    if (!o || json_object_set_new(o, key, list) ||
        json_object_set_new(o, "revision", json_integer((json_int_t)rev))) {
        json_decref(o);
        return NULL;
    }
    return o;
}

json_t *st_topology(const json_t *numa_ids)
{
    json_t *nodes = json_array();
    json_t *v;
    size_t i;

    json_array_foreach(numa_ids, i, v) {
        json_array_append_new(nodes, json_pack("{s:O}", "ID", v));
    }
    return json_pack("{s:o}", "nodes", nodes);
}

/* Run 'sql' bound to (a, b) and convert its one row; ERR_NOTFOUND without one. */
static err_t one_row(sqlite3 *db, const char *sql, json_t *(*conv)(sqlite3_stmt *), const char *a,
                     const char *b, json_t **out)
{
    sqlite3_stmt *s = NULL;
    err_t rc = db_row(db, &s, sql, "tt", a, b);

    if (rc)
        return rc;
    *out = conv(s);
    if (!*out)
        rc = ERR_NOMEM;
    db_done(s);
    return rc;
}

static json_t *device_row(sqlite3_stmt *s)
{
    json_t *numa = db_json(s, 3);
    json_t *holder = json_null(), *resv = json_null();
    json_t *d;

    const char *physical = db_text(s, 12);

    if (sqlite3_column_type(s, 6) != SQLITE_NULL)
        holder = st_holder_json(db_text(s, 6), db_text(s, 7), db_text(s, 9), db_text(s, 8),
                                db_text(s, 14));
    if (sqlite3_column_type(s, 10) != SQLITE_NULL)
        resv = json_pack("{s:s,s:s}", "namespace", db_text(s, 10), "name", db_text(s, 11));
    d = json_pack("{s:s,s:s,s:s,s:o,s:s,s:o,s:o,s:o,s:o,s:I}", "resourceName", db_text(s, 0), "id",
                  db_text(s, 1), "physical", physical[0] ? physical : db_text(s, 1), "aliases",
                  db_json(s, 13), "health", db_text(s, 2), "topology", st_topology(numa),
                  "properties", db_json(s, 4), "holder", holder, "reservedFor", resv, "revision",
                  (json_int_t)sqlite3_column_int64(s, 5));
    json_decref(numa);
    return d;
}

err_t st_device_json(sqlite3 *db, const char *a, const char *b, json_t **out)
{
    return one_row(db, DEVICE_VIEW_SQL "WHERE d.resource=? AND d.id=?", device_row, a, b, out);
}

/* "[0,1]" -> {"nodes":[{"ID":0},{"ID":1}]} as st_topology() gives it; any
 * other stored shape goes through jansson. */
static void topology_text(struct jsonw *w, const char *numa)
{
    const char *p = numa + 1, *num;
    json_t *ids, *topo;

    if (numa[0] != '[')
        goto slow;
    while (*p != ']') {
        if (*p == '-')
            p++;
        if (!isdigit((unsigned char)*p))
            goto slow;
        while (isdigit((unsigned char)*p))
            p++;
        if (*p == ',' && p[1] != ']')
            p++;
        else if (*p != ']')
            goto slow;
    }
    if (p[1] != '\0')
        goto slow;
    jsonw_lit(w, "{\"nodes\":[");
    for (p = numa + 1; *p != ']';) {
        num = p;
        p += strspn(p, "-0123456789");
        jsonw_lit(w, num == numa + 1 ? "{\"ID\":" : ",{\"ID\":");
        jsonw_raw(w, num, (size_t)(p - num));
        jsonw_lit(w, "}");
        if (*p == ',')
            p++;
    }
    jsonw_lit(w, "]}");
    return;
slow:
    ids = json_loads(numa, JSON_DECODE_ANY, NULL);
    topo = st_topology(ids ? ids : json_array());
    jsonw_json(w, topo);
    json_decref(topo);
    json_decref(ids);
}

/* The start of a pod reference {"namespace":..,"name":.. left open for
 * more fields. */
static void pod_ref(struct jsonw *w, const char *ns, const char *name)
{
    jsonw_lit(w, "{\"namespace\":");
    jsonw_str(w, ns);
    jsonw_lit(w, ",\"name\":");
    jsonw_str(w, name);
}

/* ',"claim":{"namespace":..,"name":..}' of a DRA holder ('claim' is
 * "namespace/name"); nothing for a device-plugin one ('claim' NULL or ""). */
static void claim_text(struct jsonw *w, const char *claim)
{
    const char *slash = claim ? strchr(claim, '/') : NULL;
    char ns[256];

    if (!slash)
        return;
    snprintf(ns, sizeof(ns), "%.*s", (int)(slash - claim), claim);
    jsonw_lit(w, ",\"claim\":{\"namespace\":");
    jsonw_str(w, ns);
    jsonw_lit(w, ",\"name\":");
    jsonw_str(w, slash + 1);
    jsonw_lit(w, "}");
}

json_t *st_holder_json(const char *ns, const char *name, const char *uid, const char *container,
                       const char *claim)
{
    const char *slash = claim ? strchr(claim, '/') : NULL;
    json_t *h = json_pack("{s:s,s:s,s:s,s:s}", "namespace", ns, "name", name, "uid", uid,
                          "container", container);

    if (h && slash &&
        json_object_set_new(h, "claim",
                            json_pack("{s:s%,s:s}", "namespace", claim, (size_t)(slash - claim),
                                      "name", slash + 1))) {
        json_decref(h);
        return NULL;
    }
    return h;
}

void st_devtext(struct jsonw *w, const struct devtext *d)
{
    jsonw_lit(w, "{\"resourceName\":");
    jsonw_str(w, d->resource);
    jsonw_lit(w, ",\"id\":");
    jsonw_str(w, d->id);
    jsonw_lit(w, ",\"physical\":");
    jsonw_str(w, d->physical && d->physical[0] ? d->physical : d->id);
    jsonw_lit(w, ",\"aliases\":");
    jsonw_lit(w, d->aliases && d->aliases[0] ? d->aliases : "[]"); /* as stored, sorted */
    jsonw_lit(w, ",\"health\":");
    jsonw_str(w, d->health);
    jsonw_lit(w, ",\"topology\":");
    topology_text(w, d->numa);
    jsonw_lit(w, ",\"properties\":");
    /* as stored: written by jsonx_dumps, it is already what loading and
     * serialising it again would give */
    jsonw_lit(w, d->properties[0] ? d->properties : "{}");
    jsonw_lit(w, ",\"holder\":");
    if (d->holder_ns) {
        pod_ref(w, d->holder_ns, d->holder_name);
        jsonw_lit(w, ",\"uid\":");
        jsonw_str(w, d->holder_uid);
        jsonw_lit(w, ",\"container\":");
        jsonw_str(w, d->holder_container);
        claim_text(w, d->holder_claim);
        jsonw_lit(w, "}");
    } else {
        jsonw_lit(w, "null");
    }
    jsonw_lit(w, ",\"reservedFor\":");
    if (d->resv_ns) {
        pod_ref(w, d->resv_ns, d->resv_name);
        jsonw_lit(w, "}");
    } else {
        jsonw_lit(w, "null");
    }
    jsonw_lit(w, ",\"revision\":");
    jsonw_u64(w, d->revision);
    jsonw_lit(w, "}");
}

err_t st_device_text(sqlite3 *db, const char *resource, const char *id, uint64_t rev,
                     struct jsonw *w)
{
    sqlite3_stmt *s = NULL;
    err_t rc = db_row(db, &s, DEVICE_VIEW_SQL "WHERE d.resource=? AND d.id=?", "tt", resource, id);

    if (rc)
        return rc;
    st_devtext(w, &(struct devtext){
                      .resource = db_text(s, 0),
                      .id = db_text(s, 1),
                      .health = db_text(s, 2),
                      .numa = db_text(s, 3),
                      .properties = db_text(s, 4),
                      .revision = rev ? rev : (uint64_t)sqlite3_column_int64(s, 5),
                      .holder_ns = db_text_or_null(s, 6),
                      .holder_name = db_text(s, 7),
                      .holder_container = db_text(s, 8),
                      .holder_uid = db_text(s, 9),
                      .resv_ns = db_text_or_null(s, 10),
                      .resv_name = db_text(s, 11),
                      .physical = db_text(s, 12),
                      .aliases = db_text(s, 13),
                      .holder_claim = db_text(s, 14),
                  });
    rc = jsonw_done(w);
    db_done(s);
    return rc;
}

void st_pod_text(struct jsonw *w, const char *ns, const char *name, const char *uid,
                 const char *containers, uint64_t rev)
{
    jsonw_lit(w, "{\"name\":");
    jsonw_str(w, name);
    jsonw_lit(w, ",\"namespace\":");
    jsonw_str(w, ns);
    jsonw_lit(w, ",\"uid\":");
    jsonw_str(w, uid);
    jsonw_lit(w, ",\"containers\":");
    jsonw_lit(w, containers[0] ? containers : "{}");
    jsonw_lit(w, ",\"revision\":");
    jsonw_u64(w, rev);
    jsonw_lit(w, "}");
}

static json_t *pod_row(sqlite3_stmt *s)
{
    return json_pack("{s:s,s:s,s:s,s:o,s:I}", "name", db_text(s, 1), "namespace", db_text(s, 0),
                     "uid", db_text(s, 2), "containers", db_json(s, 3), "revision",
                     (json_int_t)sqlite3_column_int64(s, 4));
}

#define POD_SQL "SELECT namespace,name,uid,containers,revision FROM pods "

err_t st_pod_json(sqlite3 *db, const char *a, const char *b, json_t **out)
{
    return one_row(db, POD_SQL "WHERE namespace=? AND name=?", pod_row, a, b, out);
}

static json_t *reservation_row(sqlite3_stmt *s)
{
    return json_pack("{s:s,s:s,s:o,s:s,s:s,s:I}", "namespace", db_text(s, 0), "name", db_text(s, 1),
                     "containers", db_json(s, 2), "state", db_text(s, 3), "message", db_text(s, 4),
                     "revision", (json_int_t)sqlite3_column_int64(s, 5));
}

#define RESV_SQL "SELECT namespace,name,containers,state,message,revision FROM reservations "

err_t st_reservation_json(sqlite3 *db, const char *a, const char *b, json_t **out)
{
    return one_row(db, RESV_SQL "WHERE namespace=? AND name=?", reservation_row, a, b, out);
}

/* ---- lists and objects, each in one read transaction ---- */

/* Run 'stmt' and collect 'conv' of every row into a new array. */
static err_t collect(sqlite3 *db, sqlite3_stmt *stmt, json_t *(*conv)(sqlite3_stmt *), json_t **out)
{
    json_t *arr = json_array();
    bool row;
    err_t rc = arr ? ERR_OK : ERR_NOMEM;

    while (!rc) {
        rc = db_step(db, stmt, &row);
        if (rc || !row)
            break;
        if (json_array_append_new(arr, conv(stmt)))
            rc = ERR_NOMEM;
    }
    if (rc) {
        json_decref(arr);
        return rc;
    }
    *out = arr;
    return ERR_OK;
}

/* A list read: the rows of 'sql' bound to up to three texts (NULL binds
 * NULL), each converted by 'conv', answered as {key: [...], "revision": N}. */
struct list_read {
    const char *key;                  /* the answer's key */
    json_t *(*conv)(sqlite3_stmt *s); /* a row's object; new, or NULL if out of memory */
    const char *sql;                  /* the query */
    const char *fmt;                  /* "t" for each of its arguments, or NULL: none */
    const char *args[3];              /* its arguments, ?1..?3 */
};

/* One read transaction: the revision, then the list. */
static err_t read_list(struct store *st, const struct list_read *q, json_t **out)
{
    sqlite3 *db = NULL;
    sqlite3_stmt *s = NULL;
    json_t *list = NULL;
    uint64_t rev = 0;
    err_t rc = db_read_begin(&st->readers, &db);

    if (rc)
        return rc;
    rc = changelog_db_revision(&st->log, db, &rev);
    if (rc)
        goto out;
    rc = db_prep(db, &s, q->sql, q->fmt, q->args[0], q->args[1], q->args[2]);
    if (!rc)
        rc = collect(db, s, q->conv, &list);
    db_done(s);
out:
    db_read_end(&st->readers, db);
    if (rc)
        return rc;
    *out = st_wrap(q->key, list, rev);
    return *out ? ERR_OK : ERR_NOMEM;
}

err_t store_pods_list(struct store *st, const char *ns, const char *resource, json_t **out)
{
    static const char sql[] = POD_SQL
        "WHERE (?1 IS NULL OR namespace=?1) AND (?2 IS NULL OR (namespace,name) IN "
        "(SELECT namespace,pod FROM bindings WHERE resource=?2)) ORDER BY namespace,name";

    return read_list(
        st, &(struct list_read){"podResources", pod_row, sql, "tt", {ns, resource, NULL}}, out);
}

err_t store_devices_list(struct store *st, const char *resource, const char *health, bool free_only,
                         json_t **out)
{
    static const char sql[] = DEVICE_VIEW_SQL "WHERE (?1 IS NULL OR d.resource=?1) AND "
                                              "(?2 IS NULL OR d.health=?2) AND (?3 IS NULL OR "
                                              "(ifnull(b.pod,'')='' AND r.pod IS NULL)) "
                                              "ORDER BY d.resource,d.id";

    return read_list(
        st,
        &(struct list_read){
            "devices", device_row, sql, "ttt", {resource, health, free_only ? "1" : NULL}},
        out);
}

err_t store_reservations_list(struct store *st, json_t **out)
{
    return read_list(st,
                     &(struct list_read){"reservations",
                                         reservation_row,
                                         RESV_SQL "ORDER BY namespace,name",
                                         NULL,
                                         {NULL, NULL, NULL}},
                     out);
}

/* The read of one object wrapped as {key: obj, "revision": N}. */
static err_t read_one(struct store *st, const char *key,
                      err_t (*view)(sqlite3 *, const char *, const char *, json_t **),
                      const char *a, const char *b, json_t **out)
{
    sqlite3 *db = NULL;
    json_t *obj = NULL;
    uint64_t rev = 0;
    err_t rc = db_read_begin(&st->readers, &db);

    if (rc)
        return rc;
    rc = changelog_db_revision(&st->log, db, &rev);
    if (!rc)
        rc = view(db, a, b, &obj);
    db_read_end(&st->readers, db);
    if (rc)
        return rc;
    *out = st_wrap(key, obj, rev);
    return *out ? ERR_OK : ERR_NOMEM;
}

err_t store_pod_get(struct store *st, const char *ns, const char *name, json_t **out)
{
    return read_one(st, "podResources", st_pod_json, ns, name, out);
}

err_t store_reservation_get(struct store *st, const char *ns, const char *name, json_t **out)
{
    return read_one(st, "reservation", st_reservation_json, ns, name, out);
}

static json_t *allocatable_row(sqlite3_stmt *s)
{
    json_t *numa = db_json(s, 2);
    json_t *d = json_pack("{s:s,s:[s],s:o}", "resourceName", db_text(s, 0), "deviceIds",
                          db_text(s, 1), "topology", st_topology(numa));

    json_decref(numa);
    return d;
}

/* A copy of 'arr' (NULL: none yet), or a new empty array; under st->amu. */
static json_t *rest_copy(const json_t *arr)
{
    return arr ? json_deep_copy(arr) : json_array();
}

err_t store_allocatable(struct store *st, json_t **out)
{
    json_t *cpu_ids, *memory;
    err_t rc = read_list(st,
                         &(struct list_read){"devices",
                                             allocatable_row,
                                             /* DRA devices are not the kubelet's to
                                                allocate: as GetAllocatableResources */
                                             "SELECT resource,id,numa FROM devices WHERE "
                                             "health='Healthy' AND removed=0 AND resource NOT IN "
                                             "(SELECT name FROM resources WHERE dra=1) ORDER BY "
                                             "resource,id",
                                             NULL,
                                             {NULL, NULL, NULL}},
                         out);

    if (rc)
        return rc;
    /* none in api mode, or before the kubelet's first answer */
    pthread_mutex_lock(&st->amu);
    cpu_ids = rest_copy(st->cpu_ids);
    memory = rest_copy(st->memory);
    pthread_mutex_unlock(&st->amu);
    if (json_object_set_new(*out, "cpuIds", cpu_ids) ||
        json_object_set_new(*out, "memory", memory)) {
        json_decref(*out);
        return ERR_NOMEM;
    }
    return ERR_OK;
}

/* ---- /metrics ---- */

/* Append the (resource, health, count) rows of 's' to out->devices. */
static err_t stats_devices(sqlite3 *db, sqlite3_stmt *s, struct store_stats *out)
{
    size_t room = 0;
    bool row;
    err_t rc;

    for (;;) {
        rc = db_step(db, s, &row);
        if (rc || !row)
            return rc;
        if (out->ndevices == room) {
            struct store_dev_count *d;

            room = room ? 2 * room : 8;
            d = realloc(out->devices, room * sizeof(*d));
            if (!d)
                return ERR_NOMEM;
            out->devices = d;
        }
        out->devices[out->ndevices].resource = strdup(db_text(s, 0));
        if (!out->devices[out->ndevices].resource)
            return ERR_NOMEM;
        str_copy(out->devices[out->ndevices].health, sizeof(out->devices->health), db_text(s, 1));
        out->devices[out->ndevices++].count = sqlite3_column_int64(s, 2);
    }
}

/* The counts of one read transaction on 'db'. */
static err_t stats_read(sqlite3 *db, struct store_stats *out)
{
    sqlite3_stmt *s = NULL;
    bool row = false;
    err_t rc = db_prep(db, &s,
                       "SELECT (SELECT count(*) FROM pods),"
                       "(SELECT count(*) FROM bindings WHERE pod<>'')",
                       NULL);

    if (rc)
        return rc;
    rc = db_step(db, s, &row);
    if (!rc && row) {
        out->pods = sqlite3_column_int64(s, 0);
        out->bound_devices = sqlite3_column_int64(s, 1);
    }
    db_done(s);
    if (rc)
        return rc;
    rc = db_prep(db, &s,
                 "SELECT resource,health,count(*) FROM devices GROUP BY resource,health "
                 "ORDER BY resource,health",
                 NULL);
    if (rc)
        return rc;
    rc = stats_devices(db, s, out);
    db_done(s);
    return rc;
}

err_t store_stats(struct store *st, struct store_stats *out)
{
    struct commit_counts n;
    sqlite3 *db = NULL;
    err_t rc;

    memset(out, 0, sizeof(*out));
    rc = db_read_begin(&st->readers, &db);
    if (rc)
        return rc;
    rc = stats_read(db, out);
    db_read_end(&st->readers, db);
    commit_counts(&st->commit, &n);
    out->commits = n.commits;
    out->writes = n.writes;
    out->checkpoints = n.checkpoints;
    return rc;
}

void store_stats_release(struct store_stats *s)
{
    size_t i;

    for (i = 0; i < s->ndevices; i++)
        free(s->devices[i].resource);
    free(s->devices);
    memset(s, 0, sizeof(*s));
}

/* ---- the feed's reads ---- */

err_t store_changes_after(struct store *st, uint64_t *cursor, const struct feed_filter *flt,
                          size_t limit, char **buf, size_t *len, size_t *cap)
{
    sqlite3 *db = NULL;
    err_t rc = db_read_begin(&st->readers, &db);

    if (rc)
        return rc;
    rc = changelog_read(&st->log, db, cursor, flt, limit, buf, len, cap);
    db_read_end(&st->readers, db);
    return rc;
}

/* Where each ADDED line of a snapshot is in the buffer, and its revision. */
struct snap_line {
    uint64_t rev; /* the object's revision */
    size_t off;   /* where its line starts in the buffer */
    size_t len;   /* its bytes, the newline included */
};

/* A snapshot being written: the caller's buffer and where its lines are. */
struct snap {
    struct strbuf sb;        /* the caller's growable buffer, while it is written */
    struct snap_line *lines; /* the lines appended */
    size_t n;                /* lines in 'lines' */
    size_t room;             /* slots allocated in 'lines' */
};

/* Room for one more line in sn->lines. */
static err_t snapshot_room(struct snap *sn)
{
    size_t room = sn->room ? 2 * sn->room : 64;
    struct snap_line *l;

    if (sn->n < sn->room)
        return ERR_OK;
    l = realloc(sn->lines, room * sizeof(*l));
    if (!l)
        return ERR_NOMEM;
    sn->lines = l;
    sn->room = room;
    return ERR_OK;
}

/* Append one ADDED line for 'obj' (steals it), and where it is. */
static err_t snapshot_line(json_t *obj, const char *kind, struct snap *sn)
{
    json_int_t rev = json_integer_value(json_object_get(obj, "revision"));
    json_t *ev = json_pack("{s:s,s:s,s:I,s:o}", "type", "ADDED", "kind", kind, "revision", rev,
                           "object", obj); /* 'obj' is the line's now */
    char *line = NULL;
    size_t n = 0, off = sn->sb.len;
    err_t rc = ERR_NOMEM;

    if (!ev)
        return ERR_NOMEM;
    line = jsonx_dumps_line(ev, &n);
    json_decref(ev);
    if (!line)
        goto out;
    rc = snapshot_room(sn);
    if (rc)
        goto out;
    rc = strbuf_add(&sn->sb, line, n);
    if (rc)
        goto out;
    sn->lines[sn->n++] = (struct snap_line){(uint64_t)rev, off, n};
out:
    free(line);
    return rc;
}

static int cmp_line_rev(const void *a, const void *b)
{
    uint64_t x = ((const struct snap_line *)a)->rev, y = ((const struct snap_line *)b)->rev;

    return x < y ? -1 : x > y;
}

/* Put the snapshot's lines (from sn->lines[0].off on) in revision order, as
 * every event of a watch is (docs/API.md, Change feed): an object's revision is that of
 * its last event, so no two are equal. */
static err_t snapshot_sort(struct snap *sn)
{
    size_t i, from, at = 0;
    char *tmp;

    for (i = 1; i < sn->n && sn->lines[i - 1].rev <= sn->lines[i].rev; i++)
        ;
    if (i >= sn->n)
        return ERR_OK; /* already in order (or fewer than two) */
    from = sn->lines[0].off;
    tmp = malloc(sn->sb.len - from);
    if (!tmp)
        return ERR_NOMEM;
    qsort(sn->lines, sn->n, sizeof(*sn->lines), cmp_line_rev);
    for (i = 0; i < sn->n; i++) {
        memcpy(tmp + at, sn->sb.buf + sn->lines[i].off, sn->lines[i].len);
        at += sn->lines[i].len;
    }
    memcpy(sn->sb.buf + from, tmp, at);
    free(tmp);
    return ERR_OK;
}

/* One kind of object a snapshot lists. */
struct snap_kind {
    const char *kind; /* the event kind */
    const char *sql;  /* selects the keys (namespace, name) or (resource, id) */
    err_t (*view)(sqlite3 *db, const char *a, const char *b, json_t **out); /* the object */
    bool namespaced; /* a namespace filter applies */
};

static const struct snap_kind snap_kinds[] = {
    {"PodResources", "SELECT namespace,name FROM pods ORDER BY namespace,name", st_pod_json, true},
    {"Device", "SELECT resource,id FROM devices ORDER BY resource,id", st_device_json, false},
    {"Reservation", "SELECT namespace,name FROM reservations ORDER BY namespace,name",
     st_reservation_json, true},
};

static err_t snapshot_kind(sqlite3 *db, const struct snap_kind *k, const struct feed_filter *flt,
                           struct snap *sn)
{
    sqlite3_stmt *stmt = NULL;
    json_t *obj;
    bool row;
    err_t rc = db_prep(db, &stmt, k->sql, NULL);

    while (!rc) {
        rc = db_step(db, stmt, &row);
        if (rc || !row)
            break;
        if (!feed_match(flt, k->kind, k->namespaced ? db_text(stmt, 0) : ""))
            continue;
        rc = k->view(db, db_text(stmt, 0), db_text(stmt, 1), &obj);
        if (!rc)
            rc = snapshot_line(obj, k->kind, sn);
    }
    db_done(stmt);
    return rc;
}

err_t store_snapshot(struct store *st, const struct feed_filter *flt, char **buf, size_t *len,
                     size_t *cap, uint64_t *rev)
{
    struct snap sn = {{*buf, *len, *cap}, NULL, 0, 0};
    sqlite3 *db = NULL;
    size_t i;
    err_t rc;

    assert(*len <= *cap && (*buf || *cap == 0));
    rc = db_read_begin(&st->readers, &db);
    if (rc)
        return rc;
    rc = changelog_db_revision(&st->log, db, rev);
    for (i = 0; !rc && i < ARRAY_SIZE(snap_kinds); i++)
        rc = snapshot_kind(db, &snap_kinds[i], flt, &sn);
    db_read_end(&st->readers, db);
    if (!rc)
        rc = snapshot_sort(&sn);
    *buf = sn.sb.buf;
    *len = sn.sb.len;
    *cap = sn.sb.cap;
    free(sn.lines);
    return rc;
}
