/* SPDX-License-Identifier: Apache-2.0 */
/* execcred.c - client-go's exec credential plugins, as kubectl runs them:
 * the command gets KUBERNETES_EXEC_INFO (an ExecCredential with
 * spec.interactive) and the block's env on top of ours, prints an
 * ExecCredential, and its credential is kept until it expires. Not a
 * client-go clone: provideClusterInfo is accepted but no cluster is passed,
 * and nothing is cached on disk (kubectl does not either). */
#define LOG_MOD "execcred"
#include "../common/common.h"
#include "../common/cfg.h"
#include "execcred.h"

#include <assert.h>
#include <fcntl.h>
#include <poll.h>
#include <sys/wait.h>
#include <unistd.h>

#define OUT_MAX (1u << 20) /* bytes of output read from the command */
#define API_V1 "client.authentication.k8s.io/v1"
#define API_V1BETA1 "client.authentication.k8s.io/v1beta1"

static char *xstrdup(const char *s)
{
    if (fault_alloc_fails())
        return NULL;
    return strdup(s);
}

static void *xcalloc(size_t n, size_t size)
{
    if (fault_alloc_fails())
        return NULL;
    return calloc(n, size);
}

/* A scalar as the text it was written as: YAML's plain 5 or true come back
 * from cfg_yaml_parse as numbers and booleans. New, or NULL (out of memory,
 * or *bad set for a mapping or list). */
static char *scalar_text(const json_t *v, bool *bad)
{
    char buf[64];

    *bad = false;
    if (json_is_string(v))
        return xstrdup(json_string_value(v));
    if (json_is_integer(v))
        snprintf(buf, sizeof(buf), "%" JSON_INTEGER_FORMAT, json_integer_value(v));
    else if (json_is_real(v))
        snprintf(buf, sizeof(buf), "%.17g", json_real_value(v));
    else if (json_is_boolean(v))
        snprintf(buf, sizeof(buf), "%s", json_is_true(v) ? "true" : "false");
    else {
        *bad = true;
        return NULL;
    }
    return xstrdup(buf);
}

static err_t parse_args(const json_t *exec, struct execcred_cfg *c, struct error *e)
{
    const json_t *args = json_object_get(exec, "args"), *v;
    size_t i, n = json_is_array(args) ? json_array_size(args) : 0;
    bool bad;

    if (args && !json_is_null(args) && !json_is_array(args))
        return errorf(e, ERR_INVAL, "exec: args must be a list");
    c->argv = xcalloc(n + 2, sizeof(char *));
    if (!c->argv)
        return ERR_NOMEM;
    c->argv[0] = xstrdup(c->command);
    if (!c->argv[0])
        return ERR_NOMEM;
    json_array_foreach(args, i, v) {
        c->argv[i + 1] = scalar_text(v, &bad);
        if (bad)
            return errorf(e, ERR_INVAL, "exec: args[%zu] must be a string", i);
        if (!c->argv[i + 1])
            return ERR_NOMEM;
    }
    return ERR_OK;
}

static err_t parse_env(const json_t *exec, struct execcred_cfg *c, struct error *e)
{
    const json_t *env = json_object_get(exec, "env"), *item, *name, *v;
    size_t i;
    char *value;
    bool bad;

    if (env && !json_is_null(env) && !json_is_array(env))
        return errorf(e, ERR_INVAL, "exec: env must be a list");
    c->env = xcalloc(json_array_size(env) + 1, sizeof(char *));
    if (!c->env)
        return ERR_NOMEM;
    json_array_foreach(env, i, item) {
        name = json_object_get(item, "name");
        if (!json_is_string(name) || !json_string_length(name) ||
            strchr(json_string_value(name), '='))
            return errorf(e, ERR_INVAL, "exec: env[%zu] needs a name (without '=')", i);
        v = json_object_get(item, "value");
        bad = false;
        value = v && !json_is_null(v) ? scalar_text(v, &bad) : xstrdup("");
        if (bad)
            return errorf(e, ERR_INVAL, "exec: env[%zu].value must be a string", i);
        if (value && asprintf(&c->env[c->nenv], "%s=%s", json_string_value(name), value) < 0)
            c->env[c->nenv] = NULL;
        free(value);
        if (!c->env[c->nenv])
            return ERR_NOMEM;
        c->nenv++;
    }
    return ERR_OK;
}

static err_t parse_mode(const json_t *exec, struct execcred_cfg *c, struct error *e)
{
    static const char *const names[] = {"Never", "IfAvailable", "Always"};
    const json_t *m = json_object_get(exec, "interactiveMode");
    size_t i;

    c->interactive = EXECCRED_IF_AVAILABLE;
    if (!m || json_is_null(m))
        return ERR_OK;
    for (i = 0; json_is_string(m) && i < ARRAY_SIZE(names); i++) {
        if (strcmp(json_string_value(m), names[i]) == 0) {
            c->interactive = (enum execcred_interactive)i;
            return ERR_OK;
        }
    }
    return errorf(e, ERR_INVAL, "exec: interactiveMode must be Never, IfAvailable or Always");
}

static bool known_api(const json_t *api)
{
    const char *s = json_string_value(api);

    return s && (strcmp(s, API_V1) == 0 || strcmp(s, API_V1BETA1) == 0);
}

/* 's' resolved as client-go does: relative with a '/' against 'dir'. New. */
static char *resolve_command(const char *s, const char *dir)
{
    char *out = NULL;

    if (s[0] == '/' || !strchr(s, '/') || !dir || !*dir)
        return xstrdup(s);
    if (asprintf(&out, "%s/%s", dir, s) < 0)
        return NULL;
    return out;
}

/* command and apiVersion: the two required strings; installHint. */
static err_t parse_head(const json_t *exec, const char *dir, struct execcred_cfg *c,
                        struct error *e)
{
    const json_t *cmd = json_object_get(exec, "command"),
                 *api = json_object_get(exec, "apiVersion");
    const json_t *hint = json_object_get(exec, "installHint");

    if (!json_is_string(cmd) || !json_string_length(cmd))
        return errorf(e, ERR_INVAL, "exec: command is missing");
    if (!known_api(api))
        return errorf(e, ERR_INVAL, "exec: apiVersion must be %s or %s", API_V1, API_V1BETA1);
    c->command = resolve_command(json_string_value(cmd), dir);
    c->api_version = xstrdup(json_string_value(api));
    if (json_is_string(hint))
        c->install_hint = xstrdup(json_string_value(hint));
    if (!c->command || !c->api_version || (json_is_string(hint) && !c->install_hint))
        return ERR_NOMEM;
    return ERR_OK;
}

err_t execcred_cfg_parse(const json_t *exec, const char *dir, struct execcred_cfg **out,
                         struct error *e)
{
    struct execcred_cfg *c;
    err_t rc;

    if (!json_is_object(exec))
        return errorf(e, ERR_INVAL, "exec must be a mapping");
    c = xcalloc(1, sizeof(*c));
    if (!c)
        return errorf(e, ERR_NOMEM, "out of memory");
    rc = parse_head(exec, dir, c, e);
    if (rc)
        goto out;
    rc = parse_args(exec, c, e);
    if (rc)
        goto out;
    rc = parse_env(exec, c, e);
    if (rc)
        goto out;
    rc = parse_mode(exec, c, e);
out:
    if (rc == ERR_NOMEM)
        errorf(e, rc, "out of memory");
    if (rc) {
        execcred_cfg_free(c);
        return rc;
    }
    *out = c;
    return ERR_OK;
}

void execcred_cfg_free(struct execcred_cfg *c)
{
    size_t i;

    if (!c)
        return;
    for (i = 0; c->argv && c->argv[i]; i++)
        free(c->argv[i]);
    for (i = 0; c->env && i < c->nenv; i++)
        free(c->env[i]);
    free(c->argv);
    free(c->env);
    free(c->command);
    free(c->api_version);
    free(c->install_hint);
    free(c);
}

/* ---- the output ---- */

/* Two decimal digits at 's', or -1. */
static int two_digits(const char *s)
{
    if (s[0] < '0' || s[0] > '9' || s[1] < '0' || s[1] > '9')
        return -1;
    return (s[0] - '0') * 10 + (s[1] - '0');
}

/* The zone of an RFC 3339 time ("Z", "+hh:mm", "-hh:mm") as seconds east. */
static err_t zone_offset(const char *p, long *off)
{
    int hh, mm;

    if ((*p == 'Z' || *p == 'z') && p[1] == '\0') {
        *off = 0;
        return ERR_OK;
    }
    if ((*p != '+' && *p != '-') || strlen(p) != 6 || p[3] != ':')
        return ERR_INVAL;
    hh = two_digits(p + 1);
    mm = two_digits(p + 4);
    if (hh < 0 || mm < 0 || hh > 23 || mm > 59)
        return ERR_INVAL;
    *off = (*p == '+' ? 1 : -1) * (hh * 3600L + mm * 60L);
    return ERR_OK;
}

err_t execcred_parse_time(const char *s, time_t *out)
{
    struct tm tm = {0};
    const char *p = strptime(s, "%Y-%m-%dT%H:%M:%S", &tm);
    long off = 0;
    time_t t;

    if (!p)
        return ERR_INVAL;
    if (*p == '.') {
        for (p++; *p >= '0' && *p <= '9'; p++)
            ;
    }
    if (zone_offset(p, &off))
        return ERR_INVAL;
    t = timegm(&tm);
    if (t == (time_t)-1)
        return ERR_INVAL;
    *out = t - off;
    return ERR_OK;
}

/* status[key] as a new string in *dst: absent is fine, another type is not. */
static err_t take_str(const json_t *status, const char *key, char **dst, struct error *e)
{
    const json_t *v = json_object_get(status, key);

    if (!v || json_is_null(v))
        return ERR_OK;
    if (!json_is_string(v))
        return errorf(e, ERR_INVAL, "ExecCredential: status.%s must be a string", key);
    if (!json_string_length(v))
        return ERR_OK;
    *dst = xstrdup(json_string_value(v));
    return *dst ? ERR_OK : ERR_NOMEM;
}

/* The credential in 'status': a token, or a certificate and its key. */
static err_t read_status(const json_t *status, struct execcred_result *r, struct error *e)
{
    static const char *const keys[] = {"token", "clientCertificateData", "clientKeyData"};
    char **dst[] = {&r->token, &r->cert_data, &r->key_data};
    const json_t *exp = json_object_get(status, "expirationTimestamp");
    size_t i;
    err_t rc;

    for (i = 0; i < ARRAY_SIZE(keys); i++) {
        rc = take_str(status, keys[i], dst[i], e);
        if (rc)
            return rc;
    }
    if (!r->cert_data != !r->key_data)
        return errorf(e, ERR_INVAL, "ExecCredential: status.%s is set without status.%s",
                      r->cert_data ? "clientCertificateData" : "clientKeyData",
                      r->cert_data ? "clientKeyData" : "clientCertificateData");
    if (!r->token && !r->cert_data)
        return errorf(e, ERR_INVAL,
                      "ExecCredential: status has neither a token nor a client certificate");
    if (exp && !json_is_null(exp) &&
        (!json_is_string(exp) || execcred_parse_time(json_string_value(exp), &r->expiry)))
        return errorf(e, ERR_INVAL,
                      "ExecCredential: status.expirationTimestamp is not an RFC 3339 time");
    return ERR_OK;
}

err_t execcred_parse(const char *text, size_t len, const char *api_version,
                     struct execcred_result *out, struct error *e)
{
    struct execcred_result r = {0};
    json_error_t jerr;
    json_t *doc = json_loadb(text, len, JSON_REJECT_DUPLICATES, &jerr);
    const json_t *kind = json_object_get(doc, "kind"), *api = json_object_get(doc, "apiVersion");
    err_t rc;

    if (!doc)
        return errorf(e, ERR_INVAL, "the output is not JSON: %s (line %d)", jerr.text, jerr.line);
    if (!json_is_string(kind) || strcmp(json_string_value(kind), "ExecCredential") != 0)
        rc = errorf(e, ERR_INVAL, "the output is not an ExecCredential (kind)");
    else if (!json_is_string(api) || strcmp(json_string_value(api), api_version) != 0)
        rc = errorf(e, ERR_INVAL, "ExecCredential: apiVersion is not %s, as the kubeconfig asks",
                    api_version);
    else if (!json_is_object(json_object_get(doc, "status")))
        rc = errorf(e, ERR_INVAL, "ExecCredential: status is missing");
    else
        rc = read_status(json_object_get(doc, "status"), &r, e);
    json_decref(doc);
    if (rc == ERR_NOMEM)
        errorf(e, rc, "out of memory");
    if (rc) {
        execcred_result_release(&r);
        return rc;
    }
    *out = r;
    return ERR_OK;
}

static void wipe_free(char *s)
{
    if (s)
        explicit_bzero(s, strlen(s));
    free(s);
}

void execcred_result_release(struct execcred_result *r)
{
    if (!r)
        return;
    wipe_free(r->token);
    wipe_free(r->cert_data);
    wipe_free(r->key_data);
    memset(r, 0, sizeof(*r));
}

/* ---- running it ---- */

/* In the child: stdin, stdout, the environment, then exec. Never returns. */
static void child(const struct execcred_cfg *c, int out_fd, bool interactive)
{
    char info[256];
    size_t i;
    int null_fd;

    if (!interactive) {
        null_fd = open("/dev/null", O_RDONLY);
        if (null_fd >= 0)
            dup2(null_fd, 0);
    }
    dup2(out_fd, 1);
    snprintf(info, sizeof(info),
             "{\"apiVersion\":\"%s\",\"kind\":\"ExecCredential\",\"spec\":{\"interactive\":%s}}",
             c->api_version, interactive ? "true" : "false");
    setenv("KUBERNETES_EXEC_INFO", info, 1);
    for (i = 0; i < c->nenv; i++)
        putenv(c->env[i]);
    execvp(c->command, c->argv);
    fprintf(stderr, "kubectl-podres: cannot run exec plugin '%s': %s\n", c->command,
            strerror(errno));
    _exit(127);
}

/* Everything the child writes to 'fd', up to OUT_MAX bytes. New in *out. */
static err_t read_all(int fd, char **out, size_t *len, struct error *e)
{
    size_t n = 0;
    ssize_t r;
    char *buf = xcalloc(1, OUT_MAX + 1);

    if (!buf)
        return errorf(e, ERR_NOMEM, "out of memory");
    for (;;) {
        r = read(fd, buf + n, OUT_MAX - n);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0)
            break;
        n += (size_t)r;
        if (n == OUT_MAX) {
            free(buf);
            return errorf(e, ERR_INVAL, "its output is over 1 MiB");
        }
    }
    *out = buf;
    *len = n;
    return ERR_OK;
}

static err_t wait_child(pid_t pid, const struct execcred_cfg *c, struct error *e)
{
    int status = 0;

    while (waitpid(pid, &status, 0) < 0) {
        if (errno != EINTR)
            return errorf(e, ERR_IO, "exec plugin '%s': waitpid: %s", c->command, strerror(errno));
    }
    if (WIFEXITED(status) && WEXITSTATUS(status) == 0)
        return ERR_OK;
    if (WIFEXITED(status))
        return errorf(e, ERR_IO, "exec plugin '%s' exited with status %d%s%s", c->command,
                      WEXITSTATUS(status), c->install_hint ? ": " : "",
                      c->install_hint ? c->install_hint : "");
    return errorf(e, ERR_IO, "exec plugin '%s' was killed by signal %d", c->command,
                  WTERMSIG(status));
}

/* Start the command with its stdout on a pipe: *pid and the pipe's read
 * end *fd. */
static err_t start(const struct execcred_cfg *c, pid_t *pid, int *fd, struct error *e)
{
    bool tty = isatty(0) == 1, interactive = c->interactive != EXECCRED_NEVER && tty;
    int fds[2];

    if (c->interactive == EXECCRED_ALWAYS && !tty)
        return errorf(e, ERR_INVAL, "exec plugin '%s' needs a terminal (interactiveMode: Always)",
                      c->command);
    if (pipe2(fds, O_CLOEXEC) != 0)
        return errorf(e, ERR_IO, "exec plugin: pipe: %s", strerror(errno));
    fflush(NULL);
    *pid = fork();
    if (*pid == 0)
        child(c, fds[1], interactive);
    close(fds[1]);
    if (*pid < 0) {
        close(fds[0]);
        return errorf(e, ERR_IO, "exec plugin '%s': fork: %s", c->command, strerror(errno));
    }
    *fd = fds[0];
    return ERR_OK;
}

err_t execcred_run(const struct execcred_cfg *c, struct execcred_result *out, struct error *e)
{
    struct error why = {0};
    char *text = NULL;
    size_t len = 0;
    pid_t pid = -1;
    int fd = -1;
    err_t rc, wrc;

    assert(c->command && c->argv && c->argv[0] && c->api_version);
    rc = start(c, &pid, &fd, e);
    if (rc)
        return rc;
    rc = read_all(fd, &text, &len, &why);
    close(fd);
    wrc = wait_child(pid, c, e);
    if (!wrc && !rc)
        rc = execcred_parse(text, len, c->api_version, out, &why);
    if (!wrc && rc)
        errorf(e, rc, "exec plugin '%s': %s", c->command, why.msg);
    if (text)
        explicit_bzero(text, len);
    free(text);
    return wrc ? wrc : rc;
}

err_t execcred_get(struct execcred *ec, time_t now, bool force, const struct execcred_result **out,
                   struct error *e)
{
    struct execcred_result r = {0};
    err_t rc;

    assert(ec->cfg);
    if (ec->have && !force && (ec->cur.expiry == 0 || now < ec->cur.expiry)) {
        *out = &ec->cur;
        return ERR_OK;
    }
    rc = execcred_run(ec->cfg, &r, e);
    if (rc)
        return rc;
    execcred_result_release(&ec->cur);
    ec->cur = r;
    ec->have = true;
    *out = &ec->cur;
    return ERR_OK;
}

void execcred_release(struct execcred *ec)
{
    if (!ec)
        return;
    execcred_result_release(&ec->cur);
    ec->have = false;
}
