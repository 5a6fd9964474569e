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

#include "banned.h"
#endif
