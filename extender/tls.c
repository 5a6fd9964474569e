/* SPDX-License-Identifier: Apache-2.0 */
/* tls.c - libmicrohttpd does the handshake with the files' contents and asks
 * for (does not demand) a client certificate, so /healthz and /readyz can
 * answer a kubelet probe that has none; every other path asks this module
 * who the caller is. The verification is GnuTLS's, against the CA given to
 * the daemon, for the TLS client purpose. */
#define LOG_MOD "tls"
#include "../common/common.h"
#include "tls.h"

#include <gnutls/gnutls.h>
#include <gnutls/x509.h>

#define PEM_MAX (1u << 20) /* a certificate chain or a CA bundle */

/* 'path' whole, NUL-terminated, into *out (new), when it looks like PEM. */
static err_t read_pem(const char *what, const char *path, char **out, struct error *e)
{
    FILE *f;
    char *buf;
    size_t n;

    if (!path || !*path)
        return errorf(e, ERR_INVAL,
                      "--%s is required: the extender serves HTTPS and answers only callers "
                      "it authenticates",
                      what);
    f = fopen(path, "rb");
    if (!f)
        return errorf(e, ERR_IO, "--%s: cannot open '%s': %s", what, path, strerror(errno));
    buf = malloc(PEM_MAX + 1);
    n = buf ? fread(buf, 1, PEM_MAX + 1, f) : 0;
    fclose(f);
    if (!buf)
        return errorf(e, ERR_NOMEM, "out of memory");
    buf[n > PEM_MAX ? PEM_MAX : n] = '\0';
    if (n > PEM_MAX || !strstr(buf, "-----BEGIN ")) {
        free(buf);
        return errorf(e, ERR_INVAL, "--%s: '%s' is not a PEM file of at most 1 MiB", what, path);
    }
    *out = buf;
    return ERR_OK;
}

/* 'names' split at commas, empty items dropped, into c->names. */
static err_t split_names(struct tls_conf *c, const char *names, struct error *e)
{
    size_t n = 1, i = 0;
    const char *p, *q;

    for (p = names ? names : ""; *p; p++)
        n += *p == ',';
    c->names = calloc(n + 1, sizeof(*c->names));
    if (!c->names)
        return errorf(e, ERR_NOMEM, "out of memory");
    for (p = names ? names : ""; *p; p = *q ? q + 1 : q) {
        q = strchr(p, ',');
        if (!q)
            q = p + strlen(p);
        if (q == p)
            continue;
        c->names[i] = strndup(p, (size_t)(q - p));
        if (!c->names[i++])
            return errorf(e, ERR_NOMEM, "out of memory");
    }
    if (i == 0)
        return errorf(e, ERR_INVAL, "--client-names: give at least one common name");
    return ERR_OK;
}

err_t tls_load(struct tls_conf *c, const char *cert_file, const char *key_file, const char *ca_file,
               const char *names, struct error *e)
{
    err_t rc;

    memset(c, 0, sizeof(*c));
    rc = read_pem("tls-cert-file", cert_file, &c->cert, e);
    if (!rc)
        rc = read_pem("tls-private-key-file", key_file, &c->key, e);
    if (!rc)
        rc = read_pem("client-ca-file", ca_file, &c->ca, e);
    if (!rc)
        rc = split_names(c, names, e);
    if (rc)
        tls_release(c);
    return rc;
}

void tls_release(struct tls_conf *c)
{
    size_t i;

    if (!c)
        return;
    for (i = 0; c->names && c->names[i]; i++)
        free(c->names[i]);
    free(c->names);
    if (c->key)
        memset(c->key, 0, strlen(c->key));
    free(c->cert);
    free(c->key);
    free(c->ca);
    memset(c, 0, sizeof(*c));
}

bool tls_name_allowed(const struct tls_conf *c, const char *cn)
{
    size_t i;

    for (i = 0; cn && *cn && c->names && c->names[i]; i++) {
        if (strcmp(c->names[i], cn) == 0)
            return true;
    }
    return false;
}

/* The common name of the DER certificate 'der' into 'cn', or "". */
static void common_name(const gnutls_datum_t *der, char *cn, size_t cap)
{
    gnutls_x509_crt_t crt;
    size_t n = cap;

    cn[0] = '\0';
    if (gnutls_x509_crt_init(&crt) < 0)
        return;
    if (gnutls_x509_crt_import(crt, der, GNUTLS_X509_FMT_DER) < 0 ||
        gnutls_x509_crt_get_dn_by_oid(crt, GNUTLS_OID_X520_COMMON_NAME, 0, 0, cn, &n) < 0)
        cn[0] = '\0';
    gnutls_x509_crt_deinit(crt);
}

enum tls_caller tls_check_caller(const struct tls_conf *c, void *session, char *cn, size_t cap)
{
    gnutls_session_t s = session;
    gnutls_typed_vdata_st purpose = {.type = GNUTLS_DT_KEY_PURPOSE_OID,
                                     .data = (unsigned char *)GNUTLS_KP_TLS_WWW_CLIENT};
    const gnutls_datum_t *peers;
    unsigned status = 0, npeers = 0;

    cn[0] = '\0';
    if (!s)
        return TLS_CALLER_NONE;
    peers = gnutls_certificate_get_peers(s, &npeers);
    if (!peers || npeers == 0)
        return TLS_CALLER_NONE;
    if (gnutls_certificate_verify_peers(s, &purpose, 1, &status) < 0 || status != 0)
        return TLS_CALLER_NONE;
    common_name(&peers[0], cn, cap);
    return tls_name_allowed(c, cn) ? TLS_CALLER_OK : TLS_CALLER_FORBIDDEN;
}
