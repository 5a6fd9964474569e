/* SPDX-License-Identifier: Apache-2.0 */
/* store.c - connections, migrations, transactions, the change log and the
 * feed reads. The views are in store_view.c, the writes in store_write.c. */
#define LOG_MOD "store"
#include "../common/common.h"
#include "../common/clock.h"
#include "../common/jsonx.h"
#include "../common/jsonw.h"
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

/* ---- the change log: a ring ----
 * Revision r is kept in row r % ring of 'changes' (its slot), ring being the
 * configured history (schema/0002_change_ring.sql): a write overwrites the
 * row 'ring' revisions older in place. Nothing is trimmed, and once the ring
 * is full no page is freed or allocated. (With a DELETE every 64 revisions,
 * the trims, the pages they freed and the header page were 5 of a 16-client
 * batch's 13 WAL pages.)
 *
 * The rows kept are one run of revisions lo..head (head - lo < ring), each
 * in its slot. So the newest is found from a guess: if the guess's slot holds
 * the guess and the next slot does not hold the next revision, the guess is
 * the newest. Else slot 0: without a row there, the run does not wrap and
 * the newest is in the last slot; with one, that row (a multiple of ring)
 * starts the newest lap, and a binary search finds the lap's end. */

#define GUESS_AHEAD 8 /* revisions past the guess tried before the search */

/* Finish a one-column integer query that db_prep() gave 'rc' for: its
 * value in *v, 0 when there is no row. */
static err_t step_u64(sqlite3 *db, sqlite3_stmt *s, err_t rc, uint64_t *v)
{
    bool row = false;

    if (!rc)
        rc = db_step(db, s, &row);
    *v = !rc && row ? (uint64_t)sqlite3_column_int64(s, 0) : 0;
    db_done(s);
    return rc;
}

/* The revision in 'slot', 0 when the slot has no row (revisions start at 1). */
static err_t slot_rev(sqlite3 *db, uint64_t slot, uint64_t *rev)
{
    sqlite3_stmt *s = NULL;
    err_t rc = db_prep(db, &s, "SELECT revision FROM changes WHERE slot=?", "u", slot);

    return step_u64(db, s, rc, rev);
}

/* The revision in the highest slot, 0 when there is no row. */
static err_t last_slot_rev(sqlite3 *db, uint64_t *rev)
{
    sqlite3_stmt *s = NULL;
    err_t rc = db_prep(db, &s, "SELECT revision FROM changes ORDER BY slot DESC LIMIT 1", NULL);

    return step_u64(db, s, rc, rev);
}

/* Whether the head is 'guess' or one of the GUESS_AHEAD revisions after it
 * (the usual case: the revision the store knows, or a few writes on); if
 * so, *found and the head in *head. */
static err_t head_near(sqlite3 *db, uint64_t ring, uint64_t guess, uint64_t *head, bool *found)
{
    uint64_t r = 0;
    int i;
    err_t rc = slot_rev(db, guess % ring, &r);

    for (i = 0; !rc && r == guess && i < GUESS_AHEAD; i++, guess++) {
        rc = slot_rev(db, (guess + 1) % ring, &r);
        if (!rc && r != guess + 1) {
            *head = guess;
            *found = true;
            break;
        }
    }
    return rc;
}

/* The head of a log whose slot 0 holds r0 (> 0), which starts the newest
 * lap: slots 0..lo hold that lap (revisions >= r0), hi.. do not. */
static err_t head_search(sqlite3 *db, uint64_t ring, uint64_t r0, uint64_t *head)
{
    uint64_t lo = 0, hi = ring, mid, m, r = r0;
    err_t rc = ERR_OK;

    while (!rc && hi - lo > 1) {
        mid = lo + (hi - lo) / 2;
        rc = slot_rev(db, mid, &m);
        if (!rc && m >= r0) {
            lo = mid;
            r = m;
        } else {
            hi = mid;
        }
    }
    if (!rc)
        *head = r;
    return rc;
}

err_t st_ring_head(sqlite3 *db, uint64_t ring, uint64_t guess, uint64_t *head)
{
    uint64_t r = 0, r0 = 0;
    bool found = false;
    err_t rc = guess > 0 ? head_near(db, ring, guess, head, &found) : ERR_OK;

    if (rc || found)
        return rc;
    rc = slot_rev(db, 0, &r0);
    if (!rc && r0 != 0)
        return head_search(db, ring, r0, head);
    if (!rc)
        rc = last_slot_rev(db, &r);
    if (!rc)
        *head = r;
    return rc;
}

static err_t meta_get(sqlite3 *db, const char *key, uint64_t *v)
{
    sqlite3_stmt *s = NULL;
    err_t rc = db_prep(db, &s, "SELECT value FROM meta WHERE key=?", "t", key);

    return step_u64(db, s, rc, v);
}

/* With an empty log, meta.revision: what schema 1 wrote on every commit,
 * never written since (ring_open keeps a log that is behind it empty). */
err_t st_db_revision(struct store *st, sqlite3 *db, uint64_t *rev)
{
    err_t rc = st_ring_head(db, st->history, store_revision(st), rev);

    if (!rc && *rev == 0)
        rc = meta_get(db, "revision", rev);
    return rc;
}

/* Move the log's rows to the slots of a ring of n (ring_open), keeping the
 * revisions after head - n, and record n. The rows move in place, through
 * negative slots, so no two share a slot on the way (the kept revisions are
 * fewer than n apart). */
static err_t ring_relayout(sqlite3 *db, uint64_t head, uint64_t n)
{
    err_t rc = db_exec(db, "DELETE FROM changes WHERE revision<=?", "u", head > n ? head - n : 0);

    if (!rc)
        rc = db_exec(db, "UPDATE changes SET slot=-1-(revision%?)", "u", n);
    if (!rc)
        rc = db_exec(db, "UPDATE changes SET slot=-1-slot", NULL);
    if (!rc)
        rc = db_exec(db, "UPDATE meta SET value=? WHERE key='ring'", "u", n);
    return rc;
}

/* The log's head at open, laid out as a ring of 'was' slots (0: slot =
 * revision); a log that ends before meta.revision (a schema 1 database) is
 * emptied, and the head is that revision. */
static err_t ring_open_head(sqlite3 *db, uint64_t was, uint64_t *head)
{
    uint64_t floor = 0;
    /* ring 0 (slot = revision) reads as a ring larger than any revision */
    err_t e = st_ring_head(db, was ? was : UINT64_MAX, 0, head);

    if (!e)
        e = meta_get(db, "revision", &floor);
    if (!e && *head < floor) {
        e = db_exec(db, "DELETE FROM changes", NULL);
        *head = floor;
    }
    return e;
}

/* At open, on the write connection: find the revision, and lay the ring out
 * for 'history' slots if it was laid out for another number (or not yet:
 * ring 0, slot = revision, as the migration left it), keeping the newest
 * revisions that fit. A log that ends before meta.revision (a schema 1
 * database) is emptied: the run of revisions must end at the revision. One
 * transaction; it writes nothing when the layout is already right. */
static err_t ring_open(struct store *st)
{
    sqlite3 *db = st->wdb;
    uint64_t was = 0, head = 0, n = st->history;
    int rc;
    err_t e;

    rc = sqlite3_exec(db, "BEGIN IMMEDIATE;", NULL, NULL, NULL);
    if (rc != SQLITE_OK)
        return db_err(db, rc, "open the change log");
    e = meta_get(db, "ring", &was);
    if (!e)
        e = ring_open_head(db, was, &head);
    if (!e && was != n)
        e = ring_relayout(db, head, n);
    rc = sqlite3_exec(db, e ? "ROLLBACK;" : "COMMIT;", NULL, NULL, NULL);
    if (!e && rc != SQLITE_OK)
        e = db_err(db, rc, "open the change log");
    if (!e && was != n && (was != 0 || head > 0)) /* not for a new database */
        log_info("change log laid out as a ring of %" PRIu64 " revisions (was %" PRIu64 ")", n,
                 was);
    if (!e)
        st->rev = head;
    return e;
}

static void free_pending_from(struct store *st, size_t from);

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
    st->history = opts->history ? opts->history : 1;
    st->feed = opts->feed;
    /* The writer's page cache: 256 KiB holds the interior pages every write
     * walks and the rows of a node's worth of pods; the rest is the OS page
     * cache's. */
    rc = db_open(st->path, true, 256, &st->wdb);
    if (!rc)
        rc = migrate(st->wdb);
    if (!rc)
        rc = ring_open(st);
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
    free_pending_from(st, 0);
    free(st->tx_ev);
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
    st->feed = feed;
    pthread_mutex_unlock(&st->wmu);
}

uint64_t store_revision(struct store *st)
{
    return __atomic_load_n(&st->rev, __ATOMIC_ACQUIRE);
}

void store_release_idle(struct store *st)
{
    db_pool_trim(&st->readers);
}

/* ---- write transactions ---- */

/* Free the pending events from index 'from' on. */
static void free_pending_from(struct store *st, size_t from)
{
    size_t i;

    for (i = from; i < st->tx_nev; i++) {
        free(st->tx_ev[i].ns);
        free(st->tx_ev[i].line);
    }
    st->tx_nev = from;
}

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
     * log (st_db_revision), a ring that is never trimmed. */
    if (!e) {
        rc = tx_exec(st, "COMMIT");
        if (rc != SQLITE_OK)
            e = db_err(st->wdb, rc, "commit");
    }
    if (e) {
        if (!sqlite3_get_autocommit(st->wdb))
            sqlite3_exec(st->wdb, "ROLLBACK;", NULL, NULL, NULL);
        st->tx_rev = st->rev;
    } else {
        if (st->tx_members > 0) {
            __atomic_add_fetch(&st->ncommits, 1, __ATOMIC_RELAXED);
            __atomic_add_fetch(&st->nwrites, st->tx_members, __ATOMIC_RELAXED);
        }
        __atomic_store_n(&st->rev, st->tx_rev, __ATOMIC_RELEASE);
        if (st->feed && st->tx_nev)
            feed_publish(st->feed, st->tx_ev, st->tx_nev);
    }
    free_pending_from(st, 0);
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
        st->tx_rev = st->rev;
        st->tx_members = 0;
        free_pending_from(st, 0);
    } else if ((rc = tx_exec(st, "SAVEPOINT member")) != SQLITE_OK) {
        err_t e = db_err(st->wdb, rc, "begin a write transaction");

        batch_end(st, st->tx_members > 0 ? ERR_OK : e);
        return e;
    }
    st->m_rev = st->tx_rev;
    st->m_nev = st->tx_nev;
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
    free_pending_from(st, st->m_nev);
    st->tx_rev = st->m_rev;
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

uint64_t st_tx_next(struct store *st)
{
    return st->tx_rev + 1;
}

static err_t push_event(struct store *st, const char *kind, const char *ns, char *line, size_t len)
{
    struct feed_event *ev;

    if (st->tx_nev == st->tx_cap) {
        size_t ncap = st->tx_cap ? st->tx_cap * 2 : 16;
        struct feed_event *n = realloc(st->tx_ev, ncap * sizeof(*n));

        if (!n)
            return ERR_NOMEM;
        st->tx_ev = n;
        st->tx_cap = ncap;
    }
    ev = &st->tx_ev[st->tx_nev];
    memset(ev, 0, sizeof(*ev));
    ev->ns = strdup(ns ? ns : "");
    if (!ev->ns)
        return ERR_NOMEM;
    ev->rev = st->tx_rev + 1;
    str_copy(ev->kind, sizeof(ev->kind), kind);
    ev->line = line;
    ev->len = len;
    st->tx_nev++;
    return ERR_OK;
}

/* {"type":T,"kind":K,"revision":N,"object": - the head of an event line. */
static void event_head(struct jsonw *w, const char *type, const char *kind, uint64_t rev)
{
    jsonw_lit(w, "{\"type\":");
    jsonw_str(w, type);
    jsonw_lit(w, ",\"kind\":");
    jsonw_str(w, kind);
    jsonw_lit(w, ",\"revision\":");
    jsonw_u64(w, rev);
    jsonw_lit(w, ",\"object\":");
}

/* Close the line in 'w' (released), log it and queue it for the feed. */
static err_t emit_line(struct store *st, const char *kind, const char *ns, struct jsonw *w)
{
    uint64_t rev = st->tx_rev + 1;
    size_t len = 0;
    char *line;
    err_t rc;

    jsonw_lit(w, "}\n");
    line = jsonw_detach(w, &len);
    if (!line)
        return ERR_NOMEM;
    line[len - 1] = '\0';
    rc = db_exec(st->wdb,
                 "INSERT OR REPLACE INTO changes(slot,revision,kind,namespace,event) "
                 "VALUES(?,?,?,?,?)",
                 "uuttt", rev % st->history, rev, kind, ns ? ns : "", line);
    line[len - 1] = '\n';
    if (!rc)
        rc = push_event(st, kind, ns, line, len);
    if (rc) {
        free(line);
        return rc;
    }
    st->tx_rev = rev;
    return ERR_OK;
}

err_t st_emit(struct store *st, const char *type, const char *kind, const char *ns, json_t *obj)
{
    struct jsonw w = JSONW_INIT;

    event_head(&w, type, kind, st->tx_rev + 1);
    jsonw_json(&w, obj);
    return emit_line(st, kind, ns, &w);
}

err_t st_emit_text(struct store *st, const char *type, const char *kind, const char *ns,
                   const char *obj, size_t n)
{
    struct jsonw w = JSONW_INIT;

    event_head(&w, type, kind, st->tx_rev + 1);
    jsonw_raw(&w, obj, n);
    return emit_line(st, kind, ns, &w);
}

/* ---- feed reads ---- */

static err_t buf_add(char **buf, size_t *len, size_t *cap, const char *s, size_t n)
{
    if (*len + n + 1 > *cap) {
        size_t ncap = *cap ? *cap : 4096;
        char *nb;

        while (ncap < *len + n + 1)
            ncap *= 2;
        nb = realloc(*buf, ncap);
        if (!nb)
            return ERR_NOMEM;
        *buf = nb;
        *cap = ncap;
    }
    memcpy(*buf + *len, s, n);
    *len += n;
    return ERR_OK;
}

err_t store_changes_after(struct store *st, uint64_t *cursor, const struct feed_filter *flt,
                          size_t limit, char **buf, size_t *len, size_t *cap)
{
    sqlite3 *db = NULL;
    sqlite3_stmt *stmt = NULL;
    uint64_t cur = *cursor, head = 0, rev;
    bool row = false;
    err_t rc = db_read_begin(&st->readers, &db);

    if (!rc)
        rc = st_db_revision(st, db, &head);
    if (!rc && (cur > head || (head > st->history && cur < head - st->history)))
        rc = ERR_GONE; /* ahead of the store, or older than the history */
    /* Each revision from its slot. A slot holding another revision: the one
     * asked for was overwritten, or not kept when the ring was laid out. */
    for (rev = cur + 1; !rc && rev <= head && rev - *cursor <= limit; rev++) {
        rc = db_prep(db, &stmt, "SELECT revision,kind,namespace,event FROM changes WHERE slot=?",
                     "u", rev % st->history);
        if (!rc)
            rc = db_step(db, stmt, &row);
        if (!rc && (!row || (uint64_t)sqlite3_column_int64(stmt, 0) != rev))
            rc = ERR_GONE;
        if (!rc && feed_match(flt, db_text(stmt, 1), db_text(stmt, 2))) {
            rc = buf_add(buf, len, cap, db_text(stmt, 3), (size_t)sqlite3_column_bytes(stmt, 3));
            if (!rc)
                rc = buf_add(buf, len, cap, "\n", 1);
        }
        db_done(stmt);
        stmt = NULL;
        if (!rc)
            cur = rev;
    }
    db_read_end(&st->readers, db);
    if (!rc)
        *cursor = cur;
    return rc;
}

/* Where each ADDED line of a snapshot is in the buffer, and its revision. */
struct snap_line {
    uint64_t rev;
    size_t off, len;
};

struct snap {
    char **buf;
    size_t *len, *cap; /* the caller's growable buffer */
    struct snap_line *lines;
    size_t n, room;
};

/* Append one ADDED line for 'obj' (steals it), and where it is. */
static err_t snapshot_line(json_t *obj, const char *kind, struct snap *sn)
{
    json_int_t rev = json_integer_value(json_object_get(obj, "revision"));
    json_t *ev = json_pack("{s:s,s:s,s:I,s:o}", "type", "ADDED", "kind", kind, "revision", rev,
                           "object", obj); /* 'obj' is the line's now */
    char *line;
    size_t n = 0, off = *sn->len;
    err_t rc = ERR_OK;

    if (!ev)
        return ERR_NOMEM;
    line = jsonx_dumps_line(ev, &n);
    json_decref(ev);
    if (!line)
        return ERR_NOMEM;
    if (sn->n == sn->room) {
        size_t room = sn->room ? 2 * sn->room : 64;
        struct snap_line *l = realloc(sn->lines, room * sizeof(*l));

        if (l) {
            sn->lines = l;
            sn->room = room;
        } else {
            rc = ERR_NOMEM;
        }
    }
    if (!rc)
        rc = buf_add(sn->buf, sn->len, sn->cap, line, n);
    if (!rc)
        sn->lines[sn->n++] = (struct snap_line){(uint64_t)rev, off, n};
    free(line);
    return rc;
}

static int cmp_line_rev(const void *a, const void *b)
{
    uint64_t x = ((const struct snap_line *)a)->rev, y = ((const struct snap_line *)b)->rev;

    return x < y ? -1 : x > y;
}

/* Put the snapshot's lines (from sn->lines[0].off on) in revision order, as
 * every event of a watch is (CONTRACT §3): an object's revision is that of
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
    tmp = malloc(*sn->len - from);
    if (!tmp)
        return ERR_NOMEM;
    qsort(sn->lines, sn->n, sizeof(*sn->lines), cmp_line_rev);
    for (i = 0; i < sn->n; i++) {
        memcpy(tmp + at, *sn->buf + sn->lines[i].off, sn->lines[i].len);
        at += sn->lines[i].len;
    }
    memcpy(*sn->buf + from, tmp, at);
    free(tmp);
    return ERR_OK;
}

struct snap_kind {
    const char *kind; /* the event kind */
    const char *sql;  /* selects the keys (namespace, name) or (resource, id) */
    err_t (*view)(sqlite3 *db, const char *a, const char *b, json_t **out);
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
    struct snap sn = {buf, len, cap, NULL, 0, 0};
    sqlite3 *db = NULL;
    size_t i;
    err_t rc = db_read_begin(&st->readers, &db);

    if (!rc)
        rc = st_db_revision(st, db, rev);
    for (i = 0; !rc && i < ARRAY_SIZE(snap_kinds); i++)
        rc = snapshot_kind(db, &snap_kinds[i], flt, &sn);
    db_read_end(&st->readers, db);
    if (!rc)
        rc = snapshot_sort(&sn);
    free(sn.lines);
    return rc;
}
