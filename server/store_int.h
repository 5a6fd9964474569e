/* SPDX-License-Identifier: Apache-2.0 */
/* store_int.h - what store.c shares with store_write.c and store_view.c;
 * nothing outside the store includes it. */
#ifndef PODRES_STORE_INT_H
#define PODRES_STORE_INT_H
#include <pthread.h>
#include <semaphore.h>
#include <sqlite3.h>

#include "../common/jsonw.h"
#include "changelog.h"
#include "db.h"
#include "store.h"

#define BATCH_MAX 64      /* writes at most in one group commit */
#define COMBINE_BATCHES 2 /* batches a combiner runs in a row before it hands over */

/* A write's answer, given after the COMMIT of its batch (on its stack). */
struct tx_waiter {
    struct tx_waiter *next;
    err_t err;  /* the batch's result */
    sem_t done; /* posted by whoever ended the batch, after 'err' is set */
};

/* A write queued for the combiner (st_write), on its caller's stack. */
struct wop {
    err_t (*fn)(struct store *st, void *ctx); /* the write, run by the combiner */
    void *ctx;                                /* its arguments and results */
    struct tx_waiter w;                       /* its answer, posted on w.done */
    bool lead;                                /* posted to run the queue, not answered */
    struct wop *next;                         /* queue order */
};

/* Group commit (st_write): every write is a function run inside a batch,
 * one BEGIN IMMEDIATE .. COMMIT, each write after the batch's first as a
 * SAVEPOINT. Writes queue on 'qmu'; the first in an empty queue is the
 * combiner: it takes 'wmu', runs the queued writes back to back (at most
 * BATCH_MAX), commits once and posts each member's answer. Writes queued
 * meanwhile (during the COMMIT's sync) are its next batch, up to
 * COMBINE_BATCHES batches in a row; then the first write still queued is
 * woken to combine. A write is acknowledged only after
 * the COMMIT that holds it; a failed member rolls back to its savepoint (the
 * first, the batch it opened), is answered at once and leaves the others in.
 *
 * Lock: 'wmu' guards the write connection and every tx_* and m_* field (the
 * combiner holds it); 'qmu' the queue of writes. Never take 'wmu' while
 * holding 'qmu'. 'rev' is written under wmu and read atomically. The read
 * pool has its own lock (db.h). */
struct store {
    char *path;                   /* database file */
    pthread_mutex_t wmu;          /* the writer's lock */
    sqlite3 *wdb;                 /* the write connection */
    struct changelog log;         /* the change log and the revision (changelog.h) */
    bool tx_open;                 /* a batch (BEGIN IMMEDIATE) is open */
    size_t tx_members;            /* writes in the open batch, done and waiting */
    struct tx_waiter *tx_waiters; /* their answers, posted after the COMMIT */
    struct changelog_mark m_mark; /* the log when the current write began */
    bool m_discard;               /* the current write asked to be rolled back (st_write) */
    bool m_whole;                 /* it opened the batch: no savepoint, the batch is its own */
    pthread_mutex_t qmu;          /* guards the st_write queue: qhead, qtail, combining */
    struct wop *qhead, *qtail;    /* writes waiting for a combiner */
    bool combining;               /* a combiner runs (or is woken to), its COMMITs included */
    uint64_t nheirs;              /* combiners woken to run a queue (atomic; for tests) */
    pthread_mutex_t cmu;          /* the checkpointer's lock: ckpt_want, ckpt_stop */
    pthread_cond_t ccv;           /* wakes the checkpointer */
    pthread_t ckpt_thread;        /* the checkpointer (store.c) */
    bool ckpt_started;            /* ckpt_thread runs */
    bool ckpt_want;               /* the WAL has CKPT_FRAMES frames or more */
    bool ckpt_stop;               /* store_free() is waiting for it */
    bool ckpt_failing;            /* the last checkpoint failed (logged once) */
    uint64_t nckpts;              /* checkpoints done, either way (atomic) */
    uint64_t nckpts_commit;       /* of those, on the write connection (atomic; tests) */
    uint64_t ckpt_next;           /* WAL frames at which to wake it next (under wmu) */
    uint64_t ckpt_seen;           /* WAL frames after the last COMMIT (under wmu) */
    bool ckpt_due;                /* on_wal asked for a checkpoint after this batch (wmu) */
    bool ckpt_must;               /* ... and the WAL is past CKPT_FRAMES_MAX (wmu) */
    uint64_t ncommits;            /* COMMITs of batches with writes (atomic) */
    uint64_t nwrites;             /* writes those COMMITs held (atomic) */
    pthread_mutex_t amu;          /* guards alloc_rest */
    json_t *alloc_rest;           /* {"cpuIds","memory"} the kubelet last gave, or NULL */
    struct db_pool readers;       /* the read connections (db.h) */
    uint64_t m_ms;                /* wall-clock ms of the current write, never less than the
                                     last one's: history times (under wmu) */
    uint64_t hist_id;             /* the last history interval id given (under wmu) */
    int64_t hist_rows[2];         /* rows of hist_bind, hist_health for the cap; -1 not counted
                                     yet (under wmu; read atomically) */
    uint64_t hist_pod_cursor;     /* where the next pruning step looks at hist_pod (under wmu) */
};

/* Run fn(st, ctx) as one write of a batch and return its result once the
 * batch's COMMIT holds it (or at once when it fails: then nothing of it is
 * kept). Concurrent writes are queued and run back to back by one thread,
 * the combiner, so the write lock never waits for a thread to wake up; fn
 * may run on another thread than the caller's (ctx lives on the caller's
 * stack, which waits). fn reads and writes through st->wdb and records its
 * events with changelog_emit(&st->log, ..); it returns an error to be
 * rolled back. */
err_t st_write(struct store *st, err_t (*fn)(struct store *st, void *ctx), void *ctx) WARN_UNUSED;
/* Inside an st_write function: roll this write back though it succeeded
 * (it found nothing to change); st_write then returns ERR_OK. */
void st_write_discard(struct store *st);

/* Re-evaluate every reservation's state inside the open write transaction,
 * emitting Reservation MODIFIED for those that changed (store_write.c). */
err_t st_resv_refresh_all(struct store *st) WARN_UNUSED;

/* History (store_hist.c): register the functions and TEMP triggers on the
 * write connection that record binding and health intervals in every write
 * transaction. A build with -DPODRES_NO_HISTORY (the bench's reference
 * build, mk/bench.mk) records none. */
#ifdef PODRES_NO_HISTORY
#define ST_HIST_TRIGGERS 0
#else
#define ST_HIST_TRIGGERS 1
#endif
err_t st_hist_attach(struct store *st) WARN_UNUSED;

/* Views (store_view.c), usable on any connection. */
json_t *st_topology(const json_t *numa_ids);
err_t st_device_json(sqlite3 *db, const char *resource, const char *id, json_t **out) WARN_UNUSED;
err_t st_pod_json(sqlite3 *db, const char *ns, const char *name, json_t **out) WARN_UNUSED;
/* A device object's fields as stored: numa and properties are the stored
 * JSON text; a NULL holder_ns / resv_ns is no holder / no reservation. */
struct devtext {
    const char *resource, *id, *health, *numa, *properties;
    const char *holder_ns, *holder_name, *holder_uid, *holder_container;
    const char *resv_ns, *resv_name;
    uint64_t revision;
};
/* Append the text of the device object 'd' (st_device_json()'s shape). */
void st_devtext(struct jsonw *w, const struct devtext *d);
/* The text of st_device_json()'s object, byte for byte what serialising it
 * gives, appended to 'w' without building a json_t: the write path's events.
 * A 'rev' other than 0 stands in for the row's revision (a DELETED event). */
err_t st_device_text(sqlite3 *db, const char *resource, const char *id, uint64_t rev,
                     struct jsonw *w) WARN_UNUSED;
/* The text of a pod object (st_pod_json()'s shape) from its column values;
 * 'containers' is the stored canonical JSON. */
void st_pod_text(struct jsonw *w, const char *ns, const char *name, const char *uid,
                 const char *containers, uint64_t rev);
err_t st_reservation_json(sqlite3 *db, const char *ns, const char *name, json_t **out) WARN_UNUSED;
/* {key: list, "revision": rev} wrapper; steals 'list'. NULL if out of memory. */
json_t *st_wrap(const char *key, json_t *list, uint64_t rev);

#endif
