/* SPDX-License-Identifier: Apache-2.0 */
/* store_histw.c - the history's writer (schema/0004_history.sql,
 * 0007_history_fold.sql): binding intervals, written by
 * st_hist_bind()/st_hist_unbind(), which every writer of a bindings row
 * calls in its own write; health intervals, written by TEMP triggers of
 * the write connection on devices; interval ids and times. A binding
 * change appends rows and closes one in place, nothing more: to find what
 * it needs without the lookups (folded later, store_hist.c) it keeps,
 * under the writer's lock, each device's interned id and open interval and
 * the pods it met; a write rolled back makes it forget them all,
 * and takes its ids back from the cap's row count (group commit hooks,
 * commit.h). Not the history's reads, its folding, nor its pruning
 * (store_hist.c). */
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
    "dev=" DEV(r, i) " ORDER BY from_ms DESC,id DESC LIMIT 1) AND to_ms=" HIST_OPEN ";"
/* Intern the device, open its interval: INSERT .. VALUES with an upsert (in
 * a trigger, INSERT .. SELECT goes through a temporary table whenever the
 * program read the table before), so no step is conditional; the
 * triggers' WHEN clauses choose. */
#define OPEN                                                                                       \
    "INSERT INTO hist_dev(resource,device_id) VALUES(NEW.resource,NEW.id) ON CONFLICT DO "         \
    "NOTHING;"                                                                                     \
    "INSERT INTO hist_health(id,dev,from_ms,to_ms) VALUES(podres_hist_id(1),"                      \
    DEV("NEW.resource", "NEW.id") ",podres_hist_ms()," HIST_OPEN ");"

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

#define KNOWN_MAX 1024 /* devices, and pods, known at most; past it, all are forgotten */

/* A device the writer knows, with its interned id and its open interval;
 * or a pod, with its hist_pod id. */
struct hent {
    uint32_t hash; /* of 'key' */
    uint32_t klen; /* bytes of 'key' */
    uint64_t id;   /* its hist_dev or hist_pod id */
    uint64_t open; /* a device's open interval, 0 none */
    char key[];    /* "resource\0id\0", "namespace\0name\0" */
};

/* Known entries by key: open addressing, linear probing. */
struct hmap {
    struct hent **slot; /* 2 * KNOWN_MAX slots, new; NULL until the first entry */
    size_t n;           /* entries */
};

struct hist_writer {
    struct hmap devs;    /* known devices */
    struct hmap pods;    /* known pods */
    bool wrote[2];       /* the batch's kept writes, the current write wrote intervals */
    int64_t given[2][2]; /* interval ids counted in hist.rows[t] by the batch's kept
                            writes [0] and the current write [1]: taken back when they
                            roll back, so that the cap counts only rows there are */
};

/* A key of two texts. */
struct hkey {
    const char *part[2]; /* the texts */
    size_t len[2];       /* their lengths */
    uint32_t hash;       /* FNV-1a of both, each with its '\0' */
};

static void hkey_init(struct hkey *k, const char *a, const char *b)
{
    uint32_t h = 2166136261u;
    size_t i, j;

    k->part[0] = a;
    k->part[1] = b;
    for (j = 0; j < 2; j++) {
        k->len[j] = strlen(k->part[j]);
        for (i = 0; i <= k->len[j]; i++)
            h = (h ^ (unsigned char)k->part[j][i]) * 16777619u;
    }
    k->hash = h;
}

static bool hkey_is(const struct hkey *k, const struct hent *e)
{
    return e->hash == k->hash && e->klen == k->len[0] + k->len[1] + 2 &&
           memcmp(e->key, k->part[0], k->len[0] + 1) == 0 &&
           memcmp(e->key + k->len[0] + 1, k->part[1], k->len[1] + 1) == 0;
}

/* Forget every entry of 'm'. */
static void hmap_clear(struct hmap *m)
{
    size_t i;

    for (i = 0; m->slot && i < 2 * KNOWN_MAX; i++) {
        free(m->slot[i]);
        m->slot[i] = NULL;
    }
    m->n = 0;
}

/* The slot of key 'k': its entry's, or the empty one where it would go. */
static struct hent **hmap_slot(struct hmap *m, const struct hkey *k)
{
    size_t i = k->hash & (2 * KNOWN_MAX - 1);

    while (m->slot[i] && !hkey_is(k, m->slot[i]))
        i = (i + 1) & (2 * KNOWN_MAX - 1);
    return &m->slot[i];
}

/* The entry of key 'k', or NULL. */
static struct hent *hmap_get(struct hmap *m, const struct hkey *k)
{
    return m->slot ? *hmap_slot(m, k) : NULL;
}

/* Know 'k' by id 'id', with no open interval (all forgotten first when
 * KNOWN_MAX are known); NULL when out of memory. */
static struct hent *hmap_add(struct hmap *m, const struct hkey *k, uint64_t id)
{
    struct hent *e;

    if (!m->slot)
        m->slot = calloc(2 * KNOWN_MAX, sizeof(*m->slot));
    e = m->slot ? calloc(1, sizeof(*e) + k->len[0] + k->len[1] + 2) : NULL;
    if (!e)
        return NULL;
    if (m->n == KNOWN_MAX)
        hmap_clear(m);
    e->hash = k->hash;
    e->klen = (uint32_t)(k->len[0] + k->len[1] + 2);
    e->id = id;
    memcpy(e->key, k->part[0], k->len[0] + 1);
    memcpy(e->key + k->len[0] + 1, k->part[1], k->len[1] + 1);
    *hmap_slot(m, k) = e;
    m->n++;
    return e;
}

static void forget(struct hist_writer *w)
{
    hmap_clear(&w->devs);
    hmap_clear(&w->pods);
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

/* A write rolled back that wrote intervals forgets every device and pod:
 * what is known may be ids and intervals that are gone. One kept is the
 * batch's. */
static void member_end(void *arg, bool kept)
{
    struct store *st = arg;
    struct hist_writer *w = st->hist.w;

    if (kept) {
        w->wrote[0] = w->wrote[0] || w->wrote[1];
        w->given[0][0] += w->given[1][0];
        w->given[0][1] += w->given[1][1];
    } else if (w->wrote[1]) {
        forget(w);
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
        forget(w);
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
    forget(w);
    free(w->devs.slot);
    free(w->pods.slot);
    free(w);
    st->hist.w = NULL;
}

void st_hist_forget_pods(struct store *st)
{
    if (st->hist.w)
        hmap_clear(&st->hist.w->pods);
}

/* ---- binding intervals ---- */

/* A device's hist_dev id and its last interval, if open: the last of the
 * rows past the fold (schema/0007_history_fold.sql), else the last
 * folded. */
static const char dev_sql[] =
    "SELECT d.id,b.id FROM hist_dev d LEFT JOIN hist_bind b ON b.id=ifnull((SELECT "
    "max(t.id) FROM hist_bind t WHERE t.id>" HIST_FOLDED " AND "
    "t.dev=d.id),(SELECT x.id FROM hist_ix_dev x WHERE x.dev=d.id ORDER BY x.from_ms DESC,x.id "
    "DESC LIMIT 1)) AND b.to_ms=" HIST_OPEN " WHERE d.resource=?1 AND d.device_id=?2";

/* Device 'res' 'id' as known, else as read; with 'add', interned when it
 * has no row (without, *out is NULL then: no row, no interval). */
static err_t dev_get(struct store *st, const char *res, const char *id, bool add, struct hent **out)
{
    struct hist_writer *w = st->hist.w;
    struct hkey k;
    sqlite3_stmt *s = NULL;
    err_t rc;

    hkey_init(&k, res, id);
    *out = hmap_get(&w->devs, &k);
    if (*out)
        return ERR_OK;
    rc = db_row(st->commit.db, &s, dev_sql, "tt", res, id);
    if (!rc) {
        *out = hmap_add(&w->devs, &k, (uint64_t)sqlite3_column_int64(s, 0));
        if (*out && sqlite3_column_type(s, 1) != SQLITE_NULL)
            (*out)->open = (uint64_t)sqlite3_column_int64(s, 1);
        db_done(s);
        return *out ? ERR_OK : ERR_NOMEM;
    }
    if (rc != ERR_NOTFOUND || !add)
        return rc == ERR_NOTFOUND ? ERR_OK : rc;
    rc = db_exec(st->commit.db, "INSERT INTO hist_dev(resource,device_id) VALUES(?,?)", "tt", res,
                 id);
    if (rc)
        return rc;
    *out = hmap_add(&w->devs, &k, (uint64_t)sqlite3_last_insert_rowid(st->commit.db));
    return *out ? ERR_OK : ERR_NOMEM;
}

/* The hist_pod id of pod 'ns'/'name' (its row of uid ''), interned if
 * new. */
static err_t pod_get(struct store *st, const char *ns, const char *name, uint64_t *id)
{
    struct hist_writer *w = st->hist.w;
    struct hkey k;
    struct hent *e;
    err_t rc;

    hkey_init(&k, ns, name);
    e = hmap_get(&w->pods, &k);
    if (e) {
        *id = e->id;
        return ERR_OK;
    }
    rc = db_get_u64(st->commit.db, id,
                    "SELECT id FROM hist_pod WHERE namespace=? AND name=? AND uid=''", "tt", ns,
                    name);
    if (!rc && !*id) {
        rc = db_exec(st->commit.db, "INSERT INTO hist_pod(namespace,name,uid) VALUES(?,?,'')", "tt",
                     ns, name);
        *id = (uint64_t)sqlite3_last_insert_rowid(st->commit.db);
    }
    if (rc)
        return rc;
    return hmap_add(&w->pods, &k, *id) ? ERR_OK : ERR_NOMEM;
}

/* Close the open interval of device 'd', if any, at the write's time. */
static err_t dev_close(struct store *st, struct hent *d)
{
    err_t rc;

    if (!d || !d->open)
        return ERR_OK;
    rc = db_exec(st->commit.db, "UPDATE hist_bind SET to_ms=? WHERE id=?", "iu",
                 (int64_t)st->commit.now_ms, d->open);
    d->open = 0;
    return rc;
}

/* Open an interval of device 'd' held by instance 'uid' of pod 'pod' in
 * 'container', from the write's time. */
static err_t dev_open(struct store *st, struct hent *d, uint64_t pod, const char *uid,
                      const char *container)
{
    int64_t now = (int64_t)st->commit.now_ms;
    uint64_t id = st_hist_next_id(st, 0);
    err_t rc = db_exec(
        st->commit.db,
        "INSERT INTO hist_bind(id,dev,pod,uid,container,from_ms,to_ms) VALUES(?,?,?,?,?,?," HIST_OPEN
        ")",
        "uuutti", id, d->id, pod, uid, container, now);

    if (!rc)
        d->open = id;
    return rc;
}

err_t st_hist_bind(struct store *st, const char *res, const char *id, const char *ns,
                   const char *pod, const char *uid, const char *container)
{
    struct hent *d = NULL;
    uint64_t pid = 0;
    err_t rc;

    if (!st->hist.w || !pod[0])
        return ERR_OK;
    st->hist.w->wrote[1] = true;
    rc = dev_get(st, res, id, true, &d);
    if (!rc)
        rc = dev_close(st, d);
    if (!rc)
        rc = pod_get(st, ns, pod, &pid);
    if (!rc)
        rc = dev_open(st, d, pid, uid, container);
    return rc;
}

err_t st_hist_unbind(struct store *st, const char *res, const char *id)
{
    struct hent *d = NULL;
    err_t rc;

    if (!st->hist.w)
        return ERR_OK;
    st->hist.w->wrote[1] = true;
    rc = dev_get(st, res, id, false, &d);
    return rc ? rc : dev_close(st, d);
}

/* ---- setting up ---- */

/* The last interval id given, and the time of writes from it: times
 * never go back across a restart, nor ids below the fold's (a pruned
 * row's id is not given again). */
static err_t last_id(struct store *st)
{
    err_t rc = db_get_u64(st->commit.db, &st->hist.last_id,
                          "SELECT max(ifnull((SELECT max(id) FROM hist_bind),0),"
                          "ifnull((SELECT max(id) FROM hist_health),0),"
                          "ifnull(" HIST_FOLDED ",0))",
                          NULL);

    st->commit.now_ms = st->hist.last_id >> 10;
    return rc;
}

err_t st_hist_attach(struct store *st)
{
    struct commit_hooks h = {st, member_end, batch_end, release};
    int rc;

    st->hist.rows[0] = st->hist.rows[1] = -1;
    st->hist.pods_due = true; /* what an earlier run left */
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
