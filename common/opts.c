/* SPDX-License-Identifier: Apache-2.0 */
/* opts.c - parsing of one setting by its type, and the loading around the
 * table: defaults, the config file, the command line with --help showing
 * the defaults and a suggestion for a mistyped flag, and the log set-up. */
#include "common.h"
#include "cfg.h"
#include "opts.h"

#include <assert.h>
#include <getopt.h>
#include <unistd.h>

/* 'key' with every '-' spelled '_', into 'k' of 'cap' bytes. */
static void underscored(const char *key, char *k, size_t cap)
{
    size_t i;

    snprintf(k, cap, "%s", key);
    for (i = 0; k[i]; i++) {
        if (k[i] == '-')
            k[i] = '_';
    }
}

static const struct opt *find(const struct opt *t, size_t n, const char *key)
{
    char k[64];
    size_t i;

    underscored(key, k, sizeof(k));
    for (i = 0; i < n; i++) {
        if (strcmp(t[i].key, k) == 0)
            return &t[i];
    }
    return NULL;
}

static err_t set_str(char **field, const char *v, struct error *e)
{
    char *s = strdup(v);

    if (!s)
        return errorf(e, ERR_NOMEM, "out of memory");
    free(*field);
    *field = s;
    return ERR_OK;
}

static bool parse_number(const char *v, double *out)
{
    char *end;
    double d;

    errno = 0;
    d = strtod(v, &end);
    if (errno || end == v || *end || !(d > 0) || d > 1e9)
        return false;
    *out = d;
    return true;
}

/* "|a|b|" as "a, b". */
static void list_choices(const char *choices, char *out, size_t cap)
{
    const char *p = choices + (*choices == '|');
    size_t n = 0;

    for (; *p && n + 3 < cap; p++) {
        if (*p != '|')
            out[n++] = *p;
        else if (p[1])
            n += (size_t)snprintf(out + n, cap - n, ", ");
    }
    out[n < cap ? n : cap - 1] = '\0';
}

/* Edit distance of 'a' and 'b' (optimal string alignment: a swap of two
 * neighbours is one edit); both at most 63 bytes. */
static size_t distance(const char *a, const char *b)
{
    size_t d[64][64], la = strlen(a), lb = strlen(b), i, j, best;

    for (i = 0; i <= la; i++)
        d[i][0] = i;
    for (j = 0; j <= lb; j++)
        d[0][j] = j;
    for (i = 1; i <= la; i++) {
        for (j = 1; j <= lb; j++) {
            best = d[i - 1][j - 1] + (a[i - 1] != b[j - 1]);
            if (d[i - 1][j] + 1 < best)
                best = d[i - 1][j] + 1;
            if (d[i][j - 1] + 1 < best)
                best = d[i][j - 1] + 1;
            if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1] &&
                d[i - 2][j - 2] + 1 < best)
                best = d[i - 2][j - 2] + 1;
            d[i][j] = best;
        }
    }
    return d[la][lb];
}

const char *opts_suggest(const char *const *names, size_t n, const char *typo)
{
    size_t len = strlen(typo), limit = len <= 4 ? 1 : 2, best = limit + 1, i, dist;
    const char *pick = NULL;

    if (len == 0 || len > 63)
        return NULL;
    for (i = 0; i < n; i++) {
        if (strlen(names[i]) > 63)
            continue;
        dist = distance(typo, names[i]);
        if (dist < best) {
            best = dist;
            pick = names[i];
        }
    }
    return pick;
}

/* "unknown key" with the closest key of the table, if one is close. */
static err_t unknown_key(const struct opt *t, size_t n, const char *key, struct error *e)
{
    const char *names[OPTS_MAX];
    char k[64];
    const char *near;
    size_t i;

    underscored(key, k, sizeof(k));
    for (i = 0; i < n && i < ARRAY_SIZE(names); i++)
        names[i] = t[i].key;
    near = opts_suggest(names, i, k);
    if (near)
        return errorf(e, ERR_INVAL, "unknown key \"%s\"; did you mean \"%s\"?", key, near);
    return errorf(e, ERR_INVAL, "unknown key \"%s\"", key);
}

/* A string setting: non-empty and, when the table says how, checked. */
static err_t set_string(const struct opt *o, char **field, const char *value, struct error *e)
{
    const char *why = *value && o->check ? o->check(value) : NULL;

    if (why)
        return errorf(e, ERR_INVAL, "key \"%s\": \"%s\": %s", o->key, value, why);
    if (!*value)
        return errorf(e, ERR_INVAL, "key \"%s\": bad value \"%s\"", o->key, value);
    return set_str(field, value, e);
}

/* One of the choices, whole. */
static err_t set_enum(const struct opt *o, char **field, const char *value, struct error *e)
{
    char pat[80], allowed[160];

    snprintf(pat, sizeof(pat), "|%s|", value);
    if (*value && !strchr(value, '|') && strstr(o->choices, pat))
        return set_str(field, value, e);
    list_choices(o->choices, allowed, sizeof(allowed));
    return errorf(e, ERR_INVAL, "key \"%s\": bad value \"%s\"; allowed: %s", o->key, value,
                  allowed);
}

/* A duration, count or number: false when 'value' is not one in range. */
static bool set_scalar(const struct opt *o, void *field, const char *value)
{
    long long c;
    uint64_t ms;

    switch (o->type) {
    case OPT_DURATION:
        if (cfg_parse_duration(value, &ms) || ms == 0)
            return false;
        *(uint64_t *)field = ms;
        return true;
    case OPT_COUNT:
        if (cfg_parse_int(value, 1, 100000000, &c))
            return false;
        *(uint64_t *)field = (uint64_t)c;
        return true;
    case OPT_NUMBER:
        return parse_number(value, field);
    default:
        return false;
    }
}

err_t opts_set(const struct opt *t, size_t n, void *base, const char *key, const char *value,
               struct error *e)
{
    const struct opt *o = find(t, n, key);
    char *field;

    if (!o)
        return unknown_key(t, n, key, e);
    field = (char *)base + o->off;
    if (o->type == OPT_STR)
        return set_string(o, (char **)field, value, e);
    if (o->type == OPT_ENUM)
        return set_enum(o, (char **)field, value, e);
    if (!set_scalar(o, field, value))
        return errorf(e, ERR_INVAL, "key \"%s\": bad value \"%s\"", o->key, value);
    return ERR_OK;
}

static bool skipped(const char *const *skip, const char *key)
{
    for (; skip && *skip; skip++) {
        if (strcmp(*skip, key) == 0)
            return true;
    }
    return false;
}

/* Keys are spelled with _, and a flag's - is taken too: one setting given
 * both ways would be decided by position, so it is refused. */
static err_t spelled_twice(const json_t *doc, const char *key, struct error *e)
{
    const char *other;
    json_t *v;
    size_t i;

    json_object_foreach((json_t *)doc, other, v) {
        if (other == key || strcmp(other, key) == 0 || strlen(other) != strlen(key))
            continue;
        for (i = 0;
             key[i] && (key[i] == other[i] || (strchr("-_", key[i]) && strchr("-_", other[i])));
             i++)
            ;
        if (!key[i])
            return errorf(e, ERR_INVAL, "duplicate key \"%s\" (also spelled \"%s\")", key, other);
    }
    return ERR_OK;
}

/* One key of a config file: strings and numbers are taken as the flag's text. */
static err_t apply_one(const struct opt *t, size_t n, void *base, const char *key, const json_t *v,
                       struct error *e)
{
    char num[64];

    if (json_is_string(v))
        return opts_set(t, n, base, key, json_string_value(v), e);
    if (json_is_number(v)) {
        snprintf(num, sizeof(num), json_is_integer(v) ? "%.0f" : "%g", json_number_value(v));
        return opts_set(t, n, base, key, num, e);
    }
    if (!find(t, n, key))
        return unknown_key(t, n, key, e);
    return errorf(e, ERR_INVAL, "key \"%s\": must be a string or a number", key);
}

err_t opts_apply(const struct opt *t, size_t n, void *base, const json_t *doc,
                 const char *const *skip, struct error *e)
{
    const char *key;
    json_t *v;
    err_t rc;

    if (!json_is_object(doc))
        return errorf(e, ERR_INVAL, "the document must be a mapping of keys");
    json_object_foreach((json_t *)doc, key, v) {
        if (skipped(skip, key))
            continue;
        rc = spelled_twice(doc, key, e);
        if (rc)
            return rc;
        rc = apply_one(t, n, base, key, v, e);
        if (rc)
            return rc;
    }
    return ERR_OK;
}

void opts_release(const struct opt *t, size_t n, void *base)
{
    size_t i;

    for (i = 0; i < n; i++) {
        if (t[i].type == OPT_STR || t[i].type == OPT_ENUM) {
            char **f = (char **)((char *)base + t[i].off);

            free(*f);
            *f = NULL;
        }
    }
}

/* A duration in the largest unit that divides it: "90d", "2s", "1500ms". */
static void format_duration(uint64_t ms, char *buf, size_t cap)
{
    static const struct {
        uint64_t ms;
        const char *unit;
    } units[] = {{86400000, "d"}, {3600000, "h"}, {60000, "m"}, {1000, "s"}};
    size_t i;

    for (i = 0; i < ARRAY_SIZE(units); i++) {
        if (ms && ms % units[i].ms == 0) {
            snprintf(buf, cap, "%llu%s", (unsigned long long)(ms / units[i].ms), units[i].unit);
            return;
        }
    }
    snprintf(buf, cap, "%llums", (unsigned long long)ms);
}

void opts_format_value(const struct opt *t, const void *base, char *buf, size_t cap)
{
    const char *field = (const char *)base + t->off;
    const char *str;

    switch (t->type) {
    case OPT_STR:
    case OPT_ENUM:
        str = *(char *const *)field;
        snprintf(buf, cap, "%s", str && *str ? str : "(none)");
        break;
    case OPT_DURATION:
        format_duration(*(const uint64_t *)field, buf, cap);
        break;
    case OPT_COUNT:
        snprintf(buf, cap, "%llu", (unsigned long long)*(const uint64_t *)field);
        break;
    case OPT_NUMBER:
        snprintf(buf, cap, "%g", *(const double *)field);
        break;
    }
}

/* The default of 't': its environment variable's value when non-empty,
 * else 'def', else the host's name into 'host' when def_host (lower-cased,
 * as the kubelet names its Node); or NULL. */
static const char *default_of(const struct opt *t, char *host, size_t cap)
{
    const char *v = t->env ? getenv(t->env) : NULL;
    char *p;

    if (v && *v)
        return v;
    if (t->def || !t->def_host)
        return t->def;
    if (gethostname(host, cap - 1) != 0)
        snprintf(host, cap, "localhost");
    for (p = host; *p; p++)
        *p = (char)(*p >= 'A' && *p <= 'Z' ? *p + ('a' - 'A') : *p);
    return host;
}

err_t opts_defaults(const struct opt *t, size_t n, void *base, struct error *e)
{
    char host[256] = "localhost";
    const char *v;
    size_t i;
    err_t rc;

    for (i = 0; i < n; i++) {
        v = default_of(&t[i], host, sizeof(host));
        if (!v)
            continue;
        rc = opts_set(t, n, base, t[i].key, v, e);
        if (rc)
            return rc;
    }
    return ERR_OK;
}

err_t opts_load_file(const struct opts_spec *s, void *base, const char *path, struct error *e)
{
    struct error why = {0};
    json_t *doc = NULL;
    err_t rc = cfg_yaml_load(path, &doc, &why);

    if (rc)
        goto out;
    if (s->apply)
        rc = s->apply(base, doc, &why);
    else
        rc = opts_apply(s->table, s->n, base, doc, NULL, &why);
out:
    json_decref(doc);
    if (rc)
        errorf(e, rc, "config file '%s': %s", path, error_msg(&why));
    return rc;
}

/* ---- the command line ---- */

/* One opts_load's command line: the getopt_long table made from the spec
 * (--config, a value flag per setting with '-' for '_', --once when asked
 * for, --version, --help). */
struct cli {
    const struct opts_spec *s;         /* borrowed */
    void *base;                        /* the settings */
    struct option longs[OPTS_MAX + 5]; /* ending in a zeroed entry */
    char names[OPTS_MAX][64];          /* the value flags' names */
};

static void make_longs(struct cli *c)
{
    const struct opts_spec *s = c->s;
    size_t i, j, k = 0;

    assert(s->n <= OPTS_MAX);
    c->longs[k++] = (struct option){"config", required_argument, NULL, 'c'};
    for (i = 0; i < s->n; i++) {
        snprintf(c->names[i], sizeof(c->names[i]), "%s", s->table[i].key);
        for (j = 0; c->names[i][j]; j++) {
            if (c->names[i][j] == '_')
                c->names[i][j] = '-';
        }
        c->longs[k++] = (struct option){c->names[i], required_argument, NULL, 0};
    }
    if (s->once)
        c->longs[k++] = (struct option){"once", no_argument, NULL, 'o'};
    c->longs[k++] = (struct option){"version", no_argument, NULL, 'V'};
    c->longs[k++] = (struct option){"help", no_argument, NULL, 'h'};
    c->longs[k] = (struct option){NULL, 0, NULL, 0};
}

/* --help: the usage, then every value flag with its default. */
static void print_help(const struct cli *c)
{
    char v[512];
    size_t i;

    fputs(c->s->usage, stdout);
    fputs("Defaults:\n", stdout);
    for (i = 0; i < c->s->n; i++) {
        opts_format_value(&c->s->table[i], c->base, v, sizeof(v));
        printf("  --%-24s %s\n", c->names[i], v);
    }
}

/* An unknown flag or one without its value, with the closest flag. */
static void bad_flag(const struct cli *c, int ch, const char *word)
{
    const char *names[OPTS_MAX + 5], *near;
    const char *prog = c->s->prog;
    char name[64];
    size_t n;

    if (ch == ':') {
        fprintf(stderr, "%s: flag '%s' needs a value\n", prog, word);
        return;
    }
    if (strncmp(word, "--", 2) != 0) {
        fprintf(stderr, "%s: unknown flag '%s'; see --help\n", prog, word);
        return;
    }
    snprintf(name, sizeof(name), "%.*s", (int)strcspn(word + 2, "="), word + 2);
    for (n = 0; c->longs[n].name; n++)
        names[n] = c->longs[n].name;
    near = opts_suggest(names, n, name);
    if (near)
        fprintf(stderr, "%s: unknown flag '--%s'; did you mean --%s?\n", prog, name, near);
    else
        fprintf(stderr, "%s: unknown flag '--%s'; see --help\n", prog, name);
}

/* One option getopt_long returned, in pass 1 (--config, --once, --help,
 * --version) or pass 2 (the value flags). */
static enum opts_next take(const struct cli *c, int ch, int idx, int pass, const char **cfgfile)
{
    struct error e = {0};

    if ((ch == 'h' || ch == 'V') && pass == 1) {
        if (ch == 'h')
            print_help(c);
        else
            printf("%s %s\n", c->s->prog, PODRES_VERSION);
        return OPTS_EXIT_OK;
    }
    if (ch == 'c')
        *cfgfile = optarg;
    if (ch == 'o' && c->s->once)
        *c->s->once = true;
    if (ch == 0 && pass == 2 &&
        opts_set(c->s->table, c->s->n, c->base, c->longs[idx].name, optarg, &e)) {
        fprintf(stderr, "%s: flag --%s: %s\n", c->s->prog, c->longs[idx].name, error_msg(&e));
        return OPTS_EXIT_FAIL;
    }
    return OPTS_RUN;
}

/* One pass over the command line; errors are said in pass 1 only. */
static enum opts_next parse(const struct cli *c, int argc, char **argv, int pass,
                            const char **cfgfile)
{
    enum opts_next next;
    int ch, idx;

    optind = 1;
    opterr = 0;
    for (;;) {
        ch = getopt_long(argc, argv, ":c:hV", c->longs, &idx);
        if (ch == -1)
            break;
        if (ch == '?' || ch == ':') {
            if (pass == 1)
                bad_flag(c, ch, argv[optind - 1 < argc ? optind - 1 : argc - 1]);
            return OPTS_EXIT_FAIL;
        }
        next = take(c, ch, idx, pass, cfgfile);
        if (next != OPTS_RUN)
            return next;
    }
    if (optind < argc) {
        fprintf(stderr, "%s: unexpected argument '%s'\n%s", c->s->prog, argv[optind], c->s->usage);
        return OPTS_EXIT_FAIL;
    }
    return OPTS_RUN;
}

/* The text of setting 'key', which the table must have as a string. */
static const char *str_field(const struct opts_spec *s, const void *base, const char *key)
{
    const struct opt *o = find(s->table, s->n, key);

    assert(o && (o->type == OPT_STR || o->type == OPT_ENUM));
    return *(char *const *)((const char *)base + o->off);
}

/* Said on stderr: the defaults or the config file failed. */
static enum opts_next failed(const struct opts_spec *s, const struct error *e)
{
    fprintf(stderr, "%s: %s\n", s->prog, error_msg(e));
    return OPTS_EXIT_FAIL;
}

enum opts_next opts_load(const struct opts_spec *s, void *base, int argc, char **argv)
{
    struct cli c = {.s = s, .base = base};
    struct error e = {0};
    const char *cfgfile = NULL;
    enum opts_next next;

    if (opts_defaults(s->table, s->n, base, &e))
        return failed(s, &e);
    make_longs(&c);
    next = parse(&c, argc, argv, 1, &cfgfile);
    if (next != OPTS_RUN)
        return next;
    if (cfgfile && opts_load_file(s, base, cfgfile, &e))
        return failed(s, &e);
    next = parse(&c, argc, argv, 2, &cfgfile);
    if (next != OPTS_RUN)
        return next;
    if (log_setup(str_field(s, base, "log_format"), str_field(s, base, "log_level")))
        return OPTS_EXIT_FAIL;
    return OPTS_RUN;
}
