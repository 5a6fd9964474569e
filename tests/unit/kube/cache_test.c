/* SPDX-License-Identifier: Apache-2.0 */
/* cache_test.c - the key -> JSON map and its change notifications through
 * kube/cache.h. */
#include "../../../common/common.h"
#include "../../../kube/cache.h"
#include "../test.h"

/* Every notification, in order. */
struct seen {
    int n;             /* callbacks */
    char keys[16][64]; /* their keys (first 16) */
};

static void on_change(void *ctx, const char *key)
{
    struct seen *s = ctx;

    if (s->n < 16)
        snprintf(s->keys[s->n], sizeof(s->keys[0]), "%s", key);
    s->n++;
}

/* True when 'key' was notified. */
static bool saw(const struct seen *s, const char *key)
{
    int i;

    for (i = 0; i < s->n && i < 16; i++) {
        if (strcmp(s->keys[i], key) == 0)
            return true;
    }
    return false;
}

static json_t *obj(const char *ns, const char *name, const char *rv, int v)
{
    return json_pack("{s:{s:s,s:s,s:s},s:i}", "metadata", "namespace", ns, "name", name,
                     "resourceVersion", rv, "v", v);
}

static void test_set_get_del(void)
{
    struct seen s = {0};
    struct cache *c = cache_new(on_change, &s);
    json_t *a = obj("ns", "a", "5", 1), *a2 = obj("ns", "a", "5", 1), *b = obj("ns", "a", "6", 2);
    json_t *got;

    CHECK(c != NULL);
    CHECK(!cache_synced(c));
    CHECK_EQ_INT(cache_size(c), 0);
    CHECK(cache_get(c, "ns/a") == NULL);

    cache_set(c, "ns/a", a, false);
    CHECK_EQ_INT(s.n, 1);
    CHECK_STREQ(s.keys[0], "ns/a");
    CHECK_EQ_INT(cache_size(c), 1);
    got = cache_get(c, "ns/a");
    CHECK(got != NULL && got != a); /* a copy, the caller's own */
    CHECK(json_equal(got, a2));
    json_object_set_new(got, "v", json_integer(99)); /* changes the copy only */
    json_decref(got);
    json_object_set_new(a, "v", json_integer(98)); /* and the caller's object is not kept */
    got = cache_get(c, "ns/a");
    CHECK(json_equal(got, a2));
    json_decref(got);

    cache_set(c, "ns/a", a2, false); /* equal content: no notification */
    CHECK_EQ_INT(s.n, 1);
    /* Equal whatever the key order: the same keys inserted the other way round. */
    got = json_object();
    json_object_set_new(got, "v", json_integer(1));
    json_object_set(got, "metadata", json_object_get(a2, "metadata"));
    cache_set(c, "ns/a", got, false);
    json_decref(got);
    CHECK_EQ_INT(s.n, 1);
    /* 1 and 1.0 differ, as for json_equal. */
    got = json_deep_copy(a2);
    json_object_set_new(got, "v", json_real(1.0));
    cache_set(c, "ns/a", got, false);
    CHECK_EQ_INT(s.n, 2);
    cache_set(c, "ns/a", a2, false);
    CHECK_EQ_INT(s.n, 3);
    json_decref(got);
    s.n = 1;                        /* the two notifications above aside, as before */
    cache_set(c, "ns/a", b, false); /* changed */
    CHECK_EQ_INT(s.n, 2);
    got = cache_get(c, "ns/a");
    CHECK_EQ_INT(json_integer_value(json_object_get(got, "v")), 2);
    json_decref(got);

    cache_del(c, "ns/a");
    CHECK_EQ_INT(s.n, 3);
    CHECK_STREQ(s.keys[2], "ns/a");
    CHECK_EQ_INT(cache_size(c), 0);
    CHECK(cache_get(c, "ns/a") == NULL);
    cache_del(c, "ns/a"); /* absent: no notification */
    cache_del(c, "ns/never");
    CHECK_EQ_INT(s.n, 3);

    /* the borrowed objects are still ours */
    CHECK_EQ_INT(a->refcount, 1);
    CHECK_EQ_INT(b->refcount, 1);
    json_decref(a);
    json_decref(a2);
    json_decref(b);
    cache_free(c);
    cache_free(NULL);
}

static void test_reader_keeps_object(void)
{
    struct cache *c = cache_new(NULL, NULL); /* no callback */
    json_t *a = obj("ns", "a", "1", 1), *b = obj("ns", "a", "2", 2), *got;

    cache_set(c, "ns/a", a, false);
    json_decref(a);
    got = cache_get(c, "ns/a");
    cache_set(c, "ns/a", b, false);
    json_decref(b);
    CHECK_EQ_INT(json_integer_value(json_object_get(got, "v")), 1); /* still valid */
    json_decref(got);
    cache_free(c);
}

static void test_newer_only(void)
{
    struct seen s = {0};
    struct cache *c = cache_new(on_change, &s);
    json_t *v10 = obj("ns", "a", "10", 10), *v9 = obj("ns", "a", "9", 9);
    json_t *v11 = obj("ns", "a", "11", 11), *opaque = obj("ns", "a", "abc", 12);
    json_t *v3 = obj("ns", "a", "3", 3), *got;

    cache_set(c, "ns/a", v10, true);
    CHECK_EQ_INT(s.n, 1);
    cache_set(c, "ns/a", v9, true); /* older: ignored */
    CHECK_EQ_INT(s.n, 1);
    got = cache_get(c, "ns/a");
    CHECK_EQ_INT(json_integer_value(json_object_get(got, "v")), 10);
    json_decref(got);

    cache_set(c, "ns/a", v11, true); /* newer: taken */
    CHECK_EQ_INT(s.n, 2);
    cache_set(c, "ns/a", opaque, true); /* opaque: taken */
    CHECK_EQ_INT(s.n, 3);
    got = cache_get(c, "ns/a");
    CHECK_EQ_INT(json_integer_value(json_object_get(got, "v")), 12);
    json_decref(got);
    cache_set(c, "ns/a", v3, true); /* the stored one is opaque: taken */
    CHECK_EQ_INT(s.n, 4);
    got = cache_get(c, "ns/a");
    CHECK_EQ_INT(json_integer_value(json_object_get(got, "v")), 3);
    json_decref(got);

    cache_set(c, "ns/a", v10, true);
    cache_set(c, "ns/a", v9, false); /* not newer_only: taken */
    CHECK_EQ_INT(s.n, 6);
    got = cache_get(c, "ns/a");
    CHECK_EQ_INT(json_integer_value(json_object_get(got, "v")), 9);
    json_decref(got);

    json_decref(v10);
    json_decref(v9);
    json_decref(v11);
    json_decref(opaque);
    json_decref(v3);
    cache_free(c);
}

static void test_replace(void)
{
    struct seen s = {0};
    struct cache *c = cache_new(on_change, &s);
    json_t *a = obj("ns", "a", "1", 1), *b = obj("ns", "b", "1", 1), *keep = obj("ns", "k", "1", 1);
    json_t *all, *got;
    char **keys;
    size_t n;

    cache_set(c, "ns/a", a, false);
    cache_set(c, "ns/b", b, false);
    cache_set(c, "ns/k", keep, false);
    CHECK_EQ_INT(s.n, 3);
    CHECK(!cache_synced(c));
    s.n = 0;

    /* b changes, k stays, a goes, n arrives */
    all = json_pack("{s:o,s:O,s:o}", "ns/b", obj("ns", "b", "2", 2), "ns/k", keep, "ns/n",
                    obj("ns", "n", "1", 1));
    cache_replace(c, all);
    CHECK_EQ_INT(s.n, 3);
    CHECK(saw(&s, "ns/a"));
    CHECK(saw(&s, "ns/b"));
    CHECK(saw(&s, "ns/n"));
    CHECK(!saw(&s, "ns/k"));
    CHECK(cache_synced(c));
    CHECK_EQ_INT(cache_size(c), 3);
    CHECK(cache_get(c, "ns/a") == NULL);
    got = cache_get(c, "ns/b");
    CHECK_EQ_INT(json_integer_value(json_object_get(got, "v")), 2);
    json_decref(got);

    keys = cache_keys(c, &n);
    CHECK(keys != NULL);
    CHECK_EQ_INT(n, 3);
    {
        size_t i;
        int found = 0;

        for (i = 0; keys && keys[i]; i++) {
            const char *ks = keys[i];

            found += !strcmp(ks, "ns/b") || !strcmp(ks, "ns/k") || !strcmp(ks, "ns/n");
        }
        CHECK_EQ_INT(found, 3);
        CHECK_EQ_INT(i, 3); /* NULL-terminated after the last */
    }
    cache_keys_free(keys);

    /* 'all' is borrowed: changing it later does not reach the cache */
    json_object_del(all, "ns/b");
    CHECK_EQ_INT(cache_size(c), 3);
    json_decref(all);

    /* the same content again: no notification, still synced */
    s.n = 0;
    all = json_object();
    cache_replace(c, all);
    CHECK_EQ_INT(s.n, 3); /* everything removed */
    CHECK_EQ_INT(cache_size(c), 0);
    CHECK(cache_synced(c));
    s.n = 0;
    cache_replace(c, all);
    CHECK_EQ_INT(s.n, 0);
    keys = cache_keys(c, &n);
    CHECK(keys != NULL && keys[0] == NULL);
    CHECK_EQ_INT(n, 0);
    cache_keys_free(keys);
    cache_keys_free(NULL);
    json_decref(all);

    json_decref(a);
    json_decref(b);
    json_decref(keep);
    cache_free(c);
}

static void test_key_of(void)
{
    char key[64], small[6];
    json_t *k8s = json_pack("{s:{s:s,s:s},s:s}", "metadata", "namespace", "default", "name",
                            "pod-1", "kind", "Pod");
    json_t *pr = json_pack("{s:s,s:s,s:i}", "namespace", "kube-system", "name", "p2", "revision",
                           3);
    json_t *no_ns = json_pack("{s:{s:s}}", "metadata", "name", "x");
    json_t *no_name = json_pack("{s:s}", "namespace", "ns");

    CHECK(cache_key_of(k8s, key, sizeof(key)));
    CHECK_STREQ(key, "default/pod-1");
    CHECK(cache_key_of(pr, key, sizeof(key)));
    CHECK_STREQ(key, "kube-system/p2");
    CHECK(cache_key_of(no_ns, key, sizeof(key))); /* cluster-scoped */
    CHECK_STREQ(key, "x");
    CHECK(!cache_key_of(no_name, key, sizeof(key)));
    CHECK(!cache_key_of(NULL, key, sizeof(key)));
    CHECK(!cache_key_of(k8s, small, sizeof(small))); /* does not fit */
    json_decref(k8s);
    json_decref(pr);
    json_decref(no_ns);
    json_decref(no_name);
}

TEST_MAIN(test_set_get_del, test_reader_keeps_object, test_newer_only, test_replace, test_key_of)
