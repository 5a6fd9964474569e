/* SPDX-License-Identifier: Apache-2.0 */
/* common_test.c - the helpers of common/common.h: str_copy() and str_join()
 * against the snprintf() calls they replace, cuts included, and hexval(). */
#include "../../../common/common.h"
#include "../test.h"

static void test_copy(void)
{
    static const char *const cases[] = {"", "a", "abc", "abcd", "abcdefgh", "caf\xc3\xa9"};
    char got[5], want[5];
    size_t i, cap;

    for (i = 0; i < ARRAY_SIZE(cases); i++) {
        for (cap = 1; cap <= sizeof(got); cap++) {
            memset(got, 'x', sizeof(got));
            memset(want, 'x', sizeof(want));
            str_copy(got, cap, cases[i]);
            snprintf(want, cap, "%s", cases[i]);
            CHECK(memcmp(got, want, sizeof(got)) == 0); /* nothing past the cut either */
        }
    }
}

static void test_join(void)
{
    static const char *const parts[] = {"", "a", "ab", "abcdef"};
    char got[6], want[6];
    size_t i, j, cap;

    for (i = 0; i < ARRAY_SIZE(parts); i++) {
        for (j = 0; j < ARRAY_SIZE(parts); j++) {
            for (cap = 1; cap <= sizeof(got); cap++) {
                memset(got, 'x', sizeof(got));
                memset(want, 'x', sizeof(want));
                str_join(got, cap, parts[i], '|', parts[j]);
                snprintf(want, cap, "%s|%s", parts[i], parts[j]);
                CHECK(memcmp(got, want, sizeof(got)) == 0);
            }
        }
    }
    str_join(got, sizeof(got), "ns", '/', "p");
    CHECK_STREQ(got, "ns/p");
}

static void test_hexval(void)
{
    CHECK_EQ_INT(hexval('0'), 0);
    CHECK_EQ_INT(hexval('9'), 9);
    CHECK_EQ_INT(hexval('a'), 10);
    CHECK_EQ_INT(hexval('F'), 15);
    CHECK_EQ_INT(hexval('g'), -1);
    CHECK_EQ_INT(hexval('/'), -1);
    CHECK_EQ_INT(hexval('\0'), -1);
}

TEST_MAIN(test_copy, test_join, test_hexval)
