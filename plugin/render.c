/* SPDX-License-Identifier: Apache-2.0 */
/* render.c - the columns of each view (render.h). A cell that has nothing
 * says "<none>", as kubectl's printers do. */
#define LOG_MOD "plugin"
#include "../common/common.h"
#include "../kube/execcred.h"
#include "render.h"
#include "table.h"
#include "yamlout.h"

#define CELL 4096
#define DEV_COLS_MAX 11 /* the columns node and who may have */

err_t render_parse_format(const char *s, enum render_format *out)
{
    static const char *const names[] = {"", "wide", "json", "yaml"};
    size_t i;

    for (i = 0; i < ARRAY_SIZE(names); i++) {
        if (strcmp(s, names[i]) == 0) {
            *out = (enum render_format)i;
            return ERR_OK;
        }
    }
    return ERR_INVAL;
}

static const char *str_of(const json_t *row, const char *key)
{
    return json_string_value(json_object_get(row, key));
}

/* The strings or integers of array 'a' joined by ','; NULL when empty. */
static const char *joined(const json_t *a, char *buf, size_t cap)
{
    const json_t *v;
    size_t i, n = 0;

    buf[0] = '\0';
    json_array_foreach(a, i, v) {
        if (json_is_integer(v))
            n += (size_t)snprintf(buf + n, cap - n, "%s%" JSON_INTEGER_FORMAT, i ? "," : "",
                                  json_integer_value(v));
        else
            n += (size_t)snprintf(buf + n, cap - n, "%s%s", i ? "," : "",
                                  json_string_value(v) ? json_string_value(v) : "");
        if (n >= cap) {
            n = cap - 1;
            break;
        }
    }
    return n ? buf : NULL;
}

static const char *holder_cell(const json_t *row, char *buf, size_t cap)
{
    const json_t *h = json_object_get(row, "holder");

    if (!json_is_object(h))
        return NULL;
    snprintf(buf, cap, "%s/%s/%s", str_of(h, "namespace"), str_of(h, "pod"),
             str_of(h, "container"));
    return buf;
}

static const char *since_cell(const json_t *row, time_t now, char *buf, size_t cap)
{
    const char *s = str_of(row, "since");
    time_t t;

    if (!s || execcred_parse_time(s, &t))
        return NULL;
    table_age((long long)(now - t), buf, cap);
    return buf;
}

static const char *int_cell(const json_t *row, const char *key, char *buf, size_t cap)
{
    snprintf(buf, cap, "%" JSON_INTEGER_FORMAT, json_integer_value(json_object_get(row, key)));
    return buf;
}

/* Add the cells of a NULL-terminated list; stops at the first failure. */
static err_t add_cells(struct table *t, const char *const *cells, size_t n)
{
    err_t rc = ERR_OK;
    size_t i;

    for (i = 0; !rc && i < n; i++)
        rc = table_add(t, cells[i]);
    return rc;
}

static err_t rows_nodes(struct table *t, const json_t *rows, bool wide)
{
    static const char *const keys[] = {"total", "healthy",   "held", "reserved",
                                       "free",  "unhealthy", "pods"};
    char num[7][32];
    const char *cells[9];
    const json_t *row;
    size_t i, k;
    err_t rc = ERR_OK;

    json_array_foreach(rows, i, row) {
        cells[0] = str_of(row, "node");
        cells[1] = str_of(row, "resource");
        for (k = 0; k < ARRAY_SIZE(keys); k++)
            cells[2 + k] = int_cell(row, keys[k], num[k], sizeof(num[k]));
        rc = add_cells(t, cells, wide ? 9 : 7);
        if (rc)
            break;
    }
    return rc;
}

/* The columns of node and who: 'who' puts NODE first and drops NUMA from
 * the default columns; CLAIM shows when a row's holder has a DRA claim,
 * PHYSICAL (-o wide) when a row is a slice or replica. */
struct dev_cols {
    bool who;      /* the who view */
    bool wide;     /* -o wide */
    bool claim;    /* a CLAIM column */
    bool physical; /* a PHYSICAL column */
};

static struct dev_cols dev_cols_of(const json_t *rows, bool who, bool wide)
{
    struct dev_cols c = {who, wide, false, false};
    const json_t *row;
    size_t i;

    json_array_foreach(rows, i, row) {
        c.claim = c.claim ||
                  json_is_object(json_object_get(json_object_get(row, "holder"), "claim"));
        c.physical = c.physical || (wide && str_of(row, "physical"));
    }
    return c;
}

static size_t dev_headers(const struct dev_cols *c, const char **h)
{
    size_t n = 0;

    if (c->who)
        h[n++] = "NODE";
    h[n++] = "RESOURCE";
    h[n++] = "ID";
    h[n++] = "HEALTH";
    if (!c->who || c->wide)
        h[n++] = "NUMA";
    h[n++] = "STATE";
    h[n++] = "HOLDER";
    if (c->claim)
        h[n++] = "CLAIM";
    h[n++] = "SINCE";
    if (c->wide)
        h[n++] = "ALIASES";
    if (c->physical)
        h[n++] = "PHYSICAL";
    return n;
}

static const char *claim_cell(const json_t *row)
{
    return str_of(json_object_get(json_object_get(row, "holder"), "claim"), "name");
}

/* node and who: one device a row, the columns of dev_headers. */
static err_t rows_devices(struct table *t, const json_t *rows, const struct dev_cols *c, time_t now)
{
    char numa[256], holder[1024], since[32], aliases[CELL];
    const char *cells[DEV_COLS_MAX];
    const json_t *row;
    size_t i, n;
    err_t rc = ERR_OK;

    json_array_foreach(rows, i, row) {
        n = 0;
        if (c->who)
            cells[n++] = str_of(row, "node");
        cells[n++] = str_of(row, "resource");
        cells[n++] = str_of(row, "id");
        cells[n++] = str_of(row, "health");
        if (!c->who || c->wide)
            cells[n++] = joined(json_object_get(row, "numa"), numa, sizeof(numa));
        cells[n++] = str_of(row, "state");
        cells[n++] = holder_cell(row, holder, sizeof(holder));
        if (c->claim)
            cells[n++] = claim_cell(row);
        cells[n++] = since_cell(row, now, since, sizeof(since));
        if (c->wide)
            cells[n++] = joined(json_object_get(row, "aliases"), aliases, sizeof(aliases));
        if (c->physical)
            cells[n++] = str_of(row, "physical");
        rc = add_cells(t, cells, n);
        if (rc)
            break;
    }
    return rc;
}

static err_t rows_pods(struct table *t, const json_t *rows, bool wide, bool namespaces)
{
    char ids[CELL];
    const char *cells[7];
    const json_t *row;
    size_t i, n;
    err_t rc = ERR_OK;

    json_array_foreach(rows, i, row) {
        n = 0;
        if (namespaces)
            cells[n++] = str_of(row, "namespace");
        cells[n++] = str_of(row, "name");
        cells[n++] = str_of(row, "node");
        cells[n++] = *str_of(row, "phase") ? str_of(row, "phase") : NULL;
        cells[n++] = joined(json_object_get(row, "deviceIds"), ids, sizeof(ids));
        if (wide) {
            cells[n++] = *str_of(row, "summary") ? str_of(row, "summary") : NULL;
            cells[n++] = *str_of(row, "podUID") ? str_of(row, "podUID") : NULL;
        }
        rc = add_cells(t, cells, n);
        if (rc)
            break;
    }
    return rc;
}

/* The header row of the nodes and pods views. */
static size_t headers(enum render_view view, bool wide, bool namespaces, const char **h)
{
    static const char *const nodes[] = {"NODE",     "RESOURCE", "TOTAL",     "HEALTHY", "HELD",
                                        "RESERVED", "FREE",     "UNHEALTHY", "PODS"};
    static const char *const pods[] = {"NAMESPACE",  "NAME",      "NODE",   "PHASE",
                                       "DEVICE-IDS", "RESOURCES", "POD-UID"};
    size_t n = 0, i;

    if (view == RENDER_NODES)
        for (i = 0; i < (wide ? 9u : 7u); i++)
            h[n++] = nodes[i];
    else
        for (i = namespaces ? 0 : 1; i < (wide ? 7u : 5u); i++)
            h[n++] = pods[i];
    return n;
}

static err_t render_table(enum render_view view, bool wide, const json_t *rows, bool namespaces,
                          time_t now, struct strbuf *sb)
{
    const char *h[DEV_COLS_MAX];
    bool devices = view == RENDER_NODE || view == RENDER_WHO;
    struct dev_cols c = dev_cols_of(rows, view == RENDER_WHO, wide);
    size_t n = devices ? dev_headers(&c, h) : headers(view, wide, namespaces, h);
    struct table t;
    err_t rc;

    if (!json_array_size(rows))
        return ERR_OK;
    table_init(&t, n);
    rc = add_cells(&t, h, n);
    if (rc)
        goto out;
    if (view == RENDER_NODES)
        rc = rows_nodes(&t, rows, wide);
    else if (view == RENDER_PODS)
        rc = rows_pods(&t, rows, wide, namespaces);
    else
        rc = rows_devices(&t, rows, &c, now);
    if (rc)
        goto out;
    rc = table_render(&t, sb);
out:
    table_release(&t);
    return rc;
}

err_t render(enum render_view view, enum render_format fmt, const json_t *rows, bool namespaces,
             time_t now, struct strbuf *sb)
{
    json_t *doc;
    char *text;
    err_t rc;

    if (fmt == RENDER_TABLE || fmt == RENDER_WIDE)
        return render_table(view, fmt == RENDER_WIDE, rows, namespaces, now, sb);
    doc = json_pack("{s:O}", "items", (json_t *)rows);
    if (!doc)
        return ERR_NOMEM;
    if (fmt == RENDER_YAML) {
        rc = yamlout_write(doc, sb);
    } else {
        text = json_dumps(doc, JSON_INDENT(4) | JSON_PRESERVE_ORDER);
        rc = text ? strbuf_printf(sb, "%s\n", text) : ERR_NOMEM;
        free(text);
    }
    json_decref(doc);
    return rc;
}
