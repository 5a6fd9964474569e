/* SPDX-License-Identifier: Apache-2.0 */
/* bind.h - the extender's bind verb: choose the pod's devices on the node
 * (view.h, under its mutex), write the pod's DeviceBinding pre-assignment,
 * then the pod's Binding; when the Binding fails, take the pre-assignment
 * back. Blocking (API requests); thread-safe when each thread passes its own
 * client. */
#ifndef PODRES_BIND_H
#define PODRES_BIND_H
#include <stddef.h>
#include <stdint.h>

#include "../common/err.h"
#include "../kube/rest.h"
#include "args.h"
#include "passed.h"
#include "view.h"

/* The annotation that marks a pre-assignment this extender wrote. */
#define BIND_ANNOTATION "podres.dev/preassigned-by"
#define BIND_WRITER "podres-extender"

/* Counters for /metrics; updated with atomic adds. */
struct bind_stats {
    uint64_t binds;    /* pods bound */
    uint64_t failures; /* binds answered with an error (refusals included) */
    uint64_t refused;  /* binds refused by the checks below */
    uint64_t removed;  /* pre-assignments taken back after a failed Binding */
};

/* What a bind is checked against before anything is written: the pod named
 * exists with the uid asked, is not bound yet, is scheduled by one of
 * 'schedulers' (NULL-terminated), and passed filter on the node ('passed').
 * So a caller can only complete a scheduling cycle kube-scheduler began. */
struct bind_checks {
    char *const *schedulers; /* the served spec.schedulerName values */
    struct passed *passed;   /* filter's answers */
};

/* Bind pod 'b' to its node with client 'k'. On failure 'e' says why (it
 * is the answer's Error, so kube-scheduler's event shows it), and the error
 * is logged once here. */
err_t bind_pod(struct view *view, struct rest *k, const struct bind_checks *chk,
               const struct args_bind *b, struct bind_stats *stats, struct error *e) WARN_UNUSED;

/* The DeviceBinding this extender writes for pod 'ns'/'name' of 'uid' on
 * 'node' with 'containers' (borrowed); new, or NULL. */
json_t *bind_devicebinding(const char *ns, const char *name, const char *uid, const char *node,
                           const json_t *containers);

#endif
