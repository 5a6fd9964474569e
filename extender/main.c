/* SPDX-License-Identifier: Apache-2.0 */
/* main.c - podres-extender: settings, the two informers (NodeDevices and
 * DeviceBindings, cluster-wide) feeding the view, the HTTP server of the
 * extender verbs with /healthz, /readyz and /metrics, and a clean exit on
 * SIGTERM. exit(1) only for start-up errors. */
#define LOG_MOD "main"
#include "../common/common.h"
#include "../common/clock.h"
#include "../common/proc.h"
#include "../common/jsonx.h"
#include "../common/mem.h"
#include "../common/opts.h"
#include "../common/prom.h"
#include "../common/strbuf.h"
#include "../kube/cache.h"
#include "../kube/informer.h"
#include "../kube/kubeconfig.h"
#include "../kube/rest.h"
#include "args.h"
#include "bind.h"
#include "passed.h"
#include "tls.h"
#include "view.h"

#include <microhttpd.h>
#include <netdb.h>
#include <pthread.h>
#include <signal.h>
#include <time.h>
#include <unistd.h>

#define GROUP_PATH "/apis/podres.dev/v1alpha1"
#define MAX_BODY (16u << 20) /* bytes: a NodeList of thousands of nodes (nodeCacheCapable off) */
#define READY_GRACE_MS 15000 /* informer failures shorter than this are not news */
#define POOL_IDLE 16         /* API clients kept for binds */
#define PASSED_MAX 16384     /* pods whose filter answer is kept for their bind */
#define PASSED_TTL_MS 300000 /* a scheduling cycle's filter-to-bind span, generously */
#define DENY_LOG_MS 10000    /* at most one line per reason this often */
#define MAX_CONNECTIONS 256  /* open connections, a thread each */
#define IDLE_TIMEOUT_S 30    /* a connection silent this long is closed */

struct settings {
    char *kubeconfig;    /* --kubeconfig, or NULL */
    char *listen;        /* HOST:PORT of the verbs, /healthz, /readyz, /metrics */
    char *resource;      /* comma-separated resources managed before any NodeDevices lists them */
    double qps;          /* API requests per second */
    uint64_t burst;      /* token bucket size */
    uint64_t assume_ms;  /* how long a bind's choice is assumed unseen */
    char *tls_cert;      /* --tls-cert-file: the serving certificate (PEM) */
    char *tls_key;       /* --tls-private-key-file: its key (PEM) */
    char *client_ca;     /* --client-ca-file: the CA of the callers' certificates */
    char *client_names;  /* comma-separated common names allowed to call */
    char *schedulers;    /* comma-separated spec.schedulerName values served by bind */
    uint64_t per_client; /* connections one client address may hold open */
    char *log_format;    /* text or json */
    char *log_level;     /* err..debug */
};

#define OFF(f) offsetof(struct settings, f)

static const struct opt opt_table[] = {
    {"kubeconfig", OPT_STR, OFF(kubeconfig), .def = NULL},
    {"listen", OPT_STR, OFF(listen), .def = "127.0.0.1:8888"},
    {"resource", OPT_STR, OFF(resource), .def = NULL},
    {"qps", OPT_NUMBER, OFF(qps), .def = "50"},
    {"burst", OPT_COUNT, OFF(burst), .def = "100"},
    {"assume_timeout", OPT_DURATION, OFF(assume_ms), .def = "30s"},
    {"tls_cert_file", OPT_STR, OFF(tls_cert), .def = NULL},
    {"tls_private_key_file", OPT_STR, OFF(tls_key), .def = NULL},
    {"client_ca_file", OPT_STR, OFF(client_ca), .def = NULL},
    {"client_names", OPT_STR, OFF(client_names), .def = "podres-scheduler"},
    {"scheduler_names", OPT_STR, OFF(schedulers), .def = "podres-scheduler"},
    {"max_client_connections", OPT_COUNT, OFF(per_client), .def = "32"},
    OPTS_LOG(struct settings),
};
#define NOPTS ARRAY_SIZE(opt_table)

static const char usage[] =
    "usage: podres-extender --tls-cert-file F --tls-private-key-file F --client-ca-file F\n"
    "                       [--client-names CN[,CN...]] [--scheduler-names S[,S...]]\n"
    "                       [--config FILE] [--kubeconfig PATH] [--listen HOST:PORT]\n"
    "                       [--resource R[,R...]] [--qps N] [--burst N] [--assume-timeout D]\n"
    "                       [--max-client-connections N]\n"
    "                       [--log-format text|json] [--log-level LEVEL] [--version] [--help]\n"
    "A kube-scheduler extender: filter, prioritize and bind pods by the free devices\n"
    "of NodeDevices and DeviceBindings (POST <prefix>/filter, /prioritize, /bind), over\n"
    "HTTPS, for callers with a client certificate of --client-ca-file named in\n"
    "--client-names (/healthz and /readyz answer anyone).\n";

/* ---- request metrics ---- */

enum verb {
    VERB_FILTER,
    VERB_PRIORITIZE,
    VERB_BIND,
    NVERBS
};
enum outcome {
    OUT_OK,
    OUT_ERROR,
    OUT_BAD_REQUEST,
    NOUTCOMES
};
static const char *const verb_names[NVERBS] = {"filter", "prioritize", "bind"};
static const char *const outcome_names[NOUTCOMES] = {"ok", "error", "bad_request"};

/* Why a request was refused before it reached a verb. */
enum denial {
    DENY_NO_CERT, /* no client certificate the CA signed for clients */
    DENY_NAME,    /* a valid certificate of a name not allowed */
    NDENIALS
};
static const char *const denial_names[NDENIALS] = {"no_certificate", "name_not_allowed"};

/* Lock: 'mu' guards every other field. */
struct reqstats {
    pthread_mutex_t mu;
    uint64_t n[NVERBS][NOUTCOMES];    /* answered requests */
    struct prom_hist latency[NVERBS]; /* seconds */
    uint64_t denied[NDENIALS];        /* requests refused (401, 403) */
    uint64_t deny_logged[NDENIALS];   /* monotonic ms of the last line about each */
};

static void reqstats_init(struct reqstats *rs)
{
    size_t v;

    pthread_mutex_init(&rs->mu, NULL);
    for (v = 0; v < NVERBS; v++)
        prom_hist_init(&rs->latency[v], prom_latency_bounds, PROM_LATENCY_BUCKETS);
}

/* ---- the daemon ---- */

struct extender {
    struct settings set;               /* settings */
    struct kubeconfig kc;              /* API server access */
    struct rest_gate *gate;            /* API token bucket and backoff */
    struct rest_stats *kstats;         /* API request counters */
    struct rest_opts kopts;            /* how bind clients are made */
    struct view *view;                 /* free devices */
    struct cache *nds, *dvbs;          /* the informers' caches */
    struct rest *k_nds, *k_dvbs;       /* the informers' clients */
    struct informer inf_nds, inf_dvbs; /* the informers */
    pthread_mutex_t pool_mu;           /* guards pool and npool */
    struct rest *pool[POOL_IDLE];      /* idle clients for binds */
    int npool;                         /* how many */
    struct bind_stats bstats;          /* bind counters (atomic) */
    struct tls_conf tls;               /* the certificates and who may call */
    char **schedulers;                 /* --scheduler-names split, NULL-terminated */
    struct passed *passed;             /* filter's answers, for bind's check */
    struct bind_checks checks;         /* schedulers and passed, for bind_pod */
    struct reqstats rs;                /* request counters */
    struct MHD_Daemon *http;           /* the server */
    pthread_t threads[2];              /* the informers */
    int nthreads;                      /* started */
};

static void observe(struct reqstats *rs, enum verb v, enum outcome o, double s)
{
    pthread_mutex_lock(&rs->mu);
    rs->n[v][o]++;
    prom_hist_observe(&rs->latency[v], s);
    pthread_mutex_unlock(&rs->mu);
}

/* The caches' notifications: the view follows each change. */
static void on_node(void *ctx, const char *key)
{
    struct extender *x = ctx;
    json_t *obj = cache_get(x->nds, key);

    view_set_node(x->view, key, obj);
    json_decref(obj);
}

static void on_binding(void *ctx, const char *key)
{
    struct extender *x = ctx;
    json_t *obj = cache_get(x->dvbs, key);

    view_set_binding(x->view, key, obj);
    json_decref(obj);
}

/* Both informers have listed and are not failing; else 'why'. */
static bool ready(struct extender *x, struct error *why)
{
    return informer_ready(&x->inf_nds, READY_GRACE_MS, why) &&
           informer_ready(&x->inf_dvbs, READY_GRACE_MS, why);
}

/* ---- API clients for binds ---- */

static struct rest *pool_get(struct extender *x)
{
    struct rest *k = NULL;

    pthread_mutex_lock(&x->pool_mu);
    if (x->npool > 0)
        k = x->pool[--x->npool];
    pthread_mutex_unlock(&x->pool_mu);
    return k ? k : rest_new(&x->kopts);
}

static void pool_put(struct extender *x, struct rest *k)
{
    pthread_mutex_lock(&x->pool_mu);
    if (x->npool < POOL_IDLE) {
        x->pool[x->npool++] = k;
        k = NULL;
    }
    pthread_mutex_unlock(&x->pool_mu);
    rest_free(k);
}

/* ---- the verbs ---- */

/* An answer: HTTP status, JSON body (new), and how it counts. */
struct answer {
    unsigned status;  /* HTTP status */
    json_t *body;     /* new */
    enum outcome out; /* for the metrics */
};

static struct answer error_answer(unsigned status, enum outcome o, const char *msg)
{
    return (struct answer){status, jsonx_object("Error", jsonx_string_lossy(msg), NULL), o};
}

/* Filter's answer in the shape it was asked: NodeNames, or Nodes (the
 * items of the request whose names passed). */
static json_t *filter_result(const struct args *a, json_t *fit, json_t *failed)
{
    const json_t *items = json_object_get(json_object_get(a->doc, "Nodes"), "items"), *it;
    json_t *keep, *pass;
    size_t i;

    if (!a->node_list)
        return jsonx_object("NodeNames", fit, "FailedNodes", failed, "Error", json_string(""),
                            NULL);
    pass = json_object();
    keep = json_array();
    json_array_foreach(fit, i, it) {
        json_object_set(pass, json_string_value(it), json_true());
    }
    json_array_foreach(items, i, it) {
        const char *n = json_string_value(json_object_get(json_object_get(it, "metadata"), "name"));

        if (n && json_object_get(pass, n))
            json_array_append(keep, (json_t *)it);
    }
    json_decref(pass);
    json_decref(fit);
    return jsonx_object("Nodes", jsonx_object("items", keep, NULL), "FailedNodes", failed, "Error",
                        json_string(""), NULL);
}

static struct answer do_filter(struct extender *x, const char *body, size_t len)
{
    struct args a;
    json_t *fit = NULL, *failed = NULL;
    struct error why = {0};
    err_t rc = args_parse(body, len, &a, &why);
    struct answer ans;

    if (rc)
        return error_answer(rc == ERR_NOMEM ? 500 : 400, OUT_BAD_REQUEST, error_msg(&why));
    if (!ready(x, &why)) {
        ans = error_answer(200, OUT_ERROR, why.msg);
    } else if (view_filter(x->view, a.names, a.totals, &fit, &failed)) {
        ans = error_answer(500, OUT_ERROR, "out of memory");
    } else {
        if (a.uid[0] && passed_note(x->passed, a.uid, fit, clock_mono_ms()))
            log_warn("cannot remember filter's answer for pod %s/%s (out of memory): its bind "
                     "will be refused",
                     a.ns, a.name);
        ans = (struct answer){200, filter_result(&a, fit, failed), OUT_OK};
        log_debug("filter %s/%s: %zu of %zu nodes fit", a.ns, a.name,
                  json_array_size(a.names) - json_object_size(failed), json_array_size(a.names));
    }
    args_release(&a);
    return ans;
}

static struct answer do_prioritize(struct extender *x, const char *body, size_t len)
{
    struct args a;
    json_t *list = NULL;
    struct error why = {0};
    err_t rc = args_parse(body, len, &a, &why);
    struct answer ans;

    if (rc)
        return error_answer(rc == ERR_NOMEM ? 500 : 400, OUT_BAD_REQUEST, error_msg(&why));
    if (!ready(x, &why))
        ans = error_answer(503, OUT_ERROR, why.msg); /* a list is the only answer: no Error field */
    else if (view_prioritize(x->view, a.names, a.totals, &list))
        ans = error_answer(500, OUT_ERROR, "out of memory");
    else
        ans = (struct answer){200, list, OUT_OK};
    args_release(&a);
    return ans;
}

static struct answer do_bind(struct extender *x, const char *body, size_t len)
{
    struct args_bind b;
    struct error why = {0};
    char full[2048];
    struct rest *k;
    err_t rc = args_parse_bind(body, len, &b, &why);

    if (rc)
        return error_answer(rc == ERR_NOMEM ? 500 : 400, OUT_BAD_REQUEST, error_msg(&why));
    if (!ready(x, &why)) {
        snprintf(full, sizeof(full), "podres-extender: cannot bind pod %s/%s: %s", b.ns, b.name,
                 why.msg);
        return error_answer(200, OUT_ERROR, full);
    }
    k = pool_get(x);
    rc = k ? bind_pod(x->view, k, &x->checks, &b, &x->bstats, &why)
           : errorf(&why, ERR_NOMEM, "out of memory");
    if (k)
        pool_put(x, k);
    if (!rc)
        return (struct answer){200, jsonx_object("Error", json_string(""), NULL), OUT_OK};
    snprintf(full, sizeof(full), "podres-extender: cannot bind pod %s/%s to node %s: %s", b.ns,
             b.name, b.node, rc == ERR_NOMEM ? "out of memory" : why.msg);
    return error_answer(200, OUT_ERROR, full);
}

/* The verb a path names (its last segment), or NVERBS. */
static enum verb verb_of(const char *url)
{
    const char *last = strrchr(url, '/');
    size_t i;

    for (i = 0; last && i < NVERBS; i++) {
        if (strcmp(last + 1, verb_names[i]) == 0)
            return (enum verb)i;
    }
    return NVERBS;
}

/* ---- /metrics ---- */

/* The API client's counters, named for this program. */
static err_t render_kube(struct extender *x, struct strbuf *sb)
{
    struct strbuf k = STRBUF_INIT;
    const char *p, *hit;
    err_t rc = rest_stats_render(x->kstats, &k);

    for (p = k.buf; !rc && p && *p; p = hit + 14) {
        hit = strstr(p, "podres_syncer_");
        if (!hit) {
            rc = strbuf_add(sb, p, strlen(p));
            break;
        }
        rc = strbuf_add(sb, p, (size_t)(hit - p));
        if (!rc)
            rc = strbuf_add(sb, "podres_extender_", 16);
    }
    strbuf_release(&k);
    return rc;
}

static void render_requests(struct reqstats *rs, struct prom *p)
{
    static const char latency[] = "podres_extender_request_duration_seconds";
    size_t v, o;

    prom_help(p, "podres_extender_requests_total", "counter",
              "Extender requests by verb and outcome (ok, error: answered with an Error, "
              "bad_request).");
    for (v = 0; v < NVERBS; v++) {
        for (o = 0; o < NOUTCOMES; o++)
            prom_sample(
                p, "podres_extender_requests_total",
                (const char *const[]){"verb", verb_names[v], "outcome", outcome_names[o], NULL},
                "%llu", (unsigned long long)rs->n[v][o]);
    }
    prom_help(p, latency, "histogram", "Time to answer an extender request.");
    for (v = 0; v < NVERBS; v++)
        prom_hist_render(p, latency, (const char *const[]){"verb", verb_names[v], NULL},
                         &rs->latency[v]);
    prom_help(p, "podres_extender_requests_denied_total", "counter",
              "Requests refused before any verb: no client certificate of the client CA "
              "(401), or one whose name is not allowed (403).");
    for (v = 0; v < NDENIALS; v++)
        prom_sample(p, "podres_extender_requests_denied_total",
                    (const char *const[]){"reason", denial_names[v], NULL}, "%llu",
                    (unsigned long long)rs->denied[v]);
}

static err_t render_metrics(struct extender *x, struct strbuf *sb)
{
    struct prom p = PROM_INIT(sb);

    pthread_mutex_lock(&x->rs.mu);
    render_requests(&x->rs, &p);
    pthread_mutex_unlock(&x->rs.mu);
    prom_metric(&p, "podres_extender_binds_total", "counter", "Pods bound.", "%llu",
                (unsigned long long)__atomic_load_n(&x->bstats.binds, __ATOMIC_RELAXED));
    prom_metric(&p, "podres_extender_bind_failures_total", "counter",
                "Binds answered with an error.", "%llu",
                (unsigned long long)__atomic_load_n(&x->bstats.failures, __ATOMIC_RELAXED));
    prom_metric(&p, "podres_extender_binds_refused_total", "counter",
                "Binds refused by bind's checks (pod of another uid, bound already, another "
                "scheduler's, or a node that did not pass filter).",
                "%llu", (unsigned long long)__atomic_load_n(&x->bstats.refused, __ATOMIC_RELAXED));
    prom_metric(&p, "podres_extender_preassignments_removed_total", "counter",
                "Pre-assignments taken back after the pod's Binding failed.", "%llu",
                (unsigned long long)__atomic_load_n(&x->bstats.removed, __ATOMIC_RELAXED));
    prom_metric(&p, "podres_extender_nodes", "gauge", "Nodes with a NodeDevices.", "%zu",
                view_nodes(x->view));
    prom_metric(&p, "podres_extender_assumed", "gauge",
                "Pods whose chosen devices are not yet seen in a DeviceBinding.", "%zu",
                view_assumed(x->view));
    if (!p.rc)
        p.rc = render_kube(x, sb);
    return p.rc;
}

/* ---- HTTP ---- */

/* One request's upload. */
struct upload {
    struct strbuf body; /* the request body */
    bool too_large;     /* over MAX_BODY: discarded */
    uint64_t start_ms;  /* monotonic, when it arrived */
};

static enum MHD_Result send_text(struct MHD_Connection *conn, unsigned status, const char *ctype,
                                 char *body, size_t len)
{
    struct MHD_Response *resp = MHD_create_response_from_buffer(len, body, MHD_RESPMEM_MUST_FREE);
    enum MHD_Result ret;

    if (!resp) {
        free(body);
        return MHD_NO;
    }
    MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE, ctype);
    ret = MHD_queue_response(conn, status, resp);
    MHD_destroy_response(resp);
    return ret;
}

static enum MHD_Result send_plain(struct MHD_Connection *conn, unsigned status, const char *text)
{
    char *b = strdup(text);

    return b ? send_text(conn, status, "text/plain; charset=utf-8", b, strlen(b)) : MHD_NO;
}

static enum MHD_Result serve_get(struct extender *x, struct MHD_Connection *conn, const char *url)
{
    struct strbuf sb = STRBUF_INIT;
    struct error why = {0};
    char text[ERROR_MSG_MAX + 16];
    size_t len;
    char *b;

    if (strcmp(url, "/healthz") == 0)
        return send_plain(conn, 200, "ok");
    if (strcmp(url, "/readyz") == 0) {
        if (ready(x, &why))
            return send_plain(conn, 200, "ok");
        snprintf(text, sizeof(text), "not ready: %s", why.msg);
        return send_plain(conn, 503, text);
    }
    if (strcmp(url, "/metrics") != 0)
        return send_plain(conn, 404, "not found\n");
    if (render_metrics(x, &sb)) {
        strbuf_release(&sb);
        return send_plain(conn, 500, "out of memory\n");
    }
    b = strbuf_detach(&sb, &len);
    return send_text(conn, 200, "text/plain; version=0.0.4", b, len);
}

static enum MHD_Result serve_verb(struct extender *x, struct MHD_Connection *conn, enum verb v,
                                  struct upload *up)
{
    static struct answer (*const fns[NVERBS])(struct extender *, const char *,
                                              size_t) = {do_filter, do_prioritize, do_bind};
    struct answer a;
    size_t len;
    char *text;

    if (up->too_large)
        a = error_answer(413, OUT_BAD_REQUEST, "request body over 16 MiB");
    else
        a = fns[v](x, up->body.buf ? up->body.buf : "", up->body.len);
    if (a.out == OUT_BAD_REQUEST)
        log_warn("bad %s request: %s", verb_names[v],
                 json_string_value(json_object_get(a.body, "Error")));
    text = a.body ? jsonx_dumps_line(a.body, &len) : NULL;
    json_decref(a.body);
    observe(&x->rs, v, a.out, (double)(clock_mono_ms() - up->start_ms) / 1000.0);
    if (!text)
        return send_plain(conn, 500, "out of memory\n");
    return send_text(conn, a.status, "application/json", text, len);
}

/* Count and (at most every DENY_LOG_MS per reason) log a refused request. */
static void note_denied(struct extender *x, enum denial d, const char *cn, const char *url)
{
    uint64_t now = clock_mono_ms();
    bool say;

    pthread_mutex_lock(&x->rs.mu);
    x->rs.denied[d]++;
    say = x->rs.deny_logged[d] == 0 || now - x->rs.deny_logged[d] >= DENY_LOG_MS;
    if (say)
        x->rs.deny_logged[d] = now;
    pthread_mutex_unlock(&x->rs.mu);
    if (!say)
        return;
    if (d == DENY_NAME)
        log_warn("refused a request for %.64s: client certificate CN '%.64s' is not in "
                 "--client-names (further refusals for 10 s are only counted)",
                 url, cn);
    else
        log_warn("refused a request for %.64s: no client certificate signed by --client-ca-file "
                 "(further refusals for 10 s are only counted)",
                 url);
}

/* Whether the caller of 'conn' may ask for 'url'; else the refusal is queued. */
static bool authorized(struct extender *x, struct MHD_Connection *conn, const char *url,
                       enum MHD_Result *ret)
{
    const union MHD_ConnectionInfo *ci;
    char cn[TLS_NAME_MAX] = "";
    enum tls_caller who;

    if (strcmp(url, "/healthz") == 0 || strcmp(url, "/readyz") == 0)
        return true;
    ci = MHD_get_connection_info(conn, MHD_CONNECTION_INFO_GNUTLS_SESSION);
    who = tls_check_caller(&x->tls, ci ? ci->tls_session : NULL, cn, sizeof(cn));
    if (who == TLS_CALLER_OK)
        return true;
    note_denied(x, who == TLS_CALLER_FORBIDDEN ? DENY_NAME : DENY_NO_CERT, cn, url);
    *ret = who == TLS_CALLER_FORBIDDEN
               ? send_plain(conn, 403,
                            "forbidden: this client certificate's name may not call the "
                            "extender\n")
               : send_plain(conn, 401,
                            "unauthorized: a client certificate signed by the "
                            "extender's client CA is required\n");
    return false;
}

static enum MHD_Result on_http(void *cls, struct MHD_Connection *conn, const char *url,
                               const char *method, const char *version, const char *data,
                               size_t *size, void **con_cls)
{
    struct extender *x = cls;
    struct upload *up = *con_cls;
    enum verb v = verb_of(url);
    enum MHD_Result ret;

    (void)version;
    if (!up) {
        if (!authorized(x, conn, url, &ret))
            return ret;
        up = calloc(1, sizeof(*up));
        if (!up)
            return MHD_NO;
        up->start_ms = clock_mono_ms();
        *con_cls = up;
        return MHD_YES;
    }
    if (*size) {
        if (!up->too_large &&
            (up->body.len + *size > MAX_BODY || strbuf_add(&up->body, data, *size)))
            up->too_large = true;
        *size = 0;
        return MHD_YES;
    }
    if (strcmp(method, "GET") == 0 || strcmp(method, "HEAD") == 0)
        return v == NVERBS ? serve_get(x, conn, url) : send_plain(conn, 405, "use POST\n");
    if (strcmp(method, "POST") != 0 || v == NVERBS)
        return send_plain(conn, v == NVERBS ? 404 : 405,
                          v == NVERBS ? "not found\n" : "method not allowed\n");
    return serve_verb(x, conn, v, up);
}

static void on_completed(void *cls, struct MHD_Connection *conn, void **con_cls,
                         enum MHD_RequestTerminationCode toe)
{
    struct upload *up = *con_cls;

    (void)cls;
    (void)conn;
    (void)toe;
    if (up)
        strbuf_release(&up->body);
    free(up);
    *con_cls = NULL;
}

static err_t start_http(struct extender *x)
{
    const char *l = x->set.listen, *colon = strrchr(l, ':');
    struct addrinfo hints = {.ai_socktype = SOCK_STREAM, .ai_flags = AI_NUMERICHOST};
    struct addrinfo *ai = NULL;
    size_t n = colon ? (size_t)(colon - l) : 0;
    char host[256];

    if (!colon || n == 0 || n >= sizeof(host)) {
        log_err("cannot listen on '%s': give HOST:PORT", l);
        return ERR_INVAL;
    }
    snprintf(host, sizeof(host), "%.*s", (int)n, l);
    if (host[0] == '[' && host[n - 1] == ']') {
        memmove(host, host + 1, n - 2);
        host[n - 2] = '\0';
    }
    if (getaddrinfo(strcmp(host, "localhost") == 0 ? "127.0.0.1" : host, colon + 1, &hints, &ai)) {
        log_err("cannot listen on '%s': not a numeric address", l);
        return ERR_INVAL;
    }
    /* The client CA makes libmicrohttpd ask for a certificate; authorized()
     * decides per path whether one is needed. A client address gets a
     * share of the connections, so one cannot take all of them. */
    x->http = MHD_start_daemon(
        MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_THREAD_PER_CONNECTION | MHD_USE_POLL |
            MHD_USE_TLS | (ai->ai_family == AF_INET6 ? MHD_USE_IPv6 : 0),
        0, NULL, NULL, on_http, x, MHD_OPTION_SOCK_ADDR, ai->ai_addr, MHD_OPTION_NOTIFY_COMPLETED,
        on_completed, x, MHD_OPTION_HTTPS_MEM_CERT, x->tls.cert, MHD_OPTION_HTTPS_MEM_KEY,
        x->tls.key, MHD_OPTION_HTTPS_MEM_TRUST, x->tls.ca, MHD_OPTION_CONNECTION_LIMIT,
        (unsigned)MAX_CONNECTIONS, MHD_OPTION_PER_IP_CONNECTION_LIMIT, (unsigned)x->set.per_client,
        MHD_OPTION_CONNECTION_TIMEOUT, (unsigned)IDLE_TIMEOUT_S, MHD_OPTION_END);
    freeaddrinfo(ai);
    if (!x->http) {
        log_err("cannot listen on '%s': %s", l, strerror(errno));
        return ERR_IO;
    }
    log_info("serving the extender verbs on https://%s to client certificates named %s", l,
             x->set.client_names);
    return ERR_OK;
}

/* ---- start-up ---- */

static void free_list(char **list)
{
    size_t i;

    for (i = 0; list && list[i]; i++)
        free(list[i]);
    free(list);
}

/* --max-client-connections: a share of MAX_CONNECTIONS. */
static err_t per_client_check(const struct extender *x)
{
    if (x->set.per_client < MAX_CONNECTIONS)
        return ERR_OK;
    log_err("--max-client-connections: %llu is not below the %u connections served in all",
            (unsigned long long)x->set.per_client, (unsigned)MAX_CONNECTIONS);
    return ERR_INVAL;
}

static enum opts_next load_settings(int argc, char **argv, struct extender *x)
{
    const struct opts_spec spec = {"podres-extender", usage, opt_table, NOPTS, NULL, NULL};

    return opts_load(&spec, &x->set, argc, argv);
}

/* --resource R[,R...]: each must be an extended resource name. */
static err_t add_resources(struct extender *x)
{
    char *list, *p, *save = NULL;
    err_t rc = ERR_OK;

    if (!x->set.resource || !*x->set.resource)
        return ERR_OK;
    list = strdup(x->set.resource);
    if (!list)
        return ERR_NOMEM;
    for (p = strtok_r(list, ",", &save); p; p = strtok_r(NULL, ",", &save)) {
        if (!strchr(p, '/') || p[0] == '/' || p[strlen(p) - 1] == '/') {
            log_err("--resource: '%s' is not an extended resource name (domain/name)", p);
            rc = ERR_INVAL;
            break;
        }
        view_add_resource(x->view, p);
    }
    free(list);
    return rc;
}

/* 'list' split at commas into a new NULL-terminated array (empty items dropped). */
static char **split_list(const char *list)
{
    size_t n = 2, i = 0;
    const char *p, *q;
    char **out;

    for (p = list ? list : ""; *p; p++)
        n += *p == ',';
    out = calloc(n, sizeof(*out));
    for (p = list ? list : ""; out && *p; p = *q ? q + 1 : q) {
        q = strchrnul(p, ',');
        if (q > p && !(out[i++] = strndup(p, (size_t)(q - p)))) {
            free_list(out);
            return NULL;
        }
    }
    return out;
}

/* Who may call us and which binds we accept: the TLS identity, the connection
 * bounds and the bind checks. */
static err_t setup_access(struct extender *x)
{
    struct error e = {0};
    err_t rc = tls_load(&x->tls, x->set.tls_cert, x->set.tls_key, x->set.client_ca,
                        x->set.client_names, &e);

    if (rc) {
        log_err("%s", e.msg);
        return rc;
    }
    if (per_client_check(x))
        return ERR_INVAL;
    x->schedulers = split_list(x->set.schedulers);
    x->passed = passed_new(PASSED_MAX, PASSED_TTL_MS);
    if (!x->schedulers || !x->passed)
        return ERR_NOMEM;
    if (!x->schedulers[0]) {
        log_err("--scheduler-names: give at least one scheduler name");
        return ERR_INVAL;
    }
    x->checks = (struct bind_checks){.schedulers = x->schedulers, .passed = x->passed};
    return ERR_OK;
}

static err_t setup(struct extender *x)
{
    err_t rc = setup_access(x);

    if (rc)
        return rc;
    rc = kubeconfig_load_daemon(x->set.kubeconfig, &x->kc);
    if (rc)
        return rc;
    x->gate = rest_gate_new(x->set.qps, (int)x->set.burst);
    x->kstats = rest_stats_new();
    x->view = view_new(x->set.assume_ms);
    if (!x->gate || !x->kstats || !x->view)
        return ERR_NOMEM;
    rc = add_resources(x);
    if (rc)
        return rc;
    x->kopts = (struct rest_opts){.kc = &x->kc, .gate = x->gate, .stats = x->kstats};
    x->nds = cache_new(on_node, x);
    x->dvbs = cache_new(on_binding, x);
    x->k_nds = rest_new(&x->kopts);
    x->k_dvbs = rest_new(&x->kopts);
    if (!x->nds || !x->dvbs || !x->k_nds || !x->k_dvbs)
        return ERR_NOMEM;
    x->inf_nds = (struct informer){.name = "nodedevices",
                                   .path = GROUP_PATH "/nodedevices",
                                   .query = "",
                                   .kube = x->k_nds,
                                   .gate = x->gate,
                                   .cache = x->nds};
    x->inf_dvbs = (struct informer){.name = "devicebindings",
                                    .path = GROUP_PATH "/devicebindings",
                                    .query = "",
                                    .kube = x->k_dvbs,
                                    .gate = x->gate,
                                    .cache = x->dvbs};
    log_info("following NodeDevices and DeviceBindings of %s (from %s)", x->kc.server,
             x->kc.source ? x->kc.source : "?");
    return ERR_OK;
}

static void teardown(struct extender *x)
{
    int i;

    if (x->gate)
        rest_gate_stop(x->gate);
    if (x->http)
        MHD_stop_daemon(x->http);
    for (i = 0; i < x->nthreads; i++)
        pthread_join(x->threads[i], NULL);
    for (i = 0; i < x->npool; i++)
        rest_free(x->pool[i]);
    rest_free(x->k_nds);
    rest_free(x->k_dvbs);
    cache_free(x->nds);
    cache_free(x->dvbs);
    view_free(x->view);
    passed_free(x->passed);
    free_list(x->schedulers);
    tls_release(&x->tls);
    rest_stats_free(x->kstats);
    rest_gate_free(x->gate);
    kubeconfig_release(&x->kc);
    opts_release(opt_table, NOPTS, &x->set);
    pthread_mutex_destroy(&x->pool_mu);
    pthread_mutex_destroy(&x->rs.mu);
}

static void run(struct extender *x, const sigset_t *sigs)
{

    pthread_create(&x->threads[x->nthreads++], NULL, informer_run, &x->inf_nds);
    pthread_create(&x->threads[x->nthreads++], NULL, informer_run, &x->inf_dvbs);
    while (!proc_wait(sigs, 1000))
        ;
}

int main(int argc, char **argv)
{
    static struct extender x;
    enum opts_next next;
    sigset_t sigs;

    mem_tune();
    fault_init();
    pthread_mutex_init(&x.pool_mu, NULL);
    reqstats_init(&x.rs);
    next = load_settings(argc, argv, &x);
    if (next != OPTS_RUN) {
        teardown(&x);
        return next == OPTS_EXIT_OK ? 0 : 1;
    }
    proc_signals(&sigs);
    if (rest_global_init()) {
        log_err("cannot initialise libcurl");
        teardown(&x);
        return 1;
    }
    srand((unsigned)time(NULL) ^ (unsigned)getpid());
    if (setup(&x) || start_http(&x)) {
        log_err("start-up failed; exiting");
        teardown(&x);
        rest_global_cleanup();
        return 1;
    }
    fault_arm();
    run(&x, &sigs);
    teardown(&x);
    rest_global_cleanup();
    log_info("stopped");
    return 0;
}
