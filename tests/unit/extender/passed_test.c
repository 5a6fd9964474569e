/* SPDX-License-Identifier: Apache-2.0 */
/* passed_test.c - filter's answers remembered for bind, through
 * extender/passed.h: per uid and node, replaced, expired, and pushed out
 * oldest first past the capacity. */
#include "../../../common/common.h"
#include "../../../extender/passed.h"
#include "../test.h"

static json_t *names2(const char *a, const char *b)
{
    return json_pack("[s,s]", a, b);
}

static void test_note_and_has(void)
{
    struct passed *p = passed_new(8, 1000);
    json_t *n = names2("n1", "n2"), *m = json_pack("[s]", "n3");

    CHECK(p != NULL);
    CHECK(!passed_has(p, "u1", "n1", 0));
    CHECK_OK(passed_note(p, "u1", n, 100));
    CHECK(passed_has(p, "u1", "n1", 100));
    CHECK(passed_has(p, "u1", "n2", 1100)); /* the time to live is inclusive */
    CHECK(!passed_has(p, "u1", "n2", 1101));
    CHECK(!passed_has(p, "u1", "n3", 100));
    CHECK(!passed_has(p, "u2", "n1", 100)); /* another pod */
    CHECK_OK(passed_note(p, "u1", m, 200)); /* a new filter replaces the old answer */
    CHECK(!passed_has(p, "u1", "n1", 200));
    CHECK(passed_has(p, "u1", "n3", 200));
    CHECK_EQ_INT(passed_count(p), 1);
    json_decref(n);
    json_decref(m);
    passed_free(p);
    passed_free(NULL);
}

static void test_capacity(void)
{
    struct passed *p = passed_new(3, 1000);
    json_t *n = json_pack("[s]", "n1"), *none = json_array();
    char uid[16];
    int i;

    for (i = 0; i < 3; i++) {
        snprintf(uid, sizeof(uid), "u%d", i);
        CHECK_OK(passed_note(p, uid, n, (uint64_t)(10 + i)));
    }
    CHECK_OK(passed_note(p, "u3", n, 20)); /* u0, the oldest, goes */
    CHECK_EQ_INT(passed_count(p), 3);
    CHECK(!passed_has(p, "u0", "n1", 20));
    CHECK(passed_has(p, "u1", "n1", 20) && passed_has(p, "u3", "n1", 20));
    CHECK_OK(passed_note(p, "u1", n, 30)); /* a known pod takes no room */
    CHECK(passed_has(p, "u2", "n1", 30));
    CHECK_OK(passed_note(p, "u4", n, 2000)); /* all but none expired: swept at once */
    CHECK_EQ_INT(passed_count(p), 1);
    CHECK_OK(passed_note(p, "u5", none, 2000)); /* filter let nothing through */
    CHECK(!passed_has(p, "u5", "n1", 2000));
    json_decref(n);
    json_decref(none);
    passed_free(p);
}

TEST_MAIN(test_note_and_has, test_capacity)
