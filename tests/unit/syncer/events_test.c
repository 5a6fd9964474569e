/* SPDX-License-Identifier: Apache-2.0 */
/* events_test.c - Events about DeviceBindings through syncer/events.h, on a
 * canned server: the first is created, the same again counts its series,
 * another note is a new Event, the budget drops the excess. */
#include "../../../common/common.h"
#include "../../../syncer/events.h"
#include "../test.h"
#include "../kube/responder.h"

#define CHECK_PREFIX(s, prefix)                                                                    \
    TEST_REPORT(strncmp((s), (prefix), strlen(prefix)) == 0, "\"%.80s\" does not start \"%s\"",    \
                (s), (prefix))
#define HEAD_201                                                                                   \
    "HTTP/1.1 201 Created\r\nContent-Type: application/json\r\nConnection: close\r\n\r\n"

static json_t *dvb(void)
{
    return json_pack("{s:{s:s,s:s,s:s}}", "metadata", "namespace", "ml", "name", "train-0", "uid",
                     "u-1");
}

static void test_series_and_budget(void)
{
    const struct reply r[] = {
        {HEAD_201 "{}", NULL, 0},
        {HEAD_200 "{}", NULL, 0},
        {HEAD_201 "{}", NULL, 0},
    };
    struct responder s;
    struct kubeconfig kc = {0};
    struct rest_opts o = {.max_attempts = 1, .kc = &kc};
    struct events e = {.node = "node-a"};
    struct strbuf sb = STRBUF_INIT;
    char url[64];
    json_t *obj = dvb();
    int i;

    CHECK_OK(rest_global_init());
    responder_start(&s, r, 3);
    snprintf(url, sizeof(url), "http://127.0.0.1:%d", s.port);
    kc.server = url;
    e.kube = rest_new(&o);
    events_record(&e, obj, "Warning", "Conflict", "Reserve", "device g1 is held by ml/other", 1000);
    events_record(&e, obj, "Warning", "Conflict", "Reserve", "device g1 is held by ml/other", 2000);
    events_record(&e, obj, "Normal", "PreassignmentHonored", "Reserve", "bound as pre-assigned",
                  3000);
    responder_stop(&s);
    CHECK_EQ_INT(s.served, 3);
    CHECK_PREFIX(s.req[0], "POST /apis/events.k8s.io/v1/namespaces/ml/events HTTP");
    CHECK(strstr(s.req[0], "\"reportingController\":\"podres.dev/podres-syncer\"") != NULL);
    CHECK(strstr(s.req[0], "\"reportingInstance\":\"node-a\"") != NULL);
    CHECK(strstr(s.req[0], "\"kind\":\"DeviceBinding\"") != NULL);
    CHECK(strstr(s.req[0], "\"uid\":\"u-1\"") != NULL);
    CHECK(strstr(s.req[0], "\"note\":\"device g1 is held by ml/other\"") != NULL);
    CHECK_PREFIX(s.req[1], "PATCH /apis/events.k8s.io/v1/namespaces/ml/events/train-0.");
    CHECK(strstr(s.req[1], "\"count\":2") != NULL);
    CHECK_PREFIX(s.req[2], "POST /apis/events.k8s.io/v1/namespaces/ml/events HTTP");
    CHECK_EQ_INT(e.created, 2);
    CHECK_EQ_INT(e.repeated, 1);
    /* the budget: 17 tokens left now, the server answers none (no more replies) */
    for (i = 0; i < 30; i++)
        events_record(&e, obj, "Warning", "Conflict", "Reserve", "x", 3000);
    CHECK(e.dropped >= 13);
    CHECK_OK(events_render(&e, &sb));
    CHECK(strstr(sb.buf, "podres_syncer_events_total{result=\"dropped\"}") != NULL);
    strbuf_release(&sb);
    /* refilled after EVENTS_REFILL_MS */
    {
        uint64_t d = e.dropped;

        events_record(&e, obj, "Warning", "Conflict", "Reserve", "y", 3000 + EVENTS_REFILL_MS);
        CHECK_EQ_INT(e.dropped, d);
    }
    rest_free(e.kube);
    events_release(&e);
    json_decref(obj);
    rest_global_cleanup();
}

TEST_MAIN(test_series_and_budget)
