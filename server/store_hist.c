/* SPDX-License-Identifier: Apache-2.0 */
/* store_hist.c - binding and health history (schema/0004_history.sql,
 * 0007_history_fold.sql): the history and usage reads (each after the
 * binding changes committed so far are replayed), folding the intervals
 * the replay appended into the lookups, pruning, and the per-device
 * figures of /metrics. Not what writes the intervals (store_histw.c), nor
 * the change log (changelog.h). */
#define LOG_MOD "store"
#include "../common/common.h"
#include "store_int.h"
#include "store_view.h"

#include <inttypes.h>
#include <stdatomic.h>

/* ---- reads ---- */

/* Before a read: the binding operations committed so far applied
 * (st_hist_sync). When that write fails (logged by it), the read answers
 * from what is applied, and the failure is counted. */
static void read_sync(struct store *st)
{
    if (st_hist_sync(st))
        atomic_fetch_add_explicit(&st->hist_failures, 1, memory_order_relaxed);
}

/* A time column: an RFC 3339 string (no byte of it needs escaping), or
 * null for the end of an open interval. */
static void time_text(struct jsonw *w, sqlite3_stmt *s, int col)
{
    char buf[HISTQ_TIME_MAX + 2] = "\"";
    size_t n;

    if (sqlite3_column_type(s, col) == SQLITE_NULL ||
        sqlite3_column_int64(s, col) >= HIST_OPEN_MS) {
        jsonw_lit(w, "null");
        return;
    }
    histq_format_time(sqlite3_column_int64(s, col), buf + 1);
    n = strlen(buf);
    buf[n] = '"';
    jsonw_raw(w, buf, n + 1);
}

/* id,resource,device_id,namespace,name,uid,container,from_ms,to_ms */
static void bind_row(struct jsonw *w, sqlite3_stmt *s)
{
    static const char *const keys[] = {"{\"resourceName\":", ",\"deviceId\":", ",\"namespace\":",
                                       ",\"name\":",         ",\"uid\":",      ",\"container\":"};
    size_t i;

    for (i = 0; i < ARRAY_SIZE(keys); i++) {
        jsonw_lit(w, keys[i]);
        jsonw_str(w, db_text(s, (int)i + 1));
    }
    jsonw_lit(w, ",\"from\":");
    time_text(w, s, 7);
    jsonw_lit(w, ",\"to\":");
    time_text(w, s, 8);
    jsonw_lit(w, "}");
}

/* id,resource,device_id,from_ms,to_ms */
static void health_row(struct jsonw *w, sqlite3_stmt *s)
{
    jsonw_lit(w, "{\"resourceName\":");
    jsonw_str(w, db_text(s, 1));
    jsonw_lit(w, ",\"deviceId\":");
    jsonw_str(w, db_text(s, 2));
    jsonw_lit(w, ",\"health\":\"Unhealthy\",\"from\":");
    time_text(w, s, 3);
    jsonw_lit(w, ",\"to\":");
    time_text(w, s, 4);
    jsonw_lit(w, "}");
}

/* A pod's uid is its interval's, or in rows of earlier schemas its
 * hist_pod row's: the other is ''. */
#define BIND_COLS                                                                                  \
    "SELECT b.id,d.resource,d.device_id,p.namespace,p.name,p.uid||b.uid,b.container,b.from_ms,"    \
    "b.to_ms "

/* The device ids a name stands for: itself, and the devices that have or
 * had it as alias or physical id, recursively, through the aliases each
 * device found has too (a GPU's MIG device's replicas, a DRA MIG device
 * whose physical is its GPU's UUID). The queries below read the names
 * first (CROSS JOIN fixes the order): with "IN nm" the planner scans every
 * interval. */
#define NAMES_CTE                                                                                  \
    "WITH RECURSIVE nm(n) AS (SELECT ?1 UNION SELECT x.device_id FROM device_names x JOIN nm "     \
    "ON x.name=nm.n UNION SELECT j.value FROM nm JOIN devices d ON d.id=nm.n,"                     \
    "json_each(d.aliases) j) "
/* ?1 device, ?2 resource or NULL, [?3, ?4) the window, ?5 after, ?6 limit.
 * A device's intervals do not overlap: of those that start before the
 * window, only the last can reach into it. Those past the fold start after
 * every folded one. */
static const char by_device_sql[] = NAMES_CTE
    ",dv(id) AS (SELECT d.id FROM nm CROSS JOIN hist_dev d WHERE d.device_id=nm.n AND (?2 IS "
    "NULL OR d.resource=?2)),iv(id) AS (SELECT x.id FROM dv CROSS JOIN hist_ix_dev x ON "
    "x.dev=dv.id WHERE x.from_ms>=ifnull((SELECT max(y.from_ms) FROM hist_ix_dev y WHERE "
    "y.dev=dv.id AND y.from_ms<=?3),?3) AND x.from_ms<?4 UNION ALL SELECT t.id FROM hist_bind t "
    "WHERE t.id>" HIST_FOLDED " AND t.dev IN dv) " BIND_COLS
    "FROM iv CROSS JOIN hist_bind b ON b.id=iv.id JOIN hist_dev d ON d.id=b.dev JOIN hist_pod p "
    "ON p.id=b.pod WHERE b.from_ms<?4 AND b.to_ms>?3 AND +b.id>?5 ORDER BY b.from_ms,b.id LIMIT ?6";
/* The hist_pod rows of pod ?1/?2 and their intervals: folded, those of
 * each device it held in the span of its starts there
 * (schema/0009_history_pod_devices.sql), from the last of the device's
 * starting at or before the window (as by device), with the pod's own
 * kept; and those past the fold. */
static const char by_pod_sql[] =
    "WITH pp(id) AS (SELECT id FROM hist_pod WHERE namespace=?1 AND name=?2),iv(id,pod) AS ("
    "SELECT x.id,pd.pod FROM pp CROSS JOIN hist_pod_dev pd ON pd.pod=pp.id CROSS JOIN hist_ix_dev "
    "x ON x.dev=pd.dev WHERE x.from_ms>=max(pd.first_ms,ifnull((SELECT max(y.from_ms) FROM "
    "hist_ix_dev y WHERE y.dev=pd.dev AND y.from_ms<=?3),?3)) AND x.from_ms<=pd.last_ms AND "
    "x.from_ms<?4 UNION ALL SELECT t.id,t.pod FROM hist_bind t WHERE t.id>" HIST_FOLDED
    " AND t.pod IN pp) " BIND_COLS
    "FROM iv CROSS JOIN hist_bind b ON b.id=iv.id JOIN hist_dev d ON d.id=b.dev JOIN hist_pod p "
    "ON p.id=b.pod WHERE b.pod=iv.pod AND b.from_ms<?4 AND b.to_ms>?3 AND +b.id>?5 ORDER BY +b.id "
    "LIMIT ?6";
static const char health_sql[] = NAMES_CTE
    "SELECT h.id,d.resource,d.device_id,h.from_ms,h.to_ms FROM nm CROSS JOIN hist_dev d CROSS "
    "JOIN hist_health h ON h.dev=d.id WHERE d.device_id=nm.n AND (?2 IS NULL OR d.resource=?2) AND "
    "h.from_ms>=ifnull(("
    "SELECT max(x.from_ms) FROM hist_health x WHERE x.dev=d.id AND x.from_ms<=?3),?3) AND "
    "h.from_ms<?4 AND h.to_ms>?3 AND +h.id>?5 ORDER BY h.from_ms,h.id LIMIT ?6";
/* Each device's last interval starting at or before ?1 (ids grow with the
 * start: of a device's rows past the fold, the largest id). */
#define LAST_BEFORE(op)                                                                            \
    "tl(dev,id) AS MATERIALIZED (SELECT dev,max(id) FROM hist_bind WHERE id>" HIST_FOLDED          \
    " AND from_ms" op "?1 GROUP BY dev) "
#define LAST_JOIN(op)                                                                              \
    "FROM hist_dev d LEFT JOIN tl ON tl.dev=d.id JOIN hist_bind b ON b.id=ifnull(tl.id,(SELECT "   \
    "x.id FROM hist_ix_dev x WHERE x.dev=d.id AND x.from_ms" op "?1 ORDER BY x.from_ms DESC,x.id " \
    "DESC LIMIT 1)) "
/* ?1 at, ?2 resource or NULL. */
/* clang-format off */
static const char at_sql[] = "WITH " LAST_BEFORE("<=") BIND_COLS LAST_JOIN("<=")
    "JOIN hist_pod p ON p.id=b.pod WHERE (?2 IS NULL OR d.resource=?2) AND b.to_ms>?1 ORDER BY "
    "d.resource,d.device_id";
/* clang-format on */

/* Rows of 's' as {"intervals":[...]} into 'w', at most 'limit' of them;
 * one more row means more: "continue" is the id of the last one given.
 * Written as text, not built as jansson objects: an at= answer holds an
 * interval for every device. */
static err_t intervals(sqlite3 *db, sqlite3_stmt *s, void (*conv)(struct jsonw *, sqlite3_stmt *),
                       size_t limit, struct jsonw *w)
{
    uint64_t last = 0;
    size_t n = 0;
    bool row;
    err_t rc;

    jsonw_lit(w, "{\"intervals\":[");
    for (;;) {
        rc = db_step(db, s, &row);
        if (rc || !row || n == limit)
            break;
        last = (uint64_t)sqlite3_column_int64(s, 0);
        if (n++)
            jsonw_lit(w, ",");
        conv(w, s);
    }
    if (rc)
        return rc;
    jsonw_lit(w, "]");
    if (row) {
        jsonw_lit(w, ",\"continue\":\"");
        jsonw_u64(w, last);
        jsonw_lit(w, "\"");
    }
    jsonw_lit(w, "}");
    return jsonw_done(w);
}

/* A time asked for, at most HIST_OPEN_MS - 1: an open interval's end is
 * after it. */
static int64_t before_open(int64_t ms)
{
    return ms < HIST_OPEN_MS ? ms : HIST_OPEN_MS - 1;
}

err_t store_history_text(struct store *st, const struct histq *q, char **text, size_t *len)
{
    sqlite3 *db = NULL;
    sqlite3_stmt *s = NULL;
    struct jsonw w = JSONW_INIT;
    int64_t lim = (int64_t)q->limit + 1;
    err_t rc;

    read_sync(st);
    rc = db_read_begin(&st->readers, &db);
    if (rc)
        return rc;
    if (q->sel == HISTQ_AT)
        rc = db_prep(db, &s, at_sql, "it", before_open(q->at_ms), q->resource);
    else if (q->sel == HISTQ_POD)
        rc = db_prep(db, &s, by_pod_sql, "ttiiui", q->ns, q->name, before_open(q->from_ms),
                     before_open(q->to_ms), q->after, lim);
    else
        rc = db_prep(db, &s, q->health ? health_sql : by_device_sql, "ttiiui", q->device,
                     q->resource, before_open(q->from_ms), before_open(q->to_ms), q->after, lim);
    if (rc)
        goto out;
    rc = intervals(db, s, q->health ? health_row : bind_row,
                   q->sel == HISTQ_AT ? SIZE_MAX : q->limit, &w);
    db_done(s);
out:
    db_read_end(&st->readers, db);
    if (rc) {
        jsonw_release(&w);
        return rc;
    }
    *text = jsonw_detach(&w, len);
    return ERR_OK;
}

err_t store_history(struct store *st, const struct histq *q, json_t **out)
{
    char *text = NULL;
    size_t len = 0;
    json_t *j;
    err_t rc = store_history_text(st, q, &text, &len);

    if (rc)
        return rc;
    j = json_loadb(text, len, 0, NULL);
    free(text);
    if (!j)
        return ERR_NOMEM; /* the text is ours and valid: only memory can fail */
    *out = j;
    return ERR_OK;
}

/* ---- usage ---- */

/* The intervals that overlap [?1, ?2) as (dev, pod, f, t), t clipped to
 * now (?3): those starting in the window (a rowid range: an id is at least
 * from_ms * 1024, and hist_bind's own ids move at most 2^30 past it, a
 * million intervals in a millisecond) and, per device, the last one
 * starting before it. */
/* clang-format off */
#define USAGE_CTE                                                                                  \
    "WITH " LAST_BEFORE("<") ",c(dev,pod,f,t) AS (SELECT dev,pod,from_ms,min(to_ms,?3) FROM "   \
    "hist_bind WHERE id>=(?1<<10) AND id<(?2<<10)+(1<<30) AND from_ms>=?1 AND from_ms<?2 UNION "   \
    "ALL SELECT b.dev,b.pod,b.from_ms,min(b.to_ms,?3) " LAST_JOIN("<") "WHERE b.to_ms>?1) "
/* clang-format on */
#define USAGE_SUM                                                                                  \
    ",sum(max(0,min(c.t,?2)-max(c.f,?1))) FROM c JOIN hist_dev d ON d.id=c.dev JOIN hist_pod p "   \
    "ON p.id=c.pod WHERE ?4 IS NULL OR d.resource=?4 "

static const char *const usage_sql[] = {
    [HISTQ_BY_NAMESPACE] = USAGE_CTE "SELECT p.namespace,d.resource" USAGE_SUM
                                     "GROUP BY 1,2 ORDER BY 1,2",
    [HISTQ_BY_POD] = USAGE_CTE "SELECT p.namespace,p.name,d.resource" USAGE_SUM
                               "GROUP BY 1,2,3 ORDER BY 1,2,3",
    [HISTQ_BY_DEVICE] = USAGE_CTE "SELECT d.resource,d.device_id" USAGE_SUM
                                  "GROUP BY 1,2 ORDER BY 1,2",
};

static json_t *seconds(sqlite3_stmt *s, int col)
{
    return json_real((double)sqlite3_column_int64(s, col) / 1000.0);
}

static json_t *usage_ns(sqlite3_stmt *s)
{
    return json_pack("{s:s,s:s,s:o}", "namespace", db_text(s, 0), "resourceName", db_text(s, 1),
                     "deviceSeconds", seconds(s, 2));
}

static json_t *usage_pod(sqlite3_stmt *s)
{
    return json_pack("{s:s,s:s,s:s,s:o}", "namespace", db_text(s, 0), "name", db_text(s, 1),
                     "resourceName", db_text(s, 2), "deviceSeconds", seconds(s, 3));
}

static json_t *usage_dev(sqlite3_stmt *s)
{
    return json_pack("{s:s,s:s,s:o}", "resourceName", db_text(s, 0), "deviceId", db_text(s, 1),
                     "deviceSeconds", seconds(s, 2));
}

err_t store_usage(struct store *st, const struct histq *q, int64_t now_ms, json_t **out)
{
    static json_t *(*const conv[])(sqlite3_stmt *) = {usage_ns, usage_pod, usage_dev};
    sqlite3 *db = NULL;
    sqlite3_stmt *s = NULL;
    json_t *arr = json_array(), *o = json_object();
    bool row;
    err_t rc = arr && o ? ERR_OK : ERR_NOMEM;

    if (!rc) {
        read_sync(st);
        rc = db_read_begin(&st->readers, &db);
    }
    if (rc)
        goto out;
    rc = db_prep(db, &s, usage_sql[q->by], "iiit", before_open(q->from_ms), before_open(q->to_ms),
                 before_open(now_ms), q->resource);
    while (!rc) {
        rc = db_step(db, s, &row);
        if (rc || !row)
            break;
        if (json_array_append_new(arr, conv[q->by](s)))
            rc = ERR_NOMEM;
    }
    db_done(s);
    db_read_end(&st->readers, db);
    if (rc)
        goto out;
    rc = json_object_set_new(o, "usage", arr) ? ERR_NOMEM : ERR_OK;
    arr = NULL; /* the answer's now, or freed */
out:
    json_decref(arr);
    if (rc) {
        json_decref(o);
        return rc;
    }
    *out = o;
    return ERR_OK;
}

/* ---- folding ---- */

/* Intervals one step folds at most: ~10 ms of the writer. A step writes
 * each device's last hist_ix_dev page whatever its size, so fewer, larger
 * steps write fewer pages an interval. */
#define FOLD_ROWS 4096

/* An interval a step reads: of the step, or folded open and closed
 * since (hist_unsettled). */
struct fold_row {
    int64_t dev, pod, from_ms, to_ms, id;
    bool step; /* of the step: its pod and device's row of hist_pod_dev counts it */
};

struct fold_rows {
    struct fold_row *v;
    size_t n, cap;
};

/* The rows of 'sql' (id,dev,pod,from_ms,to_ms; with 'step', of the step:
 * arguments lo, hi) appended to 'r'. */
static err_t fold_read(sqlite3 *db, const char *sql, bool step, uint64_t lo, uint64_t hi,
                       struct fold_rows *r)
{
    sqlite3_stmt *s = NULL;
    bool row = true;
    err_t rc = db_prep(db, &s, sql, step ? "ii" : NULL, (int64_t)lo, (int64_t)hi);

    while (!rc) {
        rc = db_step(db, s, &row);
        if (rc || !row)
            break;
        if (r->n == r->cap) {
            size_t cap = r->cap ? 2 * r->cap : 256;
            struct fold_row *v = realloc(r->v, cap * sizeof(*v));

            if (!v) {
                rc = ERR_NOMEM;
                break;
            }
            r->v = v;
            r->cap = cap;
        }
        r->v[r->n++] = (struct fold_row){sqlite3_column_int64(s, 1), sqlite3_column_int64(s, 2),
                                         sqlite3_column_int64(s, 3), sqlite3_column_int64(s, 4),
                                         sqlite3_column_int64(s, 0), step};
    }
    db_done(s);
    return rc;
}

static int fold_cmp(const void *a, const void *b)
{
    const struct fold_row *x = a, *y = b;

    if (x->dev != y->dev)
        return x->dev < y->dev ? -1 : 1;
    return x->pod < y->pod ? -1 : x->pod > y->pod;
}

/* The rows v[0..n) of one device and pod: their pod and device's row of
 * hist_pod_dev takes those of the step; the usage of their namespace and
 * resource the device-milliseconds of those closed. */
static err_t fold_group(sqlite3 *db, const struct fold_row *v, size_t n)
{
    int64_t first = INT64_MAX, last = INT64_MIN, last_id = 0, ms = 0;
    size_t i;
    err_t rc = ERR_OK;

    for (i = 0; i < n; i++) {
        if (v[i].to_ms < HIST_OPEN_MS && v[i].to_ms > v[i].from_ms)
            ms += v[i].to_ms - v[i].from_ms;
        if (!v[i].step)
            continue;
        first = v[i].from_ms < first ? v[i].from_ms : first;
        last = v[i].from_ms > last ? v[i].from_ms : last;
        last_id = v[i].id > last_id ? v[i].id : last_id;
    }
    if (last_id)
        rc = db_exec(db,
                     "INSERT INTO hist_pod_dev(pod,dev,first_ms,last_ms,last_id) VALUES(?,?,?,?,?) "
                     "ON CONFLICT DO UPDATE SET first_ms=min(first_ms,excluded.first_ms),"
                     "last_ms=max(last_ms,excluded.last_ms),last_id=max(last_id,excluded.last_id)",
                     "iiiii", v[0].pod, v[0].dev, first, last, last_id);
    if (!rc && ms)
        rc = db_exec(
            db,
            "INSERT INTO hist_usage(namespace,resource,ms) SELECT p.namespace,d.resource,?3 "
            "FROM hist_dev d,hist_pod p WHERE d.id=?1 AND p.id=?2 ON CONFLICT DO UPDATE "
            "SET ms=ms+excluded.ms",
            "iii", v[0].dev, v[0].pod, ms);
    return rc;
}

/* Settle what the step's rows (id in (lo, hi]) and the unsettled ones
 * closed since give, by device and pod, and keep the step's open ones
 * unsettled. The rows are grouped here, not by SQL: a step's rows are of
 * few devices and pods, and SQLite's GROUP BY sorts them through its
 * sorter, twice, once for the usage and once for hist_pod_dev. */
static err_t fold_settle(sqlite3 *db, uint64_t lo, uint64_t hi)
{
    struct fold_rows r = {NULL, 0, 0};
    size_t i, j;
    err_t rc = fold_read(db,
                         "SELECT b.id,b.dev,b.pod,b.from_ms,b.to_ms FROM hist_unsettled u CROSS "
                         "JOIN hist_bind b ON b.id=u.id WHERE b.to_ms<" HIST_OPEN,
                         false, lo, hi, &r);

    if (!rc)
        rc = fold_read(db, "SELECT id,dev,pod,from_ms,to_ms FROM hist_bind WHERE id>?1 AND id<=?2",
                       true, lo, hi, &r);
    if (!rc)
        rc = db_exec(db,
                     "DELETE FROM hist_unsettled WHERE (SELECT b.to_ms FROM hist_bind b WHERE "
                     "b.id=hist_unsettled.id)<" HIST_OPEN,
                     NULL);
    for (i = 0; !rc && i < r.n; i++)
        if (r.v[i].step && r.v[i].to_ms >= HIST_OPEN_MS)
            rc = db_exec(db, "INSERT INTO hist_unsettled(id) VALUES(?)", "i", r.v[i].id);
    if (!rc && r.n)
        qsort(r.v, r.n, sizeof(*r.v), fold_cmp);
    for (i = 0; !rc && i < r.n; i = j) {
        for (j = i + 1; j < r.n && !fold_cmp(&r.v[i], &r.v[j]); j++)
            ;
        rc = fold_group(db, r.v + i, j - i);
    }
    free(r.v);
    return rc;
}

/* Fold up to FOLD_ROWS intervals into the lookups; '*more' when more
 * wait. */
err_t st_hist_fold(struct store *st, bool *more)
{
    sqlite3 *db = st->commit.db;
    uint64_t lo = 0, hi = 0, after = 0;
    err_t rc = db_get_u64(db, &lo, "SELECT " HIST_FOLDED, NULL);

    if (!rc)
        rc = db_get_u64(db, &hi,
                        "SELECT ifnull((SELECT id FROM hist_bind WHERE id>?1 ORDER BY id LIMIT 1 "
                        "OFFSET ?2),(SELECT max(id) FROM hist_bind WHERE id>?1))",
                        "ii", (int64_t)lo, (int64_t)FOLD_ROWS - 1);
    if (rc)
        return rc;
    if (hi < lo)
        hi = lo; /* nothing past the fold: only settling */
    rc = fold_settle(db, lo, hi);
    /* in id order, unsorted: a step's rows go to few places of the index,
       and sorting them first costs more than it saves */
    if (!rc)
        rc = db_exec(db,
                     "INSERT INTO hist_ix_dev(dev,from_ms,id) SELECT dev,from_ms,id FROM hist_bind "
                     "WHERE id>?1 AND id<=?2",
                     "ii", (int64_t)lo, (int64_t)hi);
    if (!rc)
        rc = db_exec(db, "UPDATE meta SET value=?2 WHERE key='hist_folded' AND ?2>?1", "ii",
                     (int64_t)lo, (int64_t)hi);
    if (!rc)
        rc = db_get_u64(db, &after, "SELECT EXISTS (SELECT 1 FROM hist_bind WHERE id>?)", "i",
                        (int64_t)hi);
    if (!rc && after)
        *more = true;
    return rc;
}

/* ---- pruning ---- */

#define PRUNE_ROWS 256 /* intervals one step deletes at most, per table */
#define PRUNE_PODS 512 /* hist_pod rows one step looks at */

/* The id up to which a step drops intervals of table 't' (0 hist_bind, 1
 * hist_health): the ?3-th of those that ended before ?1 [0], or over the
 * cap of the oldest that ended [1], else the last; of hist_bind, folded
 * ones only (what is settled). */
static const char *const prune_hi_sql[2][2] = {
    {"SELECT max(id) FROM (SELECT id FROM hist_bind WHERE id<(?1<<10) AND id<=" HIST_FOLDED " AND "
     "to_ms<?1 ORDER BY id LIMIT ?3)",
     "SELECT max(id) FROM (SELECT id FROM hist_bind WHERE id<=" HIST_FOLDED " AND to_ms<" HIST_OPEN
     " ORDER BY id LIMIT ?3)"},
    {"SELECT max(id) FROM (SELECT id FROM hist_health WHERE id<(?1<<10) AND to_ms<?1 ORDER BY id "
     "LIMIT ?3)",
     "SELECT max(id) FROM (SELECT id FROM hist_health WHERE to_ms<" HIST_OPEN " ORDER BY id LIMIT "
     "?3)"},
};
/* Drop them, from the lookups first: ?4 the id found above. */
#define PRUNE_WHERE "id<=?4 AND to_ms<" HIST_OPEN " AND (?2>0 OR (id<(?1<<10) AND to_ms<?1))"
static const char *const prune_del_sql[2][2] = {
    {"DELETE FROM hist_ix_dev WHERE (dev,from_ms,id) IN (SELECT dev,from_ms,id FROM hist_bind "
     "WHERE " PRUNE_WHERE ")",
     "DELETE FROM hist_bind WHERE " PRUNE_WHERE},
    {"DELETE FROM hist_health WHERE " PRUNE_WHERE},
};
static const char *const count_sql[] = {"SELECT count(*) FROM hist_bind",
                                        "SELECT count(*) FROM hist_health"};

struct prune_op {
    int64_t cut_ms;     /* intervals that ended before are dropped */
    uint64_t max_rows;  /* per table; 0 = no cap */
    int64_t counted[2]; /* rows counted before the step, -1 = not counted */
    bool more;          /* a step would find more to fold or drop */
};

/* How many rows of table 't' a step drops at most (*n), and how many are
 * over the cap (*over, 0 none). */
static void prune_limits(struct store *st, struct prune_op *o, int t, int64_t *over, int64_t *n)
{
    if (st->hist.rows[t] < 0 && o->counted[t] >= 0)
        st->hist.rows[t] = o->counted[t];
    *over = 0;
    if (o->max_rows && st->hist.rows[t] > (int64_t)o->max_rows)
        *over = st->hist.rows[t] - (int64_t)o->max_rows;
    *n = *over > 0 && *over < PRUNE_ROWS ? *over : PRUNE_ROWS;
}

/* Drop up to PRUNE_ROWS of table 't': over the cap first, then too old. */
static err_t prune_table(struct store *st, struct prune_op *o, int t)
{
    int64_t over, n;
    uint64_t hi = 0;
    size_t i;
    err_t rc;

    prune_limits(st, o, t, &over, &n);
    rc = db_get_u64(st->commit.db, &hi, prune_hi_sql[t][over > 0], "iii", o->cut_ms, over, n);
    if (rc || !hi)
        return rc;
    for (i = 0; !rc && i < ARRAY_SIZE(prune_del_sql[t]) && prune_del_sql[t][i]; i++)
        rc = db_exec(st->commit.db, prune_del_sql[t][i], "iiiu", o->cut_ms, over, n, hi);
    if (rc)
        return rc;
    n = sqlite3_changes(st->commit.db); /* the last statement's: the table's rows */
    if (st->hist.rows[t] >= 0)
        st->hist.rows[t] -= n;
    st->hist.pods_due = st->hist.pods_due || (t == 0 && n > 0);
    o->more = o->more || n == PRUNE_ROWS;
    return ERR_OK;
}

/* The rows of hist_pod_dev, then of hist_pod, in (?1, ?2] that no interval
 * needs: a row of hist_pod_dev whose last interval is older than every one
 * left has none left (one of its device and pod past the fold makes it
 * again when folded); the last statement's changes are the pods'. */
static const char *const prune_pods_sql[] = {
    "DELETE FROM hist_pod_dev WHERE pod>?1 AND pod<=?2 AND last_id<ifnull((SELECT min(id) FROM "
    "hist_bind),9223372036854775807)",
    "DELETE FROM hist_pod WHERE id>?1 AND id<=?2 AND NOT EXISTS (SELECT 1 FROM hist_pod_dev x "
    "WHERE x.pod=hist_pod.id) AND id NOT IN (SELECT pod FROM hist_bind WHERE id>" HIST_FOLDED ")",
};

/* hist_pod rows no interval names any more, and their hist_pod_dev rows,
 * PRUNE_PODS a step, round the table, a round after intervals were
 * dropped; the writer forgets the pods it knew when some go. */
static err_t prune_pods(struct store *st)
{
    sqlite3_stmt *s = NULL;
    bool row = false;
    int64_t hi = 0, n = 0;
    size_t i;
    err_t rc;

    if (!st->hist.pod_cursor && !st->hist.pods_due)
        return ERR_OK;
    if (!st->hist.pod_cursor)
        st->hist.pods_due = false;
    rc = db_prep(st->commit.db, &s,
                 "SELECT max(id),count(*) FROM (SELECT id FROM hist_pod WHERE id>?1 ORDER BY id "
                 "LIMIT ?2)",
                 "ii", (int64_t)st->hist.pod_cursor, (int64_t)PRUNE_PODS);
    if (rc)
        return rc;
    rc = db_step(st->commit.db, s, &row);
    if (!rc && row) {
        hi = sqlite3_column_int64(s, 0);
        n = sqlite3_column_int64(s, 1);
    }
    db_done(s);
    for (i = 0; !rc && n > 0 && i < ARRAY_SIZE(prune_pods_sql); i++)
        rc = db_exec(st->commit.db, prune_pods_sql[i], "ii", (int64_t)st->hist.pod_cursor, hi);
    if (!rc && n > 0 && sqlite3_changes(st->commit.db) > 0)
        st_hist_forget_pods(st);
    if (!rc)
        st->hist.pod_cursor = n < PRUNE_PODS ? 0 : (uint64_t)hi;
    return rc;
}

/* A step folds, then drops. One that changed nothing is rolled back: no
 * empty COMMIT a second. */
static err_t prune_run(struct store *st, void *ctx)
{
    struct prune_op *o = ctx;
    sqlite3_int64 before = sqlite3_total_changes64(st->commit.db);
    err_t rc = st_hist_replay(st);

    if (!rc)
        rc = st_hist_fold(st, &o->more);
    if (!rc)
        rc = prune_table(st, o, 0);
    if (!rc)
        rc = prune_table(st, o, 1);
    if (!rc)
        rc = prune_pods(st);
    if (!rc && sqlite3_total_changes64(st->commit.db) == before)
        st_write_discard(st);
    return rc;
}

/* Count a table's rows for the cap once (a read transaction, not the writer's). */
static err_t count_rows(struct store *st, int t, int64_t *n)
{
    sqlite3 *db = NULL;
    uint64_t v = 0;
    err_t rc = db_read_begin(&st->readers, &db);

    if (rc)
        return rc;
    rc = db_get_u64(db, &v, count_sql[t], NULL);
    db_read_end(&st->readers, db);
    if (!rc)
        *n = (int64_t)v;
    return rc;
}

err_t store_history_prune(struct store *st, int64_t now_ms, uint64_t retention_ms,
                          uint64_t max_rows, bool *more)
{
    struct prune_op o = {
        .cut_ms = now_ms - (int64_t)retention_ms, .max_rows = max_rows, .counted = {-1, -1}};
    int t;
    /* the operations not applied yet first: the count takes their rows */
    err_t rc = st_hist_sync(st);

    for (t = 0; !rc && max_rows && t < 2; t++) {
        if (__atomic_load_n(&st->hist.rows[t], __ATOMIC_RELAXED) < 0)
            rc = count_rows(st, t, &o.counted[t]);
    }
    if (!rc)
        rc = st_write(st, prune_run, &o);
    if (!rc)
        *more = o.more;
    else
        atomic_fetch_add_explicit(&st->hist_failures, 1, memory_order_relaxed);
    return rc;
}

uint64_t store_history_failures(struct store *st)
{
    return atomic_load_explicit(&st->hist_failures, memory_order_relaxed);
}

/* ---- /metrics ---- */

static json_t *alloc_row(sqlite3_stmt *s)
{
    return json_pack("{s:s,s:s,s:s,s:s,s:s}", "resource", db_text(s, 0), "device", db_text(s, 1),
                     "namespace", db_text(s, 2), "pod", db_text(s, 3), "container", db_text(s, 4));
}

static json_t *healthy_row(sqlite3_stmt *s)
{
    return json_pack("{s:s,s:s,s:b}", "resource", db_text(s, 0), "device", db_text(s, 1), "healthy",
                     strcmp(db_text(s, 2), "Healthy") == 0);
}

static json_t *seconds_row(sqlite3_stmt *s)
{
    return json_pack("{s:s,s:s,s:o}", "namespace", db_text(s, 0), "resource", db_text(s, 1),
                     "seconds", seconds(s, 2));
}

static const struct {
    const char *key;
    const char *sql;
    json_t *(*conv)(sqlite3_stmt *);
} metric_lists[] = {
    {"allocated",
     "SELECT resource,device_id,namespace,pod,container FROM bindings WHERE pod<>'' ORDER BY "
     "resource,device_id",
     alloc_row},
    {"healthy", "SELECT resource,id,health FROM devices ORDER BY resource,id", healthy_row},
    {"seconds",
     /* hist_usage holds the folded intervals that closed; the others are
        those past the fold and those folded open (hist_unsettled), the
        open ones counted up to now */
     "SELECT ns,res,sum(ms) FROM (SELECT namespace ns,resource res,ms FROM hist_usage UNION ALL "
     "SELECT p.namespace,d.resource,max(0,min(b.to_ms,?1)-b.from_ms) FROM (SELECT id FROM "
     "hist_unsettled UNION ALL SELECT id FROM hist_bind WHERE id>" HIST_FOLDED ") u CROSS JOIN "
     "hist_bind b ON b.id=u.id JOIN hist_dev d ON d.id=b.dev JOIN hist_pod p ON p.id=b.pod) "
     "GROUP BY 1,2 ORDER BY 1,2",
     seconds_row},
};

static err_t metric_list(sqlite3 *db, size_t i, int64_t now_ms, json_t *o)
{
    sqlite3_stmt *s = NULL;
    json_t *arr = json_array();
    bool row;
    err_t rc = arr ? db_prep(db, &s, metric_lists[i].sql, i == 2 ? "i" : NULL, now_ms) : ERR_NOMEM;

    while (!rc) {
        rc = db_step(db, s, &row);
        if (rc || !row)
            break;
        if (json_array_append_new(arr, metric_lists[i].conv(s)))
            rc = ERR_NOMEM;
    }
    db_done(s);
    if (!rc && json_object_set_new(o, metric_lists[i].key, arr))
        return ERR_NOMEM;
    if (rc)
        json_decref(arr);
    return rc;
}

err_t store_device_metrics(struct store *st, int64_t now_ms, json_t **out)
{
    sqlite3 *db = NULL;
    json_t *o = json_object();
    size_t i;
    err_t rc = o ? ERR_OK : ERR_NOMEM;

    if (!rc) {
        read_sync(st);
        rc = db_read_begin(&st->readers, &db);
    }
    if (rc) {
        json_decref(o);
        return rc;
    }
    for (i = 0; !rc && i < ARRAY_SIZE(metric_lists); i++)
        rc = metric_list(db, i, now_ms, o);
    db_read_end(&st->readers, db);
    if (rc) {
        json_decref(o);
        return rc;
    }
    *out = o;
    return ERR_OK;
}
