/* SPDX-License-Identifier: Apache-2.0 */
/* jsonx.c - jansson helpers: strict parsing and canonical dumping. */
#include "common.h"
#include "jsonw.h"
#include "jsonx.h"

#include <stdarg.h>

err_t jsonx_parse(const char *buf, size_t len, json_t **out, char *msg, size_t cap)
{
    json_error_t jerr;
    json_t *v;

    if (fault_alloc_fails())
        return ERR_NOMEM;
    v = json_loadb(buf, len, JSON_REJECT_DUPLICATES, &jerr);
    if (!v) {
        if (jerr.position == 0 && len == 0)
            snprintf(msg, cap, "request body is empty; expected a JSON object");
        else
            snprintf(msg, cap, "malformed JSON at line %d, column %d: %s", jerr.line, jerr.column,
                     jerr.text);
        return ERR_INVAL;
    }
    *out = v;
    return ERR_OK;
}

json_t *jsonx_object(const char *key, json_t *value, ...)
{
    json_t *obj = json_object();
    bool ok = obj != NULL;
    va_list ap;

    va_start(ap, value);
    while (key) {
        if (!ok || !value) {
            json_decref(value);
            ok = false;
        } else if (json_object_set_new_nocheck(obj, key, value) != 0) { /* takes 'value' */
            ok = false;
        }
        key = va_arg(ap, const char *);
        if (key)
            value = va_arg(ap, json_t *);
    }
    va_end(ap);
    if (!ok) {
        json_decref(obj);
        return NULL;
    }
    return obj;
}

err_t jsonx_check_keys(const json_t *obj, const char *const *allowed, const char *where, char *msg,
                       size_t cap)
{
    const char *key;
    json_t *val;
    size_t i;

    json_object_foreach((json_t *)obj, key, val) {
        bool ok = false;

        (void)val;
        for (i = 0; allowed[i]; i++) {
            if (strcmp(key, allowed[i]) == 0) {
                ok = true;
                break;
            }
        }
        if (!ok) {
            snprintf(msg, cap, "unknown field \"%s%s%s\"", where ? where : "", where ? "." : "",
                     key);
            return ERR_INVAL;
        }
    }
    return ERR_OK;
}

char *jsonx_dumps(const json_t *v)
{
    struct jsonw w = JSONW_INIT;

    if (fault_alloc_fails())
        return NULL;
    jsonw_sorted(&w, v); /* NULL is an error, as in jansson */
    return jsonw_detach(&w, NULL);
}

char *jsonx_dumps_line(const json_t *v, size_t *len)
{
    struct jsonw w = JSONW_INIT;

    /* one pass into the buffer: no copy, no sort */
    jsonw_json(&w, v);
    jsonw_lit(&w, "\n");
    return jsonw_detach(&w, len);
}
