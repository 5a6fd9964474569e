/* SPDX-License-Identifier: Apache-2.0 */
/* opts.c - parsing of one setting by its type. */
#include "common.h"
#include "cfg.h"
#include "opts.h"

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

err_t opts_set(const struct opt *t, size_t n, void *base, const char *key, const char *value,
               char *msg, size_t cap)
{
    const struct opt *o = find(t, n, key);
    const char *why;
    char *field;
    char pat[80];
    long long c;
    uint64_t ms;
    double d;

    if (!o) {
        snprintf(msg, cap, "unknown key \"%s\"", key);
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
        snprintf(msg, cap, "key \"%s\": \"%s\" is not one of %s", o->key, value, o->choices);
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
            snprintf(msg, cap, "unknown key \"%s\"", key);
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

int opts_parse_args(const struct opts_cli *cli, int argc, char **argv, int pass,
                    const char **cfgfile, bool *once)
{
    char msg[512];
    int ch, idx;

    optind = 1;
    opterr = pass == 1;
    for (;;) {
        ch = getopt_long(argc, argv, "c:hV", cli->longs, &idx);
        if (ch == -1)
            break;
        if (ch == '?')
            return 2;
        if ((ch == 'h' || ch == 'V') && pass == 1) {
            if (ch == 'h')
                fputs(cli->usage, stdout);
            else
                printf("%s %s\n", cli->prog, PODRES_VERSION);
            return 1;
        }
        if (ch == 'c')
            *cfgfile = optarg;
        if (ch == 'o' && once)
            *once = true;
        if (ch == 0 && pass == 2 &&
            opts_set(cli->table, cli->n, cli->base, cli->longs[idx].name, optarg, msg,
                     sizeof(msg))) {
            fprintf(stderr, "%s: flag --%s: %s\n", cli->prog, cli->longs[idx].name, msg);
            return 2;
        }
    }
    if (optind < argc) {
        fprintf(stderr, "%s: unexpected argument '%s'\n%s", cli->prog, argv[optind], cli->usage);
        return 2;
    }
    return 0;
}
