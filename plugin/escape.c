/* SPDX-License-Identifier: Apache-2.0 */
/* escape.c - a walk over UTF-8 sequences (escape.h); a sequence is taken
 * whole only when well formed (no overlong form, no surrogate, at most
 * U+10FFFF), so a broken one cannot hide a control byte. */
#define LOG_MOD "plugin"
#include "../common/common.h"
#include "escape.h"

/* The length of the well-formed UTF-8 sequence at 's' and its code point
 * in *cp, or 0 when the bytes there are not one. */
static size_t utf8_seq(const unsigned char *s, unsigned *cp)
{
    size_t n, i;
    unsigned c = s[0], min;

    if (c < 0x80) {
        *cp = c;
        return 1;
    }
    if (c >= 0xC2 && c <= 0xDF)
        n = 2, c &= 0x1F, min = 0x80;
    else if (c >= 0xE0 && c <= 0xEF)
        n = 3, c &= 0x0F, min = 0x800;
    else if (c >= 0xF0 && c <= 0xF4)
        n = 4, c &= 0x07, min = 0x10000;
    else
        return 0;
    for (i = 1; i < n; i++) {
        if ((s[i] & 0xC0) != 0x80)
            return 0;
        c = (c << 6) | (s[i] & 0x3F);
    }
    if (c < min || c > 0x10FFFF || (c >= 0xD800 && c <= 0xDFFF))
        return 0;
    *cp = c;
    return n;
}

static bool is_bidi(unsigned cp)
{
    return (cp >= 0x202A && cp <= 0x202E) || (cp >= 0x2066 && cp <= 0x2069);
}

/* Whether code point 'cp' is written escaped. */
static bool escaped(unsigned cp)
{
    return cp < 0x20 || cp == 0x7F || (cp >= 0x80 && cp <= 0x9F) || is_bidi(cp);
}

bool escape_needed(const char *s)
{
    const unsigned char *p = (const unsigned char *)s;
    unsigned cp;
    size_t n;

    for (; *p; p += n) {
        n = utf8_seq(p, &cp);
        if (n == 0 || escaped(cp))
            return true;
    }
    return false;
}

err_t escape_terminal(struct strbuf *sb, const char *s)
{
    const unsigned char *p = (const unsigned char *)s, *run = p;
    unsigned cp;
    size_t n;
    err_t rc = ERR_OK;

    for (; !rc && *p; p += n) {
        n = utf8_seq(p, &cp);
        if (n && !escaped(cp))
            continue;
        rc = strbuf_add(sb, (const char *)run, (size_t)(p - run));
        if (rc)
            break;
        if (n == 0) {
            n = 1;
            rc = strbuf_printf(sb, "\\x%02X", *p);
        } else if (cp == 0x1B) {
            rc = strbuf_add(sb, "^[", 2);
        } else if (cp < 0x20 || cp == 0x7F) {
            rc = strbuf_printf(sb, "^%c", cp == 0x7F ? '?' : (char)(cp + 0x40));
        } else {
            rc = strbuf_printf(sb, "\\u%04X", cp);
        }
        run = p + n;
    }
    return rc ? rc : strbuf_add(sb, (const char *)run, (size_t)(p - run));
}
