/* SPDX-License-Identifier: Apache-2.0 */
/* token_test.c - the write token file: refused when open to others, read
 * again when it changes, the last good token kept while it is bad. */
#include "../../../common/common.h"
#include "../../../server/token.h"
#include "../test.h"

#include <sys/stat.h>
#include <unistd.h>

static char dir[] = "/tmp/token_test.XXXXXX";
static char path[64];

/* Write 'text' to 'path' with 'mode': in place, or by renaming a new file
 * over it (as a rotation by a secret manager does). */
static void put(const char *text, mode_t mode, bool rename_over)
{
    char tmp[80];
    const char *p = path;
    FILE *f;

    if (rename_over) {
        snprintf(tmp, sizeof(tmp), "%s.new", path);
        p = tmp;
    }
    f = fopen(p, "w");
    CHECK(f != NULL);
    if (!f)
        return;
    fputs(text, f);
    fclose(f);
    CHECK_OK(chmod(p, mode));
    if (rename_over)
        CHECK_OK(rename(tmp, path));
}

static void test_open_refuses_open_modes(void)
{
    static const mode_t bad[] = {0644, 0640, 0604, 0620, 0602, 0660, 0666};
    struct token *t = NULL;
    size_t i;

    for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        put("secret\n", bad[i], false);
        CHECK_EQ_INT(token_open(path, &t), ERR_INVAL);
        CHECK(t == NULL);
    }
    put("secret\n", 0400, false);
    CHECK_OK(token_open(path, &t));
    token_free(t);
    CHECK_OK(unlink(path));
    CHECK_EQ_INT(token_open(path, &t), ERR_IO);
    token_free(NULL);
}

static void test_check(void)
{
    struct token *t = NULL;

    put("secret \n", 0600, false);
    CHECK_OK(token_open(path, &t));
    CHECK(token_check(t, "Bearer secret"));
    CHECK(token_check(t, "bearer secret"));
    CHECK(!token_check(t, "Bearer secre"));
    CHECK(!token_check(t, "Bearer secrets"));
    CHECK(!token_check(t, "Basic secret"));
    CHECK(!token_check(t, "secret"));
    CHECK(!token_check(t, NULL));
    CHECK(!token_check(NULL, "Bearer secret"));
    token_free(t);
}

static void test_rotation(void)
{
    struct token *t = NULL;

    put("first\n", 0600, false);
    CHECK_OK(token_open(path, &t));
    CHECK(token_check(t, "Bearer first"));
    put("second\n", 0600, true); /* a new inode */
    CHECK(token_check(t, "Bearer second"));
    CHECK(!token_check(t, "Bearer first"));
    put("thirdd\n", 0600, false); /* in place, the same size */
    CHECK(token_check(t, "Bearer thirdd"));
    CHECK(!token_check(t, "Bearer second"));
    token_free(t);
}

static void test_bad_file_keeps_last_good(void)
{
    struct token *t = NULL;

    put("good\n", 0600, false);
    CHECK_OK(token_open(path, &t));
    CHECK_OK(chmod(path, 0644)); /* open to others: refused */
    CHECK(token_check(t, "Bearer good"));
    put("other\n", 0644, false);
    CHECK(!token_check(t, "Bearer other"));
    CHECK(token_check(t, "Bearer good"));
    put("\n", 0600, false); /* empty */
    CHECK(token_check(t, "Bearer good"));
    CHECK_OK(unlink(path)); /* gone */
    CHECK(token_check(t, "Bearer good"));
    CHECK_OK(mkdir(path, 0700)); /* not a file */
    CHECK(token_check(t, "Bearer good"));
    CHECK_OK(rmdir(path));
    put("back\n", 0600, false); /* good again */
    CHECK(token_check(t, "Bearer back"));
    CHECK(!token_check(t, "Bearer good"));
    token_free(t);
}

static void setup(void)
{
    CHECK(mkdtemp(dir) != NULL);
    snprintf(path, sizeof(path), "%s/token", dir);
}

static void teardown(void)
{
    unlink(path);
    CHECK_OK(rmdir(dir));
}

TEST_MAIN(setup, test_open_refuses_open_modes, test_check, test_rotation,
          test_bad_file_keeps_last_good, teardown)
