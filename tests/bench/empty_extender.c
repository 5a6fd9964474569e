/* SPDX-License-Identifier: Apache-2.0 */
/* empty_extender.c - the reference of the extender bench: an extender that
 * does no work. libmicrohttpd and jansson as podres-extender uses them:
 * it parses the ExtenderArgs and answers every NodeName as passing, over
 * HTTPS with a client certificate asked for, as podres-extender serves.
 * Usage: empty_extender PORT CERT KEY CA */
#define _GNU_SOURCE 1
#include <jansson.h>
#include <microhttpd.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

struct up {
    char *buf;
    size_t len;
};

static enum MHD_Result on_http(void *cls, struct MHD_Connection *conn, const char *url,
                               const char *method, const char *version, const char *data,
                               size_t *size, void **con_cls)
{
    struct up *u = *con_cls;
    json_t *args, *ans;
    struct MHD_Response *r;
    enum MHD_Result ret;
    char *out;

    (void)cls, (void)url, (void)method, (void)version;
    if (!u) {
        *con_cls = calloc(1, sizeof(*u));
        return *con_cls ? MHD_YES : MHD_NO;
    }
    if (*size) {
        u->buf = realloc(u->buf, u->len + *size);
        memcpy(u->buf + u->len, data, *size);
        u->len += *size;
        *size = 0;
        return MHD_YES;
    }
    args = json_loadb(u->buf ? u->buf : "", u->len, 0, NULL);
    ans = json_pack("{s:O?,s:{},s:s}", "NodeNames", json_object_get(args, "NodeNames"),
                    "FailedNodes", "Error", "");
    out = json_dumps(ans, JSON_COMPACT);
    json_decref(args);
    json_decref(ans);
    r = MHD_create_response_from_buffer(strlen(out), out, MHD_RESPMEM_MUST_FREE);
    MHD_add_response_header(r, "Content-Type", "application/json");
    ret = MHD_queue_response(conn, 200, r);
    MHD_destroy_response(r);
    return ret;
}

static void done(void *cls, struct MHD_Connection *c, void **con_cls,
                 enum MHD_RequestTerminationCode t)
{
    struct up *u = *con_cls;

    (void)cls, (void)c, (void)t;
    if (u)
        free(u->buf);
    free(u);
    *con_cls = NULL;
}

/* All of file 'path', NUL-terminated (new), or NULL. */
static char *slurp(const char *path)
{
    FILE *f = fopen(path, "rb");
    char *b = f ? calloc(1, 1 << 20) : NULL;

    if (b && fread(b, 1, (1 << 20) - 1, f) == 0) {
        free(b);
        b = NULL;
    }
    if (f)
        fclose(f);
    return b;
}

int main(int argc, char **argv)
{
    struct MHD_Daemon *d;
    char *cert, *key, *ca;
    sigset_t s;
    int sig;

    if (argc != 5)
        return 2;
    cert = slurp(argv[2]);
    key = slurp(argv[3]);
    ca = slurp(argv[4]);
    if (!cert || !key || !ca)
        return 1;
    d = MHD_start_daemon(MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_THREAD_PER_CONNECTION |
                             MHD_USE_POLL | MHD_USE_TLS,
                         (unsigned short)atoi(argv[1]), NULL, NULL, on_http, NULL,
                         MHD_OPTION_NOTIFY_COMPLETED, done, NULL, MHD_OPTION_HTTPS_MEM_CERT, cert,
                         MHD_OPTION_HTTPS_MEM_KEY, key, MHD_OPTION_HTTPS_MEM_TRUST, ca,
                         MHD_OPTION_END);
    if (!d)
        return 1;
    sigemptyset(&s);
    sigaddset(&s, SIGTERM);
    sigaddset(&s, SIGINT);
    sigprocmask(SIG_BLOCK, &s, NULL);
    sigwait(&s, &sig);
    MHD_stop_daemon(d);
    free(cert);
    free(key);
    free(ca);
    return 0;
}
