/* SPDX-License-Identifier: Apache-2.0 */
/* view.h - the extender's picture of the cluster's devices: every node's
 * inventory (its NodeDevices), every device taken (held per a
 * DeviceBinding's status, pre-assigned per its spec while the pod is not
 * Bound, or assumed: chosen by a bind of this process that the
 * DeviceBinding informer has not shown yet), and from these the free
 * healthy devices of a node. Filter, prioritize and bind's choice read it.
 * Thread-safe: one mutex guards all of it, so two binds never choose the
 * same device. */
#ifndef PODRES_VIEW_H
#define PODRES_VIEW_H
#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>

#include "../common/err.h"

struct view;

/* 'assume_ms': how long a choice of bind stays assumed when the informer
 * does not show its DeviceBinding. New, or NULL. */
struct view *view_new(uint64_t assume_ms);
void view_free(struct view *v); /* NULL is a no-op */

/* Resources managed even before any NodeDevices lists them (--resource). */
void view_add_resource(struct view *v, const char *res);

/* The NodeDevices named 'name' is now 'obj' (borrowed), or gone (NULL). */
void view_set_node(struct view *v, const char *name, const json_t *obj);
/* The DeviceBinding 'key' ("ns/name") is now 'obj' (borrowed), or gone (NULL). */
void view_set_binding(struct view *v, const char *key, const json_t *obj);

/* Filter 'names' (borrowed array of strings) for a pod needing 'totals'
 * ({R:n}): on ERR_OK *fit is a new array of the names that can hold it and
 * *failed a new object name -> reason. Resources no NodeDevices lists and
 * not added are not checked. */
err_t view_filter(struct view *v, const json_t *names, const json_t *totals, json_t **fit,
                  json_t **failed) WARN_UNUSED;
/* Scores 0..10 for 'names': on ERR_OK *out is a new HostPriorityList
 * ([{"Host","Score"}]): fewest NUMA nodes needed first, then least free
 * after placement (bin-packing); 0 for a node that cannot hold it. */
err_t view_prioritize(struct view *v, const json_t *names, const json_t *totals,
                      json_t **out) WARN_UNUSED;
/* Choose devices on 'node' for 'requests' ([{"name":C,"requests":{R:n}}])
 * and assume them for pod 'key' with 'uid'. On ERR_OK *containers is new:
 * the DeviceBinding spec.containers ([{"name","devices":[{"resourceName",
 * "deviceIds"}]}]; [] when nothing is managed). ERR_CONFLICT with 'e' (or
 * NULL) saying why when the node cannot hold them now. */
err_t view_choose(struct view *v, const char *node, const char *key, const char *uid,
                  const json_t *requests, json_t **containers, struct error *e) WARN_UNUSED;
/* Forget what view_choose assumed for 'key' (its bind failed). */
void view_unassume(struct view *v, const char *key);

/* Counts for /metrics and tests. */
size_t view_nodes(struct view *v);
size_t view_assumed(struct view *v);

#endif
