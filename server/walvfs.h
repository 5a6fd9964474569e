/* SPDX-License-Identifier: Apache-2.0 */
/* walvfs.h - SQLite's default VFS with one change: the writes SQLite makes
 * to a WAL file between two syncs reach the file as one write instead of
 * two per page (a frame's header and its page). */
#ifndef PODRES_WALVFS_H
#define PODRES_WALVFS_H

#define WALVFS_NAME "podres-wal"
#define WALVFS_BUF (64 * 1024) /* bytes of WAL a file gathers before it writes them */

/* Register the VFS over the default one (unix, in podresd) and make it the
 * default, once per process; databases opened before keep the VFS they had.
 * A file of the VFS below must have every method of version 3 (unix's do),
 * else its open fails with SQLITE_CANTOPEN. 0 on success, else SQLite's
 * error code. Not thread-safe: call it once, before any thread opens a
 * database (podresd: store.c's one-time SQLite setup). A file is used by one
 * connection, as SQLite's own are. */
int walvfs_install(void);

#endif
