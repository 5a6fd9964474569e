/* SPDX-License-Identifier: Apache-2.0 */
/* test.h - a tiny TAP harness. Each CHECK prints "ok N" or "not ok N" with
 * both values and file:line; TEST_MAIN runs the listed tests and exits
 * non-zero when any check failed; test_stderr_begin/end catch what is
 * logged meanwhile. */
#ifndef PODRES_TEST_H
#define PODRES_TEST_H
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static int test_n, test_failed;

#define TEST_REPORT(ok, fmt, ...)                                                                  \
    do {                                                                                           \
        test_n++;                                                                                  \
        if (ok) {                                                                                  \
            printf("ok %d - %s:%d\n", test_n, __FILE__, __LINE__);                                 \
        } else {                                                                                   \
            test_failed++;                                                                         \
            printf("not ok %d - %s:%d: " fmt "\n", test_n, __FILE__, __LINE__, __VA_ARGS__);       \
        }                                                                                          \
    } while (0)

#define CHECK(cond) TEST_REPORT((cond), "%s", #cond)
#define CHECK_OK(expr)                                                                             \
    do {                                                                                           \
        long long check_v_ = (long long)(expr);                                                    \
        TEST_REPORT(check_v_ == 0, "%s returned %lld, want 0", #expr, check_v_);                   \
    } while (0)
#define CHECK_EQ_INT(a, b)                                                                         \
    do {                                                                                           \
        long long check_a_ = (long long)(a), check_b_ = (long long)(b);                            \
        TEST_REPORT(check_a_ == check_b_, "%s == %lld, want %lld", #a, check_a_, check_b_);        \
    } while (0)
#define CHECK_STREQ(a, b)                                                                          \
    do {                                                                                           \
        const char *check_a_ = (a), *check_b_ = (b);                                               \
        TEST_REPORT(check_a_ &&check_b_ &&strcmp(check_a_, check_b_) == 0,                         \
                    "%s == \"%s\", want \"%s\"", #a, check_a_ ? check_a_ : "(null)",               \
                    check_b_ ? check_b_ : "(null)");                                               \
    } while (0)

/* stderr sent to a temporary file, between test_stderr_begin() and
 * test_stderr_end(). */
struct test_stderr {
    FILE *f;   /* the file */
    int saved; /* stderr's descriptor before */
};

/* false (and stderr unchanged) when it cannot. */
static inline bool test_stderr_begin(struct test_stderr *c)
{
    c->f = tmpfile();
    c->saved = c->f ? dup(STDERR_FILENO) : -1;
    if (c->saved < 0) {
        if (c->f)
            fclose(c->f);
        return false;
    }
    fflush(stderr);
    dup2(fileno(c->f), STDERR_FILENO);
    return true;
}

/* stderr back; what was written to it since into 'out' (cap >= 1 bytes,
 * cut to fit, NUL-terminated). */
static inline void test_stderr_end(struct test_stderr *c, char *out, size_t cap)
{
    size_t n;

    fflush(stderr);
    dup2(c->saved, STDERR_FILENO);
    close(c->saved);
    rewind(c->f);
    n = fread(out, 1, cap - 1, c->f);
    out[n] = '\0';
    fclose(c->f);
}

#define TEST_MAIN(...)                                                                             \
    int main(void)                                                                                 \
    {                                                                                              \
        void (*tests_[])(void) = {__VA_ARGS__};                                                    \
        size_t i_;                                                                                 \
        for (i_ = 0; i_ < sizeof(tests_) / sizeof(tests_[0]); i_++)                                \
            tests_[i_]();                                                                          \
        printf("1..%d\n", test_n);                                                                 \
        return test_failed ? 1 : 0;                                                                \
    }

#endif
