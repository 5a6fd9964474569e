/* SPDX-License-Identifier: Apache-2.0 */
/* syncer.h - the state of podres-syncer, one per process: its settings, the
 * clients, caches, informers and threads main.c sets up, which the worker
 * (worker.h) and the metrics endpoint (metrics.h) share. main.c fills every
 * field before the threads start and frees them after they end; while they
 * run, a field two threads reach says how (a lock, atomic access, or a
 * module that is thread-safe). */
#ifndef PODRES_SYNCER_H
#define PODRES_SYNCER_H
#include <jansson.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <time.h>

#include "../common/prom.h"
#include "../kube/cache.h"
#include "../kube/informer.h"
#include "../kube/kubeconfig.h"
#include "../kube/rest.h"
#include "dra.h"
#include "events.h"
#include "inventory.h"
#include "nodefeed.h"
#include "queue.h"
#include "reconcile.h"

struct MHD_Daemon;

/* The flags and config keys, as main.c's option table fills them. */
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

/* Lock: 'mu' guards 'h'. */
struct lag {
    pthread_mutex_t mu;
    struct prom_hist h; /* seconds; bounds in metrics.c */
};

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
    struct cache *rs;               /* the node's ResourceSlices (dra_slice_view) */
    struct rest *k_pods, *k_crs, *k_nd, *k_rs, *k_work, *k_pd, *k_pdw; /* one client per
                                                                        * thread */
    struct informer inf_pods, inf_crs, inf_nd, inf_rs;                 /* the informers */
    struct nodefeed feed;                                              /* the podresd feed */
    struct reconciler rec;                                             /* the worker's reconciler */
    struct inventory inv;        /* the worker's NodeDevices */
    struct events events;        /* the worker\'s Events */
    struct dra dra;              /* the worker's DRA pushes */
    struct lag lag;              /* sync-lag histogram */
    char pods_query[512];        /* fieldSelector=spec.nodeName=NODE */
    char crs_query[512];         /* labelSelector=podres.dev/node=NODE */
    char nd_query[512];          /* fieldSelector=metadata.name=NODE */
    char rs_query[512];          /* fieldSelector=spec.nodeName=NODE */
    volatile time_t last_resync; /* wall clock of the last full resync */
    struct MHD_Daemon *http;     /* /metrics and /healthz */
    pthread_mutex_t wmu;         /* guards 'waiting' */
    json_t *waiting;             /* keys of pre-assignments whose devices are taken */
    int node_missing;            /* atomic: 1 when no Node is named --node-name, 0 when one
                                  * is, -1 before the worker looked */
    pthread_t threads[6];        /* feed, pods, crs, nd, rs, worker */
    int nthreads;                /* started */
};

#endif
