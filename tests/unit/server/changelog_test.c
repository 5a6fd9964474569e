/* SPDX-License-Identifier: Apache-2.0 */
/* changelog_test.c - the change log (changelog.c) through the store:
 * reading it back after a cursor, finding its head in every layout of the
 * ring, laying it out anew for another --history, and schema 1 databases
 * (store_fx.h). */
#include "store_fx.h"

/* Revisions 1..7: four GPUs, a NIC, then pod ns/a bound to gpu-0. */
static void seed_bound(struct fx *f)
{
    CHECK_OK(put_devices(f, GPU, FOUR_GPUS, NULL));                            /* 1..4 */
    CHECK_OK(put_devices(f, NIC, "{\"devices\":[{\"id\":\"nic-0\"}]}", NULL)); /* 5 */
    CHECK_OK(bind(f, "ns", "a",
                  "{\"uid\":\"ua\",\"containers\":[{\"name\":\"c\",\"devices\":[{\"resourceName\":"
                  "\"" GPU "\",\"deviceIds\":[\"gpu-0\"]}]}]}",
                  NULL, NULL, NULL)); /* 6, 7 */
}

static void test_changes_after(void)
{
    struct fx f;
    char *buf = NULL, sum[1024], ev[1024];
    size_t len = 0, cap = 0;
    uint64_t cur, chain;
    struct feed_filter resv = {"Reservation", NULL};

    if (fx_open(&f, 5))
        return;
    seed_bound(&f); /* 1..7 */
    CHECK_OK(reserve(&f, "ns", "r",
                     "{\"containers\":[{\"name\":\"c\",\"devices\":[{\"resourceName\":\"" GPU
                     "\",\"deviceIds\":[\"gpu-1\"]}]}]}",
                     NULL));                /* 8, 9 */
    CHECK_OK(release(&f, "ns", "a", NULL)); /* 10, 11 */
    CHECK_EQ_INT(store_revision(f.st), 11);
    CHECK_EQ_INT(fx_events(&f, ev, sizeof(ev)), 11);

    /* the last 5 (7..11) are kept */
    cur = 6;
    CHECK_OK(store_changes_after(f.st, &cur, NULL, 100, &buf, &len, &cap));
    CHECK_EQ_INT(cur, 11);
    chain = 6;
    CHECK_EQ_INT(summarise(buf, len, &chain, sum, sizeof(sum)), 5);
    CHECK_STREQ(sum, "MODIFIED Device gpu-0;ADDED Reservation ns/r;MODIFIED Device gpu-1;"
                     "DELETED PodResources ns/a;MODIFIED Device gpu-0");
    /* the same lines as the feed published */
    CHECK(len <= f.len && memcmp(buf, f.buf + (f.len - len), len) == 0);

    /* limit: rows looked at */
    len = 0;
    cur = 6;
    CHECK_OK(store_changes_after(f.st, &cur, NULL, 2, &buf, &len, &cap));
    CHECK_EQ_INT(cur, 8);
    CHECK_EQ_INT(summarise(buf, len, NULL, sum, sizeof(sum)), 2);

    /* a filter: the cursor still advances over every row */
    len = 0;
    cur = 6;
    CHECK_OK(store_changes_after(f.st, &cur, &resv, 100, &buf, &len, &cap));
    CHECK_EQ_INT(cur, 11);
    CHECK_EQ_INT(summarise(buf, len, NULL, sum, sizeof(sum)), 1);
    CHECK_STREQ(sum, "ADDED Reservation ns/r");

    /* up to date: nothing, fine */
    len = 0;
    cur = 11;
    CHECK_OK(store_changes_after(f.st, &cur, NULL, 100, &buf, &len, &cap));
    CHECK_EQ_INT(cur, 11);
    CHECK_EQ_INT(len, 0);

    /* beyond history, or ahead of the store: ERR_GONE, cursor kept */
    cur = 5;
    CHECK_EQ_INT(store_changes_after(f.st, &cur, NULL, 100, &buf, &len, &cap), ERR_GONE);
    CHECK_EQ_INT(cur, 5);
    cur = 0;
    CHECK_EQ_INT(store_changes_after(f.st, &cur, NULL, 100, &buf, &len, &cap), ERR_GONE);
    cur = 12;
    CHECK_EQ_INT(store_changes_after(f.st, &cur, NULL, 100, &buf, &len, &cap), ERR_GONE);
    CHECK_EQ_INT(len, 0);
    free(buf);
    fx_close(&f);
}

/* changelog_head against every layout the ring can have: ring sizes 1..16,
 * heads 0..3 rings on, a full run or a shorter one (a ring laid out anew),
 * and every guess from 0 to past the head. */
static void test_ring_head(void)
{
    static const uint64_t rings[] = {1, 2, 3, 7, 16};
    struct fx f;
    sqlite3 *db;
    uint64_t n, head, len, lo, r, guess, got;
    size_t i;
    int bad = 0, cases = 0;

    if (fx_open(&f, 100))
        return;
    db = f.st->commit.db;
    for (i = 0; i < ARRAY_SIZE(rings); i++) {
        n = rings[i];
        for (head = 0; head <= 3 * n + 2; head++) {
            for (len = 1; len <= n; len = len < n && len * 2 > n ? n : len * 2) {
                CHECK_OK(db_exec(db, "DELETE FROM changes", NULL));
                lo = head >= len ? head - len + 1 : 1;
                for (r = lo; head > 0 && r <= head; r++)
                    CHECK_OK(db_exec(db,
                                     "INSERT INTO changes(slot,revision,kind,event) "
                                     "VALUES(?,?,'Device','{}')",
                                     "uu", r % n, r));
                for (guess = 0; guess <= head + n + 2; guess++) {
                    got = 999999;
                    CHECK_OK(changelog_head(db, n, guess, &got));
                    cases++;
                    if (got != head && bad++ < 5)
                        printf("# ring %" PRIu64 " run %" PRIu64 "..%" PRIu64 " guess %" PRIu64
                               ": head %" PRIu64 "\n",
                               n, lo, head, guess, got);
                }
                if (len == n)
                    break;
            }
        }
    }
    CHECK_EQ_INT(bad, 0);
    CHECK(cases > 1000);
    CHECK_OK(db_exec(db, "DELETE FROM changes", NULL));
    fx_close(&f);
}

/* Close the store and turn its file into a schema 1 database, as an older
 * podresd left it: meta.revision 'rev' and the change log 'rows' inserts. */
static void fx_schema1(struct fx *f, uint64_t rev, const char *rows)
{
    sqlite3 *db = NULL;
    char sql[4096];

    fx_close_store(f);
    snprintf(
        sql, sizeof(sql),
        "DROP TRIGGER devices_names_ins; DROP TRIGGER devices_names_upd;"
        "DROP TRIGGER devices_names_del; DROP INDEX devices_physical; DROP INDEX devices_id;"
        "DROP TABLE aliases;"
        "DROP TABLE device_names; ALTER TABLE devices DROP COLUMN physical;"
        "ALTER TABLE devices DROP COLUMN aliases; ALTER TABLE bindings DROP COLUMN claim;"
        "ALTER TABLE resources DROP COLUMN dra;"
        "DROP TABLE changes; CREATE TABLE changes (revision INTEGER PRIMARY KEY, kind TEXT "
        "NOT NULL, namespace TEXT NOT NULL DEFAULT '', event TEXT NOT NULL);"
        "DELETE FROM meta WHERE key='ring'; DELETE FROM bindings WHERE pod='';"
        "ALTER TABLE bindings DROP COLUMN revision; ALTER TABLE pods DROP COLUMN device_keys;"
        "CREATE INDEX bindings_pod ON bindings(namespace, pod); DROP TABLE hist_bind;"
        "DROP TABLE hist_health; DROP TABLE hist_pod; DROP TABLE hist_dev;"
        "DROP TABLE hist_usage; DROP TABLE hist_ix_dev; DROP TABLE hist_pod_dev;"
        "DROP TABLE hist_unsettled; DELETE FROM meta WHERE key IN ('hist_folded','hist_replayed');"
        "UPDATE meta SET value=%" PRIu64 " WHERE key='revision'; %s PRAGMA user_version=1;",
        rev, rows);
    CHECK_EQ_INT(sqlite3_open_v2(f->path, &db, SQLITE_OPEN_READWRITE, NULL), SQLITE_OK);
    CHECK_EQ_INT(sqlite3_exec(db, sql, NULL, NULL, NULL), SQLITE_OK);
    sqlite3_close(db);
}

/* Open a database with another --history: the ring is laid out anew with the
 * newest revisions that fit, served and extended as before. Then schema 1
 * databases: their log is served after the migration, unless it ends before
 * their revision. */
static void test_ring_layout(void)
{
    struct fx f;
    char *buf = NULL, sum[1024];
    size_t len = 0, cap = 0;
    uint64_t cur, chain;
    int i;

    if (fx_open(&f, 5))
        return;
    seed_bound(&f);                         /* 1..7 */
    CHECK_OK(release(&f, "ns", "a", NULL)); /* 8, 9 */

    /* fewer slots: 7..9 kept */
    if (fx_reopen(&f, 3))
        return;
    CHECK_EQ_INT(store_revision(f.st), 9);
    cur = 6;
    CHECK_OK(store_changes_after(f.st, &cur, NULL, 100, &buf, &len, &cap));
    chain = 6;
    CHECK_EQ_INT(summarise(buf, len, &chain, sum, sizeof(sum)), 3);
    CHECK_STREQ(sum, "MODIFIED Device gpu-0;DELETED PodResources ns/a;MODIFIED Device gpu-0");
    cur = 5;
    CHECK_EQ_INT(store_changes_after(f.st, &cur, NULL, 100, &buf, &len, &cap), ERR_GONE);

    /* more slots: still 7..9, then new revisions after them */
    if (fx_reopen(&f, 50))
        return;
    CHECK_EQ_INT(store_revision(f.st), 9);
    cur = 5;
    CHECK_EQ_INT(store_changes_after(f.st, &cur, NULL, 100, &buf, &len, &cap), ERR_GONE);
    CHECK_EQ_INT(cur, 5);
    for (i = 0; i < 60; i++)
        CHECK_OK(put_devices(&f, NIC,
                             i % 2 ? "{\"devices\":[{\"id\":\"nic-0\"}]}"
                                   : "{\"devices\":[{\"id\":\"nic-0\",\"health\":\"Unhealthy\"}]}",
                             NULL)); /* 10..69 */
    CHECK_EQ_INT(store_revision(f.st), 69);
    len = 0;
    cur = 19;
    CHECK_OK(store_changes_after(f.st, &cur, NULL, 100, &buf, &len, &cap));
    CHECK_EQ_INT(cur, 69);
    chain = 19;
    CHECK_EQ_INT(summarise(buf, len, &chain, sum, sizeof(sum)), 50);
    cur = 18;
    CHECK_EQ_INT(store_changes_after(f.st, &cur, NULL, 100, &buf, &len, &cap), ERR_GONE);

    /* schema 1: rows 3..7, meta.revision 7 */
    fx_schema1(&f, 7,
               "WITH RECURSIVE r(n) AS (SELECT 3 UNION ALL SELECT n+1 FROM r WHERE n<7) INSERT "
               "INTO changes SELECT n,'Device','','{\"revision\":'||n||'}' FROM r;");
    if (fx_reopen(&f, 4))
        return;
    CHECK_EQ_INT(store_revision(f.st), 7);
    len = 0;
    cur = 3;
    CHECK_OK(store_changes_after(f.st, &cur, NULL, 100, &buf, &len, &cap));
    CHECK_EQ_INT(cur, 7);
    CHECK(len > 0 && strstr(buf, "{\"revision\":4}\n{\"revision\":5}\n") == buf);
    cur = 2;
    CHECK_EQ_INT(store_changes_after(f.st, &cur, NULL, 100, &buf, &len, &cap), ERR_GONE);
    CHECK_OK(put_devices(&f, NIC, "{\"devices\":[{\"id\":\"nic-0\",\"health\":\"Unhealthy\"}]}",
                         NULL)); /* 8 */
    CHECK_EQ_INT(store_revision(f.st), 8);

    /* a schema 1 log that ends before meta.revision is not served */
    fx_schema1(&f, 20, "INSERT INTO changes VALUES(17,'Device','','{}'),(18,'Device','','{}');");
    if (fx_reopen(&f, 4))
        return;
    CHECK_EQ_INT(store_revision(f.st), 20);
    cur = 19;
    CHECK_EQ_INT(store_changes_after(f.st, &cur, NULL, 100, &buf, &len, &cap), ERR_GONE);
    cur = 20;
    len = 0;
    CHECK_OK(store_changes_after(f.st, &cur, NULL, 100, &buf, &len, &cap));
    CHECK_EQ_INT(len, 0);
    CHECK_OK(put_devices(&f, NIC, "{\"devices\":[{\"id\":\"nic-0\"}]}", NULL)); /* 21 */
    cur = 20;
    CHECK_OK(store_changes_after(f.st, &cur, NULL, 100, &buf, &len, &cap));
    CHECK_EQ_INT(cur, 21);
    free(buf);
    fx_close(&f);
}
TEST_MAIN(quiet, test_changes_after, test_ring_head, test_ring_layout)
