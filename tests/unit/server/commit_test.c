/* SPDX-License-Identifier: Apache-2.0 */
/* commit_test.c - group commit (commit.c) and the checkpoints
 * (checkpoint.c) through the store: writes from many threads share
 * COMMITs, a failed member fails alone, a combiner hands over, SQLite
 * dropping a batch, what the history's writer knows across both, and the
 * checkpoint after a batch (store_fx.h). */
#include "store_fx.h"

/* ---- group commit ---- */

#define GC_THREADS 8
#define GC_EACH 32

struct gc_arg {
    struct store *st;
    int t;                 /* thread number */
    err_t ok_rc[GC_EACH];  /* result of each bind that must succeed */
    err_t bad_rc[GC_EACH]; /* result of each bind of the held device */
    uint64_t rev[GC_EACH]; /* revision in each successful answer */
};

static err_t gc_bind(struct store *st, const char *name, const char *dev, uint64_t *rev)
{
    char body[256];
    struct error e = {0};
    struct store_outcome did;
    json_t *b, *cs = NULL, *out = NULL;
    const char *uid = NULL;
    char *text = NULL;
    size_t len = 0;
    err_t rc;

    snprintf(body, sizeof(body),
             "{\"uid\":\"u-%s\",\"containers\":[{\"name\":\"c\",\"devices\":[{\"resourceName\":"
             "\"" NIC "\",\"deviceIds\":[\"%s\"]}]}]}",
             name, dev);
    b = json_loads(body, 0, NULL);
    rc = b ? validate_pod_put(b, &uid, &cs, NULL) : ERR_NOMEM;
    if (!rc)
        rc = store_pod_bind(st, &(struct store_pod){"gc", name, uid}, cs, &e, &text, &len, &did);
    if (!rc)
        out = json_loadb(text, len, 0, NULL);
    free(text);
    if (!rc && rev)
        *rev = (uint64_t)json_integer_value(json_object_get(out, "revision"));
    json_decref(out);
    json_decref(cs);
    json_decref(b);
    return rc;
}

static void *gc_writer(void *p)
{
    struct gc_arg *a = p;
    char name[32], dev[32];
    int i;

    for (i = 0; i < GC_EACH; i++) {
        snprintf(name, sizeof(name), "p-%d-%d", a->t, i);
        snprintf(dev, sizeof(dev), "n-%d", a->t * GC_EACH + i);
        a->ok_rc[i] = gc_bind(a->st, name, dev, &a->rev[i]);
        snprintf(name, sizeof(name), "x-%d-%d", a->t, i);
        a->bad_rc[i] = gc_bind(a->st, name, "held", NULL);
    }
    return NULL;
}

/* Two thirds of them succeed: more than a combiner's batches in a row
 * (COMMIT_COMBINE full batches of COMMIT_BATCH_MAX members), so the first
 * combiner runs that many and one heir the rest */
#define CB_THREADS (COMMIT_COMBINE * COMMIT_BATCH_MAX * 3 / 2 + 60)

struct cb_arg {
    struct store *st;
    int t;        /* thread number */
    err_t rc;     /* its bind's result */
    uint64_t rev; /* the revision in its answer */
};

static void *cb_writer(void *p)
{
    struct cb_arg *a = p;
    char name[32], dev[32];

    snprintf(name, sizeof(name), "c-%d", a->t);
    snprintf(dev, sizeof(dev), "n-%d", a->t);
    /* every third one binds the held device and must fail alone */
    a->rc = gc_bind(a->st, name, a->t % 3 == 0 ? "held" : dev, &a->rev);
    return NULL;
}

static size_t queued(struct store *st)
{
    struct commit_op *op;
    size_t n = 0;

    pthread_mutex_lock(&st->commit.qmu);
    for (op = st->commit.qhead; op; op = op->next)
        n++;
    pthread_mutex_unlock(&st->commit.qmu);
    return n;
}

/* The combiner: with the write lock held by the test, 100 binds queue up
 * behind one combiner; released, it runs 64 in one batch and wakes the next
 * to run the rest. Failed members fail alone, the others are all there,
 * and a device write arriving meanwhile is queued behind them. */
/* st_write ops for test_dropped_batch: write a meta row, or have SQLite
 * drop the whole open batch (as it does on some I/O errors) and fail. */
struct drop_arg {
    struct store *st;
    const char *key; /* the row to write, or NULL: drop the batch */
    err_t rc;        /* st_write's result */
};

static err_t drop_op(struct store *st, void *ctx)
{
    struct drop_arg *a = ctx;

    if (!a->key) {
        sqlite3_exec(st->commit.db, "ROLLBACK;", NULL, NULL, NULL);
        return ERR_IO;
    }
    return db_exec(st->commit.db, "INSERT INTO meta(key,value) VALUES(?,1)", "t", a->key);
}

static void *drop_writer(void *p)
{
    struct drop_arg *a = p;

    a->rc = st_write(a->st, drop_op, a);
    return NULL;
}

/* 1 when the meta row 'key' exists, 0 when not, -1 on an error. */
static int meta_has(struct store *st, const char *key)
{
    sqlite3_stmt *s = NULL;
    bool row = false;
    err_t rc;

    pthread_mutex_lock(&st->commit.mu);
    rc = db_prep(st->commit.db, &s, "SELECT 1 FROM meta WHERE key=?", "t", key);
    if (!rc)
        rc = db_step(st->commit.db, s, &row);
    db_done(s);
    pthread_mutex_unlock(&st->commit.mu);
    return rc ? -1 : row;
}

/* Start a thread of 'fn' for each of the 'n' arguments at 'args' ('size'
 * bytes apart) while the write lock is held, each queued before the next
 * starts, so they run in that order in one combiner's batches; then let go
 * and join them. */
static void run_queued(struct store *st, void *(*fn)(void *), void *args, size_t size, int n)
{
    pthread_t th[8];
    int i, j;

    CHECK(n <= (int)ARRAY_SIZE(th));
    pthread_mutex_lock(&st->commit.mu);
    for (i = 0; i < n && i < (int)ARRAY_SIZE(th); i++) {
        CHECK_OK(pthread_create(&th[i], NULL, fn, (char *)args + (size_t)i * size));
        for (j = 0; j < 2000 && queued(st) < (size_t)i + 1; j++)
            usleep(1000);
    }
    CHECK_EQ_INT(queued(st), n);
    pthread_mutex_unlock(&st->commit.mu);
    while (i-- > 0)
        pthread_join(th[i], NULL);
}

/* A member after which SQLite has dropped the batch: the members before it
 * in that batch are answered 503 and their writes are gone, it gets its own
 * error, and the writes queued after it run in a new batch. */
static void test_dropped_batch(void)
{
    struct fx f;
    struct drop_arg a[3];

    if (fx_open(&f, 1000))
        return;
    a[0] = (struct drop_arg){f.st, "before", ERR_OK};
    a[1] = (struct drop_arg){f.st, NULL, ERR_OK};
    a[2] = (struct drop_arg){f.st, "after", ERR_OK};
    run_queued(f.st, drop_writer, a, sizeof(a[0]), 3);
    CHECK_EQ_INT(a[0].rc, ERR_UNAVAIL);
    CHECK_EQ_INT(a[1].rc, ERR_IO);
    CHECK_OK(a[2].rc);
    CHECK_EQ_INT(meta_has(f.st, "before"), 0);
    CHECK_EQ_INT(meta_has(f.st, "after"), 1);
    fx_close(&f);
}

struct first_arg {
    struct store *st;
    const char *key; /* the row to write */
    err_t fail;      /* then fail with this, or ERR_OK */
    bool discard;    /* then ask to be rolled back */
    err_t rc;        /* st_write's result */
};

static err_t first_op(struct store *st, void *ctx)
{
    struct first_arg *a = ctx;
    err_t rc = db_exec(st->commit.db, "INSERT INTO meta(key,value) VALUES(?,1)", "t", a->key);

    if (!rc && a->discard)
        st_write_discard(st);
    return rc ? rc : a->fail;
}

static void *first_writer(void *p)
{
    struct first_arg *a = p;

    a->rc = st_write(a->st, first_op, a);
    return NULL;
}

/* A member that opens the batch has no savepoint: failing, or discarding
 * itself, it rolls the batch back, and the next write opens a new one. A
 * later member that fails goes back to its savepoint only. Queued: a (fails
 * first), b (discards itself, first again), c (first, good), d (fails after
 * c): only c's row is written, in one COMMIT, and no transaction is left. */
static void test_first_member(void)
{
    struct fx f;
    struct first_arg a[4];
    static const char *const keys[] = {"a", "b", "c", "d"};
    uint64_t commits0;
    int i, open_tx;

    if (fx_open(&f, 1000))
        return;
    for (i = 0; i < 4; i++)
        a[i] = (struct first_arg){f.st, keys[i], i == 0 || i == 3 ? ERR_CONFLICT : ERR_OK, i == 1,
                                  ERR_OK};
    commits0 = f.st->commit.ncommits;
    run_queued(f.st, first_writer, a, sizeof(a[0]), 4);
    CHECK_EQ_INT(a[0].rc, ERR_CONFLICT);
    CHECK_OK(a[1].rc);
    CHECK_OK(a[2].rc);
    CHECK_EQ_INT(a[3].rc, ERR_CONFLICT);
    CHECK_EQ_INT(meta_has(f.st, "a"), 0);
    CHECK_EQ_INT(meta_has(f.st, "b"), 0);
    CHECK_EQ_INT(meta_has(f.st, "c"), 1);
    CHECK_EQ_INT(meta_has(f.st, "d"), 0);
    CHECK_EQ_INT(f.st->commit.ncommits - commits0, 1);
    pthread_mutex_lock(&f.st->commit.mu);
    open_tx = !sqlite3_get_autocommit(f.st->commit.db) || f.st->commit.open;
    pthread_mutex_unlock(&f.st->commit.mu);
    CHECK_EQ_INT(open_tx, 0);
    /* a lone failing write, then a lone good one */
    a[0].key = "e";
    first_writer(&a[0]);
    CHECK_EQ_INT(a[0].rc, ERR_CONFLICT);
    a[2].key = "f";
    first_writer(&a[2]);
    CHECK_OK(a[2].rc);
    CHECK_EQ_INT(meta_has(f.st, "e"), 0);
    CHECK_EQ_INT(meta_has(f.st, "f"), 1);
    fx_close(&f);
}

/* ---- what the history's writer knows, across rollbacks ---- */

/* An st_write op for the history tests: let device 'unbind' go, bind
 * device 'bind' to pod ns/h of 'uid' (each if not NULL), then fail with
 * 'fail' or, with 'drop', have SQLite drop the batch. */
struct hist_arg {
    struct store *st;
    const char *unbind, *bind, *uid;
    err_t fail;
    bool drop;
    err_t rc; /* st_write's result */
};

static err_t hist_op(struct store *st, void *ctx)
{
    struct hist_arg *a = ctx;
    err_t rc = a->unbind ? st_hist_unbind(st, GPU, a->unbind) : ERR_OK;

    if (!rc && a->bind)
        rc = st_hist_bind(st, GPU, a->bind, "ns", "h", a->uid, "c");
    if (!rc && a->drop) {
        sqlite3_exec(st->commit.db, "ROLLBACK;", NULL, NULL, NULL);
        return ERR_IO;
    }
    return rc ? rc : a->fail;
}

static void *hist_writer(void *p)
{
    struct hist_arg *a = p;

    a->rc = st_write(a->st, hist_op, a);
    return NULL;
}

/* The rows of 'sql' on the write connection, "a,b;c,d", into 'out'. */
static const char *rows_of(struct store *st, const char *sql, char *out, size_t cap)
{
    sqlite3_stmt *s = NULL;
    size_t used = 0;
    bool row = true;
    int i;

    out[0] = '\0';
    pthread_mutex_lock(&st->commit.mu);
    CHECK_OK(db_prep(st->commit.db, &s, sql, NULL));
    for (;;) {
        CHECK_OK(db_step(st->commit.db, s, &row));
        if (!row)
            break;
        for (i = 0; i < sqlite3_column_count(s) && used < cap; i++)
            used += (size_t)snprintf(out + used, cap - used, "%s%s",
                                     i      ? ","
                                     : used ? ";"
                                            : "",
                                     db_text(s, i));
    }
    db_done(s);
    pthread_mutex_unlock(&st->commit.mu);
    return out;
}

/* The intervals as dev,pod,uid,container,open; pods; and whether hist_usage
 * holds exactly the closed intervals' device-milliseconds (once folded:
 * usage_of()). */
/* (an open interval ends at 2^47 - 1 ms: schema/0008_history_open.sql) */
#define HIST_ROWS "SELECT dev,pod,uid,container,to_ms=140737488355327 FROM hist_bind ORDER BY id"
#define HIST_PODS "SELECT id,name,uid FROM hist_pod ORDER BY id"
#define HIST_USAGE                                                                                 \
    "SELECT ifnull((SELECT ms FROM hist_usage),-1)=ifnull((SELECT sum(to_ms-from_ms) FROM "        \
    "hist_bind WHERE to_ms<140737488355327),-1)"

/* HIST_USAGE once a pruning step folded every interval. */
static const char *usage_of(struct store *st, char *out, size_t cap)
{
    bool more = false;

    CHECK_OK(store_history_prune(st, (int64_t)clock_wall_ms(), 100ULL * 365 * 86400000, 0, &more));
    CHECK(!more);
    return rows_of(st, HIST_USAGE, out, cap);
}

/* Queued in one batch: a binds x (kept); b binds y with a new pod
 * instance and fails (back to its savepoint: y's and the instance's rows
 * and its interval are gone); c lets x go and binds y (kept). Then alone:
 * d lets y go, e binds x again with the uid of the pod's row. The writer
 * forgot what b taught it, so c interns y anew, finds the pod's row (one
 * for every instance, its uid in the interval) and closes nothing of b's. */
static void test_hist_member_undone(void)
{
    struct fx f;
    struct hist_arg a[3];
    char s[256];

    if (fx_open(&f, 1000))
        return;
    f.st->hist.rows[0] = 0; /* counted: the cap's count follows the rows */
    a[0] = (struct hist_arg){.st = f.st, .bind = "x", .uid = "u1"};
    a[1] = (struct hist_arg){.st = f.st, .bind = "y", .uid = "u2", .fail = ERR_CONFLICT};
    a[2] = (struct hist_arg){.st = f.st, .unbind = "x", .bind = "y", .uid = "u3"};
    run_queued(f.st, hist_writer, a, sizeof(a[0]), 3);
    CHECK_OK(a[0].rc);
    CHECK_EQ_INT(a[1].rc, ERR_CONFLICT);
    CHECK_OK(a[2].rc);
    a[0] = (struct hist_arg){.st = f.st, .unbind = "y"};
    hist_writer(&a[0]);
    CHECK_OK(a[0].rc);
    /* the kubelet's instance: uid "" */
    a[0] = (struct hist_arg){.st = f.st, .bind = "x", .uid = ""};
    hist_writer(&a[0]);
    CHECK_OK(a[0].rc);
    CHECK_STREQ(rows_of(f.st, "SELECT id,device_id FROM hist_dev ORDER BY id", s, sizeof(s)),
                "1,x;2,y");
    CHECK_STREQ(rows_of(f.st, HIST_PODS, s, sizeof(s)), "1,h,");
    CHECK_STREQ(rows_of(f.st, HIST_ROWS, s, sizeof(s)), "1,1,u1,c,0;2,1,u3,c,0;1,1,,c,1");
    CHECK_STREQ(usage_of(f.st, s, sizeof(s)), "1");
    CHECK_EQ_INT(f.st->hist.rows[0], 3); /* b's interval rolled back, not counted */
    fx_close(&f);
}

/* a binds x (kept); b binds z, then SQLite drops the batch: a's interval
 * is gone too. Then alone: c binds x, d lets it go. The writer forgot the
 * batch: c opens x's interval without closing a's, which never was. */
static void test_hist_batch_dropped(void)
{
    struct fx f;
    struct hist_arg a[2];
    char s[256];

    if (fx_open(&f, 1000))
        return;
    f.st->hist.rows[0] = 0;
    a[0] = (struct hist_arg){.st = f.st, .bind = "x", .uid = "u1"};
    a[1] = (struct hist_arg){.st = f.st, .bind = "z", .uid = "u2", .drop = true};
    run_queued(f.st, hist_writer, a, sizeof(a[0]), 2);
    CHECK_EQ_INT(a[0].rc, ERR_UNAVAIL);
    CHECK_EQ_INT(a[1].rc, ERR_IO);
    CHECK_STREQ(rows_of(f.st, HIST_ROWS, s, sizeof(s)), "");
    a[0] = (struct hist_arg){.st = f.st, .bind = "x", .uid = "u3"};
    hist_writer(&a[0]);
    CHECK_OK(a[0].rc);
    CHECK_STREQ(usage_of(f.st, s, sizeof(s)), "1"); /* nothing closed, no row */
    a[0] = (struct hist_arg){.st = f.st, .unbind = "x"};
    hist_writer(&a[0]);
    CHECK_OK(a[0].rc);
    CHECK_STREQ(rows_of(f.st, HIST_PODS, s, sizeof(s)), "1,h,");
    CHECK_STREQ(rows_of(f.st, HIST_ROWS, s, sizeof(s)), "1,1,u3,c,0");
    CHECK_STREQ(usage_of(f.st, s, sizeof(s)), "1");
    CHECK_EQ_INT(f.st->hist.rows[0], 1); /* the dropped batch's two are not counted */
    fx_close(&f);
}

static void test_combiner(void)
{
    struct fx f;
    struct cb_arg args[CB_THREADS];
    pthread_t th[CB_THREADS];
    struct strbuf body = STRBUF_INIT;
    json_t *pod;
    uint64_t rev0, heirs0, commits0, cur = 0, chain = 0;
    char *buf = NULL, *text, sum[64], name[32];
    size_t len = 0, cap = 0;
    int i, t, ok = 0;

    if (fx_open(&f, 100000))
        return;
    CHECK_OK(strbuf_printf(&body, "{\"devices\":[{\"id\":\"held\"}"));
    for (i = 0; i < CB_THREADS; i++)
        CHECK_OK(strbuf_printf(&body, ",{\"id\":\"n-%d\"}", i));
    CHECK_OK(strbuf_printf(&body, "]}"));
    text = strbuf_detach(&body, &len);
    CHECK_OK(put_devices(&f, NIC, text, NULL));
    free(text);
    len = 0;
    CHECK_OK(gc_bind(f.st, "holder", "held", NULL));
    fx_some_events(&f, 1);
    rev0 = store_revision(f.st);
    heirs0 = f.st->commit.nheirs;
    commits0 = f.st->commit.ncommits;

    pthread_mutex_lock(&f.st->commit.mu);
    for (t = 0; t < CB_THREADS; t++) {
        args[t] = (struct cb_arg){.st = f.st, .t = t};
        CHECK_OK(pthread_create(&th[t], NULL, cb_writer, &args[t]));
    }
    for (i = 0; i < 2000 && queued(f.st) < CB_THREADS; i++)
        usleep(1000);
    CHECK_EQ_INT(queued(f.st), CB_THREADS);
    pthread_mutex_unlock(&f.st->commit.mu);
    /* a device write, while the queue runs */
    CHECK_OK(put_devices(&f, GPU, FOUR_GPUS, NULL));
    for (t = 0; t < CB_THREADS; t++)
        pthread_join(th[t], NULL);

    /* the first combiner ran COMMIT_COMBINE full batches without handing
     * over, then woke exactly one heir for the rest (and the device write,
     * unless that came after, on its own) */
    CHECK_EQ_INT(f.st->commit.nheirs - heirs0, 1);
    CHECK(f.st->commit.ncommits - commits0 >= 3 && f.st->commit.ncommits - commits0 <= 4);
    for (t = 0; t < CB_THREADS; t++) {
        if (t % 3 == 0) {
            CHECK_EQ_INT(args[t].rc, ERR_CONFLICT);
            continue;
        }
        CHECK_OK(args[t].rc);
        CHECK(args[t].rev > rev0 && args[t].rev <= store_revision(f.st));
        ok++;
        snprintf(name, sizeof(name), "c-%d", t);
        pod = NULL;
        CHECK_OK(store_pod_get(f.st, "gc", name, &pod));
        json_decref(pod);
    }
    for (t = 0; t < CB_THREADS; t += 3) {
        snprintf(name, sizeof(name), "c-%d", t);
        pod = NULL;
        CHECK_EQ_INT(store_pod_get(f.st, "gc", name, &pod), ERR_NOTFOUND);
    }
    /* each good bind: the pod and its device; the four GPUs */
    fx_some_events(&f, 2 * ok + 4);
    CHECK_OK(store_changes_after(f.st, &cur, NULL, 100000, &buf, &len, &cap));
    CHECK_EQ_INT(summarise(buf, len, &chain, sum, sizeof(sum)), (int)store_revision(f.st));
    CHECK_EQ_INT(cur, store_revision(f.st));
    free(buf);
    fx_close(&f);
}

/* Writers from 8 threads share COMMITs (fewer commits than writes), every
 * acknowledged write is there (also after a reopen), every refused one
 * (a conflict inside a batch) left nothing behind, and the revisions of the
 * change log and the feed are contiguous. */
static void test_group_commit(void)
{
    struct fx f;
    struct store_opts o = {.history = 100000};
    struct gc_arg args[GC_THREADS];
    pthread_t th[GC_THREADS];
    struct strbuf body = STRBUF_INIT;
    struct store_stats stats;
    json_t *pod;
    uint64_t rev0, cur = 0, chain = 0;
    char *buf = NULL, *text, sum[64], name[32], b[64];
    size_t len = 0, cap = 0;
    int i, t, nchanges;

    if (fx_open(&f, 100000))
        return;
    CHECK_OK(strbuf_printf(&body, "{\"devices\":[{\"id\":\"held\"}"));
    for (i = 0; i < GC_THREADS * GC_EACH; i++)
        CHECK_OK(strbuf_printf(&body, ",{\"id\":\"n-%d\"}", i));
    for (i = 0; i < 200; i++)
        CHECK_OK(strbuf_printf(&body, ",{\"id\":\"s-%d\"}", i));
    CHECK_OK(strbuf_printf(&body, "]}"));
    text = strbuf_detach(&body, &len);
    CHECK_OK(put_devices(&f, NIC, text, NULL));
    free(text);
    len = 0;
    CHECK_OK(gc_bind(f.st, "holder", "held", NULL));
    fx_some_events(&f, 1);
    rev0 = store_revision(f.st);

    for (t = 0; t < GC_THREADS; t++) {
        memset(&args[t], 0, sizeof(args[t]));
        args[t].st = f.st;
        args[t].t = t;
        CHECK_OK(pthread_create(&th[t], NULL, gc_writer, &args[t]));
    }
    for (t = 0; t < GC_THREADS; t++)
        pthread_join(th[t], NULL);
    for (t = 0; t < GC_THREADS; t++) {
        for (i = 0; i < GC_EACH; i++) {
            CHECK_OK(args[t].ok_rc[i]);
            CHECK_EQ_INT(args[t].bad_rc[i], ERR_CONFLICT);
            CHECK(args[t].rev[i] > rev0 && args[t].rev[i] <= store_revision(f.st));
        }
    }
    /* each bind: the pod plus its device's holder change */
    fx_some_events(&f, 2 * GC_THREADS * GC_EACH);
    CHECK_OK(store_stats(f.st, &stats));
    CHECK(stats.writes >= GC_THREADS * GC_EACH);
    printf("# group commit: %llu writes in %llu commits\n", (unsigned long long)stats.writes,
           (unsigned long long)stats.commits);
    CHECK(stats.commits < stats.writes);
    store_stats_release(&stats);
    /* 200 more writes, each its own COMMIT of several pages: over 1000 WAL
     * frames, so a checkpoint has run (or the thread's soon will) */
    for (i = 0; i < 200; i++) {
        snprintf(name, sizeof(name), "s-%d", i);
        CHECK_OK(gc_bind(f.st, name, name, NULL));
    }
    fx_some_events(&f, 400);
    for (i = 0; i < 100; i++) {
        CHECK_OK(store_stats(f.st, &stats));
        t = (int)stats.checkpoints;
        store_stats_release(&stats);
        if (t > 0)
            break;
        usleep(50 * 1000);
    }
    CHECK(t > 0);
    CHECK_OK(store_changes_after(f.st, &cur, NULL, 100000, &buf, &len, &cap));
    nchanges = summarise(buf, len, &chain, sum, sizeof(sum));
    CHECK_EQ_INT(nchanges, (int)store_revision(f.st));
    CHECK_EQ_INT(cur, store_revision(f.st));
    free(buf);

    rev0 = store_revision(f.st);
    fx_close_store(&f);
    o.path = f.path;
    CHECK_OK(store_open(&o, &f.st));
    if (!f.st)
        return;
    fx_attach_feed(&f);
    CHECK_EQ_INT(store_revision(f.st), rev0);
    for (t = 0; t < GC_THREADS; t++) {
        for (i = 0; i < GC_EACH; i++) {
            snprintf(name, sizeof(name), "p-%d-%d", t, i);
            pod = NULL;
            CHECK_OK(store_pod_get(f.st, "gc", name, &pod));
            json_decref(pod);
            snprintf(name, sizeof(name), "x-%d-%d", t, i);
            pod = NULL;
            CHECK_EQ_INT(store_pod_get(f.st, "gc", name, &pod), ERR_NOTFOUND);
            json_decref(pod);
        }
    }
    CHECK_STREQ(holder(&f, NIC, "held", b, sizeof(b)), "gc/holder/c");
    fx_close(&f);
}

/* What the feed saw when a batch was published: whether a checkpoint was
 * still to come, and how many the write connection had done by then. */
struct ckpt_seen {
    struct store *st;
    int due;            /* publishes with a checkpoint still due */
    uint64_t done_then; /* nckpts_commit at the last such publish */
};

static void on_publish_ckpt(void *ctx)
{
    struct ckpt_seen *c = ctx;

    if (!c->st->commit.ckpt.due)
        return;
    c->due++;
    c->done_then = __atomic_load_n(&c->st->commit.ckpt.ndone_here, __ATOMIC_RELAXED);
}

/* One writer at a time: after the batch that takes the WAL past 1000 frames
 * has published its events, the write connection finds no write queued and
 * checkpoints itself, so a watcher never waits for a checkpoint; the log then
 * starts over, so the checkpoint thread is never woken. 400 binds of new pods
 * write 3-4 pages each: past 1000 frames, short of 4000 (where the write
 * connection checkpoints anyway). */
static void test_checkpoint_in_commit(void)
{
    struct ckpt_seen seen = {0};
    struct fx f;
    struct strbuf body = STRBUF_INIT;
    struct store_stats stats;
    uint64_t rev0;
    char *text, name[32];
    size_t len = 0;
    int i;

    if (fx_open(&f, 100000))
        return;
    CHECK_OK(strbuf_printf(&body, "{\"devices\":[{\"id\":\"s-0\"}"));
    for (i = 1; i < 400; i++)
        CHECK_OK(strbuf_printf(&body, ",{\"id\":\"s-%d\"}", i));
    CHECK_OK(strbuf_printf(&body, "]}"));
    text = strbuf_detach(&body, &len);
    CHECK_OK(put_devices(&f, NIC, text, NULL));
    free(text);
    rev0 = store_revision(f.st);
    seen.st = f.st;
    feed_set_notify(f.feed, on_publish_ckpt, &seen);
    for (i = 0; i < 400; i++) {
        snprintf(name, sizeof(name), "s-%d", i);
        CHECK_OK(gc_bind(f.st, name, name, NULL));
        if (seen.due) /* that write's checkpoint came after its events */
            CHECK(__atomic_load_n(&f.st->commit.ckpt.ndone_here, __ATOMIC_RELAXED) >
                  seen.done_then);
    }
    CHECK(seen.due >= 1);
    CHECK(!f.st->commit.ckpt.due);
    CHECK(__atomic_load_n(&f.st->commit.ckpt.ndone_here, __ATOMIC_RELAXED) >= 1);
    CHECK_OK(store_stats(f.st, &stats));
    CHECK_EQ_INT(stats.checkpoints,
                 (int)__atomic_load_n(&f.st->commit.ckpt.ndone_here, __ATOMIC_RELAXED));
    store_stats_release(&stats);
    CHECK_EQ_INT(store_revision(f.st), rev0 + 400 * 2); /* each: the pod, its device */
    fx_close(&f);
}

TEST_MAIN(quiet, test_combiner, test_dropped_batch, test_first_member, test_hist_member_undone,
          test_hist_batch_dropped, test_group_commit, test_checkpoint_in_commit)
