/* SPDX-License-Identifier: Apache-2.0 */
/* dvb.h - the DeviceBinding as JSON, as podres-syncer writes and reads it:
 * the status built from podresd's PodResources, conditions, the node label,
 * owner references, paths and merge patches, and the part of a Pod the
 * decisions read. Pure functions of their arguments: no I/O, no state (the
 * clock only in dvb_now); thread-safe. What to write, and when, is
 * reconcile.h's. */
#ifndef PODRES_DVB_H
#define PODRES_DVB_H
#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

#define DVB_GROUP_PATH "/apis/podres.dev/v1alpha1"
#define DVB_LABEL "podres.dev/node" /* the node an object is this node's syncer's for */

/* True when 'pr' (PodResources, or NULL) holds at least one device. */
bool dvb_has_devices(const json_t *pr);

/* The status a DeviceBinding should carry for PodResources 'pr' (borrowed,
 * may be NULL: no devices yet) of the pod with 'pod_uid' ("" when unknown;
 * not NULL) on 'node' (not NULL), with phase Bound. A DRA device group
 * keeps podresd's "claims" ({namespace, name, deviceIds}). New, or NULL if
 * out of memory. */
json_t *dvb_status(const json_t *pr, const char *pod_uid, const char *node);

/* A condition {type, status, reason, message, lastTransitionTime}; the time
 * is taken from 'old' (the previous condition of that type, or NULL) when
 * its status is the same, else 'now' (RFC 3339). New, or NULL. */
json_t *dvb_condition(const char *type, const char *status, const char *reason, const char *message,
                      const json_t *old, const char *now);
/* The first condition of 'type' in the status of 'obj', or NULL; borrowed
 * from 'obj'. */
const json_t *dvb_condition_of(const json_t *obj, const char *type);
/* Now as a condition's lastTransitionTime spells it: RFC 3339, UTC, whole
 * seconds. */
void dvb_now(char *buf, size_t cap);

/* The path of the DeviceBindings of 'ns' (not NULL) when 'name' is NULL,
 * or of one, with 'sub' ("/status", or NULL) after it; cut to 'cap' > 0. */
void dvb_path(char *buf, size_t cap, const char *ns, const char *name, const char *sub);
/* metadata.'field' of 'obj' as a string, or NULL; borrowed from 'obj'. */
const char *dvb_meta(const json_t *obj, const char *field);
/* The node 'obj' is labelled for (DVB_LABEL), or NULL; borrowed from 'obj'. */
const char *dvb_label(const json_t *obj);

/* The object the syncer creates for pod 'ns'/'name' of 'pod_uid' on
 * 'node': labelled for it, owned by the Pod, spec.nodeName set. New, or
 * NULL. */
json_t *dvb_new(const char *ns, const char *name, const char *node, const char *pod_uid);
/* Whether an owner reference of 'obj' has 'uid'. */
bool dvb_owned_by(const json_t *obj, const char *uid);
/* The owners 'obj' should have: its own, but for a Pod owner of another
 * instance, and the Pod 'name' 'uid'. Others' owners (a scheduler's
 * PodGroup, ...) are kept: the list is patched whole. New, or NULL. */
json_t *dvb_owners_with_pod(const json_t *obj, const char *name, const char *uid);
/* {"status": desired} plus null for each field of 'old' (a status, or
 * NULL) no longer wanted: the merge patch from one to the other. New, or
 * NULL. */
json_t *dvb_status_patch(const json_t *old, const json_t *desired);

/* Whether 'pod' (the API Pod, or NULL) is going: gone from the API server,
 * or with a deletionTimestamp. */
bool dvb_pod_going(const json_t *pod);
/* Whether the garbage collector removes 'obj' without the syncer: it has
 * owners, all of them the Pod 'name', and none is the live 'pod' (NULL
 * when the API server has none). */
bool dvb_collected(const json_t *obj, const char *name, const json_t *pod);

/* The part of an API Pod that reconcile reads (new; NULL if out of memory):
 * metadata name, namespace, uid, resourceVersion and deletionTimestamp (when
 * set). The Pod informer keeps only this. */
json_t *dvb_pod_view(json_t *pod);

#endif
