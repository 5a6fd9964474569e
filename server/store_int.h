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

#include "../common/jsonw.h"
#include "changelog.h"
#include "commit.h"
#include "db.h"
#include "store.h"

/* The history's state on the write connection (store_hist.c). */
struct store_hist {
    uint64_t last_id;    /* the last interval id given (writer's lock) */
    int64_t rows[2];     /* rows of hist_bind, hist_health for the cap; -1 not counted yet
                            (writer's lock; read atomically) */
    uint64_t pod_cursor; /* where the next pruning step looks at hist_pod (writer's lock) */
};

/* Locks, in the order they are taken: the writer's (commit.h: commit.mu,
 * then commit.qmu), then the read pool's (db.h) or 'amu', each alone. A
 * write holds the writer's lock throughout and may take a read connection
 * only outside it. */
struct store {
    char *path;             /* the database file; new */
    struct changelog log;   /* the change log and the revision (changelog.h) */
    struct commit commit;   /* the write connection and group commit (commit.h) */
    struct db_pool readers; /* the read connections (db.h) */
    struct store_hist hist; /* the history's ids and row counts */
    pthread_mutex_t amu;    /* guards alloc_rest */
    json_t *alloc_rest;     /* {"cpuIds","memory"} the kubelet last gave, or NULL */
};

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
