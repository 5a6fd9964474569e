/* SPDX-License-Identifier: Apache-2.0 */
/* config.h - podresd's settings: its option table (common/opts.h) and the
 * two keys of its config file that are no flag, the static device list and
 * the identity rules (checked here, compiled for use by server/ident.h).
 * Every other key of the file is a flag name with '-' spelled '_'. Not
 * thread-safe; used at start-up only. */
#ifndef PODRES_CONFIG_H
#define PODRES_CONFIG_H
#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

#include "../common/err.h"
#include "../common/opts.h"

struct config {
    char *db;                       /* database path */
    char *socket;                   /* unix socket path */
    char *listen;                   /* loopback HOST:PORT or NULL */
    char *metrics_listen;           /* HOST:PORT of the metrics-only listener, or NULL */
    char *node_name;                /* this node */
    char *source;                   /* "api" or "kubelet" */
    char *kubelet_socket;           /* kubelet pod-resources socket */
    uint64_t kubelet_interval_ms;   /* poll interval, milliseconds */
    char *write_token_file;         /* bearer token for TCP writes, or NULL */
    uint64_t history;               /* change events kept */
    uint64_t watch_memory;          /* MiB all watchers may hold unsent together */
    uint64_t history_retention_ms;  /* binding and health intervals kept, milliseconds */
    uint64_t history_max_intervals; /* intervals kept per table at most */
    char *log_format;               /* text or json */
    char *log_level;                /* err, warn, info, debug */
    json_t *devices;                /* static [{"resourceName","devices":[validated]}]; new */
    json_t *identity;               /* [{"resource","pattern"}] that ident_rules_new takes, or
                                       NULL; new */
};

/* Fill 'c' with the defaults ($NODE_NAME, else the host name, for node_name). */
err_t config_init(struct config *c) WARN_UNUSED;
void config_release(struct config *c);
/* Set 'key' (flag spelling with '-' or '_') from a string value. ERR_INVAL
 * with 'e' naming the key when unknown or bad. */
err_t config_set(struct config *c, const char *key, const char *value, struct error *e) WARN_UNUSED;
/* Apply a parsed YAML document (an object). 'e' names the key. */
err_t config_apply(struct config *c, const json_t *doc, struct error *e) WARN_UNUSED;
/* The write token in 'path': its one non-empty line, trailing white space
 * dropped (*out new; never log it). A file that group or others may read or
 * write is refused (ERR_INVAL), as is one without such a line; one that
 * cannot be read is ERR_IO. 'e' says why. */
err_t config_read_token(const char *path, char **out, struct error *e) WARN_UNUSED;
/* Load and apply a YAML file; 'e' names the key and the file. */
err_t config_load(struct config *c, const char *path, struct error *e) WARN_UNUSED;

/* Fill 'c' (from scratch) from the defaults, the config file and the flags,
 * and set logging up: opts_load. config_release frees it, whatever the answer. */
enum opts_next config_load_args(struct config *c, int argc, char **argv);

#endif
