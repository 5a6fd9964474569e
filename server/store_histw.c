/* SPDX-License-Identifier: Apache-2.0 */
/* store_histw.c - the history's writer (schema/0004_history.sql): binding
 * intervals, written by st_hist_bind()/st_hist_unbind(), which every
 * writer of a bindings row calls in its own write; health intervals,
 * written by TEMP triggers of the write connection on devices; interval
 * ids and times. To write a binding interval in few statements it keeps,
 * under the writer's lock, each device's interned id and open interval; a
 * write rolled back makes it forget them all, and takes its ids back from
 * the cap's row count (group commit hooks, commit.h). Not the history's
 * reads, nor its pruning (store_hist.c). */
#define LOG_MOD "store"
#include "../common/common.h"
#include "store_int.h"

#include <assert.h>

/* ---- health: the triggers ---- */

/* clang-format off */
#define DEV(r, i) "(SELECT id FROM hist_dev WHERE resource=" r " AND device_id=" i ")"
/* Close the open interval of a device: its last one (a device's intervals
 * do not overlap, so an open one is the last), the tail of the (dev,
 * from_ms) index, whose entries end with the id. */
#define CLOSE(r, i)                                                                                \
    "UPDATE hist_health SET to_ms=podres_hist_ms() WHERE id=(SELECT id FROM hist_health WHERE "    \
    "dev=" DEV(r, i) " ORDER BY from_ms DESC,id DESC LIMIT 1) AND to_ms IS NULL;"
/* Intern the device, open its interval: INSERT .. VALUES with an upsert (in
 * a trigger, INSERT .. SELECT goes through a temporary table whenever the
 * program read the table before), so no step is conditional; the
 * triggers' WHEN clauses choose. */
#define OPEN                                                                                       \
    "INSERT INTO hist_dev(resource,device_id) VALUES(NEW.resource,NEW.id) ON CONFLICT DO "         \
    "NOTHING;"                                                                                     \
    "INSERT INTO hist_health(id,dev,from_ms) VALUES(podres_hist_id(1),"                            \
    DEV("NEW.resource", "NEW.id") ",podres_hist_ms());"

/* A device's row is inserted, updated in place or deleted. An update has
 * two triggers, one to Unhealthy (close and open) and one from it (close),
 * so that no order between triggers matters. The outer statement's
 * conflict clause overrides a trigger statement's (an INSERT OR IGNORE into
 * hist_dev under an INSERT OR REPLACE would replace the row and renumber
 * the device), but not an upsert's ON CONFLICT: the interning is upserts. */
static const char triggers_sql[] =
    "CREATE TEMP TRIGGER hist_health_ins AFTER INSERT ON main.devices WHEN "
    "NEW.health='Unhealthy' BEGIN "
    CLOSE("NEW.resource", "NEW.id") OPEN "END;"
    "CREATE TEMP TRIGGER hist_health_upd AFTER UPDATE OF health ON main.devices WHEN "
    "NEW.health='Unhealthy' AND OLD.health IS NOT NEW.health BEGIN "
    CLOSE("NEW.resource", "NEW.id") OPEN "END;"
    "CREATE TEMP TRIGGER hist_health_ok AFTER UPDATE OF health ON main.devices WHEN "
    "NEW.health<>'Unhealthy' AND OLD.health IS NOT NEW.health BEGIN "
    CLOSE("NEW.resource", "NEW.id") "END;"
    "CREATE TEMP TRIGGER hist_health_del AFTER DELETE ON main.devices WHEN "
    "OLD.health='Unhealthy' BEGIN "
    CLOSE("OLD.resource", "OLD.id") "END;";
/* clang-format on */

static void given(struct store *st, int t);

uint64_t st_hist_next_id(struct store *st, int t)
{
    uint64_t id = st->commit.now_ms << 10;

    if (id <= st->hist.last_id)
        id = st->hist.last_id + 1;
    st->hist.last_id = id;
    if (st->hist.rows[t] >= 0) {
        st->hist.rows[t]++;
        given(st, t);
    }
    return id;
}

/* podres_hist_ms(): the time of the current write (commit.h, now_ms). */
static void fn_ms(sqlite3_context *cx, int argc, sqlite3_value **argv)
{
    struct store *st = sqlite3_user_data(cx);

    (void)argc;
    (void)argv;
    sqlite3_result_int64(cx, (sqlite3_int64)st->commit.now_ms);
}

/* podres_hist_id(table): st_hist_next_id() of 'table' (0 hist_bind, 1
 * hist_health). */
static void fn_id(sqlite3_context *cx, int argc, sqlite3_value **argv)
{
    struct store *st = sqlite3_user_data(cx);

    (void)argc;
    sqlite3_result_int64(cx, (sqlite3_int64)st_hist_next_id(st, sqlite3_value_int(argv[0]) != 0));
}

/* ---- what the writer knows ---- */

#define DEVS_MAX 1024 /* devices known at most; past it, all are forgotten */

/* A device the writer knows: its interned id and its open interval. */
struct hdev {
    uint32_t hash;   /* of 'key' */
    uint32_t klen;   /* bytes of 'key' */
    uint64_t id;     /* its hist_dev.id */
    uint64_t open;   /* its open interval, 0 none */
    int64_t from_ms; /* that interval's start */
    char *ns;        /* the namespace of that interval's pod, new; NULL with none open */
    char key[];      /* "resource\0id\0" */
};

struct hist_writer {
    struct hdev **slot;  /* known devices by key: open addressing, linear probing, 2 *
                            DEVS_MAX slots; NULL until the first */
    size_t ndevs;        /* known devices */
    bool wrote[2];       /* the batch's kept writes, the current write wrote intervals */
    int64_t given[2][2]; /* interval ids counted in hist.rows[t] by the batch's kept
                            writes [0] and the current write [1]: taken back when they
                            roll back, so that the cap counts only rows there are */
};

/* The key of device 'res' 'id'. */
struct hkey {
    const char *res, *id; /* the texts */
    size_t rlen, ilen;    /* their lengths */
    uint32_t hash;        /* FNV-1a of both, each with its '\0' */
};

static void hkey_init(struct hkey *k, const char *res, const char *id)
{
    uint32_t h = 2166136261u;
    size_t i;

    k->res = res;
    k->id = id;
    k->rlen = strlen(res);
    k->ilen = strlen(id);
    for (i = 0; i <= k->rlen; i++)
        h = (h ^ (unsigned char)res[i]) * 16777619u;
    for (i = 0; i <= k->ilen; i++)
        h = (h ^ (unsigned char)id[i]) * 16777619u;
    k->hash = h;
}

static bool hkey_is(const struct hkey *k, const struct hdev *d)
{
    return d->hash == k->hash && d->klen == k->rlen + k->ilen + 2 &&
           memcmp(d->key, k->res, k->rlen + 1) == 0 &&
           memcmp(d->key + k->rlen + 1, k->id, k->ilen + 1) == 0;
}

/* Forget every device. */
static void devs_clear(struct hist_writer *w)
{
    size_t i;

    for (i = 0; w->slot && i < 2 * DEVS_MAX; i++) {
        if (w->slot[i]) {
            free(w->slot[i]->ns);
            free(w->slot[i]);
            w->slot[i] = NULL;
        }
    }
    w->ndevs = 0;
}

/* The slot of key 'k': its device's, or the empty one where it would go. */
static struct hdev **devs_slot(struct hist_writer *w, const struct hkey *k)
{
    size_t i = k->hash & (2 * DEVS_MAX - 1);

    while (w->slot[i] && !hkey_is(k, w->slot[i]))
        i = (i + 1) & (2 * DEVS_MAX - 1);
    return &w->slot[i];
}

/* Know device 'k' by its interned id 'id', with no open interval (all
 * forgotten first when DEVS_MAX are known); NULL when out of memory. */
static struct hdev *devs_add(struct hist_writer *w, const struct hkey *k, uint64_t id)
{
    struct hdev *d;

    if (!w->slot)
        w->slot = calloc(2 * DEVS_MAX, sizeof(*w->slot));
    d = w->slot ? calloc(1, sizeof(*d) + k->rlen + k->ilen + 2) : NULL;
    if (!d)
        return NULL;
    if (w->ndevs == DEVS_MAX)
        devs_clear(w);
    d->hash = k->hash;
    d->klen = (uint32_t)(k->rlen + k->ilen + 2);
    d->id = id;
    memcpy(d->key, k->res, k->rlen + 1);
    memcpy(d->key + k->rlen + 1, k->id, k->ilen + 1);
    *devs_slot(w, k) = d;
    w->ndevs++;
    return d;
}

/* ---- the hooks of group commit ---- */

/* Count an id of table 't' counted in the rows as the current write's. */
static void given(struct store *st, int t)
{
    if (st->hist.w)
        st->hist.w->given[1][t]++;
}

/* Take back from the row counts the ids of writes 'i' (0 the batch's kept,
 * 1 the current), rolled back, and forget them. */
static void ungive(struct store *st, int i, bool rolled_back)
{
    struct hist_writer *w = st->hist.w;
    int t;

    for (t = 0; t < 2; t++) {
        if (rolled_back && st->hist.rows[t] >= w->given[i][t])
            st->hist.rows[t] -= w->given[i][t];
        w->given[i][t] = 0;
    }
}

/* A write rolled back that wrote intervals forgets every device: what is
 * known may be ids and intervals that are gone. One kept is the batch's. */
static void member_end(void *arg, bool kept)
{
    struct store *st = arg;
    struct hist_writer *w = st->hist.w;

    if (kept) {
        w->wrote[0] = w->wrote[0] || w->wrote[1];
        w->given[0][0] += w->given[1][0];
        w->given[0][1] += w->given[1][1];
    } else if (w->wrote[1]) {
        devs_clear(w);
    }
    ungive(st, 1, !kept);
    w->wrote[1] = false;
}

/* A batch rolled back forgets as above. */
static void batch_end(void *arg, bool committed)
{
    struct store *st = arg;
    struct hist_writer *w = st->hist.w;

    if (!committed && (w->wrote[0] || w->wrote[1]))
        devs_clear(w);
    ungive(st, 0, !committed);
    ungive(st, 1, !committed);
    w->wrote[0] = w->wrote[1] = false;
}

static void release(void *arg)
{
    struct store *st = arg;
    struct hist_writer *w = st->hist.w;

    if (!w)
        return;
    devs_clear(w);
    free(w->slot);
    free(w);
    st->hist.w = NULL;
}

/* ---- binding intervals ---- */

/* A device's hist_dev id and its last interval, if open, with the
 * namespace of its pod. */
static const char dev_sql[] =
    "SELECT d.id,b.id,b.from_ms,p.namespace FROM hist_dev d LEFT JOIN hist_bind b ON b.id=(SELECT "
    "x.id FROM hist_bind x WHERE x.dev=d.id ORDER BY x.from_ms DESC,x.id DESC LIMIT 1) AND b.to_ms "
    "IS NULL LEFT JOIN hist_pod p ON p.id=b.pod WHERE d.resource=?1 AND d.device_id=?2";

/* Know the device 'k' of row 's' of dev_sql. */
static err_t dev_known(struct hist_writer *w, const struct hkey *k, sqlite3_stmt *s,
                       struct hdev **out)
{
    struct hdev *d = devs_add(w, k, (uint64_t)sqlite3_column_int64(s, 0));

    if (!d)
        return ERR_NOMEM;
    if (sqlite3_column_type(s, 1) != SQLITE_NULL) {
        d->ns = strdup(db_text(s, 3));
        if (!d->ns)
            return ERR_NOMEM; /* the write fails, and every device is forgotten */
        d->open = (uint64_t)sqlite3_column_int64(s, 1);
        d->from_ms = sqlite3_column_int64(s, 2);
    }
    *out = d;
    return ERR_OK;
}

/* Device 'res' 'id' as known, else as read; with 'add', interned when it
 * has no row (without, *out is NULL then: no row, no interval). */
static err_t dev_get(struct store *st, const char *res, const char *id, bool add, struct hdev **out)
{
    struct hist_writer *w = st->hist.w;
    struct hkey k;
    sqlite3_stmt *s = NULL;
    err_t rc;

    hkey_init(&k, res, id);
    *out = w->slot ? *devs_slot(w, &k) : NULL;
    if (*out)
        return ERR_OK;
    rc = db_row(st->commit.db, &s, dev_sql, "tt", res, id);
    if (!rc) {
        rc = dev_known(w, &k, s, out);
        db_done(s);
        return rc;
    }
    if (rc != ERR_NOTFOUND || !add)
        return rc == ERR_NOTFOUND ? ERR_OK : rc;
    rc = db_exec(st->commit.db, "INSERT INTO hist_dev(resource,device_id) VALUES(?,?)", "tt", res,
                 id);
    if (rc)
        return rc;
    *out = devs_add(w, &k, (uint64_t)sqlite3_last_insert_rowid(st->commit.db));
    return *out ? ERR_OK : ERR_NOMEM;
}

/* The hist_pod id of pod instance ns/name/uid, interned if new. */
static err_t pod_get(struct store *st, const char *ns, const char *name, const char *uid,
                     uint64_t *id)
{
    err_t rc = db_get_u64(st->commit.db, id,
                          "SELECT id FROM hist_pod WHERE namespace=? AND name=? AND uid=?", "ttt",
                          ns, name, uid);

    if (rc || *id)
        return rc;
    rc = db_exec(st->commit.db, "INSERT INTO hist_pod(namespace,name,uid) VALUES(?,?,?)", "ttt", ns,
                 name, uid);
    *id = (uint64_t)sqlite3_last_insert_rowid(st->commit.db);
    return rc;
}

/* Close the open interval of device 'd' (of resource 'res'), if any, at
 * the write's time, and add it to the usage of its namespace. */
static err_t dev_close(struct store *st, struct hdev *d, const char *res)
{
    int64_t now = (int64_t)st->commit.now_ms;
    err_t rc;

    if (!d || !d->open)
        return ERR_OK;
    rc = db_exec(st->commit.db, "UPDATE hist_bind SET to_ms=? WHERE id=?", "iu", now, d->open);
    if (!rc)
        rc = db_exec(st->commit.db,
                     "INSERT INTO hist_usage(namespace,resource,ms) VALUES(?,?,?) ON CONFLICT DO "
                     "UPDATE SET ms=ms+excluded.ms",
                     "tti", d->ns, res, now > d->from_ms ? now - d->from_ms : 0);
    free(d->ns);
    d->ns = NULL;
    d->open = 0;
    return rc;
}

/* Open an interval of device 'd' held by pod instance 'pod' of 'ns' in
 * 'container', from the write's time. */
static err_t dev_open(struct store *st, struct hdev *d, uint64_t pod, const char *ns,
                      const char *container)
{
    int64_t now = (int64_t)st->commit.now_ms;
    char *keep = strdup(ns);
    uint64_t id;
    err_t rc;

    if (!keep)
        return ERR_NOMEM;
    id = st_hist_next_id(st, 0);
    rc = db_exec(st->commit.db,
                 "INSERT INTO hist_bind(id,dev,pod,container,from_ms) VALUES(?,?,?,?,?)", "uuuti",
                 id, d->id, pod, container, now);
    if (rc) {
        free(keep);
        return rc;
    }
    d->ns = keep;
    d->open = id;
    d->from_ms = now;
    return ERR_OK;
}

err_t st_hist_bind(struct store *st, const char *res, const char *id, const char *ns,
                   const char *pod, const char *uid, const char *container)
{
    struct hdev *d = NULL;
    uint64_t pid = 0;
    err_t rc;

    if (!st->hist.w || !pod[0])
        return ERR_OK;
    st->hist.w->wrote[1] = true;
    rc = dev_get(st, res, id, true, &d);
    if (!rc)
        rc = dev_close(st, d, res);
    if (!rc)
        rc = pod_get(st, ns, pod, uid, &pid);
    if (!rc)
        rc = dev_open(st, d, pid, ns, container);
    return rc;
}

err_t st_hist_unbind(struct store *st, const char *res, const char *id)
{
    struct hdev *d = NULL;
    err_t rc;

    if (!st->hist.w)
        return ERR_OK;
    st->hist.w->wrote[1] = true;
    rc = dev_get(st, res, id, false, &d);
    return rc ? rc : dev_close(st, d, res);
}

/* ---- setting up ---- */

/* The last interval id given, and the time of writes from it: times never
 * go back across a restart. */
static err_t last_id(struct store *st)
{
    err_t rc = db_get_u64(st->commit.db, &st->hist.last_id,
                          "SELECT max(ifnull((SELECT max(id) FROM hist_bind),0),"
                          "ifnull((SELECT max(id) FROM hist_health),0))",
                          NULL);

    st->commit.now_ms = st->hist.last_id >> 10;
    return rc;
}

err_t st_hist_attach(struct store *st)
{
    struct commit_hooks h = {st, member_end, batch_end, release};
    int rc;

    st->hist.rows[0] = st->hist.rows[1] = -1;
    if (!ST_HISTORY)
        return last_id(st);
    st->hist.w = calloc(1, sizeof(*st->hist.w));
    if (!st->hist.w)
        return ERR_NOMEM;
    commit_set_hooks(&st->commit, &h);
    rc = sqlite3_create_function(st->commit.db, "podres_hist_ms", 0, SQLITE_UTF8, st, fn_ms, NULL,
                                 NULL);
    if (rc == SQLITE_OK)
        rc = sqlite3_create_function(st->commit.db, "podres_hist_id", 1, SQLITE_UTF8, st, fn_id,
                                     NULL, NULL);
    if (rc == SQLITE_OK)
        rc = sqlite3_exec(st->commit.db, triggers_sql, NULL, NULL, NULL);
    if (rc != SQLITE_OK)
        return db_err(st->commit.db, rc, "set up the history triggers");
    return last_id(st);
}
