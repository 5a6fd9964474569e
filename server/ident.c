/* SPDX-License-Identifier: Apache-2.0 */
/* ident.c - identity rules: named groups turned into the group numbers of a
 * plain POSIX ERE (no PCRE), each rule compiled once, and the groups of the
 * first matching rule read out. Not the store's use of what they give. */
#define LOG_MOD "ident"
#include "../common/common.h"
#include "ident.h"

#include <assert.h>
#include <regex.h>

#define NAME_MAX_LEN 32 /* bytes of a group name */

/* Built after the user's rules, for any resource. */
static const char *const builtin[] = {
    /* NVIDIA time-slicing and MPS replicas: <id>::<n>. */
    "^(?<physical>(GPU|MIG)-[^:]+)::[0-9]+$",
    /* MIG ids that name their parent GPU: MIG-GPU-<uuid>/<gi>/<ci>. */
    "^MIG-(?<physical>GPU-[0-9A-Fa-f-]+)/[0-9]+/[0-9]+$",
};

struct group {
    char name[NAME_MAX_LEN + 1]; /* as written, for duplicate checks */
    size_t index;                /* the ERE group number, from 1 */
    bool physical;               /* "physical"; else an "alias*" group */
};

struct rule {
    char *resource;                       /* exact name, or prefix when 'prefix'; new */
    bool prefix;                          /* 'resource' ended in '*' (not kept) */
    regex_t re;                           /* the converted pattern */
    size_t ngroups;                       /* named groups in 'group' */
    struct group group[IDENT_MAX_GROUPS]; /* in the order written */
};

struct ident_rules {
    size_t n;           /* compiled rules in 'rule' */
    size_t nmatch;      /* regmatch_t a match needs: the highest named group number + 1 */
    struct rule rule[]; /* the user's rules, then the built-ins */
};

/* A pattern being converted: named groups out, their numbers noted. */
struct conv {
    const char *in;    /* the pattern as written */
    size_t i;          /* next byte of 'in' */
    char *out;         /* the ERE; never longer than 'in' */
    size_t o;          /* bytes written to 'out' */
    size_t groups;     /* '(' seen so far: the current group's number */
    struct rule *r;    /* named groups go to r->group */
    const char *label; /* "identity[i]", for messages */
};

/* The index just past the bracket expression that opens at s[i] ('['), or
 * the end of 's' when it is not closed (regcomp then refuses the pattern).
 * A ']' first (after an optional '^') is literal, and so are '(' and '\'
 * inside; [:class:], [=x=] and [.x.] may hold a ']'. */
static size_t bracket_end(const char *s, size_t i)
{
    i++;
    if (s[i] == '^')
        i++;
    if (s[i] == ']')
        i++;
    while (s[i] && s[i] != ']') {
        char kind = s[i + 1];
        size_t j = i + 2;

        if (s[i] != '[' || (kind != ':' && kind != '=' && kind != '.')) {
            i++;
            continue;
        }
        while (s[j] && !(s[j] == kind && s[j + 1] == ']'))
            j++;
        if (!s[j])
            return j;
        i = j + 2;
    }
    return s[i] ? i + 1 : i;
}

static bool name_char(char ch)
{
    return (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') ||
           ch == '_';
}

/* Note the group name the '(' just copied opens with (the input is at "?<"
 * or "?P<") and skip it: the group itself stays, as a plain '('. */
static err_t group_name(struct conv *c, struct error *e)
{
    const char *s = c->in + c->i + (c->in[c->i + 1] == 'P' ? 3 : 2);
    size_t n = 0, k;
    struct group *g;

    while (name_char(s[n]))
        n++;
    if (s[n] != '>' || n == 0 || n > NAME_MAX_LEN)
        return errorf(e, ERR_INVAL,
                      "key \"%s.pattern\": group %zu: bad name; write (?<physical>...) or "
                      "(?<alias...>...), a name of at most %d letters, digits or '_'",
                      c->label, c->groups, NAME_MAX_LEN);
    if (strncmp(s, "physical>", 9) != 0 && strncmp(s, "alias", 5) != 0)
        return errorf(e, ERR_INVAL,
                      "key \"%s.pattern\": group \"%.*s\": unknown name; a group is named "
                      "physical or alias...",
                      c->label, (int)n, s);
    for (k = 0; k < c->r->ngroups; k++)
        if (strlen(c->r->group[k].name) == n && memcmp(c->r->group[k].name, s, n) == 0)
            return errorf(e, ERR_INVAL, "key \"%s.pattern\": group \"%.*s\" is named twice",
                          c->label, (int)n, s);
    if (c->r->ngroups == IDENT_MAX_GROUPS)
        return errorf(e, ERR_INVAL, "key \"%s.pattern\": more than %d named groups", c->label,
                      IDENT_MAX_GROUPS);
    g = &c->r->group[c->r->ngroups++];
    memcpy(g->name, s, n);
    g->name[n] = '\0';
    g->index = c->groups;
    g->physical = strcmp(g->name, "physical") == 0;
    c->i = (size_t)(s + n + 1 - c->in);
    return ERR_OK;
}

/* c->in into c->out with named groups made plain. Every unescaped '('
 * outside a bracket expression opens a group in an ERE, so counting them
 * numbers the groups as regcomp does. */
static err_t convert(struct conv *c, struct error *e)
{
    const char *s = c->in;

    while (s[c->i]) {
        char ch = s[c->i];
        size_t end = c->i + 1;
        err_t rc;

        if (ch == '[')
            end = bracket_end(s, c->i);
        else if (ch == '\\' && s[end])
            end++;
        memcpy(c->out + c->o, s + c->i, end - c->i);
        c->o += end - c->i;
        c->i = end;
        if (ch != '(')
            continue;
        c->groups++;
        if (s[c->i] == '?' && (s[c->i + 1] == '<' || (s[c->i + 1] == 'P' && s[c->i + 2] == '<'))) {
            rc = group_name(c, e);
            if (rc)
                return rc;
        }
    }
    c->out[c->o] = '\0';
    return ERR_OK;
}

/* regcomp 'ere' into r->re. Its groups must be the ones counted, or the
 * names would point at the wrong ones. */
static err_t regex_compile(struct rule *r, const char *ere, size_t groups, const char *pattern,
                           const char *label, struct error *e)
{
    char why[256];
    int erc = regcomp(&r->re, ere, REG_EXTENDED);

    if (erc) {
        regerror(erc, &r->re, why, sizeof(why));
        return errorf(e, erc == REG_ESPACE ? ERR_NOMEM : ERR_INVAL,
                      "key \"%s.pattern\": \"%s\": %s", label, pattern, why);
    }
    if (r->re.re_nsub != groups) {
        regfree(&r->re);
        return errorf(e, ERR_INVAL,
                      "key \"%s.pattern\": \"%s\": its groups cannot be numbered (%zu counted, "
                      "%zu compiled)",
                      label, pattern, groups, (size_t)r->re.re_nsub);
    }
    return ERR_OK;
}

/* 'pattern' into r->re and r->group. On failure nothing is left to free. */
static err_t compile_pattern(struct rule *r, const char *pattern, const char *label,
                             struct error *e)
{
    size_t len = strlen(pattern);
    struct conv c = {.in = pattern, .r = r, .label = label};
    err_t rc;

    if (len > IDENT_MAX_PATTERN)
        return errorf(e, ERR_INVAL, "key \"%s.pattern\": %zu bytes; at most %d", label, len,
                      IDENT_MAX_PATTERN);
    c.out = malloc(len + 1);
    if (!c.out)
        return errorf(e, ERR_NOMEM, "out of memory");
    rc = convert(&c, e);
    if (rc)
        goto out;
    if (r->ngroups == 0) {
        rc = errorf(e, ERR_INVAL,
                    "key \"%s.pattern\": \"%s\": no named group; name one (?<physical>...) or "
                    "(?<alias...>...)",
                    label, pattern);
        goto out;
    }
    rc = regex_compile(r, c.out, c.groups, pattern, label, e);
out:
    free(c.out);
    return rc;
}

/* 'resource' is a name, "prefix*" or "*": a '*' elsewhere is refused. */
static err_t compile_rule(struct rule *r, const char *resource, const char *pattern,
                          const char *label, struct error *e)
{
    size_t len = strlen(resource);
    const char *star = strchr(resource, '*');
    err_t rc;

    if (len == 0 || (star && star != resource + len - 1))
        return errorf(e, ERR_INVAL,
                      "key \"%s.resource\": \"%s\": write a resource name, a prefix ending in "
                      "'*', or '*'",
                      label, resource);
    r->prefix = star != NULL;
    r->resource = strndup(resource, len - r->prefix);
    if (!r->resource)
        return errorf(e, ERR_NOMEM, "out of memory");
    rc = compile_pattern(r, pattern, label, e);
    if (rc) {
        free(r->resource);
        r->resource = NULL;
    }
    return rc;
}

/* identity[i], {resource, pattern}, into 'r'. */
static err_t user_rule(struct rule *r, const json_t *list, size_t i, struct error *e)
{
    const json_t *entry = json_array_get(list, i);
    const char *res = json_string_value(json_object_get(entry, "resource"));
    const char *pat = json_string_value(json_object_get(entry, "pattern"));
    char label[32];

    snprintf(label, sizeof(label), "identity[%zu]", i);
    if (!json_is_object(entry) || json_object_size(entry) != 2 ||
        !json_object_get(entry, "resource") || !json_object_get(entry, "pattern"))
        return errorf(e, ERR_INVAL, "key \"%s\": needs exactly resource and pattern", label);
    if (!res)
        return errorf(e, ERR_INVAL, "key \"%s.resource\": must be a string", label);
    if (!pat)
        return errorf(e, ERR_INVAL, "key \"%s.pattern\": must be a string", label);
    return compile_rule(r, res, pat, label, e);
}

/* The regmatch_t that rule 'r' needs: up to its highest named group. */
static size_t rule_nmatch(const struct rule *r)
{
    size_t k, n = 1;

    for (k = 0; k < r->ngroups; k++)
        if (r->group[k].index + 1 > n)
            n = r->group[k].index + 1;
    return n;
}

err_t ident_rules_new(const json_t *rules, struct ident_rules **out, struct error *e)
{
    size_t n = json_array_size(rules), i;
    struct ident_rules *r = NULL;
    err_t rc = ERR_OK;

    if (rules && !json_is_null(rules) && !json_is_array(rules))
        return errorf(e, ERR_INVAL, "key \"identity\": must be a list of {resource, pattern}");
    if (n > IDENT_MAX_RULES)
        return errorf(e, ERR_INVAL, "key \"identity\": %zu rules; at most %d", n, IDENT_MAX_RULES);
    r = calloc(1, sizeof(*r) + (n + ARRAY_SIZE(builtin)) * sizeof(r->rule[0]));
    if (!r)
        return errorf(e, ERR_NOMEM, "out of memory");
    for (i = 0; i < n + ARRAY_SIZE(builtin); i++) {
        if (i < n)
            rc = user_rule(&r->rule[i], rules, i, e);
        else
            rc = compile_rule(&r->rule[i], "*", builtin[i - n], "built-in identity rule", e);
        if (rc)
            goto out;
        r->n++;
        if (rule_nmatch(&r->rule[i]) > r->nmatch)
            r->nmatch = rule_nmatch(&r->rule[i]);
    }
    *out = r;
    r = NULL;
out:
    ident_rules_free(r);
    return rc;
}

void ident_rules_free(struct ident_rules *r)
{
    size_t i;

    if (!r)
        return;
    for (i = 0; i < r->n; i++) {
        regfree(&r->rule[i].re);
        free(r->rule[i].resource);
    }
    free(r);
}

/* True when 'r' is for 'resource' and its pattern spans all of 'id'. */
static bool rule_matches(const struct rule *r, const char *resource, const char *id, size_t nmatch,
                         regmatch_t *m)
{
    bool res_ok = r->prefix ? strncmp(resource, r->resource, strlen(r->resource)) == 0
                            : strcmp(resource, r->resource) == 0;

    if (!res_ok || regexec(&r->re, id, nmatch, m, 0) != 0)
        return false;
    /* A POSIX match is the leftmost-longest: when one spans all of 'id',
     * this one does. */
    return m[0].rm_so == 0 && (size_t)m[0].rm_eo == strlen(id);
}

/* True when a group's match 'm' is a name to use: not empty, not all of
 * 'id', and not cutting a UTF-8 character (every byte after a lead byte
 * is 10xxxxxx). */
static bool captured(const char *id, const regmatch_t *m)
{
    size_t len = strlen(id);

    if (m->rm_so < 0 || m->rm_eo <= m->rm_so)
        return false;
    if (m->rm_so == 0 && (size_t)m->rm_eo == len)
        return false;
    return ((unsigned char)id[m->rm_so] & 0xC0) != 0x80 &&
           ((unsigned char)id[m->rm_eo] & 0xC0) != 0x80;
}

/* Append id[so, eo) to 'aliases' unless it holds that string already. */
static err_t alias_add(json_t *aliases, const char *id, const regmatch_t *m)
{
    size_t n = (size_t)(m->rm_eo - m->rm_so), i;
    const char *s = id + m->rm_so;
    json_t *v;

    for (i = 0; i < json_array_size(aliases); i++) {
        v = json_array_get(aliases, i);
        if (json_string_length(v) == n && memcmp(json_string_value(v), s, n) == 0)
            return ERR_OK;
    }
    v = json_stringn(s, n);
    if (!v || json_array_append_new(aliases, v))
        return ERR_NOMEM;
    return ERR_OK;
}

/* The named groups of 'rule', matched as 'm', into *phys (new, or NULL)
 * and 'aliases'. On failure *phys is NULL. */
static err_t read_groups(const struct rule *rule, const char *id, const regmatch_t *m, char **phys,
                         json_t *aliases)
{
    size_t i;
    err_t rc = ERR_OK;

    *phys = NULL;
    for (i = 0; i < rule->ngroups && !rc; i++) {
        const struct group *g = &rule->group[i];
        const regmatch_t *gm = &m[g->index];

        if (!captured(id, gm))
            continue;
        if (!g->physical) {
            rc = alias_add(aliases, id, gm);
            continue;
        }
        *phys = strndup(id + gm->rm_so, (size_t)(gm->rm_eo - gm->rm_so));
        if (!*phys)
            rc = ERR_NOMEM;
    }
    if (rc) {
        free(*phys);
        *phys = NULL;
    }
    return rc;
}

err_t ident_derive(const struct ident_rules *r, const char *resource, const char *id,
                   char **physical, json_t *aliases)
{
    regmatch_t *m;
    char *phys = NULL;
    size_t i;
    err_t rc = ERR_OK;

    assert(r && resource && id && physical && json_is_array(aliases));
    m = calloc(r->nmatch, sizeof(*m));
    if (!m)
        return ERR_NOMEM;
    for (i = 0; i < r->n; i++)
        if (rule_matches(&r->rule[i], resource, id, r->nmatch, m))
            break;
    if (i < r->n)
        rc = read_groups(&r->rule[i], id, m, &phys, aliases);
    free(m);
    if (!rc)
        *physical = phys;
    return rc;
}
