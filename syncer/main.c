/* SPDX-License-Identifier: Apache-2.0 */
/* main.c - podres-syncer: settings, setting up the clients, caches and
 * threads (podresd feed, four informers, one worker: worker.h) and the
 * metrics endpoint (metrics.h), the periodic resync, --once, and a clean
 * exit on SIGTERM. exit(1) only for start-up errors. */
#define LOG_MOD "main"
#include "../common/common.h"
#include "../common/clock.h"
#include "../common/proc.h"
#include "../common/mem.h"
#include "../common/names.h"
#include "../common/opts.h"
#include "dvb.h"
#include "metrics.h"
#include "syncer.h"
#include "worker.h"

#include <microhttpd.h>
#include <pthread.h>
#include <signal.h>
#include <time.h>
#include <unistd.h>

#define OFF(f) offsetof(struct settings, f)

/* A token file must be readable at start; a check names the key. */
static const char *readable(const char *path)
{
    return access(path, R_OK) == 0 ? NULL : strerror(errno);
}

static const struct opt opt_table[] = {
    {"node_name", OPT_STR, OFF(node_name), .check = names_node_name_check, .env = "NODE_NAME",
     .def_host = true},
    {"podresd_socket", OPT_STR, OFF(podresd_socket), .def = "/run/podresd/podresd.sock"},
    {"podresd_url", OPT_STR, OFF(podresd_url), .def = NULL},
    {"podresd_token_file", OPT_STR, OFF(podresd_token_file), .check = readable},
    {"kubeconfig", OPT_STR, OFF(kubeconfig), .def = NULL},
    {"qps", OPT_NUMBER, OFF(qps), .def = "20"},
    {"burst", OPT_COUNT, OFF(burst), .def = "40"},
    {"resync_interval", OPT_DURATION, OFF(resync_ms), .def = "5m"},
    {"metrics_listen", OPT_STR, OFF(metrics_listen), .def = "127.0.0.1:9445"},
    {"reservation_ttl", OPT_DURATION, OFF(reservation_ttl_ms), .def = "10m"},
    {"inventory_interval", OPT_DURATION, OFF(inventory_ms), .def = "1s"},
    OPTS_LOG(struct settings),
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

/* Resyncs come every --resync-interval give or take this many percent, so
 * that syncers started together (a DaemonSet rollout) do not resync in step.
 * A resync reads the caches, not the API server; the spread is for what a
 * drift it finds writes. */
#define RESYNC_JITTER_PCT 10

/* ---- start-up ---- */

static enum opts_next load_settings(int argc, char **argv, struct syncer *s)
{
    const struct opts_spec spec = {"podres-syncer", usage, opt_table, NOPTS, &s->once, NULL};

    return opts_load(&spec, &s->set, argc, argv);
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
    s->pr = cache_new(worker_on_podresd_key, s);
    s->resv = cache_new(worker_on_podresd_key, s);
    s->pods = cache_new(worker_on_key, s->queue);
    s->crs = cache_new(worker_on_key, s->queue);
    s->devs = cache_new(worker_on_inventory, s);
    s->nd = cache_new(worker_on_inventory, s);
    s->rs = cache_new(worker_on_dra, s);
    return s->pr && s->resv && s->pods && s->crs && s->devs && s->nd && s->rs ? ERR_OK : ERR_NOMEM;
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
    s->k_rs = rest_new(&api);
    s->k_work = rest_new(&api);
    s->k_pd = rest_new(&pd);
    s->k_pdw = rest_new(&pd);
    if (!s->pd_kc.server || !s->k_pods || !s->k_crs || !s->k_nd || !s->k_rs || !s->k_work ||
        !s->k_pd || !s->k_pdw)
        return ERR_NOMEM;
    return ERR_OK;
}

/* The node's ResourceSlices (resource.k8s.io/v1, which an API server older
 * than Kubernetes 1.34 does not serve: looked for once a minute then) and
 * the pushes of their devices to podresd. */
static void setup_dra(struct syncer *s)
{
    char sel[300];

    snprintf(sel, sizeof(sel), "spec.nodeName=%s", s->set.node_name);
    escape_query(s->rs_query, sizeof(s->rs_query), "fieldSelector", sel);
    s->inf_rs = (struct informer){.name = "resourceslices",
                                  .path = DRA_PATH,
                                  .query = s->rs_query,
                                  .kube = s->k_rs,
                                  .gate = s->gate,
                                  .cache = s->rs,
                                  .slim = dra_slice_view,
                                  .missing_ms = 60000,
                                  .missing_hint = "is resource.k8s.io/v1 served? Kubernetes "
                                                  "1.34 or later"};
    s->dra = (struct dra){.pd = s->k_pdw, .slices = s->rs, .devs = s->devs};
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
    setup_dra(s);
    s->feed = (struct nodefeed){.podresd = s->k_pd,
                                .gate = s->pd_gate,
                                .pods = s->pr,
                                .resv = s->resv,
                                .devs = s->devs,
                                .node = s->set.node_name,
                                .connected = worker_on_dra,
                                .ctx = s};
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
    err_t rc = kubeconfig_load_daemon(s->set.kubeconfig, &s->kc);

    if (rc)
        return rc;
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

/* --once: the node's NodeDevices; true when written or not served. */
static bool once_inventory(struct syncer *s)
{
    struct error e = {0};
    uint64_t again;
    bool wrote;

    if (informer_list(&s->inf_nd) == ERR_OK) {
        s->inv.revision = s->feed.revision;
        if (!inventory_sync(&s->inv, &wrote, &again, &e))
            return true;
        log_warn("cannot write NodeDevices %s: %s", s->set.node_name, error_msg(&e));
        return false;
    }
    if (informer_missing(&s->inf_nd)) {
        inventory_skip(&s->inv, INVENTORY_SKIP_CRD_MISSING);
        return true;
    }
    log_warn("cannot read NodeDevices %s", s->set.node_name);
    return false;
}

/* --once: the devices of the node's ResourceSlices to podresd; true when
 * handed over or not served. */
static bool once_dra(struct syncer *s)
{
    struct error e = {0};
    bool pushed;

    if (informer_list(&s->inf_rs) == ERR_OK) {
        if (!dra_sync(&s->dra, 1, &pushed, &e))
            return true;
        log_warn("cannot hand the node's DRA devices to podresd: %s", error_msg(&e));
        return false;
    }
    if (informer_missing(&s->inf_rs)) {
        dra_skip(&s->dra);
        return true;
    }
    log_warn("cannot read the node's ResourceSlices");
    return false;
}

/* --once: read everything, reconcile every key once; true when all succeeded. */
static bool run_once(struct syncer *s)
{
    struct error e = {0};
    struct strmap *keys;
    struct strmap_iter it;
    const char *key;
    uint64_t again;
    bool ok, wrote;

    /* No watch follows to catch up with a watch cache behind etcd. */
    s->inf_pods.consistent = true;
    s->inf_crs.consistent = true;
    s->inf_nd.consistent = true;
    s->inf_rs.consistent = true;
    if (informer_list(&s->inf_pods) || informer_list(&s->inf_crs) || nodefeed_list(&s->feed)) {
        log_err("cannot read the node's or the API server's state");
        return false;
    }
    ok = once_inventory(s);
    ok = once_dra(s) && ok;
    keys = worker_all_keys(s);
    if (!keys) {
        log_err("out of memory listing the keys to sync");
        return false;
    }
    strmap_iter_init(&it, keys);
    while (strmap_iter_next(&it, &key, NULL)) {
        if (reconcile_key(&s->rec, key, &wrote, &again, &e)) {
            log_warn("cannot sync DeviceBinding %s: %s", key, error_msg(&e));
            ok = false;
        }
    }
    strmap_free(keys, NULL);
    if (fence_stopped(&s->rec.fence, &e)) {
        log_err("%s", error_msg(&e));
        ok = false;
    }
    return ok;
}

/* A podresd that serves another node is a mistake in --node-name (or in
 * podresd's): refused at start, as a bad flag is. One that cannot be asked
 * yet is asked again before each stream (nodefeed.h). */
static bool same_node(struct syncer *s)
{
    struct error e = {0};

    if (nodefeed_check_node(&s->feed, &e) != ERR_CONFLICT)
        return true;
    log_err("%s", error_msg(&e));
    return false;
}

static void run(struct syncer *s, const sigset_t *sigs)
{
    uint64_t next = clock_mono_ms() + queue_jitter_ms(s->set.resync_ms, RESYNC_JITTER_PCT);

    pthread_create(&s->threads[s->nthreads++], NULL, nodefeed_run, &s->feed);
    pthread_create(&s->threads[s->nthreads++], NULL, informer_run, &s->inf_pods);
    pthread_create(&s->threads[s->nthreads++], NULL, informer_run, &s->inf_crs);
    pthread_create(&s->threads[s->nthreads++], NULL, informer_run, &s->inf_nd);
    pthread_create(&s->threads[s->nthreads++], NULL, informer_run, &s->inf_rs);
    pthread_create(&s->threads[s->nthreads++], NULL, worker_run, s);
    for (;;) {
        if (proc_wait(sigs, 1000))
            return;
        if ((clock_mono_ms() >= next || !s->last_resync) && worker_caches_synced(s)) {
            worker_resync(s);
            next = clock_mono_ms() + queue_jitter_ms(s->set.resync_ms, RESYNC_JITTER_PCT);
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
    rest_free(s->k_rs);
    rest_free(s->k_work);
    rest_free(s->k_pd);
    rest_free(s->k_pdw);
    nodefeed_release(&s->feed);
    reconcile_release(&s->rec);
    events_release(&s->events);
    dra_release(&s->dra);
    cache_free(s->pr);
    cache_free(s->resv);
    cache_free(s->pods);
    cache_free(s->crs);
    cache_free(s->devs);
    cache_free(s->nd);
    cache_free(s->rs);
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
    enum opts_next next;
    sigset_t sigs;
    int r;

    mem_tune(); /* thread per connection: see common/mem.h */
    fault_init();
    metrics_lag_init(&s.lag);
    pthread_mutex_init(&s.wmu, NULL);
    next = load_settings(argc, argv, &s);
    if (next != OPTS_RUN) {
        opts_release(opt_table, NOPTS, &s.set);
        pthread_mutex_destroy(&s.wmu);
        pthread_mutex_destroy(&s.lag.mu);
        return next == OPTS_EXIT_OK ? 0 : 1;
    }
    proc_signals(&sigs);
    if (rest_global_init()) {
        log_err("cannot initialise libcurl");
        opts_release(opt_table, NOPTS, &s.set);
        pthread_mutex_destroy(&s.wmu);
        pthread_mutex_destroy(&s.lag.mu);
        return 1;
    }
    srand((unsigned)time(NULL) ^ (unsigned)getpid());
    if (setup(&s) || (!s.once && (!same_node(&s) || metrics_start(&s)))) {
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
