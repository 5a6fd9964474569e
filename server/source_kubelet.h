/* SPDX-License-Identifier: Apache-2.0 */
/* source_kubelet.h - the kubelet binding source (--source kubelet): a
 * thread that polls the kubelet's PodResourcesLister v1 (List, then
 * GetAllocatableResources) over its unix socket every interval, decodes the
 * protobuf answers into a snapshot and hands it to store_kubelet_sync().
 * It backs off (doubling, with jitter) while the socket is missing or the
 * kubelet answers RESOURCE_EXHAUSTED or fails, and knows whether podresd is
 * ready: a sync succeeded no longer than three intervals ago. Not the
 * reconcile itself (store_sync.c) nor the gRPC client (grpc.c). */
#ifndef PODRES_SOURCE_KUBELET_H
#define PODRES_SOURCE_KUBELET_H
#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "../common/err.h"
#include "../common/strbuf.h"
#include "store.h"

#define SOURCE_KUBELET_MAX_RECV (64u << 20) /* largest answer accepted, bytes */

struct source_kubelet_opts {
    const char *socket_path; /* the kubelet's pod-resources socket; copied */
    uint64_t interval_ms;    /* poll interval, milliseconds (> 0) */
    struct store *store;     /* borrowed; must outlive the source */
};

/* Lock: 'mu' guards the status fields and 'stopping'; the poll thread alone
 * uses the gRPC client. */
struct source_kubelet;

/* Start the poll thread. On ERR_OK *out is new: source_kubelet_free() it. */
err_t source_kubelet_start(const struct source_kubelet_opts *o,
                           struct source_kubelet **out) WARN_UNUSED;
/* Stop the thread (an answer in progress is abandoned), join it, free. NULL
 * is a no-op. Call before the store closes. */
void source_kubelet_free(struct source_kubelet *k);

/* The readiness hook of struct api: 'ctx' is the source. True when the
 * last successful sync is at most three intervals old; else false and the
 * reason in 'why' (ERR_UNAVAIL; may be NULL). Thread-safe. */
bool source_kubelet_ready(void *ctx, struct error *why);
/* Append the poll thread's metrics (the settling of a restarted kubelet,
 * settle.h) to 'sb'. 'ctx' is the struct source_kubelet. Thread-safe. */
err_t source_kubelet_metrics(void *ctx, struct strbuf *sb) WARN_UNUSED;

/* ---- pure parts, for the tests ---- */

/* Decode a serialised ListPodResourcesResponse and AllocatableResourcesResponse
 * into the snapshot store_kubelet_sync() takes. On ERR_OK *snap is new:
 * json_decref() it. ERR_INVAL (with 'e', which may be NULL) when either does not decode, or a
 * name or id is empty, not UTF-8 or holds control characters. Extra fields
 * of the containers (cpuIds, memory, dynamicResources) are kept in their
 * JSON spelling; the allocatable CPUs and memory are not (the store keeps
 * devices only). */
err_t source_kubelet_decode(const uint8_t *list, size_t list_len, const uint8_t *alloc,
                            size_t alloc_len, json_t **snap, struct error *e) WARN_UNUSED;

/* The wait before poll attempt number 'failures' + 1 after that many
 * consecutive failures: the interval when 0, else the interval doubled per
 * failure, capped at max(interval, min(16 intervals, 30 s)), plus up to a
 * quarter of it from 'jitter' (0..1). */
uint64_t source_kubelet_backoff(uint64_t interval_ms, unsigned failures, double jitter);

#endif
