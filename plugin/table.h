/* SPDX-License-Identifier: Apache-2.0 */
/* table.h - columns as `kubectl get` prints them: upper-case headers given
 * by the caller, every column but the last as wide as its widest cell plus
 * 3 spaces (at least 6; Go's tabwriter as kubectl sets it up), widths in
 * characters (UTF-8), the last column unpadded. Also kubectl's AGE format.
 * Pure; not thread-safe. */
#ifndef PODRES_PLUGIN_TABLE_H
#define PODRES_PLUGIN_TABLE_H
#include <stddef.h>

#include "../common/err.h"
#include "../common/strbuf.h"

struct table {
    size_t ncols;  /* cells per row */
    char **cells;  /* row-major, owned */
    size_t ncells; /* cells added */
    size_t cap;    /* slots allocated */
};

/* 'ncols' > 0. The headers are the first row's cells. */
void table_init(struct table *t, size_t ncols);
void table_release(struct table *t); /* zeroed or used */
/* Append one cell ('cell' copied, escaped for a terminal as escape.h says:
 * every cell may hold text from the API; NULL prints as "<none>"). */
err_t table_add(struct table *t, const char *cell) WARN_UNUSED;
/* Render every row, one line each, into 'sb'. */
err_t table_render(const struct table *t, struct strbuf *sb) WARN_UNUSED;

/* 'secs' as kubectl's AGE column says it (k8s.io/apimachinery's
 * duration.HumanDuration): "45s", "3m12s", "5h", "2d3h", "<invalid>" when
 * negative by more than a second. */
void table_age(long long secs, char *buf, size_t cap);

#endif
