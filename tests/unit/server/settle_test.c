/* SPDX-License-Identifier: Apache-2.0 */
/* settle_test.c - a restarted kubelet's gaps bridged (settle.h): no window
 * without a failure or a lost resource; a failure opens one, in which a pod
 * holding devices left out or listed with fewer is kept as it was (a pod
 * without devices is not), and a lost
 * resource's devices are kept; an allocatable answer emptied opens one, a
 * single resource gone does not; new pods and devices pass; a failure within
 * the window starts it over; the window ends
 * after SETTLE_MS and is not opened again by what it kept; a pod deleted
 * meanwhile goes then. */
#include "../../../common/common.h"
#include "../../../server/settle.h"
#include "../test.h"

#define POD(name, dev)                                                                             \
    "{\"namespace\":\"ml\",\"name\":\"" name "\",\"containers\":[{\"name\":\"main\",\"devices\":"  \
    "[{\"resourceName\":\"example.com/r\",\"deviceIds\":[" dev "]}]}]}"
#define DEV(id) "{\"resourceName\":\"example.com/r\",\"id\":\"" id "\"}"
#define NIC "{\"resourceName\":\"example.com/nic\",\"id\":\"nic-0\"}"

static json_t *snap(const char *pods, const char *devs)
{
    char buf[2048];
    json_t *j;

    snprintf(buf, sizeof(buf), "{\"pods\":[%s],\"devices\":[%s],\"cpuIds\":[],\"memory\":[]}", pods,
             devs);
    j = json_loads(buf, 0, NULL);
    CHECK(j != NULL);
    return j;
}

/* Apply 'pods'/'devs' at 'now' and store the result; returns what was held
 * and the settled snapshot's pods and devices as text in 'out'. */
static struct settle_held step(struct settle *s, const char *pods, const char *devs, uint64_t now,
                               char *out, size_t cap)
{
    struct settle_held held;
    json_t *j = snap(pods, devs);
    char *p, *d;

    CHECK_OK(settle_apply(s, j, now, &held));
    settle_stored(s, j);
    p = json_dumps(json_object_get(j, "pods"), JSON_COMPACT);
    d = json_dumps(json_object_get(j, "devices"), JSON_COMPACT);
    snprintf(out, cap, "%s %s", p ? p : "?", d ? d : "?");
    free(p);
    free(d);
    json_decref(j);
    return held;
}

static void test_steady(void)
{
    struct settle s = {0};
    struct settle_held h;
    char out[2048];

    h = step(&s, POD("a", "\"d1\""), DEV("d1") "," DEV("d2"), 1000, out, sizeof(out));
    CHECK(!h.started);
    /* The pod released, d2 gone but the resource kept: taken at once. */
    h = step(&s, "", DEV("d1"), 2000, out, sizeof(out));
    CHECK(!h.started && h.pods == 0 && h.devices == 0 && !settle_active(&s));
    CHECK_STREQ(out, "[] [{\"resourceName\":\"example.com/r\",\"id\":\"d1\"}]");
    settle_free(&s);
}

static void test_failure_window(void)
{
    struct settle s = {0};
    struct settle_held h;
    char out[2048];

    step(&s, POD("a", "\"d1\"") "," POD("b", "\"d2\"") "," POD("idle", ""),
         DEV("d1") "," DEV("d2") "," NIC, 1000, out, sizeof(out));
    settle_failed(&s);
    /* Back, without a's device, without b, with no example.com/r device and a new pod c. */
    h = step(&s, POD("a", "") "," POD("c", "\"d3\""), NIC, 2000, out, sizeof(out));
    CHECK(h.started && settle_active(&s));
    CHECK_EQ_INT(h.pods, 2);
    CHECK_EQ_INT(h.devices, 2);
    CHECK_STREQ(out, "[" POD("a", "\"d1\"") "," POD("c", "\"d3\"") "," POD(
                         "b", "\"d2\"") "] "
                                        "[" NIC "," DEV("d1") "," DEV("d2") "]");
    /* Within the window the same answer is settled the same way, and not opened again. */
    h = step(&s, POD("a", "") "," POD("c", "\"d3\""), NIC, 2000 + SETTLE_MS / 4, out, sizeof(out));
    CHECK(!h.started && h.pods == 2 && h.devices == 2);
    /* Gone again within the window: the window starts over. */
    settle_failed(&s);
    h = step(&s, POD("a", "") "," POD("c", "\"d3\""), NIC, 2000 + SETTLE_MS / 2, out, sizeof(out));
    CHECK(h.started && h.pods == 2 && h.devices == 2);
    /* The kubelet whole again: nothing to hold. */
    h = step(&s, POD("a", "\"d1\"") "," POD("b", "\"d2\"") "," POD("c", "\"d3\""),
             DEV("d1") "," DEV("d2") "," NIC, 2000 + SETTLE_MS / 2 + SETTLE_MS - 1, out,
             sizeof(out));
    CHECK(h.pods == 0 && h.devices == 0);
    /* b deleted meanwhile: kept until the window ends, then gone. */
    h = step(&s, POD("a", "\"d1\"") "," POD("c", "\"d3\""), DEV("d1") "," DEV("d2") "," NIC,
             2000 + SETTLE_MS / 2 + SETTLE_MS - 1, out, sizeof(out));
    CHECK_EQ_INT(h.pods, 1);
    h = step(&s, POD("a", "\"d1\"") "," POD("c", "\"d3\""), DEV("d1") "," DEV("d2") "," NIC,
             2000 + SETTLE_MS / 2 + SETTLE_MS, out, sizeof(out));
    CHECK(!h.started && h.pods == 0 && !settle_active(&s));
    CHECK(strstr(out, "\"b\"") == NULL);
    settle_free(&s);
}

static void test_emptied(void)
{
    struct settle s = {0};
    struct settle_held h;
    char out[2048];

    step(&s, POD("a", "\"d1\""), DEV("d1") "," NIC, 1000, out, sizeof(out));
    /* One resource gone (one plugin): taken at once. */
    h = step(&s, POD("a", "\"d1\""), NIC, 1200, out, sizeof(out));
    CHECK(!h.started && !settle_active(&s));
    CHECK_STREQ(out, "[" POD("a", "\"d1\"") "] [" NIC "]");
    /* No allocatable device at all (a restart the polls missed): a window. */
    h = step(&s, POD("a", "\"d1\""), "", 1500, out, sizeof(out));
    CHECK(h.started && h.devices == 1 && h.pods == 0);
    CHECK_STREQ(out, "[" POD("a", "\"d1\"") "] [" NIC "]");
    /* The window ends with nothing allocatable still: it goes, and no window opens again. */
    h = step(&s, POD("a", "\"d1\""), "", 1500 + SETTLE_MS, out, sizeof(out));
    CHECK(!h.started && h.devices == 0 && !settle_active(&s));
    CHECK_STREQ(out, "[" POD("a", "\"d1\"") "] []");
    h = step(&s, POD("a", "\"d1\""), "", 2000 + SETTLE_MS, out, sizeof(out));
    CHECK(!h.started && !settle_active(&s));
    settle_free(&s);
}

static void test_first_answer(void)
{
    struct settle s = {0};
    struct settle_held h;
    char out[2048];

    /* A failure before any answer was stored has nothing to keep. */
    settle_failed(&s);
    h = step(&s, POD("a", "\"d1\""), DEV("d1"), 1000, out, sizeof(out));
    CHECK(!h.started && !settle_active(&s));
    settle_free(&s);
}

TEST_MAIN(test_steady, test_failure_window, test_emptied, test_first_answer)
