/* SPDX-License-Identifier: Apache-2.0 */
/* store_resv_test.c - reservations (store_resv.c) through store.h:
 * pre-assigning devices, their state as pods bind and devices change, and
 * deleting them (store_fx.h). */
#include "store_fx.h"

static void test_reservations(void)
{
    struct fx f;
    char ev[1024], s[256], b[128];
    json_t *p = NULL, *r = NULL, *list = NULL;

    if (fx_open(&f, 100))
        return;
    CHECK_OK(put_devices(&f, GPU, FOUR_GPUS, NULL));
    CHECK_EQ_INT(fx_events(&f, ev, sizeof(ev)), 4);

    /* pre-assign gpu-1 to ns/r: Pending, the device shows reservedFor */
    CHECK_OK(reserve(&f, "ns", "r",
                     "{\"containers\":[{\"name\":\"c\",\"devices\":[{\"resourceName\":\"" GPU
                     "\",\"deviceIds\":[\"gpu-1\"]}]}]}",
                     &r));
    CHECK_STREQ(json_string_value(json_object_get(r, "state")), "Pending");
    json_decref(r);
    r = NULL;
    CHECK_EQ_INT(fx_events(&f, ev, sizeof(ev)), 2);
    CHECK_STREQ(ev, "ADDED Reservation ns/r;MODIFIED Device gpu-1");
    {
        json_t *d = device(&f, GPU, "gpu-1");

        CHECK_STREQ(json_string_value(json_object_get(json_object_get(d, "reservedFor"), "name")),
                    "r");
        json_decref(d);
    }
    CHECK_OK(store_devices_list(f.st, GPU, NULL, true, &list));
    CHECK_EQ_INT(json_array_size(json_object_get(list, "devices")), 3);
    json_decref(list);

    /* another pod's allocate avoids it: node 0 keeps only gpu-0 -> node 1 */
    CHECK_OK(allocate(&f, "ns", "other",
                      "{\"uid\":\"o\",\"containers\":[{\"name\":\"c\","
                      "\"requests\":{\"" GPU "\":2}}]}",
                      NULL, NULL, &p));
    CHECK_STREQ(pod_devices(p, s, sizeof(s)), "c:" GPU "=gpu-2,gpu-3");
    json_decref(p);
    p = NULL;
    CHECK_EQ_INT(fx_events(&f, ev, sizeof(ev)), 3);
    CHECK_STREQ(ev, "ADDED PodResources ns/other;MODIFIED Device gpu-2;MODIFIED Device gpu-3");
    /* and a bind by another pod is refused, naming the reservation */
    CHECK_EQ_INT(bind(&f, "ns", "thief",
                      "{\"uid\":\"t\",\"containers\":[{\"name\":\"c\",\"devices\":[{"
                      "\"resourceName\":\"" GPU "\",\"deviceIds\":[\"gpu-1\"]}]}]}",
                      NULL, NULL, NULL),
                 ERR_CONFLICT);
    CHECK(strstr(f.err.msg, "ns/r") != NULL);

    /* the pod's own allocate uses its reservation as written */
    CHECK_OK(allocate(&f, "ns", "r",
                      "{\"uid\":\"ur\",\"containers\":[{\"name\":\"c\","
                      "\"requests\":{\"" GPU "\":1}}]}",
                      NULL, NULL, &p));
    CHECK_STREQ(pod_devices(p, s, sizeof(s)), "c:" GPU "=gpu-1");
    json_decref(p);
    p = NULL;
    CHECK_STREQ(resv_state(&f, "ns", "r", b, sizeof(b)), "Bound");
    CHECK_STREQ(holder(&f, GPU, "gpu-1", b, sizeof(b)), "ns/r/c");
    CHECK_EQ_INT(fx_events(&f, ev, sizeof(ev)), 3);
    CHECK_STREQ(ev, "ADDED PodResources ns/r;MODIFIED Device gpu-1;MODIFIED Reservation ns/r");

    /* a reservation of a device bound elsewhere: 409 naming the holder */
    CHECK_EQ_INT(reserve(&f, "ns", "late",
                         "{\"containers\":[{\"name\":\"c\",\"devices\":[{\"resourceName\":\"" GPU
                         "\",\"deviceIds\":[\"gpu-2\"]}]}]}",
                         NULL),
                 ERR_CONFLICT);
    CHECK(strstr(f.err.msg, "ns/other") != NULL);
    /* ... or reserved for another pod */
    CHECK_EQ_INT(reserve(&f, "ns", "late",
                         "{\"containers\":[{\"name\":\"c\",\"devices\":[{\"resourceName\":\"" GPU
                         "\",\"deviceIds\":[\"gpu-1\"]}]}]}",
                         NULL),
                 ERR_CONFLICT);
    CHECK_STREQ(resv_state(&f, "ns", "late", b, sizeof(b)), "missing");
    CHECK_EQ_INT(fx_events(&f, ev, sizeof(ev)), 0);

    /* Conflict: ns/z reserved gpu-0 but is bound elsewhere */
    CHECK_OK(release(&f, "ns", "other", NULL));
    CHECK_OK(reserve(&f, "ns", "z",
                     "{\"containers\":[{\"name\":\"c\",\"devices\":[{\"resourceName\":\"" GPU
                     "\",\"deviceIds\":[\"gpu-0\"]}]}]}",
                     NULL));
    CHECK_STREQ(resv_state(&f, "ns", "z", b, sizeof(b)), "Pending");
    CHECK_OK(bind(&f, "ns", "z",
                  "{\"uid\":\"z\",\"containers\":[{\"name\":\"c\",\"devices\":[{"
                  "\"resourceName\":\"" GPU "\",\"deviceIds\":[\"gpu-3\"]}]}]}",
                  NULL, NULL, NULL));
    CHECK_STREQ(resv_state(&f, "ns", "z", b, sizeof(b)), "Conflict");
    {
        json_t *one = NULL;

        CHECK_OK(store_reservation_get(f.st, "ns", "z", &one));
        CHECK(strstr(json_string_value(
                         json_object_get(json_object_get(one, "reservation"), "message")),
                     "gpu-3") != NULL);
        json_decref(one);
    }
    /* released: Pending again */
    CHECK_OK(release(&f, "ns", "z", "z"));
    CHECK_STREQ(resv_state(&f, "ns", "z", b, sizeof(b)), "Pending");
    /* a reserved device that turns Unhealthy: Conflict */
    {
        json_t *out = NULL;

        CHECK_OK(store_device_set_health(f.st, GPU, "gpu-0", "Unhealthy", &f.err, &out));
        json_decref(out);
    }
    CHECK_STREQ(resv_state(&f, "ns", "z", b, sizeof(b)), "Conflict");

    CHECK_OK(store_reservations_list(f.st, &list));
    CHECK_EQ_INT(json_array_size(json_object_get(list, "reservations")), 2);
    json_decref(list);
    {
        json_t *out = NULL;

        CHECK_OK(store_reservation_delete(f.st, "ns", "z", 0, &f.err, &out));
        json_decref(out);
        out = NULL;
        CHECK_EQ_INT(store_reservation_delete(f.st, "ns", "z", 0, &f.err, &out), ERR_NOTFOUND);
    }
    CHECK_STREQ(resv_state(&f, "ns", "z", b, sizeof(b)), "missing");
    {
        json_t *d = device(&f, GPU, "gpu-0");

        CHECK(json_is_null(json_object_get(d, "reservedFor")));
        json_decref(d);
    }
    fx_some_events(&f, 1);
    fx_close(&f);
}
TEST_MAIN(quiet, test_reservations)
