/* SPDX-License-Identifier: Apache-2.0 */
/* yamlout.h - a JSON value written as one YAML document with libyaml's
 * emitter, as `kubectl get -o yaml` prints: block style, keys in the
 * object's order, strings quoted whenever a YAML 1.1 reader would take them
 * for something else (a number, a boolean, null, a time). Pure. */
#ifndef PODRES_PLUGIN_YAMLOUT_H
#define PODRES_PLUGIN_YAMLOUT_H
#include <jansson.h>
#include <stdbool.h>

#include "../common/err.h"
#include "../common/strbuf.h"

/* Append 'v' (borrowed) as YAML to 'sb'. ERR_NOMEM, or ERR_INVAL when
 * libyaml refuses (a string that is not UTF-8). */
err_t yamlout_write(const json_t *v, struct strbuf *sb) WARN_UNUSED;

/* Whether the plain scalar 's' would be read as something other than a
 * string, so it must be quoted. */
bool yamlout_needs_quotes(const char *s);

#endif
