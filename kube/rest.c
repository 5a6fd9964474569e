/* SPDX-License-Identifier: Apache-2.0 */
/* rest.c - the client of rest.h: libcurl requests through the gate
 * (rest_gate.c), counted (rest_stats.c), the retry policy, token files,
 * NDJSON streams and Status parsing. */
#define LOG_MOD "kube"
#include "../common/common.h"
#include "../common/clock.h"
#include "../common/jsonx.h"
#include "rest_int.h"

#include <assert.h>
#include <curl/curl.h>
#include <dlfcn.h>
#include <sys/stat.h>
#include <time.h>

#define BODY_MAX (64u << 20)        /* largest answer accepted, bytes */
#define STREAM_LINE_MAX (16u << 20) /* longest line of a stream, bytes: no object comes close */

/* ---- the client ---- */

struct rest {
    CURL *curl;                   /* one handle for life: kept-alive connections */
    const struct kubeconfig *kc;  /* borrowed */
    char *unix_socket;            /* or NULL */
    struct rest_gate *gate;       /* borrowed, or NULL */
    struct rest_stats *stats;     /* borrowed, or NULL */
    int max_attempts;             /* retryable tries */
    char *token;                  /* current bearer token or NULL */
    struct timespec token_mtime;  /* of kc->token_file when read */
    json_t *status;               /* the last request's error answer (a Status), or NULL */
    long code;                    /* the last rest_do's HTTP status; 0: none */
    char errbuf[CURL_ERROR_SIZE]; /* libcurl's message */
};

#define SSH2_INIT_NO_CRYPTO 1 /* LIBSSH2_INIT_NO_CRYPTO of <libssh2.h> */

static bool ssh2_inited;

err_t rest_global_init(void)
{
    /* int libssh2_init(int flags): libssh2 initialises on its first call
     * only, so this one decides; curl_global_init's call just counts. */
    void *p = dlsym(RTLD_DEFAULT, "libssh2_init");
    int (*ssh2_init)(int);

    if (p) {
        memcpy(&ssh2_init, &p, sizeof(p));
        ssh2_inited = ssh2_init(SSH2_INIT_NO_CRYPTO) == 0;
    }
    return curl_global_init(CURL_GLOBAL_DEFAULT) == CURLE_OK ? ERR_OK : ERR_UNAVAIL;
}

void rest_global_cleanup(void)
{
    void *p = ssh2_inited ? dlsym(RTLD_DEFAULT, "libssh2_exit") : NULL;
    void (*ssh2_exit)(void);

    curl_global_cleanup();
    if (p) {
        memcpy(&ssh2_exit, &p, sizeof(p));
        ssh2_exit(); /* the count rest_global_init added */
    }
    ssh2_inited = false;
}

struct rest *rest_new(const struct rest_opts *o)
{
    struct rest *k;

    assert(o);
    k = calloc(1, sizeof(*k));
    if (!k)
        return NULL;
    k->curl = curl_easy_init();
    k->kc = o->kc;
    k->gate = o->gate;
    k->stats = o->stats;
    k->max_attempts = o->max_attempts > 0 ? o->max_attempts : 4;
    if (o->unix_socket)
        k->unix_socket = strdup(o->unix_socket);
    if (!k->curl || (o->unix_socket && !k->unix_socket)) {
        rest_free(k);
        return NULL;
    }
    return k;
}

void rest_free(struct rest *k)
{
    if (!k)
        return;
    if (k->curl)
        curl_easy_cleanup(k->curl);
    free(k->unix_socket);
    free(k->token);
    json_decref(k->status);
    free(k);
}

/* The first line of a token file, without trailing white space; new or NULL. */
static char *read_token_file(const char *path)
{
    char buf[16384];
    FILE *f = fopen(path, "r");
    size_t n;

    if (!f)
        return NULL;
    n = fread(buf, 1, sizeof(buf) - 1, f);
    fclose(f);
    buf[n] = '\0';
    while (n && (buf[n - 1] == '\n' || buf[n - 1] == '\r' || buf[n - 1] == ' '))
        buf[--n] = '\0';
    return strdup(buf);
}

/* Load the token (literal, or from the file when it changed). */
static void refresh_token(struct rest *k, bool force)
{
    struct stat sb;
    char *t;

    if (!k->kc || !k->kc->token_file) {
        if (!k->token && k->kc && k->kc->token)
            k->token = strdup(k->kc->token);
        return;
    }
    if (stat(k->kc->token_file, &sb) != 0) {
        log_warn("cannot read token file '%s': %s", k->kc->token_file, strerror(errno));
        return;
    }
    if (!force && k->token && sb.st_mtim.tv_sec == k->token_mtime.tv_sec &&
        sb.st_mtim.tv_nsec == k->token_mtime.tv_nsec)
        return;
    t = read_token_file(k->kc->token_file);
    if (!t)
        return;
    free(k->token);
    k->token = t;
    k->token_mtime = sb.st_mtim;
}

struct xfer {
    char *body;              /* answer */
    size_t len, cap;         /* used, allocated */
    uint64_t retry_after_ms; /* from Retry-After */
    rest_line_fn fn;         /* streaming: per line */
    void *ctx;               /* its argument */
    bool stop;               /* fn asked to stop */
    bool bad_line;           /* a line was not JSON */
    bool long_line;          /* a line grew past STREAM_LINE_MAX without its end */
    size_t scanned;          /* bytes of body[0..len) known to hold no newline */
    long status;             /* from the status line; 0 before it */
    struct rest_gate *gate;  /* to notice shutdown */
};

/* Hand each complete line to fn. Only bytes not searched before are
 * searched for the newline, so a long line costs its length once, not once
 * per piece it arrives in; one past STREAM_LINE_MAX ends the stream. */
static void deliver_lines(struct xfer *x)
{
    size_t used = 0, from = x->scanned, n;
    char *nl;
    json_t *v;

    while (!x->stop) {
        nl = memchr(x->body + from, '\n', x->len - from);
        if (!nl)
            break;
        n = (size_t)(nl - (x->body + used));
        if (n > 0) {
            v = json_loadb(x->body + used, n, 0, NULL);
            x->bad_line = !v;
            x->stop = !v || !x->fn(x->ctx, v);
            json_decref(v);
        }
        used += n + 1;
        from = used;
    }
    if (used) {
        memmove(x->body, x->body + used, x->len - used);
        x->len -= used;
    }
    x->scanned = x->len;
    if (!x->stop && x->len > STREAM_LINE_MAX) {
        x->long_line = true;
        x->stop = true;
    }
}

static size_t on_body(char *data, size_t size, size_t nmemb, void *cls)
{
    struct xfer *x = cls;
    size_t n = size * nmemb;

    if (x->len + n + 1 > x->cap) {
        size_t ncap = x->cap ? x->cap : 16384;
        char *nb;

        while (ncap < x->len + n + 1)
            ncap *= 2;
        if (ncap > BODY_MAX)
            return 0;
        nb = realloc(x->body, ncap);
        if (!nb)
            return 0;
        x->body = nb;
        x->cap = ncap;
    }
    memcpy(x->body + x->len, data, n);
    x->len += n;
    x->body[x->len] = '\0';
    if (x->fn && x->status >= 200 && x->status < 300)
        deliver_lines(x); /* an error answer is kept whole for its Status message */
    return x->stop ? 0 : n;
}

static size_t on_header(char *data, size_t size, size_t nmemb, void *cls)
{
    struct xfer *x = cls;
    size_t n = size * nmemb;

    if (n > 12 && strncasecmp(data, "Retry-After:", 12) == 0)
        x->retry_after_ms = (uint64_t)strtoul(data + 12, NULL, 10) * 1000;
    else if (n > 9 && strncmp(data, "HTTP/", 5) == 0 && strchr(data, ' '))
        x->status = strtol(strchr(data, ' ') + 1, NULL, 10); /* the status line */
    return n;
}

static int on_progress(void *cls, curl_off_t a, curl_off_t b, curl_off_t c, curl_off_t d)
{
    struct xfer *x = cls;

    (void)a;
    (void)b;
    (void)c;
    (void)d;
    return rest_gate_stopped(x->gate) ? 1 : 0;
}

static void set_tls(struct rest *k)
{
    const struct kubeconfig *kc = k->kc;

    if (!kc)
        return;
    if (kc->insecure) {
        curl_easy_setopt(k->curl, CURLOPT_SSL_VERIFYPEER, 0L);
        curl_easy_setopt(k->curl, CURLOPT_SSL_VERIFYHOST, 0L);
    }
    /* A kubeconfig's CA is trusted alone, as kubectl does: libcurl's default
     * CA directory would add every CA of the system to it. Without one,
     * libcurl's defaults are the system's CAs (/etc/ssl/certs). Embedded data
     * is in memory files by now (kubeconfig_data_to_files). */
    if (kc->ca_file) {
        curl_easy_setopt(k->curl, CURLOPT_CAPATH, NULL);
        curl_easy_setopt(k->curl, CURLOPT_CAINFO, kc->ca_file);
    }
    if (kc->cert_file)
        curl_easy_setopt(k->curl, CURLOPT_SSLCERT, kc->cert_file);
    if (kc->key_file)
        curl_easy_setopt(k->curl, CURLOPT_SSLKEY, kc->key_file);
}

/* Set up one transfer; returns the header list to free after it. */
static struct curl_slist *prepare(struct rest *k, const char *method, const char *path,
                                  const char *body, size_t blen, const char *ctype, struct xfer *x,
                                  bool stream)
{
    struct curl_slist *h = NULL;
    char url[4096], auth[16500];
    const char *server = k->kc && k->kc->server ? k->kc->server : "http://localhost";

    curl_easy_reset(k->curl);
    snprintf(url, sizeof(url), "%s%s", server, path);
    curl_easy_setopt(k->curl, CURLOPT_URL, url);
    curl_easy_setopt(k->curl, CURLOPT_ERRORBUFFER, k->errbuf);
    curl_easy_setopt(k->curl, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(k->curl, CURLOPT_CONNECTTIMEOUT_MS, 5000L);
    curl_easy_setopt(k->curl, CURLOPT_TIMEOUT_MS, stream ? 0L : 30000L);
    curl_easy_setopt(k->curl, CURLOPT_TCP_KEEPALIVE, 1L);
    curl_easy_setopt(k->curl, CURLOPT_HTTP_VERSION, (long)CURL_HTTP_VERSION_2TLS);
    curl_easy_setopt(k->curl, CURLOPT_PROTOCOLS_STR, "http,https");
    curl_easy_setopt(k->curl, CURLOPT_WRITEFUNCTION, on_body);
    curl_easy_setopt(k->curl, CURLOPT_WRITEDATA, x);
    curl_easy_setopt(k->curl, CURLOPT_HEADERFUNCTION, on_header);
    curl_easy_setopt(k->curl, CURLOPT_HEADERDATA, x);
    curl_easy_setopt(k->curl, CURLOPT_NOPROGRESS, 0L);
    curl_easy_setopt(k->curl, CURLOPT_XFERINFOFUNCTION, on_progress);
    curl_easy_setopt(k->curl, CURLOPT_XFERINFODATA, x);
    curl_easy_setopt(k->curl, CURLOPT_USERAGENT, "podres-syncer/" PODRES_VERSION);
    if (k->unix_socket)
        curl_easy_setopt(k->curl, CURLOPT_UNIX_SOCKET_PATH, k->unix_socket);
    set_tls(k);
    if (strcmp(method, "GET") != 0)
        curl_easy_setopt(k->curl, CURLOPT_CUSTOMREQUEST, method);
    if (body) {
        curl_easy_setopt(k->curl, CURLOPT_POSTFIELDS, body);
        curl_easy_setopt(k->curl, CURLOPT_POSTFIELDSIZE, (long)blen);
        snprintf(auth, sizeof(auth), "Content-Type: %s", ctype ? ctype : "application/json");
        h = curl_slist_append(h, auth);
    }
    h = curl_slist_append(h, "Accept: application/json");
    if (k->token) {
        snprintf(auth, sizeof(auth), "Authorization: Bearer %s", k->token);
        h = curl_slist_append(h, auth);
    }
    curl_easy_setopt(k->curl, CURLOPT_HTTPHEADER, h);
    return h;
}

static err_t map_status(long code)
{
    if (code == 404)
        return ERR_NOTFOUND;
    if (code == 409)
        return ERR_CONFLICT;
    if (code == 410)
        return ERR_GONE;
    if (code == 401 || code == 403)
        return ERR_FORBIDDEN;
    if (code == 422)
        return ERR_UNPROCESSABLE;
    if (code == 429 || code >= 500)
        return ERR_UPSTREAM;
    return ERR_INVAL;
}

/* 'rc' with the Status message of an error body, or the body's first line. */
static err_t status_error(struct error *e, err_t rc, const struct xfer *x, long code)
{
    json_t *v = x->body ? json_loadb(x->body, x->len, 0, NULL) : NULL;
    const char *m = json_string_value(json_object_get(v, "message"));
    size_t n;

    if (m) {
        errorf(e, rc, "HTTP %ld: %s", code, m);
    } else if (x->body && x->len) {
        n = strcspn(x->body, "\n");
        errorf(e, rc, "HTTP %ld: %.*s", code, (int)(n < 200 ? n : 200), x->body);
    } else {
        errorf(e, rc, "HTTP %ld", code);
    }
    json_decref(v);
    return rc;
}

/* Keep the JSON object of an error answer for rest_last_status; NULL
 * keeps nothing (a new request). */
static void keep_status(struct rest *k, const struct xfer *x)
{
    json_t *v = x && x->body && x->len ? json_loadb(x->body, x->len, 0, NULL) : NULL;

    json_decref(k->status);
    k->status = json_is_object(v) ? v : NULL;
    if (!k->status)
        json_decref(v);
}

const json_t *rest_last_status(const struct rest *k)
{
    return k->status;
}

/* As client-go's isTooLargeResourceVersionError: the cause since 1.18.6,
 * the cause's message in 1.17.0-1.18.5, the Status message before. */
bool rest_status_too_large(const json_t *status)
{
    const char *reason = json_string_value(json_object_get(status, "reason"));
    const char *msg = json_string_value(json_object_get(status, "message"));
    json_t *c;
    size_t i;

    json_array_foreach(json_object_get(json_object_get(status, "details"), "causes"), i, c) {
        const char *r = json_string_value(json_object_get(c, "reason"));
        const char *m = json_string_value(json_object_get(c, "message"));

        if (r && strcmp(r, "ResourceVersionTooLarge") == 0)
            return true;
        if (reason && strcmp(reason, "Timeout") == 0 && m &&
            strcmp(m, "Too large resource version") == 0)
            return true;
    }
    return reason && strcmp(reason, "Timeout") == 0 && msg &&
           strstr(msg, "Too large resource version") != NULL;
}

/* One attempt. *code is 0 for a transport failure. */
static err_t attempt(struct rest *k, const char *method, const char *path, const char *body,
                     size_t blen, const char *ctype, struct xfer *x, long *code, bool stream)
{
    struct curl_slist *h;
    CURLcode cc;

    k->errbuf[0] = '\0';
    h = prepare(k, method, path, body, blen, ctype, x, stream);
    cc = curl_easy_perform(k->curl);
    curl_slist_free_all(h);
    *code = 0;
    if (cc == CURLE_OK || (cc == CURLE_WRITE_ERROR && x->stop && !x->bad_line && !x->long_line))
        curl_easy_getinfo(k->curl, CURLINFO_RESPONSE_CODE, code);
    else if (cc == CURLE_ABORTED_BY_CALLBACK && rest_gate_stopped(k->gate))
        return ERR_UNAVAIL;
    rest_stats_count(k->stats, method, (int)*code, false);
    if (*code == 0)
        return ERR_UPSTREAM;
    return *code < 300 ? ERR_OK : map_status(*code);
}

/* A retryable failure of one attempt: its message, the shared backoff. */
static void attempt_failed(struct rest *k, struct xfer *x, long code, struct error *e)
{
    if (code)
        status_error(e, ERR_UPSTREAM, x, code);
    else
        errorf(e, ERR_UPSTREAM, "%s", k->errbuf[0] ? k->errbuf : "connection failed");
    rest_gate_failed(k->gate, x->retry_after_ms, e->msg);
}

/* The answer of a finished request: JSON on success, else the Status
 * message, and the Status kept for rest_last_status. */
static err_t conclude(struct rest *k, struct xfer *x, err_t rc, long code, const char *what,
                      json_t **out, struct error *e)
{
    json_t *v;

    if (rc == ERR_OK && !out)
        return ERR_OK; /* the caller wants no answer: no tree is built */
    if (rc == ERR_OK) {
        v = x->len ? json_loadb(x->body, x->len, 0, NULL) : json_null();
        if (!v)
            return errorf(e, ERR_UPSTREAM, "answer to %s is not JSON", what);
        *out = v;
        return ERR_OK;
    }
    if (code >= 300)
        keep_status(k, x);
    if (rc != ERR_UPSTREAM && rc != ERR_UNAVAIL && code)
        return status_error(e, rc, x, code);
    if (rc == ERR_UNAVAIL)
        return errorf(e, rc, "shutting down (%s)", what);
    return rc; /* ERR_UPSTREAM: attempt_failed said why */
}

/* Attempts of one request until one is not a retryable failure, or
 * k->max_attempts have failed. *code is the last answer's HTTP status. */
static err_t attempts(struct rest *k, const char *method, const char *path, const char *text,
                      const char *ctype, struct xfer *x, long *code, struct error *e)
{
    bool reread = false;
    int tries = 0;
    err_t rc = ERR_UPSTREAM;

    while (tries < k->max_attempts) {
        if (!rest_gate_wait(k->gate))
            return ERR_UNAVAIL;
        refresh_token(k, false);
        x->len = 0;
        x->retry_after_ms = 0;
        rc = attempt(k, method, path, text, text ? strlen(text) : 0, ctype, x, code, false);
        if (*code == 401 && !reread && k->kc && k->kc->token_file) {
            reread = true; /* the token may have rotated: once more */
            refresh_token(k, true);
            continue;
        }
        if (rc != ERR_UPSTREAM) {
            if (rc != ERR_UNAVAIL)
                rest_gate_ok(k->gate);
            return rc;
        }
        attempt_failed(k, x, *code, e);
        if (++tries < k->max_attempts)
            rest_stats_count(k->stats, method, 0, true);
    }
    return rc;
}

err_t rest_do(struct rest *k, const char *method, const char *path, const json_t *body,
              const char *ctype, json_t **out, struct error *e)
{
    char *text = NULL, what[300];
    struct xfer x = {.gate = k->gate};
    struct error none;
    long code = 0;
    err_t rc;

    assert(method && path && path[0] == '/');
    if (!e)
        e = &none; /* the gate's log line still needs the message */
    e->code = ERR_OK;
    e->msg[0] = '\0';
    keep_status(k, NULL);
    if (body) {
        text = jsonx_dumps(body);
        if (!text)
            return errorf(e, ERR_NOMEM, "out of memory");
    }
    rc = attempts(k, method, path, text, ctype, &x, &code, e);
    k->code = code;
    snprintf(what, sizeof(what), "%s %.250s", method, path);
    rc = conclude(k, &x, rc, code, what, out, e);
    free(text);
    free(x.body);
    return rc;
}

long rest_last_code(const struct rest *k)
{
    return k->code;
}

/* How a stream that did not end well ended: 'rc' and 'code' from attempt(). */
static err_t stream_failed(struct rest *k, const char *path, struct xfer *x, err_t rc, long code,
                           struct error *e)
{
    if (x->long_line) {
        log_warn("dropping the stream %.300s: a line is longer than %u MiB", path,
                 STREAM_LINE_MAX >> 20);
        return errorf(e, ERR_UPSTREAM, "a line of the stream %s is longer than %u MiB", path,
                      STREAM_LINE_MAX >> 20);
    }
    if (x->bad_line)
        return errorf(e, ERR_UPSTREAM, "a line of the stream %s is not JSON", path);
    if (code < 300) {
        errorf(e, ERR_UPSTREAM, "%s", k->errbuf[0] ? k->errbuf : "stream broken");
        rest_gate_failed(k->gate, 0, e->msg);
        return ERR_UPSTREAM;
    }
    status_error(e, rc, x, code);
    keep_status(k, x);
    if (code == 401)
        refresh_token(k, true);
    /* A 504 "too large resource version" is the server answering, about
     * the resourceVersion asked for: no outage, the caller lists again. */
    if (rc == ERR_UPSTREAM && !rest_status_too_large(k->status))
        rest_gate_failed(k->gate, x->retry_after_ms, e->msg);
    return rc;
}

err_t rest_stream(struct rest *k, const char *path, rest_line_fn fn, void *ctx, struct error *e)
{
    struct xfer x = {.fn = fn, .ctx = ctx, .gate = k->gate};
    struct error none;
    long code = 0;
    err_t rc;

    assert(path && path[0] == '/');
    if (!e)
        e = &none; /* the gate's log line still needs the message */
    e->code = ERR_OK;
    e->msg[0] = '\0';
    keep_status(k, NULL);
    if (!rest_gate_wait(k->gate))
        return ERR_OK;
    refresh_token(k, false);
    rc = attempt(k, "GET", path, NULL, 0, NULL, &x, &code, true);
    if (rc == ERR_UNAVAIL || rest_gate_stopped(k->gate))
        rc = ERR_OK;
    else if (rc == ERR_OK && code == 200 && !x.long_line && !x.bad_line)
        rest_gate_ok(k->gate);
    else
        rc = stream_failed(k, path, &x, rc, code, e);
    free(x.body);
    return rc;
}

/* RFC 3986's unreserved characters: a query value keeps them as they are. */
static bool unreserved(unsigned char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' ||
           c == '.' || c == '_' || c == '~';
}

void rest_escape(const char *s, char *out, size_t cap)
{
    static const char hex[] = "0123456789ABCDEF";
    size_t n = 0;

    assert(s && out && cap > 0);
    for (; *s; s++) {
        unsigned char c = (unsigned char)*s;
        bool plain = unreserved(c);

        if (n + (plain ? 1 : 3) >= cap)
            break;
        if (plain) {
            out[n++] = (char)c;
        } else {
            out[n++] = '%';
            out[n++] = hex[c >> 4];
            out[n++] = hex[c & 15];
        }
    }
    out[n] = '\0';
}
