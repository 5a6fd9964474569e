/* SPDX-License-Identifier: Apache-2.0 */
/* checkpoint.c - the write connection's WAL hook, the checkpoint after a
 * batch, and the thread that checkpoints beside the writes. */
#define LOG_MOD "store"
#include "../common/common.h"
#include "checkpoint.h"
#include "db.h"

#include <assert.h>

#define CKPT_FRAMES 1000     /* checkpoint every this many new frames */
#define CKPT_FRAMES_MAX 4000 /* ~16 MiB of WAL: checkpoint on the write connection */

void checkpoint_init(struct checkpointer *k)
{
    memset(k, 0, sizeof(*k));
    pthread_mutex_init(&k->mu, NULL);
    pthread_cond_init(&k->cv, NULL);
}

/* Checkpoint on the write connection: true when done. */
static bool checkpoint_here(struct checkpointer *k)
{
    if (sqlite3_wal_checkpoint_v2(k->wdb, NULL, SQLITE_CHECKPOINT_PASSIVE, NULL, NULL) != SQLITE_OK)
        return false; /* the thread's checkpoint runs (BUSY) or failed: its turn */
    __atomic_add_fetch(&k->ndone, 1, __ATOMIC_RELAXED);
    __atomic_add_fetch(&k->ndone_here, 1, __ATOMIC_RELAXED);
    return true;
}

/* Called by the write connection after each COMMIT, the writer's lock held,
 * with the frames now in the WAL. Every CKPT_FRAMES new frames (not after
 * every COMMIT) the log is to be checkpointed (checkpoint_after_batch). A
 * checkpoint that runs while writes go on never catches up with the end of
 * the log, so the log is not restarted and keeps growing under constant
 * writes; past CKPT_FRAMES_MAX the write connection checkpoints itself, as
 * SQLite would, so that the log restarts. */
static int on_wal(void *ctx, sqlite3 *db, const char *name, int frames)
{
    struct checkpointer *k = ctx;

    (void)db;
    (void)name;
    if ((uint64_t)frames < k->seen)
        k->next = CKPT_FRAMES; /* the log restarted */
    k->seen = (uint64_t)frames;
    if ((uint64_t)frames >= CKPT_FRAMES_MAX) {
        k->due = k->must = true;
        return SQLITE_OK;
    }
    if ((uint64_t)frames < k->next)
        return SQLITE_OK;
    k->next = (uint64_t)frames + CKPT_FRAMES;
    k->due = true;
    return SQLITE_OK;
}

void checkpoint_after_batch(struct checkpointer *k, bool (*queued)(void *arg), void *arg)
{
    if (!k->due)
        return;
    assert(k->started && sqlite3_get_autocommit(k->wdb));
    k->due = false;
    if (k->must) {
        k->must = false;
        checkpoint_here(k); /* BUSY or failed: the next COMMIT asks again */
        return;
    }
    if (!queued(arg) && checkpoint_here(k))
        return;
    pthread_mutex_lock(&k->mu);
    k->want = true;
    pthread_cond_signal(&k->cv);
    pthread_mutex_unlock(&k->mu);
}

/* One checkpoint on the thread's connection '*db' (opened the first time);
 * the first failure of a run of them is logged. */
static void checkpoint_there(struct checkpointer *k, sqlite3 **db)
{
    int rc = SQLITE_OK, log_frames = 0, done = 0;

    if (!*db && db_open(k->path, false, 0, db))
        rc = SQLITE_CANTOPEN;
    if (*db)
        rc = sqlite3_wal_checkpoint_v2(*db, NULL, SQLITE_CHECKPOINT_PASSIVE, &log_frames, &done);
    if (rc != SQLITE_OK && !k->failing)
        log_warn("WAL checkpoint failed: %s; retried after the next writes",
                 *db ? sqlite3_errmsg(*db) : "cannot open the database");
    else if (rc == SQLITE_OK && k->failing)
        log_info("WAL checkpoint works again");
    k->failing = rc != SQLITE_OK;
    if (rc == SQLITE_OK)
        __atomic_add_fetch(&k->ndone, 1, __ATOMIC_RELAXED);
}

static void *checkpointer(void *arg)
{
    struct checkpointer *k = arg;
    sqlite3 *db = NULL;

    pthread_mutex_lock(&k->mu);
    for (;;) {
        while (!k->want && !k->stop)
            pthread_cond_wait(&k->cv, &k->mu);
        if (k->stop)
            break;
        k->want = false;
        pthread_mutex_unlock(&k->mu);
        checkpoint_there(k, &db);
        pthread_mutex_lock(&k->mu);
    }
    pthread_mutex_unlock(&k->mu);
    db_close(db);
    return NULL;
}

err_t checkpoint_start(struct checkpointer *k, sqlite3 *wdb, const char *path)
{
    assert(!k->started && wdb && path);
    k->wdb = wdb;
    k->path = path;
    if (pthread_create(&k->thread, NULL, checkpointer, k) != 0) {
        log_err("cannot start the checkpoint thread");
        return ERR_NOMEM;
    }
    k->started = true;
    k->next = CKPT_FRAMES;
    sqlite3_wal_hook(wdb, on_wal, k); /* replaces the automatic checkpoint */
    return ERR_OK;
}

void checkpoint_release(struct checkpointer *k)
{
    if (k->started) {
        sqlite3_wal_hook(k->wdb, NULL, NULL);
        pthread_mutex_lock(&k->mu);
        k->stop = true;
        pthread_cond_signal(&k->cv);
        pthread_mutex_unlock(&k->mu);
        pthread_join(k->thread, NULL);
        k->started = false;
    }
    pthread_mutex_destroy(&k->mu);
    pthread_cond_destroy(&k->cv);
}

uint64_t checkpoint_count(struct checkpointer *k)
{
    return __atomic_load_n(&k->ndone, __ATOMIC_RELAXED);
}
