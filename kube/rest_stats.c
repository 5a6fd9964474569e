/* SPDX-License-Identifier: Apache-2.0 */
/* rest_stats.c - the request counters of rest.h for /metrics: requests by
 * verb and HTTP code (0: no answer), and retries, in at most MAX_SERIES
 * series; a series past them is not counted. */
#include "../common/common.h"
#include "../common/strbuf.h"
#include "rest_int.h"

#include <pthread.h>

#define MAX_SERIES 64

/* Lock: 'mu' guards every field. */
struct rest_stats {
    pthread_mutex_t mu;
    char verb[MAX_SERIES][8]; /* series: verb */
    int code[MAX_SERIES];     /* series: code (0 = network error) */
    uint64_t n[MAX_SERIES];   /* requests */
    size_t nseries;           /* used series */
    uint64_t retries;         /* retried attempts */
};

struct rest_stats *rest_stats_new(void)
{
    struct rest_stats *s = calloc(1, sizeof(*s));

    if (s)
        pthread_mutex_init(&s->mu, NULL);
    return s;
}

void rest_stats_free(struct rest_stats *s)
{
    if (!s)
        return;
    pthread_mutex_destroy(&s->mu);
    free(s);
}

void rest_stats_count(struct rest_stats *s, const char *verb, int code, bool retry)
{
    size_t i;

    if (!s)
        return;
    pthread_mutex_lock(&s->mu);
    for (i = 0; i < s->nseries; i++) {
        if (s->code[i] == code && strcmp(s->verb[i], verb) == 0)
            break;
    }
    if (i == s->nseries && i < MAX_SERIES) {
        snprintf(s->verb[i], sizeof(s->verb[i]), "%s", verb);
        s->code[i] = code;
        s->nseries++;
    }
    if (retry)
        s->retries++;
    else if (i < MAX_SERIES)
        s->n[i]++;
    pthread_mutex_unlock(&s->mu);
}

err_t rest_stats_render(struct rest_stats *s, struct strbuf *sb)
{
    err_t rc = strbuf_printf(sb, "# HELP podres_syncer_api_requests_total Kubernetes API requests "
                                 "by verb and code (0: no answer).\n"
                                 "# TYPE podres_syncer_api_requests_total counter\n");
    size_t i;

    pthread_mutex_lock(&s->mu);
    for (i = 0; !rc && i < s->nseries; i++) {
        if (s->code[i] >= 0)
            rc = strbuf_printf(sb,
                               "podres_syncer_api_requests_total{verb=\"%s\",code=\"%d\"} %llu\n",
                               s->verb[i], s->code[i], (unsigned long long)s->n[i]);
    }
    if (!rc)
        rc = strbuf_printf(sb,
                           "# HELP podres_syncer_api_retries_total Retried API requests.\n"
                           "# TYPE podres_syncer_api_retries_total counter\n"
                           "podres_syncer_api_retries_total %llu\n",
                           (unsigned long long)s->retries);
    pthread_mutex_unlock(&s->mu);
    return rc;
}
