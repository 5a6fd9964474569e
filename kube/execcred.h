/* SPDX-License-Identifier: Apache-2.0 */
/* execcred.h - client-go credential plugins: a kubeconfig user's `exec`
 * block (client.authentication.k8s.io/v1 or v1beta1). Parses the block, runs
 * the command with its args and env, reads the ExecCredential it prints on
 * stdout (a bearer token, or a client certificate and key in PEM), and keeps
 * it until its expirationTimestamp. Used by kubectl-podres; podres-syncer
 * refuses exec users (kubeconfig.h), so nothing here runs in the daemons.
 * Not thread-safe: it forks. Tokens are never logged. */
#ifndef PODRES_EXECCRED_H
#define PODRES_EXECCRED_H
#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <time.h>

#include "../common/err.h"

enum execcred_interactive {
    EXECCRED_NEVER,        /* stdin is /dev/null */
    EXECCRED_IF_AVAILABLE, /* the terminal's stdin when there is one */
    EXECCRED_ALWAYS,       /* a terminal is required */
};

/* One exec block. Every string is owned; free with execcred_cfg_free. */
struct execcred_cfg {
    char *command;                         /* as written, or resolved against the file's dir */
    char **argv;                           /* command then args, NULL-terminated */
    char **env;                            /* "NAME=VALUE" pairs set for the command */
    size_t nenv;                           /* how many */
    char *api_version;                     /* client.authentication.k8s.io/v1 or v1beta1 */
    char *install_hint;                    /* shown when the command cannot be run, or NULL */
    enum execcred_interactive interactive; /* interactiveMode */
};

/* A credential the command printed. Strings owned; NULL when absent. */
struct execcred_result {
    char *token;     /* status.token */
    char *cert_data; /* status.clientCertificateData (PEM) */
    char *key_data;  /* status.clientKeyData (PEM) */
    time_t expiry;   /* status.expirationTimestamp, seconds since the epoch; 0: none */
};

/* Parse 'exec' (a user's exec mapping, as cfg_yaml_parse gives it; borrowed).
 * A command with a '/' that is not absolute is resolved against 'dir' (the
 * kubeconfig's directory; NULL: the cwd), as client-go does; a bare name is
 * looked up on $PATH when it runs. On ERR_OK *out is new (execcred_cfg_free);
 * ERR_INVAL with 'e' for a bad block, ERR_NOMEM. */
err_t execcred_cfg_parse(const json_t *exec, const char *dir, struct execcred_cfg **out,
                         struct error *e) WARN_UNUSED;
void execcred_cfg_free(struct execcred_cfg *c); /* NULL is a no-op */

/* Parse the command's output ('len' bytes): an ExecCredential of
 * 'api_version' with a token or a certificate and key. On ERR_OK *out is
 * filled (execcred_result_release); ERR_INVAL with 'e' otherwise. */
err_t execcred_parse(const char *text, size_t len, const char *api_version,
                     struct execcred_result *out, struct error *e) WARN_UNUSED;
void execcred_result_release(struct execcred_result *r); /* zeroed or filled; wipes secrets */

/* Run the command and parse what it prints (at most 1 MiB). Its stderr is
 * the caller's. ERR_IO with 'e' when it cannot be started or exits
 * non-zero (the install hint added), ERR_INVAL for bad output. */
err_t execcred_run(const struct execcred_cfg *c, struct execcred_result *out,
                   struct error *e) WARN_UNUSED;

/* The credential of one exec block for the process's life. */
struct execcred {
    const struct execcred_cfg *cfg; /* borrowed; outlives this */
    struct execcred_result cur;     /* the credential kept */
    bool have;                      /* cur is filled */
};

/* The kept credential while 'now' is before its expiry (or it has none) and
 * 'force' is false (a 401 sets it); else the command runs again. On ERR_OK
 * *out is borrowed until the next call or execcred_release. */
err_t execcred_get(struct execcred *ec, time_t now, bool force, const struct execcred_result **out,
                   struct error *e) WARN_UNUSED;
void execcred_release(struct execcred *ec); /* zeroed or used */

/* An RFC 3339 time ("2024-05-01T10:00:00Z", fractions and offsets allowed)
 * as seconds since the epoch. ERR_INVAL when it is not one. */
err_t execcred_parse_time(const char *s, time_t *out) WARN_UNUSED;

#endif
