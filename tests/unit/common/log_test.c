/* SPDX-License-Identifier: Apache-2.0 */
/* log_test.c - common/log.h: the RFC 3339 time of log_time() and the lines
 * log_write() writes in both formats, each starting with that time. */
#include "../../../common/common.h"
#include "../test.h"

#include <regex.h>
#include <unistd.h>

static void test_time(void)
{
    struct timespec ts = {.tv_sec = 0, .tv_nsec = 0};
    char buf[LOG_TIME_MAX];

    CHECK_EQ_INT(log_time(buf, sizeof(buf), &ts), 24);
    CHECK_STREQ(buf, "1970-01-01T00:00:00.000Z");
    ts.tv_sec = 1709528767; /* 2024-03-04T05:06:07Z, a leap year's March */
    ts.tv_nsec = 89999999;  /* milliseconds are cut, not rounded */
    CHECK_EQ_INT(log_time(buf, sizeof(buf), &ts), 24);
    CHECK_STREQ(buf, "2024-03-04T05:06:07.089Z");
    ts.tv_sec = 4102444799; /* 2099-12-31T23:59:59Z */
    ts.tv_nsec = 999999999;
    log_time(buf, sizeof(buf), &ts);
    CHECK_STREQ(buf, "2099-12-31T23:59:59.999Z");
    CHECK_EQ_INT(log_time(buf, 24, &ts), 0); /* no room for the NUL */
    CHECK_STREQ(buf, "");
}

/* The line log_write() writes to stderr for one message. */
static void capture(const char *format, char *out, size_t cap)
{
    struct test_stderr c;

    out[0] = '\0';
    CHECK_OK(log_setup(format, "debug"));
    CHECK(test_stderr_begin(&c));
    if (c.saved < 0)
        return;
    log_write(LOG_WARN, "test", "cannot open '%s'", "a\"b");
    test_stderr_end(&c, out, cap);
}

static bool matches(const char *s, const char *pattern)
{
    regex_t re;
    bool ok;

    if (regcomp(&re, pattern, REG_EXTENDED | REG_NOSUB))
        return false;
    ok = regexec(&re, s, 0, NULL, 0) == 0;
    regfree(&re);
    return ok;
}

#define T3339 "[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}\\.[0-9]{3}Z"

static void test_lines(void)
{
    char line[512];

    capture("text", line, sizeof(line));
    TEST_REPORT(
        matches(line, "^time=" T3339 " level=warn mod=test msg=\"cannot open 'a\\\\\"b'\"\n$"),
        "text line: %s", line);
    capture("json", line, sizeof(line));
    TEST_REPORT(matches(line, "^\\{\"time\":\"" T3339
                              "\",\"level\":\"warn\",\"mod\":\"test\",\"msg\":\"cannot open "
                              "'a\\\\\"b'\"\\}\n$"),
                "json line: %s", line);
    CHECK(log_setup("xml", NULL) != 0);
    CHECK(log_setup("text", "verbose") != 0);
}

TEST_MAIN(test_time, test_lines)
