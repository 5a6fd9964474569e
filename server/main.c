/* SPDX-License-Identifier: Apache-2.0 */
/* main.c - podresd: flags and config, start-up, the heartbeat timer and a
 * clean shutdown on SIGTERM/SIGINT. exit(1) only for start-up errors. */
#define LOG_MOD "main"
#include "../common/common.h"
#include "../common/clock.h"
#include "../common/proc.h"
#include "../common/mem.h"
#include "api.h"
#include "config.h"
#include "curlfn.h"
#include "feed.h"
#include "http.h"
#include "ident.h"
#include "metrics.h"
#include "source_kubelet.h"
#include "store.h"
#include "token.h"

#include <signal.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

/* The feed's ring: at most this many events and bytes of lines; a watcher
 * further behind reads the change log (SQLite) until it catches up. */
#define FEED_RING_MAX 1024
#define FEED_RING_BYTES (128 * 1024)

static err_t make_parent_dir(const char *path)
{
    char dir[4096];
    char *slash;

    snprintf(dir, sizeof(dir), "%s", path);
    slash = strrchr(dir, '/');
    if (!slash || slash == dir)
        return ERR_OK;
    *slash = '\0';
    if (mkdir(dir, 0750) == 0 || errno == EEXIST)
        return ERR_OK;
    log_err("cannot create directory '%s': %s", dir, strerror(errno));
    return ERR_IO;
}

/* The config's static device sets. One the store refuses (its names
 * clash with devices registered since: 409) is left as stored, and said;
 * the daemon starts. Only a failing database stops it. */
static err_t load_static_devices(struct store *st, const json_t *devices)
{
    json_t *e, *out = NULL;
    struct error err = {0};
    bool changed;
    size_t i;
    err_t rc = ERR_OK;

    json_array_foreach(devices, i, e) {
        const char *res = json_string_value(json_object_get(e, "resourceName"));

        rc = store_resource_put(st, res, json_object_get(e, "devices"), 0, &err, &out, &changed);
        json_decref(out);
        out = NULL;
        if (rc == ERR_CONFLICT) {
            log_err("static devices of '%s' not loaded (the stored set stays): %s", res,
                    error_msg(&err));
            continue;
        }
        if (rc) {
            log_err("cannot load static devices of '%s': %s", res,
                    err.msg[0] ? err.msg : err_str(rc));
            return rc;
        }
    }
    return ERR_OK;
}

struct daemon {
    struct config cfg;              /* settings */
    struct token *token;            /* write token or NULL */
    struct store *store;            /* the database */
    struct ident_rules *ident;      /* the identity rules of the config */
    struct feed *feed;              /* the change-feed hub */
    struct metrics *metrics;        /* request metrics */
    struct api api;                 /* handler context */
    struct http *http;              /* listeners */
    struct source_kubelet *kubelet; /* the kubelet poll thread, in kubelet mode */
    bool kubelet_mode;              /* source is kubelet */
    bool prune_failing;             /* the last history pruning step failed (logged once) */
};

/* Start the kubelet poll thread on the store (before the listeners, so the
 * readiness hook always has its source). */
static err_t start_kubelet(struct daemon *d)
{
    struct source_kubelet_opts ko = {.socket_path = d->cfg.kubelet_socket,
                                     .interval_ms = d->cfg.kubelet_interval_ms,
                                     .store = d->store};
    struct error e = {0};

    if (json_array_size(d->cfg.devices))
        log_warn("static devices of the config file are ignored with source kubelet");
    if (curlfn_load(&e)) {
        log_err("the kubelet source needs libcurl: %s", e.msg);
        return ERR_UNAVAIL;
    }
    return source_kubelet_start(&ko, &d->kubelet);
}

/* The handlers' context, once the store, feed and source are up. */
static err_t start_api(struct daemon *d)
{
    d->api = (struct api){.store = d->store,
                          .feed = d->feed,
                          .metrics = d->metrics,
                          .token = d->token,
                          .node_name = d->cfg.node_name,
                          .kubelet_mode = d->kubelet_mode,
                          .source_ready = d->kubelet ? source_kubelet_ready : NULL,
                          .source_metrics = d->kubelet ? source_kubelet_metrics : NULL,
                          .source_ctx = d->kubelet};
    return api_watch_init(&d->api, (size_t)d->cfg.watch_memory << 20);
}

/* The write token, the database, the change feed and the metrics. */
static err_t open_store(struct daemon *d)
{
    struct store_opts so = {.path = d->cfg.db, .history = d->cfg.history};
    struct error e = {0};
    size_t i;
    err_t rc;

    if (d->cfg.write_token_file) {
        rc = token_open(d->cfg.write_token_file, &d->token);
        if (rc)
            return rc;
    }
    rc = make_parent_dir(d->cfg.db);
    if (rc)
        return rc;
    rc = store_open(&so, &d->store);
    if (rc)
        return rc;
    d->feed = feed_new(d->cfg.history < FEED_RING_MAX ? d->cfg.history : FEED_RING_MAX,
                       store_revision(d->store));
    d->metrics = metrics_new(api_nroutes);
    if (!d->feed || !d->metrics)
        return ERR_NOMEM;
    feed_limit_bytes(d->feed, FEED_RING_BYTES);
    for (i = 0; i < api_nroutes; i++)
        metrics_set_label(d->metrics, i, api_routes[i].method, api_routes[i].label);
    store_set_feed(d->store, d->feed);
    rc = ident_rules_new(d->cfg.identity, &d->ident, &e);
    if (rc) { /* config_apply compiled them already: out of memory */
        log_err("identity rules: %s", error_msg(&e));
        return rc;
    }
    store_set_ident(d->store, d->ident);
    return ERR_OK;
}

/* Start the parts in order; on a failure the caller's stop() releases what started. */
static err_t start(struct daemon *d)
{
    struct http_opts ho = {.socket_path = d->cfg.socket,
                           .listen = d->cfg.listen,
                           .metrics_listen = d->cfg.metrics_listen,
                           .conn_limit = 1024,
                           .timeout_s = 30};
    err_t rc;

    d->kubelet_mode = strcmp(d->cfg.source, "kubelet") == 0;
    rc = open_store(d);
    if (rc)
        return rc;
    rc = d->kubelet_mode ? start_kubelet(d) : load_static_devices(d->store, d->cfg.devices);
    if (rc)
        return rc;
    rc = start_api(d);
    if (rc)
        return rc;
    rc = http_start(&d->api, &ho, &d->http);
    if (rc)
        return rc;
    log_info("serving node '%s' on '%s'%s%s (revision %llu)", d->cfg.node_name, d->cfg.socket,
             d->cfg.listen ? " and " : "", d->cfg.listen ? d->cfg.listen : "",
             (unsigned long long)store_revision(d->store));
    return ERR_OK;
}

static void stop(struct daemon *d)
{
    struct timespec pause = {.tv_nsec = 10 * 1000 * 1000};
    int i;

    d->api.stopping = 1;
    http_quiesce(d->http);
    if (d->feed) {
        /* Streams end with their final chunk before the connections close. */
        feed_close(d->feed);
        for (i = 0; i < 300 && feed_watchers(d->feed) > 0; i++)
            nanosleep(&pause, NULL);
    }
    http_stop(d->http);
    api_watch_release(&d->api);
    /* The poll thread writes to the store: joined before the store closes. */
    source_kubelet_free(d->kubelet);
    if (d->kubelet_mode)
        curlfn_cleanup();
    store_free(d->store);
    ident_rules_free(d->ident);
    feed_free(d->feed);
    metrics_free(d->metrics);
    token_free(d->token);
    config_release(&d->cfg);
}

#define PRUNE_BUDGET_MS 100 /* pruning steps a tick runs at most, in time */

/* Fold and prune history in small steps (each its own short write) until
 * there is nothing more to do or the tick's budget is spent. A failure is
 * logged once until a step works again (each is counted by the store):
 * until then reads take more unfolded rows, and old ones stay. */
static void prune_history(struct daemon *d)
{
    uint64_t t0 = clock_mono_ms();
    bool more = true;
    err_t rc = ERR_OK;

    while (!rc && more && clock_mono_ms() - t0 < PRUNE_BUDGET_MS)
        rc = store_history_prune(d->store, (int64_t)clock_wall_ms(), d->cfg.history_retention_ms,
                                 d->cfg.history_max_intervals, &more);
    if (rc && !d->prune_failing)
        log_warn("history pruning failed (%s); retrying every second", err_str(rc));
    else if (!rc && d->prune_failing)
        log_info("history pruning works again");
    d->prune_failing = rc != ERR_OK;
}

/* Wait for SIGTERM/SIGINT, running the heartbeat check and history pruning
 * every second and, every 10 s, closing idle read connections and handing free heap memory
 * back (what a burst of connections leaves behind). */
static void run(struct daemon *d, const sigset_t *sigs)
{
    int lapsed;
    unsigned n = 0;

    for (;;) {
        if (proc_wait(sigs, 1000))
            return;
        prune_history(d);
        if (++n % 10 == 0) {
            store_release_idle(d->store);
            mem_trim();
        }
        if (d->kubelet_mode)
            continue; /* no heartbeats: the kubelet owns device health */
        if (store_expire_ttls(d->store, clock_wall_ms(), &lapsed))
            log_debug("heartbeat check failed; retrying in a second");
    }
}

int main(int argc, char **argv)
{
    struct daemon d;
    enum opts_next next;
    sigset_t sigs;

    memset(&d, 0, sizeof(d));
    mem_tune(); /* thread per connection: see common/mem.h */
    fault_init();
    umask(027);
    next = config_load_args(&d.cfg, argc, argv);
    if (next != OPTS_RUN) {
        config_release(&d.cfg);
        return next == OPTS_EXIT_OK ? 0 : 1;
    }
    proc_signals(&sigs);
    if (start(&d)) {
        log_err("start-up failed; exiting");
        stop(&d);
        return 1;
    }
    fault_arm();
    /* What start-up freed (a new database's migrations parse the schema
     * again after each DDL) goes back now, not at the first 10 s
     * housekeeping. */
    mem_trim();
    run(&d, &sigs);
    stop(&d);
    log_info("stopped");
    return 0;
}
