/* SPDX-License-Identifier: Apache-2.0 */
/* escape_test.c - text for a terminal through plugin/escape.h: the escape
 * sequences found in API objects (a window title, a screen clear, a
 * hyperlink) come out inert, printable UTF-8 unchanged, broken UTF-8 as
 * bytes; and a table cell and a YAML document carry no raw ESC. */
#include "../../../common/common.h"
#include "../../../plugin/escape.h"
#include "../../../plugin/table.h"
#include "../../../plugin/yamlout.h"
#include "../test.h"

#include <jansson.h>

static void check(const char *in, const char *want)
{
    struct strbuf sb = STRBUF_INIT;

    CHECK_OK(escape_terminal(&sb, in));
    CHECK_STREQ(sb.buf ? sb.buf : "", want);
    CHECK(escape_needed(in) == (strcmp(in, want) != 0));
    strbuf_release(&sb);
}

static void test_escape(void)
{
    check("", "");
    check("GPU-a", "GPU-a");
    check("gpu\xc3\xa9-\xe2\x82\xac-\xf0\x9f\x98\x80", "gpu\xc3\xa9-\xe2\x82\xac-\xf0\x9f\x98\x80");
    check("\x1b]0;PWNED-TITLE\x07", "^[]0;PWNED-TITLE^G");
    check("a\x1b[2Jb", "a^[[2Jb");
    check("\x1b]8;;http://evil.example/\x07x\x1b]8;;\x07", "^[]8;;http://evil.example/^Gx^[]8;;^G");
    check("row\nnext\tcol\r", "row^Jnext^Icol^M");
    check("del\x7f", "del^?");
    check("c1 \xc2\x9b"
          "2J",
          "c1 \\u009B2J");
    check("bidi \xe2\x80\xae"
          "txt",
          "bidi \\u202Etxt");
    check("bad \xff\xfe", "bad \\xFF\\xFE");
    check("short \xe2\x82", "short \\xE2\\x82");
    check("overlong \xc0\x9b", "overlong \\xC0\\x9B");
    check("surrogate \xed\xa0\x80", "surrogate \\xED\\xA0\\x80");
}

static void test_table_cell(void)
{
    struct table t;
    struct strbuf sb = STRBUF_INIT;

    table_init(&t, 2);
    CHECK_OK(table_add(&t, "ID"));
    CHECK_OK(table_add(&t, "NODE"));
    CHECK_OK(table_add(&t, "gpu\x1b]0;x\x07"));
    CHECK_OK(table_add(&t, "n\n1"));
    CHECK_OK(table_render(&t, &sb));
    CHECK(sb.buf && strchr(sb.buf, '\x1b') == NULL && strchr(sb.buf, '\x07') == NULL);
    CHECK(sb.buf && strstr(sb.buf, "gpu^[]0;x^G   n^J1\n") != NULL);
    table_release(&t);
    strbuf_release(&sb);
}

static void test_yaml(void)
{
    struct strbuf sb = STRBUF_INIT;
    json_t *v = json_pack("{s:s}", "id", "gpu\x1b]0;x\x07\xc2\x9b");

    CHECK_OK(yamlout_write(v, &sb));
    CHECK(sb.buf && strchr(sb.buf, '\x1b') == NULL && strchr(sb.buf, '\x07') == NULL &&
          strstr(sb.buf, "\xc2\x9b") == NULL);
    json_decref(v);
    strbuf_release(&sb);
}

TEST_MAIN(test_escape, test_table_cell, test_yaml)
