/* SPDX-License-Identifier: Apache-2.0 */
/* metrics.h - podres-syncer's HTTP endpoint on --metrics-listen: /metrics
 * (the Prometheus text of every module's counters and the sync-lag
 * histogram), /healthz and /readyz. Its own thread (libmicrohttpd's)
 * answers, reading the daemon's state as syncer.h says. */
#ifndef PODRES_METRICS_H
#define PODRES_METRICS_H
#include "../common/err.h"
#include "syncer.h"

/* Listen on s->set.metrics_listen (nothing when it is empty): ERR_INVAL
 * for an address that is not HOST:PORT with a numeric host, ERR_IO when
 * it cannot listen; logged. s->http is the server, stopped by main.c. */
err_t metrics_start(struct syncer *s) WARN_UNUSED;

/* An empty sync-lag histogram with its lock; before any thread starts. */
void metrics_lag_init(struct lag *l);
/* One observation of 's' seconds into the sync-lag histogram 'l'.
 * Thread-safe (l->mu). */
void metrics_lag_observe(struct lag *l, double s);

#endif
