/* SPDX-License-Identifier: Apache-2.0 */
/* model.h - what kubectl-podres shows, computed from one NodeDevicesList and
 * one DeviceBindingList (the API server's JSON, borrowed). Pure: no I/O, no
 * clock. Each function returns rows as a new JSON array of objects (the
 * -o json|yaml items; table.h prints them), or NULL when out of memory.
 *
 * A device of a node is in exactly one state, so the counts add up:
 * - held: in the status.containers of a DeviceBinding on that node
 *   (status.nodeName, else the podres.dev/node label);
 * - reserved: not held, and in the spec.containers of a DeviceBinding whose
 *   phase is not Bound (a pre-assignment not yet taken up), on its
 *   spec.nodeName (else the label);
 * - free: neither, and Healthy;
 * - unhealthy: neither, and not Healthy.
 * "since" is when the DeviceBinding says the holding began: for a held
 * device the lastTransitionTime of its PreassignmentHonored condition when
 * that is True (the pre-assignment was taken up then), else the object's
 * creationTimestamp (the syncer creates it when the pod first holds
 * devices); for a reserved device, the creationTimestamp (when the
 * pre-assignment was written). Not per device, and not podresd's history. */
#ifndef PODRES_PLUGIN_MODEL_H
#define PODRES_PLUGIN_MODEL_H
#include <jansson.h>
#include <stdbool.h>

/* One row per node and resource, nodes by name, resources by name:
 * {node, resource, total, healthy, unhealthy, held, reserved, free, pods}
 * ('pods': distinct pods holding or reserving devices of it). */
json_t *model_nodes(const json_t *nds, const json_t *dvbs);

/* One row per device of NodeDevices 'node', by resource then id:
 * {resource, id, health, numa: [ids], aliases: [..], physical: id or null,
 *  state, holder: {namespace, pod, container, phase[, claim: {namespace,
 *  name}]} or null, since: time or null}. A DRA device's holder names the
 * ResourceClaim it was allocated through (the DeviceBinding group's
 * claims). *found says whether 'node' has a NodeDevices. */
json_t *model_node(const json_t *nds, const json_t *dvbs, const char *node, bool *found);

/* The devices 'device' covers, on any node: those whose id or alias it is,
 * those whose physical device it names, and, recursively, those whose
 * physical device is the id or an alias of a covered device of the same
 * node (a GPU, its MIG instances, their replicas): the rows of model_node
 * with 'node' added. A device no NodeDevices lists but a DeviceBinding
 * names (by id) is a row too, with health "Unknown". */
json_t *model_who(const json_t *nds, const json_t *dvbs, const char *device);

/* One row per DeviceBinding with devices, as listed:
 * {namespace, name, node, phase, podUID, summary, deviceIds: [..],
 *  containers: [{name, state, devices: [{resourceName, deviceIds}]}]}
 * with the held devices, or the reserved ones (state "reserved") when it
 * holds none and is not Bound. */
json_t *model_pods(const json_t *dvbs);

#endif
