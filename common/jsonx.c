/* SPDX-License-Identifier: Apache-2.0 */
/* jsonx.c - jansson helpers: strict parsing and canonical dumping. */
#include "common.h"
#include "jsonw.h"
#include "jsonx.h"

#include <stdarg.h>

err_t jsonx_parse(const char *buf, size_t len, json_t **out, struct error *e)
{
    json_error_t jerr;
    json_t *v;

    if (fault_alloc_fails())
        return errorf(e, ERR_NOMEM, "out of memory");
    v = json_loadb(buf, len, JSON_REJECT_DUPLICATES, &jerr);
    if (!v) {
        if (jerr.position == 0 && len == 0)
            return errorf(e, ERR_INVAL, "request body is empty; expected a JSON object");
        return errorf(e, ERR_INVAL, "malformed JSON at line %d, column %d: %s", jerr.line,
                      jerr.column,
                      strstr(jerr.text, "JSON_ALLOW_NUL") ? "a string holds \\u0000" : jerr.text);
    }
    *out = v;
    return ERR_OK;
}

/* How long a UTF-8 sequence that starts with byte 'c' is (1..4), or 0 when
 * no valid one starts so (a continuation byte, an overlong 2-byte lead,
 * past U+10FFFF). */
static size_t utf8_lead(unsigned c)
{
    return c < 0x80 ? 1 : c < 0xC2 ? 0 : c < 0xE0 ? 2 : c < 0xF0 ? 3 : c < 0xF5 ? 4 : 0;
}

/* Whether the second byte 'c1' of a sequence led by 'c' keeps it out of the
 * overlong forms, the surrogates and past U+10FFFF (RFC 3629). */
static bool utf8_second_ok(unsigned c, unsigned c1)
{
    return !((c == 0xE0 && c1 < 0xA0) || (c == 0xED && c1 >= 0xA0) || (c == 0xF0 && c1 < 0x90) ||
             (c == 0xF4 && c1 >= 0x90));
}

/* Length of the valid UTF-8 sequence at 's' (1..4), or 0 when the byte there
 * does not start one. Reads no further than the first byte that breaks the
 * sequence, so never past the terminating NUL. */
static size_t utf8_seq(const unsigned char *s)
{
    size_t n = utf8_lead(s[0]), i;

    for (i = 1; i < n; i++) {
        if ((s[i] & 0xC0) != 0x80)
            return 0;
    }
    return n < 3 || utf8_second_ok(s[0], s[1]) ? n : 0;
}

json_t *jsonx_string_lossy(const char *s)
{
    const unsigned char *p = (const unsigned char *)s;
    size_t len = strlen(s), n, k = 0;
    char *buf;
    json_t *out;

    /* at most 3 bytes out for each byte in */
    buf = fault_alloc_fails() ? NULL : malloc(len * 3 + 1);
    if (!buf)
        return NULL;
    for (; *p; p += n ? n : 1) {
        n = utf8_seq(p);
        if (n) {
            memcpy(buf + k, p, n);
            k += n;
        } else {
            memcpy(buf + k, "\xEF\xBF\xBD", 3);
            k += 3;
        }
    }
    out = json_stringn(buf, k);
    free(buf);
    return out;
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

err_t jsonx_check_keys(const json_t *obj, const char *const *allowed, const char *where,
                       struct error *e)
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
        if (!ok)
            return errorf(e, ERR_INVAL, "unknown field \"%s%s%s\"", where ? where : "",
                          where ? "." : "", key);
    }
    return ERR_OK;
}

static int cmp_str(const void *a, const void *b)
{
    return strcmp(json_string_value(*(json_t *const *)a), json_string_value(*(json_t *const *)b));
}

json_t *jsonx_sorted_strings(const json_t *arr, bool unique, const char *drop)
{
    size_t n = json_array_size(arr), i, k = 0;
    json_t **v = calloc(n ? n : 1, sizeof(*v));
    json_t *out = json_array();

    if (!v || !out)
        goto fail;
    for (i = 0; i < n; i++) {
        v[k] = json_array_get(arr, i);
        if (!drop || strcmp(json_string_value(v[k]), drop) != 0)
            k++;
    }
    qsort(v, k, sizeof(*v), cmp_str);
    for (i = 0; i < k; i++) {
        if (unique && i > 0 && cmp_str(&v[i], &v[i - 1]) == 0)
            continue;
        if (json_array_append(out, v[i]))
            goto fail;
    }
    free(v);
    return out;
fail:
    free(v);
    json_decref(out);
    return NULL;
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
