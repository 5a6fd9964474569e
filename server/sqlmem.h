/* SPDX-License-Identifier: Apache-2.0 */
/* sqlmem.h - SQLite's allocator: a per-thread cache of small blocks in front
 * of malloc, standing in for the lookaside allocator that Debian's SQLite
 * build leaves out (SQLITE_OMIT_LOOKASIDE). */
#ifndef PODRES_SQLMEM_H
#define PODRES_SQLMEM_H

#include <stdbool.h>
#include <stddef.h>

/* Under AddressSanitizer (gcc's macro, clang's feature test) nothing is
 * cached, so that it sees every block's use after free. */
#if defined(__SANITIZE_ADDRESS__)
#define SQLMEM_CACHING 0
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define SQLMEM_CACHING 0
#endif
#endif
#ifndef SQLMEM_CACHING
#define SQLMEM_CACHING 1
#endif

#define SQLMEM_STEP 32                  /* block sizes: multiples of this ... */
#define SQLMEM_CLASSES 16               /* ... up to STEP * CLASSES (512 bytes) */
#define SQLMEM_PER_CLASS 128            /* free blocks a thread keeps of one size */
#define SQLMEM_THREAD_BYTES (64 * 1024) /* and of all sizes together */

/* Make SQLite allocate through sqlmem; before SQLite initialises (it is a
 * no-op after). 0 on success, else SQLite's error code. */
int sqlmem_install(void);

/* The allocator itself, for the tests: SQLite's xMalloc, xFree, xRealloc,
 * xSize and xRoundup. n > 0. */
void *sqlmem_malloc(int n);
void sqlmem_free(void *p);
void *sqlmem_realloc(void *p, int n);
int sqlmem_size(void *p);
int sqlmem_roundup(int n);

/* Keep free blocks on the calling thread from now on, or (false) stop and
 * give back those it keeps. Threads keep none until they ask. */
void sqlmem_thread_cache(bool on);

/* Bytes of free blocks the calling thread keeps (tests). */
size_t sqlmem_thread_cached(void);

#endif
