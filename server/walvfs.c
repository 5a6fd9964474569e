/* SPDX-License-Identifier: Apache-2.0 */
/* walvfs.c - a VFS over SQLite's own that gathers WAL writes.
 *
 * A COMMIT in WAL mode writes each page as two pwrites, the 24-byte frame
 * header and the page, one after the other at the end of the log, then
 * syncs the log: a 1-client PUT made ~11 pwrites and one fdatasync. Here the
 * writes to a WAL file that follow each other are kept in a buffer of the
 * file's own and written as one when anything else happens to the file: a
 * sync (every COMMIT with synchronous=FULL), a read, a size, a truncate, a
 * file control, a close, or a write elsewhere or too large for the buffer.
 *
 * Why this is safe: other connections read frames only up to the log's
 * last commit as the WAL index records it, and SQLite updates the index
 * after the frames are written and synced (sqlite3WalFrames), so after our
 * flush; this connection's own reads flush first. A crash before the flush
 * loses frames of a COMMIT that has not returned, as a crash before the
 * pwrites did. A failed flush fails the sync, so the COMMIT fails and its
 * writes are not acknowledged. Files other than WAL files pass through. */
#include "walvfs.h"

#include <sqlite3.h>
#include <stdlib.h>
#include <string.h>

struct wfile {
    sqlite3_file base;  /* first: SQLite sees a sqlite3_file */
    sqlite3_file *real; /* the unix VFS's file, right after this struct */
    int wal;            /* a WAL file: writes are gathered */
    char *buf;          /* gathered bytes (WALVFS_BUF, allocated on the first write) */
    size_t len;         /* bytes in buf */
    sqlite3_int64 off;  /* where buf[0] goes in the file */
};

static sqlite3_vfs *base_vfs; /* the default VFS before ours */
static sqlite3_vfs wal_vfs;

/* Write what is gathered; nothing is kept after a failure (SQLite rolls the
 * transaction back and rewrites those frames, if at all, from its cache). */
static int flush(struct wfile *f)
{
    int rc = SQLITE_OK;

    if (f->len > 0) {
        rc = f->real->pMethods->xWrite(f->real, f->buf, (int)f->len, f->off);
        f->len = 0;
    }
    return rc;
}

#define FILE_OF(p) ((struct wfile *)(p))
#define REAL(p) (FILE_OF(p)->real)

static int w_close(sqlite3_file *p)
{
    struct wfile *f = FILE_OF(p);
    int rc = flush(f), rc2 = f->real->pMethods->xClose(f->real);

    free(f->buf);
    f->buf = NULL;
    return rc != SQLITE_OK ? rc : rc2;
}

static int w_read(sqlite3_file *p, void *out, int n, sqlite3_int64 off)
{
    int rc = flush(FILE_OF(p));

    return rc != SQLITE_OK ? rc : REAL(p)->pMethods->xRead(REAL(p), out, n, off);
}

static int w_write(sqlite3_file *p, const void *in, int n, sqlite3_int64 off)
{
    struct wfile *f = FILE_OF(p);
    int rc;

    if (!f->wal || n <= 0)
        return f->real->pMethods->xWrite(f->real, in, n, off);
    if (f->len > 0 && (off != f->off + (sqlite3_int64)f->len || f->len + (size_t)n > WALVFS_BUF)) {
        rc = flush(f);
        if (rc != SQLITE_OK)
            return rc;
    }
    if ((size_t)n > WALVFS_BUF)
        return f->real->pMethods->xWrite(f->real, in, n, off);
    if (!f->buf) {
        f->buf = malloc(WALVFS_BUF);
        if (!f->buf)
            return f->real->pMethods->xWrite(f->real, in, n, off);
    }
    if (f->len == 0)
        f->off = off;
    memcpy(f->buf + f->len, in, (size_t)n);
    f->len += (size_t)n;
    return SQLITE_OK;
}

static int w_truncate(sqlite3_file *p, sqlite3_int64 size)
{
    int rc = flush(FILE_OF(p));

    return rc != SQLITE_OK ? rc : REAL(p)->pMethods->xTruncate(REAL(p), size);
}

static int w_sync(sqlite3_file *p, int flags)
{
    int rc = flush(FILE_OF(p));

    return rc != SQLITE_OK ? rc : REAL(p)->pMethods->xSync(REAL(p), flags);
}

static int w_size(sqlite3_file *p, sqlite3_int64 *size)
{
    int rc = flush(FILE_OF(p));

    return rc != SQLITE_OK ? rc : REAL(p)->pMethods->xFileSize(REAL(p), size);
}

static int w_lock(sqlite3_file *p, int level)
{
    return REAL(p)->pMethods->xLock(REAL(p), level);
}

static int w_unlock(sqlite3_file *p, int level)
{
    return REAL(p)->pMethods->xUnlock(REAL(p), level);
}

static int w_check_lock(sqlite3_file *p, int *out)
{
    return REAL(p)->pMethods->xCheckReservedLock(REAL(p), out);
}

/* File controls may look at or change the file (SQLITE_FCNTL_SIZE_HINT,
 * _SYNC, _PERSIST_WAL, ...): the gathered bytes go first. */
static int w_control(sqlite3_file *p, int op, void *arg)
{
    int rc = flush(FILE_OF(p));

    return rc != SQLITE_OK ? rc : REAL(p)->pMethods->xFileControl(REAL(p), op, arg);
}

static int w_sector(sqlite3_file *p)
{
    return REAL(p)->pMethods->xSectorSize(REAL(p));
}

static int w_device(sqlite3_file *p)
{
    return REAL(p)->pMethods->xDeviceCharacteristics(REAL(p));
}

static int w_shm_map(sqlite3_file *p, int region, int size, int extend, void volatile **out)
{
    return REAL(p)->pMethods->xShmMap(REAL(p), region, size, extend, out);
}

static int w_shm_lock(sqlite3_file *p, int offset, int n, int flags)
{
    return REAL(p)->pMethods->xShmLock(REAL(p), offset, n, flags);
}

static void w_shm_barrier(sqlite3_file *p)
{
    REAL(p)->pMethods->xShmBarrier(REAL(p));
}

static int w_shm_unmap(sqlite3_file *p, int delete_flag)
{
    return REAL(p)->pMethods->xShmUnmap(REAL(p), delete_flag);
}

static int w_fetch(sqlite3_file *p, sqlite3_int64 off, int n, void **out)
{
    int rc = flush(FILE_OF(p));

    return rc != SQLITE_OK ? rc : REAL(p)->pMethods->xFetch(REAL(p), off, n, out);
}

static int w_unfetch(sqlite3_file *p, sqlite3_int64 off, void *mem)
{
    return REAL(p)->pMethods->xUnfetch(REAL(p), off, mem);
}

static const sqlite3_io_methods wal_methods = {
    3,          w_close,       w_read,       w_write,   w_truncate, w_sync,   w_size,
    w_lock,     w_unlock,      w_check_lock, w_control, w_sector,   w_device, w_shm_map,
    w_shm_lock, w_shm_barrier, w_shm_unmap,  w_fetch,   w_unfetch,
};

static int w_open(sqlite3_vfs *vfs, const char *name, sqlite3_file *p, int flags, int *out_flags)
{
    struct wfile *f = FILE_OF(p);
    int rc;

    (void)vfs;
    memset(f, 0, sizeof(*f));
    f->real = (sqlite3_file *)(f + 1);
    rc = base_vfs->xOpen(base_vfs, name, f->real, flags, out_flags);
    if (rc == SQLITE_OK && (!f->real->pMethods || f->real->pMethods->iVersion < 3))
        rc = SQLITE_CANTOPEN; /* not what the unix VFS gives */
    if (rc != SQLITE_OK) {
        /* SQLite closes a file whose open failed only if its pMethods is
         * set: ours is not, so the unix file (if half open) is closed here */
        if (f->real->pMethods)
            f->real->pMethods->xClose(f->real);
        f->base.pMethods = NULL;
        return rc;
    }
    f->wal = (flags & SQLITE_OPEN_WAL) != 0;
    f->base.pMethods = &wal_methods;
    return SQLITE_OK;
}

int walvfs_install(void)
{
    sqlite3_vfs *def;

    if (sqlite3_vfs_find(WALVFS_NAME))
        return SQLITE_OK;
    def = sqlite3_vfs_find(NULL);
    if (!def)
        return SQLITE_ERROR;
    base_vfs = def;
    wal_vfs = *def;
    wal_vfs.zName = WALVFS_NAME;
    wal_vfs.szOsFile = (int)sizeof(struct wfile) + def->szOsFile;
    wal_vfs.xOpen = w_open;
    wal_vfs.pNext = NULL;
    return sqlite3_vfs_register(&wal_vfs, 1);
}
