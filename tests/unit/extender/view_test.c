/* SPDX-License-Identifier: Apache-2.0 */
/* view_test.c - free devices from NodeDevices and DeviceBindings, filter,
 * prioritize and choose through extender/view.h. */
#include "../../../common/common.h"
#include "../../../extender/view.h"
#include "../test.h"

#include <time.h>

/* A NodeDevices of 'n' healthy example.com/gpu, NUMA i/2, ids NODE-gI. */
static json_t *nd(const char *node, int n)
{
    json_t *devs = json_array();
    char id[64];
    int i;

    for (i = 0; i < n; i++) {
        snprintf(id, sizeof(id), "%s-g%d", node, i);
        json_array_append_new(devs, json_pack("{s:s,s:s,s:s,s:{s:[{s:i}]}}", "resourceName",
                                              "example.com/gpu", "id", id, "health", "Healthy",
                                              "topology", "nodes", "id", i / 2));
    }
    return json_pack("{s:{s:s},s:{s:o}}", "metadata", "name", node, "status", "devices", devs);
}

/* A DeviceBinding pre-assigning 'id' on 'node' (spec), or holding it (status, Bound). */
static json_t *dvb(const char *node, const char *id, bool bound)
{
    json_t *c = json_pack("[{s:s,s:[{s:s,s:[s]}]}]", "name", "main", "devices", "resourceName",
                          "example.com/gpu", "deviceIds", id);

    if (bound)
        return json_pack("{s:{s:s,s:s,s:o}}", "status", "nodeName", node, "phase", "Bound",
                         "containers", c);
    return json_pack("{s:{s:s,s:o}}", "spec", "nodeName", node, "containers", c);
}

static json_t *totals(int n)
{
    return json_pack("{s:i}", "example.com/gpu", n);
}

static json_t *requests(int n)
{
    return json_pack("[{s:s,s:{s:i}}]", "name", "main", "requests", "example.com/gpu", n);
}

static void test_filter(void)
{
    struct view *v = view_new(60000);
    json_t *o = nd("a", 4), *names = json_pack("[s,s,s]", "a", "b", "c"), *t = totals(2);
    json_t *fit, *failed, *b1 = dvb("a", "a-g0", false), *b2 = dvb("a", "a-g1", true);

    view_set_node(v, "a", o);
    json_decref(o);
    o = nd("b", 1);
    view_set_node(v, "b", o);
    json_decref(o);
    CHECK_EQ_INT(view_nodes(v), 2);
    view_set_binding(v, "ml/p1", b1);
    view_set_binding(v, "ml/p2", b2);
    CHECK_OK(view_filter(v, names, t, &fit, &failed));
    CHECK_EQ_INT(json_array_size(fit), 1);
    CHECK_STREQ(json_string_value(json_array_get(fit, 0)), "a");
    CHECK_STREQ(json_string_value(json_object_get(failed, "b")),
                "example.com/gpu: 1 free healthy, 2 requested");
    CHECK_STREQ(json_string_value(json_object_get(failed, "c")), "node has no NodeDevices");
    json_decref(fit);
    json_decref(failed);

    /* A third taken device: a no longer fits; freed again when the binding goes. */
    o = dvb("a", "a-g2", false);
    view_set_binding(v, "ml/p3", o);
    json_decref(o);
    CHECK_OK(view_filter(v, names, t, &fit, &failed));
    CHECK_EQ_INT(json_array_size(fit), 0);
    json_decref(fit);
    json_decref(failed);
    view_set_binding(v, "ml/p2", NULL);
    CHECK_OK(view_filter(v, names, t, &fit, &failed));
    CHECK_EQ_INT(json_array_size(fit), 1);
    json_decref(fit);
    json_decref(failed);
    json_decref(b1);
    json_decref(b2);
    json_decref(names);
    json_decref(t);
    view_free(v);
}

static void test_unmanaged_passes(void)
{
    struct view *v = view_new(60000);
    json_t *names = json_pack("[s]", "nowhere"), *t = json_pack("{s:i}", "other.io/x", 3);
    json_t *fit, *failed;

    CHECK_OK(view_filter(v, names, t, &fit, &failed));
    CHECK_EQ_INT(json_array_size(fit), 1); /* no NodeDevices lists other.io/x */
    json_decref(fit);
    json_decref(failed);
    view_add_resource(v, "other.io/x");
    CHECK_OK(view_filter(v, names, t, &fit, &failed));
    CHECK_EQ_INT(json_array_size(fit), 0); /* --resource: checked */
    json_decref(fit);
    json_decref(failed);
    json_decref(names);
    json_decref(t);
    view_free(v);
}

static void test_prioritize(void)
{
    struct view *v = view_new(60000);
    json_t *a = nd("a", 4), *b = nd("b", 4), *names = json_pack("[s,s,s]", "a", "b", "c");
    json_t *t = totals(2), *list, *b1 = dvb("b", "b-g1", false);

    view_set_node(v, "a", a);
    view_set_node(v, "b", b);
    /* b: NUMA 0 keeps b-g0, NUMA 1 both: 2 fit in one NUMA node on either,
     * b has fewer left: b scores higher. */
    view_set_binding(v, "ml/x", b1);
    CHECK_OK(view_prioritize(v, names, t, &list));
    CHECK_EQ_INT(json_array_size(list), 3);
    CHECK_STREQ(json_string_value(json_object_get(json_array_get(list, 1), "Host")), "b");
    CHECK_EQ_INT(json_integer_value(json_object_get(json_array_get(list, 1), "Score")), 10);
    CHECK(json_integer_value(json_object_get(json_array_get(list, 0), "Score")) < 10);
    CHECK_EQ_INT(json_integer_value(json_object_get(json_array_get(list, 2), "Score")), 0);
    json_decref(list);
    json_decref(t);
    t = totals(3); /* a: 2 NUMA nodes; b: 3 free over 2 as well, fewer left */
    CHECK_OK(view_prioritize(v, names, t, &list));
    CHECK(json_integer_value(json_object_get(json_array_get(list, 1), "Score")) >
          json_integer_value(json_object_get(json_array_get(list, 0), "Score")));
    json_decref(list);
    json_decref(a);
    json_decref(b);
    json_decref(b1);
    json_decref(names);
    json_decref(t);
    view_free(v);
}

static void test_choose_assume(void)
{
    struct view *v = view_new(60000);
    json_t *a = nd("a", 4), *r = requests(2), *c1 = NULL, *c2 = NULL, *c3 = NULL, *seen;
    struct error err = {0};

    view_set_node(v, "a", a);
    CHECK_OK(view_choose(v, "a", "ml/p1", "u1", r, &c1, &err));
    CHECK_OK(view_choose(v, "a", "ml/p2", "u2", r, &c2, &err));
    CHECK_EQ_INT(view_assumed(v), 2);
    /* Two choices never share a device: one NUMA node each. */
    CHECK_STREQ(
        json_string_value(json_array_get(
            json_object_get(json_array_get(json_object_get(json_array_get(c1, 0), "devices"), 0),
                            "deviceIds"),
            0)),
        "a-g0");
    CHECK_STREQ(
        json_string_value(json_array_get(
            json_object_get(json_array_get(json_object_get(json_array_get(c2, 0), "devices"), 0),
                            "deviceIds"),
            0)),
        "a-g2");
    CHECK_EQ_INT(view_choose(v, "a", "ml/p3", "u3", r, &c3, &err), ERR_CONFLICT);
    CHECK_STREQ(err.msg, "example.com/gpu: 0 free healthy, 2 requested");
    CHECK_EQ_INT(view_choose(v, "zz", "ml/p3", "u3", r, &c3, &err), ERR_CONFLICT);
    /* The informer shows p1's DeviceBinding: no longer assumed, still taken. */
    seen = json_pack("{s:{s:[{s:s}]},s:{s:s,s:O}}", "metadata", "ownerReferences", "uid", "u1",
                     "spec", "nodeName", "a", "containers", c1);
    view_set_binding(v, "ml/p1", seen);
    CHECK_EQ_INT(view_assumed(v), 1);
    CHECK_EQ_INT(view_choose(v, "a", "ml/p3", "u3", r, &c3, &err), ERR_CONFLICT);
    /* p2's bind failed: its devices are free again. */
    view_unassume(v, "ml/p2");
    CHECK_OK(view_choose(v, "a", "ml/p3", "u3", r, &c3, &err));
    json_decref(seen);
    json_decref(c1);
    json_decref(c2);
    json_decref(c3);
    json_decref(r);
    json_decref(a);
    view_free(v);
}

static void test_assume_expires(void)
{
    struct view *v = view_new(1);
    json_t *a = nd("a", 2), *r = requests(2), *c = NULL, *names = json_pack("[s]", "a");
    json_t *t = totals(2), *fit, *failed;
    struct error err = {0};

    view_set_node(v, "a", a);
    CHECK_OK(view_choose(v, "a", "ml/p1", "u1", r, &c, &err));
    json_decref(c);
    nanosleep(&(struct timespec){0, 5 * 1000000}, NULL);
    CHECK_OK(view_filter(v, names, t, &fit, &failed));
    CHECK_EQ_INT(json_array_size(fit), 1); /* never seen, timed out: free again */
    CHECK_EQ_INT(view_assumed(v), 0);
    json_decref(fit);
    json_decref(failed);
    json_decref(names);
    json_decref(t);
    json_decref(r);
    json_decref(a);
    view_free(v);
}

TEST_MAIN(test_filter, test_unmanaged_passes, test_prioritize, test_choose_assume,
          test_assume_expires)
