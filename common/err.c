/* SPDX-License-Identifier: Apache-2.0 */
/* err.c - names of err_t codes, and struct error (err.h). */
#include "common.h"

#include <stdarg.h>

const char *err_str(err_t rc)
{
    switch (rc) {
    case ERR_OK:
        return "ok";
    case ERR_NOMEM:
        return "out of memory";
    case ERR_INVAL:
        return "invalid input";
    case ERR_UNPROCESSABLE:
        return "unprocessable";
    case ERR_NOTFOUND:
        return "not found";
    case ERR_CONFLICT:
        return "conflict";
    case ERR_FORBIDDEN:
        return "forbidden";
    case ERR_GONE:
        return "expired";
    case ERR_TOOLARGE:
        return "too large";
    case ERR_MEDIATYPE:
        return "unsupported media type";
    case ERR_METHOD:
        return "method not allowed";
    case ERR_NOSPACE:
        return "no space left";
    case ERR_UNAVAIL:
        return "unavailable";
    case ERR_IO:
        return "i/o error";
    case ERR_DB:
        return "database error";
    case ERR_UPSTREAM:
        return "upstream error";
    }
    return "unknown error";
}

err_t errorf(struct error *e, err_t code, const char *fmt, ...)
{
    va_list ap;

    if (!e)
        return code;
    e->code = code;
    va_start(ap, fmt);
    vsnprintf(e->msg, sizeof(e->msg), fmt, ap);
    va_end(ap);
    return code;
}

const char *error_msg(const struct error *e)
{
    return e->msg[0] ? e->msg : err_str(e->code);
}
