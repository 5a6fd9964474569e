/* SPDX-License-Identifier: Apache-2.0 */
/* store_histw.c - the history's writer (schema/0004_history.sql,
 * 0007_history_fold.sql, 0010_history_ops.sql): binding intervals and
 * health intervals, interval ids and times. A binding change, in its own
 * write, only records its operation (st_hist_bind()/st_hist_unbind(),
 * which every writer of a bindings row calls) in the change log's next
 * row; replaying applies the operations to hist_bind in revision order,
 * in bulk: when a write leaves the log REPLAY_LAG revisions past the mark,
 * before the ring overwrites a row not applied (the log's keeper), before
 * a read of the history (st_hist_sync), at the pruning tick, and at open.
 * A replay closes and opens intervals in memory, and writes those it
 * opened at its end, most of them closed already. To find what it needs
 * without the lookups (folded later, store_hist.c) it keeps, under the
 * writer's lock, each device's interned id and open interval and the pods
 * it met; a write rolled back that replayed makes it forget them all and
 * read the mark again, and takes its ids back from the cap's row count
 * (group commit hooks, commit.h). Health intervals are written by TEMP
 * triggers of the write connection on devices, in the change's write.
 * Not the history's reads, its folding, nor its pruning (store_hist.c). */
#define LOG_MOD "store"
#include "../common/common.h"
#include "store_int.h"

#include <assert.h>
#include <stdatomic.h>

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
    return st_hist_next_id_at(st, t, st->commit.now_ms);
}

uint64_t st_hist_next_id_at(struct store *st, int t, uint64_t ms)
{
    uint64_t id = ms << 10;

    if (id <= st->hist.last_id[t])
        id = st->hist.last_id[t] + 1;
    st->hist.last_id[t] = id;
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

/* Revisions past the mark after which a write replays
 * (st_hist_after_write): the ring's keeper replays only when a row is
 * about to be overwritten, which with a large ring is a long replay
 * inside one write. */
#define REPLAY_LAG 1024

#define KNOWN_MAX 1024 /* devices, and pods, known at most; past it, all are forgotten */

/* A device the writer knows, with its interned id and its open interval;
 * or a pod, with its hist_pod id. */
struct hent {
    uint32_t hash; /* of 'key' */
    uint32_t klen; /* bytes of 'key' */
    uint64_t id;   /* its hist_dev or hist_pod id */
    uint64_t open; /* a device's open interval, 0 none */
    size_t pend;   /* a device's interval a replay opened and holds: its index + 1; 0 none */
    char key[];    /* "resource\0id\0", "namespace\0name\0" */
};

/* Known entries by key: open addressing, linear probing. */
struct hmap {
    struct hent **slot; /* 2 * KNOWN_MAX slots, new; NULL until the first entry */
    size_t n;           /* entries */
};

struct hist_writer {
    struct hmap devs;           /* known devices */
    struct hmap pods;           /* known pods */
    uint64_t mark;              /* the revision replayed up to, in the open batch (schema 10) */
    bool mark_stale;            /* a rollback may have taken 'mark' back: read it again */
    _Atomic uint64_t pending;   /* the last revision whose row took operations */
    _Atomic uint64_t published; /* the revision replayed up to, committed */
    bool wrote[2];              /* the batch's kept writes, the current write wrote intervals */
    int64_t given[2][2];        /* interval ids counted in hist.rows[t] by the batch's kept
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

/* A rollback may have taken the mark back: read it again before it is
 * used, and let the change log ask before overwriting any row. */
static void mark_lost(struct store *st)
{
    st->hist.w->mark_stale = true;
    st->log.kept = 0;
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
        mark_lost(st);
    }
    ungive(st, 1, !kept);
    w->wrote[1] = false;
}

/* A batch rolled back forgets as above. */
static void batch_end(void *arg, bool committed)
{
    struct store *st = arg;
    struct hist_writer *w = st->hist.w;

    if (!committed && (w->wrote[0] || w->wrote[1])) {
        forget(w);
        mark_lost(st);
    }
    if (committed && !w->mark_stale)
        atomic_store_explicit(&w->published, w->mark, memory_order_release);
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

/* A binding operation as a row's 'hist' holds it
 * (schema/0010_history_ops.sql), one after another: the byte 'B' (taken)
 * or 'U' (let go), the time in ms (8 bytes, little-endian), then the
 * texts, each ended by its '\0': resource, device id; for 'B', namespace,
 * pod, uid, container. */
#define OP_TEXTS_B 6
#define OP_TEXTS_U 2

struct hist_op {
    char kind;                    /* 'B' or 'U' */
    int64_t ms;                   /* its time */
    const char *text[OP_TEXTS_B]; /* into the bytes it was read from */
};

static err_t op_put(struct store *st, char kind, const char *const *text, int n)
{
    struct strbuf *b = &st->log.hist;
    unsigned char head[9];
    uint64_t ms = st->commit.now_ms;
    int i;
    err_t rc;

    head[0] = (unsigned char)kind;
    for (i = 0; i < 8; i++)
        head[1 + i] = (unsigned char)(ms >> (8 * i));
    rc = strbuf_add(b, head, sizeof(head));
    for (i = 0; !rc && i < n; i++)
        rc = strbuf_add(b, text[i], strlen(text[i]) + 1);
    return rc;
}

/* The operation at *p in [*p, end) into 'op', *p moved past it; false at
 * the end, or on bytes no writer made. */
static bool op_get(const char **p, const char *end, struct hist_op *op)
{
    const unsigned char *u = (const unsigned char *)*p;
    const char *q;
    int i, n;

    if (end - *p < 9 || (u[0] != 'B' && u[0] != 'U'))
        return false;
    op->kind = (char)u[0];
    op->ms = 0;
    for (i = 0; i < 8; i++)
        op->ms |= (int64_t)((uint64_t)u[1 + i] << (8 * i));
    q = *p + 9;
    n = op->kind == 'B' ? OP_TEXTS_B : OP_TEXTS_U;
    for (i = 0; i < n; i++) {
        const char *z = memchr(q, '\0', (size_t)(end - q));

        if (!z)
            return false;
        op->text[i] = q;
        q = z + 1;
    }
    *p = q;
    return true;
}

/* A device's hist_dev id and its last interval, if open: the last of the
 * rows past the fold (schema/0007_history_fold.sql), else the last
 * folded. */
static const char dev_sql[] =
    "SELECT d.id,b.id FROM hist_dev d LEFT JOIN hist_bind b ON b.id=ifnull((SELECT "
    "max(t.id) FROM hist_bind t WHERE t.id>" HIST_FOLDED " AND "
    "t.dev=d.id),(SELECT x.id FROM hist_ix_dev x WHERE x.dev=d.id ORDER BY x.from_ms DESC,x.id "
    "DESC LIMIT 1)) AND b.to_ms=" HIST_OPEN " WHERE d.resource=?1 AND d.device_id=?2";

/* An interval a replay opened, written when the replay ends: most close
 * before, and are written closed. */
struct pend {
    uint64_t id;           /* its hist_bind id */
    uint64_t dev;          /* hist_dev id */
    uint64_t pod;          /* hist_pod id */
    const char *uid;       /* the pod instance's; borrowed from the operation's bytes */
    const char *container; /* borrowed likewise */
    int64_t from_ms;       /* its start */
    int64_t to_ms;         /* its end, HIST_OPEN_MS while open */
    struct hent *d;        /* its device: told the id of the one left open */
};

/* What a replay has opened and not written yet: struct pends, one after
 * another. */
struct replay {
    struct strbuf b; /* the struct pends, in id order */
};

static size_t pend_count(const struct replay *r)
{
    return r->b.len / sizeof(struct pend);
}

static struct pend *pend_at(struct replay *r, size_t i)
{
    return (struct pend *)(void *)r->b.buf + i;
}

static err_t pend_write(struct store *st, struct replay *r);

/* Device 'res' 'id' as known, else as read; with 'add', interned when it
 * has no row (without, *out is NULL then: no row, no interval). Knowing
 * one more may forget all: what the replay holds is written first. */
static err_t dev_get(struct store *st, struct replay *r, const char *res, const char *id, bool add,
                     struct hent **out)
{
    struct hist_writer *w = st->hist.w;
    struct hkey k;
    sqlite3_stmt *s = NULL;
    err_t rc;

    hkey_init(&k, res, id);
    *out = hmap_get(&w->devs, &k);
    if (*out)
        return ERR_OK;
    rc = w->devs.n == KNOWN_MAX ? pend_write(st, r) : ERR_OK;
    if (!rc)
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

/* Close the open interval of device 'd', if any, at 'ms': in the replay's
 * hands, or written. */
static err_t dev_close(struct store *st, struct replay *r, struct hent *d, int64_t ms)
{
    err_t rc;

    if (!d)
        return ERR_OK;
    if (d->pend) {
        pend_at(r, d->pend - 1)->to_ms = ms;
        d->pend = 0;
        return ERR_OK;
    }
    if (!d->open)
        return ERR_OK;
    rc = db_exec(st->commit.db, "UPDATE hist_bind SET to_ms=? WHERE id=?", "iu", ms, d->open);
    d->open = 0;
    return rc;
}

/* Write the intervals the replay opened, in id order (appended); a device
 * whose interval is left open knows it by its id. */
static err_t pend_write(struct store *st, struct replay *r)
{
    size_t i;
    err_t rc = ERR_OK;

    for (i = 0; !rc && i < pend_count(r); i++) {
        struct pend *p = pend_at(r, i);

        rc = db_exec(st->commit.db,
                     "INSERT INTO hist_bind(id,dev,pod,uid,container,from_ms,to_ms) "
                     "VALUES(?,?,?,?,?,?,?)",
                     "uuuttii", p->id, p->dev, p->pod, p->uid, p->container, p->from_ms, p->to_ms);
        if (!rc && p->to_ms == HIST_OPEN_MS && p->d->pend == i + 1) {
            p->d->open = p->id;
            p->d->pend = 0;
        }
    }
    r->b.len = 0;
    return rc;
}

/* Apply operation 'op': the device's interval closes, and for 'B' one
 * opens, at the operation's time. */
static err_t op_apply(struct store *st, struct replay *r, const struct hist_op *op)
{
    struct hent *d = NULL;
    uint64_t pod = 0;
    err_t rc = dev_get(st, r, op->text[0], op->text[1], op->kind == 'B', &d);

    if (!rc)
        rc = dev_close(st, r, d, op->ms);
    if (rc || op->kind != 'B')
        return rc;
    rc = st->hist.w->pods.n == KNOWN_MAX ? pend_write(st, r) : ERR_OK;
    if (!rc)
        rc = pod_get(st, op->text[2], op->text[3], &pod);
    if (!rc) {
        struct pend p = {st_hist_next_id_at(st, 0, (uint64_t)op->ms),
                         d->id,
                         pod,
                         op->text[4],
                         op->text[5],
                         op->ms,
                         HIST_OPEN_MS,
                         d};

        rc = strbuf_add(&r->b, &p, sizeof(p));
    }
    if (!rc)
        d->pend = pend_count(r);
    return rc;
}

/* Apply the operations of one row, bytes [p, end). Bytes no writer made
 * (a damaged file) are logged, counted with the failed history steps and
 * skipped: a write that replays must not fail for them. */
static err_t ops_apply(struct store *st, struct replay *r, const char *p, const char *end)
{
    struct hist_op op;
    err_t rc = ERR_OK;

    st->hist.w->wrote[1] = true; /* rolled back, the writer forgets what it learnt */
    while (!rc && p < end) {
        if (!op_get(&p, end, &op)) {
            log_err("a change log row holds history operations podresd cannot read; skipped");
            atomic_fetch_add_explicit(&st->hist_failures, 1, memory_order_relaxed);
            return ERR_OK;
        }
        rc = op_apply(st, r, &op);
    }
    return rc;
}

/* The 'hist' of the change log's rows with revisions in (lo, hi], slots
 * [a, b] (in slot order), or all of them with 'b' UINT64_MAX (in revision
 * order), appended to 'r', each after its size (a size_t). */
static err_t rows_read(struct store *st, uint64_t lo, uint64_t hi, uint64_t a, uint64_t b,
                       struct strbuf *r)
{
    static const char *const sql[] = {
        "SELECT hist FROM changes WHERE slot>=?1 AND slot<=?2 AND revision>?3 AND revision<=?4 "
        "AND hist IS NOT NULL ORDER BY slot",
        "SELECT hist FROM changes WHERE revision>?3 AND revision<=?4 AND hist IS NOT NULL ORDER "
        "BY revision"};
    sqlite3_stmt *s = NULL;
    bool row = true;
    err_t rc = db_prep(st->commit.db, &s, sql[b == UINT64_MAX], "uuuu", a, b, lo, hi);

    while (!rc) {
        size_t n;

        rc = db_step(st->commit.db, s, &row);
        if (rc || !row)
            break;
        n = (size_t)sqlite3_column_bytes(s, 0);
        rc = strbuf_add(r, &n, sizeof(n));
        if (!rc)
            rc = strbuf_add(r, sqlite3_column_blob(s, 0), n);
    }
    db_done(s);
    return rc;
}

/* Apply the operations of the rows in 'rows' (rows_read), in order; the
 * intervals opened are written at the end. */
static err_t rows_apply(struct store *st, const struct strbuf *rows)
{
    struct replay r = {{NULL, 0, 0}};
    size_t at = 0, n;
    err_t rc = ERR_OK;

    while (!rc && at < rows->len) {
        memcpy(&n, rows->buf + at, sizeof(n));
        at += sizeof(n);
        rc = ops_apply(st, &r, rows->buf + at, rows->buf + at + n);
        at += n;
    }
    if (!rc)
        rc = pend_write(st, &r);
    strbuf_release(&r.b);
    return rc;
}

/* The mark is 'rev': ops up to it are applied, the ring may overwrite
 * them. */
static void replayed(struct store *st, uint64_t rev)
{
    st->hist.w->mark = rev;
    st->hist.w->mark_stale = false;
    st->log.kept = rev;
}

/* Apply every operation of the log's rows past the mark
 * ('hist_replayed') up to revision 'hi', and move the mark there. The
 * rows are read by slot: a ring's revisions lo..hi are one run of slots,
 * or two when they wrap; 'all' reads every row (at open, before the ring
 * is laid out for another size). */
static err_t replay_to(struct store *st, uint64_t hi, bool all)
{
    struct hist_writer *w = st->hist.w;
    uint64_t ring = st->log.ring, lo = w->mark;
    struct strbuf rows = {NULL, 0, 0};
    err_t rc = ERR_OK;

    if (w->mark_stale)
        rc = db_get_u64(st->commit.db, &lo, "SELECT value FROM meta WHERE key='hist_replayed'",
                        NULL);
    if (rc || lo >= hi) {
        if (!rc)
            replayed(st, lo);
        return rc;
    }
    if (all || hi - lo >= ring)
        rc = rows_read(st, lo, hi, 0, UINT64_MAX, &rows);
    else if ((lo + 1) % ring <= hi % ring)
        rc = rows_read(st, lo, hi, (lo + 1) % ring, hi % ring, &rows);
    else {
        rc = rows_read(st, lo, hi, (lo + 1) % ring, ring - 1, &rows);
        if (!rc)
            rc = rows_read(st, lo, hi, 0, hi % ring, &rows);
    }
    w->wrote[1] = true; /* rolled back, the mark and what was learnt go back */
    rc = rc ? rc : rows_apply(st, &rows);
    if (!rc)
        rc = db_exec(st->commit.db, "UPDATE meta SET value=? WHERE key='hist_replayed'", "u", hi);
    if (!rc)
        replayed(st, hi);
    strbuf_release(&rows);
    return rc;
}

static err_t replay(struct store *st)
{
    return replay_to(st, st->log.tx_rev, false);
}

/* A write of its own that replays (st_hist_sync). Committed even when
 * there was nothing to apply (a COMMIT that changed nothing writes
 * nothing): its commit publishes the mark (batch_end). */
static err_t replay_write(struct store *st, void *ctx)
{
    (void)ctx;
    return replay(st);
}

err_t st_hist_replay(struct store *st)
{
    return st->hist.w ? replay(st) : ERR_OK;
}

/* The change log's keeper: a row is about to be overwritten. */
static err_t keep(void *arg, uint64_t rev)
{
    (void)rev;
    return replay(arg);
}

err_t st_hist_bind(struct store *st, const char *res, const char *id, const char *ns,
                   const char *pod, const char *uid, const char *container)
{
    const char *text[OP_TEXTS_B] = {res, id, ns, pod, uid, container};

    if (!st->hist.w || !pod[0])
        return ERR_OK;
    return op_put(st, 'B', text, OP_TEXTS_B);
}

err_t st_hist_unbind(struct store *st, const char *res, const char *id)
{
    const char *text[OP_TEXTS_U] = {res, id};

    if (!st->hist.w)
        return ERR_OK;
    return op_put(st, 'U', text, OP_TEXTS_U);
}

err_t st_hist_after_write(struct store *st)
{
    struct hist_writer *w = st->hist.w;
    struct strbuf *left = &st->log.hist;
    struct replay r = {{NULL, 0, 0}};
    err_t rc;

    if (!w)
        return ERR_OK;
    if (st->log.hist_rev > atomic_load_explicit(&w->pending, memory_order_relaxed))
        atomic_store_explicit(&w->pending, st->log.hist_rev, memory_order_release);
    if (!left->len)
        return st->log.tx_rev - w->mark >= REPLAY_LAG ? replay(st) : ERR_OK;
    /* operations no row took (the write emitted no event after them):
       applied here, after every one before them */
    rc = replay(st);
    if (!rc)
        rc = ops_apply(st, &r, left->buf, left->buf + left->len);
    if (!rc)
        rc = pend_write(st, &r);
    strbuf_release(&r.b);
    left->len = 0;
    return rc;
}

err_t st_hist_sync(struct store *st)
{
    struct hist_writer *w = st->hist.w;

    if (!w || atomic_load_explicit(&w->pending, memory_order_acquire) <=
                  atomic_load_explicit(&w->published, memory_order_acquire))
        return ERR_OK;
    return st_write(st, replay_write, NULL);
}

/* ---- setting up ---- */

/* The last interval id given of each table, and the time of writes from
 * them: times never go back across a restart, nor binding ids below the
 * fold's (a pruned row's id is not given again). */
static err_t last_id(struct store *st)
{
    uint64_t *last = st->hist.last_id;
    err_t rc = db_get_u64(st->commit.db, &last[0],
                          "SELECT max(ifnull((SELECT max(id) FROM hist_bind),0),"
                          "ifnull(" HIST_FOLDED ",0))",
                          NULL);

    if (!rc)
        rc = db_get_u64(st->commit.db, &last[1], "SELECT ifnull(max(id),0) FROM hist_health", NULL);
    st->commit.now_ms = (last[0] > last[1] ? last[0] : last[1]) >> 10;
    return rc;
}

/* At open, before the ring is laid out again (changelog_open, which may
 * drop rows): apply what an earlier run left in the log, in a transaction
 * of its own, when it left any. The log's head is found as changelog_open
 * finds it, near the mark, in the ring the file is laid out for ('ring'
 * 0: not laid out yet, slot = revision). */
static err_t replay_open(struct store *st)
{
    struct hist_writer *w = st->hist.w;
    uint64_t was = 0, hi = 0;
    err_t rc = db_get_u64(st->commit.db, &w->mark,
                          "SELECT value FROM meta WHERE key='hist_replayed'", NULL);
    int e;

    if (!rc)
        rc = db_get_u64(st->commit.db, &was, "SELECT value FROM meta WHERE key='ring'", NULL);
    if (!rc)
        rc = changelog_head(st->commit.db, was ? was : UINT64_MAX, w->mark, &hi);
    if (rc)
        return rc;
    if (w->mark < hi) {
        e = sqlite3_exec(st->commit.db, "BEGIN IMMEDIATE", NULL, NULL, NULL);
        if (e != SQLITE_OK)
            return db_err(st->commit.db, e, "begin a write transaction");
        rc = replay_to(st, hi, true);
        e = sqlite3_exec(st->commit.db, rc ? "ROLLBACK" : "COMMIT", NULL, NULL, NULL);
        if (!rc && e != SQLITE_OK)
            rc = db_err(st->commit.db, e, "commit");
        if (rc) {
            forget(w);
            mark_lost(st);
            return rc;
        }
    }
    replayed(st, w->mark);
    w->wrote[1] = false;
    atomic_store_explicit(&w->published, w->mark, memory_order_release);
    if (st->hist.last_id[0] >> 10 > st->commit.now_ms)
        st->commit.now_ms = st->hist.last_id[0] >> 10;
    return ERR_OK;
}

err_t st_hist_attach(struct store *st)
{
    struct commit_hooks h = {st, member_end, batch_end, release};
    err_t e;
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
    st->log.keeper = (struct changelog_keeper){st, keep};
    e = last_id(st);
    return e ? e : replay_open(st);
}
