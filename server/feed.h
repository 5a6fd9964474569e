/* SPDX-License-Identifier: Apache-2.0 */
/* feed.h - the change-feed hub: an in-memory ring of the most recent change
 * events (already serialised as NDJSON lines). The store publishes after
 * COMMIT and the notify hook tells the stream loop; watchers keep only a
 * cursor (a revision) and copy lines out, never waiting inside the feed.
 * Publishing never waits for a watcher. Revisions in the ring are
 * contiguous. Thread-safe: one mutex. */
#ifndef PODRES_FEED_H
#define PODRES_FEED_H
#include <stddef.h>
#include <stdint.h>

#include "../common/err.h"

/* One change event; 'line' ends with "\n". */
struct feed_event {
    uint64_t rev;  /* its revision */
    char kind[16]; /* PodResources, Device or Reservation */
    char *ns;      /* namespace ("" for devices); owned */
    char *line;    /* the NDJSON line; owned */
    size_t len;    /* strlen(line) */
};

/* What a watcher wants: NULL fields match everything. Borrowed. */
struct feed_filter {
    const char *kind; /* exact kind or NULL */
    const char *ns;   /* exact namespace or NULL */
};

enum feed_read_result {
    FEED_GOT,    /* lines were copied; *cursor advanced */
    FEED_EMPTY,  /* nothing new (the cursor may have advanced over filtered events) */
    FEED_BEHIND, /* cursor is older than the ring: read the change log instead */
    FEED_CLOSED, /* the hub is shutting down */
};

struct feed;

/* 'capacity' events are kept. 'head' is the store's revision at start. New, or NULL. */
struct feed *feed_new(size_t capacity, uint64_t head);
void feed_free(struct feed *f); /* NULL is a no-op */
/* Keep at most 'max_bytes' of lines as well (0: no limit, the default); the
 * newest event always stays. Memory, not correctness: older cursors get
 * FEED_BEHIND and read the change log. */
void feed_limit_bytes(struct feed *f, size_t max_bytes);

/* Append 'n' events with contiguous revisions head+1..; steals their ns and
 * line (the array itself stays the caller's). Wakes every watcher. */
void feed_publish(struct feed *f, struct feed_event *ev, size_t n);

/* Make every read return FEED_CLOSED from now on, and notify. */
void feed_close(struct feed *f);

/* Call fn(ctx) after every publish and at close, under the feed's lock:
 * fn must be quick and must not call into the feed. NULL fn: none. */
void feed_set_notify(struct feed *f, void (*fn)(void *), void *ctx);

/* Append the lines of events after *cursor that match 'flt' to the growable
 * buffer *buf (*len bytes used, *cap allocated; grown with realloc), about
 * 64 KiB a call but always whole lines, and advance *cursor over every event
 * looked at. Never waits. */
enum feed_read_result feed_read(struct feed *f, uint64_t *cursor, const struct feed_filter *flt,
                                char **buf, size_t *len, size_t *cap);

/* The last published revision. */
uint64_t feed_head(struct feed *f);
/* Watchers currently registered (for metrics). */
void feed_watcher_add(struct feed *f, int delta);
long feed_watchers(struct feed *f);

/* True when 'ev' passes 'flt'. */
int feed_match(const struct feed_filter *flt, const char *kind, const char *ns);

#endif
