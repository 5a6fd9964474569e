/* SPDX-License-Identifier: Apache-2.0 */
/* store.h - podresd's state in SQLite: devices, pod bindings, reservations,
 * the node-wide revision and the change log. The store (store*.c, with
 * db.c, changelog.c, commit.c and checkpoint.c beneath it) is the only part
 * of podresd that speaks SQL. One write connection, with group commit
 * (commit.h): concurrent writes share a BEGIN IMMEDIATE transaction that
 * holds their state changes and change-log rows, so the new revision; a
 * write returns only after the COMMIT of its batch, which then hands its
 * events to the feed hub. Reads use pooled connections and short read
 * transactions (db.h). Thread-safe.
 *
 * Writes take already-validated input (see validate.h). On failure they
 * change nothing and, where they can say why, fill 'e' (errorf(); the
 * Status message): ERR_NOTFOUND, ERR_CONFLICT (held, reserved, not enough
 * devices), ERR_UNPROCESSABLE (unknown device); ERR_NOSPACE (disk full),
 * ERR_UNAVAIL (database busy) and ERR_DB leave it as it was. 'e' may be
 * NULL. Results are new JSON objects: json_decref() them. */
#ifndef PODRES_STORE_H
#define PODRES_STORE_H
#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "../common/err.h"
#include "feed.h"
#include "histq.h"

struct store;

struct store_opts {
    const char *path;  /* database file; its directory must exist */
    uint64_t history;  /* change-log rows kept (>= 1) */
    struct feed *feed; /* borrowed; receives events after COMMIT; may be NULL */
};

/* Open (creating if needed) and migrate. On ERR_OK *out is new: store_free() it.
 * The process holds the file till its last store is freed: another process
 * cannot open it, and a store_open while another process holds it fails at
 * once with ERR_UNAVAIL (logged). One store per file: a second store of the
 * same process is not refused (the lock is the process's) and must not be. */
err_t store_open(const struct store_opts *opts, struct store **out) WARN_UNUSED;
void store_free(struct store *st); /* NULL is a no-op */
/* Attach the feed after opening (the feed needs the revision to start). */
void store_set_feed(struct store *st, struct feed *feed);
/* Use these identity rules (borrowed; they outlive the store) for devices
 * written from now on; before serving. NULL: none. */
struct ident_rules;
void store_set_ident(struct store *st, const struct ident_rules *rules);
/* Aliases the kubelet mirror left out since open because they named
 * another device (a counter). */
uint64_t store_alias_conflicts(struct store *st);
/* History steps that failed since open (podresd_history_step_failures_total):
 * pruning steps, replays a read asked for, operations that could not be read. */
uint64_t store_history_failures(struct store *st);
/* The last committed revision. */
uint64_t store_revision(struct store *st);
/* Schema version the binary knows (the number of migrations). */
int store_schema_version(void);

/* ---- reads: *out = {"<list>":[...],"revision":N} ---- */
err_t store_pods_list(struct store *st, const char *ns, const char *resource,
                      json_t **out) WARN_UNUSED;
/* {"podResources":{...},"revision":N}; ERR_NOTFOUND. */
err_t store_pod_get(struct store *st, const char *ns, const char *name, json_t **out) WARN_UNUSED;
/* health: NULL, "Healthy" or "Unhealthy"; free_only: neither held nor reserved. */
err_t store_devices_list(struct store *st, const char *resource, const char *health, bool free_only,
                         json_t **out) WARN_UNUSED;
err_t store_allocatable(struct store *st, json_t **out) WARN_UNUSED;
err_t store_reservations_list(struct store *st, json_t **out) WARN_UNUSED;
/* {"reservation":{...},"revision":N}; ERR_NOTFOUND. */
err_t store_reservation_get(struct store *st, const char *ns, const char *name,
                            json_t **out) WARN_UNUSED;
/* Close idle read connections beyond the few kept warm (each holds its
 * schema, statements and lookaside memory, ~250 KiB); for an idle moment after
 * a burst of readers. Their fds go back to SQLite, which reuses them. */
void store_release_idle(struct store *st);
/* The devices of one resource in one health (store_stats). */
struct store_dev_count {
    char *resource;  /* the resource; the stats' own */
    char health[16]; /* Healthy or Unhealthy */
    int64_t count;   /* how many */
};

/* What /metrics shows of the store. */
struct store_stats {
    int64_t pods;                    /* pods with a recorded binding */
    int64_t bound_devices;           /* devices bound to a container */
    struct store_dev_count *devices; /* by resource, then health; 'ndevices' of them */
    size_t ndevices;                 /* entries in 'devices' */
    uint64_t commits;                /* COMMITs of write batches since open */
    uint64_t writes;                 /* the writes they held (writes/commits: the mean batch) */
    uint64_t checkpoints;            /* WAL checkpoints since open, in a COMMIT or on the
                                        store's checkpoint thread */
};

/* Fill *out; release it with store_stats_release(), also on failure. */
err_t store_stats(struct store *st, struct store_stats *out) WARN_UNUSED;
void store_stats_release(struct store_stats *s); /* an unused struct is fine */

/* ---- the change feed ---- */
/* ADDED lines for every current object matching 'flt' appended to *buf
 * (growable, *len bytes used, *cap allocated), in one read transaction, in
 * the order of the objects' revisions; *rev is the revision of that
 * snapshot. */
err_t store_snapshot(struct store *st, const struct feed_filter *flt, char **buf, size_t *len,
                     size_t *cap, uint64_t *rev) WARN_UNUSED;
/* Change-log lines after *cursor matching 'flt', at most 'limit' rows looked
 * at, appended as above; *cursor advances over every row looked at.
 * ERR_GONE when the change after *cursor is no longer kept (or *cursor is
 * ahead of the store). */
err_t store_changes_after(struct store *st, uint64_t *cursor, const struct feed_filter *flt,
                          size_t limit, char **buf, size_t *len, size_t *cap) WARN_UNUSED;

/* ---- writes ---- */
/* The pod a write names: its namespace and name, and the uid a bind or an
 * allocate gives it, or a release requires (NULL: any). Borrowed. */
struct store_pod {
    const char *ns;   /* namespace */
    const char *name; /* name */
    const char *uid;  /* uid */
};

/* What a write did, once it succeeded. */
struct store_outcome {
    bool created; /* a new object (for a pod, also a new uid) */
    bool changed; /* false when the same state was there already */
};

/* Replace the device set of 'resource'. 'devices' is the array
 * validate_devices_put() builds: {"id","health","numa":[ids],"properties","aliases",
 * "physical"}; ttl_ms 0 = no heartbeat. *out = {"devices":[...],"revision":N}; *changed
 * false when nothing did. A device without "physical" gets the one the identity rules
 * derive, and their aliases beside its own. ERR_CONFLICT with 'e' naming both devices
 * when an alias is another device's alias or id, or an id another's alias. */
err_t store_resource_put(struct store *st, const char *resource, const json_t *devices,
                         uint64_t ttl_ms, struct error *e, json_t **out, bool *changed) WARN_UNUSED;
/* Replace the devices a DRA driver published for this node (its
 * ResourceSlices): 'devices' as validate_driver_put() builds them. Like
 * store_resource_put() without a heartbeat; a device no longer published
 * that is still bound is kept (removed) while bound, its health unchanged.
 * ERR_CONFLICT with 'e' naming both devices when a name is another's. */
err_t store_driver_put(struct store *st, const char *driver, const json_t *devices, struct error *e,
                       json_t **out, bool *changed) WARN_UNUSED;
/* Set one device's health. *out = {"device":{...},"revision":N}. */
err_t store_device_set_health(struct store *st, const char *resource, const char *id,
                              const char *health, struct error *e, json_t **out) WARN_UNUSED;
/* Record a pod binding; 'containers' is the validated array of
 * {"name","devices":[{"resourceName","deviceIds"}],"cpuIds","memory"} and
 * pod->uid is required. *out = {"podResources":{...},"revision":N} as
 * compact JSON text (new: free() it; *len bytes), written without a
 * json_t: this is the hot write. did->created for a new pod (or a new
 * uid); did->changed false when the same binding was already there. */
err_t store_pod_bind(struct store *st, const struct store_pod *pod, const json_t *containers,
                     struct error *e, char **out, size_t *len,
                     struct store_outcome *did) WARN_UNUSED;
/* Choose devices and bind; 'request' is the validated array of
 * {"name","requests":{resource:count}} and pod->uid is required. Same uid
 * and request again: the same answer, did->changed false. */
err_t store_pod_allocate(struct store *st, const struct store_pod *pod, const json_t *request,
                         struct error *e, json_t **out, struct store_outcome *did) WARN_UNUSED;
/* Release a pod's devices. Preconditions: pod->uid (NULL = any) and rev,
 * the pod's revision (0 = any). ERR_NOTFOUND; ERR_CONFLICT when one fails.
 * *out = {"podResources":{last state},"revision":N}. */
err_t store_pod_release(struct store *st, const struct store_pod *pod, uint64_t rev,
                        struct error *e, json_t **out) WARN_UNUSED;
/* Pre-assign devices to pod ns/name; 'containers' as for bind (devices
 * only). *out = {"reservation":{...},"revision":N}. */
err_t store_reservation_put(struct store *st, const char *ns, const char *name,
                            const json_t *containers, struct error *e, json_t **out,
                            struct store_outcome *did) WARN_UNUSED;
/* Delete a reservation; precondition rev, its revision (0 = any): else
 * ERR_CONFLICT. ERR_NOTFOUND. *out = {"reservation":{last state},"revision":N}. */
err_t store_reservation_delete(struct store *st, const char *ns, const char *name, uint64_t rev,
                               struct error *e, json_t **out) WARN_UNUSED;
/* Mark devices of resources whose heartbeat lapsed before 'now_ms' (wall
 * clock) Unhealthy. *expired counts the resources that lapsed. */
err_t store_expire_ttls(struct store *st, uint64_t now_ms, int *expired) WARN_UNUSED;

/* Mirror the kubelet (source kubelet, store_sync.c): make pods, bindings and
 * devices equal to 'snap' in one write transaction that emits an event only
 * for what changed, and commits nothing (the revision does not move) when
 * nothing did. 'snap' (borrowed) is
 *   {"pods":[{"namespace","name","containers":[ContainerResources]}],
 *    "devices":[{"resourceName","id","topology":{"nodes":[{"ID":n}]}}],
 *    "cpuIds":[n],"memory":[ContainerMemory]}
 * with "devices" the allocatable ones (they become Healthy); a bound device
 * that is not allocatable stays listed as Unhealthy; every other device is
 * deleted. Pods get an empty uid; device groups and ids are stored sorted.
 * A device listed for two containers is bound to the first only; a pod
 * listed twice is one pod with the containers of both. Entries
 * with missing or empty names are ERR_INVAL (nothing changes).
 * The last "cpuIds" and "memory" (optional) are what /v1/allocatable
 * gives besides the devices (kept in memory, not in the database).
 * *changed tells whether a transaction was committed. */
err_t store_kubelet_sync(struct store *st, const json_t *snap, bool *changed) WARN_UNUSED;

/* ---- history (store_hist.c) ----
 * Every write records, in its own transaction, the intervals it opens or
 * closes: a container holding a device (from the write that binds it to
 * the one that lets it go, rebinds it or drops it) and a device being
 * Unhealthy. An interval's times are its write's wall clock in
 * milliseconds, never less than the previous write's. */
/* The intervals 'q' selects: {"intervals":[...]} oldest first (at=: one a
 * device held at q->at_ms, by resource and id), with "continue" (the token
 * of ?continue=) when more than q->limit match. */
err_t store_history(struct store *st, const struct histq *q, json_t **out) WARN_UNUSED;
/* The same answer as compact JSON text: on ERR_OK *text is new (free() it),
 * *len bytes long and NUL-terminated. */
err_t store_history_text(struct store *st, const struct histq *q, char **text,
                         size_t *len) WARN_UNUSED;
/* Device-seconds over [q->from_ms, q->to_ms) per group of q->by and
 * resource, intervals still open counted up to now_ms:
 * {"usage":[{group fields,"resourceName","deviceSeconds"}]}. */
err_t store_usage(struct store *st, const struct histq *q, int64_t now_ms,
                  json_t **out) WARN_UNUSED;
/* The devices 'name' covers (store_ident.c): {"device":Device|null,"devices":[Device...],
 * "revision":N}. "device" is the one it names directly (id or alias, of
 * 'resource' if given), "devices" that one and every slice or replica whose
 * physical is the name, that device's id or alias, or (recursively) the id
 * of one found so, by resource and id. ERR_NOTFOUND when it covers none;
 * ERR_CONFLICT when it names several devices directly ('e' names them). */
err_t store_device_find(struct store *st, const char *name, const char *resource, struct error *e,
                        json_t **out) WARN_UNUSED;
/* One pruning step, a write of its own that holds the writer a few
 * milliseconds: folds up to a thousand intervals the writes appended into
 * the history's lookups (schema/0007_history_fold.sql), then drops closed
 * intervals beyond 'max_rows' per table (0: no cap; the oldest first),
 * else up to a few hundred that ended before now_ms - retention_ms, and
 * pod rows no interval names. *more: call again, there is more to fold or
 * drop. A failed step is counted (store_history_failures). */
err_t store_history_prune(struct store *st, int64_t now_ms, uint64_t retention_ms,
                          uint64_t max_rows, bool *more) WARN_UNUSED;
/* For /metrics: {"allocated":[{"resource","device","namespace","pod","container"}],
 * "healthy":[{"resource","device","healthy":bool}],
 * "seconds":[{"namespace","resource","seconds"}]} (device-seconds since the
 * database was made, open intervals up to now_ms; pruning does not lower it). */
err_t store_device_metrics(struct store *st, int64_t now_ms, json_t **out) WARN_UNUSED;

#endif
