/* SPDX-License-Identifier: Apache-2.0 */
/* strbuf.h - a growable, always NUL-terminated byte buffer for building
 * answers (metrics text, NDJSON). Not thread-safe; one owner. */
#ifndef PODRES_STRBUF_H
#define PODRES_STRBUF_H
#include <stddef.h>

#include "err.h"

struct strbuf {
    char *buf;  /* the bytes, NUL-terminated once anything was added; owned */
    size_t len; /* bytes used, without the NUL */
    size_t cap; /* bytes allocated */
};

/* clang-format off */
#define STRBUF_INIT {NULL, 0, 0} /* an initialiser, not a block */
/* clang-format on */

/* Append 'n' bytes. ERR_NOMEM leaves the buffer as it was. */
err_t strbuf_add(struct strbuf *sb, const void *data, size_t n) WARN_UNUSED;
/* Make room for 'n' more bytes: adds of up to 'n' bytes in all then cannot
 * fail (a write's answer, finished after its COMMIT). */
err_t strbuf_reserve(struct strbuf *sb, size_t n) WARN_UNUSED;
/* Append formatted text. ERR_NOMEM leaves the buffer as it was. */
err_t strbuf_printf(struct strbuf *sb, const char *fmt, ...) WARN_UNUSED
    __attribute__((format(printf, 2, 3)));
/* Hand the buffer to the caller (new: free() it) and reset 'sb'. */
char *strbuf_detach(struct strbuf *sb, size_t *len);
void strbuf_release(struct strbuf *sb); /* frees; an unused struct is fine */

#endif
