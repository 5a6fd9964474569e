/* SPDX-License-Identifier: Apache-2.0 */
/* db.c - SQLite connections for the store: the process-wide setup, opening
 * and claiming the file, the per-connection statement cache, the step and
 * column helpers, and the read pool. No SQL of podresd's schema is here. */
#define LOG_MOD "store"
#include "../common/common.h"
#include "../common/clock.h"
#include "db.h"
#include "sqlmem.h"
#include "walvfs.h"

#include <assert.h>
#include <pthread.h>
#include <stdarg.h>

/* The last failure logged, across threads. */
static struct {
    pthread_mutex_t mu;
    char text[512];    /* its message */
    uint64_t at_ms;    /* when it was logged (monotonic) */
    unsigned repeats;  /* times it failed again since, not logged */
    uint64_t quiet_ms; /* DB_ERR_QUIET_MS, or a test's */
} last_err = {PTHREAD_MUTEX_INITIALIZER, "", 0, 0, DB_ERR_QUIET_MS};

void db_err_quiet_ms(uint64_t ms)
{
    pthread_mutex_lock(&last_err.mu);
    last_err.quiet_ms = ms;
    pthread_mutex_unlock(&last_err.mu);
}

/* Log 'text' at 'lvl', unless it is the last failure logged and that was
 * less than the quiet interval ago. */
static void report(enum log_level lvl, const char *text)
{
    uint64_t now = clock_mono_ms();
    unsigned repeats = 0;
    bool loud;

    pthread_mutex_lock(&last_err.mu);
    loud = strcmp(last_err.text, text) != 0 || now - last_err.at_ms >= last_err.quiet_ms;
    if (loud) {
        if (strcmp(last_err.text, text) == 0)
            repeats = last_err.repeats;
        snprintf(last_err.text, sizeof(last_err.text), "%s", text);
        last_err.at_ms = now;
        last_err.repeats = 0;
    } else {
        last_err.repeats++;
    }
    pthread_mutex_unlock(&last_err.mu);
    if (loud && repeats)
        log_write(lvl, LOG_MOD, "%s (and %u times more since it was last logged)", text, repeats);
    else if (loud)
        log_write(lvl, LOG_MOD, "%s", text);
    else
        log_debug("%s (again; logged once a minute)", text);
}

err_t db_err(sqlite3 *db, int rc, const char *what)
{
    int prim = rc & 0xff;
    char text[512];

    if (prim == SQLITE_NOMEM)
        return ERR_NOMEM;
    if (prim == SQLITE_FULL) {
        snprintf(text, sizeof(text), "cannot %s: database or disk is full", what);
        report(LOG_WARN, text);
        return ERR_NOSPACE;
    }
    if (prim == SQLITE_BUSY || prim == SQLITE_LOCKED) {
        snprintf(text, sizeof(text), "cannot %s: database is busy", what);
        report(LOG_WARN, text);
        return ERR_UNAVAIL;
    }
    snprintf(text, sizeof(text), "cannot %s: %s", what,
             db ? sqlite3_errmsg(db) : sqlite3_errstr(rc));
    report(LOG_ERR, text);
    if (prim == SQLITE_IOERR && (rc == SQLITE_IOERR_WRITE || rc == SQLITE_IOERR_FSYNC))
        return ERR_NOSPACE;
    return ERR_DB;
}

/* ---- the statement cache ----
 * Preparing a statement costs more than running most of the store's. Each
 * connection keeps the statements it prepared, keyed by their SQL text;
 * db_done() resets one and hands it back. A connection is used by one
 * thread at a time, so its cache needs no lock; the registry that maps a
 * connection to its cache is scanned without a lock: caches are never
 * freed, a slot is claimed by compare-and-swap on 'db'. */
#define STMT_CACHE_MAX 96 /* statements per connection */
#define STMT_REG_MAX 64   /* connections with a cache, process-wide */

struct stmt_slot {
    const char *key;    /* the SQL pointer it was first asked with (a literal) */
    uint32_t hash;      /* FNV-1a of the SQL text */
    bool busy;          /* handed out, not yet db_done() */
    sqlite3_stmt *stmt; /* the prepared statement; the cache's */
};

struct stmt_cache {
    sqlite3 *db;                           /* owner; NULL while the cache is free */
    size_t n;                              /* slots used */
    struct stmt_slot slot[STMT_CACHE_MAX]; /* the statements */
};

static struct stmt_cache *stmt_reg[STMT_REG_MAX];

static struct stmt_cache *cache_of(sqlite3 *db)
{
    size_t i;

    for (i = 0; i < STMT_REG_MAX; i++) {
        struct stmt_cache *c = __atomic_load_n(&stmt_reg[i], __ATOMIC_ACQUIRE);

        if (!c)
            break; /* slots fill in order and are never emptied */
        if (__atomic_load_n(&c->db, __ATOMIC_ACQUIRE) == db)
            return c;
    }
    return NULL;
}

/* Give 'db' a cache: a free one, or a new one in an empty slot. Without one
 * the connection prepares and finalizes every statement. */
static void cache_attach(sqlite3 *db)
{
    struct stmt_cache *c, *fresh = NULL;
    size_t i;

    for (i = 0; i < STMT_REG_MAX; i++) {
        sqlite3 *none = NULL;

        c = __atomic_load_n(&stmt_reg[i], __ATOMIC_ACQUIRE);
        if (!c) {
            if (!fresh)
                fresh = calloc(1, sizeof(*fresh));
            if (!fresh)
                return;
            fresh->db = db;
            if (__atomic_compare_exchange_n(&stmt_reg[i], &c, fresh, false, __ATOMIC_ACQ_REL,
                                            __ATOMIC_ACQUIRE))
                return;
            fresh->db = NULL; /* lost the race; c is the winner's cache */
        }
        if (__atomic_compare_exchange_n(&c->db, &none, db, false, __ATOMIC_ACQ_REL,
                                        __ATOMIC_ACQUIRE))
            break;
    }
    free(fresh);
}

void db_close(sqlite3 *db)
{
    struct stmt_cache *c;
    size_t i;

    if (!db)
        return;
    c = cache_of(db);
    if (c) {
        for (i = 0; i < c->n; i++) {
            assert(!c->slot[i].busy); /* every db_prep() was given back */
            sqlite3_finalize(c->slot[i].stmt);
        }
        c->n = 0;
        __atomic_store_n(&c->db, NULL, __ATOMIC_RELEASE);
    }
    sqlite3_close(db);
}

static uint32_t sql_hash(const char *s)
{
    uint32_t h = 2166136261u;

    while (*s)
        h = (h ^ (unsigned char)*s++) * 16777619u;
    return h;
}

/* The idle cached statement for 'sql' in 'c' (NULL: none), marked busy.
 * SQL is almost always a literal: the same pointer finds its statement
 * without hashing it (strcmp still confirms: a few are built in stack
 * buffers, one address for several texts). */
static sqlite3_stmt *cache_take(struct stmt_cache *c, const char *sql, uint32_t *hash)
{
    size_t i;

    for (i = 0; c && i < c->n; i++) {
        struct stmt_slot *sl = &c->slot[i];

        if (!sl->busy && sl->key == sql && strcmp(sqlite3_sql(sl->stmt), sql) == 0) {
            sl->busy = true;
            return sl->stmt;
        }
    }
    *hash = sql_hash(sql);
    for (i = 0; c && i < c->n; i++) {
        struct stmt_slot *sl = &c->slot[i];

        if (!sl->busy && sl->hash == *hash && strcmp(sqlite3_sql(sl->stmt), sql) == 0) {
            sl->busy = true;
            return sl->stmt;
        }
    }
    return NULL;
}

/* A cached, idle statement for 'sql', marked busy; else a new one, cached
 * while there is room. An SQLite result code. */
static int stmt_get(sqlite3 *db, const char *sql, sqlite3_stmt **out)
{
    struct stmt_cache *c = cache_of(db);
    uint32_t h = 0;
    int rc;

    assert(sql);
    *out = cache_take(c, sql, &h);
    if (*out)
        return SQLITE_OK;
    rc = sqlite3_prepare_v3(db, sql, -1, c ? SQLITE_PREPARE_PERSISTENT : 0, out, NULL);
    if (rc == SQLITE_OK && c && c->n < STMT_CACHE_MAX)
        c->slot[c->n++] = (struct stmt_slot){.key = sql, .hash = h, .busy = true, .stmt = *out};
    return rc;
}

void db_done(sqlite3_stmt *stmt)
{
    struct stmt_cache *c;
    size_t i;

    if (!stmt)
        return;
    c = cache_of(sqlite3_db_handle(stmt));
    for (i = 0; c && i < c->n; i++) {
        if (c->slot[i].stmt == stmt) {
            assert(c->slot[i].busy);
            sqlite3_reset(stmt);
            sqlite3_clear_bindings(stmt);
            c->slot[i].busy = false;
            return;
        }
    }
    sqlite3_finalize(stmt); /* not cached: the cache was full */
}

/* ---- statements ---- */

/* Texts are bound with 'text_life': SQLITE_STATIC when they outlive the
 * statement's use (db_exec), which saves SQLite a malloc and a copy each. */
static err_t bind_args(sqlite3 *db, sqlite3_stmt *stmt, sqlite3_destructor_type text_life,
                       const char *fmt, va_list ap)
{
    int i, rc = SQLITE_OK;

    for (i = 0; fmt && fmt[i] && rc == SQLITE_OK; i++) {
        assert(fmt[i] == 't' || fmt[i] == 'i' || fmt[i] == 'u');
        if (fmt[i] == 't') {
            const char *s = va_arg(ap, const char *);

            rc = s ? sqlite3_bind_text(stmt, i + 1, s, -1, text_life)
                   : sqlite3_bind_null(stmt, i + 1);
        } else if (fmt[i] == 'i') {
            rc = sqlite3_bind_int64(stmt, i + 1, va_arg(ap, int64_t));
        } else {
            rc = sqlite3_bind_int64(stmt, i + 1, (int64_t)va_arg(ap, uint64_t));
        }
    }
    return rc == SQLITE_OK ? ERR_OK : db_err(db, rc, "bind a parameter");
}

static err_t prep_va(sqlite3 *db, sqlite3_stmt **stmt, sqlite3_destructor_type text_life,
                     const char *sql, const char *fmt, va_list ap)
{
    sqlite3_stmt *s = NULL;
    int rc;
    err_t e;

    if (fault_alloc_fails())
        return ERR_NOMEM;
    rc = stmt_get(db, sql, &s);
    if (rc != SQLITE_OK)
        return db_err(db, rc, "prepare a statement");
    e = bind_args(db, s, text_life, fmt, ap);
    if (e) {
        db_done(s);
        return e;
    }
    *stmt = s;
    return ERR_OK;
}

err_t db_prep(sqlite3 *db, sqlite3_stmt **stmt, const char *sql, const char *fmt, ...)
{
    va_list ap;
    err_t rc;

    va_start(ap, fmt);
    rc = prep_va(db, stmt, SQLITE_TRANSIENT, sql, fmt, ap);
    va_end(ap);
    return rc;
}

/* prep_va() and one step: on ERR_OK *stmt (give it back with db_done())
 * stands on the first row when *row, else is done. */
static err_t first_row(sqlite3 *db, sqlite3_stmt **stmt, bool *row,
                       sqlite3_destructor_type text_life, const char *sql, const char *fmt,
                       va_list ap)
{
    sqlite3_stmt *s = NULL;
    err_t rc = prep_va(db, &s, text_life, sql, fmt, ap);

    if (rc)
        return rc;
    rc = db_step(db, s, row);
    if (rc) {
        db_done(s);
        return rc;
    }
    *stmt = s;
    return ERR_OK;
}

err_t db_row(sqlite3 *db, sqlite3_stmt **stmt, const char *sql, const char *fmt, ...)
{
    sqlite3_stmt *s = NULL;
    va_list ap;
    bool row = false;
    err_t rc;

    va_start(ap, fmt);
    rc = first_row(db, &s, &row, SQLITE_TRANSIENT, sql, fmt, ap);
    va_end(ap);
    if (rc)
        return rc;
    if (!row) {
        db_done(s);
        return ERR_NOTFOUND;
    }
    *stmt = s;
    return ERR_OK;
}

err_t db_exec(sqlite3 *db, const char *sql, const char *fmt, ...)
{
    sqlite3_stmt *s = NULL;
    va_list ap;
    bool row = false;
    err_t rc;

    va_start(ap, fmt);
    rc = first_row(db, &s, &row, SQLITE_STATIC, sql, fmt, ap); /* the args outlive it */
    va_end(ap);
    if (!rc)
        db_done(s);
    return rc;
}

err_t db_get_u64(sqlite3 *db, uint64_t *v, const char *sql, const char *fmt, ...)
{
    sqlite3_stmt *s = NULL;
    va_list ap;
    bool row = false;
    err_t rc;

    va_start(ap, fmt);
    rc = first_row(db, &s, &row, SQLITE_STATIC, sql, fmt, ap);
    va_end(ap);
    if (rc)
        return rc;
    *v = row ? (uint64_t)sqlite3_column_int64(s, 0) : 0;
    db_done(s);
    return ERR_OK;
}

err_t db_step(sqlite3 *db, sqlite3_stmt *stmt, bool *row)
{
    int rc = sqlite3_step(stmt);

    if (rc == SQLITE_ROW) {
        *row = true;
        return ERR_OK;
    }
    if (rc == SQLITE_DONE) {
        *row = false;
        return ERR_OK;
    }
    return db_err(db, rc, "run a statement");
}

const char *db_text(sqlite3_stmt *stmt, int col)
{
    const unsigned char *s = sqlite3_column_text(stmt, col);

    return s ? (const char *)s : "";
}

const char *db_text_or_null(sqlite3_stmt *stmt, int col)
{
    return sqlite3_column_type(stmt, col) == SQLITE_NULL ? NULL : db_text(stmt, col);
}

json_t *db_json(sqlite3_stmt *stmt, int col)
{
    const char *s = db_text(stmt, col);
    json_t *v = json_loads(s, JSON_DECODE_ANY, NULL);

    return v ? v : json_object();
}

int db_tx(sqlite3 *db, const char *sql)
{
    sqlite3_stmt *s = NULL;
    int rc = stmt_get(db, sql, &s);

    if (rc != SQLITE_OK)
        return rc;
    rc = sqlite3_step(s);
    if (rc == SQLITE_DONE || rc == SQLITE_ROW)
        rc = SQLITE_OK;
    db_done(s);
    return rc;
}

/* ---- connections ---- */

/* Connection settings shared by the writer and readers. Debian builds
 * SQLite with secure_delete on: every deleted or rewritten cell (a pod row
 * at each bind) is zeroed first. Nothing podresd stores is secret (a token
 * never is), so it is off, as in SQLite's own default build. */
static err_t configure(sqlite3 *db, int cache_kib)
{
    static const char *const pragmas =
        "PRAGMA journal_mode=WAL; PRAGMA synchronous=FULL; PRAGMA foreign_keys=ON;"
        "PRAGMA journal_size_limit=16777216;" /* a restarted WAL shrinks back to 16 MiB */
        "PRAGMA secure_delete=OFF;";
    char sql[48];
    int rc;

    sqlite3_busy_timeout(db, 5000);
    rc = sqlite3_exec(db, pragmas, NULL, NULL, NULL);
    if (rc != SQLITE_OK)
        return db_err(db, rc, "configure the database");
    if (cache_kib > 0) {
        snprintf(sql, sizeof(sql), "PRAGMA cache_size=-%d;", cache_kib);
        sqlite3_exec(db, sql, NULL, NULL, NULL); /* SQLite's default cache else */
    }
    return ERR_OK;
}

/* Take the database for this process (unix-excl, sqlite_setup) on the
 * first connection's first read, without waiting: the lock is held by
 * another process till it exits, so a busy file is a second podresd (or a
 * sqlite3 shell) on it, and the start fails at once. */
static err_t claim(sqlite3 *db, const char *path)
{
    int rc;

    sqlite3_busy_timeout(db, 0);
    rc = sqlite3_exec(db, "SELECT count(*) FROM sqlite_schema", NULL, NULL, NULL);
    if ((rc & 0xff) == SQLITE_BUSY) {
        log_err("database '%s' is in use by another process (another podresd on the same db?)",
                path);
        return ERR_UNAVAIL;
    }
    return rc == SQLITE_OK ? ERR_OK : db_err(db, rc, "read the database");
}

/* Process-wide SQLite settings, before SQLite initialises. Debian's build
 * has no lookaside allocator (SQLITE_OMIT_LOOKASIDE), so each statement
 * makes ~100 small mallocs; with memory statistics on (the default) each
 * one also takes a global mutex that every connection shares. podresd reads
 * no SQLite memory statistics and sets no heap limit. If SQLite is already
 * initialised (a program using it before store_open), those two change
 * nothing. walvfs gathers each transaction's WAL writes (walvfs.h).
 *
 * Below walvfs is SQLite's "unix-excl" VFS, not "unix": the first
 * connection takes a POSIX write lock on the database file for the process
 * and holds it till the last one closes, and the WAL index lives in the
 * process's memory, not in a mapped -shm file. podresd's connections share
 * both; another process cannot open the database at all (the open of a
 * second podresd fails, store_open), where with "unix" it could write
 * beside us from its own idea of the revision. And a transaction takes its
 * locks in memory, where "unix" makes several fcntl calls a write (read
 * mark, read lock, write lock, and their release). */
static void sqlite_setup(void)
{
    sqlite3_vfs *excl;

    (void)sqlite3_config(SQLITE_CONFIG_MEMSTATUS, 0);
    (void)sqlmem_install();
    /* last: finding or registering a VFS initialises SQLite, after which
     * the two settings above would be refused */
    excl = sqlite3_vfs_find("unix-excl");
    if (!excl || sqlite3_vfs_register(excl, 1) != SQLITE_OK)
        log_warn("cannot use SQLite's unix-excl VFS; other processes may open the database");
    if (walvfs_install() != SQLITE_OK)
        log_warn("cannot register the WAL-gathering VFS; SQLite's own is used");
}

err_t db_open(const char *path, bool claim_file, int cache_kib, sqlite3 **out)
{
    static pthread_once_t once = PTHREAD_ONCE_INIT;
    sqlite3 *db = NULL;
    int rc;
    err_t e;

    assert(path);
    pthread_once(&once, sqlite_setup);
    rc = sqlite3_open_v2(path, &db,
                         SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX |
                             SQLITE_OPEN_NOFOLLOW,
                         NULL);
    if (rc != SQLITE_OK) {
        log_err("cannot open database '%s': %s", path, db ? sqlite3_errmsg(db) : "out of memory");
        e = rc == SQLITE_NOMEM ? ERR_NOMEM : ERR_DB;
        goto out;
    }
    e = claim_file ? claim(db, path) : ERR_OK;
    if (e)
        goto out;
    e = configure(db, cache_kib);
    if (e)
        goto out;
    cache_attach(db);
    *out = db;
    db = NULL;
out:
    sqlite3_close(db); /* NULL is a no-op */
    return e;
}

/* ---- the read pool ---- */

void db_pool_init(struct db_pool *p, const char *path)
{
    memset(p, 0, sizeof(*p));
    p->path = path;
    pthread_mutex_init(&p->mu, NULL);
    pthread_cond_init(&p->cv, NULL);
}

void db_pool_release(struct db_pool *p)
{
    size_t i;

    assert(p->nbusy == 0);
    for (i = 0; i < p->nidle; i++)
        db_close(p->idle[i]);
    p->nidle = 0;
    pthread_mutex_destroy(&p->mu);
    pthread_cond_destroy(&p->cv);
}

/* A read connection comes back: to the pool, or closed when 'db' is NULL.
 * Beyond DB_POOL_WARM idle connections, it comes back without its page
 * cache: a burst of readers (watchers' initial lists) would otherwise leave
 * DB_POOL_MAX caches of the whole database behind. */
static void read_done(struct db_pool *p, sqlite3 *db)
{
    if (db && __atomic_load_n(&p->nidle, __ATOMIC_RELAXED) >= DB_POOL_WARM)
        sqlite3_db_release_memory(db);
    pthread_mutex_lock(&p->mu);
    assert(p->nbusy > 0 && p->nidle + p->nbusy <= DB_POOL_MAX);
    p->nbusy--;
    if (db)
        p->idle[p->nidle++] = db;
    pthread_cond_signal(&p->cv);
    pthread_mutex_unlock(&p->mu);
}

void db_pool_trim(struct db_pool *p)
{
    sqlite3 *extra[DB_POOL_MAX];
    size_t n = 0;

    pthread_mutex_lock(&p->mu);
    while (p->nidle > DB_POOL_WARM)
        extra[n++] = p->idle[--p->nidle];
    pthread_mutex_unlock(&p->mu);
    while (n > 0)
        db_close(extra[--n]);
}

/* Readers are many and short: a small page cache each. */
#define READ_CACHE_KIB 128

err_t db_read_begin(struct db_pool *p, sqlite3 **db)
{
    sqlite3 *c = NULL;
    int rc;
    err_t e = ERR_OK;

    pthread_mutex_lock(&p->mu);
    while (p->nidle == 0 && p->nbusy >= DB_POOL_MAX)
        pthread_cond_wait(&p->cv, &p->mu);
    if (p->nidle > 0)
        c = p->idle[--p->nidle];
    p->nbusy++;
    pthread_mutex_unlock(&p->mu);
    if (!c)
        e = db_open(p->path, false, READ_CACHE_KIB, &c);
    if (e)
        goto out;
    rc = sqlite3_exec(c, "BEGIN;", NULL, NULL, NULL);
    if (rc != SQLITE_OK)
        e = db_err(c, rc, "begin a read transaction");
out:
    if (e) {
        db_close(c);
        read_done(p, NULL);
        return e;
    }
    *db = c;
    return ERR_OK;
}

void db_read_end(struct db_pool *p, sqlite3 *db)
{
    if (!db)
        return;
    sqlite3_exec(db, "COMMIT;", NULL, NULL, NULL);
    read_done(p, db);
}
