/* SPDX-License-Identifier: Apache-2.0 */
/* opts.c - parsing of one setting by its type, and the loading around the
 * table: defaults, the config file, the command line with --help showing
 * the defaults and a suggestion for a mistyped flag, and the log set-up. */
#include "common.h"
#include "cfg.h"
#include "opts.h"

#include <assert.h>
#include <unistd.h>

static const struct opt *find(const struct opt *t, size_t n, const char *key)
{
    char k[64];
    size_t i;

    snprintf(k, sizeof(k), "%s", key);
    for (i = 0; k[i]; i++) {
        if (k[i] == '-')
            k[i] = '_';
    }
    for (i = 0; i < n; i++) {
        if (strcmp(t[i].key, k) == 0)
            return &t[i];
    }
    return NULL;
}

static err_t set_str(char **field, const char *v)
{
    char *s = strdup(v);

    if (!s)
        return ERR_NOMEM;
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
static void unknown_key(const struct opt *t, size_t n, const char *key, char *msg, size_t cap)
{
    const char *names[64];
    char k[64];
    const char *near;
    size_t i;

    snprintf(k, sizeof(k), "%s", key);
    for (i = 0; k[i]; i++) {
        if (k[i] == '-')
            k[i] = '_';
    }
    for (i = 0; i < n && i < ARRAY_SIZE(names); i++)
        names[i] = t[i].key;
    near = opts_suggest(names, i, k);
    if (near)
        snprintf(msg, cap, "unknown key \"%s\"; did you mean \"%s\"?", key, near);
    else
        snprintf(msg, cap, "unknown key \"%s\"", key);
}

err_t opts_set(const struct opt *t, size_t n, void *base, const char *key, const char *value,
               char *msg, size_t cap)
{
    const struct opt *o = find(t, n, key);
    const char *why;
    char *field;
    char pat[80], allowed[160];
    long long c;
    uint64_t ms;
    double d;

    if (!o) {
        unknown_key(t, n, key, msg, cap);
        return ERR_INVAL;
    }
    field = (char *)base + o->off;
    switch (o->type) {
    case OPT_STR:
        if (*value && o->check && (why = o->check(value))) {
            snprintf(msg, cap, "key \"%s\": \"%s\": %s", o->key, value, why);
            return ERR_INVAL;
        }
        if (*value)
            return set_str((char **)field, value);
        break;
    case OPT_ENUM:
        snprintf(pat, sizeof(pat), "|%s|", value);
        if (*value && !strchr(value, '|') && strstr(o->choices, pat))
            return set_str((char **)field, value);
        list_choices(o->choices, allowed, sizeof(allowed));
        snprintf(msg, cap, "key \"%s\": bad value \"%s\"; allowed: %s", o->key, value, allowed);
        return ERR_INVAL;
    case OPT_DURATION:
        if (!cfg_parse_duration(value, &ms) && ms > 0) {
            *(uint64_t *)field = ms;
            return ERR_OK;
        }
        break;
    case OPT_COUNT:
        if (!cfg_parse_int(value, 1, 100000000, &c)) {
            *(uint64_t *)field = (uint64_t)c;
            return ERR_OK;
        }
        break;
    case OPT_NUMBER:
        if (parse_number(value, &d)) {
            *(double *)field = d;
            return ERR_OK;
        }
        break;
    }
    snprintf(msg, cap, "key \"%s\": bad value \"%s\"", o->key, value);
    return ERR_INVAL;
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
static err_t spelled_twice(const json_t *doc, const char *key, char *msg, size_t cap)
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
        if (!key[i]) {
            snprintf(msg, cap, "duplicate key \"%s\" (also spelled \"%s\")", key, other);
            return ERR_INVAL;
        }
    }
    return ERR_OK;
}

err_t opts_apply(const struct opt *t, size_t n, void *base, const json_t *doc,
                 const char *const *skip, char *msg, size_t cap)
{
    const char *key;
    json_t *v;
    char num[64];
    err_t rc;

    if (!json_is_object(doc)) {
        snprintf(msg, cap, "the document must be a mapping of keys");
        return ERR_INVAL;
    }
    json_object_foreach((json_t *)doc, key, v) {
        if (skipped(skip, key))
            continue;
        if ((rc = spelled_twice(doc, key, msg, cap)))
            return rc;
        if (json_is_string(v)) {
            rc = opts_set(t, n, base, key, json_string_value(v), msg, cap);
        } else if (json_is_number(v)) {
            snprintf(num, sizeof(num), json_is_integer(v) ? "%.0f" : "%g", json_number_value(v));
            rc = opts_set(t, n, base, key, num, msg, cap);
        } else if (!find(t, n, key)) {
            unknown_key(t, n, key, msg, cap);
            rc = ERR_INVAL;
        } else {
            snprintf(msg, cap, "key \"%s\": must be a string or a number", key);
            rc = ERR_INVAL;
        }
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

/* --help: the usage, then every value flag with its default. */
static void print_help(const struct opts_cli *cli)
{
    const struct option *l;
    const struct opt *o;
    char v[512];

    fputs(cli->usage, stdout);
    fputs("Defaults:\n", stdout);
    for (l = cli->longs; l->name; l++) {
        o = l->val == 0 ? find(cli->table, cli->n, l->name) : NULL;
        if (!o)
            continue;
        opts_format_value(o, cli->base, v, sizeof(v));
        printf("  --%-24s %s\n", l->name, v);
    }
}

/* An unknown flag or one without its value, with the closest flag. */
static void bad_flag(const struct opts_cli *cli, int ch, const char *word)
{
    const char *names[64], *near;
    char name[64];
    size_t n = 0;

    if (ch == ':') {
        fprintf(stderr, "%s: flag '%s' needs a value\n", cli->prog, word);
        return;
    }
    if (strncmp(word, "--", 2) != 0) {
        fprintf(stderr, "%s: unknown flag '%s'; see --help\n", cli->prog, word);
        return;
    }
    snprintf(name, sizeof(name), "%.*s", (int)strcspn(word + 2, "="), word + 2);
    for (; cli->longs[n].name && n < ARRAY_SIZE(names); n++)
        names[n] = cli->longs[n].name;
    near = opts_suggest(names, n, name);
    if (near)
        fprintf(stderr, "%s: unknown flag '--%s'; did you mean --%s?\n", cli->prog, name, near);
    else
        fprintf(stderr, "%s: unknown flag '--%s'; see --help\n", cli->prog, name);
}

/* One option getopt_long returned: 0 to go on, else opts_parse_args's answer. */
static int take(const struct opts_cli *cli, int ch, int idx, int pass, const char **cfgfile,
                bool *once)
{
    char msg[512];

    if ((ch == 'h' || ch == 'V') && pass == 1) {
        if (ch == 'h')
            print_help(cli);
        else
            printf("%s %s\n", cli->prog, PODRES_VERSION);
        return 1;
    }
    if (ch == 'c')
        *cfgfile = optarg;
    if (ch == 'o' && once)
        *once = true;
    if (ch == 0 && pass == 2 &&
        opts_set(cli->table, cli->n, cli->base, cli->longs[idx].name, optarg, msg, sizeof(msg))) {
        fprintf(stderr, "%s: flag --%s: %s\n", cli->prog, cli->longs[idx].name, msg);
        return 2;
    }
    return 0;
}

int opts_parse_args(const struct opts_cli *cli, int argc, char **argv, int pass,
                    const char **cfgfile, bool *once)
{
    int ch, idx, r;

    optind = 1;
    opterr = 0;
    for (;;) {
        ch = getopt_long(argc, argv, ":c:hV", cli->longs, &idx);
        if (ch == -1)
            break;
        if (ch == '?' || ch == ':') {
            if (pass == 1)
                bad_flag(cli, ch, argv[optind - 1 < argc ? optind - 1 : argc - 1]);
            return 2;
        }
        r = take(cli, ch, idx, pass, cfgfile, once);
        if (r)
            return r;
    }
    if (optind < argc) {
        fprintf(stderr, "%s: unexpected argument '%s'\n%s", cli->prog, argv[optind], cli->usage);
        return 2;
    }
    return 0;
}

/* The default of 't': its environment variable's value when non-empty,
 * else 'def', else the host's name into 'host' when def_host; or NULL. */
static const char *default_of(const struct opt *t, char *host, size_t cap)
{
    const char *v = t->env ? getenv(t->env) : NULL;

    if (v && *v)
        return v;
    if (t->def || !t->def_host)
        return t->def;
    if (gethostname(host, cap - 1) != 0)
        snprintf(host, cap, "localhost");
    return host;
}

err_t opts_defaults(const struct opt *t, size_t n, void *base, char *msg, size_t cap)
{
    char host[256] = "localhost";
    const char *v;
    size_t i;
    err_t rc;

    for (i = 0; i < n; i++) {
        v = default_of(&t[i], host, sizeof(host));
        if (!v)
            continue;
        rc = opts_set(t, n, base, t[i].key, v, msg, cap);
        if (rc)
            return rc;
    }
    return ERR_OK;
}

err_t opts_load_file(const struct opts_spec *s, void *base, const char *path, char *msg, size_t cap)
{
    json_t *doc = NULL;
    char why[512] = "";
    err_t rc = cfg_yaml_load(path, &doc, why, sizeof(why));

    if (rc)
        goto out;
    if (s->apply)
        rc = s->apply(base, doc, why, sizeof(why));
    else
        rc = opts_apply(s->table, s->n, base, doc, NULL, why, sizeof(why));
out:
    json_decref(doc);
    if (rc)
        snprintf(msg, cap, "config file '%s': %s", path, why);
    return rc;
}

/* The getopt_long table of 's': --config, a value flag for each setting
 * ('-' for '_'), --once when asked for, --version, --help. */
struct longs {
    struct option opt[OPTS_MAX + 5]; /* the table, ending in a zeroed entry */
    char names[OPTS_MAX][64];        /* the value flags' names */
};

static void make_longs(const struct opts_spec *s, struct longs *l)
{
    size_t i, j, k = 0;

    assert(s->n <= OPTS_MAX);
    memset(l, 0, sizeof(*l));
    l->opt[k++] = (struct option){"config", required_argument, NULL, 'c'};
    for (i = 0; i < s->n; i++) {
        snprintf(l->names[i], sizeof(l->names[i]), "%s", s->table[i].key);
        for (j = 0; l->names[i][j]; j++) {
            if (l->names[i][j] == '_')
                l->names[i][j] = '-';
        }
        l->opt[k++] = (struct option){l->names[i], required_argument, NULL, 0};
    }
    if (s->once)
        l->opt[k++] = (struct option){"once", no_argument, NULL, 'o'};
    l->opt[k++] = (struct option){"version", no_argument, NULL, 'V'};
    l->opt[k] = (struct option){"help", no_argument, NULL, 'h'};
}

/* The config file, when --config named one; a failure is said on stderr. */
static int load_file(const struct opts_spec *s, void *base, const char *path)
{
    char msg[1200];

    if (!path || !opts_load_file(s, base, path, msg, sizeof(msg)))
        return 0;
    fprintf(stderr, "%s: %s\n", s->prog, msg);
    return 2;
}

/* The text of setting 'key', which the table must have as a string. */
static const char *str_field(const struct opts_spec *s, const void *base, const char *key)
{
    const struct opt *o = find(s->table, s->n, key);

    assert(o && (o->type == OPT_STR || o->type == OPT_ENUM));
    return *(char *const *)((const char *)base + o->off);
}

enum opts_next opts_load(const struct opts_spec *s, void *base, int argc, char **argv)
{
    struct longs l;
    const struct opts_cli cli = {s->prog, s->usage, l.opt, s->table, s->n, base};
    const char *cfgfile = NULL;
    char msg[512];
    int r;

    if (opts_defaults(s->table, s->n, base, msg, sizeof(msg))) {
        fprintf(stderr, "%s: %s\n", s->prog, msg);
        return OPTS_EXIT_FAIL;
    }
    make_longs(s, &l);
    r = opts_parse_args(&cli, argc, argv, 1, &cfgfile, s->once);
    if (r == 0)
        r = load_file(s, base, cfgfile);
    if (r == 0)
        r = opts_parse_args(&cli, argc, argv, 2, &cfgfile, s->once);
    if (r)
        return r == 1 ? OPTS_EXIT_OK : OPTS_EXIT_FAIL;
    if (log_setup(str_field(s, base, "log_format"), str_field(s, base, "log_level")))
        return OPTS_EXIT_FAIL;
    return OPTS_RUN;
}
