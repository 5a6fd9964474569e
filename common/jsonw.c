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

void jsonw_str(struct jsonw *w, const char *s)
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
        case '"': esc[1] = '"'; break;
        case '\\': esc[1] = '\\'; break;
        case '\b': esc[1] = 'b'; break;
        case '\f': esc[1] = 'f'; break;
        case '\n': esc[1] = 'n'; break;
        case '\r': esc[1] = 'r'; break;
        case '\t': esc[1] = 't'; break;
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
    if (!v || json_dump_callback(v, add_cb, w, JSON_COMPACT | JSON_ENCODE_ANY) != 0)
        w->err = w->err ? w->err : ERR_NOMEM;
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
