/* SPDX-License-Identifier: Apache-2.0 */
/* main.c - podres-syncer: settings, the threads (podresd feed, three
 * informers, one worker), the metrics endpoint, the periodic resync, --once,
 * and a clean exit on SIGTERM. exit(1) only for start-up errors. */
#define LOG_MOD "main"
#include "../common/common.h"
#include "../common/mem.h"
#include "../common/cfg.h"
#include "../common/opts.h"
#include "../common/strbuf.h"
#include "../kube/cache.h"
#include "../kube/informer.h"
#include "inventory.h"
#include "../kube/rest.h"
#include "../kube/kubeconfig.h"
#include "nodefeed.h"
#include "queue.h"
#include "dvb.h"
#include "reconcile.h"

#include <curl/curl.h>
#include <getopt.h>
#include <microhttpd.h>
#include <netdb.h>
#include <pthread.h>
#include <signal.h>
#include <time.h>
#include <unistd.h>

struct settings {
    char *node_name;             /* this node */
    char *podresd_socket;        /* podresd's unix socket */
    char *podresd_url;           /* or its URL */
    char *podresd_token_file;    /* bearer token for writes to podresd over its URL */
    char *kubeconfig;            /* --kubeconfig, or NULL */
    double qps;                  /* API requests per second */
    uint64_t burst;              /* token bucket size */
    uint64_t resync_ms;          /* full resync period */
    char *metrics_listen;        /* HOST:PORT of /metrics and /healthz */
    uint64_t reservation_ttl_ms; /* how long a pre-assignment waits for its pod */
    uint64_t inventory_ms;       /* at most one NodeDevices write per this */
    char *log_format;            /* text or json */
    char *log_level;             /* err..debug */
};

#define OFF(f) offsetof(struct settings, f)

/* A token file must be readable at start; a check names the key. */
static const char *readable(const char *path)
{
    return access(path, R_OK) == 0 ? NULL : strerror(errno);
}

static const struct opt opt_table[] = {
    {"node_name", OPT_STR, OFF(node_name), NULL, NULL},
    {"podresd_socket", OPT_STR, OFF(podresd_socket), NULL, NULL},
    {"podresd_url", OPT_STR, OFF(podresd_url), NULL, NULL},
    {"podresd_token_file", OPT_STR, OFF(podresd_token_file), NULL, readable},
    {"kubeconfig", OPT_STR, OFF(kubeconfig), NULL, NULL},
    {"qps", OPT_NUMBER, OFF(qps), NULL, NULL},
    {"burst", OPT_COUNT, OFF(burst), NULL, NULL},
    {"resync_interval", OPT_DURATION, OFF(resync_ms), NULL, NULL},
    {"metrics_listen", OPT_STR, OFF(metrics_listen), NULL, NULL},
    {"reservation_ttl", OPT_DURATION, OFF(reservation_ttl_ms), NULL, NULL},
    {"inventory_interval", OPT_DURATION, OFF(inventory_ms), NULL, NULL},
    {"log_format", OPT_ENUM, OFF(log_format), "|text|json|", NULL},
    {"log_level", OPT_ENUM, OFF(log_level), "|err|warn|info|debug|", NULL},
};
#define NOPTS ARRAY_SIZE(opt_table)

static const char usage[] =
    "usage: podres-syncer [--config FILE] [--node-name NAME] [--podresd-socket PATH | "
    "--podresd-url URL\n"
    "                     [--podresd-token-file PATH]]\n"
    "                     [--kubeconfig PATH] [--qps N] [--burst N] [--resync-interval D]\n"
    "                     [--metrics-listen HOST:PORT] [--reservation-ttl D]\n"
    "                     [--inventory-interval D] [--once]\n"
    "                     [--log-format text|json] [--log-level LEVEL] [--version] [--help]\n"
    "Keeps one DeviceBinding per pod with devices, and the node's NodeDevices, in the\n"
    "Kubernetes API server.\n";

static const struct option long_opts[] = {
    {"config", required_argument, NULL, 'c'},
    {"node-name", required_argument, NULL, 0},
    {"podresd-socket", required_argument, NULL, 0},
    {"podresd-url", required_argument, NULL, 0},
    {"podresd-token-file", required_argument, NULL, 0},
    {"kubeconfig", required_argument, NULL, 0},
    {"qps", required_argument, NULL, 0},
    {"burst", required_argument, NULL, 0},
    {"resync-interval", required_argument, NULL, 0},
    {"metrics-listen", required_argument, NULL, 0},
    {"reservation-ttl", required_argument, NULL, 0},
    {"inventory-interval", required_argument, NULL, 0},
    {"log-format", required_argument, NULL, 0},
    {"log-level", required_argument, NULL, 0},
    {"once", no_argument, NULL, 'o'},
    {"version", no_argument, NULL, 'V'},
    {"help", no_argument, NULL, 'h'},
    {NULL, 0, NULL, 0},
};

/* How long the API server may fail an informer's requests before /readyz
 * says so: an API server restarting or a connection re-established is not
 * news. */
#define READY_GRACE_MS 15000

/* Resyncs come every --resync-interval give or take this many percent, so
 * that syncers started together (a DaemonSet rollout) do not resync in step.
 * A resync reads the caches, not the API server; the spread is for what a
 * drift it finds writes. */
#define RESYNC_JITTER_PCT 10

/* ---- the sync-lag histogram ---- */

static const double lag_bounds[] = {0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60};
#define NLAG ARRAY_SIZE(lag_bounds)

/* Lock: 'mu' guards every other field. */
struct lag {
    pthread_mutex_t mu;
    uint64_t buckets[NLAG]; /* per bound, not cumulative */
    uint64_t n;             /* observations */
    double sum;             /* seconds */
};

static void lag_observe(struct lag *l, double s)
{
    size_t i;

    pthread_mutex_lock(&l->mu);
    for (i = 0; i < NLAG && s > lag_bounds[i]; i++)
        ;
    if (i < NLAG)
        l->buckets[i]++;
    l->n++;
    l->sum += s;
    pthread_mutex_unlock(&l->mu);
}

/* ---- the daemon ---- */

struct syncer {
    struct settings set;            /* settings */
    bool once;                      /* --once */
    struct kubeconfig kc;           /* API server access */
    struct kubeconfig pd_kc;        /* podresd access (server URL only) */
    struct rest_gate *gate;         /* API token bucket and backoff */
    struct rest_gate *pd_gate;      /* podresd backoff */
    struct rest_stats *stats;       /* API request counters */
    struct queue *queue;            /* keys to reconcile */
    struct cache *pr, *resv, *devs; /* podresd state */
    struct cache *pods, *crs, *nd;  /* API state */
    struct rest *k_pods, *k_crs, *k_nd, *k_work, *k_pd, *k_pdw; /* one client per thread */
    struct informer inf_pods, inf_crs, inf_nd;                  /* the informers */
    struct nodefeed feed;                                       /* the podresd feed */
    struct reconciler rec;                                      /* the worker's reconciler */
    struct inventory inv;                                       /* the worker's NodeDevices */
    struct events events;                                       /* the worker\'s Events */
    struct lag lag;                                             /* sync-lag histogram */
    char pods_query[512];        /* fieldSelector=spec.nodeName=NODE */
    char crs_query[512];         /* labelSelector=podres.dev/node=NODE */
    char nd_query[512];          /* fieldSelector=metadata.name=NODE */
    volatile time_t last_resync; /* wall clock of the last full resync */
    struct MHD_Daemon *http;     /* /metrics and /healthz */
    pthread_mutex_t wmu;         /* guards 'waiting' */
    json_t *waiting;             /* keys of pre-assignments whose devices are taken */
    int node_missing;            /* atomic: 1 when no Node is named --node-name, 0 when one
                                  * is, -1 before the worker looked */
    pthread_t threads[5];        /* feed, pods, crs, nd, worker */
    int nthreads;                /* started */
};

static void enqueue(void *ctx, const char *key)
{
    queue_add(ctx, key, 0);
}

/* A change of podresd's state (a pod, a reservation): its key, and every
 * pre-assignment waiting for devices that the change may have freed (a
 * release, a deleted reservation): they are rechecked now, not at the next
 * resync. They are few: a reservation PUT to podresd each. */
static void enqueue_node(void *ctx, const char *key)
{
    struct syncer *s = ctx;
    const char *k;
    json_t *v;

    queue_add(s->queue, key, 0);
    pthread_mutex_lock(&s->wmu);
    json_object_foreach(s->waiting, k, v) {
        if (strcmp(k, key) != 0)
            queue_add(s->queue, k, 0);
    }
    pthread_mutex_unlock(&s->wmu);
}

/* The inventory changed (a device, or the NodeDevices object): the worker
 * looks once the write interval since the last write is over. */
static void enqueue_inventory(void *ctx, const char *key)
{
    struct syncer *s = ctx;

    (void)key;
    queue_add(s->queue, INVENTORY_KEY, inventory_due(&s->inv, queue_now_ms()));
}

/* After a reconcile of 'key': whether it waits for devices. */
static void note_waiting(struct syncer *s, const char *key, bool waiting)
{
    pthread_mutex_lock(&s->wmu);
    if (waiting)
        json_object_set_new(s->waiting, key, json_true());
    else
        json_object_del(s->waiting, key);
    pthread_mutex_unlock(&s->wmu);
}

/* Every key the node or the API server knows about. */
static json_t *all_keys(struct syncer *s)
{
    struct cache *from[] = {s->pr, s->resv, s->crs};
    json_t *keys = json_object(), *list, *v;
    size_t i, j;

    for (j = 0; j < ARRAY_SIZE(from); j++) {
        list = cache_keys(from[j]);
        json_array_foreach(list, i, v)
            json_object_set(keys, json_string_value(v), json_true());
        json_decref(list);
    }
    return keys;
}

static void resync(struct syncer *s)
{
    json_t *keys = all_keys(s), *v;
    const char *key;

    json_object_foreach(keys, key, v)
        queue_add(s->queue, key, 0);
    json_decref(keys);
    enqueue_inventory(s, NULL);
    s->last_resync = time(NULL);
}

/* Every cache holds a full list not known to be behind: podresd's state,
 * and the informers' (not while one lists again: after a 410, a reset, or a
 * watch that broke, the API server may be back with its state reset, and
 * the worker decides nothing on a copy the server may no longer hold). */
static bool caches_synced(struct syncer *s)
{
    return cache_synced(s->pr) && informer_current(&s->inf_pods) && informer_current(&s->inf_crs);
}

/* /readyz: synced, and no informer failing for longer than READY_GRACE_MS;
 * else false and 'why' names the first that is not. */
static bool ready(struct syncer *s, char *why, size_t cap)
{
    size_t n;

    if (fence_stopped(&s->rec.fence, queue_now_ms(), why, cap)) {
        n = strlen(why);
        if (__atomic_load_n(&s->node_missing, __ATOMIC_RELAXED) == 1 && n < cap)
            snprintf(why + n, cap - n, "; node '%s' is no Node in the API server",
                     s->set.node_name);
        return false;
    }
    if (!cache_synced(s->pr)) {
        snprintf(why, cap, "podresd's state not listed yet");
        return false;
    }
    return informer_ready(&s->inf_pods, READY_GRACE_MS, why, cap) &&
           informer_ready(&s->inf_crs, READY_GRACE_MS, why, cap) &&
           (informer_missing(&s->inf_nd) || informer_ready(&s->inf_nd, READY_GRACE_MS, why, cap));
}

/* Per-key backoff after a failure: 200 ms doubling to 30 s; 30 s doubling
 * to 5 min for 403/422, which only a person fixes (each is logged). */
static uint64_t retry_delay(json_t *fails, const char *key, err_t rc)
{
    json_int_t n = json_integer_value(json_object_get(fails, key)) + 1;
    bool stuck = rc == ERR_FORBIDDEN || rc == ERR_UNPROCESSABLE;
    uint64_t cap = stuck ? 300000 : 30000;
    uint64_t d = stuck ? 30000 : 200;

    json_object_set_new(fails, key, json_integer(n));
    while (--n > 0 && d < cap)
        d *= 2;
    return d < cap ? d : cap;
}

/* The caches are not all current: the key waits. When DeviceBindings are
 * not served at all (their CRD missing), its binding is not mirrored for
 * that reason: counted, and said once. */
static void put_off(struct syncer *s, const char *key)
{
    bool missing = informer_missing(&s->inf_crs);

    if (missing)
        reconcile_skip(&s->rec, key, RECONCILE_SKIP_CRD_MISSING,
                       "the API server does not serve DeviceBindings (is the "
                       "CustomResourceDefinition devicebindings.podres.dev installed?)");
    queue_add(s->queue, key, missing ? 1000 : 200);
}

/* Whether --node-name is a Node in the API server: a typo otherwise (or a
 * node not registered yet). Said once, as a warning, and in the metric
 * podres_syncer_node_missing; nothing else follows from it: writes stop
 * only when another syncer is seen on this podresd (reconcile.h). */
static void check_node(struct syncer *s)
{
    char path[512], name[300], msg[512];
    json_t *node = NULL;
    err_t rc;

    rest_escape(s->set.node_name, name, sizeof(name));
    snprintf(path, sizeof(path), "/api/v1/nodes/%s", name);
    rc = rest_do(s->k_work, "GET", path, NULL, NULL, &node, msg, sizeof(msg));
    json_decref(node);
    if (rc == ERR_NOTFOUND)
        log_warn("node '%s' is no Node in the API server (404 for %s): is --node-name "
                 "right? (a typo, or a node not registered yet); syncing it anyway",
                 s->set.node_name, path);
    else if (rc)
        log_info("cannot check that node '%s' is a Node in the API server: %s", s->set.node_name,
                 msg);
    __atomic_store_n(&s->node_missing, rc == ERR_NOTFOUND ? 1 : rc ? -1 : 0, __ATOMIC_RELAXED);
}

/* The inventory key: written when podresd's devices and the NodeDevices
 * informer are current; when NodeDevices are not served, said once and
 * looked at again each second (no request: the informer lists). */
static void sync_inventory(struct syncer *s, json_t *fails, uint64_t dirty)
{
    char msg[512];
    uint64_t again;
    bool wrote;
    err_t rc;

    if (informer_missing(&s->inf_nd)) {
        inventory_skip(&s->inv, INVENTORY_SKIP_CRD_MISSING);
        queue_add(s->queue, INVENTORY_KEY, 1000);
        return;
    }
    if (!cache_synced(s->devs) || !informer_current(&s->inf_nd)) {
        queue_add(s->queue, INVENTORY_KEY, 200);
        return;
    }
    s->inv.revision = s->feed.revision;
    rc = inventory_sync(&s->inv, &wrote, &again, msg, sizeof(msg));
    if (rc == ERR_OK) {
        json_object_del(fails, INVENTORY_KEY);
        if (again)
            queue_add(s->queue, INVENTORY_KEY, again);
        if (wrote)
            lag_observe(&s->lag, (double)(queue_now_ms() - dirty) / 1000.0);
        return;
    }
    if (rc == ERR_FORBIDDEN || rc == ERR_UNPROCESSABLE || rc == ERR_INVAL)
        log_warn("cannot write NodeDevices %s: %s", s->set.node_name, msg);
    else
        log_debug("write of NodeDevices %s failed: %s; retrying", s->set.node_name, msg);
    queue_add(s->queue, INVENTORY_KEY, retry_delay(fails, INVENTORY_KEY, rc));
}

static void *worker_run(void *arg)
{
    struct syncer *s = arg;
    json_t *fails = json_object();
    char key[768], msg[512];
    uint64_t dirty, again;
    bool wrote;
    err_t rc;

    check_node(s);
    while (!rest_gate_stopped(s->gate)) {
        if (!queue_get(s->queue, key, sizeof(key), &dirty, 1000))
            continue;
        if (strcmp(key, INVENTORY_KEY) == 0) {
            sync_inventory(s, fails, dirty);
            continue;
        }
        if (!caches_synced(s)) {
            put_off(s, key);
            continue;
        }
        rc = reconcile_key(&s->rec, key, &wrote, &again, msg, sizeof(msg));
        if (rc == ERR_OK) {
            note_waiting(s, key, s->rec.waiting);
            json_object_del(fails, key);
            if (again)
                queue_add(s->queue, key, again);
            if (wrote)
                lag_observe(&s->lag, (double)(queue_now_ms() - dirty) / 1000.0);
            continue;
        }
        if (rest_gate_stopped(s->gate))
            break;
        if (rc == ERR_FORBIDDEN || rc == ERR_UNPROCESSABLE || rc == ERR_INVAL)
            log_warn("cannot sync DeviceBinding %s: %s", key, msg);
        else
            log_debug("sync of %s failed: %s; retrying", key, msg);
        queue_add(s->queue, key, retry_delay(fails, key, rc));
    }
    json_decref(fails);
    return NULL;
}

/* ---- /metrics and /healthz ---- */

/* The node-name checks: a Node missing, writes stopped (another syncer). */
static err_t render_guards(struct syncer *s, struct strbuf *sb)
{
    int missing = __atomic_load_n(&s->node_missing, __ATOMIC_RELAXED);
    char why[8];

    return strbuf_printf(
        sb,
        "# HELP podres_syncer_node_missing 1 when the API server has no Node named "
        "--node-name (a typo?), 0 when it has or before it was asked.\n"
        "# TYPE podres_syncer_node_missing gauge\npodres_syncer_node_missing %d\n"
        "# HELP podres_syncer_writes_stopped 1 while writes are stopped because another "
        "podres-syncer writes this podresd's reservations.\n"
        "# TYPE podres_syncer_writes_stopped gauge\npodres_syncer_writes_stopped %d\n",
        missing == 1, (int)fence_stopped(&s->rec.fence, queue_now_ms(), why, sizeof(why)));
}

static err_t render_metrics(struct syncer *s, struct strbuf *sb)
{
    uint64_t cum = 0;
    size_t i;
    err_t rc = rest_stats_render(s->stats, sb);

    if (!rc)
        rc = strbuf_printf(
            sb,
            "# HELP podres_syncer_queue_depth Keys waiting to be reconciled.\n"
            "# TYPE podres_syncer_queue_depth gauge\npodres_syncer_queue_depth %zu\n"
            "# HELP podres_syncer_last_resync_timestamp_seconds Time of the last full resync.\n"
            "# TYPE podres_syncer_last_resync_timestamp_seconds gauge\n"
            "podres_syncer_last_resync_timestamp_seconds %lld\n"
            "# HELP podres_syncer_podresd_revision Last podresd revision seen.\n"
            "# TYPE podres_syncer_podresd_revision gauge\npodres_syncer_podresd_revision %llu\n"
            "# HELP podres_syncer_devicebindings DeviceBindings of this node in the cache.\n"
            "# TYPE podres_syncer_devicebindings gauge\npodres_syncer_devicebindings %zu\n"
            "# HELP podres_syncer_skipped_total Bindings not mirrored each time one was looked "
            "at, by reason (foreign_label: the DeviceBinding is labelled for another node, or "
            "none; no_pod: no Pod of that name on this node; pod_uid_mismatch: the Pod is "
            "another instance than podresd's; crd_missing: DeviceBindings are not served).\n"
            "# TYPE podres_syncer_skipped_total counter\n",
            queue_len(s->queue), (long long)s->last_resync, (unsigned long long)s->feed.revision,
            cache_size(s->crs));
    for (i = 0; !rc && i < RECONCILE_SKIP_N; i++)
        rc = strbuf_printf(sb, "podres_syncer_skipped_total{reason=\"%s\"} %llu\n",
                           reconcile_skip_name((enum reconcile_skip)i),
                           (unsigned long long)reconcile_skipped(&s->rec, (enum reconcile_skip)i));
    if (!rc)
        rc = strbuf_printf(sb, "# HELP podres_syncer_sync_lag_seconds From a change seen on the "
                               "node to the API server's acknowledgement.\n"
                               "# TYPE podres_syncer_sync_lag_seconds histogram\n");
    pthread_mutex_lock(&s->lag.mu);
    for (i = 0; !rc && i < NLAG; i++) {
        cum += s->lag.buckets[i];
        rc = strbuf_printf(sb, "podres_syncer_sync_lag_seconds_bucket{le=\"%g\"} %llu\n",
                           lag_bounds[i], (unsigned long long)cum);
    }
    if (!rc)
        rc = strbuf_printf(sb,
                           "podres_syncer_sync_lag_seconds_bucket{le=\"+Inf\"} %llu\n"
                           "podres_syncer_sync_lag_seconds_sum %.6f\n"
                           "podres_syncer_sync_lag_seconds_count %llu\n",
                           (unsigned long long)s->lag.n, s->lag.sum, (unsigned long long)s->lag.n);
    pthread_mutex_unlock(&s->lag.mu);
    if (!rc)
        rc = inventory_render(&s->inv, sb);
    if (!rc)
        rc = events_render(&s->events, sb);
    return rc ? rc : render_guards(s, sb);
}

/* /readyz: 200 "ok", or 503 "not ready: REASON" into 'text'. */
static unsigned readyz(struct syncer *s, char *text, size_t cap)
{
    char why[256];

    if (ready(s, why, sizeof(why))) {
        snprintf(text, cap, "ok");
        return 200;
    }
    snprintf(text, cap, "not ready: %s", why);
    return 503;
}

static enum MHD_Result on_http(void *cls, struct MHD_Connection *conn, const char *url,
                               const char *method, const char *version, const char *data,
                               size_t *size, void **con_cls)
{
    struct syncer *s = cls;
    struct strbuf sb = STRBUF_INIT;
    struct MHD_Response *resp;
    char why[320];
    unsigned status = 200;
    const char *text = NULL;
    enum MHD_Result ret;
    size_t len;
    char *body;

    (void)version;
    (void)data;
    (void)size;
    if (!*con_cls) {
        *con_cls = s; /* answer on the second call (libmicrohttpd 0.9.75 keep-alive) */
        return MHD_YES;
    }
    if (strcmp(method, "GET") != 0 && strcmp(method, "HEAD") != 0) {
        status = 405;
        text = "method not allowed\n";
    } else if (strcmp(url, "/metrics") == 0) {
        status = render_metrics(s, &sb) ? 500 : 200;
    } else if (strcmp(url, "/healthz") == 0) {
        text = "ok";
    } else if (strcmp(url, "/readyz") == 0) {
        status = readyz(s, why, sizeof(why));
        text = why;
    } else {
        status = 404;
        text = "not found\n";
    }
    if (text && strbuf_add(&sb, text, strlen(text)))
        status = 500;
    body = strbuf_detach(&sb, &len);
    resp = body ? MHD_create_response_from_buffer(len, body, MHD_RESPMEM_MUST_FREE)
                : MHD_create_response_from_buffer(0, NULL, MHD_RESPMEM_PERSISTENT);
    if (!resp) {
        free(body);
        return MHD_NO;
    }
    MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE, "text/plain; version=0.0.4");
    ret = MHD_queue_response(conn, status, resp);
    MHD_destroy_response(resp);
    return ret;
}

static err_t start_http(struct syncer *s)
{
    char host[256];
    const char *colon;
    struct addrinfo hints = {.ai_socktype = SOCK_STREAM, .ai_flags = AI_NUMERICHOST};
    struct addrinfo *ai = NULL;
    size_t n;

    if (!s->set.metrics_listen || !*s->set.metrics_listen)
        return ERR_OK;
    colon = strrchr(s->set.metrics_listen, ':');
    n = colon ? (size_t)(colon - s->set.metrics_listen) : 0;
    if (!colon || n == 0 || n >= sizeof(host)) {
        log_err("cannot listen on '%s': give HOST:PORT", s->set.metrics_listen);
        return ERR_INVAL;
    }
    snprintf(host, sizeof(host), "%.*s", (int)n, s->set.metrics_listen);
    if (host[0] == '[' && host[n - 1] == ']') {
        memmove(host, host + 1, n - 2);
        host[n - 2] = '\0';
    }
    if (getaddrinfo(strcmp(host, "localhost") == 0 ? "127.0.0.1" : host, colon + 1, &hints, &ai)) {
        log_err("cannot listen on '%s': not a numeric address", s->set.metrics_listen);
        return ERR_INVAL;
    }
    s->http = MHD_start_daemon(MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_POLL |
                                   (ai->ai_family == AF_INET6 ? MHD_USE_IPv6 : 0),
                               0, NULL, NULL, on_http, s, MHD_OPTION_SOCK_ADDR, ai->ai_addr,
                               MHD_OPTION_CONNECTION_LIMIT, 64u, MHD_OPTION_CONNECTION_TIMEOUT, 10u,
                               MHD_OPTION_END);
    freeaddrinfo(ai);
    if (!s->http) {
        log_err("cannot listen on '%s': %s", s->set.metrics_listen, strerror(errno));
        return ERR_IO;
    }
    return ERR_OK;
}

/* ---- start-up ---- */

static int parse_flags(int argc, char **argv, struct syncer *s, int pass, const char **cfgfile)
{
    const struct opts_cli cli = {"podres-syncer", usage, long_opts, opt_table, NOPTS, &s->set};

    return opts_parse_args(&cli, argc, argv, pass, cfgfile, &s->once);
}

static int defaults(struct settings *set)
{
    char host[256] = "localhost";
    const char *node = getenv("NODE_NAME");
    char msg[128];
    int bad = 0;

    if (!node || !*node) {
        if (gethostname(host, sizeof(host) - 1) != 0)
            snprintf(host, sizeof(host), "localhost");
        node = host;
    }
    bad |= opts_set(opt_table, NOPTS, set, "node_name", node, msg, sizeof(msg));
    bad |= opts_set(opt_table, NOPTS, set, "podresd_socket", "/run/podresd/podresd.sock", msg,
                    sizeof(msg));
    bad |= opts_set(opt_table, NOPTS, set, "metrics_listen", "127.0.0.1:9445", msg, sizeof(msg));
    bad |= opts_set(opt_table, NOPTS, set, "log_format", "text", msg, sizeof(msg));
    bad |= opts_set(opt_table, NOPTS, set, "log_level", "info", msg, sizeof(msg));
    set->qps = 20;
    set->burst = 40;
    set->resync_ms = 300000;
    set->reservation_ttl_ms = 600000;
    set->inventory_ms = 1000;
    return bad;
}

static int load_settings(int argc, char **argv, struct syncer *s)
{
    const char *cfgfile = NULL;
    char msg[1200], why[512];
    json_t *doc = NULL;
    int r;

    if (defaults(&s->set))
        return 2;
    r = parse_flags(argc, argv, s, 1, &cfgfile);
    if (r == 0 && cfgfile) {
        if (cfg_yaml_load(cfgfile, &doc, why, sizeof(why)) ||
            opts_apply(opt_table, NOPTS, &s->set, doc, NULL, why, sizeof(why))) {
            snprintf(msg, sizeof(msg), "config file '%s': %s", cfgfile, why);
            fprintf(stderr, "podres-syncer: %s\n", msg);
            r = 2;
        }
        json_decref(doc);
    }
    if (r == 0)
        r = parse_flags(argc, argv, s, 2, &cfgfile);
    if (r == 0 && log_setup(s->set.log_format, s->set.log_level))
        r = 2;
    return r;
}

static void escape_query(char *out, size_t cap, const char *name, const char *sel)
{
    char esc[400];

    rest_escape(sel, esc, sizeof(esc));
    snprintf(out, cap, "%s=%s", name, esc);
}

/* podresd's TCP listener takes writes (reservations) with its write token
 * only: --podresd-token-file, for --podresd-url. */
static err_t pd_token(struct syncer *s)
{
    const char *url = s->set.podresd_url, *file = s->set.podresd_token_file;

    if (url && !file)
        log_warn("--podresd-url without --podresd-token-file: podresd refuses writes over TCP, "
                 "so pre-assignments cannot reserve their devices (use the unix socket, or "
                 "podresd's write token)");
    if (!url && file)
        log_warn("--podresd-token-file is for --podresd-url; the unix socket needs none");
    if (url && file && !(s->pd_kc.token_file = strdup(file)))
        return ERR_NOMEM;
    return ERR_OK;
}

/* Every change to a cache enqueues what it may affect. */
static err_t make_caches(struct syncer *s)
{
    s->pr = cache_new(enqueue_node, s);
    s->resv = cache_new(enqueue_node, s);
    s->pods = cache_new(enqueue, s->queue);
    s->crs = cache_new(enqueue, s->queue);
    s->devs = cache_new(enqueue_inventory, s);
    s->nd = cache_new(enqueue_inventory, s);
    return s->pr && s->resv && s->pods && s->crs && s->devs && s->nd ? ERR_OK : ERR_NOMEM;
}

static err_t make_clients(struct syncer *s)
{
    struct rest_opts api = {.kc = &s->kc, .gate = s->gate, .stats = s->stats};
    struct rest_opts pd = {.kc = &s->pd_kc,
                           .gate = s->pd_gate,
                           .max_attempts = 2,
                           .unix_socket = s->set.podresd_url ? NULL : s->set.podresd_socket};

    s->pd_kc.server = strdup(s->set.podresd_url ? s->set.podresd_url : "http://localhost");
    if (pd_token(s))
        return ERR_NOMEM;
    s->k_pods = rest_new(&api);
    s->k_crs = rest_new(&api);
    s->k_nd = rest_new(&api);
    s->k_work = rest_new(&api);
    s->k_pd = rest_new(&pd);
    s->k_pdw = rest_new(&pd);
    if (!s->pd_kc.server || !s->k_pods || !s->k_crs || !s->k_nd || !s->k_work || !s->k_pd ||
        !s->k_pdw)
        return ERR_NOMEM;
    return ERR_OK;
}

/* The informers, the feed, the reconciler and the inventory of node
 * --node-name, each with its thread's client. */
static void setup_workers(struct syncer *s)
{
    char sel[300];

    snprintf(sel, sizeof(sel), "spec.nodeName=%s", s->set.node_name);
    escape_query(s->pods_query, sizeof(s->pods_query), "fieldSelector", sel);
    snprintf(sel, sizeof(sel), DVB_LABEL "=%s", s->set.node_name);
    escape_query(s->crs_query, sizeof(s->crs_query), "labelSelector", sel);
    snprintf(sel, sizeof(sel), "metadata.name=%s", s->set.node_name);
    escape_query(s->nd_query, sizeof(s->nd_query), "fieldSelector", sel);
    s->inf_pods = (struct informer){.name = "pods",
                                    .path = "/api/v1/pods",
                                    .query = s->pods_query,
                                    .kube = s->k_pods,
                                    .gate = s->gate,
                                    .cache = s->pods,
                                    .slim = dvb_pod_view};
    s->inf_crs = (struct informer){.name = "devicebindings",
                                   .path = DVB_GROUP_PATH "/devicebindings",
                                   .query = s->crs_query,
                                   .kube = s->k_crs,
                                   .gate = s->gate,
                                   .cache = s->crs};
    s->inf_nd = (struct informer){.name = "nodedevices",
                                  .path = INVENTORY_PATH,
                                  .query = s->nd_query,
                                  .kube = s->k_nd,
                                  .gate = s->gate,
                                  .cache = s->nd};
    s->feed = (struct nodefeed){
        .podresd = s->k_pd, .gate = s->pd_gate, .pods = s->pr, .resv = s->resv, .devs = s->devs};
    s->inv = (struct inventory){.node = s->set.node_name,
                                .kube = s->k_work,
                                .devs = s->devs,
                                .nd = s->nd,
                                .interval_ms = s->set.inventory_ms};
    s->events = (struct events){.node = s->set.node_name, .kube = s->k_work};
    s->rec = (struct reconciler){.node = s->set.node_name,
                                 .events = &s->events,
                                 .kube = s->k_work,
                                 .pd = s->k_pdw,
                                 .ttl_ms = s->set.reservation_ttl_ms,
                                 .pr = s->pr,
                                 .resv = s->resv,
                                 .pods = s->pods,
                                 .crs = s->crs};
}

static err_t setup(struct syncer *s)
{
    char msg[512];
    err_t rc = kubeconfig_load(s->set.kubeconfig, &s->kc, msg, sizeof(msg));

    if (!rc)
        rc = kubeconfig_data_to_files(&s->kc, msg, sizeof(msg));
    if (rc) {
        log_err("no usable Kubernetes configuration: %s", msg);
        return rc;
    }
    s->gate = rest_gate_new(s->set.qps, (int)s->set.burst);
    s->pd_gate = rest_gate_new(0, 1);
    s->stats = rest_stats_new();
    s->queue = queue_new();
    s->waiting = json_object();
    s->node_missing = -1;
    if (!s->gate || !s->pd_gate || !s->stats || !s->queue || !s->waiting)
        return ERR_NOMEM;
    rest_gate_name(s->pd_gate, "podresd");
    if (make_caches(s) || make_clients(s))
        return ERR_NOMEM;
    setup_workers(s);
    log_info("syncing node '%s' with %s (from %s)", s->set.node_name, s->kc.server,
             s->kc.source ? s->kc.source : "?");
    return ERR_OK;
}

/* --once: read everything, reconcile every key once; true when all succeeded. */
static bool run_once(struct syncer *s)
{
    json_t *keys, *v;
    const char *key;
    char msg[512];
    uint64_t again;
    bool ok = true, wrote;

    /* No watch follows to catch up with a watch cache behind etcd. */
    s->inf_pods.consistent = true;
    s->inf_crs.consistent = true;
    s->inf_nd.consistent = true;
    if (informer_list(&s->inf_pods) || informer_list(&s->inf_crs) || nodefeed_list(&s->feed)) {
        log_err("cannot read the node's or the API server's state");
        return false;
    }
    if (informer_list(&s->inf_nd) == ERR_OK) {
        s->inv.revision = s->feed.revision;
        if (inventory_sync(&s->inv, &wrote, &again, msg, sizeof(msg))) {
            log_warn("cannot write NodeDevices %s: %s", s->set.node_name, msg);
            ok = false;
        }
    } else if (informer_missing(&s->inf_nd)) {
        inventory_skip(&s->inv, INVENTORY_SKIP_CRD_MISSING);
    } else {
        log_warn("cannot read NodeDevices %s", s->set.node_name);
        ok = false;
    }
    keys = all_keys(s);
    json_object_foreach(keys, key, v) {
        if (reconcile_key(&s->rec, key, &wrote, &again, msg, sizeof(msg))) {
            log_warn("cannot sync DeviceBinding %s: %s", key, msg);
            ok = false;
        }
    }
    json_decref(keys);
    return ok;
}

static void run(struct syncer *s, const sigset_t *sigs)
{
    struct timespec tick = {.tv_sec = 1};
    uint64_t next = queue_now_ms() + queue_jitter_ms(s->set.resync_ms, RESYNC_JITTER_PCT);
    int sig;

    pthread_create(&s->threads[s->nthreads++], NULL, nodefeed_run, &s->feed);
    pthread_create(&s->threads[s->nthreads++], NULL, informer_run, &s->inf_pods);
    pthread_create(&s->threads[s->nthreads++], NULL, informer_run, &s->inf_crs);
    pthread_create(&s->threads[s->nthreads++], NULL, informer_run, &s->inf_nd);
    pthread_create(&s->threads[s->nthreads++], NULL, worker_run, s);
    for (;;) {
        sig = sigtimedwait(sigs, NULL, &tick);
        if (sig == SIGTERM || sig == SIGINT) {
            log_info("received %s; shutting down", sig == SIGTERM ? "SIGTERM" : "SIGINT");
            return;
        }
        if ((queue_now_ms() >= next || !s->last_resync) && caches_synced(s)) {
            resync(s);
            next = queue_now_ms() + queue_jitter_ms(s->set.resync_ms, RESYNC_JITTER_PCT);
        }
    }
}

static void teardown(struct syncer *s)
{
    int i;

    if (s->gate)
        rest_gate_stop(s->gate);
    if (s->pd_gate)
        rest_gate_stop(s->pd_gate);
    if (s->queue)
        queue_close(s->queue);
    for (i = 0; i < s->nthreads; i++)
        pthread_join(s->threads[i], NULL);
    if (s->http)
        MHD_stop_daemon(s->http);
    rest_free(s->k_pods);
    rest_free(s->k_crs);
    rest_free(s->k_nd);
    rest_free(s->k_work);
    rest_free(s->k_pd);
    rest_free(s->k_pdw);
    nodefeed_release(&s->feed);
    reconcile_release(&s->rec);
    events_release(&s->events);
    cache_free(s->pr);
    cache_free(s->resv);
    cache_free(s->pods);
    cache_free(s->crs);
    cache_free(s->devs);
    cache_free(s->nd);
    queue_free(s->queue);
    rest_stats_free(s->stats);
    rest_gate_free(s->gate);
    rest_gate_free(s->pd_gate);
    kubeconfig_release(&s->kc);
    kubeconfig_release(&s->pd_kc);
    opts_release(opt_table, NOPTS, &s->set);
    json_decref(s->waiting);
    s->waiting = NULL;
    pthread_mutex_destroy(&s->wmu);
    pthread_mutex_destroy(&s->lag.mu);
}

int main(int argc, char **argv)
{
    static struct syncer s;
    sigset_t sigs;
    int r;

    mem_tune(); /* thread per connection: see common/mem.h */
    fault_init();
    pthread_mutex_init(&s.lag.mu, NULL);
    pthread_mutex_init(&s.wmu, NULL);
    r = load_settings(argc, argv, &s);
    if (r) {
        opts_release(opt_table, NOPTS, &s.set);
        pthread_mutex_destroy(&s.wmu);
        pthread_mutex_destroy(&s.lag.mu);
        return r == 1 ? 0 : 1;
    }
    sigemptyset(&sigs);
    sigaddset(&sigs, SIGTERM);
    sigaddset(&sigs, SIGINT);
    pthread_sigmask(SIG_BLOCK, &sigs, NULL);
    signal(SIGPIPE, SIG_IGN);
    if (rest_global_init()) {
        log_err("cannot initialise libcurl");
        opts_release(opt_table, NOPTS, &s.set);
        pthread_mutex_destroy(&s.wmu);
        pthread_mutex_destroy(&s.lag.mu);
        return 1;
    }
    srand((unsigned)time(NULL) ^ (unsigned)getpid());
    if (setup(&s) || (!s.once && start_http(&s))) {
        log_err("start-up failed; exiting");
        teardown(&s);
        rest_global_cleanup();
        return 1;
    }
    fault_arm();
    if (s.once) {
        r = run_once(&s) ? 0 : 1;
    } else {
        run(&s, &sigs);
        r = 0;
    }
    teardown(&s);
    rest_global_cleanup();
    log_info("stopped");
    return r;
}
