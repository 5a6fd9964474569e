/* SPDX-License-Identifier: Apache-2.0 */
/* mem.h - glibc malloc settings for daemons with a thread per connection.
 * Without them a burst of connections leaves RSS behind for good: each
 * thread gets its own arena, and once a large block has been freed glibc
 * raises its mmap threshold, so later large buffers (a watcher's initial
 * list, a big answer) come from the heap and stay there. */
#ifndef PODRES_MEM_H
#define PODRES_MEM_H

/* Blocks of at least this size are mmap()ed and unmapped on free(). Above
 * 64 KiB + 16: SQLite's b-tree rebalance takes a scratch block of that size,
 * and at 64 KiB every rebalance in a write paid an mmap, ~17 page faults and a
 * munmap (docs/DESIGN.md, Code for speed). */
#define MEM_MMAP_THRESHOLD (128 * 1024)

/* Cap arenas at 2, fix the mmap threshold at MEM_MMAP_THRESHOLD and the trim
 * threshold at 128 KiB. Call first in main(), before any thread starts. */
void mem_tune(void);
/* Give free heap memory back to the system (malloc_trim); for an idle moment. */
void mem_trim(void);

#endif
