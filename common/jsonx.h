/* SPDX-License-Identifier: Apache-2.0 */
/* jsonx.h - small jansson helpers shared by both daemons. */
#ifndef PODRES_JSONX_H
#define PODRES_JSONX_H
#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

#include "err.h"

/* Parse 'len' bytes of JSON (one value, objects or arrays at top level
 * allowed). On ERR_OK *out is new. On ERR_INVAL 'e' says what is wrong and
 * where ('e' may be NULL). */
err_t jsonx_parse(const char *buf, size_t len, json_t **out, struct error *e) WARN_UNUSED;

/* ERR_INVAL and the name in 'e' (may be NULL) when 'obj' has a key not in
 * the NULL-terminated 'allowed' list. */
err_t jsonx_check_keys(const json_t *obj, const char *const *allowed, const char *where,
                       struct error *e) WARN_UNUSED;

/* A new object of the key/value pairs up to a NULL key: what
 * json_pack("{s:o,s:o,...}") builds, without parsing a format (validation
 * builds a few a request). Each value is a new reference that the call
 * takes, on failure too (pass json_incref(v) where json_pack has "O"); keys
 * are literals, not checked for UTF-8. NULL if a value is NULL or memory
 * runs out. */
json_t *jsonx_object(const char *key, json_t *value, ...) __attribute__((sentinel));

/* A new JSON string of 's' (NUL-terminated) in which every byte that is not
 * part of a valid UTF-8 sequence becomes U+FFFD, as Go's encoding/json (and
 * so the API server) writes it: jansson refuses invalid UTF-8, and an error
 * message quoting a client's bytes (a path, a query, a header) or cut in the
 * middle of a character must still be answered. NULL if out of memory. */
json_t *jsonx_string_lossy(const char *s);

/* A new array of the strings of 'arr' (every element a string), sorted by
 * strcmp; with 'unique' each once; without any equal to 'drop' (NULL: none).
 * NULL if out of memory. */
json_t *jsonx_sorted_strings(const json_t *arr, bool unique, const char *drop);

/* Compact serialisation with sorted keys; new, free() it; NULL if out of memory. */
char *jsonx_dumps(const json_t *v);

/* Compact serialisation in the objects' insertion order (not sorted: an
 * event line is written once per change, and sorting was a fifth of its
 * cost) followed by "\n"; new, free() it. *len is set. */
char *jsonx_dumps_line(const json_t *v, size_t *len);

#endif
