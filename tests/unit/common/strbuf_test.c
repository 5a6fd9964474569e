/* SPDX-License-Identifier: Apache-2.0 */
/* strbuf_test.c - the growable buffer through common/strbuf.h. */
#include "../../../common/common.h"
#include "../../../common/strbuf.h"
#include "../test.h"

static void test_add(void)
{
    struct strbuf sb = STRBUF_INIT;

    CHECK(sb.buf == NULL && sb.len == 0 && sb.cap == 0);
    CHECK_OK(strbuf_add(&sb, "abc", 3));
    CHECK_EQ_INT(sb.len, 3);
    CHECK_STREQ(sb.buf, "abc");
    CHECK(sb.cap > sb.len);
    CHECK_OK(strbuf_add(&sb, "defXX", 3)); /* only 'n' bytes */
    CHECK_EQ_INT(sb.len, 6);
    CHECK_STREQ(sb.buf, "abcdef");
    CHECK_OK(strbuf_add(&sb, "a\0b", 3)); /* embedded NUL kept */
    CHECK_EQ_INT(sb.len, 9);
    CHECK(memcmp(sb.buf + 6, "a\0b", 3) == 0);
    CHECK_EQ_INT(sb.buf[9], '\0');
    strbuf_release(&sb);
    CHECK(sb.buf == NULL && sb.len == 0 && sb.cap == 0);
}

static void test_add_empty(void)
{
    struct strbuf sb = STRBUF_INIT;

    CHECK_OK(strbuf_add(&sb, "", 0));
    CHECK(sb.buf != NULL);
    CHECK_EQ_INT(sb.len, 0);
    CHECK_STREQ(sb.buf, "");
    strbuf_release(&sb);
    strbuf_release(&sb); /* twice is fine */
}

static void test_printf(void)
{
    struct strbuf sb = STRBUF_INIT;

    CHECK_OK(strbuf_printf(&sb, "%s=%d", "x", 42));
    CHECK_STREQ(sb.buf, "x=42");
    CHECK_EQ_INT(sb.len, 4);
    CHECK_OK(strbuf_printf(&sb, ",%s", "y"));
    CHECK_STREQ(sb.buf, "x=42,y");
    CHECK_EQ_INT(sb.len, 6);
    CHECK_OK(strbuf_printf(&sb, "%s", ""));
    CHECK_EQ_INT(sb.len, 6);
    CHECK_STREQ(sb.buf, "x=42,y");
    CHECK_OK(strbuf_add(&sb, "!", 1));
    CHECK_STREQ(sb.buf, "x=42,y!");
    strbuf_release(&sb);
}

static void test_growth(void)
{
    struct strbuf sb = STRBUF_INIT;
    char big[1000];
    size_t i;
    bool ok = true;

    memset(big, 'q', sizeof(big));
    for (i = 0; i < 100; i++) {
        if (strbuf_add(&sb, big, sizeof(big)))
            ok = false;
        if (sb.buf[sb.len] != '\0' || sb.len >= sb.cap)
            ok = false;
    }
    CHECK(ok);
    CHECK_EQ_INT(sb.len, 100000);
    CHECK_EQ_INT(strlen(sb.buf), 100000);
    CHECK(sb.cap > 100000);
    for (i = 0; i < 1000; i++) {
        if (strbuf_printf(&sb, "%04zu", i))
            ok = false;
    }
    CHECK(ok);
    CHECK_EQ_INT(sb.len, 104000);
    CHECK_EQ_INT(strlen(sb.buf), 104000);
    CHECK(memcmp(sb.buf + 100000, "00000001", 8) == 0);
    CHECK(memcmp(sb.buf + 104000 - 4, "0999", 4) == 0);

    /* one printf larger than the initial capacity */
    strbuf_release(&sb);
    CHECK_OK(strbuf_printf(&sb, "%0*d", 5000, 7));
    CHECK_EQ_INT(sb.len, 5000);
    CHECK_EQ_INT(strlen(sb.buf), 5000);
    CHECK_EQ_INT(sb.buf[4999], '7');
    strbuf_release(&sb);
}

static void test_detach(void)
{
    struct strbuf sb = STRBUF_INIT;
    size_t len = 99;
    char *s;

    CHECK_OK(strbuf_printf(&sb, "hello %s", "world"));
    s = strbuf_detach(&sb, &len);
    CHECK_STREQ(s, "hello world");
    CHECK_EQ_INT(len, 11);
    CHECK(sb.buf == NULL && sb.len == 0 && sb.cap == 0);
    free(s);

    /* reusable after detach */
    CHECK_OK(strbuf_add(&sb, "again", 5));
    CHECK_STREQ(sb.buf, "again");
    s = strbuf_detach(&sb, NULL);
    CHECK_STREQ(s, "again");
    free(s);

    /* an unused buffer detaches to NULL */
    len = 99;
    s = strbuf_detach(&sb, &len);
    CHECK(s == NULL);
    CHECK_EQ_INT(len, 0);
}

/* After a reserve, adds within it never reallocate (so cannot fail). */
static void test_reserve(void)
{
    struct strbuf sb = STRBUF_INIT;
    char *before;
    size_t cap, i;

    CHECK_OK(strbuf_add(&sb, "x", 1));
    CHECK_OK(strbuf_reserve(&sb, 1000));
    CHECK(sb.cap >= 1 + 1000 + 1);
    before = sb.buf;
    cap = sb.cap;
    for (i = 0; i < 1000; i++)
        CHECK_OK(strbuf_add(&sb, "y", 1));
    CHECK(sb.buf == before && sb.cap == cap);
    CHECK_EQ_INT(sb.len, 1001);
    CHECK_OK(strbuf_reserve(&sb, 0)); /* room for the NUL is always there */
    CHECK(sb.buf == before);
    strbuf_release(&sb);
}

TEST_MAIN(test_add, test_add_empty, test_printf, test_growth, test_detach, test_reserve)
