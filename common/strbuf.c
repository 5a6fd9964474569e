/* SPDX-License-Identifier: Apache-2.0 */
/* strbuf.c - growth by doubling. */
#include "common.h"
#include "strbuf.h"

#include <stdarg.h>

static err_t grow(struct strbuf *sb, size_t need)
{
    size_t ncap = sb->cap ? sb->cap : 256;
    char *nb;

    if (sb->len + need + 1 <= sb->cap)
        return ERR_OK;
    while (ncap < sb->len + need + 1)
        ncap *= 2;
    nb = fault_alloc_fails() ? NULL : realloc(sb->buf, ncap);
    if (!nb)
        return ERR_NOMEM;
    sb->buf = nb;
    sb->cap = ncap;
    return ERR_OK;
}

err_t strbuf_add(struct strbuf *sb, const void *data, size_t n)
{
    if (grow(sb, n))
        return ERR_NOMEM;
    memcpy(sb->buf + sb->len, data, n);
    sb->len += n;
    sb->buf[sb->len] = '\0';
    return ERR_OK;
}

err_t strbuf_reserve(struct strbuf *sb, size_t n)
{
    return grow(sb, n);
}

err_t strbuf_printf(struct strbuf *sb, const char *fmt, ...)
{
    va_list ap;
    int n;

    va_start(ap, fmt);
    n = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    if (n < 0 || grow(sb, (size_t)n))
        return ERR_NOMEM;
    va_start(ap, fmt);
    vsnprintf(sb->buf + sb->len, sb->cap - sb->len, fmt, ap);
    va_end(ap);
    sb->len += (size_t)n;
    return ERR_OK;
}

char *strbuf_detach(struct strbuf *sb, size_t *len)
{
    char *b = sb->buf;

    if (len)
        *len = sb->len;
    sb->buf = NULL;
    sb->len = 0;
    sb->cap = 0;
    return b;
}

void strbuf_release(struct strbuf *sb)
{
    free(sb->buf);
    sb->buf = NULL;
    sb->len = 0;
    sb->cap = 0;
}
