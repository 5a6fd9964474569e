/* SPDX-License-Identifier: Apache-2.0 */
/* api.c - the REST handlers of docs/API.md (reads, writes, health and
 * metrics) and the route table. The watch stream is in api_watch.c. */
#define LOG_MOD "api"
#include "../common/common.h"
#include "../common/clock.h"
#include "../common/jsonw.h"
#include "../common/jsonx.h"
#include "../common/names.h"
#include "api.h"
#include "validate.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdarg.h>

const char *api_arg(struct api_req *r, const char *name)
{
    return MHD_lookup_connection_value(r->conn, MHD_GET_ARGUMENT_KIND, name);
}

__attribute__((format(printf, 3, 4))) static err_t fail(struct api_req *r, err_t rc,
                                                        const char *fmt, ...)
{
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(r->err.msg, sizeof(r->err.msg), fmt, ap);
    r->err.code = rc;
    va_end(ap);
    return rc;
}

/* Copy a store error's message, or a default one. */
static err_t store_fail(struct api_req *r, err_t rc, const struct error *e)
{
    if (e->msg[0])
        errorf(&r->err, rc, "%s", e->msg);
    else if (rc == ERR_NOSPACE)
        errorf(&r->err, rc, "the database disk is full; the write was not applied");
    else if (rc == ERR_UNAVAIL)
        errorf(&r->err, rc, "the database is busy; retry");
    return rc;
}

static err_t ok_json(struct api_resp *out, int status, json_t *j)
{
    out->status = status;
    out->json = j;
    return ERR_OK;
}

static err_t parse_body(struct api_req *r, json_t **body)
{
    err_t rc = jsonx_parse(r->body, r->body_len, body, &r->err);

    if (!rc && !json_is_object(*body)) {
        json_decref(*body);
        *body = NULL;
        return fail(r, ERR_INVAL, "request body must be a JSON object");
    }
    return rc;
}

/* Namespace segment 'ns' and name segment 'name' by Kubernetes rules. */
static err_t pod_names(struct api_req *r, const char *ns, const char *name)
{
    if (!names_is_dns1123_label(ns))
        return fail(r, ERR_UNPROCESSABLE,
                    "namespace \"%.300s\" is invalid: a lowercase RFC 1123 label is required", ns);
    if (!names_is_dns1123_subdomain(name))
        return fail(r, ERR_UNPROCESSABLE,
                    "name \"%.300s\" is invalid: a lowercase RFC 1123 subdomain is required", name);
    return ERR_OK;
}

/* "domain" and "name" segments joined into a resource name. */
static err_t resource_of(struct api_req *r, char *buf, size_t cap)
{
    snprintf(buf, cap, "%s/%s", r->seg[2], r->seg[3]);
    if (!names_is_resource_name(buf))
        return fail(r, ERR_UNPROCESSABLE,
                    "resource name \"%.300s\" is invalid: use domain/name, e.g. vendor.com/gpu",
                    buf);
    return ERR_OK;
}

bool api_path_rest(const struct api_req *r, size_t from, char *buf, size_t cap)
{
    size_t i, used = 0;

    buf[0] = '\0';
    for (i = from; i < r->nseg && used < cap; i++)
        used += (size_t)snprintf(buf + used, cap - used, "%s%s", i > from ? "/" : "", r->seg[i]);
    return used < cap;
}

/* ---- reads ---- */

/* The serialised answer of an unfiltered list, kept for the revision it was
 * read at: while nothing commits, the same bytes are served again (monitoring
 * agents poll these). The bytes are shared, not copied: each response holds a
 * reference, dropped by libmicrohttpd when it is done with the response (a
 * 50 KiB copy per request cost throughput and left heap fragments behind).
 * Lock: 'mu' guards the other fields. One podresd per process, so the
 * caches are file statics. */
struct body {
    atomic_uint refs; /* the cache's and each response's */
    size_t len;       /* bytes of 'text' */
    char *text;       /* the JSON answer with its newline */
};

struct rev_cache {
    pthread_mutex_t mu;
    uint64_t rev;      /* revision of 'body'; 0 = empty */
    struct body *body; /* or NULL */
};

static struct rev_cache pods_cache = {PTHREAD_MUTEX_INITIALIZER, 0, NULL};
static struct rev_cache devices_cache = {PTHREAD_MUTEX_INITIALIZER, 0, NULL};

static void body_unref(void *cls)
{
    struct body *b = cls;

    if (b && atomic_fetch_sub(&b->refs, 1) == 1) {
        free(b->text);
        free(b);
    }
}

/* Answer with 'b', taking a reference for the response. */
static err_t body_answer(struct api_resp *out, struct body *b)
{
    atomic_fetch_add(&b->refs, 1);
    out->raw = MHD_create_response_from_buffer_with_free_callback_cls(b->len, b->text, body_unref,
                                                                      b);
    if (!out->raw) {
        body_unref(b);
        return ERR_NOMEM;
    }
    MHD_add_response_header(out->raw, MHD_HTTP_HEADER_CONTENT_TYPE, "application/json");
    out->status = 200;
    return ERR_OK;
}

/* Answer from the cache when it holds revision 'rev'. */
static bool cache_hit(struct rev_cache *c, uint64_t rev, struct api_resp *out)
{
    bool hit = false;

    pthread_mutex_lock(&c->mu);
    if (c->body && c->rev == rev)
        hit = body_answer(out, c->body) == ERR_OK;
    pthread_mutex_unlock(&c->mu);
    return hit;
}

/* Serialise 'j' (stolen), answer with it and keep it when it is newer. */
static err_t cache_fill(struct rev_cache *c, json_t *j, struct api_resp *out)
{
    uint64_t rev = (uint64_t)json_integer_value(json_object_get(j, "revision"));
    struct body *b = malloc(sizeof(*b)), *old = NULL;
    char *text = json_dumps(j, JSONW_FLAGS);
    err_t rc;

    json_decref(j);
    if (!text || !b) {
        free(text);
        free(b);
        return ERR_NOMEM;
    }
    b->len = strlen(text) + 1;
    text[b->len - 1] = '\n'; /* json_dumps leaves room for the newline in its NUL */
    b->text = text;
    atomic_init(&b->refs, 1);
    rc = body_answer(out, b);
    pthread_mutex_lock(&c->mu);
    if (!rc && rev >= c->rev) {
        old = c->body;
        c->body = b;
        c->rev = rev;
        b = NULL;
    }
    pthread_mutex_unlock(&c->mu);
    body_unref(old);
    body_unref(b);
    return rc;
}

static err_t list_pods(struct api_req *r, const char *ns, struct api_resp *out);

static err_t get_pods(struct api_req *r, struct api_resp *out)
{
    return list_pods(r, api_arg(r, "namespace"), out);
}

/* GET /v1/namespaces/{ns}/pods: the pods of one namespace, as
 * /v1/pods?namespace= answers. */
static err_t get_ns_pods(struct api_req *r, struct api_resp *out)
{
    return list_pods(r, r->seg[2], out);
}

static err_t list_pods(struct api_req *r, const char *ns, struct api_resp *out)
{
    const char *res = api_arg(r, "resource");
    json_t *j = NULL;
    err_t rc;

    if (ns && !names_is_dns1123_label(ns))
        return fail(r, ERR_INVAL, "query namespace=\"%.300s\" is not a valid namespace", ns);
    if (res && !names_is_resource_or_driver(res))
        return fail(r, ERR_INVAL, "query resource=\"%.300s\" is not a valid resource name", res);
    if (!ns && !res && cache_hit(&pods_cache, store_revision(r->api->store), out))
        return ERR_OK;
    rc = store_pods_list(r->api->store, ns, res, &j);
    if (rc)
        return rc;
    return !ns && !res ? cache_fill(&pods_cache, j, out) : ok_json(out, 200, j);
}

static err_t get_pod(struct api_req *r, struct api_resp *out)
{
    json_t *j = NULL;
    err_t rc = pod_names(r, r->seg[2], r->seg[4]);

    if (!rc)
        rc = store_pod_get(r->api->store, r->seg[2], r->seg[4], &j);
    if (rc == ERR_NOTFOUND)
        errorf(&r->err, rc, "pod %.200s/%.300s not found", r->seg[2], r->seg[4]);
    return rc ? rc : ok_json(out, 200, j);
}

static err_t get_allocatable(struct api_req *r, struct api_resp *out)
{
    json_t *j = NULL;
    err_t rc = store_allocatable(r->api->store, &j);

    return rc ? rc : ok_json(out, 200, j);
}

static err_t devices_query(struct api_req *r, const char *res, const char *health, const char *fr)
{
    if (res && !names_is_resource_or_driver(res))
        return fail(r, ERR_INVAL, "query resource=\"%.300s\" is not a valid resource name", res);
    if (health && strcmp(health, "Healthy") != 0 && strcmp(health, "Unhealthy") != 0)
        return fail(r, ERR_INVAL, "query health=\"%.100s\" must be Healthy or Unhealthy", health);
    if (fr && strcmp(fr, "true") != 0 && strcmp(fr, "false") != 0)
        return fail(r, ERR_INVAL, "query free=\"%.100s\" must be true or false", fr);
    return ERR_OK;
}

static err_t get_devices(struct api_req *r, struct api_resp *out)
{
    const char *res = api_arg(r, "resource"), *health = api_arg(r, "health");
    const char *fr = api_arg(r, "free");
    json_t *j = NULL;
    err_t rc;

    rc = devices_query(r, res, health, fr);
    if (rc)
        return rc;
    if (!res && !health && !fr && cache_hit(&devices_cache, store_revision(r->api->store), out))
        return ERR_OK;
    rc = store_devices_list(r->api->store, res, health, fr && strcmp(fr, "true") == 0, &j);
    if (rc)
        return rc;
    return !res && !health && !fr ? cache_fill(&devices_cache, j, out) : ok_json(out, 200, j);
}

static err_t get_reservations(struct api_req *r, struct api_resp *out)
{
    json_t *j = NULL;
    err_t rc = store_reservations_list(r->api->store, &j);

    return rc ? rc : ok_json(out, 200, j);
}

static err_t get_reservation(struct api_req *r, struct api_resp *out)
{
    json_t *j = NULL;
    err_t rc = pod_names(r, r->seg[2], r->seg[3]);

    if (!rc)
        rc = store_reservation_get(r->api->store, r->seg[2], r->seg[3], &j);
    if (rc == ERR_NOTFOUND)
        errorf(&r->err, rc, "reservation %.200s/%.300s not found", r->seg[2], r->seg[3]);
    return rc ? rc : ok_json(out, 200, j);
}

/* ---- writes ---- */

/* A device set PUT: of resource 'name' (a device plugin's), or with 'dra'
 * of DRA driver 'name' (the devices its ResourceSlices publish). */
static err_t put_device_set(struct api_req *r, const char *name, bool dra, struct api_resp *out)
{
    struct store *st = r->api->store;
    struct error e = {0};
    json_t *body = NULL, *devs = NULL, *j = NULL;
    uint64_t ttl = 0;
    bool changed;
    err_t rc = parse_body(r, &body);

    if (!rc) {
        rc = dra ? validate_driver_put(body, &devs, &e)
                 : validate_devices_put(body, &devs, &ttl, &e);
        if (rc)
            fail(r, rc, "%s", e.msg);
    }
    if (!rc) {
        rc = dra ? store_driver_put(st, name, devs, &e, &j, &changed)
                 : store_resource_put(st, name, devs, ttl, &e, &j, &changed);
        if (rc)
            store_fail(r, rc, &e);
    }
    json_decref(body);
    json_decref(devs);
    return rc ? rc : ok_json(out, 200, j);
}

static err_t put_devices(struct api_req *r, struct api_resp *out)
{
    char res[600];
    err_t rc = resource_of(r, res, sizeof(res));

    return rc ? rc : put_device_set(r, res, false, out);
}

/* PUT /v1/drivers/{driver}/devices (podres-syncer). Not a binding write:
 * allowed in kubelet mode, which has no other source of them. */
static err_t put_driver_devices(struct api_req *r, struct api_resp *out)
{
    if (!names_is_dns1123_subdomain(r->seg[2]))
        return fail(r, ERR_UNPROCESSABLE,
                    "driver name \"%.300s\" is invalid: use a DNS subdomain, e.g. gpu.example.com",
                    r->seg[2]);
    return put_device_set(r, r->seg[2], true, out);
}

static err_t patch_device(struct api_req *r, struct api_resp *out)
{
    char res[600];
    struct error e = {0};
    json_t *body = NULL, *j = NULL;
    const char *health = NULL;
    char id[1024];
    err_t rc = resource_of(r, res, sizeof(res));

    /* a MIG id may hold '/' */
    if (!rc && (!api_path_rest(r, 5, id, sizeof(id)) || !names_is_device_id(id)))
        rc = fail(r, ERR_UNPROCESSABLE, "device id \"%.300s\" is invalid", id);
    if (!rc)
        rc = parse_body(r, &body);
    if (!rc) {
        rc = validate_health_patch(body, &health, &e);
        if (rc)
            fail(r, rc, "%s", e.msg);
    }
    if (!rc) {
        rc = store_device_set_health(r->api->store, res, id, health, &e, &j);
        if (rc)
            store_fail(r, rc, &e);
    }
    json_decref(body);
    return rc ? rc : ok_json(out, 200, j);
}

static err_t put_pod(struct api_req *r, struct api_resp *out)
{
    struct error e = {0};
    struct store_outcome did = {false, false};
    json_t *body = NULL, *containers = NULL;
    const char *uid = "";
    err_t rc = pod_names(r, r->seg[2], r->seg[4]);

    if (!rc)
        rc = parse_body(r, &body);
    if (!rc) {
        rc = validate_pod_put(body, &uid, &containers, &e);
        if (rc)
            fail(r, rc, "%s", e.msg);
    }
    if (!rc) {
        rc = store_pod_bind(r->api->store, &(struct store_pod){r->seg[2], r->seg[4], uid},
                            containers, &e, &out->text, &out->text_len, &did);
        if (rc)
            store_fail(r, rc, &e);
    }
    json_decref(body);
    json_decref(containers);
    if (!rc)
        out->status = did.created ? 201 : 200;
    return rc;
}

static err_t post_allocate(struct api_req *r, struct api_resp *out)
{
    struct error e = {0};
    struct store_outcome did = {false, false};
    json_t *body = NULL, *req = NULL, *j = NULL;
    const char *uid = "";
    err_t rc = pod_names(r, r->seg[2], r->seg[4]);

    if (!rc)
        rc = parse_body(r, &body);
    if (!rc) {
        rc = validate_allocate(body, &uid, &req, &e);
        if (rc)
            fail(r, rc, "%s", e.msg);
    }
    if (!rc) {
        rc = store_pod_allocate(r->api->store, &(struct store_pod){r->seg[2], r->seg[4], uid}, req,
                                &e, &j, &did);
        if (rc)
            store_fail(r, rc, &e);
    }
    json_decref(body);
    json_decref(req);
    return rc ? rc : ok_json(out, did.created ? 201 : 200, j);
}

/* A DELETE's preconditions: ?uid= and those of a DeleteOptions body. */
struct del_opts {
    const char *uid; /* NULL: any */
    uint64_t rev;    /* 0: any */
    json_t *body;    /* the parsed body, or NULL; borrowed strings point in it */
};

/* The optional DeleteOptions body a Kubernetes client sends with a DELETE
 * (validate_delete_options). */
static err_t delete_options(struct api_req *r, bool has_uid, struct del_opts *d)
{
    struct error e = {0};
    err_t rc;

    if (r->body_len == 0)
        return ERR_OK;
    rc = parse_body(r, &d->body);
    if (rc)
        return rc;
    rc = validate_delete_options(d->body, has_uid, &d->uid, &d->rev, &e);
    return rc ? fail(r, rc, "%s", e.msg) : ERR_OK;
}

static err_t delete_pod(struct api_req *r, struct api_resp *out)
{
    struct error e = {0};
    struct del_opts d = {api_arg(r, "uid"), 0, NULL};
    json_t *j = NULL;
    err_t rc = pod_names(r, r->seg[2], r->seg[4]);

    if (!rc && d.uid && !validate_uid(d.uid))
        rc = fail(r, ERR_INVAL, "query uid=\"%.200s\" is not a valid uid", d.uid);
    if (!rc)
        rc = delete_options(r, true, &d);
    if (!rc) {
        rc = store_pod_release(r->api->store, &(struct store_pod){r->seg[2], r->seg[4], d.uid},
                               d.rev, &e, &j);
        if (rc)
            store_fail(r, rc, &e);
    }
    json_decref(d.body);
    return rc ? rc : ok_json(out, 200, j);
}

static err_t put_reservation(struct api_req *r, struct api_resp *out)
{
    struct error e = {0};
    struct store_outcome did = {false, false};
    json_t *body = NULL, *containers = NULL, *j = NULL;
    err_t rc = pod_names(r, r->seg[2], r->seg[3]);

    if (!rc)
        rc = parse_body(r, &body);
    if (!rc) {
        rc = validate_reservation(body, &containers, &e);
        if (rc)
            fail(r, rc, "%s", e.msg);
    }
    if (!rc) {
        rc = store_reservation_put(r->api->store, r->seg[2], r->seg[3], containers, &e, &j, &did);
        if (rc)
            store_fail(r, rc, &e);
    }
    json_decref(body);
    json_decref(containers);
    return rc ? rc : ok_json(out, did.created ? 201 : 200, j);
}

static err_t delete_reservation(struct api_req *r, struct api_resp *out)
{
    struct error e = {0};
    struct del_opts d = {NULL, 0, NULL};
    json_t *j = NULL;
    err_t rc = pod_names(r, r->seg[2], r->seg[3]);

    if (!rc)
        rc = delete_options(r, false, &d);
    if (!rc) {
        rc = store_reservation_delete(r->api->store, r->seg[2], r->seg[3], d.rev, &e, &j);
        if (rc)
            store_fail(r, rc, &e);
    }
    json_decref(d.body);
    return rc ? rc : ok_json(out, 200, j);
}

/* ---- health, metrics, version ---- */

static err_t text(struct api_resp *out, int status, const char *body)
{
    size_t n = strlen(body);
    char *copy = malloc(n + 1);

    if (!copy)
        return ERR_NOMEM;
    memcpy(copy, body, n + 1);
    out->raw = MHD_create_response_from_buffer(n, copy, MHD_RESPMEM_MUST_FREE);
    if (!out->raw) {
        free(copy);
        return ERR_NOMEM;
    }
    MHD_add_response_header(out->raw, MHD_HTTP_HEADER_CONTENT_TYPE, "text/plain; charset=utf-8");
    out->status = status;
    return ERR_OK;
}

static err_t get_healthz(struct api_req *r, struct api_resp *out)
{
    (void)r;
    return text(out, 200, "ok");
}

static err_t get_readyz(struct api_req *r, struct api_resp *out)
{
    struct error why = {0};

    if (r->api->stopping)
        errorf(&why, ERR_UNAVAIL, "shutting down");
    else if (r->api->source_ready && !r->api->source_ready(r->api->source_ctx, &why))
        ;
    else
        return text(out, 200, "ok");
    /* every non-2xx answer is a Status (docs/API.md, Status codes): 503 ServiceUnavailable */
    return fail(r, ERR_UNAVAIL, "not ready: %s", why.msg);
}

static err_t render_gauges(struct api *api, struct strbuf *sb)
{
    struct store_stats stats;
    size_t i;
    err_t rc = store_stats(api->store, &stats);

    if (!rc)
        rc = strbuf_printf(
            sb,
            "# HELP podresd_pods Pods with a recorded binding.\n"
            "# TYPE podresd_pods gauge\npodresd_pods %lld\n"
            "# HELP podresd_bound_devices Devices bound to a container.\n"
            "# TYPE podresd_bound_devices gauge\npodresd_bound_devices %lld\n"
            "# HELP podresd_revision The node-wide revision.\n"
            "# TYPE podresd_revision gauge\npodresd_revision %llu\n"
            "# HELP podresd_store_commits_total Write transactions committed (a group commit "
            "counts once).\n"
            "# TYPE podresd_store_commits_total counter\npodresd_store_commits_total %lld\n"
            "# HELP podresd_store_writes_total Writes acknowledged after those commits.\n"
            "# TYPE podresd_store_writes_total counter\npodresd_store_writes_total %lld\n"
            "# HELP podresd_store_checkpoints_total WAL checkpoints done (in a COMMIT or by "
            "the checkpoint thread).\n"
            "# TYPE podresd_store_checkpoints_total counter\npodresd_store_checkpoints_total "
            "%lld\n"
            "# HELP podresd_watchers Open change-feed streams.\n"
            "# TYPE podresd_watchers gauge\npodresd_watchers %ld\n"
            "# HELP podresd_alias_conflicts_total Names of kubelet devices that name another "
            "device too: rule aliases left out, and ids that are another device's alias.\n"
            "# TYPE podresd_alias_conflicts_total counter\npodresd_alias_conflicts_total %llu\n"
            "# HELP podresd_history_step_failures_total History pruning steps (folding the "
            "lookups, dropping old intervals) that failed; the next tick tries again.\n"
            "# TYPE podresd_history_step_failures_total counter\n"
            "podresd_history_step_failures_total %llu\n"
            "# HELP podresd_devices Devices by resource and health.\n"
            "# TYPE podresd_devices gauge\n",
            (long long)stats.pods, (long long)stats.bound_devices,
            (unsigned long long)store_revision(api->store), (long long)stats.commits,
            (long long)stats.writes, (long long)stats.checkpoints, feed_watchers(api->feed),
            (unsigned long long)store_alias_conflicts(api->store),
            (unsigned long long)store_history_failures(api->store));
    for (i = 0; !rc && i < stats.ndevices; i++)
        rc = strbuf_printf(sb, "podresd_devices{resource=\"%s\",health=\"%s\"} %lld\n",
                           stats.devices[i].resource, stats.devices[i].health,
                           (long long)stats.devices[i].count);
    store_stats_release(&stats);
    return rc;
}

/* The per-device series (history: allocated, healthy, device-seconds). */
static err_t render_devices(struct api *api, struct strbuf *sb)
{
    json_t *devs = NULL;
    err_t rc = store_device_metrics(api->store, (int64_t)clock_wall_ms(), &devs);

    if (!rc)
        rc = metrics_render_devices(sb, devs);
    json_decref(devs);
    return rc;
}

static err_t get_metrics(struct api_req *r, struct api_resp *out)
{
    struct strbuf sb = STRBUF_INIT;
    size_t len;
    char *buf;
    err_t rc = metrics_render(r->api->metrics, &sb);

    if (!rc)
        rc = render_gauges(r->api, &sb);
    if (!rc)
        rc = render_devices(r->api, &sb);
    if (!rc && r->api->source_metrics)
        rc = r->api->source_metrics(r->api->source_ctx, &sb);
    buf = strbuf_detach(&sb, &len);
    if (rc) {
        free(buf);
        return rc;
    }
    out->raw = MHD_create_response_from_buffer(len, buf, MHD_RESPMEM_MUST_FREE);
    if (!out->raw) {
        free(buf);
        return ERR_NOMEM;
    }
    MHD_add_response_header(out->raw, MHD_HTTP_HEADER_CONTENT_TYPE,
                            "text/plain; version=0.0.4; charset=utf-8");
    out->status = 200;
    return ERR_OK;
}

static err_t get_version(struct api_req *r, struct api_resp *out)
{
    return ok_json(out, 200,
                   json_pack("{s:s,s:s,s:i,s:I}", "version", PODRES_VERSION, "nodeName",
                             r->api->node_name ? r->api->node_name : "", "schemaVersion",
                             store_schema_version(), "revision",
                             (json_int_t)store_revision(r->api->store)));
}

/* ---- query parameters ---- */

struct param_check {
    const char *taken; /* "a,b" */
    const char *bad;   /* the first not taken, or taken twice */
    char seen[8][32];  /* names seen (each taken one is short) */
    int nseen;
    bool twice;
};

/* Whether 'name' is one of the comma-separated 'list'. */
static bool in_list(const char *list, const char *name)
{
    size_t n = strlen(name);
    const char *p = list;

    while (n && (p = strstr(p, name))) {
        if ((p == list || p[-1] == ',') && (p[n] == ',' || p[n] == '\0'))
            return true;
        p += n;
    }
    return false;
}

static enum MHD_Result param_cb(void *cls, enum MHD_ValueKind kind, const char *key,
                                const char *value)
{
    struct param_check *c = cls;
    int i;

    (void)kind;
    (void)value;
    if (!in_list(c->taken, key)) {
        c->bad = key;
        return MHD_NO;
    }
    for (i = 0; i < c->nseen; i++) {
        if (strcmp(c->seen[i], key) == 0) {
            c->bad = key;
            c->twice = true;
            return MHD_NO;
        }
    }
    if (c->nseen < (int)ARRAY_SIZE(c->seen))
        snprintf(c->seen[c->nseen++], sizeof(c->seen[0]), "%s", key);
    return MHD_YES;
}

err_t api_check_params(struct api_req *r, const struct api_route *rt)
{
    struct param_check c = {.taken = rt->params};
    char list[256];
    size_t i, n;

    if (!rt->params)
        return ERR_OK;
    MHD_get_connection_values(r->conn, MHD_GET_ARGUMENT_KIND, param_cb, &c);
    if (!c.bad)
        return ERR_OK;
    if (c.twice)
        return fail(r, ERR_INVAL, "query parameter '%.100s' is given twice", c.bad);
    if (!*rt->params)
        return fail(r, ERR_INVAL, "unknown query parameter '%.100s': %s takes none", c.bad,
                    rt->label);
    for (i = 0, n = 0; rt->params[i] && n + 3 < sizeof(list); i++) {
        list[n++] = rt->params[i];
        if (rt->params[i] == ',')
            list[n++] = ' ';
    }
    list[n] = '\0';
    return fail(r, ERR_INVAL, "unknown query parameter '%.100s': %s takes %s", c.bad, rt->label,
                list);
}

/* ---- the table ---- */

/* clang-format off */
#define R(m, p, l, f, w, b, body, q) {m, p, l, f, w, b, body, q} /* an initialiser, not a block */
/* clang-format on */
const struct api_route api_routes[] = {
    R("GET", "v1/pods", "/v1/pods", get_pods, false, false, false, "namespace,resource"),
    R("GET", "v1/namespaces/*/pods", "/v1/namespaces/{ns}/pods", get_ns_pods, false, false, false,
      "resource"),
    R("GET", "v1/namespaces/*/pods/*", "/v1/namespaces/{ns}/pods/{name}", get_pod, false, false,
      false, ""),
    R("PUT", "v1/namespaces/*/pods/*", "/v1/namespaces/{ns}/pods/{name}", put_pod, true, true, true,
      ""),
    R("DELETE", "v1/namespaces/*/pods/*", "/v1/namespaces/{ns}/pods/{name}", delete_pod, true, true,
      false, "uid"),
    R("POST", "v1/namespaces/*/pods/*/allocate", "/v1/namespaces/{ns}/pods/{name}/allocate",
      post_allocate, true, true, true, ""),
    R("GET", "v1/allocatable", "/v1/allocatable", get_allocatable, false, false, false, ""),
    R("GET", "v1/devices", "/v1/devices", get_devices, false, false, false, "resource,health,free"),
    R("GET", "v1/devices/**", "/v1/devices/{name}", api_device_get, false, false, false, NULL),
    R("GET", "v1/history", "/v1/history", api_history, false, false, false, NULL),
    R("GET", "v1/usage", "/v1/usage", api_usage, false, false, false, NULL),
    R("PUT", "v1/resources/*/*/devices", "/v1/resources/{domain}/{name}/devices", put_devices, true,
      true, true, ""),
    R("PUT", "v1/drivers/*/devices", "/v1/drivers/{driver}/devices", put_driver_devices, true,
      false, true, ""),
    R("PATCH", "v1/resources/*/*/devices/**", "/v1/resources/{domain}/{name}/devices/{id}",
      patch_device, true, true, true, ""),
    R("GET", "v1/reservations", "/v1/reservations", get_reservations, false, false, false, ""),
    R("GET", "v1/reservations/*/*", "/v1/reservations/{ns}/{name}", get_reservation, false, false,
      false, ""),
    R("PUT", "v1/reservations/*/*", "/v1/reservations/{ns}/{name}", put_reservation, true, false,
      true, ""),
    R("DELETE", "v1/reservations/*/*", "/v1/reservations/{ns}/{name}", delete_reservation, true,
      false, false, ""),
    R("GET", "v1/watch", "/v1/watch", api_watch, false, false, false,
      "since,resourceVersion,kind,namespace,timeoutSeconds,allowWatchBookmarks,watch"),
    R("GET", "healthz", "/healthz", get_healthz, false, false, false, ""),
    R("GET", "readyz", "/readyz", get_readyz, false, false, false, ""),
    R("GET", "metrics", "/metrics", get_metrics, false, false, false, ""),
    R("GET", "version", "/version", get_version, false, false, false, ""),
    R("GET", "ui", "/ui", api_ui, false, false, false, ""),
};
const size_t api_nroutes = ARRAY_SIZE(api_routes);
