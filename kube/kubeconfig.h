/* SPDX-License-Identifier: Apache-2.0 */
/* kubeconfig.h - where a podres program finds the Kubernetes API server and
 * its credentials: --kubeconfig, $KUBECONFIG (the first existing file of a
 * colon-separated list), the in-cluster service account
 * (KUBERNETES_SERVICE_HOST/PORT, /var/run/secrets/kubernetes.io/serviceaccount/
 * token and ca.crt), or ~/.kube/config, in that order. Kubeconfig files are
 * parsed with libyaml (common/cfg.h). Not thread-safe; used at start-up. */
#ifndef PODRES_KUBECONFIG_H
#define PODRES_KUBECONFIG_H
#include <stdbool.h>
#include <stddef.h>

#include "../common/err.h"

/* Everything the client needs. Strings are owned (free with
 * kubeconfig_release); NULL when absent. '*_data' hold decoded PEM bytes. */
struct kubeconfig {
    char *server;              /* "https://host:port" without a trailing slash */
    char *ca_file;             /* certificate-authority path */
    char *ca_data;             /* certificate-authority-data, decoded PEM */
    size_t ca_data_len;        /* its length */
    bool insecure;             /* insecure-skip-tls-verify */
    char *token;               /* a literal bearer token */
    char *token_file;          /* tokenFile, or the service account token path */
    char *cert_file;           /* client-certificate path */
    char *cert_data;           /* client-certificate-data, decoded PEM */
    size_t cert_data_len;      /* its length */
    char *key_file;            /* client-key path */
    char *key_data;            /* client-key-data, decoded PEM */
    size_t key_data_len;       /* its length */
    char *source;              /* where it came from, for the log: a path or "in-cluster" */
    char *namespace;           /* the context's namespace, or NULL */
    struct execcred_cfg *exec; /* the user's exec block (only with allow_exec), or NULL */
    int data_fds[3];           /* memory files kubeconfig_data_to_files made */
    int ndata_fds;             /* how many */
};

struct execcred_cfg;

/* Resolve as described above. 'path' is --kubeconfig or NULL. On failure
 * 'e' (or NULL) says why, naming the file and the key: ERR_NOTFOUND
 * when no configuration exists at all, ERR_INVAL for a bad file (including an
 * exec or auth-provider user: "unsupported"), ERR_IO when a file cannot be read. */
err_t kubeconfig_load(const char *path, struct kubeconfig *out, struct error *e) WARN_UNUSED;
/* Parse kubeconfig YAML text ('len' bytes) using its current-context. Relative
 * file paths inside are resolved against 'dir' (the file's directory). */
err_t kubeconfig_parse(const char *text, size_t len, const char *dir, struct kubeconfig *out,
                       struct error *e) WARN_UNUSED;
/* What kubectl-podres asks of the loader beyond kubeconfig_load's: a
 * context other than current-context, and exec users parsed instead of
 * refused. A zeroed struct is kubeconfig_load's behaviour. */
struct kubeconfig_sel {
    const char *path;    /* --kubeconfig, or NULL */
    const char *context; /* --context, or NULL for current-context; no in-cluster fallback then */
    bool allow_exec;     /* an exec user fills kc->exec (execcred.h) instead of ERR_INVAL */
};
/* kubeconfig_load with 'sel' (borrowed). */
err_t kubeconfig_load_sel(const struct kubeconfig_sel *sel, struct kubeconfig *out,
                          struct error *e) WARN_UNUSED;
/* kubeconfig_parse with 'sel' (its path unused). */
err_t kubeconfig_parse_sel(const char *text, size_t len, const char *dir,
                           const struct kubeconfig_sel *sel, struct kubeconfig *out,
                           struct error *e) WARN_UNUSED;
/* The in-cluster configuration from the environment and 'sa_dir' (normally
 * /var/run/secrets/kubernetes.io/serviceaccount). ERR_NOTFOUND when
 * KUBERNETES_SERVICE_HOST is unset. */
err_t kubeconfig_in_cluster(const char *sa_dir, struct kubeconfig *out,
                            struct error *e) WARN_UNUSED;
/* Move each '*_data' into a sealed memory file (memfd_create) and point the
 * matching '*_file' at it ("/proc/self/fd/N"); the '*_data' are freed. The
 * syncer's libcurl (Debian's GnuTLS build) reads CAs, certificates and keys
 * from files only, and the key material must not touch a disk. ERR_IO with
 * 'e' when a memory file cannot be made. */
err_t kubeconfig_data_to_files(struct kubeconfig *kc, struct error *e) WARN_UNUSED;
/* A daemon's start: kubeconfig_load('path') and kubeconfig_data_to_files(),
 * the reason logged once on failure. */
err_t kubeconfig_load_daemon(const char *path, struct kubeconfig *out) WARN_UNUSED;
/* On a zeroed or filled struct; closes the memory files. */
void kubeconfig_release(struct kubeconfig *kc);

#endif
