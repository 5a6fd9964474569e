/* SPDX-License-Identifier: Apache-2.0 */
/* walvfs_test.c - the WAL-gathering VFS, through walvfs.h, over a VFS of the
 * test's own that counts the writes reaching it. */
#include "../../../common/common.h"
#include "../../../server/walvfs.h"
#include "../test.h"

#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* ---- a VFS under it that counts WAL writes ---- */
struct cfile {
    sqlite3_file base;
    sqlite3_file *real;
    int wal;
};

static sqlite3_vfs *unix_vfs;
static sqlite3_vfs count_vfs;
static sqlite3_io_methods count_methods;
static int wal_writes, wal_syncs;
static long wal_bytes;

static int c_close(sqlite3_file *p)
{
    return ((struct cfile *)p)->real->pMethods->xClose(((struct cfile *)p)->real);
}
static int c_read(sqlite3_file *p, void *b, int n, sqlite3_int64 o)
{
    return ((struct cfile *)p)->real->pMethods->xRead(((struct cfile *)p)->real, b, n, o);
}
static int c_write(sqlite3_file *p, const void *b, int n, sqlite3_int64 o)
{
    struct cfile *f = (struct cfile *)p;

    if (f->wal) {
        wal_writes++;
        wal_bytes += n;
    }
    return f->real->pMethods->xWrite(f->real, b, n, o);
}
static int c_truncate(sqlite3_file *p, sqlite3_int64 s)
{
    return ((struct cfile *)p)->real->pMethods->xTruncate(((struct cfile *)p)->real, s);
}
static int c_sync(sqlite3_file *p, int fl)
{
    struct cfile *f = (struct cfile *)p;

    if (f->wal)
        wal_syncs++;
    return f->real->pMethods->xSync(f->real, fl);
}
static int c_size(sqlite3_file *p, sqlite3_int64 *s)
{
    return ((struct cfile *)p)->real->pMethods->xFileSize(((struct cfile *)p)->real, s);
}
static int c_lock(sqlite3_file *p, int l)
{
    return ((struct cfile *)p)->real->pMethods->xLock(((struct cfile *)p)->real, l);
}
static int c_unlock(sqlite3_file *p, int l)
{
    return ((struct cfile *)p)->real->pMethods->xUnlock(((struct cfile *)p)->real, l);
}
static int c_check(sqlite3_file *p, int *o)
{
    return ((struct cfile *)p)->real->pMethods->xCheckReservedLock(((struct cfile *)p)->real, o);
}
static int c_control(sqlite3_file *p, int op, void *a)
{
    return ((struct cfile *)p)->real->pMethods->xFileControl(((struct cfile *)p)->real, op, a);
}
static int c_sector(sqlite3_file *p)
{
    return ((struct cfile *)p)->real->pMethods->xSectorSize(((struct cfile *)p)->real);
}
static int c_device(sqlite3_file *p)
{
    return ((struct cfile *)p)->real->pMethods->xDeviceCharacteristics(((struct cfile *)p)->real);
}
static int c_shm_map(sqlite3_file *p, int r, int s, int e, void volatile **o)
{
    return ((struct cfile *)p)->real->pMethods->xShmMap(((struct cfile *)p)->real, r, s, e, o);
}
static int c_shm_lock(sqlite3_file *p, int o, int n, int fl)
{
    return ((struct cfile *)p)->real->pMethods->xShmLock(((struct cfile *)p)->real, o, n, fl);
}
static void c_shm_barrier(sqlite3_file *p)
{
    ((struct cfile *)p)->real->pMethods->xShmBarrier(((struct cfile *)p)->real);
}
static int c_shm_unmap(sqlite3_file *p, int d)
{
    return ((struct cfile *)p)->real->pMethods->xShmUnmap(((struct cfile *)p)->real, d);
}
static int c_fetch(sqlite3_file *p, sqlite3_int64 o, int n, void **pp)
{
    return ((struct cfile *)p)->real->pMethods->xFetch(((struct cfile *)p)->real, o, n, pp);
}
static int c_unfetch(sqlite3_file *p, sqlite3_int64 o, void *m)
{
    return ((struct cfile *)p)->real->pMethods->xUnfetch(((struct cfile *)p)->real, o, m);
}

static int c_open(sqlite3_vfs *v, const char *name, sqlite3_file *p, int flags, int *out)
{
    struct cfile *f = (struct cfile *)p;
    int rc;

    (void)v;
    f->real = (sqlite3_file *)(f + 1);
    f->wal = (flags & SQLITE_OPEN_WAL) != 0;
    rc = unix_vfs->xOpen(unix_vfs, name, f->real, flags, out);
    if (rc != SQLITE_OK) {
        if (f->real->pMethods)
            f->real->pMethods->xClose(f->real);
        f->base.pMethods = NULL;
        return rc;
    }
    f->base.pMethods = &count_methods;
    return SQLITE_OK;
}

static void count_install(void)
{
    static const sqlite3_io_methods m = {
        3,          c_close,       c_read,      c_write,   c_truncate, c_sync,   c_size,
        c_lock,     c_unlock,      c_check,     c_control, c_sector,   c_device, c_shm_map,
        c_shm_lock, c_shm_barrier, c_shm_unmap, c_fetch,   c_unfetch,
    };

    count_methods = m;
    unix_vfs = sqlite3_vfs_find("unix");
    count_vfs = *unix_vfs;
    count_vfs.zName = "count";
    count_vfs.szOsFile = (int)sizeof(struct cfile) + unix_vfs->szOsFile;
    count_vfs.xOpen = c_open;
    sqlite3_vfs_register(&count_vfs, 1);
}

/* ---- helpers ---- */
static char dir[64];

static sqlite3 *open_db(const char *cache)
{
    char path[128], sql[160];
    sqlite3 *db = NULL;

    snprintf(path, sizeof(path), "%s/t.db", dir);
    if (sqlite3_open(path, &db) != SQLITE_OK)
        return NULL;
    snprintf(sql, sizeof(sql),
             "PRAGMA journal_mode=WAL; PRAGMA synchronous=FULL; PRAGMA cache_size=%s;", cache);
    if (sqlite3_exec(db, sql, NULL, NULL, NULL) != SQLITE_OK) {
        sqlite3_close(db);
        return NULL;
    }
    return db;
}

static long long one(sqlite3 *db, const char *sql)
{
    sqlite3_stmt *s = NULL;
    long long v = -1;

    if (sqlite3_prepare_v2(db, sql, -1, &s, NULL) == SQLITE_OK && sqlite3_step(s) == SQLITE_ROW)
        v = sqlite3_column_int64(s, 0);
    sqlite3_finalize(s);
    return v;
}

static int exec(sqlite3 *db, const char *sql)
{
    return sqlite3_exec(db, sql, NULL, NULL, NULL);
}

/* Rows 'from'..'to' of ~300 bytes: about one page per 13 rows. */
static int insert_rows(sqlite3 *db, int from, int to)
{
    char sql[160];

    snprintf(sql, sizeof(sql),
             "WITH RECURSIVE n(i) AS (SELECT %d UNION ALL SELECT i+1 FROM n WHERE i<%d) "
             "INSERT INTO t SELECT i, randomblob(300) FROM n",
             from, to);
    return exec(db, sql);
}

/* ---- tests ---- */

/* The VFS is SQLite's default once installed, over the counting one; a
 * second install changes nothing. */
static void test_install(void)
{
    char tmpl[] = "/tmp/walvfs_test.XXXXXX";

    CHECK(mkdtemp(tmpl) != NULL);
    snprintf(dir, sizeof(dir), "%s", tmpl);
    count_install();
    CHECK_EQ_INT(walvfs_install(), SQLITE_OK);
    CHECK(sqlite3_vfs_find(NULL) == sqlite3_vfs_find(WALVFS_NAME));
    CHECK_EQ_INT(walvfs_install(), SQLITE_OK);
    CHECK(sqlite3_vfs_find(NULL) == sqlite3_vfs_find(WALVFS_NAME));
}

/* A file the VFS below cannot open fails to open through it, cleanly. */
static void test_open_fails(void)
{
    sqlite3 *db = NULL;

    CHECK_EQ_INT(sqlite3_open_v2("/nonexistent/dir/t.db", &db, SQLITE_OPEN_READWRITE, NULL),
                 SQLITE_CANTOPEN);
    sqlite3_close(db);
}

/* A COMMIT of many pages reaches the file as one write before its sync,
 * where SQLite makes two per page; the rows are all there, for this
 * connection, another one, and after both are closed. */
static void test_one_write_a_commit(void)
{
    sqlite3 *db = open_db("-2000"), *db2;
    int w0, s0;
    long b0;

    CHECK(db != NULL);
    if (!db)
        return;
    CHECK_OK(exec(db, "CREATE TABLE t(id INTEGER PRIMARY KEY, v BLOB)"));
    CHECK_OK(insert_rows(db, 1, 10)); /* the log's header and first frames are out */
    w0 = wal_writes, s0 = wal_syncs, b0 = wal_bytes;
    CHECK_OK(insert_rows(db, 11, 150)); /* ~11 pages: under WALVFS_BUF */
    CHECK_EQ_INT(wal_writes - w0, 1);
    CHECK_EQ_INT(wal_syncs - s0, 1);
    CHECK((wal_bytes - b0) % (4096 + 24) == 0 && wal_bytes - b0 >= 8 * (4096 + 24));
    CHECK_EQ_INT(one(db, "SELECT count(*) FROM t"), 150);
    db2 = open_db("-2000");
    CHECK(db2 != NULL);
    CHECK_EQ_INT(one(db2, "SELECT count(*) FROM t"), 150);
    CHECK_EQ_INT(one(db2, "SELECT sum(length(v)) FROM t"), 150 * 300);
    sqlite3_close(db2);
    sqlite3_close(db); /* the last close checkpoints and removes the log */
    db = open_db("-2000");
    CHECK_EQ_INT(one(db, "SELECT count(*) FROM t"), 150);
    CHECK_OK(exec(db, "DROP TABLE t"));
    sqlite3_close(db);
}

/* A transaction larger than the page cache spills frames to the log before
 * its COMMIT, and reads them back: they come back right (the gathered bytes
 * go out first), and more than WALVFS_BUF of them reach the file in writes
 * of at most WALVFS_BUF or of one page. A rolled-back one leaves nothing. */
static void test_spill_and_read_back(void)
{
    sqlite3 *db = open_db("10"), *db2; /* 10 pages of cache */
    long b0;
    int w0;

    CHECK(db != NULL);
    if (!db)
        return;
    CHECK_OK(exec(db, "CREATE TABLE t(id INTEGER PRIMARY KEY, v BLOB)"));
    CHECK_OK(exec(db, "BEGIN"));
    w0 = wal_writes, b0 = wal_bytes;
    CHECK_OK(insert_rows(db, 1, 3000)); /* ~230 pages through a 10-page cache */
    CHECK(wal_writes - w0 >= 2);
    CHECK(wal_bytes - b0 > WALVFS_BUF);
    CHECK((wal_bytes - b0) / (wal_writes - w0) <= WALVFS_BUF);
    CHECK_EQ_INT(one(db, "SELECT count(*) FROM t"), 3000);
    CHECK_EQ_INT(one(db, "SELECT sum(id) FROM t"), 3000LL * 3001 / 2);
    CHECK_OK(exec(db, "COMMIT"));
    CHECK_OK(exec(db, "BEGIN"));
    CHECK_OK(insert_rows(db, 3001, 6000));
    CHECK_OK(exec(db, "ROLLBACK"));
    db2 = open_db("-2000");
    CHECK_EQ_INT(one(db2, "SELECT count(*) FROM t"), 3000);
    CHECK_EQ_INT(one(db2, "SELECT count(*) FROM pragma_integrity_check WHERE integrity_check='ok'"),
                 1);
    sqlite3_close(db2);
    sqlite3_close(db);
}

static void test_cleanup(void)
{
    char cmd[128];

    snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
    CHECK_OK(system(cmd));
}

TEST_MAIN(test_install, test_open_fails, test_one_write_a_commit, test_spill_and_read_back,
          test_cleanup)
