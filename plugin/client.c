/* SPDX-License-Identifier: Apache-2.0 */
/* client.c - kubeconfig, exec credentials and lists for kubectl-podres
 * (client.h). A command-line tool fails fast: one attempt per request, no
 * token bucket; the REST client is made again after an exec plugin gave a
 * new credential, since it copies the token on its first request. */
#define LOG_MOD "plugin"
#include "../common/common.h"
#include "../kube/execcred.h"
#include "../kube/rest.h"
#include "client.h"

#include <assert.h>
#include <time.h>

struct client {
    struct kubeconfig kc;  /* the API server and credentials */
    struct execcred ec;    /* the exec plugin's credential, when kc.exec */
    struct rest_opts opts; /* how the REST client is made */
    struct rest *k;        /* the client, or NULL until needed */
};

static char *dup_or_null(const char *s)
{
    return s ? strdup(s) : NULL;
}

/* The credential 'r' (borrowed) into c->kc, where rest.c reads it. */
static err_t take_credential(struct client *c, const struct execcred_result *r, struct error *e)
{
    free(c->kc.token);
    c->kc.token = dup_or_null(r->token);
    if (r->token && !c->kc.token)
        return errorf(e, ERR_NOMEM, "out of memory");
    if (r->cert_data && !c->kc.cert_file) { /* files are set once: memory files stay */
        c->kc.cert_data = strdup(r->cert_data);
        c->kc.key_data = strdup(r->key_data);
        if (!c->kc.cert_data || !c->kc.key_data)
            return errorf(e, ERR_NOMEM, "out of memory");
        c->kc.cert_data_len = strlen(c->kc.cert_data);
        c->kc.key_data_len = strlen(c->kc.key_data);
    }
    return kubeconfig_data_to_files(&c->kc, e);
}

/* Run the exec plugin (or keep its credential) and put the credential into
 * c->kc; the REST client is made again on the next request. */
static err_t apply_exec(struct client *c, bool force, struct error *e)
{
    const struct execcred_result *r = NULL;
    struct error why = {0};
    err_t rc = execcred_get(&c->ec, time(NULL), force, &r, &why);

    if (rc)
        return errorf(e, rc, "getting credentials: %s", error_msg(&why));
    rc = take_credential(c, r, e);
    rest_free(c->k);
    c->k = NULL;
    return rc;
}

err_t client_open(const struct kubeconfig_sel *sel, struct client **out, struct error *e)
{
    struct client *c;
    err_t rc;

    assert(sel && out);
    c = calloc(1, sizeof(*c));
    if (!c)
        return errorf(e, ERR_NOMEM, "out of memory");
    rc = kubeconfig_load_sel(sel, &c->kc, e);
    if (rc)
        goto out;
    if (c->kc.exec) {
        c->ec.cfg = c->kc.exec;
        rc = apply_exec(c, false, e);
    } else {
        rc = kubeconfig_data_to_files(&c->kc, e);
    }
out:
    if (rc) {
        if (rc == ERR_NOMEM)
            errorf(e, rc, "out of memory");
        client_free(c);
        return rc;
    }
    c->opts = (struct rest_opts){.kc = &c->kc, .max_attempts = 1};
    *out = c;
    return ERR_OK;
}

void client_free(struct client *c)
{
    if (!c)
        return;
    rest_free(c->k);
    execcred_release(&c->ec);
    kubeconfig_release(&c->kc);
    free(c);
}

const char *client_namespace(const struct client *c)
{
    return c->kc.namespace ? c->kc.namespace : "default";
}

/* One GET; the REST client is made on first use. */
static err_t get(struct client *c, const char *path, json_t **out, long *code, struct error *e)
{
    err_t rc;

    if (!c->k)
        c->k = rest_new(&c->opts);
    if (!c->k)
        return errorf(e, ERR_NOMEM, "out of memory");
    rc = rest_do(c->k, "GET", path, NULL, NULL, out, e);
    *code = rest_last_code(c->k);
    return rc;
}

/* The one line for a failed list, into 'e'; 'why' is what failed. */
static err_t explain(err_t rc, long code, const char *resource, const char *source, const char *why,
                     struct error *e)
{
    if (rc == ERR_NOTFOUND)
        return errorf(e, rc, "the server does not serve %s: is podres installed?", resource);
    if (rc == ERR_FORBIDDEN && code == 401)
        return errorf(e, rc,
                      "cannot list %s: Unauthorized: the server refused the credentials of %s",
                      resource, source);
    if (rc == ERR_FORBIDDEN)
        return errorf(e, rc, "cannot list %s (Forbidden): %s", resource, *why ? why : "no access");
    if (rc == ERR_NOMEM)
        return errorf(e, rc, "out of memory");
    return errorf(e, rc, "cannot list %s: %s", resource, *why ? why : err_str(rc));
}

err_t client_list(struct client *c, const char *path, const char *resource, json_t **out,
                  struct error *e)
{
    struct error why = {0};
    long code = 0;
    err_t rc = get(c, path, out, &code, &why);

    if (rc == ERR_FORBIDDEN && code == 401 && c->kc.exec) {
        rc = apply_exec(c, true, e); /* the credential may be revoked early */
        if (rc)
            return rc;
        why = (struct error){0};
        rc = get(c, path, out, &code, &why);
    }
    if (!rc && !json_is_array(json_object_get(*out, "items"))) {
        json_decref(*out);
        *out = NULL;
        rc = errorf(&why, ERR_UPSTREAM, "the answer to GET %s is not a list", path);
    }
    if (rc)
        return explain(rc, code, resource, c->kc.source ? c->kc.source : "the kubeconfig", why.msg,
                       e);
    return ERR_OK;
}
