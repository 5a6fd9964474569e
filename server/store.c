/* SPDX-License-Identifier: Apache-2.0 */
/* store.c - opening the store (migrations included) and the group commit.
 * The views are in store_view.c, the writes in store_write.c. */
#define LOG_MOD "store"
#include "../common/common.h"
#include "../common/clock.h"
#include "sqlmem.h"
#include "store_int.h"

#include <inttypes.h>
#include <stdarg.h>

/* Generated from schema/NNNN_*.sql by the Makefile; NULL-terminated. */
extern const char *const store_migrations[];

int store_schema_version(void)
{
    int n = 0;

    while (store_migrations[n])
        n++;
    return n;
}

/* Apply every migration newer than PRAGMA user_version, all in one
 * transaction together with the new user_version: a database is at the
 * version it had or at the newest, never in between (a SIGKILL or a failing
 * migration leaves it as it was). */
static err_t migrate(sqlite3 *db)
{
    sqlite3_stmt *stmt = NULL;
    char sql[64];
    int ver = 0, n = store_schema_version(), i, rc;
    bool row;
    err_t e = db_prep(db, &stmt, "PRAGMA user_version", NULL);

    if (!e)
        e = db_step(db, stmt, &row);
    if (!e && row)
        ver = sqlite3_column_int(stmt, 0);
    db_done(stmt);
    if (e)
        return e;
    if (ver > n) {
        log_err("database schema version %d is newer than this podresd (%d)", ver, n);
        return ERR_DB;
    }
    if (ver == n)
        return ERR_OK;
    snprintf(sql, sizeof(sql), "PRAGMA user_version=%d; COMMIT;", n);
    rc = sqlite3_exec(db, "BEGIN IMMEDIATE;", NULL, NULL, NULL);
    for (i = ver; rc == SQLITE_OK && i < n; i++)
        rc = sqlite3_exec(db, store_migrations[i], NULL, NULL, NULL);
    if (rc == SQLITE_OK)
        rc = sqlite3_exec(db, sql, NULL, NULL, NULL);
    if (rc != SQLITE_OK) {
        e = db_err(db, rc, "apply a schema migration");
        sqlite3_exec(db, "ROLLBACK;", NULL, NULL, NULL);
        return e;
    }
    log_info("applied schema migrations %d to %d", ver + 1, n);
    return ERR_OK;
}

/* ---- the checkpointer ----
 * SQLite's automatic checkpoint runs inside the COMMIT that crosses 1000 WAL
 * frames: that write (and every write queued behind it) waits for ~100 page
 * writes and an fsync of the database file. Here the write connection's WAL
 * hook only notes that a checkpoint is due; once the batch's events are
 * published and its members told (batch_end), the write connection
 * checkpoints if no write is queued, else it wakes a thread of the store's
 * own, which checkpoints PASSIVE on a connection of its own while writes go
 * on. So no watcher waits for a checkpoint, and neither does any write but
 * the combiner's own. With one writer at a time, a checkpoint beside the
 * writes only competed with them for the disk and the CPUs (1 client: +1.8 %
 * to +7.5 % with it on the write connection, docs/BENCHMARKS.md). Durability
 * is unchanged: a COMMIT is on disk once the WAL is synced. */
#define CKPT_FRAMES 1000     /* checkpoint every this many new frames */
#define CKPT_FRAMES_MAX 4000 /* ~16 MiB of WAL: checkpoint on the write connection */

/* Checkpoint on 'db' (the write connection): true when done. */
static bool checkpoint_here(struct store *st, sqlite3 *db)
{
    if (sqlite3_wal_checkpoint_v2(db, NULL, SQLITE_CHECKPOINT_PASSIVE, NULL, NULL) != SQLITE_OK)
        return false; /* the thread's checkpoint runs (BUSY) or failed: its turn */
    __atomic_add_fetch(&st->nckpts, 1, __ATOMIC_RELAXED);
    __atomic_add_fetch(&st->nckpts_commit, 1, __ATOMIC_RELAXED);
    return true;
}

/* Called by the write connection after each COMMIT, wmu held, with the frames
 * now in the WAL. Every CKPT_FRAMES new frames (not after every COMMIT) the
 * log is to be checkpointed (checkpoint_due). A checkpoint that runs while
 * writes go on never catches up with the end of the log, so the log is not
 * restarted and keeps growing under constant writes; past CKPT_FRAMES_MAX the
 * write connection checkpoints itself, as SQLite would, so that the log
 * restarts. */
static int on_wal(void *ctx, sqlite3 *db, const char *name, int frames)
{
    struct store *st = ctx;

    (void)db;
    (void)name;
    if ((uint64_t)frames < st->ckpt_seen)
        st->ckpt_next = CKPT_FRAMES; /* the log restarted */
    st->ckpt_seen = (uint64_t)frames;
    if ((uint64_t)frames >= CKPT_FRAMES_MAX) {
        st->ckpt_due = st->ckpt_must = true;
        return SQLITE_OK;
    }
    if ((uint64_t)frames < st->ckpt_next)
        return SQLITE_OK;
    st->ckpt_next = (uint64_t)frames + CKPT_FRAMES;
    st->ckpt_due = true;
    return SQLITE_OK;
}

/* The checkpoint on_wal asked for, once the batch is answered; wmu held, no
 * transaction open: here if the log is too long or no write is queued, else
 * by the checkpointer. */
static void checkpoint_due(struct store *st)
{
    bool queued;

    if (!st->ckpt_due)
        return;
    st->ckpt_due = false;
    if (st->ckpt_must) {
        st->ckpt_must = false;
        checkpoint_here(st, st->wdb); /* BUSY or failed: the next COMMIT asks again */
        return;
    }
    pthread_mutex_lock(&st->qmu);
    queued = st->qhead != NULL;
    pthread_mutex_unlock(&st->qmu);
    if (!queued && checkpoint_here(st, st->wdb))
        return;
    pthread_mutex_lock(&st->cmu);
    st->ckpt_want = true;
    pthread_cond_signal(&st->ccv);
    pthread_mutex_unlock(&st->cmu);
}

/* One checkpoint; the first failure of a run of them is logged. */
static void checkpoint(struct store *st, sqlite3 **db)
{
    int rc = SQLITE_OK, log_frames = 0, done = 0;

    if (!*db && db_open(st->path, false, 0, db))
        rc = SQLITE_CANTOPEN;
    if (*db)
        rc = sqlite3_wal_checkpoint_v2(*db, NULL, SQLITE_CHECKPOINT_PASSIVE, &log_frames, &done);
    if (rc != SQLITE_OK && !st->ckpt_failing)
        log_warn("WAL checkpoint failed: %s; retried after the next writes",
                 *db ? sqlite3_errmsg(*db) : "cannot open the database");
    else if (rc == SQLITE_OK && st->ckpt_failing)
        log_info("WAL checkpoint works again");
    st->ckpt_failing = rc != SQLITE_OK;
    if (rc == SQLITE_OK)
        __atomic_add_fetch(&st->nckpts, 1, __ATOMIC_RELAXED);
}

static void *checkpointer(void *arg)
{
    struct store *st = arg;
    sqlite3 *db = NULL;

    pthread_mutex_lock(&st->cmu);
    for (;;) {
        while (!st->ckpt_want && !st->ckpt_stop)
            pthread_cond_wait(&st->ccv, &st->cmu);
        if (st->ckpt_stop)
            break;
        st->ckpt_want = false;
        pthread_mutex_unlock(&st->cmu);
        checkpoint(st, &db);
        pthread_mutex_lock(&st->cmu);
    }
    pthread_mutex_unlock(&st->cmu);
    db_close(db);
    return NULL;
}

static err_t start_checkpointer(struct store *st)
{
    if (pthread_create(&st->ckpt_thread, NULL, checkpointer, st) != 0) {
        log_err("cannot start the checkpoint thread");
        return ERR_NOMEM;
    }
    st->ckpt_started = true;
    st->ckpt_next = CKPT_FRAMES;
    sqlite3_wal_hook(st->wdb, on_wal, st); /* replaces the automatic checkpoint */
    return ERR_OK;
}

static void stop_checkpointer(struct store *st)
{
    if (!st->ckpt_started)
        return;
    sqlite3_wal_hook(st->wdb, NULL, NULL);
    pthread_mutex_lock(&st->cmu);
    st->ckpt_stop = true;
    pthread_cond_signal(&st->ccv);
    pthread_mutex_unlock(&st->cmu);
    pthread_join(st->ckpt_thread, NULL);
    st->ckpt_started = false;
}

err_t store_open(const struct store_opts *opts, struct store **out)
{
    struct store *st = calloc(1, sizeof(*st));
    err_t rc;

    if (!st)
        return ERR_NOMEM;
    st->path = strdup(opts->path);
    if (!st->path) {
        free(st);
        return ERR_NOMEM;
    }
    pthread_mutex_init(&st->wmu, NULL);
    db_pool_init(&st->readers, st->path);
    pthread_mutex_init(&st->cmu, NULL);
    pthread_cond_init(&st->ccv, NULL);
    pthread_mutex_init(&st->qmu, NULL);
    pthread_mutex_init(&st->amu, NULL);
    changelog_init(&st->log, opts->history ? opts->history : 1, opts->feed);
    /* The writer's page cache: 256 KiB holds the interior pages every write
     * walks and the rows of a node's worth of pods; the rest is the OS page
     * cache's. */
    rc = db_open(st->path, true, 256, &st->wdb);
    if (!rc)
        rc = migrate(st->wdb);
    if (!rc)
        rc = changelog_open(&st->log, st->wdb);
    if (!rc)
        rc = st_hist_attach(st);
    if (!rc)
        rc = start_checkpointer(st);
    if (rc) {
        store_free(st);
        return rc;
    }
    *out = st;
    return ERR_OK;
}

void store_free(struct store *st)
{
    if (!st)
        return;
    stop_checkpointer(st);
    db_pool_release(&st->readers);
    db_close(st->wdb); /* rolls back a batch left open; the last close checkpoints */
    changelog_release(&st->log);
    free(st->path);
    pthread_mutex_destroy(&st->cmu);
    pthread_cond_destroy(&st->ccv);
    pthread_mutex_destroy(&st->qmu);
    pthread_mutex_destroy(&st->amu);
    json_decref(st->alloc_rest);
    pthread_mutex_destroy(&st->wmu);
    free(st);
}

void store_set_feed(struct store *st, struct feed *feed)
{
    pthread_mutex_lock(&st->wmu);
    changelog_set_feed(&st->log, feed);
    pthread_mutex_unlock(&st->wmu);
}

uint64_t store_revision(struct store *st)
{
    return changelog_revision(&st->log);
}

void store_release_idle(struct store *st)
{
    db_pool_trim(&st->readers);
}

/* ---- write transactions ---- */

/* Transaction control on the write connection. */
static int tx_exec(struct store *st, const char *sql)
{
    return db_tx(st->wdb, sql);
}

/* End the open batch: COMMIT it (or roll it back when 'e' is set or SQLite
 * already did), publish its events, and tell every waiting member. Called,
 * and returns, with wmu held. */
static err_t batch_end(struct store *st, err_t e)
{
    struct tx_waiter *w, *next, *waiters;
    int rc;

    if (!e && sqlite3_get_autocommit(st->wdb))
        e = ERR_UNAVAIL; /* SQLite rolled the whole transaction back on an error */
    /* No counter is written: the revision is the newest row of the change
     * log (changelog.h), a ring that is never trimmed. */
    if (!e) {
        rc = tx_exec(st, "COMMIT");
        if (rc != SQLITE_OK)
            e = db_err(st->wdb, rc, "commit");
    }
    if (e) {
        if (!sqlite3_get_autocommit(st->wdb))
            sqlite3_exec(st->wdb, "ROLLBACK;", NULL, NULL, NULL);
        changelog_abort(&st->log);
    } else {
        if (st->tx_members > 0) {
            __atomic_add_fetch(&st->ncommits, 1, __ATOMIC_RELAXED);
            __atomic_add_fetch(&st->nwrites, st->tx_members, __ATOMIC_RELAXED);
        }
        changelog_commit(&st->log);
    }
    st->tx_open = false;
    st->tx_members = 0;
    waiters = st->tx_waiters;
    st->tx_waiters = NULL;
    for (w = waiters; w; w = next) {
        next = w->next; /* 'w' is gone once posted */
        w->err = e;
        sem_post(&w->done);
    }
    checkpoint_due(st);
    return e;
}

/* ---- combined writes (st_write) ---- */

/* Open a member of the batch (the batch too, if none is open) for the
 * combiner, who holds wmu. A member that opens the batch needs no savepoint:
 * undoing it is rolling the batch back (one client's writes are all such,
 * two statements fewer each). On failure nothing of it is left open; the
 * batch may have ended. */
static err_t member_begin(struct store *st)
{
    uint64_t now = clock_wall_ms();
    int rc;

    st->m_ms = now > st->m_ms ? now : st->m_ms;
    st->m_whole = !st->tx_open;
    if (st->m_whole) {
        rc = tx_exec(st, "BEGIN IMMEDIATE");
        if (rc != SQLITE_OK)
            return db_err(st->wdb, rc, "begin a write transaction");
        st->tx_open = true;
        st->tx_members = 0;
        changelog_begin(&st->log);
    } else if ((rc = tx_exec(st, "SAVEPOINT member")) != SQLITE_OK) {
        err_t e = db_err(st->wdb, rc, "begin a write transaction");

        batch_end(st, st->tx_members > 0 ? ERR_OK : e);
        return e;
    }
    st->m_mark = changelog_mark(&st->log);
    st->m_discard = false;
    return ERR_OK;
}

void st_write_discard(struct store *st)
{
    st->m_discard = true;
}

/* Roll the current member back to its savepoint, its events with it; a
 * member that opened the batch rolls the batch back. */
static void member_undo(struct store *st)
{
    if (st->m_whole) {
        sqlite3_exec(st->wdb, "ROLLBACK;", NULL, NULL, NULL);
        st->tx_open = false;
    } else {
        sqlite3_exec(st->wdb, "ROLLBACK TO member; RELEASE member;", NULL, NULL, NULL);
    }
    changelog_undo(&st->log, st->m_mark);
}

/* Run one queued write as a member; a failed one is rolled back to its
 * savepoint and answered at once, a good one waits for the batch's COMMIT. */
static void run_op(struct store *st, struct wop *op)
{
    err_t rc = member_begin(st);
    int r;

    if (rc) {
        op->w.err = rc;
        sem_post(&op->w.done);
        return;
    }
    rc = op->fn(st, op->ctx);
    if (!rc && st->m_discard) {
        member_undo(st);
        op->w.err = ERR_OK;
        sem_post(&op->w.done);
        return;
    }
    if (!rc && !st->m_whole) {
        r = tx_exec(st, "RELEASE member");
        if (r != SQLITE_OK)
            rc = db_err(st->wdb, r, "commit");
    }
    if (!rc) {
        st->tx_members++;
        op->w.next = st->tx_waiters;
        st->tx_waiters = &op->w;
        return;
    }
    if (!sqlite3_get_autocommit(st->wdb))
        member_undo(st); /* ends the batch if the member opened it */
    if (st->tx_open && sqlite3_get_autocommit(st->wdb))
        batch_end(st, ERR_UNAVAIL); /* SQLite dropped the batch: its members fail */
    op->w.err = rc;
    sem_post(&op->w.done);
}

/* The combiner: holding wmu, run the queued writes back to back (at most
 * BATCH_MAX in one batch), COMMIT once, answer them all. Writes that queued
 * up meanwhile ('combining' stays set through the COMMIT, so they wait on
 * their semaphores rather than on wmu) are the next batch, up to
 * COMBINE_BATCHES in a row; writes still queued then get a new combiner: the
 * first of them is woken to be it. Handing over costs the lock a thread's
 * wake-up (~100 µs idle a batch on a busy 2-CPU VM); a second batch costs
 * this thread's own answer one batch's time (docs/BENCHMARKS.md, 3). */
static void combine(struct store *st)
{
    struct wop *op, *heir = NULL;
    int batches = 0;

    /* SQLite's small blocks, kept from member to member and batch to batch
     * on a thread that combines (sqlmem.h), till it exits */
    sqlmem_thread_cache(true);
    pthread_mutex_lock(&st->wmu);
    for (;;) {
        pthread_mutex_lock(&st->qmu);
        op = st->tx_members < BATCH_MAX ? st->qhead : NULL;
        if (op) {
            st->qhead = op->next;
            if (!st->qhead)
                st->qtail = NULL;
            op->next = NULL;
        } else if (!st->qhead && !st->tx_open) {
            st->combining = false; /* nothing queued, nothing to commit */
        }
        pthread_mutex_unlock(&st->qmu);
        if (op) {
            run_op(st, op);
            continue;
        }
        if (!st->tx_open)
            break;
        batch_end(st, ERR_OK); /* answers the members */
        if (++batches < COMBINE_BATCHES)
            continue;
        pthread_mutex_lock(&st->qmu);
        if (st->qhead)
            heir = st->qhead; /* stays queued; 'combining' stays set for it */
        else
            st->combining = false;
        pthread_mutex_unlock(&st->qmu);
        break;
    }
    pthread_mutex_unlock(&st->wmu);
    if (heir) {
        __atomic_add_fetch(&st->nheirs, 1, __ATOMIC_RELAXED);
        heir->lead = true;
        sem_post(&heir->w.done);
    }
}

err_t st_write(struct store *st, err_t (*fn)(struct store *st, void *ctx), void *ctx)
{
    struct wop me = {.fn = fn, .ctx = ctx};
    bool lead;

    sem_init(&me.w.done, 0, 0);
    pthread_mutex_lock(&st->qmu);
    /* 'me' is dequeued (by the combiner) before this returns */
    /* cppcheck-suppress autoVariables */
    *(st->qtail ? &st->qtail->next : &st->qhead) = &me;
    /* cppcheck-suppress autoVariables */
    st->qtail = &me;
    lead = !st->combining;
    st->combining = true;
    pthread_mutex_unlock(&st->qmu);
    for (;;) {
        if (lead) {
            combine(st); /* runs 'me' among the others */
            lead = false;
        }
        while (sem_wait(&me.w.done) != 0 && errno == EINTR)
            ;
        if (!me.lead)
            break;
        me.lead = false; /* not an answer: the queue is ours to run */
        lead = true;
    }
    sem_destroy(&me.w.done);
    return me.w.err;
}
