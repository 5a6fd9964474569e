/* SPDX-License-Identifier: Apache-2.0 */
/* log.c - formatting and writing of log lines. A whole line is written with
 * one write(2) so lines from threads never interleave. */
#include "common.h"
#include "clock.h"

#include <stdarg.h>
#include <unistd.h>

static enum log_level cur_level = LOG_INFO; /* lines above this are dropped */
static bool json_format;                    /* false: logfmt text */

static const char *level_names[] = {"err", "warn", "info", "debug"};

err_t log_setup(const char *format, const char *level)
{
    size_t i;

    if (format && strcmp(format, "json") == 0)
        json_format = true;
    else if (format && strcmp(format, "text") != 0)
        return ERR_INVAL;
    if (!level)
        return ERR_OK;
    for (i = 0; i < ARRAY_SIZE(level_names); i++) {
        if (strcmp(level, level_names[i]) == 0) {
            cur_level = (enum log_level)i;
            return ERR_OK;
        }
    }
    return ERR_INVAL;
}

bool log_enabled(enum log_level lvl)
{
    return lvl <= cur_level;
}

/* Append 's' to 'out' escaped for a double-quoted string. */
static size_t escape(char *out, size_t cap, size_t n, const char *s)
{
    for (; *s && n + 7 < cap; s++) {
        unsigned char c = (unsigned char)*s;

        if (c == '"' || c == '\\') {
            out[n++] = '\\';
            out[n++] = (char)c;
        } else if (c < 0x20) {
            n += (size_t)snprintf(out + n, cap - n, "\\u%04x", c);
        } else {
            out[n++] = (char)c;
        }
    }
    return n;
}

size_t log_time(char *buf, size_t cap, const struct timespec *ts)
{
    struct tm tm;
    time_t t = ts->tv_sec;
    int n;

    if (cap)
        buf[0] = '\0';
    if (!gmtime_r(&t, &tm))
        return 0;
    n = snprintf(buf, cap, "%04d-%02d-%02dT%02d:%02d:%02d.%03ldZ", tm.tm_year + 1900, tm.tm_mon + 1,
                 tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec, (long)(ts->tv_nsec / 1000000));
    if (n < 0 || (size_t)n >= cap) {
        if (cap)
            buf[0] = '\0';
        return 0;
    }
    return (size_t)n;
}

void log_write(enum log_level lvl, const char *mod, const char *fmt, ...)
{
    char msg[1024];
    char line[2400];
    char when[LOG_TIME_MAX];
    struct timespec now;
    uint64_t ms;
    size_t n;
    va_list ap;

    if (lvl > cur_level)
        return;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    ms = clock_wall_ms();
    now = (struct timespec){.tv_sec = (time_t)(ms / 1000), .tv_nsec = (long)(ms % 1000) * 1000000};
    log_time(when, sizeof(when), &now);
    if (json_format)
        n = (size_t)snprintf(line, sizeof(line),
                             "{\"time\":\"%s\",\"level\":\"%s\",\"mod\":\"%s\",\"msg\":\"", when,
                             level_names[lvl], mod);
    else
        n = (size_t)snprintf(line, sizeof(line), "time=%s level=%s mod=%s msg=\"", when,
                             level_names[lvl], mod);
    n = escape(line, sizeof(line), n, msg);
    n += (size_t)snprintf(line + n, sizeof(line) - n, json_format ? "\"}\n" : "\"\n");
    if (write(STDERR_FILENO, line, n) < 0)
        return;
}
