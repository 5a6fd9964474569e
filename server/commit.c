/* SPDX-License-Identifier: Apache-2.0 */
/* commit.c - group commit: the queue of writes, the combiner that runs
 * them in batches, members and their savepoints, and the end of a batch
 * (COMMIT, the change log handed to the feed, the hooks, the answers, the
 * checkpoint). */
#define LOG_MOD "store"
#include "../common/common.h"
#include "../common/clock.h"
#include "commit.h"
#include "db.h"
#include "sqlmem.h"

#include <assert.h>

/* The writer's page cache: 256 KiB holds the interior pages every write
 * walks and the rows of a node's worth of pods; the rest is the OS page
 * cache's. */
#define WRITE_CACHE_KIB 256

void commit_init(struct commit *c, struct changelog *log)
{
    memset(c, 0, sizeof(*c));
    c->log = log;
    pthread_mutex_init(&c->mu, NULL);
    pthread_mutex_init(&c->qmu, NULL);
    checkpoint_init(&c->ckpt);
}

err_t commit_open(struct commit *c, const char *path)
{
    assert(!c->db);
    return db_open(path, true, WRITE_CACHE_KIB, &c->db);
}

void commit_set_hooks(struct commit *c, const struct commit_hooks *h)
{
    assert(!c->ckpt.started);
    c->hooks = *h;
}

err_t commit_start(struct commit *c, const char *path)
{
    assert(c->db);
    return checkpoint_start(&c->ckpt, c->db, path);
}

void commit_release(struct commit *c)
{
    assert(!c->qhead);
    checkpoint_release(&c->ckpt);
    db_close(c->db); /* rolls back a batch left open; the last close checkpoints */
    c->db = NULL;
    if (c->hooks.release)
        c->hooks.release(c->hooks.arg);
    c->hooks = (struct commit_hooks){0};
    pthread_mutex_destroy(&c->qmu);
    pthread_mutex_destroy(&c->mu);
}

void commit_counts(struct commit *c, struct commit_counts *out)
{
    out->commits = __atomic_load_n(&c->ncommits, __ATOMIC_RELAXED);
    out->writes = __atomic_load_n(&c->nwrites, __ATOMIC_RELAXED);
    out->checkpoints = checkpoint_count(&c->ckpt);
}

/* ---- batches ---- */

/* Whether a write waits in the queue (checkpoint_after_batch asks). */
static bool queued(void *arg)
{
    struct commit *c = arg;
    bool any;

    pthread_mutex_lock(&c->qmu);
    any = c->qhead != NULL;
    pthread_mutex_unlock(&c->qmu);
    return any;
}

/* The open batch is over with result 'e': post every waiting member's
 * answer. */
static void answer(struct commit *c, err_t e)
{
    struct commit_waiter *w, *next, *waiters = c->waiters;

    c->open = false;
    c->members = 0;
    c->waiters = NULL;
    for (w = waiters; w; w = next) {
        next = w->next; /* 'w' is gone once posted */
        w->err = e;
        sem_post(&w->done);
    }
}

/* End the open batch: COMMIT it (or roll it back when 'e' is set or SQLite
 * already did), publish its events, and tell every waiting member. Called,
 * and returns, with the writer's lock held. */
static err_t batch_end(struct commit *c, err_t e)
{
    int rc;

    assert(c->open);
    if (!e && sqlite3_get_autocommit(c->db))
        e = ERR_UNAVAIL; /* SQLite rolled the whole transaction back on an error */
    /* No counter is written: the revision is the newest row of the change
     * log (changelog.h), a ring that is never trimmed. */
    if (!e) {
        rc = db_tx(c->db, "COMMIT");
        if (rc != SQLITE_OK)
            e = db_err(c->db, rc, "commit");
    }
    if (e) {
        if (!sqlite3_get_autocommit(c->db))
            sqlite3_exec(c->db, "ROLLBACK;", NULL, NULL, NULL);
        changelog_abort(c->log);
    } else {
        if (c->members > 0) {
            __atomic_add_fetch(&c->ncommits, 1, __ATOMIC_RELAXED);
            __atomic_add_fetch(&c->nwrites, c->members, __ATOMIC_RELAXED);
        }
        changelog_commit(c->log);
    }
    if (c->hooks.batch_end)
        c->hooks.batch_end(c->hooks.arg, !e);
    answer(c, e);
    checkpoint_after_batch(&c->ckpt, queued, c);
    return e;
}

/* Open a member of the batch (the batch too, if none is open) for the
 * combiner, who holds the writer's lock. A member that opens the batch
 * needs no savepoint: undoing it is rolling the batch back (one client's
 * writes are all such, two statements fewer each). On failure nothing of
 * it is left open; the batch may have ended. */
static err_t member_begin(struct commit *c)
{
    uint64_t now = clock_wall_ms();
    int rc;
    err_t e;

    /* an open batch holds a write at least: one that fails alone is undone
     * to its savepoint, one that opened it takes the batch with it */
    assert(!c->open || c->members > 0);
    c->now_ms = now > c->now_ms ? now : c->now_ms;
    c->whole = !c->open;
    if (c->whole) {
        rc = db_tx(c->db, "BEGIN IMMEDIATE");
        if (rc != SQLITE_OK)
            return db_err(c->db, rc, "begin a write transaction");
        c->open = true;
        c->members = 0;
        changelog_begin(c->log);
    } else {
        rc = db_tx(c->db, "SAVEPOINT member");
        if (rc != SQLITE_OK) {
            e = db_err(c->db, rc, "begin a write transaction");
            batch_end(c, c->members > 0 ? ERR_OK : e);
            return e;
        }
    }
    c->mark = changelog_mark(c->log);
    c->discard = false;
    return ERR_OK;
}

void commit_discard(struct commit *c)
{
    c->discard = true;
}

/* Roll the current member back to its savepoint, its events with it; a
 * member that opened the batch rolls the batch back. */
static void member_undo(struct commit *c)
{
    if (c->whole) {
        sqlite3_exec(c->db, "ROLLBACK;", NULL, NULL, NULL);
        c->open = false;
    } else {
        sqlite3_exec(c->db, "ROLLBACK TO member; RELEASE member;", NULL, NULL, NULL);
    }
    changelog_undo(c->log, c->mark);
    if (c->hooks.member_end)
        c->hooks.member_end(c->hooks.arg, false);
}

/* A member that succeeded: released into the batch, its answer kept for
 * the COMMIT. */
static err_t member_keep(struct commit *c, struct commit_op *op)
{
    int rc;

    if (!c->whole) {
        rc = db_tx(c->db, "RELEASE member");
        if (rc != SQLITE_OK)
            return db_err(c->db, rc, "commit");
    }
    if (c->hooks.member_end)
        c->hooks.member_end(c->hooks.arg, true);
    c->members++;
    op->w.next = c->waiters;
    c->waiters = &op->w;
    return ERR_OK;
}

/* Run one queued write as a member; a failed one is rolled back to its
 * savepoint and answered at once, a good one waits for the batch's COMMIT. */
static void run_op(struct commit *c, struct commit_op *op)
{
    err_t rc = member_begin(c);

    if (rc)
        goto answer;
    rc = op->fn(op->ctx);
    if (!rc && c->discard) {
        member_undo(c);
        goto answer;
    }
    if (!rc)
        rc = member_keep(c, op);
    if (!rc)
        return;
    if (!sqlite3_get_autocommit(c->db))
        member_undo(c); /* ends the batch if the member opened it */
    if (c->open && sqlite3_get_autocommit(c->db))
        batch_end(c, ERR_UNAVAIL); /* SQLite dropped the batch: its members fail */
answer:
    op->w.err = rc;
    sem_post(&op->w.done);
}

/* The next write for this batch, taken off the queue; NULL when the batch
 * is full or none waits (and then, with no batch open either, the
 * combiner's turn is over). */
static struct commit_op *next_op(struct commit *c)
{
    struct commit_op *op;

    pthread_mutex_lock(&c->qmu);
    op = c->members < COMMIT_BATCH_MAX ? c->qhead : NULL;
    if (op) {
        c->qhead = op->next;
        if (!c->qhead)
            c->qtail = NULL;
        op->next = NULL;
    } else if (!c->qhead && !c->open) {
        c->combining = false; /* nothing queued, nothing to commit */
    }
    pthread_mutex_unlock(&c->qmu);
    return op;
}

/* After COMMIT_COMBINE batches: the first write still queued (it stays
 * queued, 'combining' stays set for it), or NULL, and the combining is
 * over. */
static struct commit_op *heir_of(struct commit *c)
{
    struct commit_op *heir;

    pthread_mutex_lock(&c->qmu);
    heir = c->qhead;
    if (!heir)
        c->combining = false;
    pthread_mutex_unlock(&c->qmu);
    return heir;
}

/* The combiner: holding the writer's lock, run the queued writes back to
 * back (at most COMMIT_BATCH_MAX in one batch), COMMIT once, answer them
 * all. Writes that queued up meanwhile ('combining' stays set through the
 * COMMIT, so they wait on their semaphores rather than on the lock) are
 * the next batch, up to COMMIT_COMBINE in a row; writes still queued then
 * get a new combiner: the first of them is woken to be it. Handing over
 * costs the lock a thread's wake-up; running a further batch costs this
 * thread's own answer one batch's time (docs/DESIGN.md, Code for speed). */
static void combine(struct commit *c)
{
    struct commit_op *op, *heir = NULL;
    int batches = 0;

    /* SQLite's small blocks, kept from member to member and batch to batch
     * on a thread that combines (sqlmem.h), till it exits */
    sqlmem_thread_cache(true);
    pthread_mutex_lock(&c->mu);
    for (;;) {
        op = next_op(c);
        if (op) {
            run_op(c, op);
            continue;
        }
        if (!c->open)
            break;
        batch_end(c, ERR_OK); /* answers the members */
        if (++batches < COMMIT_COMBINE)
            continue;
        heir = heir_of(c);
        break;
    }
    pthread_mutex_unlock(&c->mu);
    if (heir) {
        __atomic_add_fetch(&c->nheirs, 1, __ATOMIC_RELAXED);
        heir->lead = true;
        sem_post(&heir->w.done);
    }
}

err_t commit_write(struct commit *c, err_t (*fn)(void *ctx), void *ctx)
{
    struct commit_op me = {.fn = fn, .ctx = ctx};
    bool lead;

    assert(fn && c->ckpt.started); /* commit_start() came first */
    sem_init(&me.w.done, 0, 0);
    pthread_mutex_lock(&c->qmu);
    /* 'me' is dequeued (by the combiner) before this returns */
    /* cppcheck-suppress autoVariables */
    *(c->qtail ? &c->qtail->next : &c->qhead) = &me;
    /* cppcheck-suppress autoVariables */
    c->qtail = &me;
    lead = !c->combining;
    c->combining = true;
    pthread_mutex_unlock(&c->qmu);
    for (;;) {
        if (lead) {
            combine(c); /* runs 'me' among the others */
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
