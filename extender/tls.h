/* SPDX-License-Identifier: Apache-2.0 */
/* tls.h - who may call the extender: its serving certificate and key, the
 * CA that signs its callers' client certificates, and the common names
 * allowed among them. The files are read once at start-up (a restart picks
 * up new ones). A caller is known by the certificate it presented in the
 * TLS handshake of its connection: verified against the CA for client
 * authentication, within its validity, and named in the list. Thread-safe
 * after tls_load. */
#ifndef PODRES_TLS_H
#define PODRES_TLS_H
#include <stdbool.h>
#include <stddef.h>

#include "../common/err.h"

#define TLS_NAME_MAX 128 /* longest common name compared */

struct tls_conf {
    char *cert;   /* PEM: the serving certificate (and its chain) */
    char *key;    /* PEM: its private key */
    char *ca;     /* PEM: the CA(s) that sign callers' certificates */
    char **names; /* the allowed common names, NULL-terminated */
};

/* Read 'cert_file', 'key_file' and 'ca_file' (each must be given and hold
 * PEM) and split 'names' (comma-separated, at least one) into 'c'. On
 * failure 'e' names the file or the setting, and 'c' holds nothing. */
err_t tls_load(struct tls_conf *c, const char *cert_file, const char *key_file, const char *ca_file,
               const char *names, struct error *e) WARN_UNUSED;
void tls_release(struct tls_conf *c); /* a zeroed struct is fine */

/* Whether 'cn' is one of the allowed names. */
bool tls_name_allowed(const struct tls_conf *c, const char *cn);

/* What a connection's caller proved. */
enum tls_caller {
    TLS_CALLER_OK,        /* a valid client certificate with an allowed name */
    TLS_CALLER_NONE,      /* no certificate, or not one the CA signed for clients */
    TLS_CALLER_FORBIDDEN, /* a valid certificate whose name is not allowed */
};

/* The caller of the TLS session 'session' (a gnutls_session_t); 'cn' gets
 * the certificate's common name when there is one ("" otherwise). */
enum tls_caller tls_check_caller(const struct tls_conf *c, void *session, char *cn, size_t cap);

#endif
