/* SPDX-License-Identifier: Apache-2.0 */
/* log.h - one line per event on stderr, logfmt text or JSON, each starting
 * with its time (RFC 3339, UTC, milliseconds): time=... level=... mod=...
 * msg="..." or {"time":...,"level":...,"mod":...,"msg":...}. Each .c that
 * logs defines LOG_MOD before including common.h. Thread-safe. Never pass a
 * token or an Authorization header to these functions. */
#ifndef PODRES_LOG_H
#define PODRES_LOG_H
#include <stdbool.h>
#include <stddef.h>
#include <time.h>

#include "err.h"

enum log_level {
    LOG_ERR = 0,
    LOG_WARN,
    LOG_INFO,
    LOG_DEBUG
};

#ifndef LOG_MOD
#define LOG_MOD "main"
#endif

#define LOG_TIME_MAX 32 /* bytes of log_time's text with its NUL */

/* 'ts' (wall clock) as RFC 3339 in UTC with milliseconds,
 * "2025-03-04T05:06:07.089Z", into 'buf' of 'cap' (LOG_TIME_MAX) bytes.
 * Returns its length, or 0 (and "" in 'buf') when it does not fit. */
size_t log_time(char *buf, size_t cap, const struct timespec *ts);
/* 'format' is "text" or "json"; 'level' is err|warn|info|debug (NULL
 * keeps either as it is). ERR_INVAL for any other word. */
err_t log_setup(const char *format, const char *level) WARN_UNUSED;
bool log_enabled(enum log_level lvl);
void log_write(enum log_level lvl, const char *mod, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

#define log_err(...) log_write(LOG_ERR, LOG_MOD, __VA_ARGS__)
#define log_warn(...) log_write(LOG_WARN, LOG_MOD, __VA_ARGS__)
#define log_info(...) log_write(LOG_INFO, LOG_MOD, __VA_ARGS__)
#define log_debug(...)                                                                             \
    do {                                                                                           \
        if (log_enabled(LOG_DEBUG))                                                                \
            log_write(LOG_DEBUG, LOG_MOD, __VA_ARGS__);                                            \
    } while (0)

#endif
