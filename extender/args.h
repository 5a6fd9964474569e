/* SPDX-License-Identifier: Apache-2.0 */
/* args.h - the extender's input: the JSON bodies kube-scheduler POSTs
 * (ExtenderArgs for filter and prioritize, ExtenderBindingArgs for bind, as
 * k8s.io/kube-scheduler/extender/v1 spells them) and a Pod's device
 * requests. Parsing only; no state, thread-safe. Malformed input is
 * ERR_INVAL with 'e' saying what and where. */
#ifndef PODRES_ARGS_H
#define PODRES_ARGS_H
#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

#include "../common/err.h"

/* Longest namespace, pod or node name accepted (DNS-1123 subdomain). */
#define ARGS_NAME_MAX 253

/* A parsed ExtenderArgs. Every json_t is owned (args_release). */
struct args {
    json_t *doc;      /* the body */
    json_t *names;    /* the candidate node names, an array of strings */
    bool node_list;   /* they came from Nodes (nodeCacheCapable false): answer with Nodes */
    json_t *requests; /* the pod's device requests, [{"name":C,"requests":{R:n}}] */
    json_t *totals;   /* the same summed over the containers, {R:n} */
    char ns[ARGS_NAME_MAX + 1];   /* the pod's namespace */
    char name[ARGS_NAME_MAX + 1]; /* the pod's name */
    char uid[128];                /* the pod's metadata.uid, "" when not given */
};

/* Parse 'len' bytes of an ExtenderArgs body into 'a' (zeroed by the call).
 * On failure 'a' holds nothing to release. */
err_t args_parse(const char *body, size_t len, struct args *a, struct error *e) WARN_UNUSED;
void args_release(struct args *a); /* a zeroed struct is fine */

/* A parsed ExtenderBindingArgs. */
struct args_bind {
    char ns[ARGS_NAME_MAX + 1];   /* PodNamespace */
    char name[ARGS_NAME_MAX + 1]; /* PodName */
    char uid[128];                /* PodUID (required: bind checks the pod by it) */
    char node[ARGS_NAME_MAX + 1]; /* Node */
};

err_t args_parse_bind(const char *body, size_t len, struct args_bind *b,
                      struct error *e) WARN_UNUSED;

/* The extended-resource requests of 'pod's containers (init containers are
 * not pre-assigned): per container its limits, else its requests, of every
 * resource named domain/name outside kubernetes.io, whole numbers above 0.
 * On ERR_OK *containers and *totals are new, as in struct args. */
err_t args_pod_requests(const json_t *pod, json_t **containers, json_t **totals,
                        struct error *e) WARN_UNUSED;

/* Whether 's' is a DNS-1123 subdomain of at most ARGS_NAME_MAX bytes (so
 * it goes into a URL path as it is). */
bool args_is_name(const char *s);

#endif
