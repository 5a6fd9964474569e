/* SPDX-License-Identifier: Apache-2.0 */
/* store_int.h - the store's own contract between its files: struct store,
 * made of its parts (the write connection and group commit, the change
 * log, the read pool, the history's counters, what the kubelet gave beside
 * its devices), and the calls the store's files make to each other.
 * Nothing outside the store includes it. */
#ifndef PODRES_STORE_INT_H
#define PODRES_STORE_INT_H
#include <pthread.h>
#include <sqlite3.h>

#include "changelog.h"
#include "commit.h"
#include "db.h"
#include "store.h"

/* The end of an open interval (schema/0008_history_open.sql): 2^47 - 1
 * ms, a 6-byte integer in a record as every end before it is; in SQL text
 * and as a number. A time asked for is taken at most HIST_OPEN_MS - 1. */
#define HIST_OPEN "140737488355327"
#define HIST_OPEN_MS INT64_C(140737488355327)
/* The last hist_bind id folded into the lookups
 * (schema/0007_history_fold.sql), as an SQL subquery: rows past it are
 * read from hist_bind itself. */
#define HIST_FOLDED "(SELECT value FROM meta WHERE key='hist_folded')"

/* The history's state on the write connection (store_histw.c,
 * store_hist.c). */
struct store_hist {
    uint64_t last_id[2];   /* the last interval id given, of hist_bind, hist_health: each
                              table's ids grow with its times, whatever the other's
                              (a replay gives ids for the times of older writes)
                              (writer's lock) */
    int64_t rows[2];       /* rows of hist_bind, hist_health for the cap; -1 not counted yet
                              (writer's lock; read atomically) */
    uint64_t pod_cursor;   /* where the next pruning step looks at hist_pod, 0 between
                              rounds (writer's lock) */
    bool pods_due;         /* intervals were dropped since the round began: another
                              round of hist_pod is due (writer's lock) */
    struct hist_writer *w; /* what the writer remembers (writer's lock); new, NULL in a
                              build without history */
};

/* Locks: the writer's, in their order (commit.h: 'mu', then 'qmu', then
 * the checkpointer's and the feed's); the read pool's (db.h); and 'amu'.
 * The last two are taken alone: never while holding another lock (a write
 * takes no read connection), and no other is taken while they are held. */
struct store {
    char *path;             /* the database file; new */
    struct changelog log;   /* the change log and the revision (changelog.h) */
    struct commit commit;   /* the write connection and group commit (commit.h) */
    struct db_pool readers; /* the read connections (db.h) */
    struct store_hist hist; /* the history's ids and row counts */
    pthread_mutex_t amu;    /* guards cpu_ids and memory */
    json_t *cpu_ids;        /* the kubelet's last allocatable CPU ids (an array), or NULL */
    json_t *memory;         /* its last allocatable memory (an array), or NULL */
    const struct ident_rules *ident;  /* identity rules (ident.h), borrowed; NULL: none */
    _Atomic uint64_t alias_conflicts; /* aliases the kubelet mirror left out */
    _Atomic uint64_t hist_failures;   /* pruning steps that failed */
};

/* Identity (store_ident.c), inside a write. The physical id and aliases of
 * device resource/id: the 'given' entry's "physical" when not empty, else
 * the rules'; its "aliases" and the rules', sorted, without the id, as JSON
 * text. *physical ("" for whole) and *aliases are new. */
err_t st_ident_of(struct store *st, const char *resource, const char *id, const json_t *given,
                  const char **physical, char **aliases) WARN_UNUSED;
/* ERR_CONFLICT, 'e' naming both devices, when an alias of resource/id (a
 * JSON array text) is another device's alias or id, or with 'id_too' its
 * id another's alias. */
err_t st_names_check(struct store *st, const char *resource, const char *id, const char *aliases,
                     bool id_too, struct error *e) WARN_UNUSED;
/* Inside a write of the whole device set of 'resource', once its rows are
 * written: ERR_CONFLICT, 'e' naming both devices, when a name its devices
 * hold names another device (st_names_check's cases, its own devices
 * included); else its rows of the alias index are made anew from theirs. */
err_t st_names_settle(struct store *st, const char *resource, struct error *e) WARN_UNUSED;
/* Count an alias left out because it named another device (a metric). */
void st_alias_conflict_count(struct store *st);

/* Run fn(st, ctx) as one write of a batch and return its result once the
 * batch's COMMIT holds it (or at once when it fails: then nothing of it is
 * kept). Concurrent writes are queued and run back to back by one thread,
 * the combiner, so the write lock never waits for a thread to wake up; fn
 * may run on another thread than the caller's (ctx lives on the caller's
 * stack, which waits). fn reads and writes through st->commit.db and records its
 * events with changelog_emit(&st->log, ..); it returns an error to be
 * rolled back. */
err_t st_write(struct store *st, err_t (*fn)(struct store *st, void *ctx), void *ctx) WARN_UNUSED;
/* Inside an st_write function: roll this write back though it succeeded
 * (it found nothing to change); st_write then returns ERR_OK. */
void st_write_discard(struct store *st);

/* Reservations (store_resv.c), inside a write: re-evaluate the state of
 * the reservation of pod ns/name (none: nothing to do), or of every
 * reservation, emitting Reservation MODIFIED for each whose state changed. */
err_t st_resv_refresh(struct store *st, const char *ns, const char *name) WARN_UNUSED;
err_t st_resv_refresh_all(struct store *st) WARN_UNUSED;

/* History (store_histw.c): set up the writer of binding and health
 * intervals on the write connection: its functions, the TEMP triggers that
 * record health intervals, its group commit hooks. A build with
 * -DPODRES_NO_HISTORY (the bench's reference build, mk/bench.mk) records
 * none: the calls below do nothing there. */
#ifdef PODRES_NO_HISTORY
#define ST_HISTORY 0
#else
#define ST_HISTORY 1
#endif
err_t st_hist_attach(struct store *st) WARN_UNUSED;
/* Inside a write, after the bindings row of device 'res' 'id' changed: it
 * is held by pod 'ns'/'pod' (instance 'uid', "" in kubelet mode) in
 * 'container', so the device's open interval closes and one opens
 * (a holder with pod "" is none: nothing is recorded); or it is held by
 * nobody (let go, or its row deleted), so its open interval, if any,
 * closes. The operation goes into the change log's next row (replayed
 * into hist_bind later, store_histw.c), or, when the write emits no event
 * after it, is applied at the write's end. Every writer of a bindings row
 * calls one of them for each row it changes: a device has an open
 * interval exactly while its bindings row names a pod. An error fails
 * the write. */
err_t st_hist_bind(struct store *st, const char *res, const char *id, const char *ns,
                   const char *pod, const char *uid, const char *container) WARN_UNUSED;
err_t st_hist_unbind(struct store *st, const char *res, const char *id) WARN_UNUSED;
/* The next interval id of table 't' (0 hist_bind, 1 hist_health):
 * from_ms * 1024 or the id after the table's last, whichever is larger,
 * for an interval from the write's time (st_hist_next_id) or from 'ms';
 * counts a row of the table for the cap. Writer's lock. */
uint64_t st_hist_next_id(struct store *st, int t);
uint64_t st_hist_next_id_at(struct store *st, int t, uint64_t ms);
/* After a write's own work, inside it: note the last row of the change log
 * that took binding operations (st_hist_sync replays up to it), apply
 * those no row took, and replay the log when it is REPLAY_LAG revisions
 * past the mark (store_histw.c). */
err_t st_hist_after_write(struct store *st) WARN_UNUSED;
/* Inside a write: apply the binding operations of the change log's rows
 * past the mark (the pruning tick, before it folds). */
err_t st_hist_replay(struct store *st) WARN_UNUSED;
/* Inside a write: fold up to FOLD_ROWS intervals into the lookups
 * (store_hist.c); '*more' set when more wait. */
err_t st_hist_fold(struct store *st, bool *more) WARN_UNUSED;
/* Outside a write: make the history hold every binding operation
 * committed so far (a write of its own when some are not applied yet);
 * a read of the history calls it first. */
err_t st_hist_sync(struct store *st) WARN_UNUSED;
/* Forget the pods the writer knows: a pruning step deleted some. */
void st_hist_forget_pods(struct store *st);

#endif
