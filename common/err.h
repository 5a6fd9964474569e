/* SPDX-License-Identifier: Apache-2.0 */
/* err.h - the one error type of podres. ERR_OK is 0, so `if (rc)` means
 * "failed". Only server/http.c (and the syncer's metrics) map codes to HTTP. */
#ifndef PODRES_ERR_H
#define PODRES_ERR_H

#define WARN_UNUSED __attribute__((warn_unused_result))

typedef enum {
    ERR_OK = 0,
    ERR_NOMEM,         /* allocation failed -> 500 */
    ERR_INVAL,         /* malformed client input or config -> 400 */
    ERR_UNPROCESSABLE, /* well-formed but semantically invalid -> 422 */
    ERR_NOTFOUND,      /* -> 404 */
    ERR_CONFLICT,      /* -> 409 */
    ERR_FORBIDDEN,     /* -> 403 */
    ERR_GONE,          /* resource version too old -> 410 Expired */
    ERR_TOOLARGE,      /* request body over the limit -> 413 */
    ERR_MEDIATYPE,     /* unsupported content type -> 415 */
    ERR_METHOD,        /* method not allowed on the path -> 405 */
    ERR_NOSPACE,       /* disk full -> 507 */
    ERR_UNAVAIL,       /* temporarily unavailable (busy, shutting down) -> 503 */
    ERR_IO,            /* a syscall failed; errno text logged where it happened */
    ERR_DB,            /* SQLite refused; sqlite3_errmsg() logged where it happened */
    ERR_UPSTREAM,      /* peer unreachable, timed out or 5xx */
} err_t;

/* Short lowercase description; a static string, never NULL. */
const char *err_str(err_t rc);

#define ERROR_MSG_MAX 1024

/* An error with the message a caller shows (a Status message, a log line,
 * a start-up failure). The function that sees the failure fills it with
 * errorf() and returns the same code; callers pass both up unchanged.
 * Lives on the caller's stack; struct error e = {0} is "no error". */
struct error {
    err_t code;              /* ERR_OK until errorf() */
    char msg[ERROR_MSG_MAX]; /* lowercase, no final period; "" until errorf() */
};

/* Sets e->code and e->msg (printf-style; cut to fit) and returns 'code',
 * so a failure reads `return errorf(e, ERR_INVAL, "bad 'x': %s", x);`.
 * 'e' may be NULL: the code is returned and the message dropped. */
err_t errorf(struct error *e, err_t code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* e->msg when set, else err_str(e->code); never NULL. */
const char *error_msg(const struct error *e);

#endif
