/* SPDX-License-Identifier: Apache-2.0 */
/* cfg.h - YAML loading (libyaml) into jansson values, and the scalar parsers
 * config files and flags share. YAML aliases are refused (no billion laughs);
 * nesting is limited to CFG_MAX_DEPTH. Thread-safe. */
#ifndef PODRES_CFG_H
#define PODRES_CFG_H
#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

#include "err.h"

#define CFG_MAX_DEPTH 64

/* Parse one YAML document from 'len' bytes. Plain scalars that look like
 * integers, booleans or null become those JSON types; quoted scalars stay
 * strings. An empty document gives an empty object. On ERR_OK *out is new.
 * On ERR_INVAL 'e' says what and where (line, column). */
err_t cfg_yaml_parse(const char *buf, size_t len, json_t **out, struct error *e) WARN_UNUSED;

/* Read file 'path' (at most 4 MiB) and parse it as above. ERR_IO when it
 * cannot be read ('e' says why). */
err_t cfg_yaml_load(const char *path, json_t **out, struct error *e) WARN_UNUSED;

/* "1500ms", "2s", "10m", "1h", "90d", "1m30s" or a bare number of seconds. Result in
 * milliseconds; *ms untouched on failure. */
err_t cfg_parse_duration(const char *s, uint64_t *ms) WARN_UNUSED;

/* A decimal integer within [min, max]; *out untouched on failure. */
err_t cfg_parse_int(const char *s, long long min, long long max, long long *out) WARN_UNUSED;

#endif
