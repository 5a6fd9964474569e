/* SPDX-License-Identifier: Apache-2.0 */
/* validate.h - checks of request bodies and their canonical forms for the
 * store. Pure: no I/O, thread-safe. Structural problems (wrong JSON types,
 * unknown fields) are ERR_INVAL (400 BadRequest); missing required fields and
 * invalid values (names, ranges, duplicates) are ERR_UNPROCESSABLE (422
 * Invalid), as the Kubernetes API server answers. Not the store's rules
 * (what is bound, what exists).
 * On failure 'e' names the field ('e' may be NULL: the message is dropped).
 * The output pointers must not be NULL; outputs are new, untouched on
 * failure. */
#ifndef PODRES_VALIDATE_H
#define PODRES_VALIDATE_H
#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

#include "../common/err.h"

/* PUT devices: *devices = [{"id","health","numa":[int...],"properties":{},
 * "aliases":[sorted, unique, not the id],"physical":"" or another device's name}]. */
err_t validate_devices_put(const json_t *body, json_t **devices, uint64_t *ttl_ms,
                           struct error *e) WARN_UNUSED;
/* PUT /v1/drivers/{driver}/devices: *devices = [{"id","health":"Healthy","numa":[],
 * "properties","aliases","physical"}] as validate_devices_put() gives them. */
err_t validate_driver_put(const json_t *body, json_t **devices, struct error *e) WARN_UNUSED;
/* PATCH device: *health points into 'body' (borrowed). */
err_t validate_health_patch(const json_t *body, const char **health, struct error *e) WARN_UNUSED;
/* PUT pod: *uid borrowed from 'body' ("" when absent); *containers =
 * [{"name","devices":[{"resourceName","deviceIds"}],"cpuIds","memory"}]. */
err_t validate_pod_put(const json_t *body, const char **uid, json_t **containers,
                       struct error *e) WARN_UNUSED;
/* POST allocate: *request = [{"name","requests":{resource:count}}]. */
err_t validate_allocate(const json_t *body, const char **uid, json_t **request,
                        struct error *e) WARN_UNUSED;
/* PUT reservation: *containers = [{"name","devices":[...]}]. */
err_t validate_reservation(const json_t *body, json_t **containers, struct error *e) WARN_UNUSED;
/* DELETE: a DeleteOptions body, as kubectl and client-go send one. Its
 * preconditions hold: uid (only when 'has_uid': a pod; *uid comes in as
 * ?uid= or NULL, and both must agree) and resourceVersion, the object's
 * revision as a decimal string (*rev; 0 when absent). dryRun is refused:
 * a DELETE here is never a dry run. The other fields (propagationPolicy,
 * gracePeriodSeconds, ...) mean nothing for these objects. All ERR_INVAL. */
err_t validate_delete_options(const json_t *body, int has_uid, const char **uid, uint64_t *rev,
                              struct error *e) WARN_UNUSED;
/* A pod uid: [A-Za-z0-9._-]{0,128}. */
int validate_uid(const char *uid);

#endif
