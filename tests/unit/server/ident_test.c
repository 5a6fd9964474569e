/* SPDX-License-Identifier: Apache-2.0 */
/* ident_test.c - identity rules through ident.h: the built-ins, the user's
 * rules before them, named groups and the errors of a bad rule. */
#include "../../../common/common.h"
#include "../../../common/jsonx.h"
#include "../../../server/ident.h"
#include "../test.h"

#include <pthread.h>

#define UUID "6f1e3a4b-1c2d-4e5f-8a9b-0c1d2e3f4a5b"

/* Rules of (resource, pattern) pairs up to a NULL resource, compiled. */
static struct ident_rules *compile(const char *res, ...)
{
    struct ident_rules *r = NULL;
    struct error e = {0};
    json_t *list = json_array();
    va_list ap;

    va_start(ap, res);
    for (; res; res = va_arg(ap, const char *)) {
        const char *pat = va_arg(ap, const char *);

        CHECK_OK(
            json_array_append_new(list, json_pack("{s:s,s:s}", "resource", res, "pattern", pat)));
    }
    va_end(ap);
    CHECK_OK(ident_rules_new(list, &r, &e));
    if (e.code)
        printf("# %s\n", e.msg);
    json_decref(list);
    return r;
}

/* ident_derive on 'id' of 'res' with no aliases yet: the physical id (or
 * NULL) and the aliases as JSON must be the ones wanted. */
static void check_derive(const struct ident_rules *r, const char *res, const char *id,
                         const char *want_phys, const char *want_aliases)
{
    json_t *aliases = json_array();
    char *phys = (char *)"untouched", *s;

    CHECK_OK(ident_derive(r, res, id, &phys, aliases));
    if (want_phys)
        CHECK_STREQ(phys, want_phys);
    else
        CHECK(phys == NULL);
    s = jsonx_dumps(aliases);
    CHECK_STREQ(s, want_aliases);
    free(s);
    free(phys);
    json_decref(aliases);
}

/* ident_rules_new on 'rules' (JSON text) must fail with ERR_INVAL and a
 * message holding 'want' (and 'want2' unless NULL). */
static void check_bad(const char *rules, const char *want, const char *want2)
{
    struct ident_rules *r = NULL;
    struct error e = {0};
    json_t *list = json_loads(rules, 0, NULL);

    CHECK(list != NULL);
    CHECK_EQ_INT(ident_rules_new(list, &r, &e), ERR_INVAL);
    CHECK(r == NULL);
    CHECK(strstr(e.msg, want) != NULL);
    CHECK(!want2 || strstr(e.msg, want2) != NULL);
    if (!strstr(e.msg, want) || (want2 && !strstr(e.msg, want2)))
        printf("# message: %s\n", e.msg);
    json_decref(list);
}

static void test_builtin(void)
{
    struct ident_rules *r = NULL;
    struct error e = {0};
    json_t *empty = json_array(), *null = json_null();

    CHECK_OK(ident_rules_new(NULL, &r, &e));
    check_derive(r, "nvidia.com/gpu", "GPU-" UUID "::3", "GPU-" UUID, "[]");
    check_derive(r, "nvidia.com/gpu", "MIG-" UUID "::0", "MIG-" UUID, "[]");
    check_derive(r, "nvidia.com/mig-1g.10gb", "MIG-GPU-" UUID "/1/0", "GPU-" UUID, "[]");
    check_derive(r, "nvidia.com/gpu", "MIG-GPU-" UUID "/1/0::2", "MIG-GPU-" UUID "/1/0", "[]");
    check_derive(r, "nvidia.com/gpu", "GPU-" UUID, NULL, "[]");
    check_derive(r, "nvidia.com/gpu", "MIG-" UUID, NULL, "[]");
    check_derive(r, "nvidia.com/gpu", "nvidia0", NULL, "[]");
    check_derive(r, "nvidia.com/gpu", "GPU-" UUID "::x", NULL, "[]");
    check_derive(r, "gpu.example.com", "pool-a/gpu-0", NULL, "[]");
    ident_rules_free(r);
    /* [] and null are no rules too */
    r = NULL;
    CHECK_OK(ident_rules_new(empty, &r, &e));
    check_derive(r, "x.io/y", "GPU-a::1", "GPU-a", "[]");
    ident_rules_free(r);
    r = NULL;
    CHECK_OK(ident_rules_new(null, &r, &e));
    check_derive(r, "x.io/y", "GPU-a::1", "GPU-a", "[]");
    ident_rules_free(r);
    ident_rules_free(NULL);
    json_decref(empty);
}

static void test_user_first(void)
{
    /* for nvidia.com/gpu the user's rule wins: an alias, no physical */
    struct ident_rules *r = compile("nvidia.com/gpu", "^(?<alias>GPU-[^:]+)::[0-9]+$", NULL);

    check_derive(r, "nvidia.com/gpu", "GPU-" UUID "::3", NULL, "[\"GPU-" UUID "\"]");
    check_derive(r, "example.com/gpu", "GPU-" UUID "::3", "GPU-" UUID, "[]");
    /* a rule that does not match passes the id on to the next */
    check_derive(r, "nvidia.com/gpu", "MIG-GPU-" UUID "/1/0", "GPU-" UUID, "[]");
    ident_rules_free(r);
}

static void test_resource(void)
{
    struct ident_rules *r = compile("example.com/nic", "(?<physical>[a-z]+[0-9]+)v[0-9]+",
                                    "example.com/*", "(?<physical>[a-z]+)-[0-9]+", "*",
                                    "(?<alias>[a-z]+)_[0-9]+", NULL);

    check_derive(r, "example.com/nic", "eth0v3", "eth0", "[]");
    check_derive(r, "example.com/nic2", "eth0v3", NULL, "[]"); /* not exact */
    check_derive(r, "example.com/nic2", "eth-3", "eth", "[]");
    check_derive(r, "example.com/", "eth-3", "eth", "[]");
    check_derive(r, "example.org/nic", "eth-3", NULL, "[]");
    check_derive(r, "example.org/nic", "eth_3", NULL, "[\"eth\"]");
    check_derive(r, "gpu.example.com", "eth_3", NULL, "[\"eth\"]");
    ident_rules_free(r);
}

static void test_whole_id(void)
{
    /* unanchored patterns must still span the id; anchors are allowed */
    struct ident_rules *r = compile("*", "(?<physical>nic[0-9])", "*", "^(?<physical>x)y$", "*",
                                    "(?<physical>a|ab)c?", NULL);

    check_derive(r, "a/b", "nic1", NULL, "[]"); /* the id itself: no physical */
    check_derive(r, "a/b", "nic12", NULL, "[]");
    check_derive(r, "a/b", "xnic1", NULL, "[]");
    check_derive(r, "a/b", "xy", "x", "[]");
    check_derive(r, "a/b", "xyz", NULL, "[]");
    check_derive(r, "a/b", "abc", "ab", "[]");
    check_derive(r, "a/b", "ac", "a", "[]");
    ident_rules_free(r);
}

static void test_aliases(void)
{
    struct ident_rules *r = compile(
        "*", "(?<alias_pci>[0-9a-f:.]+)/(?<alias_minor>card[0-9]+)(/vf(?<alias_vf>[0-9]+))?", "*",
        "(?<alias>.*)", NULL);
    json_t *aliases = json_array();
    char *phys = NULL, *s;

    check_derive(r, "a/b", "0000:3b:00.0/card1/vf2", NULL, "[\"0000:3b:00.0\",\"card1\",\"2\"]");
    check_derive(r, "a/b", "0000:3b:00.0/card1", NULL, "[\"0000:3b:00.0\",\"card1\"]");
    /* a group that captured the whole id gives nothing */
    check_derive(r, "a/b", "whole", NULL, "[]");
    /* names already in the array are not added again */
    CHECK_OK(json_array_append_new(aliases, json_string("card1")));
    CHECK_OK(ident_derive(r, "a/b", "0000:3b:00.0/card1", &phys, aliases));
    CHECK(phys == NULL);
    s = jsonx_dumps(aliases);
    CHECK_STREQ(s, "[\"card1\",\"0000:3b:00.0\"]");
    free(s);
    json_decref(aliases);
    ident_rules_free(r);

    /* empty captures and captures equal to the id are dropped */
    r = compile("*", "x(?<alias>y?)(?<alias2>z*)", "*", "(?<physical>(?<alias>q+))", NULL);
    check_derive(r, "a/b", "x", NULL, "[]");
    check_derive(r, "a/b", "xy", NULL, "[\"y\"]");
    check_derive(r, "a/b", "xyzz", NULL, "[\"y\",\"zz\"]");
    check_derive(r, "a/b", "qq", NULL, "[]");
    ident_rules_free(r);

    /* a capture that is not a name an alias may be is ignored: one that
     * would cut a UTF-8 character (bytes in the C locale), any other
     * non-ASCII one, one not starting with a letter or digit, one of more
     * than 253 characters */
    r = compile("*", "(?<alias>.).-1", "*", "(?<alias>..)-2", "*",
                "(?<alias>[^/]+)/(?<physical>[^/]+)/x", NULL);
    check_derive(r, "a/b", "\xc3\xa9-1", NULL, "[]");
    check_derive(r, "a/b", "\xc3\xa9-2", NULL, "[]");
    check_derive(r, "a/b", "-ab/_x/x", NULL, "[]");
    check_derive(r, "a/b", "ab/gpu-0/x", "gpu-0", "[\"ab\"]");
    {
        char id[300];

        memset(id, 'a', 254);
        memcpy(id + 254, "/g/x", 5);
        check_derive(r, "a/b", id, "g", "[]");
    }
    ident_rules_free(r);
}

static void test_spellings(void)
{
    /* (?P<name>...), escaped and bracketed parentheses, bracket classes:
     * the named groups keep their numbers */
    struct ident_rules *r = compile(
        "a/p", "(?P<physical>[a-z]+)-(?P<alias>[0-9]+)", "a/esc", "\\((x)\\)(?<physical>[a-z]+)\\(",
        "a/br", "[(](y)[)](?<physical>[a-z]+)[(]", "a/br2", "[]()](a)[^]()](?<physical>b+)",
        "a/cls", "[[:alpha:](]+(?<alias>[0-9])", "a/nest", "((?<physical>g)(?<alias>h))(i)", NULL);

    check_derive(r, "a/p", "abc-12", "abc", "[\"12\"]");
    check_derive(r, "a/esc", "(x)gpu(", "gpu", "[]");
    check_derive(r, "a/br", "(y)gpu(", "gpu", "[]");
    check_derive(r, "a/br2", "(a-bb", "bb", "[]");
    check_derive(r, "a/br2", "(a)bb", NULL, "[]");
    check_derive(r, "a/br2", "]a-bb", "bb", "[]");
    check_derive(r, "a/cls", "ab(c7", NULL, "[\"7\"]");
    check_derive(r, "a/nest", "ghi", "g", "[\"h\"]");
    ident_rules_free(r);
}

/* Repetitions are counted written out; intervals of every spelling */
static void test_expanded(void)
{
    struct ident_rules *r = compile(
        "a/iv", "(?<physical>x{2}y{,3}z{1,})w{1,1000}", "a/hex",
        "(?<physical>[0-9a-f]{8}(-[0-9a-f]{4}){3}-[0-9a-f]{12})/(?<alias>[0-9]+)", "a/bs",
        "[\\1]\\\\1(?<physical>a)", NULL);

    check_derive(r, "a/iv", "xxyzzw", "xxyzz", "[]");
    check_derive(r, "a/iv", "xxzw", "xxz", "[]");
    check_derive(r, "a/hex", UUID "/7", UUID, "[\"7\"]");
    check_derive(r, "a/bs", "1\\1a", "a", "[]");
    ident_rules_free(r);

    /* what may match the empty string may still be repeated a bounded
     * number of times, or within something that may not */
    r = compile("*", "(?<physical>(ab?)+)-(x?|v|y?){1,3}", "*", "(a(x?|y?))+(?<physical>b)", NULL);
    check_derive(r, "a/b", "abaab-vv", "abaab", "[]");
    check_derive(r, "a/b", "aaxab", "b", "[]");
    ident_rules_free(r);
}

/* Unbounded repetitions of what can match the empty string: glibc's
 * regexec may never return on them. */
static void test_empty_loop(void)
{
    static const char *const bad[] = {
        "(?<physical>(x?|v|y?)+)", "(?<physical>a**)",          "(?<alias>(||v||)+)",
        "((a|)+)(?<physical>b)",   "(?<physical>(a*)*)",        "(?<physical>(a?b?){2,})",
        "(?<physical>((x?))*)",    "(?<physical>a(()|b)+)",     "(?<physical>(a|(b|c?))+)",
        "(?<physical>(^|a)+)",     "(?<physical>((a?){1,3})+)",
    };
    char doc[256];
    size_t i;

    for (i = 0; i < ARRAY_SIZE(bad); i++) {
        snprintf(doc, sizeof(doc), "[{\"resource\":\"*\",\"pattern\":\"%s\"}]", bad[i]);
        check_bad(doc, "identity[0].pattern", "empty string");
    }
}

static void test_bad(void)
{
    char big[IDENT_MAX_PATTERN + 64], *s;
    json_t *list;
    size_t i;
    struct ident_rules *r = NULL;
    struct error e = {0};

    check_bad("[{\"resource\":\"*\",\"pattern\":\"(?<physical>x)\"},"
              "{\"resource\":\"*\",\"pattern\":\"(?<physical>abc\"}]",
              "identity[1].pattern", "Unmatched ( or \\(");
    check_bad("[{\"resource\":\"*\",\"pattern\":\"(?<foo>x)\"}]", "identity[0].pattern", "\"foo\"");
    check_bad("[{\"resource\":\"*\",\"pattern\":\"(?<aliasX>x)(?<physical>y)(?<ali>z)\"}]",
              "identity[0].pattern", "\"ali\"");
    check_bad("[{\"resource\":\"*\",\"pattern\":\"GPU-[a-z]+\"}]", "identity[0].pattern",
              "no named group");
    check_bad("[{\"resource\":\"*\",\"pattern\":\"\\\\(?<physical>x\\\\)\"}]",
              "identity[0].pattern", "no named group");
    check_bad("[{\"resource\":\"*\",\"pattern\":\"[(?<physical>x)]\"}]", "identity[0].pattern",
              "no named group");
    check_bad("[{\"resource\":\"*\",\"pattern\":\"(?<physical>x)(?<physical>y)\"}]",
              "identity[0].pattern", "named twice");
    check_bad("[{\"resource\":\"*\",\"pattern\":\"(?<>x)\"}]", "identity[0].pattern", "bad name");
    check_bad("[{\"resource\":\"*\",\"pattern\":\"(?<physical x)\"}]", "identity[0].pattern",
              "bad name");
    check_bad("[{\"resource\":\"*\",\"pattern\":\"(?<=x)(?<physical>y)\"}]", "identity[0].pattern",
              "bad name");
    check_bad("[{\"resource\":\"*\",\"pattern\":\"(?<physical>x)a\\\\\"}]", "identity[0].pattern",
              "Trailing backslash");
    check_bad("[{\"resource\":\"*\",\"pattern\":\"(?<alias1>a)(?<alias2>a)(?<alias3>a)"
              "(?<alias4>a)(?<alias5>a)(?<alias6>a)(?<alias7>a)(?<alias8>a)(?<alias9>a)\"}]",
              "identity[0].pattern", "more than 8 named groups");
    /* too many positions once written out; a back-reference */
    check_bad("[{\"resource\":\"*\",\"pattern\":\"(?<physical>a{0,1024})x\"}]",
              "identity[0].pattern", "more than 1024 positions");
    check_bad("[{\"resource\":\"*\",\"pattern\":\"((a{0,40}){0,40})(?<physical>b)\"}]",
              "identity[0].pattern", "repeat less");
    check_bad("[{\"resource\":\"*\",\"pattern\":\"(?<physical>a)++++++++++++++++++++\"}]",
              "identity[0].pattern", "repeat less");
    check_bad("[{\"resource\":\"*\",\"pattern\":\"(?<physical>a)\\\\1\"}]", "identity[0].pattern",
              "back-reference");
    check_bad("[{\"resource\":\"a*b\",\"pattern\":\"(?<physical>x)\"}]", "identity[0].resource",
              "a*b");
    check_bad("[{\"resource\":\"\",\"pattern\":\"(?<physical>x)\"}]", "identity[0].resource", NULL);
    check_bad("[{\"resource\":1,\"pattern\":\"(?<physical>x)\"}]", "identity[0].resource",
              "string");
    check_bad("[{\"resource\":\"*\",\"pattern\":[]}]", "identity[0].pattern", "string");
    check_bad("[{\"resource\":\"*\"}]", "identity[0]", "resource and pattern");
    check_bad("[{\"resource\":\"*\",\"pattern\":\"(?<physical>x)\",\"x\":1}]", "identity[0]",
              "resource and pattern");
    check_bad("[\"(?<physical>x)\"]", "identity[0]", "resource and pattern");
    check_bad("{\"resource\":\"*\",\"pattern\":\"(?<physical>x)\"}", "key \"identity\"", "list");

    /* a pattern over IDENT_MAX_PATTERN bytes; one of exactly that many is fine */
    memset(big, 'a', sizeof(big));
    memcpy(big, "(?<physical>a)", 14);
    big[IDENT_MAX_PATTERN] = '\0';
    list = json_pack("[{s:s,s:s}]", "resource", "*", "pattern", big);
    CHECK_OK(ident_rules_new(list, &r, &e));
    ident_rules_free(r);
    json_decref(list);
    big[IDENT_MAX_PATTERN] = 'a';
    big[IDENT_MAX_PATTERN + 1] = '\0';
    list = json_pack("[{s:s,s:s}]", "resource", "*", "pattern", big);
    s = jsonx_dumps(list);
    check_bad(s, "identity[0].pattern", "at most 1024");
    free(s);
    json_decref(list);

    /* IDENT_MAX_RULES rules; one more is too many */
    list = json_array();
    for (i = 0; i < IDENT_MAX_RULES; i++)
        CHECK_OK(json_array_append_new(
            list, json_pack("{s:s,s:s}", "resource", "*", "pattern", "(?<physical>x)y")));
    r = NULL;
    CHECK_OK(ident_rules_new(list, &r, &e));
    ident_rules_free(r);
    CHECK_OK(json_array_append_new(
        list, json_pack("{s:s,s:s}", "resource", "*", "pattern", "(?<physical>x)y")));
    s = jsonx_dumps(list);
    check_bad(s, "key \"identity\"", "at most 64");
    free(s);
    json_decref(list);
}

struct worker {
    const struct ident_rules *r; /* shared */
    int bad;                     /* wrong answers seen */
};

static void *derive_loop(void *arg)
{
    struct worker *w = arg;
    int i;

    for (i = 0; i < 2000; i++) {
        json_t *aliases = json_array();
        char *phys = NULL;

        if (ident_derive(w->r, "a/b", i % 2 ? "GPU-x::1" : "pci/card2", &phys, aliases) || !phys ||
            strcmp(phys, i % 2 ? "GPU-x" : "card2") != 0 ||
            json_array_size(aliases) != (i % 2 ? 0u : 1u))
            w->bad++;
        free(phys);
        json_decref(aliases);
    }
    return NULL;
}

/* Threads share one set of rules without a lock. */
static void test_threads(void)
{
    struct ident_rules *r = compile("*", "(?<alias>[a-z]+)/(?<physical>card[0-9])", NULL);
    struct worker w[4] = {{r, 0}, {r, 0}, {r, 0}, {r, 0}};
    pthread_t t[4];
    size_t i;

    for (i = 0; i < 4; i++)
        CHECK_OK(pthread_create(&t[i], NULL, derive_loop, &w[i]));
    for (i = 0; i < 4; i++) {
        CHECK_OK(pthread_join(t[i], NULL));
        CHECK_EQ_INT(w[i].bad, 0);
    }
    ident_rules_free(r);
}

TEST_MAIN(test_builtin, test_user_first, test_resource, test_whole_id, test_aliases, test_spellings,
          test_expanded, test_empty_loop, test_bad, test_threads)
