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

/* Put the exec plugin's credential into c->kc, where rest.c reads it. */
static err_t apply_exec(struct client *c, bool force, char *msg, size_t cap)
{
    const struct execcred_result *r = NULL;
    char why[512] = "";
    err_t rc = execcred_get(&c->ec, time(NULL), force, &r, why, sizeof(why));

    if (rc) {
        snprintf(msg, cap, "getting credentials: %s", why);
        return rc;
    }
    free(c->kc.token);
    c->kc.token = dup_or_null(r->token);
    if (r->cert_data && !c->kc.cert_file) { /* files are set once: memory files stay */
        c->kc.cert_data = strdup(r->cert_data);
        c->kc.key_data = strdup(r->key_data);
        if (!c->kc.cert_data || !c->kc.key_data)
            return ERR_NOMEM;
        c->kc.cert_data_len = strlen(c->kc.cert_data);
        c->kc.key_data_len = strlen(c->kc.key_data);
    }
    if (r->token && !c->kc.token)
        return ERR_NOMEM;
    rc = kubeconfig_data_to_files(&c->kc, why, sizeof(why));
    if (rc)
        snprintf(msg, cap, "%s", why);
    rest_free(c->k);
    c->k = NULL;
    return rc;
}

err_t client_open(const struct kubeconfig_sel *sel, struct client **out, char *msg, size_t cap)
{
    struct client *c = calloc(1, sizeof(*c));
    err_t rc;

    if (!c)
        return ERR_NOMEM;
    rc = kubeconfig_load_sel(sel, &c->kc, msg, cap);
    if (!rc && c->kc.exec) {
        c->ec.cfg = c->kc.exec;
        rc = apply_exec(c, false, msg, cap);
    }
    if (!rc && !c->kc.exec)
        rc = kubeconfig_data_to_files(&c->kc, msg, cap);
    if (rc) {
        if (rc == ERR_NOMEM)
            snprintf(msg, cap, "out of memory");
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
static err_t get(struct client *c, const char *path, json_t **out, long *code, char *msg,
                 size_t cap)
{
    err_t rc;

    if (!c->k)
        c->k = rest_new(&c->opts);
    if (!c->k)
        return ERR_NOMEM;
    rc = rest_do(c->k, "GET", path, NULL, NULL, out, msg, cap);
    *code = rest_last_code(c->k);
    return rc;
}

/* The one line for a failed list. */
static void explain(err_t rc, long code, const char *resource, const char *source, const char *why,
                    char *msg, size_t cap)
{
    if (rc == ERR_NOTFOUND)
        snprintf(msg, cap, "the server does not serve %s: is podres installed?", resource);
    else if (rc == ERR_FORBIDDEN && code == 401)
        snprintf(msg, cap, "cannot list %s: Unauthorized: the server refused the credentials of %s",
                 resource, source);
    else if (rc == ERR_FORBIDDEN)
        snprintf(msg, cap, "cannot list %s (Forbidden): %s", resource, *why ? why : "no access");
    else if (rc == ERR_NOMEM)
        snprintf(msg, cap, "out of memory");
    else
        snprintf(msg, cap, "cannot list %s: %s", resource, *why ? why : err_str(rc));
}

err_t client_list(struct client *c, const char *path, const char *resource, json_t **out, char *msg,
                  size_t cap)
{
    char why[1024] = "";
    long code = 0;
    err_t rc = get(c, path, out, &code, why, sizeof(why));

    if (rc == ERR_FORBIDDEN && code == 401 && c->kc.exec) {
        rc = apply_exec(c, true, msg, cap); /* the credential may be revoked early */
        if (rc)
            return rc;
        rc = get(c, path, out, &code, why, sizeof(why));
    }
    if (!rc && !json_is_array(json_object_get(*out, "items"))) {
        json_decref(*out);
        *out = NULL;
        snprintf(why, sizeof(why), "the answer to GET %s is not a list", path);
        rc = ERR_UPSTREAM;
    }
    if (rc)
        explain(rc, code, resource, c->kc.source ? c->kc.source : "the kubeconfig", why, msg, cap);
    return rc;
}
