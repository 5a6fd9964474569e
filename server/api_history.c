/* SPDX-License-Identifier: Apache-2.0 */
/* api_history.c - the handlers of docs/API.md, History and usage: GET /v1/history,
 * GET /v1/usage (JSON, or CSV for Accept: text/csv) and GET
 * /v1/devices/{id}. The parameters are parsed by histq.c, the queries run
 * in the store. */
#define LOG_MOD "api"
#include "../common/common.h"
#include "../common/clock.h"
#include "../common/names.h"
#include "../common/strbuf.h"
#include "api.h"
#include "histq.h"

#define ARGS_MAX 32 /* query parameters looked at; more is a 400 */

struct args {
    const char *keys[ARGS_MAX];
    const char *vals[ARGS_MAX];
    size_t n;
    bool many; /* more than ARGS_MAX */
};

static enum MHD_Result arg_cb(void *cls, enum MHD_ValueKind kind, const char *key,
                              const char *value)
{
    struct args *a = cls;

    (void)kind;
    if (a->n == ARGS_MAX) {
        a->many = true;
        return MHD_NO;
    }
    a->keys[a->n] = key;
    a->vals[a->n] = value;
    a->n++;
    return MHD_YES;
}

/* The request's query into 'q' (a 400 naming the parameter otherwise). */
static err_t parse_query(struct api_req *r, bool usage, struct histq *q)
{
    struct args a = {.n = 0};
    struct error e = {0};
    err_t rc;

    MHD_get_connection_values(r->conn, MHD_GET_ARGUMENT_KIND, arg_cb, &a);
    if (a.many) {
        return errorf(&r->err, ERR_INVAL, "the query has more than %d parameters", ARGS_MAX);
    }
    rc = histq_parse(a.keys, a.vals, a.n, usage, q, &e);
    if (rc)
        errorf(&r->err, rc, "%s", e.msg);
    return rc;
}

static bool wants_csv(struct api_req *r)
{
    const char *acc = MHD_lookup_connection_value(r->conn, MHD_HEADER_KIND, "Accept");

    return acc && strstr(acc, "text/csv") != NULL;
}

/* ---- CSV ---- */

/* One field, quoted when it holds a comma, a quote or a line break. */
static err_t csv_field(struct strbuf *sb, const json_t *v, bool first)
{
    const char *s, *p;
    err_t rc = first ? ERR_OK : strbuf_printf(sb, ",");

    if (rc || json_is_null(v) || !v)
        return rc;
    if (json_is_number(v))
        return strbuf_printf(sb, "%.3f", json_number_value(v));
    s = json_string_value(v);
    if (!s || !s[strcspn(s, ",\"\r\n")])
        return strbuf_printf(sb, "%s", s ? s : "");
    rc = strbuf_printf(sb, "\"");
    for (p = s; !rc && *p; p++)
        rc = strbuf_printf(sb, *p == '"' ? "\"\"" : "%c", *p);
    return rc ? rc : strbuf_printf(sb, "\"");
}

/* The rows of 'list' as CSV: a header line of 'cols', then one line a row. */
static err_t csv_rows(struct strbuf *sb, const json_t *list, const char *const *cols)
{
    const json_t *row;
    size_t i, c;
    err_t rc = ERR_OK;

    for (c = 0; !rc && cols[c]; c++)
        rc = strbuf_printf(sb, "%s%s", c ? "," : "", cols[c]);
    if (!rc)
        rc = strbuf_printf(sb, "\r\n");
    json_array_foreach(list, i, row) {
        for (c = 0; !rc && cols[c]; c++)
            rc = csv_field(sb, json_object_get(row, cols[c]), c == 0);
        if (!rc)
            rc = strbuf_printf(sb, "\r\n");
    }
    return rc;
}

/* Answer 'j' (stolen) as CSV of its array 'key' with columns 'cols'; a
 * "continue" token goes into the X-Continue header. */
static err_t csv_answer(json_t *j, const char *key, const char *const *cols, struct api_resp *out)
{
    struct strbuf sb = STRBUF_INIT;
    const char *tok = json_string_value(json_object_get(j, "continue"));
    size_t len;
    char *buf;
    err_t rc = csv_rows(&sb, json_object_get(j, key), cols);

    buf = strbuf_detach(&sb, &len);
    if (!rc)
        out->raw = MHD_create_response_from_buffer(len, buf, MHD_RESPMEM_MUST_FREE);
    if (!rc && !out->raw)
        rc = ERR_NOMEM;
    if (rc) {
        free(buf);
        json_decref(j);
        return rc;
    }
    MHD_add_response_header(out->raw, MHD_HTTP_HEADER_CONTENT_TYPE, "text/csv; charset=utf-8");
    if (tok)
        MHD_add_response_header(out->raw, "X-Continue", tok);
    json_decref(j);
    out->status = 200;
    return ERR_OK;
}

static const char *const bind_cols[] = {"resourceName", "deviceId", "namespace", "name", "uid",
                                        "container",    "from",     "to",        NULL};
static const char *const health_cols[] = {"resourceName", "deviceId", "health", "from", "to", NULL};

/* ---- handlers ---- */

err_t api_history(struct api_req *r, struct api_resp *out)
{
    struct histq q;
    json_t *j = NULL;
    err_t rc = parse_query(r, false, &q);

    if (rc)
        return rc;
    if (wants_csv(r)) {
        rc = store_history(r->api->store, &q, &j);
        return rc ? rc : csv_answer(j, "intervals", q.health ? health_cols : bind_cols, out);
    }
    rc = store_history_text(r->api->store, &q, &out->text, &out->text_len);
    if (!rc)
        out->status = 200;
    return rc;
}

err_t api_usage(struct api_req *r, struct api_resp *out)
{
    static const char *const ns_cols[] = {"namespace", "resourceName", "deviceSeconds", NULL};
    static const char *const pod_cols[] = {"namespace", "name", "resourceName", "deviceSeconds",
                                           NULL};
    static const char *const dev_cols[] = {"resourceName", "deviceId", "deviceSeconds", NULL};
    static const char *const *const cols[] = {
        [HISTQ_BY_NAMESPACE] = ns_cols, [HISTQ_BY_POD] = pod_cols, [HISTQ_BY_DEVICE] = dev_cols};
    struct histq q;
    json_t *j = NULL;
    err_t rc = parse_query(r, true, &q);

    if (!rc)
        rc = store_usage(r->api->store, &q, (int64_t)clock_wall_ms(), &j);
    if (rc)
        return rc;
    if (wants_csv(r))
        return csv_answer(j, "usage", cols[q.by], out);
    out->status = 200;
    out->json = j;
    return ERR_OK;
}

/* ?resource=R, the one parameter of GET /v1/devices/{name}, into *res (NULL
 * when absent). */
static err_t device_get_args(struct api_req *r, const char **res)
{
    struct args a = {.n = 0};
    size_t i;

    MHD_get_connection_values(r->conn, MHD_GET_ARGUMENT_KIND, arg_cb, &a);
    for (i = 0; i < a.n || a.many; i++) {
        if (a.many || i > 0 || strcmp(a.keys[i], "resource") != 0) {
            return errorf(&r->err, ERR_INVAL, "query parameter \"%.100s\" is unknown or repeated",
                          a.many ? "..." : a.keys[i]);
        }
    }
    *res = a.n ? a.vals[0] : NULL;
    if (a.n && (!*res || !names_is_resource_or_driver(*res))) {
        return errorf(&r->err, ERR_INVAL, "query resource=\"%.300s\" is not a valid resource name",
                      *res ? *res : "");
    }
    return ERR_OK;
}

/* GET /v1/devices/{name}[?resource=R]: the name is the rest of the path
 * (a DRA device's id is "pool/device"). */
err_t api_device_get(struct api_req *r, struct api_resp *out)
{
    const char *res = NULL;
    char name[1024];
    struct error e = {0};
    json_t *j = NULL;
    err_t rc = device_get_args(r, &res);

    if (rc)
        return rc;
    if (!api_path_rest(r, 2, name, sizeof(name)) || !names_is_device_name(name)) {
        return errorf(&r->err, ERR_UNPROCESSABLE,
                      "device name \"%.300s\" is invalid: use 1..253 of [A-Za-z0-9._:/-], or a "
                      "DRA device id POOL/DEVICE",
                      name);
    }
    rc = store_device_find(r->api->store, name, res, &e, &j);
    if (rc) {
        errorf(&r->err, rc, "%s", e.msg);
        return rc;
    }
    out->status = 200;
    out->json = j;
    return ERR_OK;
}
