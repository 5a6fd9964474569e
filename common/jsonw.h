/* SPDX-License-Identifier: Apache-2.0 */
/* jsonw.h - compact JSON text written straight into a strbuf, byte for byte
 * what jansson writes with JSONW_FLAGS (strings escaped the same way), for the
 * hot paths that would otherwise build a json_t only to serialise it: event
 * lines and write answers. The error is sticky: write everything, then look
 * at jsonw_done() once. */
#ifndef PODRES_JSONW_H
#define PODRES_JSONW_H
#include <jansson.h>
#include <stddef.h>
#include <stdint.h>
#include "err.h"
#include "strbuf.h"

struct jsonw {
    struct strbuf sb; /* the text so far */
    err_t err;        /* the first failure (ERR_NOMEM); later writes are no-ops */
};

/* clang-format off */
#define JSONW_INIT {STRBUF_INIT, ERR_OK} /* an initialiser, not a block */
/* clang-format on */

/* The flags podres writes JSON with, here and through jansson: compact, and
 * a real with 15 significant digits, so that a decimal of up to 15 digits
 * (deviceSeconds in milliseconds, a number a client sent) reads back as it
 * was written, not as the 17 digits of its nearest double (0.349, not
 * 0.34899999999999998). */
#define JSONW_FLAGS (JSON_COMPACT | JSON_REAL_PRECISION(15))

/* Bytes as they are: punctuation, keys written as literals, stored JSON. */
void jsonw_raw(struct jsonw *w, const char *s, size_t n);
/* A NUL-terminated literal, e.g. jsonw_lit(w, "{\"name\":"). */
void jsonw_lit(struct jsonw *w, const char *s);
/* A JSON string: quoted, '"' '\\' and control bytes escaped as jansson does
 * (\b \f \n \r \t, else \u00XX); other bytes, UTF-8 included, as they are. */
void jsonw_str(struct jsonw *w, const char *s);
void jsonw_u64(struct jsonw *w, uint64_t v);
/* Any json_t, compact, in its objects' insertion order. */
void jsonw_json(struct jsonw *w, const json_t *v);
/* Any json_t, compact, object keys sorted: byte for byte what jansson's
 * JSONW_FLAGS | JSON_SORT_KEYS writes, without its per-object key arrays
 * and lookups (the canonical form of stored JSON, jsonx_dumps). NULL fails. */
void jsonw_sorted(struct jsonw *w, const json_t *v);
/* Room for 'n' more bytes (strbuf_reserve): writes of up to 'n' bytes in
 * all then cannot fail. */
void jsonw_reserve(struct jsonw *w, size_t n);
/* The first error, or ERR_OK. */
err_t jsonw_done(const struct jsonw *w);
/* Hand the text over (new: free() it; NULL after an error, which also frees
 * it) and reset 'w'. *len may be NULL. */
char *jsonw_detach(struct jsonw *w, size_t *len);
void jsonw_release(struct jsonw *w);
#endif
