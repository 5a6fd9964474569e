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

#include "banned.h"
#endif
