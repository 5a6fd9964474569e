/* SPDX-License-Identifier: Apache-2.0 */
/* store_hist_test.c - binding and health history through store.h: the
 * intervals of bind, rebind, a new uid, release, removal while bound and
 * health changes; at= at the boundaries; usage; one device by id; pruning
 * by age and by the cap; intervals kept across a reopen; the same answers
 * with the intervals folded into the lookups or not, and from a database
 * of schema 6 migrated; a failed pruning step counted; binding changes
 * replayed from the change log's rows, however small its ring; a read
 * whose replay fails answers from what was applied. */
#include "../../../common/common.h"
#include "../../../common/clock.h"
#include "../../../server/histq.h"
#include "../../../server/store.h"
#include "../../../server/validate.h"
#include "../test.h"

#include <inttypes.h>
#include <sqlite3.h>
#include <time.h>
#include <unistd.h>

#define GPU "example.com/gpu"

static char dir[64], path[128];

static struct store *open_store(void)
{
    struct store_opts o = {.path = path, .history = 100};
    struct store *st = NULL;

    CHECK_OK(store_open(&o, &st));
    return st;
}

static void put_devices(struct store *st, const char *body)
{
    json_t *b = json_loads(body, 0, NULL), *devs = NULL, *out = NULL;
    uint64_t ttl = 0;
    bool ch;

    CHECK_OK(validate_devices_put(b, &devs, &ttl, NULL));
    CHECK_OK(store_resource_put(st, GPU, devs, ttl, NULL, &out, &ch));
    json_decref(out);
    json_decref(devs);
    json_decref(b);
}

static void bind(struct store *st, const char *name, const char *uid, const char *dev)
{
    char body[256], *text = NULL;
    json_t *b, *cs = NULL;
    const char *u = NULL;
    size_t len;
    struct store_outcome did;

    snprintf(body, sizeof(body),
             "{\"uid\":\"%s\",\"containers\":[{\"name\":\"main\",\"devices\":[{\"resourceName\":"
             "\"" GPU "\",\"deviceIds\":[\"%s\"]}]}]}",
             uid, dev);
    b = json_loads(body, 0, NULL);
    CHECK_OK(validate_pod_put(b, &u, &cs, NULL));
    CHECK_OK(store_pod_bind(st, &(struct store_pod){"ml", name, u}, cs, NULL, &text, &len, &did));
    free(text);
    json_decref(cs);
    json_decref(b);
}

static void release(struct store *st, const char *name)
{
    json_t *out = NULL;

    CHECK_OK(store_pod_release(st, &(struct store_pod){"ml", name, NULL}, 0, NULL, &out));
    json_decref(out);
}

static void pause_ms(void)
{
    struct timespec ts = {.tv_nsec = 3 * 1000 * 1000};

    nanosleep(&ts, NULL);
}

/* Fold every interval into the lookups (a pruning step that drops
 * nothing). */
static void fold_all(struct store *st)
{
    bool more = true;

    while (more)
        CHECK_OK(
            store_history_prune(st, (int64_t)clock_wall_ms(), 100ULL * 365 * 86400000, 0, &more));
}

/* "name/uid/open|closed;..." of the intervals 'q' selects. */
static const char *summary(struct store *st, const struct histq *q, char *out, size_t cap)
{
    json_t *j = NULL, *iv;
    size_t i, used = 0;

    out[0] = '\0';
    CHECK_OK(store_history(st, q, &j));
    json_array_foreach(json_object_get(j, "intervals"), i, iv) {
        used += (size_t)snprintf(out + used, cap - used, "%s%s/%s/%s", i ? ";" : "",
                                 json_string_value(json_object_get(iv, "name")),
                                 json_string_value(json_object_get(iv, "uid")),
                                 json_is_null(json_object_get(iv, "to")) ? "open" : "closed");
    }
    json_decref(j);
    return out;
}

/* The 'field' ("from"/"to") of interval 'i' of device 'dev' in ms. */
static int64_t edge(struct store *st, const char *dev, size_t i, const char *field)
{
    struct histq q = {
        .sel = HISTQ_DEVICE, .device = dev, .from_ms = INT64_MIN, .to_ms = INT64_MAX, .limit = 100};
    json_t *j = NULL;
    int64_t ms = -1;

    CHECK_OK(store_history(st, &q, &j));
    CHECK_OK(histq_parse_time(json_string_value(json_object_get(
                                  json_array_get(json_object_get(j, "intervals"), i), field)),
                              &ms));
    json_decref(j);
    return ms;
}

/* The first column of the first row of 'sql' on the database, as text
 * (the last answer's, until the next call). */
static const char *sql_text(const char *sql)
{
    static char out[256];
    sqlite3 *db = NULL;
    sqlite3_stmt *s = NULL;

    out[0] = '\0';
    CHECK_EQ_INT(sqlite3_open(path, &db), SQLITE_OK);
    CHECK_EQ_INT(sqlite3_prepare_v2(db, sql, -1, &s, NULL), SQLITE_OK);
    if (sqlite3_step(s) == SQLITE_ROW && sqlite3_column_text(s, 0))
        snprintf(out, sizeof(out), "%s", (const char *)sqlite3_column_text(s, 0));
    sqlite3_finalize(s);
    sqlite3_close(db);
    return out;
}

static void test_intervals(void)
{
    struct store *st = open_store();
    struct histq q = {.sel = HISTQ_DEVICE,
                      .device = "gpu-0",
                      .from_ms = INT64_MIN,
                      .to_ms = INT64_MAX,
                      .limit = 100};
    char s[512];
    int64_t b_to, far = 0;

    put_devices(st, "{\"devices\":[{\"id\":\"gpu-0\"},{\"id\":\"gpu-1\"}]}");
    bind(st, "a", "ua", "gpu-0");
    pause_ms();
    CHECK_STREQ(summary(st, &q, s, sizeof(s)), "a/ua/open");
    /* a time past an open interval's stored end (2^47 - 1 ms) still falls
       in it */
    CHECK_OK(histq_parse_time("9999-12-31T23:59:59Z", &far));
    q.from_ms = far;
    CHECK_STREQ(summary(st, &q, s, sizeof(s)), "a/ua/open");
    q.from_ms = INT64_MIN;
    CHECK_STREQ(summary(st, &(struct histq){.sel = HISTQ_AT, .at_ms = far}, s, sizeof(s)),
                "a/ua/open");
    release(st, "a");
    fold_all(st); /* a's interval folded, the ones below not */
    pause_ms();
    bind(st, "b", "ub", "gpu-0");
    pause_ms();
    bind(st, "b", "ub2", "gpu-0");
    pause_ms();
    bind(st, "b", "ub2", "gpu-1"); /* moves from gpu-0 to gpu-1 */
    CHECK_STREQ(summary(st, &q, s, sizeof(s)), "a/ua/closed;b/ub/closed;b/ub2/closed");
    CHECK_EQ_INT(edge(st, "gpu-0", 1, "to"), edge(st, "gpu-0", 2, "from"));
    q.device = "gpu-1";
    CHECK_STREQ(summary(st, &q, s, sizeof(s)), "b/ub2/open");
    put_devices(st, "{\"devices\":[{\"id\":\"gpu-0\"}]}"); /* gpu-1 removed, still bound */
    CHECK_STREQ(summary(st, &q, s, sizeof(s)), "b/ub2/open");
    q.health = true;
    CHECK_STREQ(summary(st, &q, s, sizeof(s)), "(null)/(null)/open");
    release(st, "b");
    CHECK_STREQ(summary(st, &q, s, sizeof(s)), "(null)/(null)/closed");
    q.health = false;
    CHECK_STREQ(summary(st, &q, s, sizeof(s)), "b/ub2/closed");

    /* at= : from inclusive, to exclusive */
    b_to = edge(st, "gpu-0", 1, "to");
    q = (struct histq){.sel = HISTQ_AT, .at_ms = b_to};
    CHECK_STREQ(summary(st, &q, s, sizeof(s)), "b/ub2/closed");
    q.at_ms = b_to - 1;
    CHECK_STREQ(summary(st, &q, s, sizeof(s)), "b/ub/closed");
    q.at_ms = edge(st, "gpu-0", 0, "from") - 1;
    CHECK_STREQ(summary(st, &q, s, sizeof(s)), "");

    /* by pod, paged */
    q = (struct histq){.sel = HISTQ_POD,
                       .ns = "ml",
                       .name = "b",
                       .from_ms = INT64_MIN,
                       .to_ms = INT64_MAX,
                       .limit = 100};
    CHECK_STREQ(summary(st, &q, s, sizeof(s)), "b/ub/closed;b/ub2/closed;b/ub2/closed");
    q.limit = 2;
    CHECK_STREQ(summary(st, &q, s, sizeof(s)), "b/ub/closed;b/ub2/closed");

    /* the same, all folded */
    fold_all(st);
    CHECK_STREQ(summary(st, &q, s, sizeof(s)), "b/ub/closed;b/ub2/closed");
    q.limit = 100;
    CHECK_STREQ(summary(st, &q, s, sizeof(s)), "b/ub/closed;b/ub2/closed;b/ub2/closed");
    q.from_ms = b_to - 1; /* from the end of b/ub's */
    CHECK_STREQ(summary(st, &q, s, sizeof(s)), "b/ub/closed;b/ub2/closed;b/ub2/closed");
    q.from_ms = b_to;
    CHECK_STREQ(summary(st, &q, s, sizeof(s)), "b/ub2/closed;b/ub2/closed");
    q.name = "a"; /* gpu-0's intervals of b are not a's */
    q.from_ms = INT64_MIN;
    CHECK_STREQ(summary(st, &q, s, sizeof(s)), "a/ua/closed");
    q = (struct histq){.sel = HISTQ_AT, .at_ms = b_to};
    CHECK_STREQ(summary(st, &q, s, sizeof(s)), "b/ub2/closed");
    q.at_ms = b_to - 1;
    CHECK_STREQ(summary(st, &q, s, sizeof(s)), "b/ub/closed");
    q = (struct histq){.sel = HISTQ_DEVICE,
                       .device = "gpu-0",
                       .from_ms = INT64_MIN,
                       .to_ms = INT64_MAX,
                       .limit = 100};
    CHECK_STREQ(summary(st, &q, s, sizeof(s)), "a/ua/closed;b/ub/closed;b/ub2/closed");
    q.from_ms = b_to - 1; /* from the middle of b/ub's */
    CHECK_STREQ(summary(st, &q, s, sizeof(s)), "b/ub/closed;b/ub2/closed");
    store_free(st);
}

static void test_usage_and_reopen(void)
{
    struct store *st = open_store();
    struct histq q = {.by = HISTQ_BY_DEVICE};
    json_t *j = NULL;
    int64_t f0 = edge(st, "gpu-0", 0, "from"), t0 = edge(st, "gpu-0", 0, "to");
    double secs;

    q.from_ms = f0 + 1;
    q.to_ms = t0;
    CHECK_OK(store_usage(st, &q, f0 + 1000000, &j));
    secs = json_number_value(
        json_object_get(json_array_get(json_object_get(j, "usage"), 0), "deviceSeconds"));
    CHECK_EQ_INT((int64_t)(secs * 1000 + 0.5), t0 - f0 - 1);
    json_decref(j);
    store_free(st);
}

static void test_device_find(void)
{
    struct store *st = open_store();
    json_t *j = NULL;
    struct error e = {0};

    CHECK_OK(store_device_find(st, "gpu-0", NULL, &e, &j));
    CHECK_STREQ(json_string_value(json_object_get(json_object_get(j, "device"), "id")), "gpu-0");
    json_decref(j);
    CHECK_EQ_INT(store_device_find(st, "gpu-9", NULL, &e, &j), ERR_NOTFOUND);
    CHECK(strstr(e.msg, "gpu-9") != NULL);
    store_free(st);
}

static void test_prune(void)
{
    struct store *st = open_store();
    struct histq q = {.sel = HISTQ_DEVICE,
                      .device = "gpu-0",
                      .from_ms = INT64_MIN,
                      .to_ms = INT64_MAX,
                      .limit = 100};
    char s[512];
    bool more = true;

    bind(st, "c", "uc", "gpu-0");
    CHECK_OK(store_history_prune(st, (int64_t)clock_wall_ms(), 90ULL * 86400000, 2, &more));
    CHECK(!more);
    /* five intervals, a cap of 2: the three oldest closed ones go */
    CHECK_STREQ(summary(st, &q, s, sizeof(s)), "c/uc/open");
    q.device = "gpu-1";
    CHECK_STREQ(summary(st, &q, s, sizeof(s)), "b/ub2/closed");
    pause_ms();
    CHECK_OK(store_history_prune(st, (int64_t)clock_wall_ms(), 0, 0, &more));
    CHECK_STREQ(summary(st, &q, s, sizeof(s)), "");
    q.device = "gpu-0";
    CHECK_STREQ(summary(st, &q, s, sizeof(s)), "c/uc/open");
    /* the pods whose intervals all went go, with their devices' rows */
    CHECK_STREQ(sql_text("SELECT group_concat(p.name) FROM hist_pod p"), "c");
    CHECK_STREQ(sql_text("SELECT group_concat(p.name||'/'||d.device_id) FROM hist_pod_dev x JOIN "
                         "hist_pod p ON p.id=x.pod JOIN hist_dev d ON d.id=x.dev"),
                "c/gpu-0");
    store_free(st);
}

/* Every answer of the history as one text: gpu-0's, gpu-1's, pod b's,
 * the usage by pod, and the device-seconds of /metrics. */
static const char *answers(struct store *st, char *out, size_t cap)
{
    struct histq q = {.sel = HISTQ_DEVICE,
                      .device = "gpu-0",
                      .from_ms = INT64_MIN,
                      .to_ms = INT64_MAX,
                      .limit = 9};
    json_t *j = NULL;
    char *t;
    size_t used;

    summary(st, &q, out, cap);
    used = strlen(out);
    q.device = "gpu-1";
    used += strlen(summary(st, &q, out + used, cap - used));
    q.device = "gpu-0";
    q.health = true;
    CHECK_OK(store_history(st, &q, &j));
    t = json_dumps(j, JSON_COMPACT);
    used += (size_t)snprintf(out + used, cap - used, "|%s|", t);
    free(t);
    json_decref(j);
    q = (struct histq){.sel = HISTQ_POD,
                       .ns = "ml",
                       .name = "b",
                       .from_ms = INT64_MIN,
                       .to_ms = INT64_MAX,
                       .limit = 9};
    used += strlen(summary(st, &q, out + used, cap - used));
    q = (struct histq){.by = HISTQ_BY_POD, .from_ms = 0, .to_ms = 4000000000000};
    CHECK_OK(store_usage(st, &q, 4000000000000, &j));
    t = json_dumps(j, JSON_COMPACT);
    used += (size_t)snprintf(out + used, cap - used, "|%s", t);
    free(t);
    json_decref(j);
    CHECK_OK(store_device_metrics(st, 4000000000000, &j));
    t = json_dumps(json_object_get(j, "seconds"), JSON_COMPACT);
    snprintf(out + used, cap - used, "|%s", t);
    free(t);
    json_decref(j);
    return out;
}

/* A database of schema 6 (intervals of a pod instance name its hist_pod
 * row, which holds the uid; the lookups are indexes; an open interval ends
 * at NULL) migrated to the newest gives the same answers. */
static void test_migration(void)
{
    struct store *st = open_store();
    char before[2048], after[2048];
    sqlite3 *db = NULL;

    release(st, "c");
    bind(st, "b", "ub3", "gpu-0"); /* an open interval */
    put_devices(st, "{\"devices\":[{\"id\":\"gpu-0\",\"health\":\"Unhealthy\"},{\"id\":"
                    "\"gpu-1\"}]}"); /* an open health interval */
    fold_all(st);
    answers(st, before, sizeof(before));
    CHECK(strstr(before, "c/uc/closed;b/ub3/open") != NULL);
    CHECK(strstr(before, "\"health\":\"Unhealthy\"") != NULL);
    CHECK(strstr(before, "\"to\":null") != NULL);
    CHECK(strstr(before, "\"seconds\":") != NULL);
    store_free(st);
    CHECK_EQ_INT(sqlite3_open(path, &db), SQLITE_OK);
    CHECK_EQ_INT(
        sqlite3_exec(
            db,
            "INSERT OR IGNORE INTO hist_pod(namespace,name,uid) SELECT p.namespace,p.name,b.uid "
            "FROM hist_bind b JOIN hist_pod p ON p.id=b.pod;"
            "UPDATE hist_bind SET pod=(SELECT i.id FROM hist_pod p JOIN hist_pod i ON "
            "i.namespace=p.namespace AND i.name=p.name AND i.uid=hist_bind.uid WHERE "
            "p.id=hist_bind.pod);"
            "UPDATE hist_bind SET to_ms=NULL WHERE to_ms=140737488355327;"
            "UPDATE hist_health SET to_ms=NULL WHERE to_ms=140737488355327;"
            "ALTER TABLE hist_bind DROP COLUMN uid; DROP TABLE hist_ix_dev; DROP TABLE hist_pod_dev;"
            "DROP TABLE hist_unsettled; ALTER TABLE changes DROP COLUMN hist;"
            "DELETE FROM meta WHERE key IN ('hist_folded','hist_replayed');"
            "CREATE INDEX hist_bind_dev ON hist_bind(dev, from_ms);"
            "CREATE INDEX hist_bind_pod ON hist_bind(pod); PRAGMA user_version=6;",
            NULL, NULL, NULL),
        SQLITE_OK);
    sqlite3_close(db);
    st = open_store();
    CHECK_STREQ(answers(st, after, sizeof(after)), before);
    fold_all(st); /* the open one settles once closed, not twice */
    release(st, "b");
    fold_all(st);
    CHECK_STREQ(summary(st,
                        &(struct histq){.sel = HISTQ_POD,
                                        .ns = "ml",
                                        .name = "b",
                                        .from_ms = INT64_MIN,
                                        .to_ms = INT64_MAX,
                                        .limit = 9},
                        after, sizeof(after)),
                "b/ub3/closed");
    store_free(st);
}

/* A step that fails (a table gone under the store) is counted, and the
 * next one works once it is back. */
static void test_prune_failure(void)
{
    struct store *st = open_store();
    sqlite3 *db = NULL;
    bool more = false;

    CHECK_EQ_INT((int)store_history_failures(st), 0);
    CHECK_EQ_INT(sqlite3_open(path, &db), SQLITE_OK);
    CHECK_EQ_INT(sqlite3_exec(db, "DROP TABLE hist_unsettled", NULL, NULL, NULL), SQLITE_OK);
    CHECK(store_history_prune(st, (int64_t)clock_wall_ms(), 86400000, 0, &more) != ERR_OK);
    CHECK_EQ_INT((int)store_history_failures(st), 1);
    CHECK_EQ_INT(
        sqlite3_exec(db, "CREATE TABLE hist_unsettled (id INTEGER PRIMARY KEY)", NULL, NULL, NULL),
        SQLITE_OK);
    sqlite3_close(db);
    CHECK_OK(store_history_prune(st, (int64_t)clock_wall_ms(), 86400000, 0, &more));
    CHECK_EQ_INT((int)store_history_failures(st), 1);
    store_free(st);
}

static struct store *open_ring(uint64_t ring)
{
    struct store_opts o = {.path = path, .history = ring};
    struct store *st = NULL;

    CHECK_OK(store_open(&o, &st));
    return st;
}

/* "r/r<i>/closed;..." for i = first, first + 2, .. < n: pod r's instances
 * on one device as it moves between two; the last of all, n - 1, open. */
static const char *every_other(int first, int n, char *out, size_t cap)
{
    size_t used = 0;
    int i;

    out[0] = '\0';
    for (i = first; i < n; i += 2)
        used += (size_t)snprintf(out + used, cap - used, "%sr/r%d/%s", used ? ";" : "", i,
                                 i + 1 < n ? "closed" : "open");
    return out;
}

/* Binding changes reach the history through the change log's rows
 * (replayed): with a ring of 3 slots, rows are overwritten every few
 * writes and none is lost (the log's keeper replays first); what a run
 * left unreplayed is applied at open, before the ring is laid out for
 * fewer slots. */
static void test_replay(void)
{
    struct store *st = open_ring(3);
    struct histq q = {.sel = HISTQ_DEVICE,
                      .device = "gpu-0",
                      .from_ms = (int64_t)clock_wall_ms() + 1, /* the earlier tests' are over */
                      .to_ms = INT64_MAX,
                      .limit = 100};
    char s[2048], want[2048], uid[16];
    uint64_t mark;
    int i;

    pause_ms();
    for (i = 0; i < 20; i++) {
        snprintf(uid, sizeof(uid), "r%d", i);
        bind(st, "r", uid, i % 2 ? "gpu-1" : "gpu-0");
    }
    /* no read yet: the mark is at most a ring behind */
    mark = strtoull(sql_text("SELECT value FROM meta WHERE key='hist_replayed'"), NULL, 10);
    CHECK(mark + 3 >= store_revision(st));
    CHECK_STREQ(summary(st, &q, s, sizeof(s)), every_other(0, 20, want, sizeof(want)));
    q.device = "gpu-1";
    CHECK_STREQ(summary(st, &q, s, sizeof(s)), every_other(1, 20, want, sizeof(want)));

    /* left unreplayed, then opened with a ring of 1: all there */
    for (i = 20; i < 24; i++) {
        snprintf(uid, sizeof(uid), "r%d", i);
        bind(st, "r", uid, i % 2 ? "gpu-1" : "gpu-0");
    }
    mark = strtoull(sql_text("SELECT value FROM meta WHERE key='hist_replayed'"), NULL, 10);
    CHECK(mark < store_revision(st));
    store_free(st);
    st = open_ring(1);
    CHECK_STREQ(sql_text("SELECT count(*) FROM changes WHERE revision>(SELECT value FROM meta "
                         "WHERE key='hist_replayed') AND hist IS NOT NULL"),
                "0");
    CHECK_STREQ(summary(st, &q, s, sizeof(s)), every_other(1, 24, want, sizeof(want)));
    q.device = "gpu-0";
    CHECK_STREQ(summary(st, &q, s, sizeof(s)), every_other(0, 24, want, sizeof(want)));
    release(st, "r");
    store_free(st);
}

/* A read whose replay fails (an interval's INSERT refused under the
 * store) answers from what was applied and counts the failure; the next
 * read, once the replay can write, has the interval. */
static void test_read_replay_failure(void)
{
    struct store *st = open_store();
    struct histq q = {.sel = HISTQ_DEVICE,
                      .device = "gpu-1",
                      .from_ms = (int64_t)clock_wall_ms() + 1,
                      .to_ms = INT64_MAX,
                      .limit = 100};
    uint64_t failed = store_history_failures(st);
    struct test_stderr c;
    sqlite3 *db = NULL;
    char s[256], logged[1024];

    pause_ms();
    bind(st, "f", "uf", "gpu-1");
    CHECK_EQ_INT(sqlite3_open(path, &db), SQLITE_OK);
    CHECK_EQ_INT(sqlite3_exec(db,
                              "CREATE TRIGGER no_iv BEFORE INSERT ON hist_bind BEGIN SELECT "
                              "RAISE(ABORT,'refused'); END",
                              NULL, NULL, NULL),
                 SQLITE_OK);
    CHECK(test_stderr_begin(&c));
    summary(st, &q, s, sizeof(s));
    test_stderr_end(&c, logged, sizeof(logged));
    CHECK_STREQ(s, "");
    CHECK(strstr(logged, "refused") != NULL);
    CHECK_EQ_INT((int)(store_history_failures(st) - failed), 1);
    CHECK_EQ_INT(sqlite3_exec(db, "DROP TRIGGER no_iv", NULL, NULL, NULL), SQLITE_OK);
    sqlite3_close(db);
    CHECK_STREQ(summary(st, &q, s, sizeof(s)), "f/uf/open");
    CHECK_EQ_INT((int)(store_history_failures(st) - failed), 1);
    release(st, "f");
    store_free(st);
}

/* A replay gives intervals ids for their own times, whatever ids health
 * intervals took since: a binding left unreplayed while a health change
 * 30 min later was written (here by hand: a replay held up that long)
 * still counts in a usage window that ends just after it. */
static void test_replay_ids(void)
{
    struct store *st = open_store();
    struct histq q = {.by = HISTQ_BY_POD};
    json_t *j = NULL, *u;
    char sql[256];
    int64_t f, t;
    uint64_t mark;
    size_t i;
    bool seen = false;

    pause_ms();
    bind(st, "lag", "ul", "gpu-0");
    pause_ms();
    release(st, "lag");
    mark = strtoull(sql_text("SELECT value FROM meta WHERE key='hist_replayed'"), NULL, 10);
    CHECK(mark < store_revision(st));
    store_free(st);
    t = (int64_t)clock_wall_ms() + 30 * 60000;
    snprintf(sql, sizeof(sql),
             "INSERT INTO hist_health(id,dev,from_ms,to_ms) SELECT %" PRId64 "<<10,id,%" PRId64
             ",%" PRId64 "+1 FROM hist_dev LIMIT 1",
             t, t, t);
    sql_text(sql);
    st = open_store(); /* replays */
    f = strtoll(sql_text("SELECT b.from_ms FROM hist_bind b JOIN hist_pod p ON p.id=b.pod WHERE "
                         "p.name='lag'"),
                NULL, 10);
    t = strtoll(sql_text("SELECT b.to_ms FROM hist_bind b JOIN hist_pod p ON p.id=b.pod WHERE "
                         "p.name='lag'"),
                NULL, 10);
    CHECK(f > 0 && t > f);
    q.from_ms = f;
    q.to_ms = t + 1;
    CHECK_OK(store_usage(st, &q, t + 1000, &j));
    json_array_foreach(json_object_get(j, "usage"), i, u) {
        if (strcmp(json_string_value(json_object_get(u, "name")), "lag") != 0)
            continue;
        seen = true;
        CHECK_EQ_INT((int64_t)(json_number_value(json_object_get(u, "deviceSeconds")) * 1000 + 0.5),
                     t - f);
    }
    CHECK(seen);
    json_decref(j);
    store_free(st);
}

static void setup(void)
{
    snprintf(dir, sizeof(dir), "/tmp/store_hist_test.XXXXXX");
    CHECK(mkdtemp(dir) != NULL);
    snprintf(path, sizeof(path), "%s/podresd.db", dir);
}

static void teardown(void)
{
    char p[200];

    unlink(path);
    snprintf(p, sizeof(p), "%s-wal", path);
    unlink(p);
    snprintf(p, sizeof(p), "%s-shm", path);
    unlink(p);
    CHECK_OK(rmdir(dir));
}

TEST_MAIN(setup, test_intervals, test_usage_and_reopen, test_device_find, test_prune,
          test_migration, test_prune_failure, test_replay, test_read_replay_failure,
          test_replay_ids, teardown)
