/* SPDX-License-Identifier: Apache-2.0 */
/* opts.h - a daemon's settings: one table shared by its defaults, its YAML
 * config file and its flags (keys are flag names with '-' spelled '_';
 * values are parsed by type into a struct at the recorded offsets), and the
 * one way they are loaded: defaults (some from the environment), then the
 * config file, then the flags, then logging set up. It is not a general
 * command-line parser: every flag but --config, --once, --help and
 * --version is a setting. Not thread-safe; start-up only. */
#ifndef PODRES_OPTS_H
#define PODRES_OPTS_H
#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

#include "err.h"

enum opt_type {
    OPT_STR,      /* char * (owned by the struct; freed by opts_release) */
    OPT_ENUM,     /* char *, one of 'choices' ("|a|b|") */
    OPT_DURATION, /* uint64_t milliseconds, > 0 */
    OPT_COUNT,    /* uint64_t, 1 .. 100000000 */
    OPT_NUMBER,   /* double, > 0 */
};

struct opt {
    const char *key;     /* file spelling */
    enum opt_type type;  /* how to parse */
    size_t off;          /* offset of the field in the settings struct */
    const char *choices; /* OPT_ENUM only */
    /* OPT_STR only, may be NULL: why a non-empty 'value' is bad, or NULL
     * when it is good; checked when the key is set, so a bad value stops
     * start-up with the key and the file (or flag) named. */
    const char *(*check)(const char *value);
    const char *def; /* the default, spelled as on the command line, or NULL */
    const char *env; /* an environment variable whose non-empty value is the default */
    bool def_host; /* with no other default: this host's name, lower-cased ("localhost" if none) */
};

#define OPTS_MAX 32 /* entries a table may have */

/* The two settings every daemon has, with their defaults, for a table of
 * 'type' whose fields log_format and log_level are char *. */
/* clang-format off */
#define OPTS_LOG(type)                                                                             \
    {"log_format", OPT_ENUM, offsetof(type, log_format), "|text|json|", .def = "text"},            \
    {"log_level", OPT_ENUM, offsetof(type, log_level), "|err|warn|info|debug|", .def = "info"}
/* clang-format on */

/* Set 'key' ('-' or '_' spelling) from 'value'. ERR_INVAL with 'e' naming
 * the key when it is unknown or the value bad; the field is then unchanged. */
err_t opts_set(const struct opt *t, size_t n, void *base, const char *key, const char *value,
               struct error *e) WARN_UNUSED;
/* Apply every key of 'doc' (a JSON object from YAML) except those listed in
 * the NULL-terminated 'skip'; strings and numbers are accepted as values. */
err_t opts_apply(const struct opt *t, size_t n, void *base, const json_t *doc,
                 const char *const *skip, struct error *e) WARN_UNUSED;
/* The one of 'names' ('n' of them) closest to 'typo' by edit distance
 * (insert, delete, replace, or swap two neighbours: one edit each), when
 * close enough to be a slip of the keyboard: at most 1 edit for a name of up
 * to 4 characters, 2 for a longer one. A tie goes to the first. NULL when
 * none is that close; else borrowed from 'names'. Names and 'typo' longer
 * than 63 bytes never match. */
const char *opts_suggest(const char *const *names, size_t n, const char *typo);
/* Write the setting at 't' of 'base' as --help shows it into 'buf' ("2s",
 * "10000", "(none)" for an unset string). */
void opts_format_value(const struct opt *t, const void *base, char *buf, size_t cap);
/* Free the OPT_STR and OPT_ENUM fields. */
void opts_release(const struct opt *t, size_t n, void *base);
/* Set every field of 'base' that has a default (env, def, def_host) to it. */
err_t opts_defaults(const struct opt *t, size_t n, void *base, struct error *e) WARN_UNUSED;

/* A daemon's settings as its command line and config file give them. */
struct opts_spec {
    const char *prog;        /* program name, for messages and --version */
    const char *usage;       /* --help prints it, then every flag's default */
    const struct opt *table; /* the settings in --help order, log_format and log_level among them */
    size_t n;                /* entries of 'table', at most OPTS_MAX */
    bool *once;              /* set by --once; NULL: there is no --once */
    /* Applies the config file's mapping to 'base'; NULL: opts_apply with
     * the table. For a file that holds more than the flags. */
    err_t (*apply)(void *base, const json_t *doc, struct error *e);
};

/* What the caller does after opts_load. */
enum opts_next {
    OPTS_RUN,       /* the settings are loaded and logging set up: go on */
    OPTS_EXIT_OK,   /* --help or --version was printed: exit 0 */
    OPTS_EXIT_FAIL, /* what is wrong was printed on stderr: exit 1 */
};

/* Fill 'base' (zeroed) from the defaults, then the YAML file of --config,
 * then the flags (so flags win), then set logging up from log_format and
 * log_level. --help prints the usage and each flag with its default (its
 * value before the config file); --version prints "PROG VERSION"; a
 * mistyped flag is named with the closest one (opts_suggest). Whatever it
 * answers, opts_release frees what 'base' holds. */
enum opts_next opts_load(const struct opts_spec *s, void *base, int argc, char **argv);
/* Apply the YAML file 'path' to 'base'; 'e' names the file and the key:
 * "config file 'PATH': ...". ERR_IO when the file cannot be read. */
err_t opts_load_file(const struct opts_spec *s, void *base, const char *path,
                     struct error *e) WARN_UNUSED;

#endif
