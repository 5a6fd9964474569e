/* SPDX-License-Identifier: Apache-2.0 */
/* nodefeed.h - follows podresd's change feed (GET /v1/watch) into three
 * caches, PodResources and Reservations by "namespace/name" and Devices by
 * "resourceName/id" (their inventory view: a change of holder is no change
 * there): the initial ADDED events replace the caches at the
 * initialEventsEnd bookmark, later
 * events update them; a broken stream resumes with since=REVISION, a 410
 * starts over with a full list. Each stream that answers is a new epoch:
 * between two, podresd may have restarted. Runs on its own thread with its
 * own client. Before each stream it asks podresd's name (GET /version): a
 * podresd that names another node than 'node' is not followed, and nothing
 * is written while it is (nodefeed_mismatch). */
#ifndef PODRES_NODEFEED_H
#define PODRES_NODEFEED_H
#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>

#include "../common/err.h"
#include "../kube/cache.h"
#include "../kube/rest.h"

struct nodefeed {
    struct rest *podresd;      /* client of podresd; borrowed */
    struct rest_gate *gate;    /* podresd's gate, to notice shutdown; borrowed */
    struct cache *pods;        /* PodResources; borrowed */
    struct cache *resv;        /* Reservations; borrowed */
    struct cache *devs;        /* Devices as inventory_device makes them; borrowed */
    const char *node;          /* the syncer's --node-name; borrowed */
    cache_notify_fn connected; /* called (key NULL) when a stream answered, or NULL */
    void *ctx;                 /* its context; borrowed */
    uint64_t revision;         /* last revision seen; 0 = none */
    uint64_t epoch;            /* streams that answered so far; atomic: podresd may have
                                * restarted (and forgotten what it was told) since the
                                * epoch a writer read */
    bool live;                 /* this stream answered */
    json_t *pending_pods;      /* initial events before initialEventsEnd; owned */
    json_t *pending_resv;      /* likewise */
    json_t *pending_devs;      /* likewise */
    int mismatch;              /* atomic: 1 while podresd names another node */
    char podresd_node[256];    /* that name (under a lock of nodefeed.c) */
};

/* podresd's nodeName (GET /version) against nf->node: ERR_OK when they
 * agree or podresd names none, ERR_CONFLICT when they differ ('e' names
 * both; nodefeed_mismatch is true from then on, until they agree), else the
 * request's error. */
err_t nodefeed_check_node(struct nodefeed *nf, struct error *e) WARN_UNUSED;
/* Whether podresd names another node; 'why' (or NULL) gets the sentence,
 * as ERR_UNAVAIL. Thread-safe. */
bool nodefeed_mismatch(struct nodefeed *nf, struct error *why);

/* One full read (GET /v1/pods, /v1/reservations, /v1/devices) into the
 * caches, after nodefeed_check_node: ERR_CONFLICT, nothing read, when
 * podresd names another node. */
err_t nodefeed_list(struct nodefeed *nf) WARN_UNUSED;
/* The thread body. 'arg' is the nodefeed. */
void *nodefeed_run(void *arg);
/* Free what the feed holds (not the caches). */
void nodefeed_release(struct nodefeed *nf);

#endif
