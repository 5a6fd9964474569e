/* SPDX-License-Identifier: Apache-2.0 */
/* informer.c - list, watch, resume, relist, and an API server whose state
 * went back (an etcd restore or wipe: resourceVersions start again lower).
 * Failures of requests are logged once by the client's gate; the loop only
 * waits and tries again.
 *
 * Why a watch is resumed only after it ran its full time and showed life:
 * the real API server (its watch cache) accepts a watch from a
 * resourceVersion newer than its own and then stays silent, no event and no
 * bookmark, until its own passes ours (k8s.io/apiserver
 * pkg/storage/cacher). After the server came back with its state reset, a
 * resumed watch would wait there, stale, for good. A server that restarts,
 * or whose watch cache starts over, ends every watch first; the consistent
 * list that follows says where it stands. */
#define LOG_MOD "informer"
#include "../common/common.h"
#include "../common/clock.h"
#include "informer.h"

#include <assert.h>
#include <time.h>

#define WATCH_TIMEOUT_S 240 /* the server ends a watch after this; we resume */
#define WATCH_JITTER_PCT 10 /* ... give or take this many percent (client-go spreads too) */
#define LIST_EVERY_MS 1000  /* lists come no closer together than this */
#define LIST_SPREAD_MS 500  /* ... plus up to this, at random: failing lists drift apart */
#define RELIST_SPREAD_MS                                                                           \
    2000                      /* a list after a watch ended otherwise than at its timeout          \
                               * waits up to this, at random: an API server that ends              \
                               * every node's watches at once (a restart, a 410 for all)           \
                               * gets their lists spread over this time, not in one burst */
#define BAD_LIST_MAX_MS 30000 /* the longest pause after answers that were no list */

/* A resourceVersion as the integer Kubernetes' etcd3 storage makes it;
 * false when it is not one (they are opaque in general). */
static bool rv_number(const char *s, uint64_t *v)
{
    char *end;

    if (!s || *s < '0' || *s > '9')
        return false;
    errno = 0;
    *v = strtoull(s, &end, 10);
    return *end == '\0' && errno == 0;
}

/* Whether resourceVersion 'a' is older than 'b'; false unless both are integers. */
static bool rv_older(const char *a, const char *b)
{
    uint64_t x, y;

    return rv_number(a, &x) && rv_number(b, &y) && x < y;
}

/* WATCH_TIMEOUT_S give or take WATCH_JITTER_PCT percent, at random: the
 * watches of syncers started together end apart. */
static int watch_timeout_s(void)
{
    int span = WATCH_TIMEOUT_S * WATCH_JITTER_PCT / 100;

    return WATCH_TIMEOUT_S - span + rand() % (2 * span + 1);
}

/* ---- readiness, read by other threads ---- */

/* A relist is required: 'why' first, so that a reader who sees synced = 0
 * reads its reason. */
static void set_unsynced(struct informer *inf, const char *why)
{
    __atomic_store_n(&inf->relist, true, __ATOMIC_RELEASE);
    __atomic_store_n(&inf->why, why, __ATOMIC_RELAXED);
    __atomic_store_n(&inf->synced, 0, __ATOMIC_RELEASE);
}

/* The API server answered: a list, or a watch that it ended. */
static void answered(struct informer *inf)
{
    __atomic_store_n(&inf->failing_since_ms, 0, __ATOMIC_RELAXED);
}

static void failed(struct informer *inf)
{
    if (!__atomic_load_n(&inf->failing_since_ms, __ATOMIC_RELAXED))
        __atomic_store_n(&inf->failing_since_ms, clock_mono_ms(), __ATOMIC_RELAXED);
}

bool informer_synced(struct informer *inf)
{
    return __atomic_load_n(&inf->synced, __ATOMIC_ACQUIRE) != 0;
}

bool informer_current(struct informer *inf)
{
    return informer_synced(inf) && !__atomic_load_n(&inf->relist, __ATOMIC_ACQUIRE);
}

bool informer_ready(struct informer *inf, uint64_t grace_ms, struct error *why)
{
    uint64_t since = __atomic_load_n(&inf->failing_since_ms, __ATOMIC_RELAXED), t;
    const char *w;

    if (!informer_synced(inf)) {
        w = __atomic_load_n(&inf->why, __ATOMIC_RELAXED);
        errorf(why, ERR_UNAVAIL, "%s informer %s", inf->name, w ? w : "not listed yet");
        return false;
    }
    t = clock_mono_ms();
    if (since && t - since >= grace_ms) {
        errorf(why, ERR_UNAVAIL,
               "%s informer failing for %llu s (the API server is unreachable or failing)",
               inf->name, (unsigned long long)((t - since) / 1000));
        return false;
    }
    return true;
}

bool informer_missing(struct informer *inf)
{
    return __atomic_load_n(&inf->missing, __ATOMIC_RELAXED) != 0;
}

/* ---- list ---- */

/* Whether the collection is served (false: its list was a 404), said once
 * each time it changes. */
static void note_served(struct informer *inf, bool served)
{
    if (served == !informer_missing(inf))
        return;
    if (served)
        log_info("the API server serves %s again", inf->name);
    else
        log_info("the API server does not serve %s (404 for %s; %s); listing again until it "
                 "does",
                 inf->name, inf->path,
                 inf->missing_hint ? inf->missing_hint
                                   : "is its CustomResourceDefinition installed?");
    __atomic_store_n(&inf->missing, served ? 0 : 1, __ATOMIC_RELAXED);
}

/* The part of 'obj' the cache keeps (new). */
static json_t *kept(const struct informer *inf, json_t *obj)
{
    return inf->slim ? inf->slim(obj) : json_incref(obj);
}

/* The API server's state went back from 'from' to 'to': said once a reset. */
static void note_reset(struct informer *inf, const char *from, const char *to)
{
    if (!inf->reset_logged)
        log_info("API server state reset (resourceVersion went back from %s to %s); listing %s "
                 "again",
                 from, to, inf->name);
    inf->reset_logged = true;
}

/* The list's items as key -> kept object (new). */
static json_t *objects_of(const struct informer *inf, const json_t *list)
{
    json_t *all = json_object(), *item;
    char key[512];
    size_t i;

    json_array_foreach(json_object_get(list, "items"), i, item) {
        if (cache_key_of(item, key, sizeof(key)))
            json_object_set_new(all, key, kept(inf, item));
    }
    return all;
}

/* Whether 'list' is a list answer: a kind "...List", items an array (null
 * for none, as Go encodes an empty slice), a string resourceVersion that
 * fits. If not, 'e' says what it is. */
static bool is_list(const struct informer *inf, const json_t *list, struct error *e)
{
    const char *kind = json_string_value(json_object_get(list, "kind"));
    const char *rv = json_string_value(
        json_object_get(json_object_get(list, "metadata"), "resourceVersion"));
    const json_t *items = json_object_get(list, "items");
    size_t n = kind ? strlen(kind) : 0;

    if (n < 4 || strcmp(kind + n - 4, "List") != 0 ||
        !(json_is_array(items) || json_is_null(items)))
        errorf(e, ERR_UPSTREAM, "the answer to the list of %s is no list (kind '%.64s')", inf->name,
               kind ? kind : "none");
    else if (!rv || !*rv || strlen(rv) >= sizeof(inf->rv))
        errorf(e, ERR_UPSTREAM, "the list of %s has no usable metadata.resourceVersion", inf->name);
    else
        return true;
    return false;
}

/* An answer that was no list: the server, or something in front of it, is
 * broken. Said once (a good list ends it); the next list waits 1 s, doubling
 * to 30 s, and the cache is kept as it was. */
static void bad_list(struct informer *inf, const char *msg)
{
    if (!inf->bad_list_ms)
        log_warn("%s; keeping the cache and listing again with backoff", msg);
    inf->bad_list_ms = inf->bad_list_ms ? inf->bad_list_ms * 2 : LIST_EVERY_MS;
    if (inf->bad_list_ms > BAD_LIST_MAX_MS)
        inf->bad_list_ms = BAD_LIST_MAX_MS;
}

err_t informer_list(struct informer *inf)
{
    char path[1024];
    struct error e = {0};
    json_t *list = NULL, *all;
    const char *rv;
    err_t rc;

    assert(inf->path && inf->query && inf->kube && inf->cache);
    snprintf(path, sizeof(path), "%s?%s%s", inf->path, inf->query,
             inf->rv[0] || inf->consistent ? "" : "&resourceVersion=0");
    rc = rest_do(inf->kube, "GET", path, NULL, NULL, &list, &e);
    if (!rc && !is_list(inf, list, &e)) {
        bad_list(inf, e.msg);
        rc = ERR_UPSTREAM; /* nothing to watch from: list again, after a pause */
    }
    if (rc == ERR_NOTFOUND || rc == ERR_OK)
        note_served(inf, rc == ERR_OK);
    if (rc) {
        if (rc != ERR_UNAVAIL) {
            failed(inf);
            log_debug("cannot list %s: %s", inf->name, error_msg(&e));
        }
        json_decref(list);
        return rc;
    }
    if (inf->bad_list_ms)
        log_info("the list of %s is a list again", inf->name);
    inf->bad_list_ms = 0;
    rv = json_string_value(json_object_get(json_object_get(list, "metadata"), "resourceVersion"));
    /* Older than what was seen: the server's state was reset. The list is
     * the truth now, and the watch goes on from it. */
    if (inf->rv[0] && rv_older(rv, inf->rv))
        note_reset(inf, inf->rv, rv);
    snprintf(inf->rv, sizeof(inf->rv), "%s", rv);
    all = objects_of(inf, list);
    cache_replace(inf->cache, all);
    json_decref(all);
    json_decref(list);
    __atomic_store_n(&inf->relist, false, __ATOMIC_RELEASE);
    answered(inf);
    __atomic_store_n(&inf->synced, 1, __ATOMIC_RELEASE);
    return ERR_OK;
}

/* ---- watch ---- */

struct watch_state {
    struct informer *inf; /* borrowed */
    bool gone;            /* an ERROR 410 arrived */
    bool too_large;       /* an ERROR said our resourceVersion is newer than the server's */
    bool failed;          /* another ERROR arrived */
    size_t events;        /* events and bookmarks delivered */
    char current[32];     /* the server's resourceVersion a too-large answer named, or "" */
};

/* The server's resourceVersion in a too-large message ("Timeout: Too large
 * resource version: 5000, current: 100"), or "" when it names none. */
static void current_of(const char *msg, char *out, size_t cap)
{
    const char *p = msg ? strstr(msg, "current: ") : NULL;
    size_t n = p ? strspn(p + 9, "0123456789") : 0;

    snprintf(out, cap, "%.*s", (int)(n < cap ? n : 0), n ? p + 9 : "");
}

/* An ERROR event: a Status. */
static void watch_error(struct watch_state *ws, const json_t *st)
{
    const char *m = json_string_value(json_object_get(st, "message"));

    if (json_integer_value(json_object_get(st, "code")) == 410) {
        ws->gone = true;
    } else if (rest_status_too_large(st)) {
        ws->too_large = true;
        current_of(m, ws->current, sizeof(ws->current));
    } else {
        ws->failed = true;
        log_debug("watch of %s: %s", ws->inf->name, m ? m : "ERROR event");
    }
}

static bool on_event(void *ctx, json_t *ev)
{
    struct watch_state *ws = ctx;
    const char *type = json_string_value(json_object_get(ev, "type"));
    json_t *obj = json_object_get(ev, "object");
    const char *rv = json_string_value(
        json_object_get(json_object_get(obj, "metadata"), "resourceVersion"));
    char key[512];

    if (!type || !obj)
        return false;
    if (strcmp(type, "ERROR") == 0) {
        watch_error(ws, obj);
        return false;
    }
    ws->events++;
    if (rv)
        snprintf(ws->inf->rv, sizeof(ws->inf->rv), "%s", rv);
    if (strcmp(type, "BOOKMARK") == 0 || !cache_key_of(obj, key, sizeof(key)))
        return true;
    if (strcmp(type, "DELETED") == 0) {
        cache_del(ws->inf->cache, key);
    } else {
        json_t *keep = kept(ws->inf, obj);

        if (keep)
            cache_set(ws->inf->cache, key, keep, true);
        json_decref(keep);
    }
    return true;
}

/* A list is due after a watch that did not end at its timeout: at a random
 * moment within RELIST_SPREAD_MS. */
static void relist_spread(struct informer *inf)
{
    inf->relist_at_ms = clock_mono_ms() + (uint64_t)rand() % (RELIST_SPREAD_MS + 1);
    __atomic_store_n(&inf->relist, true, __ATOMIC_RELEASE);
}

/* 410: the server no longer has our resourceVersion's history. */
static void expired(struct informer *inf)
{
    log_info("watch of %s expired; listing again", inf->name);
    relist_spread(inf);
    set_unsynced(inf, "relisting after its watch expired");
    answered(inf);
}

/* "Too large resource version": the server is behind what we saw, so its
 * state went back. Not an outage: the gate is left alone. */
static void too_large(struct informer *inf, const char *current)
{
    if (*current)
        note_reset(inf, inf->rv, current);
    relist_spread(inf);
    set_unsynced(inf, "relisting after the API server's state was reset");
    answered(inf);
}

/* One watch, and what comes after it: a resume, or a list. */
static void watch_once(struct informer *inf)
{
    struct watch_state ws = {.inf = inf};
    int timeout_s = inf->timeout_s > 0 ? inf->timeout_s : watch_timeout_s();
    uint64_t start = clock_mono_ms();
    char path[1200];
    struct error e = {0};
    const json_t *st;
    err_t rc;

    snprintf(path, sizeof(path),
             "%s?%s&watch=true&allowWatchBookmarks=true&resourceVersion=%s&timeoutSeconds=%d",
             inf->path, inf->query, inf->rv, timeout_s);
    rc = rest_stream(inf->kube, path, on_event, &ws, &e);
    if (rest_gate_stopped(inf->gate))
        return;
    if (ws.events)
        inf->reset_logged = false; /* it works again: the next reset is news */
    st = rest_last_status(inf->kube);
    if (rc && rest_status_too_large(st)) {
        ws.too_large = true;
        current_of(json_string_value(json_object_get(st, "message")), ws.current,
                   sizeof(ws.current));
    }
    if (ws.gone || rc == ERR_GONE) {
        expired(inf);
        return;
    }
    if (ws.too_large) {
        too_large(inf, ws.current);
        return;
    }
    if (rc) {
        failed(inf);
        log_debug("watch of %s ended: %s", inf->name, error_msg(&e));
    } else {
        answered(inf);
    }
    /* Anything but the normal end, at the timeout (95% of it: the clock
     * started before the connection) after a sign of life, calls for a list. */
    if (rc || ws.failed || !ws.events || (clock_mono_ms() - start) * 20 < timeout_s * 19000ull)
        relist_spread(inf);
}

/* One list or watch. Lists come at most one a second: a server that ends
 * every watch so that a list must follow (410, too large, at once), or
 * fails every list, is not asked in a loop; a collection not served waits
 * 'missing_ms' when set. */
static void step(struct informer *inf)
{
    uint64_t t = clock_mono_ms(), pause = LIST_EVERY_MS;
    uint64_t due;

    if (inf->bad_list_ms > pause)
        pause = inf->bad_list_ms;
    if (informer_missing(inf) && inf->missing_ms > pause)
        pause = inf->missing_ms;
    due = inf->listed_ms + pause + (uint64_t)rand() % (LIST_SPREAD_MS + 1);

    if (!inf->relist && inf->rv[0]) {
        watch_once(inf);
        return;
    }
    if (inf->relist_at_ms > due)
        due = inf->relist_at_ms;
    if (t < due && !rest_gate_sleep(inf->gate, due - t))
        return;
    inf->listed_ms = clock_mono_ms();
    if (informer_list(inf))
        return; /* logged; the next step lists again */
}

void *informer_run(void *arg)
{
    struct informer *inf = arg;

    assert(inf->gate); /* without it the loop never ends */
    while (!rest_gate_stopped(inf->gate))
        step(inf);
    return NULL;
}
