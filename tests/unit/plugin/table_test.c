/* SPDX-License-Identifier: Apache-2.0 */
/* table_test.c - kubectl's column alignment and AGE through plugin/table.h. */
#include "../../../common/common.h"
#include "../../../plugin/table.h"
#include "../test.h"

static void render_rows(const char *const *cells, size_t n, size_t ncols, char *out, size_t cap)
{
    struct strbuf sb = STRBUF_INIT;
    struct table t;
    size_t i;

    table_init(&t, ncols);
    for (i = 0; i < n; i++)
        CHECK_OK(table_add(&t, cells[i]));
    CHECK_OK(table_render(&t, &sb));
    snprintf(out, cap, "%s", sb.buf ? sb.buf : "");
    strbuf_release(&sb);
    table_release(&t);
}

static void test_align(void)
{
    static const char *const cells[] = {
        "NAME", "RESOURCES", "X", "node-a", "example.com/gpu=6", "0", "b", NULL, "long last cell"};
    char out[512];

    render_rows(cells, ARRAY_SIZE(cells), 3, out, sizeof(out));
    /* Widest cell + 3, at least 6; the last column unpadded; NULL is <none>. */
    CHECK_STREQ(out, "NAME     RESOURCES           X\n"
                     "node-a   example.com/gpu=6   0\n"
                     "b        <none>              long last cell\n");
}

static void test_utf8_width(void)
{
    static const char *const cells[] = {"ID", "H", "gpü-0", "ok"};
    char out[128];

    render_rows(cells, ARRAY_SIZE(cells), 2, out, sizeof(out));
    CHECK_STREQ(out, "ID      H\ngpü-0   ok\n"); /* ü is one column */
}

static void test_empty(void)
{
    char out[16] = "x";

    render_rows(NULL, 0, 3, out, sizeof(out));
    CHECK_STREQ(out, "");
}

static void test_age(void)
{
    static const struct {
        long long s;
        const char *want;
    } cases[] = {
        {-5, "<invalid>"}, {-1, "0s"},         {0, "0s"},         {119, "119s"},    {120, "2m"},
        {185, "3m5s"},     {600, "10m"},       {10799, "179m"},   {10800, "3h"},    {11100, "3h5m"},
        {28800, "8h"},     {172799, "47h"},    {172800, "2d"},    {180000, "2d2h"}, {691200, "8d"},
        {63072000, "2y"},  {63158400, "2y1d"}, {252288000, "8y"},
    };
    char buf[32];
    size_t i;

    for (i = 0; i < ARRAY_SIZE(cases); i++) {
        table_age(cases[i].s, buf, sizeof(buf));
        CHECK_STREQ(buf, cases[i].want);
    }
}

TEST_MAIN(test_align, test_utf8_width, test_empty, test_age)
