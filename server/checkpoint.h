/* SPDX-License-Identifier: Apache-2.0 */
/* checkpoint.h - WAL checkpoints for the store's write connection.
 * SQLite's automatic checkpoint runs inside the COMMIT that crosses 1000 WAL
 * frames, so that write, and every write queued behind it, would wait for
 * the page writes and the fsync of the database file. Instead the write
 * connection's WAL hook only notes that a checkpoint is due; once the
 * batch's events are published and its writes answered
 * (checkpoint_after_batch), the write connection checkpoints if no write
 * waits, else a thread of its own does, PASSIVE, on a connection of its own
 * while writes go on. So no watcher waits for a checkpoint, and no write
 * but the combiner's own. Durability is SQLite's: a COMMIT is on disk once
 * the WAL is synced. Not the group commit (commit.h), which calls it.
 *
 * Locks: 'mu' guards 'want' and 'stop' ('cv' waits on it) and is taken
 * after the writer's lock, never before; 'next', 'seen', 'due' and 'must'
 * belong to the writer and are used under its lock only (the WAL hook runs
 * inside its COMMIT); 'failing' is the thread's own; the counters are
 * atomic. */
#ifndef PODRES_CHECKPOINT_H
#define PODRES_CHECKPOINT_H
#include <pthread.h>
#include <sqlite3.h>
#include <stdbool.h>
#include <stdint.h>

#include "../common/err.h"

struct checkpointer {
    const char *path;    /* the database file; borrowed */
    sqlite3 *wdb;        /* the write connection; borrowed, while started */
    pthread_mutex_t mu;  /* the thread's lock */
    pthread_cond_t cv;   /* wakes the thread */
    pthread_t thread;    /* the checkpoint thread */
    bool started;        /* 'thread' runs and the WAL hook is set */
    bool want;           /* the thread is to checkpoint (mu) */
    bool stop;           /* checkpoint_release() waits for the thread (mu) */
    bool failing;        /* the thread's last checkpoint failed (logged once) */
    uint64_t next;       /* WAL frames at which a checkpoint is due next (writer) */
    uint64_t seen;       /* WAL frames after the last COMMIT (writer) */
    bool due;            /* the WAL hook asked for a checkpoint after this batch (writer) */
    bool must;           /* ... and the WAL is too long to wait for the thread (writer) */
    uint64_t ndone;      /* checkpoints done, either way (atomic) */
    uint64_t ndone_here; /* of those, on the write connection (atomic) */
};

void checkpoint_init(struct checkpointer *k);
/* Take over the checkpoints of 'wdb' (borrowed; kept till release), a
 * connection to 'path' (borrowed, outlives 'k'): set its WAL hook and start
 * the thread. ERR_NOMEM when the thread cannot start (logged). */
err_t checkpoint_start(struct checkpointer *k, sqlite3 *wdb, const char *path) WARN_UNUSED;
/* Stop the thread and give the write connection its automatic checkpoint
 * back; call it before closing that connection. Fine on a struct never
 * started. */
void checkpoint_release(struct checkpointer *k);
/* After a batch, the writer's lock held and no transaction open: the
 * checkpoint the WAL hook asked for, if any. On the write connection when
 * the WAL is too long, or when queued(arg) says no write waits (it is only
 * asked then); else by the thread. */
void checkpoint_after_batch(struct checkpointer *k, bool (*queued)(void *arg), void *arg);
/* Checkpoints done since start, either way. Any thread. */
uint64_t checkpoint_count(struct checkpointer *k);

#endif
