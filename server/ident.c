/* SPDX-License-Identifier: Apache-2.0 */
/* ident.c - identity rules: named groups turned into the group numbers of a
 * plain POSIX ERE (no PCRE), each rule compiled once, and the groups of the
 * first matching rule read out. The conversion also refuses what glibc's
 * regcomp or regexec would take unbounded memory or time on. Not the
 * store's use of what the rules give. */
#define LOG_MOD "ident"
#include "../common/common.h"
#include "../common/names.h"
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

/* An open group (or the whole pattern) while a pattern is converted. */
struct level {
    uint64_t size;  /* positions so far, repetitions written out */
    bool null_alts; /* an ended alternative can match the empty string */
    bool null_head; /* the elements before the last can all match it */
};

/* A pattern being converted: named groups out, their numbers noted, and
 * what regcomp and regexec would make of it estimated. */
struct conv {
    const char *in;                         /* the pattern as written */
    size_t i;                               /* next byte of 'in' */
    char *out;                              /* the ERE; never longer than 'in' */
    size_t o;                               /* bytes written to 'out' */
    size_t groups;                          /* '(' seen so far: the current group's number */
    struct rule *r;                         /* named groups go to r->group */
    const char *label;                      /* "identity[i]", for messages */
    size_t depth;                           /* groups open */
    struct level lv[IDENT_MAX_PATTERN + 1]; /* [0] the pattern, [depth] the innermost group */
    uint64_t last;                          /* positions of the last element */
    bool has_last;                          /* there is one that a repetition repeats */
    bool last_null;                         /* it can match the empty string */
    uint64_t total;                         /* positions in all, repetitions written out */
};

/* A repetition operator. */
struct rep {
    uint64_t copies; /* the element's copies regcomp writes out, at least 1 */
    bool unbounded;  /* *, + or {n,} */
    bool optional;   /* may match zero times: ?, * or {0,...} */
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

/* If s[i] ('{') opens an interval {n}, {n,}, {n,m} or {,m}: the index past
 * it, with *rep filled (numbers capped). Else i: regcomp takes or refuses
 * the '{' on its own. */
static size_t interval_end(const char *s, size_t i, struct rep *rep)
{
    uint64_t n[2] = {0, 0};
    size_t j = i + 1, k = 0;
    bool digits[2] = {false, false};

    for (; s[j]; j++) {
        if (s[j] == ',' && k == 0) {
            k = 1;
            continue;
        }
        if (s[j] < '0' || s[j] > '9')
            break;
        digits[k] = true;
        if (n[k] < IDENT_MAX_EXPANDED)
            n[k] = n[k] * 10 + (uint64_t)(s[j] - '0');
    }
    if (s[j] != '}' || !(digits[0] || digits[1]))
        return i;
    rep->copies = digits[1] ? n[1] : n[0] + k;
    if (rep->copies == 0)
        rep->copies = 1;
    rep->unbounded = k && !digits[1];
    rep->optional = n[0] == 0;
    return j + 1;
}

/* If s[i] is a repetition operator: the index past it, with *rep filled.
 * Else i. regcomp writes a+ as a a*, and a{2,4} as a a a? a?. */
static size_t repetition(const char *s, size_t i, struct rep *rep)
{
    switch (s[i]) {
    case '*':
        *rep = (struct rep){1, true, true};
        return i + 1;
    case '+':
        *rep = (struct rep){2, true, false};
        return i + 1;
    case '?':
        *rep = (struct rep){1, false, true};
        return i + 1;
    case '{':
        return interval_end(s, i, rep);
    default:
        return i;
    }
}

/* Copy c->in up to 'end' to c->out. */
static void copy_to(struct conv *c, size_t end)
{
    memcpy(c->out + c->o, c->in + c->i, end - c->i);
    c->o += end - c->i;
    c->i = end;
}

/* The last element ends: the elements before the next one include it. */
static void end_element(struct conv *c)
{
    struct level *l = &c->lv[c->depth];

    l->null_head = l->null_head && c->last_null;
    c->last = 0;
    c->last_null = true;
    c->has_last = false;
}

/* A one-byte element, a bracket expression or an escaped character; or
 * an anchor, which matches the empty string and is not repeated. */
static void atom(struct conv *c, bool anchor)
{
    end_element(c);
    if (anchor)
        return;
    c->last = 1;
    c->last_null = false;
    c->has_last = true;
    c->lv[c->depth].size++;
    c->total++;
}

static void alternative(struct conv *c)
{
    struct level *l = &c->lv[c->depth];

    end_element(c);
    l->null_alts = l->null_alts || l->null_head;
    l->null_head = true;
}

/* A '(' was copied: the group is numbered, maybe named, and its level opened. */
static err_t open_group(struct conv *c, struct error *e)
{
    const char *s = c->in + c->i;

    end_element(c);
    c->lv[++c->depth] = (struct level){0, false, true};
    c->groups++;
    if (s[0] == '?' && (s[1] == '<' || (s[1] == 'P' && s[2] == '<')))
        return group_name(c, e);
    return ERR_OK;
}

/* A ')' closed the innermost group: it is the last element of the level
 * around it. */
static void close_group(struct conv *c)
{
    const struct level *l = &c->lv[c->depth];
    bool nullable = l->null_alts || (l->null_head && c->last_null);

    c->last = l->size;
    c->depth--;
    c->lv[c->depth].size += c->last;
    c->last_null = nullable;
    c->has_last = true;
}

/* The last element is repeated: its copies count, and it must not both
 * match the empty string and repeat without bound, as in (a|b?)+:
 * glibc's regexec may loop forever on that. */
static err_t repeat(struct conv *c, const struct rep *rep, struct error *e)
{
    uint64_t grew = c->last * (rep->copies - 1);

    if (!c->has_last)
        return ERR_OK; /* regcomp refuses it or takes it literally */
    if (rep->unbounded && c->last_null)
        return errorf(e, ERR_INVAL,
                      "key \"%s.pattern\": \"%s\": *, + or {n,} repeats what can match the empty "
                      "string, which matching may never finish; repeat a part that matches "
                      "at least one character",
                      c->label, c->in);
    c->last += grew;
    c->lv[c->depth].size += grew;
    c->total += grew;
    c->last_null = c->last_null || rep->optional;
    return ERR_OK;
}

/* Convert the token at c->i. Every unescaped '(' outside a bracket
 * expression opens a group in an ERE, so counting them numbers the groups
 * as regcomp does. A back-reference is refused: it is no part of an ERE,
 * and matching one can take exponential time. */
static err_t token(struct conv *c, struct error *e)
{
    const char *s = c->in;
    char ch = s[c->i];
    struct rep rep = {1, false, false};
    size_t end = repetition(s, c->i, &rep);

    if (end > c->i) {
        copy_to(c, end);
        return repeat(c, &rep, e);
    }
    end = c->i + 1;
    if (ch == '[')
        end = bracket_end(s, c->i);
    else if (ch == '\\' && s[end] >= '1' && s[end] <= '9')
        return errorf(e, ERR_INVAL,
                      "key \"%s.pattern\": \\%c: back-references are no part of an ERE", c->label,
                      s[end]);
    else if (ch == '\\' && s[end])
        end++;
    copy_to(c, end);
    if (ch == '(')
        return open_group(c, e);
    if (ch == ')' && c->depth > 0)
        close_group(c);
    else if (ch == '|')
        alternative(c);
    else
        atom(c, ch == '^' || ch == '$');
    return ERR_OK;
}

/* c->in into c->out with named groups made plain. A pattern that would grow
 * past IDENT_MAX_EXPANDED positions is refused: regcomp's time and memory
 * grow with them, up to exhausting memory. */
static err_t convert(struct conv *c, struct error *e)
{
    err_t rc = ERR_OK;

    c->lv[0].null_head = true;
    c->last_null = true;
    while (c->in[c->i] && !rc) {
        rc = token(c, e);
        if (!rc && c->total > IDENT_MAX_EXPANDED)
            rc = errorf(e, ERR_INVAL,
                        "key \"%s.pattern\": more than %d positions once its repetitions are "
                        "written out; repeat less",
                        c->label, IDENT_MAX_EXPANDED);
    }
    c->out[c->o] = '\0';
    return rc;
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
 * 'id', and a name an alias or physical id may be (names_is_alias(): so
 * never a cut UTF-8 character either), as a registration's own are. */
static bool captured(const char *id, const regmatch_t *m)
{
    char name[NAMES_ALIAS_MAX + 1];
    size_t n;

    if (m->rm_so < 0 || m->rm_eo <= m->rm_so)
        return false;
    n = (size_t)(m->rm_eo - m->rm_so);
    if ((m->rm_so == 0 && n == strlen(id)) || n > NAMES_ALIAS_MAX)
        return false;
    memcpy(name, id + m->rm_so, n);
    name[n] = '\0';
    return names_is_alias(name);
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
