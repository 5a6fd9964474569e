/* SPDX-License-Identifier: Apache-2.0 */
/* commit.h - the store's writer: the write connection and group commit
 * over it. Every write is a function run inside a batch, one BEGIN
 * IMMEDIATE .. COMMIT, each write after the batch's first as a SAVEPOINT.
 * Writes queue up; the first in an empty queue is the combiner: it takes
 * the writer's lock, runs the queued writes back to back (at most
 * COMMIT_BATCH_MAX), commits once and posts each one's answer. Writes
 * queued meanwhile (during the COMMIT's sync) are its next batch, up to
 * COMMIT_COMBINE batches in a row; then the first write still queued is
 * woken to combine. A write is acknowledged only after the COMMIT that
 * holds it; a failed one rolls back to its savepoint (the first, the batch
 * it opened), is answered at once and leaves the others in. The batch
 * carries the change log's events (changelog.h), tells the store's hooks
 * how each write and the batch ended (struct commit_hooks), and ends with
 * the checkpoint the WAL asked for (checkpoint.h). Not what a write does
 * (store_*.c).
 *
 * Thread safety: commit_write() from any thread. Locks, in the order they
 * are taken (never one while holding a later one):
 *   mu   the writer's lock: 'db', the batch and member fields, and what the
 *        change log and the checkpointer keep for the writer;
 *   qmu  the queue: 'qhead', 'qtail', 'combining';
 *   then the checkpointer's lock, and the feed's (changelog_commit).
 * The counters are atomic. */
#ifndef PODRES_COMMIT_H
#define PODRES_COMMIT_H
#include <pthread.h>
#include <semaphore.h>
#include <sqlite3.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "../common/err.h"
#include "changelog.h"
#include "checkpoint.h"

#define COMMIT_BATCH_MAX 64 /* writes at most in one batch */
#define COMMIT_COMBINE 2    /* batches a combiner runs in a row before it hands over */

/* A write's answer, given after the COMMIT of its batch (on its stack). */
struct commit_waiter {
    struct commit_waiter *next; /* the next answer of the batch */
    err_t err;                  /* the batch's result */
    sem_t done;                 /* posted by whoever ended the batch, after 'err' is set */
};

/* What the store keeps beside the database for the writes of a batch
 * (store_histw.c: what it knows of devices' intervals), told how each
 * write and batch ended, by the combiner under the writer's lock. Any may
 * be NULL. */
struct commit_hooks {
    void *arg;                                    /* given to each */
    void (*member_end)(void *arg, bool kept);     /* a write ended: kept in the batch, or
                                                     rolled back */
    void (*batch_end)(void *arg, bool committed); /* the batch ended: committed, or rolled back
                                                     (a write that opened it and failed ends it
                                                     by member_end alone) */
    void (*release)(void *arg);                   /* commit_release(): free what 'arg' holds */
};

/* A write queued for the combiner, on its caller's stack. */
struct commit_op {
    err_t (*fn)(void *ctx); /* the write, run by the combiner */
    void *ctx;              /* its arguments and results */
    struct commit_waiter w; /* its answer, posted on w.done */
    bool lead;              /* posted to run the queue, not answered */
    struct commit_op *next; /* queue order */
};

struct commit {
    pthread_mutex_t mu;            /* the writer's lock */
    sqlite3 *db;                   /* the write connection (mu) */
    struct changelog *log;         /* the batches' events; borrowed (mu) */
    bool open;                     /* a batch (BEGIN IMMEDIATE) is open (mu) */
    size_t members;                /* writes in the open batch, done and waiting (mu) */
    struct commit_waiter *waiters; /* their answers, posted after the COMMIT (mu) */
    struct changelog_mark mark;    /* the log when the current write began (mu) */
    bool discard;                  /* the current write asked to be rolled back (mu) */
    bool whole;                    /* it opened the batch: no savepoint, the batch is its own */
    uint64_t now_ms;               /* wall-clock ms of the current write, never less than the
                                      last one's: the history's times (mu) */
    pthread_mutex_t qmu;           /* the queue's lock */
    struct commit_op *qhead;       /* writes waiting for a combiner (qmu) */
    struct commit_op *qtail;       /* the last of them (qmu) */
    bool combining;                /* a combiner runs, or is woken to, COMMITs included (qmu) */
    uint64_t nheirs;               /* combiners woken to run a queue (atomic; tests) */
    uint64_t ncommits;             /* COMMITs of batches with writes (atomic) */
    uint64_t nwrites;              /* writes those COMMITs held (atomic) */
    struct checkpointer ckpt;      /* the WAL's checkpoints */
    struct commit_hooks hooks;     /* set before commit_start() */
};

/* 'log' is borrowed and outlives 'c'. */
void commit_init(struct commit *c, struct changelog *log);
/* Open the write connection c->db to 'path', claiming the file for the
 * process (db_open). Before commit_start(), the caller may use c->db
 * alone (migrations, the change log's layout). */
err_t commit_open(struct commit *c, const char *path) WARN_UNUSED;
/* Run 'h' (copied) with every batch from now on; before commit_start(). */
void commit_set_hooks(struct commit *c, const struct commit_hooks *h);
/* Start taking writes, and checkpoints of the WAL; 'path' is borrowed and
 * outlives 'c'. */
err_t commit_start(struct commit *c, const char *path) WARN_UNUSED;
/* Stop the checkpoints, close the write connection (a batch left open is
 * rolled back) and release the hooks. No write may be running. Fine on a
 * struct never opened. */
void commit_release(struct commit *c);

/* Run fn(ctx) as one write of a batch and return its result once the
 * batch's COMMIT holds it (or at once when it fails: then nothing of it is
 * kept). Concurrent writes are queued and run back to back by one thread,
 * the combiner, so the writer's lock never waits for a thread to wake up;
 * fn may run on another thread than the caller's (ctx lives on the
 * caller's stack, which waits). fn runs under the writer's lock: it reads
 * and writes through c->db, records its events in the change log and
 * returns an error to be rolled back. */
err_t commit_write(struct commit *c, err_t (*fn)(void *ctx), void *ctx) WARN_UNUSED;
/* Inside a write: roll it back though it succeeded (it found nothing to
 * change); commit_write then returns ERR_OK. */
void commit_discard(struct commit *c);

/* What the writer did since it opened. Any thread. */
struct commit_counts {
    uint64_t commits;     /* COMMITs of batches with writes */
    uint64_t writes;      /* writes those COMMITs held: writes/commits is the mean batch */
    uint64_t checkpoints; /* WAL checkpoints, in a COMMIT or on the checkpoint thread */
};
void commit_counts(struct commit *c, struct commit_counts *out);

#endif
