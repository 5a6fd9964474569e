/* SPDX-License-Identifier: Apache-2.0 */
/* store.c - opening and freeing the store: its parts (db.h, changelog.h,
 * commit.h), the schema migrations, and the store's writes run through the
 * group commit. The reads are in store_view.c and store_hist.c, the writes
 * in store_devices.c, store_pods.c, store_resv.c and store_sync.c. */
#define LOG_MOD "store"
#include "../common/common.h"
#include "store_int.h"

#include <assert.h>

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
    char sql[64];
    uint64_t v = 0;
    int ver, n = store_schema_version(), i, rc;
    err_t e = db_get_u64(db, &v, "PRAGMA user_version", NULL);

    if (e)
        return e;
    ver = (int)v;
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

err_t store_open(const struct store_opts *opts, struct store **out)
{
    struct store *st = NULL;
    err_t rc = ERR_NOMEM;

    assert(opts && opts->path);
    st = calloc(1, sizeof(*st));
    if (!st)
        return ERR_NOMEM;
    st->path = strdup(opts->path);
    if (!st->path) {
        free(st);
        return ERR_NOMEM;
    }
    /* every part is initialised before anything can fail: store_free()
     * releases them all */
    changelog_init(&st->log, opts->history ? opts->history : 1, opts->feed);
    commit_init(&st->commit, &st->log);
    db_pool_init(&st->readers, st->path);
    pthread_mutex_init(&st->amu, NULL);
    rc = commit_open(&st->commit, st->path);
    if (rc)
        goto out;
    rc = migrate(st->commit.db);
    if (rc)
        goto out;
    /* the history first: it applies what the log holds for it before the
       ring is laid out again */
    rc = st_hist_attach(st);
    if (rc)
        goto out;
    rc = changelog_open(&st->log, st->commit.db);
    if (rc)
        goto out;
    rc = commit_start(&st->commit, st->path);
out:
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
    db_pool_release(&st->readers);
    commit_release(&st->commit);
    changelog_release(&st->log);
    pthread_mutex_destroy(&st->amu);
    json_decref(st->cpu_ids);
    json_decref(st->memory);
    free(st->path);
    free(st);
}

void store_set_feed(struct store *st, struct feed *feed)
{
    pthread_mutex_lock(&st->commit.mu);
    changelog_set_feed(&st->log, feed);
    pthread_mutex_unlock(&st->commit.mu);
}

uint64_t store_revision(struct store *st)
{
    return changelog_revision(&st->log);
}

void store_release_idle(struct store *st)
{
    db_pool_trim(&st->readers);
}

/* ---- writes ---- */

/* A write of the store's, as commit_write() runs it. */
struct st_op {
    struct store *st;                         /* the store */
    err_t (*fn)(struct store *st, void *ctx); /* the write */
    void *ctx;                                /* its arguments and results */
};

static err_t st_op_run(void *arg)
{
    struct st_op *o = arg;
    err_t rc = o->fn(o->st, o->ctx);

    return rc ? rc : st_hist_after_write(o->st);
}

err_t st_write(struct store *st, err_t (*fn)(struct store *st, void *ctx), void *ctx)
{
    struct st_op o = {st, fn, ctx};

    return commit_write(&st->commit, st_op_run, &o);
}

void st_write_discard(struct store *st)
{
    commit_discard(&st->commit);
}
