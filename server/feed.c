/* SPDX-License-Identifier: Apache-2.0 */
/* feed.c - the ring of recent events. It holds no SQLite handle and never
 * blocks a reader: a watcher behind the ring reads the change log itself,
 * and the stream loop learns of new events through the notify hook. */
#define LOG_MOD "feed"
#include "../common/common.h"
#include "feed.h"

#include <assert.h>
#include <pthread.h>

#define FEED_CHUNK 65536 /* bytes copied out per wait, unless one line is longer */

/* Lock: 'mu' guards every field below it. */
struct feed {
    pthread_mutex_t mu;
    void (*notify)(void *);  /* called on publish and close, or NULL */
    void *notify_ctx;        /* its argument */
    struct feed_event *ring; /* 'cap' slots; slot = rev % cap */
    size_t cap;              /* ring size in events */
    size_t bytes;            /* line bytes held in the ring */
    size_t max_bytes;        /* older lines are let go beyond this; 0: no limit */
    uint64_t first;          /* oldest revision in the ring; head+1 when empty */
    uint64_t head;           /* last published revision */
    bool closed;             /* shutting down */
    long watchers;           /* open watch streams */
};

struct feed *feed_new(size_t capacity, uint64_t head)
{
    struct feed *f;

    assert(capacity > 0);
    f = calloc(1, sizeof(*f));
    if (!f)
        return NULL;
    f->ring = calloc(capacity, sizeof(*f->ring));
    if (!f->ring) {
        free(f);
        return NULL;
    }
    f->cap = capacity;
    f->head = head;
    f->first = head + 1;
    pthread_mutex_init(&f->mu, NULL);
    return f;
}

void feed_free(struct feed *f)
{
    size_t i;

    if (!f)
        return;
    for (i = 0; i < f->cap; i++) {
        free(f->ring[i].ns);
        free(f->ring[i].line);
    }
    free(f->ring);
    pthread_mutex_destroy(&f->mu);
    free(f);
}

void feed_set_notify(struct feed *f, void (*fn)(void *), void *ctx)
{
    pthread_mutex_lock(&f->mu);
    f->notify = fn;
    f->notify_ctx = ctx;
    pthread_mutex_unlock(&f->mu);
}

void feed_limit_bytes(struct feed *f, size_t max_bytes)
{
    pthread_mutex_lock(&f->mu);
    f->max_bytes = max_bytes;
    pthread_mutex_unlock(&f->mu);
}

static void slot_clear(struct feed *f, struct feed_event *slot)
{
    f->bytes -= slot->len;
    free(slot->ns);
    free(slot->line);
    slot->ns = NULL;
    slot->line = NULL;
    slot->len = 0;
}

void feed_publish(struct feed *f, struct feed_event *ev, size_t n)
{
    size_t i;

    assert(ev || n == 0);
    pthread_mutex_lock(&f->mu);
    for (i = 0; i < n; i++) {
        struct feed_event *slot = &f->ring[ev[i].rev % f->cap];

        /* The store publishes under its write lock, so revisions arrive in order. */
        if (ev[i].rev != f->head + 1) {
            /* A gap (should not happen): restart the ring so nothing is served wrongly. */
            f->first = ev[i].rev;
        }
        if (ev[i].rev - f->first >= f->cap)
            f->first = ev[i].rev - f->cap + 1;
        slot_clear(f, slot);
        *slot = ev[i];
        f->bytes += slot->len;
        ev[i].ns = NULL;
        ev[i].line = NULL;
        f->head = ev[i].rev;
    }
    /* Over the byte budget, the oldest lines go (the newest always stays):
     * a watcher that far behind reads the change log instead. */
    while (f->max_bytes && f->bytes > f->max_bytes && f->first < f->head)
        slot_clear(f, &f->ring[f->first++ % f->cap]);
    if (f->notify)
        f->notify(f->notify_ctx);
    pthread_mutex_unlock(&f->mu);
}

void feed_close(struct feed *f)
{
    pthread_mutex_lock(&f->mu);
    f->closed = true;
    if (f->notify)
        f->notify(f->notify_ctx);
    pthread_mutex_unlock(&f->mu);
}

int feed_match(const struct feed_filter *flt, const char *kind, const char *ns)
{
    if (!flt)
        return 1;
    if (flt->kind && strcmp(flt->kind, kind) != 0)
        return 0;
    if (flt->ns && strcmp(flt->ns, ns ? ns : "") != 0)
        return 0;
    return 1;
}

/* Append 'line' to the growable buffer. */
static int append(char **buf, size_t *len, size_t *cap, const char *line, size_t n)
{
    if (*len + n > *cap) {
        size_t ncap = *cap ? *cap : 4096;
        char *nb;

        while (ncap < *len + n)
            ncap *= 2;
        nb = realloc(*buf, ncap);
        if (!nb)
            return -1;
        *buf = nb;
        *cap = ncap;
    }
    memcpy(*buf + *len, line, n);
    *len += n;
    return 0;
}

enum feed_read_result feed_read(struct feed *f, uint64_t *cursor, const struct feed_filter *flt,
                                char **buf, size_t *len, size_t *cap)
{
    enum feed_read_result r = FEED_EMPTY;
    size_t start;

    assert(cursor && buf && len && cap);
    start = *len;
    pthread_mutex_lock(&f->mu);
    if (f->closed) {
        r = FEED_CLOSED;
    } else if (*cursor + 1 < f->first) {
        r = FEED_BEHIND;
    } else {
        while (*cursor < f->head) {
            struct feed_event *e = &f->ring[(*cursor + 1) % f->cap];

            if (feed_match(flt, e->kind, e->ns)) {
                /* At most FEED_CHUNK bytes a call, but always one whole line. */
                if (*len > start && *len - start + e->len > FEED_CHUNK)
                    break;
                if (append(buf, len, cap, e->line, e->len))
                    break;
            }
            (*cursor)++;
        }
        if (*len > start)
            r = FEED_GOT;
    }
    pthread_mutex_unlock(&f->mu);
    return r;
}

uint64_t feed_head(struct feed *f)
{
    uint64_t h;

    pthread_mutex_lock(&f->mu);
    h = f->head;
    pthread_mutex_unlock(&f->mu);
    return h;
}

void feed_watcher_add(struct feed *f, int delta)
{
    pthread_mutex_lock(&f->mu);
    f->watchers += delta;
    assert(f->watchers >= 0); /* each -1 follows its +1 */
    pthread_mutex_unlock(&f->mu);
}

long feed_watchers(struct feed *f)
{
    long n;

    pthread_mutex_lock(&f->mu);
    n = f->watchers;
    pthread_mutex_unlock(&f->mu);
    return n;
}
