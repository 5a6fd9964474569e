/* SPDX-License-Identifier: Apache-2.0 */
/* table.c - kubectl-style columns (table.h). Width is counted in UTF-8
 * characters, as Go's text/tabwriter counts runes. */
#define LOG_MOD "plugin"
#include "../common/common.h"
#include "escape.h"
#include "table.h"

#define PADDING 3   /* spaces after a cell */
#define MIN_WIDTH 6 /* a column's least width, padding included */

void table_init(struct table *t, size_t ncols)
{
    memset(t, 0, sizeof(*t));
    t->ncols = ncols;
}

void table_release(struct table *t)
{
    size_t i;

    for (i = 0; i < t->ncells; i++)
        free(t->cells[i]);
    free(t->cells);
    memset(t, 0, sizeof(*t));
}

err_t table_add(struct table *t, const char *cell)
{
    char **nc;
    char *c;

    if (t->ncells == t->cap) {
        nc = fault_alloc_fails() ? NULL
                                 : realloc(t->cells, (t->cap ? t->cap * 2 : 32) * sizeof(*nc));
        if (!nc)
            return ERR_NOMEM;
        t->cells = nc;
        t->cap = t->cap ? t->cap * 2 : 32;
    }
    if (cell && escape_needed(cell)) {
        struct strbuf sb = STRBUF_INIT;

        if (escape_terminal(&sb, cell)) {
            strbuf_release(&sb);
            return ERR_NOMEM;
        }
        c = strbuf_detach(&sb, NULL);
    } else {
        c = fault_alloc_fails() ? NULL : strdup(cell ? cell : "<none>");
    }
    if (!c)
        return ERR_NOMEM;
    t->cells[t->ncells++] = c;
    return ERR_OK;
}

/* Characters of UTF-8 's': bytes that do not continue a sequence. */
static size_t width(const char *s)
{
    size_t n = 0;

    for (; *s; s++)
        n += ((unsigned char)*s & 0xC0) != 0x80;
    return n;
}

static err_t pad(struct strbuf *sb, size_t n)
{
    static const char spaces[] = "                                ";
    size_t k;
    err_t rc = ERR_OK;

    while (!rc && n > 0) {
        k = n < sizeof(spaces) - 1 ? n : sizeof(spaces) - 1;
        rc = strbuf_add(sb, spaces, k);
        n -= k;
    }
    return rc;
}

err_t table_render(const struct table *t, struct strbuf *sb)
{
    size_t *w = calloc(t->ncols, sizeof(*w)), i, col, cw;
    err_t rc = w ? ERR_OK : ERR_NOMEM;

    for (i = 0; w && i < t->ncells; i++) {
        cw = width(t->cells[i]) + PADDING;
        col = i % t->ncols;
        if (cw > w[col])
            w[col] = cw < MIN_WIDTH ? MIN_WIDTH : cw;
    }
    for (i = 0; !rc && i < t->ncells; i++) {
        col = i % t->ncols;
        rc = strbuf_add(sb, t->cells[i], strlen(t->cells[i]));
        if (!rc && col + 1 < t->ncols)
            rc = pad(sb, w[col] - width(t->cells[i]));
        else if (!rc)
            rc = strbuf_add(sb, "\n", 1);
    }
    free(w);
    return rc;
}

void table_age(long long s, char *buf, size_t cap)
{
    const long long m = s / 60, h = s / 3600, d = s / 86400, y = d / 365;

    if (s < -1)
        snprintf(buf, cap, "<invalid>");
    else if (s < 0)
        snprintf(buf, cap, "0s");
    else if (s < 120)
        snprintf(buf, cap, "%llds", s);
    else if (m < 10 && s % 60)
        snprintf(buf, cap, "%lldm%llds", m, s % 60);
    else if (m < 180)
        snprintf(buf, cap, "%lldm", m);
    else if (h < 8 && m % 60)
        snprintf(buf, cap, "%lldh%lldm", h, m % 60);
    else if (h < 48)
        snprintf(buf, cap, "%lldh", h);
    else if (h < 192 && h % 24)
        snprintf(buf, cap, "%lldd%lldh", d, h % 24);
    else if (y < 2)
        snprintf(buf, cap, "%lldd", d);
    else if (y < 8 && d % 365)
        snprintf(buf, cap, "%lldy%lldd", y, d % 365);
    else
        snprintf(buf, cap, "%lldy", y);
}
