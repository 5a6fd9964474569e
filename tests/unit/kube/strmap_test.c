/* SPDX-License-Identifier: Apache-2.0 */
/* strmap_test.c - the string map through kube/strmap.h: put, replace, get,
 * delete, growth past many buckets, and a walk that deletes as it goes. */
#include "../../../common/common.h"
#include "../../../kube/strmap.h"
#include "../test.h"

static int freed;

static void count_free(void *v)
{
    (void)v;
    freed++;
}

static void test_put_get_del(void)
{
    struct strmap *m = strmap_new();
    int a = 1, b = 2, c = 3;
    void *old = &c;

    CHECK(m != NULL);
    CHECK_EQ_INT(strmap_size(m), 0);
    CHECK(strmap_get(m, "x") == NULL);
    CHECK_OK(strmap_put(m, "x", &a, &old));
    CHECK(old == NULL); /* a new key */
    CHECK_OK(strmap_put(m, "y", &b, NULL));
    CHECK(strmap_get(m, "x") == &a);
    CHECK(strmap_get(m, "y") == &b);
    CHECK_OK(strmap_put(m, "x", &c, &old));
    CHECK(old == &a); /* replaced: the caller's to free */
    CHECK(strmap_get(m, "x") == &c);
    CHECK_EQ_INT(strmap_size(m), 2);
    CHECK(strmap_del(m, "x") == &c);
    CHECK(strmap_del(m, "x") == NULL);
    CHECK(strmap_get(m, "x") == NULL);
    CHECK_EQ_INT(strmap_size(m), 1);
    freed = 0;
    strmap_free(m, count_free);
    CHECK_EQ_INT(freed, 1);
    strmap_free(NULL, count_free);
}

static void test_many(void)
{
    struct strmap *m = strmap_new();
    static int vals[5000];
    struct strmap_iter it;
    const char *key;
    char k[32];
    void *v;
    int i, seen = 0, bad = 0;

    for (i = 0; i < 5000; i++) {
        snprintf(k, sizeof(k), "ns/pod-%d", i);
        vals[i] = i;
        bad += strmap_put(m, k, &vals[i], NULL) != ERR_OK;
    }
    CHECK_EQ_INT(bad, 0);
    CHECK_EQ_INT(strmap_size(m), 5000);
    for (i = 0; i < 5000; i++) {
        snprintf(k, sizeof(k), "ns/pod-%d", i);
        bad += strmap_get(m, k) != &vals[i];
    }
    CHECK_EQ_INT(bad, 0);
    /* a walk sees each entry once, and may delete the one it just got */
    strmap_iter_init(&it, m);
    while (strmap_iter_next(&it, &key, &v)) {
        seen++;
        if (*(int *)v % 2 == 0)
            bad += strmap_del(m, key) != v;
    }
    CHECK_EQ_INT(bad, 0);
    CHECK_EQ_INT(seen, 5000);
    CHECK_EQ_INT(strmap_size(m), 2500);
    CHECK(strmap_get(m, "ns/pod-2") == NULL);
    CHECK(strmap_get(m, "ns/pod-3") == &vals[3]);
    strmap_free(m, NULL);
}

static void test_empty_walk(void)
{
    struct strmap *m = strmap_new();
    struct strmap_iter it;
    const char *key;

    strmap_iter_init(&it, m);
    CHECK(!strmap_iter_next(&it, &key, NULL));
    CHECK_OK(strmap_put(m, "", &it, NULL)); /* the empty key is a key */
    CHECK(strmap_get(m, "") == &it);
    strmap_free(m, NULL);
}

TEST_MAIN(test_put_get_del, test_many, test_empty_walk)
