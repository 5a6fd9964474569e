/* SPDX-License-Identifier: Apache-2.0 */
/* nodefeed_test.c - the check of podresd's node name, through
 * syncer/nodefeed.h, against a canned podresd: the same name, another, none
 * (an older podresd), and a podresd that cannot be asked. */
#include "../../../common/common.h"
#include "../../../syncer/nodefeed.h"
#include "../test.h"
#include "../kube/responder.h"

#define CHECK_PREFIX(s, prefix) CHECK(strncmp((s), (prefix), strlen(prefix)) == 0)
#define VERSION(node) HEAD_200 "{\"version\":\"x\",\"nodeName\":\"" node "\",\"revision\":1}"

struct feed {
    struct kubeconfig kc;
    struct rest *pd;
    struct cache *pods, *resv;
    struct nodefeed nf;
    char url[64];
};

static void feed_new(struct feed *f, int port)
{
    struct rest_opts o = {.max_attempts = 1};

    snprintf(f->url, sizeof(f->url), "http://127.0.0.1:%d", port);
    f->kc = (struct kubeconfig){.server = f->url};
    o.kc = &f->kc;
    f->pd = rest_new(&o);
    f->pods = cache_new(NULL, NULL);
    f->resv = cache_new(NULL, NULL);
    f->nf = (struct nodefeed){.podresd = f->pd, .pods = f->pods, .resv = f->resv, .node = "node-a"};
}

static void feed_free(struct feed *f)
{
    nodefeed_release(&f->nf);
    cache_free(f->pods);
    cache_free(f->resv);
    rest_free(f->pd);
}

static void test_names(void)
{
    const struct reply r[] = {{VERSION("node-a"), NULL, 0}, {VERSION("node-b"), NULL, 0},
                              {VERSION("node-b"), NULL, 0}, {VERSION(""), NULL, 0},
                              {VERSION("node-b"), NULL, 0}, {VERSION("node-a"), NULL, 0}};
    struct responder s;
    struct feed f;
    struct error e = {0}, why = {0};

    responder_start(&s, r, 6);
    feed_new(&f, s.port);
    CHECK_OK(nodefeed_check_node(&f.nf, &e));
    CHECK(!nodefeed_mismatch(&f.nf, &why));
    CHECK_EQ_INT(nodefeed_check_node(&f.nf, &e), ERR_CONFLICT);
    CHECK_STREQ(e.msg, "podresd serves node 'node-b', not --node-name 'node-a': not syncing (is "
                       "--node-name right? it must be podresd's --node-name)");
    CHECK(nodefeed_mismatch(&f.nf, NULL));
    CHECK(nodefeed_mismatch(&f.nf, &why));
    CHECK_EQ_INT(why.code, ERR_UNAVAIL);
    CHECK_STREQ(why.msg, e.msg);
    /* A full read asks first, and reads nothing from a podresd of another node. */
    CHECK_EQ_INT(nodefeed_list(&f.nf), ERR_CONFLICT);
    CHECK(!cache_synced(f.pods) && !cache_synced(f.resv));
    /* An older podresd names no node: nothing to hold against it. */
    CHECK_OK(nodefeed_check_node(&f.nf, &e));
    CHECK(!nodefeed_mismatch(&f.nf, NULL));
    CHECK_EQ_INT(nodefeed_check_node(&f.nf, &e), ERR_CONFLICT);
    CHECK_OK(nodefeed_check_node(&f.nf, &e));
    CHECK(!nodefeed_mismatch(&f.nf, NULL));
    responder_stop(&s);
    CHECK_EQ_INT(s.served, 6);
    CHECK_PREFIX(s.req[0], "GET /version HTTP");
    CHECK_PREFIX(s.req[2], "GET /version HTTP");
    feed_free(&f);
}

/* A podresd that cannot be asked: the request's error, and no mismatch. */
static void test_unreachable(void)
{
    const struct reply none[] = {{VERSION("node-a"), NULL, 0}};
    struct responder s;
    struct feed f;
    struct error e = {0};
    int port;

    responder_start(&s, none, 0);
    port = s.port;
    responder_stop(&s);
    feed_new(&f, port);
    CHECK(nodefeed_check_node(&f.nf, &e) != ERR_OK);
    CHECK(nodefeed_check_node(&f.nf, &e) != ERR_CONFLICT);
    CHECK(!nodefeed_mismatch(&f.nf, NULL));
    feed_free(&f);
}

TEST_MAIN(test_names, test_unreachable)
