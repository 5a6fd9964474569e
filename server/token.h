/* SPDX-License-Identifier: Apache-2.0 */
/* token.h - the bearer token of writes over TCP, from --write-token-file.
 * The file is looked at (stat) on every check and read again when its
 * inode, size, mtime, ctime or mode changed, so a rotated token works
 * without a restart and the old one stops working at once. Not a parser of
 * the request: http.c hands it the Authorization header. Thread-safe. */
#ifndef PODRES_TOKEN_H
#define PODRES_TOKEN_H
#include <stdbool.h>

#include "../common/err.h"

struct token;

/* Read the token in 'path' (copied) with config_read_token's rules: a file
 * group or others may read or write is refused. Failures are logged naming
 * the file. On ERR_OK *out is new: token_free() it. */
err_t token_open(const char *path, struct token **out) WARN_UNUSED;
void token_free(struct token *t); /* NULL is a no-op */

/* True when 'auth', an Authorization header value (NULL when absent), is
 * "Bearer " (any case) and the current token, compared in constant time.
 * When the file changed it is read first; a file that has turned bad
 * (gone, unreadable, empty, open to others) leaves the last good token in
 * force and is logged once, until a good one is read again. */
bool token_check(struct token *t, const char *auth);

#endif
