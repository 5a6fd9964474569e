/* SPDX-License-Identifier: Apache-2.0 */
/* api_watch.c - GET /v1/watch: the NDJSON change feed. A watcher owns only
 * a cursor and a buffer of lines not yet sent. It reads the in-memory ring
 * while it keeps up, and the change log in short read transactions when it
 * is behind the ring (after a restart, or when slow); never does it hold a
 * read transaction while waiting. It is a stream source (stream.h): the
 * stream loop pulls it after every publish and when a bookmark is due, and
 * it never blocks. Watchers that start without 'since' at the same revision
 * with the same filter share one immutable serialised snapshot, counted by
 * reference: a thousand watchers that do not read hold one copy, not a
 * thousand. What all watchers hold unsent (their buffers, each snapshot
 * once) is counted against the budget of --watch-memory, which the stream
 * loop keeps by shedding the watchers furthest behind. */
#define LOG_MOD "watch"
#include "../common/common.h"
#include "../common/clock.h"
#include "../common/jsonx.h"
#include "../common/names.h"
#include "api.h"
#include "http.h"

#include <assert.h>
#include <ctype.h>
#include <pthread.h>
#include <stdatomic.h>

#define BOOKMARK_MS 10000 /* a bookmark at least this often */
#define CATCHUP_ROWS 512  /* change-log rows per read transaction */
#define NO_DEADLINE UINT64_MAX

/* The ADDED lines of every object matching a filter at revision 'rev'.
 * Immutable once built; freed with its last reference. */
struct snap {
    atomic_long refs; /* each watcher's; changed under the cache's 'mu' */
    uint64_t rev;     /* its revision */
    char kind[16];    /* its filter: kind or "" */
    char ns[64];      /* namespace or "" */
    char *data;       /* the lines; owned */
    size_t len;       /* their bytes */
};

/* What watchers share: the last snapshot built, for the next watcher to
 * share while a watcher holds it, and the count of the bytes they hold. */
struct watch_cache {
    pthread_mutex_t mu;       /* guards 'last' and the snapshots' 'refs' */
    pthread_mutex_t build_mu; /* one snapshot built at a time: a burst of watchers at one
                               * revision waits for the first one's and shares it */
    struct snap *last;        /* no reference of its own: NULL once its last watcher let go */
    atomic_size_t held;       /* bytes: every watcher's buffer, and each snapshot once */
    size_t budget;            /* bytes: the stream loop sheds watchers while 'held' is above */
    char *shed_line;          /* the last line of a shed watcher; owned */
    size_t shed_len;          /* its bytes */
};

struct watcher {
    struct api *api;        /* borrowed */
    char kind[16];          /* filter, or "" */
    char ns[64];            /* filter, or "" */
    struct feed_filter flt; /* points into kind/ns */
    uint64_t cursor;        /* last revision looked at */
    char *buf;              /* lines not yet handed to the stream */
    size_t len, cap;        /* used, allocated */
    size_t counted;         /* bytes of 'buf' counted in the cache's 'held' */
    uint64_t buf_rev;       /* 'buf''s lines are of revisions after this one */
    uint64_t next_bookmark; /* monotonic ms */
    uint64_t end_at;        /* monotonic ms, or NO_DEADLINE */
    bool from_log;          /* reading the change log, not the ring */
    bool ended;             /* send what is buffered, then end */
    bool handed;            /* 'buf' was handed to the stream last pull */
    bool again;             /* more change log to read: pull again soon */
    struct snap *snap;      /* the initial snapshot, until it is written; one reference */
};

/* Let go of one reference to 'sn' (NULL: none); the last frees it, and the
 * cache forgets it: a snapshot no watcher holds is not kept. */
static void snap_release(struct watch_cache *wc, struct snap *sn)
{
    bool last;

    if (!sn)
        return;
    pthread_mutex_lock(&wc->mu);
    last = atomic_fetch_sub(&sn->refs, 1) == 1;
    if (last && wc->last == sn)
        wc->last = NULL;
    pthread_mutex_unlock(&wc->mu);
    if (!last)
        return;
    atomic_fetch_sub(&wc->held, sn->len);
    free(sn->data);
    free(sn);
}

/* Make the cache's count agree with 'w''s buffer. */
static void count_buf(struct watcher *w)
{
    struct watch_cache *wc = w->api->watch_cache;

    if (!wc || w->cap == w->counted)
        return;
    if (w->cap > w->counted)
        atomic_fetch_add(&wc->held, w->cap - w->counted);
    else
        atomic_fetch_sub(&wc->held, w->counted - w->cap);
    w->counted = w->cap;
}

static void drop_buf(struct watcher *w)
{
    free(w->buf);
    w->buf = NULL;
    w->len = 0;
    w->cap = 0;
    count_buf(w);
}

static bool snap_fits(const struct snap *sn, const struct watcher *w, uint64_t rev)
{
    return sn && sn->rev == rev && strcmp(sn->kind, w->kind) == 0 && strcmp(sn->ns, w->ns) == 0;
}

/* The snapshot is kept as long as a watcher is slow: what it holds is what
 * the budget counts, not the buffer's doubling room. */
static void shrink(char **data, size_t len, size_t cap)
{
    char *p = len < cap ? realloc(*data, len ? len : 1) : NULL;

    if (p)
        *data = p;
}

/* The cached snapshot when it fits 'w' now, with a reference taken; NULL
 * otherwise. */
static struct snap *snap_cached(struct watch_cache *wc, struct watcher *w)
{
    struct snap *sn;

    pthread_mutex_lock(&wc->mu);
    sn = wc->last;
    if (snap_fits(sn, w, store_revision(w->api->store)))
        atomic_fetch_add(&sn->refs, 1);
    else
        sn = NULL;
    pthread_mutex_unlock(&wc->mu);
    return sn;
}

/* The snapshot for 'w''s filter now: the cached one when no change was
 * committed since it was built, else a new one, cached in its place. Builds
 * take turns (build_mu), so watchers arriving together while the first
 * builds share its snapshot instead of each building a copy. */
static err_t snap_get(struct watcher *w, struct snap **out)
{
    struct watch_cache *wc = w->api->watch_cache;
    struct snap *sn = snap_cached(wc, w);
    size_t cap = 0;
    err_t rc;

    if (sn) {
        *out = sn;
        return ERR_OK;
    }
    pthread_mutex_lock(&wc->build_mu);
    sn = snap_cached(wc, w); /* built by the one before, while this one waited */
    if (sn) {
        pthread_mutex_unlock(&wc->build_mu);
        *out = sn;
        return ERR_OK;
    }
    sn = calloc(1, sizeof(*sn));
    if (!sn) {
        pthread_mutex_unlock(&wc->build_mu);
        return ERR_NOMEM;
    }
    rc = store_snapshot(w->api->store, &w->flt, &sn->data, &sn->len, &cap, &sn->rev);
    if (rc) {
        pthread_mutex_unlock(&wc->build_mu);
        free(sn->data);
        free(sn);
        return rc;
    }
    shrink(&sn->data, sn->len, cap);
    memcpy(sn->kind, w->kind, sizeof(sn->kind));
    memcpy(sn->ns, w->ns, sizeof(sn->ns));
    atomic_init(&sn->refs, 1);
    atomic_fetch_add(&wc->held, sn->len);
    pthread_mutex_lock(&wc->mu);
    wc->last = sn;
    pthread_mutex_unlock(&wc->mu);
    pthread_mutex_unlock(&wc->build_mu);
    *out = sn;
    return ERR_OK;
}

/* The line a watcher shed for the budget ends with, when it can be sent:
 * built once, so that shedding allocates nothing. A 429, as the API server
 * answers a client it will not serve now: resume after a pause. */
static char *shed_line(size_t *len)
{
    json_t *st = http_status_json(
        429, "TooManyRequests",
        "this watch fell too far behind: it held more unsent data than podresd's watchers may "
        "hold together (--watch-memory); read faster, or watch again after a pause");
    json_t *ev = json_pack("{s:s,s:o}", "type", "ERROR", "object", st);
    char *line = ev ? jsonx_dumps_line(ev, len) : NULL;

    json_decref(ev);
    return line;
}

err_t api_watch_init(struct api *api, size_t budget)
{
    struct watch_cache *wc = calloc(1, sizeof(*wc));

    if (!wc)
        return ERR_NOMEM;
    wc->shed_line = shed_line(&wc->shed_len);
    if (!wc->shed_line) {
        free(wc);
        return ERR_NOMEM;
    }
    pthread_mutex_init(&wc->mu, NULL);
    pthread_mutex_init(&wc->build_mu, NULL);
    atomic_init(&wc->held, 0);
    wc->budget = budget;
    api->watch_cache = wc;
    return ERR_OK;
}

static size_t total_held(void *ctx)
{
    struct watch_cache *wc = ctx;

    return atomic_load(&wc->held);
}

void api_watch_serve(struct api *api, struct streams *s)
{
    struct watch_cache *wc = api->watch_cache;

    if (wc && wc->budget)
        streams_set_budget(s, wc->budget, total_held, wc);
}

void api_watch_release(struct api *api)
{
    struct watch_cache *wc = api->watch_cache;

    if (!wc)
        return;
    /* The streams are gone, and every snapshot with them. */
    assert(!wc->last && atomic_load(&wc->held) == 0);
    pthread_mutex_destroy(&wc->mu);
    pthread_mutex_destroy(&wc->build_mu);
    free(wc->shed_line);
    free(wc);
    api->watch_cache = NULL;
}

static void watcher_free(void *cls)
{
    struct watcher *w = cls;

    feed_watcher_add(w->api->feed, -1);
    snap_release(w->api->watch_cache, w->snap);
    drop_buf(w);
    free(w);
}

static int add_line(struct watcher *w, json_t *obj)
{
    size_t n = 0;
    char *line = jsonx_dumps_line(obj, &n);

    json_decref(obj);
    if (!line)
        return -1;
    if (w->len + n > w->cap) {
        size_t ncap = w->cap ? w->cap * 2 : 4096;
        char *nb;

        while (ncap < w->len + n)
            ncap *= 2;
        nb = realloc(w->buf, ncap);
        if (!nb) {
            free(line);
            return -1;
        }
        w->buf = nb;
        w->cap = ncap;
    }
    memcpy(w->buf + w->len, line, n);
    w->len += n;
    free(line);
    return 0;
}

static void add_expired(struct watcher *w)
{
    json_t *st = http_status_json(410, "Expired",
                                  "the requested revision is no longer kept; list again");

    add_line(w, json_pack("{s:s,s:o}", "type", "ERROR", "object", st));
    w->ended = true;
}

/* Read one page of the change log for a watcher catching up from it; back
 * to the feed once the log has nothing newer than the feed's head, or the
 * page was empty. */
static void log_page(struct watcher *w)
{
    err_t rc = store_changes_after(w->api->store, &w->cursor, &w->flt, CATCHUP_ROWS, &w->buf,
                                   &w->len, &w->cap);

    if (rc == ERR_GONE)
        add_expired(w);
    else if (rc)
        w->ended = true;
    else if (w->cursor >= feed_head(w->api->feed) || w->len == 0)
        w->from_log = false;
}

/* Add at least one line if there is one now, or set 'ended'. A filtered
 * watcher far behind may read pages of the log that hold nothing for it:
 * after a few it sets 'again' and lets the other streams have the loop. */
static void refill(struct watcher *w, uint64_t now)
{
    enum feed_read_result r;
    int pages = 0;

    w->again = false;
    while (w->len == 0 && !w->ended) {
        if (now >= w->end_at || w->api->stopping) {
            w->ended = true;
            break;
        }
        if (now >= w->next_bookmark) {
            w->next_bookmark = now + BOOKMARK_MS;
            if (add_line(w, json_pack("{s:s,s:I}", "type", "BOOKMARK", "revision",
                                      (json_int_t)w->cursor)))
                w->ended = true;
            continue;
        }
        if (w->from_log) {
            if (pages++ == 4) {
                w->again = true;
                break;
            }
            log_page(w);
            continue;
        }
        r = feed_read(w->api->feed, &w->cursor, &w->flt, &w->buf, &w->len, &w->cap);
        if (r == FEED_BEHIND)
            w->from_log = true;
        else if (r == FEED_CLOSED)
            w->ended = true;
        else if (r == FEED_EMPTY)
            break;
    }
}

static enum stream_pull pull(void *cls, uint64_t now, const char **data, size_t *len,
                             uint64_t *wake_ms)
{
    struct watcher *w = cls;

    /* The bytes handed out last time have been written: the buffer goes,
     * so an idle watcher holds none. The snapshot goes first. */
    if (w->handed && w->snap) {
        snap_release(w->api->watch_cache, w->snap);
        w->snap = NULL;
        w->handed = false;
    }
    if (w->snap && w->snap->len) {
        *data = w->snap->data;
        *len = w->snap->len;
        w->handed = true;
        return STREAM_DATA;
    }
    snap_release(w->api->watch_cache, w->snap);
    w->snap = NULL;
    if (w->handed)
        drop_buf(w);
    w->handed = false;
    if (!w->len)
        w->buf_rev = w->cursor;
    refill(w, now);
    count_buf(w);
    if (w->len) {
        *data = w->buf;
        *len = w->len;
        w->handed = true;
        return STREAM_DATA;
    }
    if (w->ended)
        return STREAM_END;
    *wake_ms = w->again ? now : w->next_bookmark < w->end_at ? w->next_bookmark : w->end_at;
    return STREAM_IDLE;
}

/* For the budget: the watcher's buffer and its share of its snapshot; the
 * age is the revision its oldest unsent bytes are of. */
static size_t held(void *cls, uint64_t *age)
{
    struct watcher *w = cls;
    size_t n = w->cap;
    long refs;

    *age = w->buf_rev;
    if (!w->snap)
        return n;
    refs = atomic_load(&w->snap->refs);
    *age = w->snap->rev;
    n += w->snap->len / (size_t)(refs > 0 ? refs : 1);
    return n ? n : 1;
}

static void shed(void *cls, const char **data, size_t *len)
{
    struct watcher *w = cls;
    struct watch_cache *wc = w->api->watch_cache;

    snap_release(wc, w->snap);
    w->snap = NULL;
    drop_buf(w);
    w->handed = false;
    w->ended = true;
    metrics_count(w->api->metrics, METRICS_WATCH_SHED);
    *data = wc->shed_line;
    *len = wc->shed_len;
}

static const struct stream_src watch_src = {pull, watcher_free, held, shed};

/* Parse and check the query; fills the filter fields. */
static err_t parse_query(struct api_req *r, struct watcher *w, bool *has_since)
{
    const char *since = api_arg(r, "since"), *kind = api_arg(r, "kind");
    const char *ns = api_arg(r, "namespace"), *ts = api_arg(r, "timeoutSeconds");
    const char *rv = api_arg(r, "resourceVersion"); /* as Kubernetes clients spell it */
    char *end;
    unsigned long long v;

    if (since && rv) {
        return errorf(&r->err, ERR_INVAL, "give since or resourceVersion, not both");
    }
    if (rv && strcmp(rv, "0") != 0) /* "0": from anything, as a list from the cache */
        since = rv;
    *has_since = since && *since;
    if (*has_since) {
        errno = 0;
        v = strtoull(since, &end, 10);
        if (errno || *end || !isdigit((unsigned char)since[0])) { /* not " 5", "+5" */
            return errorf(&r->err, ERR_INVAL, "query %s=\"%.100s\" must be a revision",
                          since == rv ? "resourceVersion" : "since", since);
        }
        w->cursor = v;
    }
    if (kind && strcmp(kind, "PodResources") != 0 && strcmp(kind, "Device") != 0 &&
        strcmp(kind, "Reservation") != 0) {
        return errorf(&r->err, ERR_INVAL,
                      "query kind=\"%.100s\" must be PodResources, Device or Reservation", kind);
    }
    if (ns && !names_is_dns1123_label(ns)) {
        return errorf(&r->err, ERR_INVAL, "query namespace=\"%.100s\" is not a namespace", ns);
    }
    if (ts) {
        errno = 0;
        v = strtoull(ts, &end, 10);
        if (errno || *end || !isdigit((unsigned char)ts[0]) || v > 86400 * 7) {
            return errorf(&r->err, ERR_INVAL, "query timeoutSeconds=\"%.100s\" is invalid", ts);
        }
        w->end_at = v ? clock_mono_ms() + v * 1000 : NO_DEADLINE;
    }
    snprintf(w->kind, sizeof(w->kind), "%s", kind ? kind : "");
    snprintf(w->ns, sizeof(w->ns), "%s", ns ? ns : "");
    w->flt.kind = kind ? w->kind : NULL;
    w->flt.ns = ns ? w->ns : NULL;
    return ERR_OK;
}

/* The first lines: a snapshot and the initial-events bookmark, or the first
 * page of the change log after 'since' (410 now rather than in the stream). */
static err_t first_lines(struct api_req *r, struct watcher *w, bool has_since)
{
    uint64_t rev = 0;
    err_t rc;

    if (has_since) {
        w->buf_rev = w->cursor;
        rc = store_changes_after(w->api->store, &w->cursor, &w->flt, CATCHUP_ROWS, &w->buf, &w->len,
                                 &w->cap);
        if (rc == ERR_GONE && w->cursor > (rev = store_revision(w->api->store)))
            errorf(&r->err, rc, /* a restored or replaced database */
                   "revision %llu is newer than this podresd's (%llu): list again",
                   (unsigned long long)w->cursor, (unsigned long long)rev);
        else if (rc == ERR_GONE)
            errorf(&r->err, rc,
                   "too old resource version: %llu is no longer kept (the change log keeps "
                   "the last changes only); list again",
                   (unsigned long long)w->cursor);
        w->from_log = true;
        return rc;
    }
    if (w->api->watch_cache) {
        rc = snap_get(w, &w->snap);
        if (!rc)
            rev = w->snap->rev;
    } else {
        rc = store_snapshot(w->api->store, &w->flt, &w->buf, &w->len, &w->cap, &rev);
    }
    if (rc)
        return rc;
    w->cursor = rev;
    w->buf_rev = rev;
    w->from_log = true;
    if (add_line(w, json_pack("{s:s,s:I,s:b}", "type", "BOOKMARK", "revision", (json_int_t)rev,
                              "initialEventsEnd", 1)))
        return ERR_NOMEM;
    return ERR_OK;
}

err_t api_watch(struct api_req *r, struct api_resp *out)
{
    struct watcher *w = calloc(1, sizeof(*w));
    bool has_since = false;
    err_t rc;

    if (!w)
        return ERR_NOMEM;
    w->api = r->api;
    w->end_at = NO_DEADLINE;
    w->next_bookmark = clock_mono_ms() + BOOKMARK_MS;
    rc = parse_query(r, w, &has_since);
    if (!rc)
        rc = first_lines(r, w, has_since);
    if (rc) {
        snap_release(w->api->watch_cache, w->snap);
        free(w->buf);
        free(w);
        return rc;
    }
    count_buf(w);
    feed_watcher_add(w->api->feed, 1);
    out->status = 200;
    out->stream = true;
    out->src = &watch_src;
    out->src_cls = w;
    out->content_type = "application/x-ndjson";
    return ERR_OK;
}
