/* SPDX-License-Identifier: Apache-2.0 */
/* changelog.h - the change log and the node-wide revision. Every event a
 * write emits takes the next revision and is one row of the 'changes'
 * table, laid out as a ring of 'ring' slots (revision r in slot r % ring,
 * overwritten in place a ring later, never trimmed), so the newest row is
 * the revision and no counter is written. Inside a write batch it collects
 * the batch's events; when the batch commits it moves the revision and
 * hands them to the feed (feed.h). It also reads the log back for a watch
 * that catches up. Not the group commit that opens and ends batches
 * (commit.h), nor the objects' JSON (store_view.h).
 *
 * Thread safety: all but 'rev' belong to the writer and are used under the
 * writer's lock only (commit.h); 'rev' is written under that lock and read
 * atomically by anyone (changelog_revision). changelog_read and
 * changelog_db_revision take any connection in a read transaction. */
#ifndef PODRES_CHANGELOG_H
#define PODRES_CHANGELOG_H
#include <jansson.h>
#include <sqlite3.h>
#include <stddef.h>
#include <stdint.h>

#include "../common/err.h"
#include "../common/strbuf.h"
#include "feed.h"

/* What the change log asks of the history (store_histw.c): that the
 * operations a row holds be applied before the ring overwrites the row. */
struct changelog_keeper {
    void *arg; /* given to 'keep' */
    /* Apply every operation of the log up to the open batch's last
       revision; called before revision 'rev' overwrites revision
       'rev' - ring when that is past 'kept'. Sets 'kept'. */
    err_t (*keep)(void *arg, uint64_t rev);
};

struct changelog {
    uint64_t ring;                  /* slots of the ring, the revisions kept (>= 1) */
    sqlite3 *wdb;                   /* the write connection; borrowed, set by changelog_open() */
    struct feed *feed;              /* gets each committed batch's events; borrowed, may be NULL */
    uint64_t rev;                   /* the last committed revision (atomic for readers) */
    uint64_t tx_rev;                /* the last revision taken inside the open batch */
    struct feed_event *ev;          /* the open batch's events, revisions rev+1..tx_rev */
    size_t nev;                     /* events in 'ev': always tx_rev - rev */
    size_t cap;                     /* slots allocated in 'ev' */
    struct strbuf hist;             /* the history's operations for the next row's 'hist'
                                       column (schema/0010_history_ops.sql); empty: NULL */
    uint64_t kept;                  /* revisions up to this one have no operation left to
                                       apply: the ring may overwrite them */
    uint64_t hist_rev;              /* the last revision whose row took operations (a
                                       rolled-back one too) */
    struct changelog_keeper keeper; /* NULL 'keep': no operations are written */
};

/* Where a write of the batch began: changelog_undo() goes back to it. */
struct changelog_mark {
    uint64_t rev; /* tx_rev then */
    size_t nev;   /* nev then */
};

/* 'ring' >= 1; 'feed' may be NULL (changelog_set_feed). */
void changelog_init(struct changelog *cl, uint64_t ring, struct feed *feed);
/* Free the events of a batch left open. An unused struct is fine. */
void changelog_release(struct changelog *cl);
/* At open, on the write connection 'wdb' (borrowed; kept for the writes):
 * find the revision and lay the ring out for cl->ring slots if it was laid
 * out for another number (or not yet), keeping the newest revisions that
 * fit; a log that ends before meta.revision (a schema 1 database) is
 * emptied. One transaction, which writes nothing when the layout is right. */
err_t changelog_open(struct changelog *cl, sqlite3 *wdb) WARN_UNUSED;
/* Attach the feed; the writer's lock held. */
void changelog_set_feed(struct changelog *cl, struct feed *feed);
/* The last committed revision. Any thread. */
uint64_t changelog_revision(struct changelog *cl);

/* The newest revision of a log laid out as a ring of 'ring' slots on 'db',
 * looked for first at 'guess' and a few after it; 0 when the log is empty. */
err_t changelog_head(sqlite3 *db, uint64_t ring, uint64_t guess, uint64_t *head) WARN_UNUSED;
/* The revision as the database 'db' holds it, inside a read transaction on
 * it: the head of the log, looked for from changelog_revision(). */
err_t changelog_db_revision(struct changelog *cl, sqlite3 *db, uint64_t *rev) WARN_UNUSED;
/* The event lines after *cursor matching 'flt', at most 'limit' rows looked
 * at, appended with their newlines to the growable buffer *buf (*len bytes
 * used, *cap allocated), from 'db' in a read transaction; *cursor advances
 * over every row looked at. ERR_GONE (*cursor kept) when the change after
 * *cursor is no longer kept, or *cursor is ahead of the log. */
err_t changelog_read(struct changelog *cl, sqlite3 *db, uint64_t *cursor,
                     const struct feed_filter *flt, size_t limit, char **buf, size_t *len,
                     size_t *cap) WARN_UNUSED;

/* ---- the writer's side: the writer's lock held ---- */

/* A batch opens (after BEGIN): no event is pending. */
void changelog_begin(struct changelog *cl);
/* Where the log of the open batch is now. */
struct changelog_mark changelog_mark(const struct changelog *cl);
/* Drop the events emitted after 'm' (their write was rolled back), and
 * the history's operations not in a row yet. */
void changelog_undo(struct changelog *cl, struct changelog_mark m);
/* The batch was rolled back: drop its events and operations not in a row
 * yet, the revision stays. */
void changelog_abort(struct changelog *cl);
/* The batch committed: its last revision becomes the revision and its
 * events go to the feed. */
void changelog_commit(struct changelog *cl);
/* The revision the next event of the open batch takes. */
uint64_t changelog_next(const struct changelog *cl);
/* Record event 'type' ("ADDED", "MODIFIED", "DELETED") of 'kind' in
 * namespace 'ns' (NULL: none) for the object 'obj' (borrowed), whose
 * "revision" must be changelog_next(): one row of the log, one pending
 * event; takes the revision. The row takes the history's operations in
 * cl->hist, which empties. */
err_t changelog_emit(struct changelog *cl, const char *type, const char *kind, const char *ns,
                     const json_t *obj) WARN_UNUSED;
/* The same for an object already serialised: 'n' bytes of compact JSON. */
err_t changelog_emit_text(struct changelog *cl, const char *type, const char *kind, const char *ns,
                          const char *obj, size_t n) WARN_UNUSED;

#endif
