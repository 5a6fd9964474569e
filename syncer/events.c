/* SPDX-License-Identifier: Apache-2.0 */
/* events.c - Events about DeviceBindings, in series, within a budget. */
#define LOG_MOD "events"
#include "../common/common.h"
#include "../common/clock.h"
#include "events.h"

#include <assert.h>
#include <time.h>

#define EVENTS_GROUP "/apis/events.k8s.io/v1"
#define NOTE_MAX 1024 /* the API server refuses notes over 1 KiB */

/* 'wall_ms' as a MicroTime, as the API wants eventTime: RFC 3339 with
 * microseconds. */
static void micro_time(uint64_t wall_ms, char *buf, size_t cap)
{
    time_t sec = (time_t)(wall_ms / 1000);
    struct tm tm;
    char base[32];

    gmtime_r(&sec, &tm);
    strftime(base, sizeof(base), "%Y-%m-%dT%H:%M:%S", &tm);
    snprintf(buf, cap, "%.20s.%06uZ", base, (unsigned)(wall_ms % 1000) * 1000u);
}

/* Whether the bucket has a token; takes it. */
static bool take(struct events *e, uint64_t now_ms)
{
    if (!e->filled_ms) {
        e->tokens = EVENTS_BURST;
    } else if (now_ms > e->filled_ms) {
        e->tokens += (double)(now_ms - e->filled_ms) / EVENTS_REFILL_MS;
        if (e->tokens > EVENTS_BURST)
            e->tokens = EVENTS_BURST;
    }
    e->filled_ms = now_ms;
    if (e->tokens < 1)
        return false;
    e->tokens -= 1;
    return true;
}

static err_t create_event(struct events *e, const json_t *md, const char *type, const char *reason,
                          const char *action, const char *note, char *name, size_t name_cap)
{
    const char *ns = json_string_value(json_object_get(md, "namespace"));
    const char *obj = json_string_value(json_object_get(md, "name"));
    const char *uid = json_string_value(json_object_get(md, "uid"));
    char path[512], when[48];
    struct error err = {0};
    uint64_t wall_ms = clock_wall_ms();
    json_t *body, *ans = NULL;
    err_t rc;

    /* client-go's spelling: the object's name and the time in hex
     * nanoseconds; the count below the millisecond keeps two names made in
     * one millisecond apart */
    snprintf(name, name_cap, "%.200s.%llx", obj,
             (unsigned long long)(wall_ms * 1000000u + e->named++ % 1000000u));
    micro_time(wall_ms, when, sizeof(when));
    body = json_pack("{s:s,s:s,s:{s:s,s:s},s:s,s:s,s:s,s:s,s:s,s:s,s:s%,s:{s:s,s:s,s:s,s:s,s:s}}",
                     "apiVersion", "events.k8s.io/v1", "kind", "Event", "metadata", "name", name,
                     "namespace", ns, "eventTime", when, "reportingController",
                     "podres.dev/podres-syncer", "reportingInstance", e->node, "type", type,
                     "reason", reason, "action", action, "note", note, strnlen(note, NOTE_MAX),
                     "regarding", "apiVersion", "podres.dev/v1alpha1", "kind", "DeviceBinding",
                     "namespace", ns, "name", obj, "uid", uid ? uid : "");
    if (!body)
        return ERR_NOMEM;
    snprintf(path, sizeof(path), EVENTS_GROUP "/namespaces/%s/events", ns);
    rc = rest_do(e->kube, "POST", path, body, NULL, &ans, &err);
    json_decref(body);
    json_decref(ans);
    if (rc)
        log_debug("cannot record event %s on DeviceBinding %s/%s: %s", reason, ns, obj,
                  error_msg(&err));
    return rc;
}

/* series.count of the Event 'name' in 'ns' becomes 'count'. */
static err_t patch_series(struct events *e, const char *ns, const char *name, json_int_t count)
{
    char path[600], when[48];
    struct error err = {0};
    json_t *body, *ans = NULL;
    err_t rc;

    micro_time(clock_wall_ms(), when, sizeof(when));
    body = json_pack("{s:{s:I,s:s}}", "series", "count", count, "lastObservedTime", when);
    if (!body)
        return ERR_NOMEM;
    snprintf(path, sizeof(path), EVENTS_GROUP "/namespaces/%s/events/%s", ns, name);
    rc = rest_do(e->kube, "PATCH", path, body, REST_MERGE_PATCH, &ans, &err);
    json_decref(body);
    json_decref(ans);
    if (rc)
        log_debug("cannot count event %s/%s again: %s", ns, name, error_msg(&err));
    return rc;
}

/* Forget series whose last event is older than the window. */
static void expire(struct events *e, uint64_t now_ms)
{
    const char *k;
    json_t *v, *tmp;

    json_object_foreach_safe(e->series, tmp, k, v) {
        if (now_ms - (uint64_t)json_integer_value(json_array_get(v, 3)) > EVENTS_SERIES_MS)
            json_object_del(e->series, k);
    }
}

/* The series 'key' again: its count grows on the server. False when it is
 * not known, or its Event is gone (then it is forgotten: a new one). */
static bool repeat(struct events *e, const char *key, uint64_t now_ms)
{
    json_t *s = json_object_get(e->series, key);
    json_int_t n;

    if (!s)
        return false;
    n = json_integer_value(json_array_get(s, 2)) + 1;
    if (patch_series(e, json_string_value(json_array_get(s, 1)),
                     json_string_value(json_array_get(s, 0)), n) != ERR_OK) {
        json_object_del(e->series, key); /* gone (expired by the server?): a new one */
        return false;
    }
    json_array_set_new(s, 2, json_integer(n));
    json_array_set_new(s, 3, json_integer((json_int_t)now_ms));
    __atomic_add_fetch(&e->repeated, 1, __ATOMIC_RELAXED);
    return true;
}

void events_record(struct events *e, const json_t *regarding, const char *type, const char *reason,
                   const char *action, const char *note, uint64_t now_ms)
{
    const json_t *md = json_object_get(regarding, "metadata");
    const char *ns = json_string_value(json_object_get(md, "namespace"));
    const char *obj = json_string_value(json_object_get(md, "name"));
    const char *uid = json_string_value(json_object_get(md, "uid"));
    char key[1600], name[300];

    assert(e->kube && e->node && note);
    if (!ns || !obj || (!e->series && !(e->series = json_object())))
        return;
    expire(e, now_ms);
    snprintf(key, sizeof(key), "%s/%s/%s|%s|%s|%.1024s", ns, obj, uid ? uid : "", type, reason,
             note);
    if (!take(e, now_ms)) {
        __atomic_add_fetch(&e->dropped, 1, __ATOMIC_RELAXED);
        if (!e->drop_said)
            log_info("events over the node's budget (%d, one more each %d s) are dropped, "
                     "first %s on DeviceBinding %s/%s",
                     EVENTS_BURST, EVENTS_REFILL_MS / 1000, reason, ns, obj);
        e->drop_said = 1;
        return;
    }
    e->drop_said = 0;
    if (repeat(e, key, now_ms))
        return;
    if (create_event(e, md, type, reason, action, note, name, sizeof(name)) != ERR_OK) {
        __atomic_add_fetch(&e->failed, 1, __ATOMIC_RELAXED);
        return;
    }
    __atomic_add_fetch(&e->created, 1, __ATOMIC_RELAXED);
    json_object_set_new(e->series, key,
                        json_pack("[s,s,I,I]", name, ns, (json_int_t)1, (json_int_t)now_ms));
}

void events_release(struct events *e)
{
    json_decref(e->series);
    e->series = NULL;
}

err_t events_render(struct events *e, struct strbuf *sb)
{
    return strbuf_printf(
        sb,
        "# HELP podres_syncer_events_total Events about DeviceBindings: created, repeated (a "
        "series counted again), dropped (over the node's budget), failed.\n"
        "# TYPE podres_syncer_events_total counter\n"
        "podres_syncer_events_total{result=\"created\"} %llu\n"
        "podres_syncer_events_total{result=\"repeated\"} %llu\n"
        "podres_syncer_events_total{result=\"dropped\"} %llu\n"
        "podres_syncer_events_total{result=\"failed\"} %llu\n",
        (unsigned long long)__atomic_load_n(&e->created, __ATOMIC_RELAXED),
        (unsigned long long)__atomic_load_n(&e->repeated, __ATOMIC_RELAXED),
        (unsigned long long)__atomic_load_n(&e->dropped, __ATOMIC_RELAXED),
        (unsigned long long)__atomic_load_n(&e->failed, __ATOMIC_RELAXED));
}
