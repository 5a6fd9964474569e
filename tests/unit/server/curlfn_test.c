/* SPDX-License-Identifier: Apache-2.0 */
/* curlfn_test.c - libcurl loaded at run time: every function is there, a
 * handle works through them, and a second load answers the first result. */
#include "../../../common/common.h"
#include "../../../server/curlfn.h"
#include "../test.h"

static void test_load(void)
{
    struct error e = {0};
    struct curl_slist *l;
    CURL *h;

    CHECK(curlfn.easy_init == NULL);
    CHECK_OK(curlfn_load(&e));
    CHECK_STREQ(e.msg, "");
    CHECK(curlfn.global_init && curlfn.global_cleanup && curlfn.easy_init && curlfn.easy_cleanup &&
          curlfn.easy_reset && curlfn.easy_setopt && curlfn.easy_getinfo && curlfn.easy_perform &&
          curlfn.easy_strerror && curlfn.slist_append && curlfn.slist_free_all);
    CHECK_OK(curlfn_load(NULL));
    h = curlfn.easy_init ? curlfn.easy_init() : NULL;
    CHECK(h != NULL);
    if (!h)
        return;
    CHECK_EQ_INT(curlfn.easy_setopt(h, CURLOPT_URL, "http://127.0.0.1:1/"), CURLE_OK);
    CHECK_EQ_INT(curlfn.easy_setopt(h, CURLOPT_CONNECTTIMEOUT_MS, 2000L), CURLE_OK);
    /* nothing listens on port 1 */
    CHECK_EQ_INT(curlfn.easy_perform(h), CURLE_COULDNT_CONNECT);
    CHECK(strlen(curlfn.easy_strerror(CURLE_COULDNT_CONNECT)) > 0);
    l = curlfn.slist_append(NULL, "A: b");
    CHECK(l != NULL);
    curlfn.slist_free_all(l);
    curlfn.easy_reset(h);
    curlfn.easy_cleanup(h);
    curlfn_cleanup();
}

TEST_MAIN(test_load)
