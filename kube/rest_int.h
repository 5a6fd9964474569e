/* SPDX-License-Identifier: Apache-2.0 */
/* rest_int.h - what rest.c (the client) shares with rest_gate.c (the gate)
 * and rest_stats.c (the counters); nothing outside kube/rest*.c includes
 * it. Every function is thread-safe; a NULL gate or stats is a no-op. */
#ifndef PODRES_REST_INT_H
#define PODRES_REST_INT_H
#include <stdbool.h>
#include <stdint.h>

#include "rest.h"

/* Wait until a request may go (the backoff over, a token taken); false when
 * the gate stopped. */
bool rest_gate_wait(struct rest_gate *g);
/* A failure ('what', for the log): extend the backoff (with jitter), or wait
 * 'retry_after_ms' when the server said how long. */
void rest_gate_failed(struct rest_gate *g, uint64_t retry_after_ms, const char *what);
/* A success: the backoff ends. */
void rest_gate_ok(struct rest_gate *g);

/* Count a request of 'verb' answered 'code' (0: no answer), or, with
 * 'retry', one more retry. */
void rest_stats_count(struct rest_stats *s, const char *verb, int code, bool retry);

#endif
