/* SPDX-License-Identifier: Apache-2.0 */
/* common.h - included first by every .c of podres: system headers we always
 * use, err_t, logging, and banned.h last. */
#ifndef PODRES_COMMON_H
#define PODRES_COMMON_H

#define _GNU_SOURCE 1
#include <errno.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "err.h"
#include "log.h"
#include "fault.h"

#define ARRAY_SIZE(a) (sizeof(a) / sizeof((a)[0]))

/* The value of a hexadecimal digit, or -1 (percent-decoding in http.c, grpc.c). */
static inline int hexval(char c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    if (c >= 'a' && c <= 'f')
        return c - 'a' + 10;
    if (c >= 'A' && c <= 'F')
        return c - 'A' + 10;
    return -1;
}

/* 'src' into 'dst' of 'cap' bytes (cap > 0), cut to fit and always
 * terminated: snprintf(dst, cap, "%s", src) without a format to parse (the
 * write path copies a dozen column values a request). */
static inline void str_copy(char *dst, size_t cap, const char *src)
{
    size_t n = strnlen(src, cap - 1);

    memcpy(dst, src, n);
    dst[n] = '\0';
}

/* "a<sep>b" into 'dst' of 'cap' bytes (cap > 0), cut to fit as
 * snprintf(dst, cap, "%s|%s", a, b) cuts it when 'sep' is '|'. */
static inline void str_join(char *dst, size_t cap, const char *a, char sep, const char *b)
{
    size_t n = strnlen(a, cap - 1), m;

    memcpy(dst, a, n);
    if (n < cap - 1) {
        dst[n++] = sep;
        m = strnlen(b, cap - 1 - n);
        memcpy(dst + n, b, m);
        n += m;
    }
    dst[n] = '\0';
}

#include "banned.h"
#endif
