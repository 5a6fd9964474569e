/* SPDX-License-Identifier: Apache-2.0 */
/* db.h - podresd's SQLite connections: opening one (the process-wide SQLite
 * setup, the claim of the database file, the pragmas), the statement cache
 * each connection keeps, the bind, step and column helpers, and the pool of
 * read connections. It knows no table of podresd's schema: the change log
 * (changelog.h), the group commit (commit.h) and the views (store_view.h)
 * are built on it. A connection is used by one thread at a time; the pool
 * is thread-safe. */
#ifndef PODRES_DB_H
#define PODRES_DB_H
#include <jansson.h>
#include <pthread.h>
#include <sqlite3.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "../common/err.h"

#define DB_POOL_MAX 16 /* read connections at most, in use or idle */
#define DB_POOL_WARM 2 /* idle read connections that keep their page cache */

/* Map an SQLite result code 'rc' to an err_t, logging what failed
 * ("cannot <what>: <sqlite3_errmsg>"): a full disk (or a failed write or
 * fsync) is ERR_NOSPACE, a busy database ERR_UNAVAIL, else ERR_DB. 'db'
 * may be NULL. The same failure again, the last one logged, is logged
 * once every DB_ERR_QUIET_MS at most (at debug level in between), with the
 * number of times it was not: a step retried every second that keeps
 * failing does not log every second. */
#define DB_ERR_QUIET_MS 60000
/* Set that interval to 'ms' (tests; DB_ERR_QUIET_MS until then). */
void db_err_quiet_ms(uint64_t ms);
err_t db_err(sqlite3 *db, int rc, const char *what);

/* Open (creating it if needed) the database 'path' with podresd's settings
 * (WAL, synchronous=FULL, foreign keys) and a statement cache. With
 * 'claim', take the file for this process first, without waiting:
 * ERR_UNAVAIL (logged) when another process holds it. 'cache_kib' is the
 * page cache in KiB, 0 for SQLite's default. On ERR_OK *out is new:
 * db_close() it. */
err_t db_open(const char *path, bool claim, int cache_kib, sqlite3 **out) WARN_UNUSED;
/* Close a connection of db_open() and free its statement cache for the
 * next one. NULL is a no-op. */
void db_close(sqlite3 *db);

/* Prepare 'sql' (or take the connection's cached statement for it) and bind
 * the arguments by 'fmt', one letter each: 't' const char * (NULL binds
 * NULL), 'i' int64_t, 'u' uint64_t; 'fmt' NULL binds none. On ERR_OK give
 * *stmt back with db_done(), never finalize it. */
err_t db_prep(sqlite3 *db, sqlite3_stmt **stmt, const char *sql, const char *fmt, ...) WARN_UNUSED;
/* Reset a statement of db_prep() and return it to its cache (or finalize
 * one the cache had no room for). NULL is a no-op. */
void db_done(sqlite3_stmt *stmt);
/* Run a statement with no result rows; arguments as for db_prep(), which
 * must outlive the call. */
err_t db_exec(sqlite3 *db, const char *sql, const char *fmt, ...) WARN_UNUSED;
/* A one-column integer query: its first row's value in *v, 0 when there is
 * no row; arguments as for db_prep(). */
err_t db_get_u64(sqlite3 *db, uint64_t *v, const char *sql, const char *fmt, ...) WARN_UNUSED;
/* A query of one row: db_prep() and one step. On ERR_OK *stmt stands on
 * the row (read it, then db_done() it); ERR_NOTFOUND without a row (the
 * statement is given back). Arguments as for db_prep(). */
err_t db_row(sqlite3 *db, sqlite3_stmt **stmt, const char *sql, const char *fmt, ...) WARN_UNUSED;
/* Step: ERR_OK with *row true or false, or the mapped error. */
err_t db_step(sqlite3 *db, sqlite3_stmt *stmt, bool *row) WARN_UNUSED;
/* Column as a C string, "" for NULL; borrowed till the next step. */
const char *db_text(sqlite3_stmt *stmt, int col);
/* Column as a C string, NULL for NULL; borrowed till the next step. */
const char *db_text_or_null(sqlite3_stmt *stmt, int col);
/* Column holding JSON text as a new value (an empty object on bad JSON). */
json_t *db_json(sqlite3_stmt *stmt, int col);
/* Run a transaction control statement ("BEGIN IMMEDIATE", "COMMIT",
 * "SAVEPOINT x" ...) from the statement cache and return SQLite's result
 * code. Never fault-injected: a failed ROLLBACK TO would leave a write
 * half undone. */
int db_tx(sqlite3 *db, const char *sql);

/* The read connections: opened as readers need them and kept idle for the
 * next one. At most DB_POOL_MAX exist at once, in use or idle: SQLite keeps
 * the descriptors of a connection closed while others hold locks on the
 * file, so connections opened in a burst and closed would stay as fds.
 * Lock: 'mu' guards 'idle', 'nidle' and 'nbusy' ('nidle' is also read
 * atomically, as a hint); 'cv' waits on it. */
struct db_pool {
    const char *path;           /* the database file; borrowed, outlives the pool */
    pthread_mutex_t mu;         /* the pool's lock */
    pthread_cond_t cv;          /* signalled when a connection comes back */
    sqlite3 *idle[DB_POOL_MAX]; /* idle read connections */
    size_t nidle;               /* how many are idle */
    size_t nbusy;               /* read connections in use (outside the pool) */
};

void db_pool_init(struct db_pool *p, const char *path);
/* Close the idle connections. None may be in use. */
void db_pool_release(struct db_pool *p);
/* Borrow a read connection inside a read transaction (BEGIN), waiting while
 * DB_POOL_MAX are in use. On ERR_OK *db is borrowed till db_read_end(). */
err_t db_read_begin(struct db_pool *p, sqlite3 **db) WARN_UNUSED;
/* End the read transaction and give the connection back. NULL is a no-op. */
void db_read_end(struct db_pool *p, sqlite3 *db);
/* Close the idle connections beyond DB_POOL_WARM. */
void db_pool_trim(struct db_pool *p);

#endif
