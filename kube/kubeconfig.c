/* SPDX-License-Identifier: Apache-2.0 */
/* kubeconfig.c - finds the API server and credentials the way kubectl does,
 * for the subset podres can use: one file (no merging of a $KUBECONFIG
 * list), the current-context only, bearer tokens and client certificates.
 * Exec plugins, auth-providers and basic auth are refused by name rather than
 * ignored, so that a 401 later is never the first sign of them. It does not
 * read certificates or tokens; the REST client (rest.h) does, so rotation
 * works. */
#define LOG_MOD "kubeconfig"
#include "../common/common.h"
#include "../common/cfg.h"
#include "execcred.h"
#include "kubeconfig.h"

#include <assert.h>
#include <fcntl.h>
#include <stdarg.h>
#include <sys/mman.h>
#include <unistd.h>

#define SA_DIR "/var/run/secrets/kubernetes.io/serviceaccount"
#define MAX_FILE (4u << 20) /* bytes; the same limit as cfg_yaml_load */

/* One kubeconfig_parse call: the document and where its errors go. */
struct parse {
    const json_t *root;               /* the whole document, borrowed */
    const char *dir;                  /* relative paths are resolved against it; NULL: the cwd */
    const struct kubeconfig_sel *sel; /* context and exec choices; never NULL */
    struct error *e;                  /* where errors go; never NULL */
};

/* How a string key of a cluster or user is stored in struct kubeconfig. */
enum field_kind {
    F_STR,  /* copied as is */
    F_PATH, /* resolved against the file's directory */
    F_DATA, /* base64-decoded */
};

struct field {
    const char *key;      /* kubeconfig spelling */
    enum field_kind kind; /* how to store it */
    size_t off;           /* offset of the char * in struct kubeconfig */
    size_t len_off;       /* F_DATA: offset of the size_t length */
};

#define OFF(f) offsetof(struct kubeconfig, f)
static const struct field cluster_fields[] = {
    {"server", F_STR, OFF(server), 0},
    {"certificate-authority", F_PATH, OFF(ca_file), 0},
    {"certificate-authority-data", F_DATA, OFF(ca_data), OFF(ca_data_len)},
};
static const struct field user_fields[] = {
    {"token", F_STR, OFF(token), 0},
    {"tokenFile", F_PATH, OFF(token_file), 0},
    {"client-certificate", F_PATH, OFF(cert_file), 0},
    {"client-certificate-data", F_DATA, OFF(cert_data), OFF(cert_data_len)},
    {"client-key", F_PATH, OFF(key_file), 0},
    {"client-key-data", F_DATA, OFF(key_data), OFF(key_data_len)},
};

static void *xmalloc(size_t n)
{
    if (fault_alloc_fails())
        return NULL;
    return malloc(n);
}

/* A new formatted string, or NULL if out of memory. */
__attribute__((format(printf, 1, 2))) static char *xprintf(const char *fmt, ...)
{
    va_list ap;
    char *s;
    int n;

    va_start(ap, fmt);
    n = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    if (n < 0)
        return NULL;
    s = xmalloc((size_t)n + 1);
    if (!s)
        return NULL;
    va_start(ap, fmt);
    vsnprintf(s, (size_t)n + 1, fmt, ap);
    va_end(ap);
    return s;
}

/* 'rel' resolved against 'dir' (absolute paths and a NULL dir leave it as is). New. */
static char *join_path(const char *dir, const char *rel)
{
    size_t n;

    if (rel[0] == '/' || !dir || !*dir)
        return xprintf("%s", rel);
    n = strlen(dir);
    return xprintf("%s%s%s", dir, dir[n - 1] == '/' ? "" : "/", rel);
}

/* The 6-bit value of a base64 character, or -1. */
static int b64_value(unsigned char c)
{
    if (c >= 'A' && c <= 'Z')
        return c - 'A';
    if (c >= 'a' && c <= 'z')
        return c - 'a' + 26;
    if (c >= '0' && c <= '9')
        return c - '0' + 52;
    if (c == '+')
        return 62;
    if (c == '/')
        return 63;
    return -1;
}

/* Decode standard, padded base64 as Go's encoding/json does for []byte: line
 * breaks are skipped, anything else outside the alphabet is ERR_INVAL. On
 * ERR_OK *out is new (NUL-terminated, for PEM) and *len excludes the NUL. */
static err_t b64_decode(const char *in, char **out, size_t *len)
{
    size_t n = 0, pad = 0, bits = 0;
    uint32_t acc = 0;
    char *buf = xmalloc(strlen(in) / 4 * 3 + 3);
    int v;

    if (!buf)
        return ERR_NOMEM;
    for (; *in; in++) {
        if (*in == '\n' || *in == '\r')
            continue;
        v = *in == '=' ? 0 : b64_value((unsigned char)*in);
        if (v < 0 || (pad && *in != '=') || (*in == '=' && ++pad > 2))
            goto out_inval;
        acc = acc << 6 | (uint32_t)v;
        if (++bits % 4 == 0) {
            buf[n++] = (char)(acc >> 16);
            buf[n++] = (char)(acc >> 8);
            buf[n++] = (char)acc;
        }
    }
    if (bits % 4 != 0)
        goto out_inval;
    n -= pad;
    buf[n] = '\0';
    *out = buf;
    *len = n;
    return ERR_OK;
out_inval:
    free(buf);
    return ERR_INVAL;
}

/* obj[key] as a string: NULL when absent, null or empty; ERR_INVAL for any
 * other type. 'where' names the object in the message. */
static err_t get_str(struct parse *p, const json_t *obj, const char *key, const char *where,
                     const char **out)
{
    const json_t *v = json_object_get(obj, key);

    *out = NULL;
    if (!v || json_is_null(v))
        return ERR_OK;
    if (!json_is_string(v))
        return errorf(p->e, ERR_INVAL, "%s: %s must be a string", where, key);
    if (json_string_length(v) > 0)
        *out = json_string_value(v);
    return ERR_OK;
}

/* Store one field's string 's' into 'kc' as its kind says. */
static err_t store_field(struct parse *p, const struct field *f, const char *s, const char *where,
                         struct kubeconfig *kc)
{
    char **dst = (char **)(void *)((char *)kc + f->off);
    err_t rc;

    if (f->kind == F_STR)
        *dst = xprintf("%s", s);
    else if (f->kind == F_PATH)
        *dst = join_path(p->dir, s);
    if (f->kind != F_DATA)
        return *dst ? ERR_OK : ERR_NOMEM;
    rc = b64_decode(s, dst, (size_t *)(void *)((char *)kc + f->len_off));
    if (rc == ERR_INVAL)
        return errorf(p->e, rc, "%s: %s is not valid base64", where, f->key);
    return rc;
}

static err_t read_fields(struct parse *p, const json_t *obj, const struct field *fields, size_t n,
                         const char *where, struct kubeconfig *kc)
{
    const char *s;
    err_t rc;
    size_t i;

    for (i = 0; i < n; i++) {
        rc = get_str(p, obj, fields[i].key, where, &s);
        if (rc)
            return rc;
        rc = s ? store_field(p, &fields[i], s, where, kc) : ERR_OK;
        if (rc)
            return rc;
    }
    return ERR_OK;
}

/* The entry 'name' of the list 'list' ("clusters", "contexts", "users"); *out
 * is its 'inner' mapping, borrowed from p->root. ERR_NOTFOUND (p->e says so)
 * when there is no such entry. */
static err_t find_named(struct parse *p, const char *list, const char *inner, const char *name,
                        const json_t **out)
{
    const json_t *arr = json_object_get(p->root, list), *item, *v;
    size_t i;

    if (arr && !json_is_null(arr) && !json_is_array(arr))
        return errorf(p->e, ERR_INVAL, "%s must be a list", list);
    json_array_foreach(arr, i, item) {
        v = json_object_get(item, "name");
        if (!json_is_object(item) || !json_is_string(v))
            return errorf(p->e, ERR_INVAL, "%s[%zu] must be a mapping with a name", list, i);
        if (strcmp(json_string_value(v), name) != 0)
            continue;
        *out = json_object_get(item, inner);
        if (json_is_object(*out))
            return ERR_OK;
        return errorf(p->e, ERR_INVAL, "%s \"%s\": %s must be a mapping", inner, name, inner);
    }
    return errorf(p->e, ERR_NOTFOUND, "%s \"%s\" not found", inner, name);
}

/* "https://host:port" without trailing slashes; a bare "host:port" gets https. */
static err_t normalise_server(struct parse *p, const char *where, struct kubeconfig *kc)
{
    char *s = kc->server;
    size_t n = s ? strlen(s) : 0;

    while (n > 0 && s[n - 1] == '/')
        s[--n] = '\0';
    if (n == 0)
        return errorf(p->e, ERR_INVAL, "%s: server is missing", where);
    if (strstr(s, "://"))
        return ERR_OK;
    kc->server = xprintf("https://%s", s);
    free(s);
    return kc->server ? ERR_OK : ERR_NOMEM;
}

static err_t load_cluster(struct parse *p, const char *name, struct kubeconfig *kc)
{
    const json_t *cl = NULL, *insecure;
    char where[160];
    err_t rc = find_named(p, "clusters", "cluster", name, &cl);

    if (rc)
        return rc;
    snprintf(where, sizeof(where), "cluster \"%s\"", name);
    rc = read_fields(p, cl, cluster_fields, ARRAY_SIZE(cluster_fields), where, kc);
    if (rc)
        return rc;
    insecure = json_object_get(cl, "insecure-skip-tls-verify");
    if (insecure && !json_is_null(insecure) && !json_is_boolean(insecure))
        return errorf(p->e, ERR_INVAL, "%s: insecure-skip-tls-verify must be true or false", where);
    kc->insecure = json_is_true(insecure);
    if (kc->ca_file && kc->ca_data)
        return errorf(p->e, ERR_INVAL,
                      "%s: certificate-authority and certificate-authority-data are both set",
                      where);
    return normalise_server(p, where, kc);
}

/* Credentials we cannot use are an error naming the user, never a silent 401. */
static err_t check_unsupported(struct parse *p, const json_t *u, const char *where)
{
    static const char *const keys[] = {"exec", "auth-provider", "username", "password"};
    static const char *const what[] = {"a credential plugin", "an auth provider", "basic auth",
                                       "basic auth"};
    const json_t *v;
    size_t i;

    for (i = 0; i < ARRAY_SIZE(keys); i++) {
        if (i == 0 && p->sel->allow_exec)
            continue; /* load_user parses it */
        v = json_object_get(u, keys[i]);
        if (!v || json_is_null(v))
            continue;
        return errorf(p->e, ERR_INVAL,
                      "%s: %s is not supported (%s); use token, tokenFile or a client certificate",
                      where, keys[i], what[i]);
    }
    return ERR_OK;
}

/* A client certificate needs its key, and each may come from one place only. */
static err_t check_cert_pair(struct parse *p, const struct kubeconfig *kc, const char *where)
{
    bool cert, key;

    if ((kc->cert_file && kc->cert_data) || (kc->key_file && kc->key_data)) {
        cert = kc->cert_file && kc->cert_data;
        return errorf(p->e, ERR_INVAL, "%s: both client-%s and client-%s-data are set", where,
                      cert ? "certificate" : "key", cert ? "certificate" : "key");
    }
    cert = kc->cert_file || kc->cert_data;
    key = kc->key_file || kc->key_data;
    if (cert != key)
        return errorf(p->e, ERR_INVAL, "%s: client-%s is set without client-%s", where,
                      cert ? "certificate" : "key", cert ? "key" : "certificate");
    return ERR_OK;
}

/* The user's exec block into kc->exec (allow_exec only). */
static err_t load_exec(struct parse *p, const json_t *u, const char *where, struct kubeconfig *kc)
{
    const json_t *exec = json_object_get(u, "exec");
    struct error why = {0};
    err_t rc;

    if (!exec || json_is_null(exec))
        return ERR_OK;
    rc = execcred_cfg_parse(exec, p->dir, &kc->exec, &why);
    if (rc == ERR_INVAL)
        return errorf(p->e, rc, "%s: %s", where, why.msg);
    return rc;
}

static err_t load_user(struct parse *p, const char *name, struct kubeconfig *kc)
{
    const json_t *u = NULL;
    char where[160];
    err_t rc = find_named(p, "users", "user", name, &u);

    if (rc)
        return rc;
    snprintf(where, sizeof(where), "user \"%s\"", name);
    rc = check_unsupported(p, u, where);
    if (rc)
        return rc;
    rc = read_fields(p, u, user_fields, ARRAY_SIZE(user_fields), where, kc);
    if (rc)
        return rc;
    rc = p->sel->allow_exec ? load_exec(p, u, where, kc) : ERR_OK;
    if (rc)
        return rc;
    return check_cert_pair(p, kc, where);
}

/* A bearer token is never sent over plain http: whoever sees the traffic
 * could use it. kubectl 1.36 drops it there without a word; refusing at
 * start names the mistake. Client certificates are fine (no TLS, no
 * certificate sent), and so is an anonymous user. */
static err_t check_plain_http(struct parse *p, const char *cluster, const char *user,
                              const struct kubeconfig *kc)
{
    if (!(kc->token || kc->token_file || kc->exec) || strncasecmp(kc->server, "http://", 7) != 0)
        return ERR_OK;
    return errorf(p->e, ERR_INVAL,
                  "cluster \"%s\" has server '%s' (plain http) and user \"%s\" a bearer token; "
                  "refusing to send the token unencrypted: use an https server",
                  cluster, kc->server, user ? user : "");
}

/* The current context's (or the selected one's) cluster, user and namespace
 * names, borrowed from p->root. A context without a user means anonymous
 * access (*user stays NULL). */
static err_t current_context(struct parse *p, const char **cluster, const char **user,
                             const json_t **ns)
{
    const json_t *ctx = NULL;
    const char *name = p->sel->context;
    char where[160];
    err_t rc = name ? ERR_OK : get_str(p, p->root, "current-context", "kubeconfig", &name);

    if (rc)
        return rc;
    if (!name)
        return errorf(p->e, ERR_INVAL, "current-context is not set");
    rc = find_named(p, "contexts", "context", name, &ctx);
    if (rc)
        return rc;
    snprintf(where, sizeof(where), "context \"%s\"", name);
    rc = get_str(p, ctx, "cluster", where, cluster);
    if (rc)
        return rc;
    rc = get_str(p, ctx, "user", where, user);
    if (rc)
        return rc;
    *ns = json_object_get(ctx, "namespace");
    if (!*cluster)
        return errorf(p->e, ERR_INVAL, "%s: cluster is not set", where);
    return ERR_OK;
}

/* The context's namespace, read leniently (the syncer never used it): a
 * string, or YAML's plain 123 as "123"; anything else is no namespace. */
static err_t context_namespace(const json_t *ns, struct kubeconfig *kc)
{
    if (json_is_string(ns) && json_string_length(ns))
        kc->namespace = xprintf("%s", json_string_value(ns));
    else if (json_is_integer(ns))
        kc->namespace = xprintf("%" JSON_INTEGER_FORMAT, json_integer_value(ns));
    else
        return ERR_OK;
    return kc->namespace ? ERR_OK : ERR_NOMEM;
}

err_t kubeconfig_parse(const char *text, size_t len, const char *dir, struct kubeconfig *out,
                       struct error *e)
{
    static const struct kubeconfig_sel none = {0};

    return kubeconfig_parse_sel(text, len, dir, &none, out, e);
}

/* The document's current (or selected) context into 'kc'. */
static err_t parse_doc(struct parse *p, struct kubeconfig *kc)
{
    const char *cluster = NULL, *user = NULL;
    const json_t *ns = NULL;
    err_t rc;

    if (!json_is_object(p->root))
        return errorf(p->e, ERR_INVAL, "the document must be a mapping");
    rc = current_context(p, &cluster, &user, &ns);
    if (rc)
        return rc;
    rc = context_namespace(ns, kc);
    if (rc)
        return rc;
    rc = load_cluster(p, cluster, kc);
    if (rc)
        return rc;
    rc = user ? load_user(p, user, kc) : ERR_OK;
    if (rc)
        return rc;
    return check_plain_http(p, cluster, user, kc);
}

err_t kubeconfig_parse_sel(const char *text, size_t len, const char *dir,
                           const struct kubeconfig_sel *sel, struct kubeconfig *out,
                           struct error *e)
{
    struct kubeconfig kc = {0};
    struct error none = {0};
    struct parse p = {.dir = dir, .sel = sel, .e = e ? e : &none};
    json_t *root = NULL;
    err_t rc;

    assert(sel);
    rc = cfg_yaml_parse(text, len, &root, p.e);
    if (rc)
        return rc;
    p.root = root;
    rc = parse_doc(&p, &kc);
    if (rc == ERR_NOTFOUND) {
        rc = ERR_INVAL; /* a dangling reference is a bad file, not a missing one */
        p.e->code = rc;
    }
    if (rc == ERR_NOMEM)
        errorf(e, rc, "out of memory");
    json_decref(root);
    if (rc) {
        kubeconfig_release(&kc);
        return rc;
    }
    *out = kc;
    return ERR_OK;
}

/* Read all of 'path' (at most MAX_FILE bytes). On ERR_OK *text is new. */
static err_t read_text(const char *path, char **text, size_t *len, struct error *e)
{
    FILE *f = fopen(path, "rb");
    char *buf = NULL;
    size_t n = 0;
    err_t rc;

    if (!f)
        return errorf(e, ERR_IO, "cannot open: %s", strerror(errno));
    buf = xmalloc(MAX_FILE);
    if (!buf) {
        rc = errorf(e, ERR_NOMEM, "out of memory");
        goto out;
    }
    n = fread(buf, 1, MAX_FILE, f);
    if (ferror(f)) {
        rc = errorf(e, ERR_IO, "cannot read: %s", strerror(errno));
        goto out;
    }
    if (n == MAX_FILE) {
        rc = errorf(e, ERR_INVAL, "file is larger than 4 MiB");
        goto out;
    }
    *text = buf;
    *len = n;
    buf = NULL;
    rc = ERR_OK;
out:
    free(buf);
    fclose(f);
    return rc;
}

/* Load one kubeconfig file; messages are prefixed with its path. */
static err_t load_file(const char *path, const struct kubeconfig_sel *sel, struct kubeconfig *out,
                       struct error *e)
{
    struct kubeconfig kc = {0};
    struct error why = {0};
    char *text = NULL, *dir = NULL, *slash;
    size_t len = 0;
    err_t rc = read_text(path, &text, &len, &why);

    if (rc)
        goto out;
    dir = xprintf("%s", path);
    if (!dir) {
        rc = errorf(&why, ERR_NOMEM, "out of memory");
        goto out;
    }
    slash = strrchr(dir, '/');
    if (slash == dir)
        dir[1] = '\0'; /* "/config" lives in "/" */
    else if (slash)
        *slash = '\0';
    rc = kubeconfig_parse_sel(text, len, slash ? dir : NULL, sel, &kc, &why);
    if (rc)
        goto out;
    kc.source = xprintf("%s", path);
    if (!kc.source)
        rc = errorf(&why, ERR_NOMEM, "out of memory");
out:
    if (rc) {
        errorf(e, rc, "kubeconfig '%s': %s", path, why.msg[0] ? why.msg : err_str(rc));
        kubeconfig_release(&kc);
    } else {
        *out = kc;
    }
    free(dir);
    free(text);
    return rc;
}

/* The first existing file of the colon-separated list $KUBECONFIG. ERR_NOTFOUND
 * when it is unset or names no existing file. */
static err_t load_env_list(const struct kubeconfig_sel *sel, struct kubeconfig *out,
                           struct error *e)
{
    const char *env = getenv("KUBECONFIG"), *list, *end;
    char *one;
    size_t n;
    err_t rc;

    for (list = env; list && *list; list = *end ? end + 1 : end) {
        end = strchr(list, ':');
        if (!end)
            end = list + strlen(list);
        n = (size_t)(end - list);
        if (n == 0)
            continue;
        one = xprintf("%.*s", (int)n, list);
        if (!one)
            return errorf(e, ERR_NOMEM, "out of memory");
        rc = access(one, F_OK) == 0 ? load_file(one, sel, out, e) : ERR_NOTFOUND;
        free(one);
        if (rc != ERR_NOTFOUND)
            return rc;
    }
    if (env && *env)
        log_warn("$KUBECONFIG names no existing file; trying the next source");
    return ERR_NOTFOUND;
}

err_t kubeconfig_load(const char *path, struct kubeconfig *out, struct error *e)
{
    const struct kubeconfig_sel sel = {.path = path};

    return kubeconfig_load_sel(&sel, out, e);
}

/* ~/.kube/config, the last source: ERR_NOTFOUND, said, when it is not there. */
static err_t load_home(const struct kubeconfig_sel *sel, struct kubeconfig *out, struct error *e)
{
    const char *home = getenv("HOME");
    char *dflt = NULL;
    err_t rc;

    if (home && *home) {
        dflt = join_path(home, ".kube/config");
        if (!dflt)
            return errorf(e, ERR_NOMEM, "out of memory");
        if (access(dflt, F_OK) == 0) {
            rc = load_file(dflt, sel, out, e);
            free(dflt);
            return rc;
        }
    }
    errorf(e, ERR_NOTFOUND,
           "no Kubernetes configuration: no --kubeconfig, no existing file in $KUBECONFIG, "
           "KUBERNETES_SERVICE_HOST is not set and %s%s%s",
           dflt ? "'" : "", dflt ? dflt : "$HOME is not set", dflt ? "' does not exist" : "");
    free(dflt);
    return ERR_NOTFOUND;
}

err_t kubeconfig_load_sel(const struct kubeconfig_sel *sel, struct kubeconfig *out, struct error *e)
{
    err_t rc;

    assert(sel);
    if (sel->path && *sel->path)
        return load_file(sel->path, sel, out, e);
    rc = load_env_list(sel, out, e);
    if (rc != ERR_NOTFOUND)
        return rc;
    rc = sel->context ? ERR_NOTFOUND : kubeconfig_in_cluster(SA_DIR, out, e);
    if (rc != ERR_NOTFOUND)
        return rc;
    return load_home(sel, out, e);
}

/* 'name' in 'sa_dir' must be readable; on ERR_OK *out is its new path. */
static err_t sa_file(const char *sa_dir, const char *name, char **out, struct error *e)
{
    char *path = join_path(sa_dir, name);

    if (!path)
        return errorf(e, ERR_NOMEM, "in-cluster: out of memory");
    if (access(path, R_OK) != 0) {
        errorf(e, ERR_IO, "in-cluster: cannot read '%s': %s", path, strerror(errno));
        free(path);
        return ERR_IO;
    }
    *out = path;
    return ERR_OK;
}

err_t kubeconfig_in_cluster(const char *sa_dir, struct kubeconfig *out, struct error *e)
{
    const char *host = getenv("KUBERNETES_SERVICE_HOST");
    const char *port = getenv("KUBERNETES_SERVICE_PORT");
    struct kubeconfig kc = {0};
    long long num = 0;
    err_t rc;

    if (!host || !*host)
        return errorf(e, ERR_NOTFOUND, "in-cluster: KUBERNETES_SERVICE_HOST is not set");
    if (!port || cfg_parse_int(port, 1, 65535, &num))
        return errorf(e, ERR_INVAL, "in-cluster: KUBERNETES_SERVICE_PORT is %s",
                      port ? "not a port number" : "not set");
    /* An IPv6 literal needs brackets in a URL; one already bracketed keeps them. */
    if (strchr(host, ':') && host[0] != '[')
        kc.server = xprintf("https://[%s]:%lld", host, num);
    else
        kc.server = xprintf("https://%s:%lld", host, num);
    kc.source = xprintf("in-cluster");
    if (!kc.server || !kc.source) {
        rc = errorf(e, ERR_NOMEM, "in-cluster: out of memory");
        goto out;
    }
    rc = sa_file(sa_dir, "token", &kc.token_file, e);
    if (rc)
        goto out;
    rc = sa_file(sa_dir, "ca.crt", &kc.ca_file, e);
out:
    if (rc) {
        kubeconfig_release(&kc);
        return rc;
    }
    *out = kc;
    return ERR_OK;
}

/* '*data' (of '*len' bytes) into a new sealed memory file named 'name';
 * '*file' becomes its /proc/self/fd path and '*data' is freed. */
static err_t data_to_file(struct kubeconfig *kc, const char *name, char **data, size_t *len,
                          char **file, struct error *e)
{
    const int seals = F_SEAL_SEAL | F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_WRITE;
    size_t off = 0;
    ssize_t n;
    int fd;

    if (!*data)
        return ERR_OK;
    assert(kc->ndata_fds < (int)ARRAY_SIZE(kc->data_fds));
    fd = memfd_create(name, MFD_CLOEXEC | MFD_ALLOW_SEALING);
    if (fd < 0)
        return errorf(e, ERR_IO, "%s: memfd_create: %s", name, strerror(errno));
    while (off < *len) {
        n = write(fd, *data + off, *len - off);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0) {
            errorf(e, ERR_IO, "%s: write to a memory file: %s", name, strerror(errno));
            close(fd);
            return ERR_IO;
        }
        off += (size_t)n;
    }
    free(*file);
    *file = xprintf("/proc/self/fd/%d", fd);
    if (!*file || fcntl(fd, F_ADD_SEALS, seals) != 0) {
        errorf(e, *file ? ERR_IO : ERR_NOMEM, "%s: %s", name,
               *file ? strerror(errno) : "out of memory");
        close(fd);
        return *file ? ERR_IO : ERR_NOMEM;
    }
    kc->data_fds[kc->ndata_fds++] = fd;
    explicit_bzero(*data, *len);
    free(*data);
    *data = NULL;
    *len = 0;
    return ERR_OK;
}

err_t kubeconfig_data_to_files(struct kubeconfig *kc, struct error *e)
{
    err_t rc = data_to_file(kc, "podres-ca", &kc->ca_data, &kc->ca_data_len, &kc->ca_file, e);

    if (rc)
        return rc;
    rc = data_to_file(kc, "podres-client-cert", &kc->cert_data, &kc->cert_data_len, &kc->cert_file,
                      e);
    if (rc)
        return rc;
    return data_to_file(kc, "podres-client-key", &kc->key_data, &kc->key_data_len, &kc->key_file,
                        e);
}

void kubeconfig_release(struct kubeconfig *kc)
{
    int i;

    if (!kc)
        return;
    for (i = 0; i < kc->ndata_fds; i++)
        close(kc->data_fds[i]);
    free(kc->server);
    free(kc->ca_file);
    free(kc->ca_data);
    free(kc->token);
    free(kc->token_file);
    free(kc->cert_file);
    free(kc->cert_data);
    free(kc->key_file);
    free(kc->key_data);
    free(kc->source);
    free(kc->namespace);
    execcred_cfg_free(kc->exec);
    memset(kc, 0, sizeof(*kc));
}

err_t kubeconfig_load_daemon(const char *path, struct kubeconfig *out)
{
    struct error e = {0};
    err_t rc = kubeconfig_load(path, out, &e);

    if (rc)
        goto out;
    rc = kubeconfig_data_to_files(out, &e);
out:
    if (rc)
        log_err("no usable Kubernetes configuration: %s", error_msg(&e));
    return rc;
}
