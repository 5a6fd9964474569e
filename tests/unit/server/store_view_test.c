/* SPDX-License-Identifier: Apache-2.0 */
/* store_view_test.c - the views (store_view.c): the write path's event
 * text against the json_t views, and the feed's snapshot (store_fx.h). */
#include "store_fx.h"

/* The write path's event objects are written as text (st_device_text,
 * st_pod_text); they must be byte for byte what serialising the json_t views
 * gives, for every shape a row can take. */
static void check_device_text(struct fx *f, const char *id)
{
    struct jsonw w = JSONW_INIT, want = JSONW_INIT;
    json_t *obj = NULL;

    CHECK_OK(st_device_json(f->st->commit.db, GPU, id, &obj));
    jsonw_json(&want, obj);
    CHECK_OK(st_device_text(f->st->commit.db, GPU, id, 0, &w));
    CHECK(w.sb.buf && want.sb.buf && strcmp(w.sb.buf, want.sb.buf) == 0);
    if (w.sb.buf && want.sb.buf && strcmp(w.sb.buf, want.sb.buf) != 0)
        fprintf(stderr, "# text %s\n# json %s\n", w.sb.buf, want.sb.buf);
    jsonw_release(&w);
    jsonw_release(&want);
    json_decref(obj);
}

static void test_event_text(void)
{
    struct fx f;
    struct jsonw w = JSONW_INIT, want = JSONW_INIT;
    json_t *obj = NULL, *r = NULL;
    sqlite3_stmt *s = NULL;
    bool row = false;
    const char *ids[] = {"gpu-0", "gpu-1", "gpu-2", "gpu-3", "gpu-4"};
    size_t i;

    if (fx_open(&f, 100))
        return;
    CHECK_OK(
        put_devices(&f, GPU,
                    "{\"devices\":[{\"id\":\"gpu-0\",\"topology\":{\"nodes\":[{\"ID\":0},{\"ID\":"
                    "12}]}},{\"id\":\"gpu-1\"},{\"id\":\"gpu-2\",\"properties\":{\"b\":\"q\\\"\\\\"
                    "\\n\\u0001\",\"a\":\"caf\\u00e9\"}},{\"id\":\"gpu-3\"},{\"id\":\"gpu-4\"}]}",
                    NULL));
    CHECK_OK(bind(&f, "ns", "a",
                  "{\"uid\":\"u-a\",\"containers\":[{\"name\":\"c\",\"devices\":[{"
                  "\"resourceName\":\"" GPU "\",\"deviceIds\":[\"gpu-0\",\"gpu-2\"]}]}]}",
                  NULL, NULL, NULL));
    CHECK_OK(reserve(&f, "ns", "r",
                     "{\"containers\":[{\"name\":\"c\",\"devices\":[{\"resourceName\":\"" GPU
                     "\",\"deviceIds\":[\"gpu-1\"]}]}]}",
                     &r));
    json_decref(r);
    /* a NUMA list in a shape jsonx_dumps never writes takes the slow path */
    CHECK_OK(
        db_exec(f.st->commit.db, "UPDATE devices SET numa=? WHERE id=?", "tt", "[ 3 ,4]", "gpu-3"));
    CHECK_OK(db_exec(f.st->commit.db, "UPDATE devices SET numa=? WHERE id=?", "tt", "[]", "gpu-4"));
    for (i = 0; i < ARRAY_SIZE(ids); i++)
        check_device_text(&f, ids[i]);
    CHECK_EQ_INT(st_device_text(f.st->commit.db, GPU, "gpu-9", 0, &w), ERR_NOTFOUND);
    /* a DELETED event's revision stands in for the row's */
    CHECK_OK(st_device_text(f.st->commit.db, GPU, "gpu-1", 987, &w));
    CHECK(w.sb.buf && strstr(w.sb.buf, ",\"revision\":987}") != NULL);
    jsonw_release(&w);

    /* the pod object from its stored columns */
    CHECK_OK(st_pod_json(f.st->commit.db, "ns", "a", &obj));
    jsonw_json(&want, obj);
    CHECK_OK(db_prep(f.st->commit.db, &s,
                     "SELECT uid,containers,revision FROM pods WHERE namespace='ns' AND name='a'",
                     ""));
    CHECK_OK(db_step(f.st->commit.db, s, &row));
    CHECK(row);
    if (row)
        st_pod_text(&w, "ns", "a", db_text(s, 0), db_text(s, 1),
                    (uint64_t)sqlite3_column_int64(s, 2));
    db_done(s);
    CHECK(w.sb.buf && want.sb.buf && strcmp(w.sb.buf, want.sb.buf) == 0);
    jsonw_release(&w);
    jsonw_release(&want);
    json_decref(obj);
    fx_close(&f);
}

static void test_snapshot(void)
{
    struct fx f;
    char *buf = NULL, sum[1024];
    size_t len = 0, cap = 0;
    uint64_t rev = 0;
    struct feed_filter pods = {"PodResources", NULL}, ns = {NULL, "other"};

    if (fx_open(&f, 100))
        return;
    CHECK_OK(store_snapshot(f.st, NULL, &buf, &len, &cap, &rev));
    CHECK_EQ_INT(len, 0);
    CHECK_EQ_INT(rev, 0);
    CHECK_OK(put_devices(&f, GPU,
                         "{\"devices\":[{\"id\":\"gpu-1\"},{\"id\":\"gpu-0\",\"topology\":"
                         "{\"nodes\":[{\"ID\":0}]}}]}",
                         NULL));
    CHECK_OK(bind(&f, "ns", "a",
                  "{\"uid\":\"ua\",\"containers\":[{\"name\":\"c\",\"devices\":[{\"resourceName\":"
                  "\"" GPU "\",\"deviceIds\":[\"gpu-0\"]}]}]}",
                  NULL, NULL, NULL));
    CHECK_OK(reserve(&f, "other", "r",
                     "{\"containers\":[{\"name\":\"c\",\"devices\":[{\"resourceName\":\"" GPU
                     "\",\"deviceIds\":[\"gpu-1\"]}]}]}",
                     NULL));
    fx_some_events(&f, 1);

    CHECK_OK(store_snapshot(f.st, NULL, &buf, &len, &cap, &rev));
    CHECK_EQ_INT(rev, store_revision(f.st));
    CHECK_EQ_INT(summarise(buf, len, NULL, sum, sizeof(sum)), 4);
    /* in the order of the objects' revisions (each that of its last event),
     * not of their kinds: ns/a 3, gpu-0 4 (bound), other/r 5, gpu-1 6
     * (reserved for it) */
    CHECK_STREQ(sum, "ADDED PodResources ns/a;ADDED Device gpu-0;ADDED Reservation other/r;"
                     "ADDED Device gpu-1");
    /* gpu-0 turns Unhealthy: last */
    {
        json_t *out = NULL;

        CHECK_OK(store_device_set_health(f.st, GPU, "gpu-0", "Unhealthy", &f.err, &out));
        json_decref(out);
    }
    len = 0;
    CHECK_OK(store_snapshot(f.st, NULL, &buf, &len, &cap, &rev));
    CHECK_EQ_INT(summarise(buf, len, NULL, sum, sizeof(sum)), 4);
    CHECK_STREQ(sum, "ADDED PodResources ns/a;ADDED Reservation other/r;ADDED Device gpu-1;"
                     "ADDED Device gpu-0");
    len = 0;
    CHECK_OK(store_snapshot(f.st, &pods, &buf, &len, &cap, &rev));
    CHECK_EQ_INT(summarise(buf, len, NULL, sum, sizeof(sum)), 1);
    CHECK_STREQ(sum, "ADDED PodResources ns/a");
    len = 0;
    CHECK_OK(store_snapshot(f.st, &ns, &buf, &len, &cap, &rev));
    CHECK_STREQ((summarise(buf, len, NULL, sum, sizeof(sum)), sum), "ADDED Reservation other/r");
    free(buf);
    fx_close(&f);
}
TEST_MAIN(quiet, test_event_text, test_snapshot)
