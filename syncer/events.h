/* SPDX-License-Identifier: Apache-2.0 */
/* events.h - Kubernetes Events (events.k8s.io/v1) about DeviceBindings, for
 * the transitions a person must act on: reportingController
 * podres.dev/podres-syncer, reportingInstance the node. The same event
 * again (same object, type, reason and note) within EVENTS_SERIES_MS is not
 * a new Event: the first one's series.count grows (a merge patch), so a
 * flapping conflict is one series. A token bucket bounds what a node
 * writes (EVENTS_BURST, one more each EVENTS_REFILL_MS); an event over it
 * is dropped, counted, and said once. Not thread-safe: the worker thread
 * records; the counters are read with atomic loads. */
#ifndef PODRES_EVENTS_H
#define PODRES_EVENTS_H
#include <jansson.h>
#include <stdint.h>

#include "../common/err.h"
#include "../common/strbuf.h"
#include "../kube/rest.h"

#define EVENTS_SERIES_MS (6 * 60 * 1000) /* client-go's isomorphic-event window */
#define EVENTS_BURST 20
#define EVENTS_REFILL_MS 10000

struct events {
    const char *node;   /* reportingInstance; borrowed */
    struct rest *kube;  /* the worker's API client; borrowed */
    json_t *series;     /* key -> [name, namespace, count, last_ms]; owned */
    double tokens;      /* what the bucket holds */
    uint64_t filled_ms; /* monotonic ms the bucket was last filled; 0: never */
    int drop_said;      /* the drop was logged since the last event written */
    uint32_t named;     /* Events named, to tell apart names made in one millisecond */
    uint64_t created;   /* Events created; atomic */
    uint64_t repeated;  /* series counts written; atomic */
    uint64_t dropped;   /* over the bucket; atomic */
    uint64_t failed;    /* the API refused or failed; atomic */
};

/* Record an event of 'type' ("Normal" or "Warning") with 'reason' (one
 * CamelCase word), 'action' (what the syncer did: "Reserve", "Mirror") and
 * 'note' (a sentence) about 'regarding', a DeviceBinding as the API server
 * has it (its metadata namespace, name, uid are read; borrowed). 'now_ms'
 * is monotonic ms; e->kube and e->node are set. Failures are counted and
 * logged at debug: an event is never worth a retry. */
void events_record(struct events *e, const json_t *regarding, const char *type, const char *reason,
                   const char *action, const char *note, uint64_t now_ms);

/* Free what 'e' keeps (not the borrowed fields). */
void events_release(struct events *e);

/* Prometheus lines: podres_syncer_events_total{result}. Thread-safe. */
err_t events_render(struct events *e, struct strbuf *sb) WARN_UNUSED;

#endif
