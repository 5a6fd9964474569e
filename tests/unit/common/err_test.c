/* SPDX-License-Identifier: Apache-2.0 */
/* err_test.c - struct error: errorf() sets and returns the code, cuts a long
 * message, accepts NULL; error_msg() falls back to err_str(). */
#include "../../../common/common.h"
#include "../test.h"

static void test_errorf(void)
{
    struct error e = {0};
    char big[2 * ERROR_MSG_MAX];

    CHECK_STREQ(error_msg(&e), "ok");
    CHECK_EQ_INT(errorf(&e, ERR_INVAL, "bad '%s': %d", "x", 7), ERR_INVAL);
    CHECK_EQ_INT(e.code, ERR_INVAL);
    CHECK_STREQ(error_msg(&e), "bad 'x': 7");
    memset(big, 'a', sizeof(big) - 1);
    big[sizeof(big) - 1] = '\0';
    CHECK_EQ_INT(errorf(&e, ERR_CONFLICT, "%s", big), ERR_CONFLICT);
    CHECK_EQ_INT(strlen(e.msg), ERROR_MSG_MAX - 1);
    CHECK_EQ_INT(errorf(NULL, ERR_NOTFOUND, "dropped"), ERR_NOTFOUND);
    e = (struct error){.code = ERR_NOMEM};
    CHECK_STREQ(error_msg(&e), "out of memory");
}

TEST_MAIN(test_errorf)
