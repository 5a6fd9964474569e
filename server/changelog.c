/* SPDX-License-Identifier: Apache-2.0 */
/* changelog.c - the change log as a ring of rows, the revision, the events
 * of the open batch and their hand-over to the feed. Not the batches
 * themselves (commit.c) nor the objects' JSON (store_view.c). */
#define LOG_MOD "store"
#include "../common/common.h"
#include "../common/jsonw.h"
#include "../common/strbuf.h"
#include "changelog.h"
#include "db.h"

#include <assert.h>
#include <inttypes.h>

void changelog_init(struct changelog *cl, uint64_t ring, struct feed *feed)
{
    assert(ring >= 1);
    memset(cl, 0, sizeof(*cl));
    cl->ring = ring;
    cl->feed = feed;
}

/* Free the pending events from index 'from' on. */
static void drop_from(struct changelog *cl, size_t from)
{
    size_t i;

    for (i = from; i < cl->nev; i++) {
        free(cl->ev[i].ns);
        free(cl->ev[i].line);
    }
    cl->nev = from;
}

void changelog_release(struct changelog *cl)
{
    drop_from(cl, 0);
    free(cl->ev);
    cl->ev = NULL;
    cl->cap = 0;
    strbuf_release(&cl->hist);
}

void changelog_set_feed(struct changelog *cl, struct feed *feed)
{
    cl->feed = feed;
}

uint64_t changelog_revision(struct changelog *cl)
{
    return __atomic_load_n(&cl->rev, __ATOMIC_ACQUIRE);
}

/* ---- the ring ----
 * Revision r is kept in row r % ring of 'changes' (its slot), ring being the
 * configured history (schema/0002_change_ring.sql): a write overwrites the
 * row 'ring' revisions older in place. Nothing is trimmed, and once the ring
 * is full no page is freed or allocated, where trimming would free pages and
 * write the header page in every batch that trims.
 *
 * The rows kept are one run of revisions lo..head (head - lo < ring), each
 * in its slot. So the newest is found from a guess: if the guess's slot holds
 * the guess and the next slot does not hold the next revision, the guess is
 * the newest. Else slot 0: without a row there, the run does not wrap and
 * the newest is in the last slot; with one, that row (a multiple of ring)
 * starts the newest lap, and a binary search finds the lap's end. */

#define GUESS_AHEAD 8 /* revisions past the guess tried before the search */

/* The revision in 'slot', 0 when the slot has no row (revisions start at 1). */
static err_t slot_rev(sqlite3 *db, uint64_t slot, uint64_t *rev)
{
    return db_get_u64(db, rev, "SELECT revision FROM changes WHERE slot=?", "u", slot);
}

/* Whether the head is 'guess' or one of the GUESS_AHEAD revisions after it
 * (the usual case: the revision the store knows, or a few writes on); if
 * so, *found and the head in *head. */
static err_t head_near(sqlite3 *db, uint64_t ring, uint64_t guess, uint64_t *head, bool *found)
{
    uint64_t r = 0;
    int i;
    err_t rc = slot_rev(db, guess % ring, &r);

    for (i = 0; !rc && r == guess && i < GUESS_AHEAD; i++, guess++) {
        rc = slot_rev(db, (guess + 1) % ring, &r);
        if (!rc && r != guess + 1) {
            *head = guess;
            *found = true;
            break;
        }
    }
    return rc;
}

/* The head of a log whose slot 0 holds r0 (> 0), which starts the newest
 * lap: slots 0..lo hold that lap (revisions >= r0), hi.. do not. */
static err_t head_search(sqlite3 *db, uint64_t ring, uint64_t r0, uint64_t *head)
{
    uint64_t lo = 0, hi = ring, mid, m = 0, r = r0;
    err_t rc = ERR_OK;

    assert(r0 > 0);
    while (hi - lo > 1) {
        mid = lo + (hi - lo) / 2;
        rc = slot_rev(db, mid, &m);
        if (rc)
            return rc;
        if (m >= r0) {
            lo = mid;
            r = m;
        } else {
            hi = mid;
        }
    }
    *head = r;
    return ERR_OK;
}

err_t changelog_head(sqlite3 *db, uint64_t ring, uint64_t guess, uint64_t *head)
{
    uint64_t r0 = 0;
    bool found = false;
    err_t rc;

    assert(ring >= 1);
    if (guess > 0) {
        rc = head_near(db, ring, guess, head, &found);
        if (rc || found)
            return rc;
    }
    rc = slot_rev(db, 0, &r0);
    if (rc)
        return rc;
    if (r0 != 0)
        return head_search(db, ring, r0, head);
    return db_get_u64(db, head, "SELECT revision FROM changes ORDER BY slot DESC LIMIT 1", NULL);
}

static err_t meta_get(sqlite3 *db, const char *key, uint64_t *v)
{
    return db_get_u64(db, v, "SELECT value FROM meta WHERE key=?", "t", key);
}

/* With an empty log, meta.revision: what schema 1 wrote on every commit,
 * never written since (changelog_open keeps a log that is behind it empty). */
err_t changelog_db_revision(struct changelog *cl, sqlite3 *db, uint64_t *rev)
{
    err_t rc = changelog_head(db, cl->ring, changelog_revision(cl), rev);

    if (!rc && *rev == 0)
        rc = meta_get(db, "revision", rev);
    return rc;
}

/* Move the log's rows to the slots of a ring of n (changelog_open), keeping
 * the revisions after head - n, and record n. The rows move in place,
 * through negative slots, so no two share a slot on the way (the kept
 * revisions are fewer than n apart). */
static err_t ring_relayout(sqlite3 *db, uint64_t head, uint64_t n)
{
    err_t rc = db_exec(db, "DELETE FROM changes WHERE revision<=?", "u", head > n ? head - n : 0);

    if (rc)
        return rc;
    rc = db_exec(db, "UPDATE changes SET slot=-1-(revision%?)", "u", n);
    if (rc)
        return rc;
    rc = db_exec(db, "UPDATE changes SET slot=-1-slot", NULL);
    if (rc)
        return rc;
    return db_exec(db, "UPDATE meta SET value=? WHERE key='ring'", "u", n);
}

/* The log's head at open, laid out as a ring of 'was' slots (0: slot =
 * revision); a log that ends before meta.revision (a schema 1 database) is
 * emptied, and the head is that revision. */
static err_t ring_open_head(sqlite3 *db, uint64_t was, uint64_t *head)
{
    uint64_t floor = 0;
    /* ring 0 (slot = revision) reads as a ring larger than any revision */
    err_t rc = changelog_head(db, was ? was : UINT64_MAX, 0, head);

    if (!rc)
        rc = meta_get(db, "revision", &floor);
    if (rc || *head >= floor)
        return rc;
    *head = floor;
    return db_exec(db, "DELETE FROM changes", NULL);
}

/* Inside changelog_open's transaction: the head, and the ring laid out for
 * 'n' slots if it was for another number ('*was'; 0: not laid out yet, slot
 * = revision, as the migration left it). */
static err_t ring_layout(sqlite3 *db, uint64_t n, uint64_t *was, uint64_t *head)
{
    err_t rc = meta_get(db, "ring", was);

    if (!rc)
        rc = ring_open_head(db, *was, head);
    if (!rc && *was != n)
        rc = ring_relayout(db, *head, n);
    return rc;
}

err_t changelog_open(struct changelog *cl, sqlite3 *wdb)
{
    uint64_t was = 0, head = 0, n = cl->ring;
    int rc = sqlite3_exec(wdb, "BEGIN IMMEDIATE;", NULL, NULL, NULL);
    err_t e;

    if (rc != SQLITE_OK)
        return db_err(wdb, rc, "open the change log");
    e = ring_layout(wdb, n, &was, &head);
    rc = sqlite3_exec(wdb, e ? "ROLLBACK;" : "COMMIT;", NULL, NULL, NULL);
    if (e)
        return e;
    if (rc != SQLITE_OK)
        return db_err(wdb, rc, "open the change log");
    if (was != n && (was != 0 || head > 0)) /* not for a new database */
        log_info("change log laid out as a ring of %" PRIu64 " revisions (was %" PRIu64 ")", n,
                 was);
    cl->wdb = wdb;
    cl->rev = cl->tx_rev = head;
    return ERR_OK;
}

/* ---- reading it back ---- */

/* Append revision 'rev' from its slot to 'sb' if it matches 'flt'. A slot
 * holding another revision: the one asked for was overwritten, or not kept
 * when the ring was laid out (ERR_GONE). */
static err_t read_rev(struct changelog *cl, sqlite3 *db, uint64_t rev,
                      const struct feed_filter *flt, struct strbuf *sb)
{
    sqlite3_stmt *s = NULL;
    bool row = false;
    err_t rc = db_prep(db, &s, "SELECT revision,kind,namespace,event FROM changes WHERE slot=?",
                       "u", rev % cl->ring);

    if (rc)
        return rc;
    rc = db_step(db, s, &row);
    if (rc)
        goto out;
    if (!row || (uint64_t)sqlite3_column_int64(s, 0) != rev) {
        rc = ERR_GONE;
        goto out;
    }
    if (!feed_match(flt, db_text(s, 1), db_text(s, 2)))
        goto out;
    rc = strbuf_add(sb, db_text(s, 3), (size_t)sqlite3_column_bytes(s, 3));
    if (!rc)
        rc = strbuf_add(sb, "\n", 1);
out:
    db_done(s);
    return rc;
}

err_t changelog_read(struct changelog *cl, sqlite3 *db, uint64_t *cursor,
                     const struct feed_filter *flt, size_t limit, char **buf, size_t *len,
                     size_t *cap)
{
    struct strbuf sb = {*buf, *len, *cap};
    uint64_t cur = *cursor, head = 0, rev;
    err_t rc;

    assert(*len <= *cap && (*buf || *cap == 0));
    rc = changelog_db_revision(cl, db, &head);
    if (rc)
        return rc;
    if (cur > head || (head > cl->ring && cur < head - cl->ring))
        return ERR_GONE; /* ahead of the store, or older than the history */
    for (rev = cur + 1; rev <= head && rev - *cursor <= limit; rev++) {
        rc = read_rev(cl, db, rev, flt, &sb);
        if (rc)
            break;
        cur = rev;
    }
    *buf = sb.buf;
    *len = sb.len;
    *cap = sb.cap;
    if (!rc)
        *cursor = cur;
    return rc;
}

/* ---- the writer's side ---- */

void changelog_begin(struct changelog *cl)
{
    assert(cl->nev == 0 && cl->tx_rev == cl->rev);
    cl->tx_rev = cl->rev;
}

struct changelog_mark changelog_mark(const struct changelog *cl)
{
    return (struct changelog_mark){cl->tx_rev, cl->nev};
}

void changelog_undo(struct changelog *cl, struct changelog_mark m)
{
    assert(m.nev <= cl->nev && m.rev <= cl->tx_rev);
    drop_from(cl, m.nev);
    cl->tx_rev = m.rev;
    cl->hist.len = 0;
}

void changelog_abort(struct changelog *cl)
{
    drop_from(cl, 0);
    cl->tx_rev = cl->rev;
    cl->hist.len = 0;
}

void changelog_commit(struct changelog *cl)
{
    assert(cl->nev == cl->tx_rev - cl->rev);
    __atomic_store_n(&cl->rev, cl->tx_rev, __ATOMIC_RELEASE);
    if (cl->feed && cl->nev)
        feed_publish(cl->feed, cl->ev, cl->nev); /* takes the lines and namespaces */
    drop_from(cl, 0);
}

uint64_t changelog_next(const struct changelog *cl)
{
    return cl->tx_rev + 1;
}

static err_t push_event(struct changelog *cl, const char *kind, const char *ns, char *line,
                        size_t len)
{
    struct feed_event *ev;

    if (cl->nev == cl->cap) {
        size_t ncap = cl->cap ? cl->cap * 2 : 16;
        struct feed_event *n = realloc(cl->ev, ncap * sizeof(*n));

        if (!n)
            return ERR_NOMEM;
        cl->ev = n;
        cl->cap = ncap;
    }
    ev = &cl->ev[cl->nev];
    memset(ev, 0, sizeof(*ev));
    ev->ns = strdup(ns ? ns : "");
    if (!ev->ns)
        return ERR_NOMEM;
    ev->rev = cl->tx_rev + 1;
    str_copy(ev->kind, sizeof(ev->kind), kind);
    ev->line = line;
    ev->len = len;
    cl->nev++;
    return ERR_OK;
}

/* {"type":T,"kind":K,"revision":N,"object": - the head of an event line. */
static void event_head(struct jsonw *w, const char *type, const char *kind, uint64_t rev)
{
    jsonw_lit(w, "{\"type\":");
    jsonw_str(w, type);
    jsonw_lit(w, ",\"kind\":");
    jsonw_str(w, kind);
    jsonw_lit(w, ",\"revision\":");
    jsonw_u64(w, rev);
    jsonw_lit(w, ",\"object\":");
}

/* Close the line in 'w' (released), write it to its slot and keep it for
 * the feed; the line then takes the next revision. */
static err_t emit_line(struct changelog *cl, const char *kind, const char *ns, struct jsonw *w)
{
    uint64_t rev = cl->tx_rev + 1;
    sqlite3_stmt *s = NULL;
    size_t len = 0;
    char *line;
    bool row;
    err_t rc = ERR_OK;

    jsonw_lit(w, "}\n");
    line = jsonw_detach(w, &len);
    if (!line)
        return ERR_NOMEM;
    if (cl->keeper.keep && rev > cl->ring && rev - cl->ring > cl->kept)
        rc = cl->keeper.keep(cl->keeper.arg, rev);
    line[len - 1] = '\0'; /* the row holds the line without its newline */
    if (!rc)
        rc = db_prep(cl->wdb, &s,
                     "INSERT OR REPLACE INTO changes(slot,revision,kind,namespace,event,hist) "
                     "VALUES(?,?,?,?,?,?)",
                     "uuttt", rev % cl->ring, rev, kind, ns ? ns : "", line);
    if (!rc && cl->hist.len &&
        sqlite3_bind_blob(s, 6, cl->hist.buf, (int)cl->hist.len, SQLITE_STATIC) != SQLITE_OK)
        rc = db_err(cl->wdb, sqlite3_errcode(cl->wdb), "bind a change's history");
    if (!rc)
        rc = db_step(cl->wdb, s, &row);
    db_done(s);
    line[len - 1] = '\n';
    if (!rc && cl->hist.len) {
        cl->hist.len = 0;
        cl->hist_rev = rev;
    }
    if (!rc)
        rc = push_event(cl, kind, ns, line, len);
    if (rc) {
        free(line);
        return rc;
    }
    cl->tx_rev = rev;
    return ERR_OK;
}

err_t changelog_emit(struct changelog *cl, const char *type, const char *kind, const char *ns,
                     const json_t *obj)
{
    struct jsonw w = JSONW_INIT;

    assert(cl->wdb); /* changelog_open() came first */
    assert((uint64_t)json_integer_value(json_object_get(obj, "revision")) == cl->tx_rev + 1);
    event_head(&w, type, kind, cl->tx_rev + 1);
    jsonw_json(&w, obj);
    return emit_line(cl, kind, ns, &w);
}

err_t changelog_emit_text(struct changelog *cl, const char *type, const char *kind, const char *ns,
                          const char *obj, size_t n)
{
    struct jsonw w = JSONW_INIT;

    assert(cl->wdb); /* changelog_open() came first */
    event_head(&w, type, kind, cl->tx_rev + 1);
    jsonw_raw(&w, obj, n);
    return emit_line(cl, kind, ns, &w);
}
