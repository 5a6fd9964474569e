/* SPDX-License-Identifier: Apache-2.0 */
/* store_rows_test.c - the Device events of devices that change hands
 * (store_rows.c): every event object byte for byte the device's view,
 * removed devices that are still held, and the let-go bindings rows
 * (store_fx.h). */
#include "store_fx.h"

/* Drain the feed and check every Device event against the row: a MODIFIED
 * object is byte for byte the device's view now (each write gives a device
 * one event at most); after DELETED the row is gone. Summary into 'out'. */
static void check_device_events(struct fx *f, char *out, size_t cap)
{
    size_t at;

    fx_events(f, out, cap);
    for (at = 0; at < f->len;) {
        const char *line = f->buf + at, *nl = memchr(line, '\n', f->len - at);
        const char *obj = nl ? strstr(line, "\"object\":") : NULL;
        json_t *ev = nl ? json_loadb(line, (size_t)(nl - line), 0, NULL) : NULL;
        json_t *o = json_object_get(ev, "object");
        const char *type = json_string_value(json_object_get(ev, "type"));
        const char *res = json_string_value(json_object_get(o, "resourceName"));
        const char *id = json_string_value(json_object_get(o, "id"));
        struct jsonw w = JSONW_INIT;
        err_t rc;

        CHECK(ev != NULL && obj != NULL && obj < nl);
        if (!ev || !obj || obj >= nl) {
            json_decref(ev);
            break;
        }
        obj += strlen("\"object\":");
        if (strcmp(json_string_value(json_object_get(ev, "kind")), "Device") == 0) {
            rc = st_device_text(f->st->commit.db, res, id, 0, &w);
            if (strcmp(type, "DELETED") == 0) {
                CHECK_EQ_INT(rc, ERR_NOTFOUND);
                CHECK(json_is_null(json_object_get(o, "holder")));
            } else {
                CHECK_OK(rc);
                CHECK(!rc && w.sb.len == (size_t)(nl - obj - 1) &&
                      memcmp(w.sb.buf, obj, w.sb.len) == 0);
                if (!rc &&
                    (w.sb.len != (size_t)(nl - obj - 1) || memcmp(w.sb.buf, obj, w.sb.len) != 0))
                    fprintf(stderr, "# event %.*s\n# view  %s\n", (int)(nl - obj - 1), obj,
                            w.sb.buf);
            }
        }
        jsonw_release(&w);
        json_decref(ev);
        at = (size_t)(nl - f->buf) + 1;
    }
}

/* Binds read each device they move once (a SELECT, or the row the bind's
 * check already read) and write its event from that and the holder they
 * know: the events must be what the view of the row says, holder,
 * reservation and all. */
static void test_rebind_event_text(void)
{
    struct fx f;
    json_t *r = NULL;
    char ev[2048];

    if (fx_open(&f, 100))
        return;
    CHECK_OK(
        put_devices(&f, GPU,
                    "{\"devices\":[{\"id\":\"gpu-0\",\"topology\":{\"nodes\":[{\"ID\":0},{\"ID\":"
                    "12}]}},{\"id\":\"gpu-1\",\"properties\":{\"b\":\"q\\\"\\\\\\n\",\"a\":"
                    "\"caf\\u00e9\"}},{\"id\":\"gpu-2\"},{\"id\":\"gpu-3\"}]}",
                    NULL));
    CHECK_OK(reserve(&f, "ns", "r",
                     "{\"containers\":[{\"name\":\"c\",\"devices\":[{\"resourceName\":\"" GPU
                     "\",\"deviceIds\":[\"gpu-1\"]}]}]}",
                     &r));
    json_decref(r);
    fx_some_events(&f, 1);
    /* held and reserved for the same pod */
    CHECK_OK(bind(&f, "ns", "r",
                  "{\"uid\":\"u1\",\"containers\":[{\"name\":\"c\",\"devices\":[{"
                  "\"resourceName\":\"" GPU "\",\"deviceIds\":[\"gpu-1\",\"gpu-0\"]}]}]}",
                  NULL, NULL, NULL));
    check_device_events(&f, ev, sizeof(ev));
    CHECK_STREQ(ev, "ADDED PodResources ns/r;MODIFIED Device gpu-0;MODIFIED Device gpu-1;"
                    "MODIFIED Reservation ns/r");
    /* a new uid: every device again, one moves to another container */
    CHECK_OK(bind(&f, "ns", "r",
                  "{\"uid\":\"u2\",\"containers\":[{\"name\":\"c\",\"devices\":[{"
                  "\"resourceName\":\"" GPU "\",\"deviceIds\":[\"gpu-1\"]}]},{\"name\":\"d\","
                  "\"devices\":[{\"resourceName\":\"" GPU "\",\"deviceIds\":[\"gpu-0\"]}]}]}",
                  NULL, NULL, NULL));
    check_device_events(&f, ev, sizeof(ev));
    CHECK_STREQ(ev, "MODIFIED PodResources ns/r;MODIFIED Device gpu-1;MODIFIED Device gpu-0;"
                    "MODIFIED Reservation ns/r");
    /* gpu-1 let go, still reserved; gpu-0 stays; gpu-2 taken */
    CHECK_OK(bind(&f, "ns", "r",
                  "{\"uid\":\"u2\",\"containers\":[{\"name\":\"d\",\"devices\":[{"
                  "\"resourceName\":\"" GPU "\",\"deviceIds\":[\"gpu-0\",\"gpu-2\"]}]}]}",
                  NULL, NULL, NULL));
    check_device_events(&f, ev, sizeof(ev));
    CHECK_STREQ(ev, "MODIFIED PodResources ns/r;MODIFIED Device gpu-2;MODIFIED Device gpu-1;"
                    "MODIFIED Reservation ns/r");
    /* gpu-2 leaves the set while bound; let go, it is DELETED */
    CHECK_OK(put_devices(
        &f, GPU, "{\"devices\":[{\"id\":\"gpu-0\"},{\"id\":\"gpu-1\"},{\"id\":\"gpu-3\"}]}", NULL));
    check_device_events(&f, ev, sizeof(ev));
    CHECK_OK(bind(&f, "ns", "r",
                  "{\"uid\":\"u2\",\"containers\":[{\"name\":\"d\",\"devices\":[{"
                  "\"resourceName\":\"" GPU "\",\"deviceIds\":[\"gpu-0\",\"gpu-3\"]}]}]}",
                  NULL, NULL, NULL));
    check_device_events(&f, ev, sizeof(ev));
    CHECK_STREQ(ev, "MODIFIED PodResources ns/r;MODIFIED Device gpu-3;DELETED Device gpu-2;"
                    "MODIFIED Reservation ns/r");
    /* release: every device let go */
    CHECK_OK(release(&f, "ns", "r", NULL));
    check_device_events(&f, ev, sizeof(ev));
    CHECK_STREQ(ev, "DELETED PodResources ns/r;MODIFIED Device gpu-0;MODIFIED Device gpu-3;"
                    "MODIFIED Reservation ns/r");
    fx_close(&f);
}

static void test_removed_bound_device(void)
{
    struct fx f;
    char ev[1024], b[128];

    if (fx_open(&f, 100))
        return;
    CHECK_OK(put_devices(&f, GPU, FOUR_GPUS, NULL));
    CHECK_OK(bind(&f, "ns", "a",
                  "{\"uid\":\"ua\",\"containers\":[{\"name\":\"c\",\"devices\":[{\"resourceName\":"
                  "\"" GPU "\",\"deviceIds\":[\"gpu-3\"]}]}]}",
                  NULL, NULL, NULL));
    fx_some_events(&f, 1);
    /* gpu-3 leaves the set while bound: listed Unhealthy, still held */
    CHECK_OK(put_devices(&f, GPU,
                         "{\"devices\":[{\"id\":\"gpu-0\",\"topology\":{\"nodes\":[{\"ID\":0}]}},"
                         "{\"id\":\"gpu-1\",\"topology\":{\"nodes\":[{\"ID\":0}]}},"
                         "{\"id\":\"gpu-2\",\"topology\":{\"nodes\":[{\"ID\":1}]}}]}",
                         NULL));
    CHECK_EQ_INT(fx_events(&f, ev, sizeof(ev)), 1);
    CHECK_STREQ(ev, "MODIFIED Device gpu-3");
    CHECK_STREQ(health(&f, GPU, "gpu-3", b, sizeof(b)), "Unhealthy");
    CHECK_STREQ(holder(&f, GPU, "gpu-3", b, sizeof(b)), "ns/a/c");
    /* not allocatable, not bindable by others */
    {
        json_t *list = NULL;

        CHECK_OK(store_allocatable(f.st, &list));
        CHECK_EQ_INT(json_array_size(json_object_get(list, "devices")), 3);
        json_decref(list);
    }
    /* listed, held by ns/a: 409 as any held device, not 422 "unknown" */
    CHECK_EQ_INT(bind(&f, "ns", "b",
                      "{\"uid\":\"ub\",\"containers\":[{\"name\":\"c\",\"devices\":[{"
                      "\"resourceName\":\"" GPU "\",\"deviceIds\":[\"gpu-3\"]}]}]}",
                      NULL, NULL, NULL),
                 ERR_CONFLICT);
    /* the same PUT again changes nothing */
    {
        uint64_t rev = store_revision(f.st);
        bool changed = true;

        CHECK_OK(
            put_devices(&f, GPU,
                        "{\"devices\":[{\"id\":\"gpu-0\",\"topology\":{\"nodes\":[{\"ID\":0}]}},"
                        "{\"id\":\"gpu-1\",\"topology\":{\"nodes\":[{\"ID\":0}]}},"
                        "{\"id\":\"gpu-2\",\"topology\":{\"nodes\":[{\"ID\":1}]}}]}",
                        &changed));
        CHECK(!changed);
        CHECK_EQ_INT(store_revision(f.st), rev);
    }
    /* released: gone */
    CHECK_OK(release(&f, "ns", "a", NULL));
    CHECK_STREQ(health(&f, GPU, "gpu-3", b, sizeof(b)), "missing");
    CHECK_EQ_INT(fx_events(&f, ev, sizeof(ev)), 2);
    CHECK_STREQ(ev, "DELETED PodResources ns/a;DELETED Device gpu-3");
    fx_close(&f);
}

/* The single integer 'sql' gives on the write connection, -1 on an error
 * (no CHECK here: it is called inside CHECKs). */
static int64_t sql_int(struct fx *f, const char *sql)
{
    sqlite3_stmt *s = NULL;
    int64_t v = -1;

    if (db_prep(f->st->commit.db, &s, sql, NULL) == ERR_OK && sqlite3_step(s) == SQLITE_ROW)
        v = sqlite3_column_int64(s, 0);
    db_done(s);
    return v;
}

/* A held device already Unhealthy leaves its set: nothing a reader sees
 * changes, so no event and no revision; registered again as listed, the
 * same; then released, it stays (registered), where a removed one goes. */
static void test_removed_unhealthy_device(void)
{
    static const char *const three =
        "{\"devices\":[{\"id\":\"gpu-0\",\"topology\":{\"nodes\":[{\"ID\":0}]}},"
        "{\"id\":\"gpu-1\",\"topology\":{\"nodes\":[{\"ID\":0}]}},"
        "{\"id\":\"gpu-2\",\"topology\":{\"nodes\":[{\"ID\":1}]}}]}";
    struct fx f;
    json_t *out = NULL;
    uint64_t rev;
    char ev[1024], b[128], *again;
    size_t n;

    if (fx_bound_a(&f, "[\"gpu-3\"]"))
        return;
    CHECK_OK(store_device_set_health(f.st, GPU, "gpu-3", "Unhealthy", &f.err, &out));
    json_decref(out);
    fx_some_events(&f, 1);
    rev = store_revision(f.st);
    CHECK_OK(put_devices(&f, GPU, three, NULL));
    CHECK_EQ_INT(fx_events(&f, ev, sizeof(ev)), 0);
    CHECK_EQ_INT(store_revision(f.st), rev);
    CHECK_STREQ(health(&f, GPU, "gpu-3", b, sizeof(b)), "Unhealthy");
    CHECK_STREQ(holder(&f, GPU, "gpu-3", b, sizeof(b)), "ns/a/c");
    CHECK_EQ_INT(sql_int(&f, "SELECT removed FROM devices WHERE id='gpu-3'"), 1);
    /* registered again as listed (Unhealthy, same topology and properties) */
    n = strlen(three);
    again = malloc(n + 100);
    CHECK(again != NULL);
    if (!again) {
        fx_close(&f);
        return;
    }
    snprintf(
        again, n + 100,
        "%.*s,{\"id\":\"gpu-3\",\"health\":\"Unhealthy\",\"topology\":{\"nodes\":[{\"ID\":1}]},"
        "\"properties\":{\"model\":\"x\"}}]}",
        (int)(n - 2), three);
    CHECK_OK(put_devices(&f, GPU, again, NULL));
    free(again);
    CHECK_EQ_INT(fx_events(&f, ev, sizeof(ev)), 0);
    CHECK_EQ_INT(store_revision(f.st), rev);
    CHECK_EQ_INT(sql_int(&f, "SELECT removed FROM devices WHERE id='gpu-3'"), 0);
    /* released: registered, so it stays, free */
    CHECK_OK(release(&f, "ns", "a", NULL));
    CHECK_EQ_INT(fx_events(&f, ev, sizeof(ev)), 2);
    CHECK_STREQ(ev, "DELETED PodResources ns/a;MODIFIED Device gpu-3");
    CHECK_STREQ(health(&f, GPU, "gpu-3", b, sizeof(b)), "Unhealthy");
    fx_close(&f);
}

/* Schema 3: a let-go device keeps its bindings row (pod '') with the
 * revision of the change; a bind writes only the rows of devices whose
 * holder changed. Every read must see a let-go row as free, and the
 * device's revision must be the revision of its last event. */
static void test_let_go_rows(void)
{
    struct fx f;
    char ev[1024], b[128];
    json_t *d, *list = NULL;
    struct store_stats stats;
    uint64_t rev;

    if (fx_bound_a(&f, "[\"gpu-0\",\"gpu-1\"]"))
        return;
    CHECK_EQ_INT(sql_int(&f, "SELECT count(*) FROM pods WHERE device_keys="
                             "'" GPU "|gpu-0\n" GPU "|gpu-1'"),
                 1);
    /* a row without key lines (schema 2's, the kubelet mirror's): its
     * containers are walked instead */
    CHECK_OK(db_exec(f.st->commit.db, "UPDATE pods SET device_keys=NULL", NULL));
    /* gpu-0 let go, gpu-1 kept (no event, row untouched), gpu-2 taken */
    CHECK_OK(bind(&f, "ns", "a",
                  "{\"uid\":\"ua\",\"containers\":[{\"name\":\"c\",\"devices\":[{\"resourceName\":"
                  "\"" GPU "\",\"deviceIds\":[\"gpu-1\",\"gpu-2\"]}]}]}",
                  NULL, NULL, NULL));
    CHECK_EQ_INT(fx_events(&f, ev, sizeof(ev)), 3);
    CHECK_STREQ(ev, "MODIFIED PodResources ns/a;MODIFIED Device gpu-2;MODIFIED Device gpu-0");
    rev = store_revision(f.st);
    CHECK_EQ_INT(sql_int(&f, "SELECT count(*) FROM bindings WHERE pod=''"), 1);
    CHECK_EQ_INT(sql_int(&f, "SELECT revision FROM bindings WHERE device_id='gpu-0'"),
                 (int64_t)rev);
    CHECK_EQ_INT(sql_int(&f, "SELECT revision FROM bindings WHERE device_id='gpu-2'"),
                 (int64_t)rev - 1);
    /* the device's revision is its last event's, though its own row is older */
    d = device(&f, GPU, "gpu-0");
    CHECK(d && json_integer_value(json_object_get(d, "revision")) == (json_int_t)rev);
    CHECK(d && json_is_null(json_object_get(d, "holder")));
    json_decref(d);
    CHECK(sql_int(&f, "SELECT revision FROM devices WHERE id='gpu-0'") < (int64_t)rev);
    /* free devices: gpu-0 (let go) and gpu-3 */
    CHECK_OK(store_devices_list(f.st, GPU, NULL, true, &list));
    CHECK_EQ_INT(json_array_size(json_object_get(list, "devices")), 2);
    json_decref(list);
    list = NULL;
    CHECK_OK(store_stats(f.st, &stats));
    CHECK_EQ_INT(stats.bound_devices, 2);
    store_stats_release(&stats);
    /* the pods list by resource finds ns/a, not a pod named by a let-go row */
    CHECK_OK(store_pods_list(f.st, NULL, GPU, &list));
    CHECK_EQ_INT(json_array_size(json_object_get(list, "podResources")), 1);
    json_decref(list);
    list = NULL;
    /* another pod can bind, reserve and allocate a let-go device */
    CHECK_OK(reserve(&f, "ns", "r",
                     "{\"containers\":[{\"name\":\"c\",\"devices\":[{"
                     "\"resourceName\":\"" GPU "\",\"deviceIds\":[\"gpu-0\"]}]}]}",
                     NULL));
    CHECK_OK(store_reservation_delete(f.st, "ns", "r", 0, &f.err, &list));
    json_decref(list);
    list = NULL;
    CHECK_OK(allocate(&f, "ns", "b",
                      "{\"uid\":\"ub\",\"containers\":[{\"name\":\"c\",\"requests\":{\"" GPU
                      "\":2}}]}",
                      NULL, NULL, NULL));
    CHECK_STREQ(holder(&f, GPU, "gpu-0", b, sizeof(b)), "ns/b/c");
    CHECK_STREQ(holder(&f, GPU, "gpu-3", b, sizeof(b)), "ns/b/c");
    fx_some_events(&f, 1);
    /* malformed key lines: the write fails and changes nothing */
    rev = store_revision(f.st);
    CHECK_OK(db_exec(f.st->commit.db, "UPDATE pods SET device_keys='nobar' WHERE name='a'", NULL));
    CHECK_EQ_INT(release(&f, "ns", "a", NULL), ERR_DB);
    CHECK_EQ_INT(store_revision(f.st), rev);
    CHECK_STREQ(holder(&f, GPU, "gpu-1", b, sizeof(b)), "ns/a/c");
    CHECK_OK(db_exec(f.st->commit.db, "UPDATE pods SET device_keys=? WHERE name='a'", "t",
                     GPU "|gpu-1\n" GPU "|gpu-2"));
    /* a release lets every device of the pod go, and only those */
    CHECK_OK(release(&f, "ns", "a", NULL));
    CHECK_EQ_INT(fx_events(&f, ev, sizeof(ev)), 3);
    CHECK_STREQ(ev, "DELETED PodResources ns/a;MODIFIED Device gpu-1;MODIFIED Device gpu-2");
    CHECK_STREQ(holder(&f, GPU, "gpu-1", b, sizeof(b)), "-");
    CHECK_STREQ(holder(&f, GPU, "gpu-0", b, sizeof(b)), "ns/b/c");
    CHECK_EQ_INT(sql_int(&f, "SELECT count(*) FROM bindings WHERE pod=''"), 2);
    /* a let-go device that leaves the set is DELETED, its row with it */
    CHECK_OK(put_devices(&f, GPU,
                         "{\"devices\":[{\"id\":\"gpu-0\",\"topology\":{\"nodes\":[{\"ID\":0}]}},"
                         "{\"id\":\"gpu-3\",\"topology\":{\"nodes\":[{\"ID\":1}]},"
                         "\"properties\":{\"model\":\"x\"}}]}",
                         NULL));
    CHECK_EQ_INT(fx_events(&f, ev, sizeof(ev)), 2);
    CHECK_STREQ(ev, "DELETED Device gpu-1;DELETED Device gpu-2");
    CHECK_EQ_INT(sql_int(&f, "SELECT count(*) FROM bindings WHERE pod=''"), 0);
    CHECK_EQ_INT(sql_int(&f, "SELECT count(*) FROM bindings"), 2);
    fx_close(&f);
}
TEST_MAIN(quiet, test_rebind_event_text, test_removed_bound_device, test_removed_unhealthy_device,
          test_let_go_rows)
