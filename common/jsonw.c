/* SPDX-License-Identifier: Apache-2.0 */
/* jsonw.c - compact JSON text writer; see jsonw.h. */
#include "common.h"
#include "jsonw.h"

void jsonw_raw(struct jsonw *w, const char *s, size_t n)
{
    if (!w->err)
        w->err = strbuf_add(&w->sb, s, n);
}

void jsonw_lit(struct jsonw *w, const char *s)
{
    jsonw_raw(w, s, strlen(s));
}

/* 's' with its escapes, a run at a time. */
static void str_escaped(struct jsonw *w, const char *s)
{
    static const char hex[] = "0123456789ABCDEF";
    const char *run = s;
    char esc[7];

    jsonw_raw(w, "\"", 1);
    for (; *s; s++) {
        unsigned char ch = (unsigned char)*s;
        size_t n = 2;

        if (ch >= 0x20 && ch != '"' && ch != '\\')
            continue;
        jsonw_raw(w, run, (size_t)(s - run));
        run = s + 1;
        esc[0] = '\\';
        switch (ch) {
        case '"':
            esc[1] = '"';
            break;
        case '\\':
            esc[1] = '\\';
            break;
        case '\b':
            esc[1] = 'b';
            break;
        case '\f':
            esc[1] = 'f';
            break;
        case '\n':
            esc[1] = 'n';
            break;
        case '\r':
            esc[1] = 'r';
            break;
        case '\t':
            esc[1] = 't';
            break;
        default:
            memcpy(esc + 1, "u00", 3);
            esc[4] = hex[ch >> 4];
            esc[5] = hex[ch & 15];
            n = 6;
        }
        jsonw_raw(w, esc, n);
    }
    jsonw_raw(w, run, (size_t)(s - run));
    jsonw_raw(w, "\"", 1);
}

void jsonw_str(struct jsonw *w, const char *s)
{
    const char *e = s;
    char *p;
    size_t n;

    while ((unsigned char)*e >= 0x20 && *e != '"' && *e != '\\')
        e++;
    if (*e) {
        str_escaped(w, s);
        return;
    }
    /* Nothing to escape, the usual case: quotes and bytes in one copy. */
    n = (size_t)(e - s);
    if (!w->err)
        w->err = strbuf_reserve(&w->sb, n + 2);
    if (w->err)
        return;
    p = w->sb.buf + w->sb.len;
    p[0] = '"';
    memcpy(p + 1, s, n);
    p[n + 1] = '"';
    p[n + 2] = '\0';
    w->sb.len += n + 2;
}

void jsonw_u64(struct jsonw *w, uint64_t v)
{
    char buf[24], *p = buf + sizeof(buf);

    do {
        *--p = (char)('0' + v % 10);
        v /= 10;
    } while (v);
    jsonw_raw(w, p, (size_t)(buf + sizeof(buf) - p));
}

static int add_cb(const char *data, size_t n, void *ctx)
{
    struct jsonw *w = ctx;

    jsonw_raw(w, data, n);
    return w->err ? -1 : 0;
}

void jsonw_json(struct jsonw *w, const json_t *v)
{
    if (w->err)
        return;
    if (!v || json_dump_callback(v, add_cb, w, JSONW_FLAGS | JSON_ENCODE_ANY) != 0)
        w->err = w->err ? w->err : ERR_NOMEM;
}

/* jansson's own writer, for what the fast path leaves to it. */
static void via_jansson(struct jsonw *w, const json_t *v, size_t flags)
{
    if (!w->err && json_dump_callback(v, add_cb, w, JSONW_FLAGS | JSON_ENCODE_ANY | flags) != 0)
        w->err = ERR_NOMEM;
}

struct member {
    const char *key;
    const json_t *value;
};

static int member_cmp(const void *a, const void *b)
{
    return strcmp(((const struct member *)a)->key, ((const struct member *)b)->key);
}

static void sorted_object(struct jsonw *w, const json_t *obj)
{
    struct member few[16], *m = few;
    size_t n = json_object_size(obj), i = 0;
    void *it;

    if (n > ARRAY_SIZE(few)) {
        m = malloc(n * sizeof(*m));
        if (!m) {
            w->err = ERR_NOMEM;
            return;
        }
    }
    for (it = json_object_iter((json_t *)obj); it && i < n;
         it = json_object_iter_next((json_t *)obj, it)) {
        m[i].key = json_object_iter_key(it);
        m[i].value = json_object_iter_value(it);
        if (json_object_iter_key_len(it) != strlen(m[i].key))
            break; /* a key with a NUL byte: jansson compares whole keys */
        i++;
    }
    if (i != n) {
        via_jansson(w, obj, JSON_SORT_KEYS);
    } else {
        qsort(m, n, sizeof(*m), member_cmp);
        jsonw_raw(w, "{", 1);
        for (i = 0; i < n; i++) {
            if (i)
                jsonw_raw(w, ",", 1);
            jsonw_str(w, m[i].key);
            jsonw_raw(w, ":", 1);
            jsonw_sorted(w, m[i].value);
        }
        jsonw_raw(w, "}", 1);
    }
    if (m != few)
        free(m);
}

void jsonw_sorted(struct jsonw *w, const json_t *v)
{
    char num[32];
    size_t i;

    if (w->err)
        return;
    if (!v) {
        w->err = ERR_NOMEM; /* not a value: as jsonw_json() */
        return;
    }
    switch (json_typeof(v)) {
    case JSON_OBJECT:
        sorted_object(w, v);
        break;
    case JSON_ARRAY:
        jsonw_raw(w, "[", 1);
        for (i = 0; i < json_array_size(v); i++) {
            if (i)
                jsonw_raw(w, ",", 1);
            jsonw_sorted(w, json_array_get(v, i));
        }
        jsonw_raw(w, "]", 1);
        break;
    case JSON_STRING:
        if (json_string_length(v) == strlen(json_string_value(v)))
            jsonw_str(w, json_string_value(v));
        else
            via_jansson(w, v, 0); /* holds a NUL byte */
        break;
    case JSON_INTEGER:
        snprintf(num, sizeof(num), "%" JSON_INTEGER_FORMAT, json_integer_value(v));
        jsonw_lit(w, num);
        break;
    case JSON_TRUE:
        jsonw_lit(w, "true");
        break;
    case JSON_FALSE:
        jsonw_lit(w, "false");
        break;
    case JSON_NULL:
        jsonw_lit(w, "null");
        break;
    default:
        via_jansson(w, v, 0); /* a real: jansson's number format */
    }
}

void jsonw_reserve(struct jsonw *w, size_t n)
{
    if (!w->err)
        w->err = strbuf_reserve(&w->sb, n);
}

err_t jsonw_done(const struct jsonw *w)
{
    return w->err;
}

char *jsonw_detach(struct jsonw *w, size_t *len)
{
    char *s = NULL;

    if (!w->err && !w->sb.buf)
        jsonw_raw(w, "", 0); /* an empty text is still a string */
    if (!w->err)
        s = strbuf_detach(&w->sb, len);
    jsonw_release(w);
    return s;
}

void jsonw_release(struct jsonw *w)
{
    strbuf_release(&w->sb);
    w->err = ERR_OK;
}
