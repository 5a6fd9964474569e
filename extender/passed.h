/* SPDX-License-Identifier: Apache-2.0 */
/* passed.h - the nodes each pod passed filter on, remembered so that bind
 * places a pod only on a node this extender let through for that very pod
 * (by its uid). kube-scheduler calls filter, then bind, within one
 * scheduling cycle; an entry older than the time to live, or pushed out by
 * newer ones past the capacity, is forgotten, and such a bind is refused.
 * Thread-safe: one mutex. */
#ifndef PODRES_PASSED_H
#define PODRES_PASSED_H
#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "../common/err.h"

struct passed;

/* At most 'cap' pods (> 0), each for 'ttl_ms'. New, or NULL. */
struct passed *passed_new(size_t cap, uint64_t ttl_ms);
void passed_free(struct passed *p); /* NULL is a no-op */

/* Pod 'uid' passed filter on 'nodes' (borrowed array of strings) at
 * 'now_ms' (monotonic); replaces what an earlier filter of it said. */
err_t passed_note(struct passed *p, const char *uid, const json_t *nodes,
                  uint64_t now_ms) WARN_UNUSED;
/* Whether pod 'uid' passed filter on 'node' no longer than the time to
 * live before 'now_ms'. */
bool passed_has(struct passed *p, const char *uid, const char *node, uint64_t now_ms);
/* Pods remembered (expired ones included until they are swept). */
size_t passed_count(struct passed *p);

#endif
