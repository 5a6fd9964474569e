/* SPDX-License-Identifier: Apache-2.0 */
/* tls_test.c - who may call the extender, through extender/tls.h: the
 * files and names read, and the caller of a real TLS connection (a
 * libmicrohttpd server with the files, libcurl as the client) judged for
 * the right certificate, none, another CA's, a server certificate and a
 * name not allowed. The certificates come from
 * deploy/scheduler/podres-extender-certs (run from the source root). */
#include "../../../common/common.h"
#include "../../../extender/tls.h"
#include "../test.h"

#include <curl/curl.h>
#include <microhttpd.h>
#include <netinet/in.h>
#include <stdlib.h>

static char dir[64];

static void path(char *buf, size_t cap, const char *d, const char *f)
{
    snprintf(buf, cap, "%s/%s/%s", dir, d, f);
}

/* Two sets of certificates, a/ and b/ (another CA). */
static bool make_certs(void)
{
    char cmd[256];

    str_copy(dir, sizeof(dir), "/tmp/tls_test.XXXXXX");
    if (!mkdtemp(dir))
        return false;
    snprintf(cmd, sizeof(cmd),
             "sh deploy/scheduler/podres-extender-certs %s/a >/dev/null 2>&1 && "
             "sh deploy/scheduler/podres-extender-certs %s/b >/dev/null 2>&1",
             dir, dir);
    return system(cmd) == 0;
}

static void test_load(void)
{
    struct tls_conf c;
    struct error e = {0};
    char crt[128], key[128], ca[128];

    path(crt, sizeof(crt), "a", "server.crt");
    path(key, sizeof(key), "a", "server.key");
    path(ca, sizeof(ca), "a", "ca.crt");
    CHECK_EQ_INT(tls_load(&c, NULL, key, ca, "x", &e), ERR_INVAL);
    CHECK(strstr(error_msg(&e), "--tls-cert-file is required") != NULL);
    CHECK_EQ_INT(tls_load(&c, crt, key, "/nonexistent/ca.crt", "x", &e), ERR_IO);
    CHECK(strstr(error_msg(&e), "--client-ca-file") != NULL);
    CHECK_EQ_INT(tls_load(&c, crt, "/etc/hostname", ca, "x", &e), ERR_INVAL);
    CHECK(strstr(error_msg(&e), "not a PEM file") != NULL);
    CHECK_EQ_INT(tls_load(&c, crt, key, ca, ",,", &e), ERR_INVAL);
    CHECK(strstr(error_msg(&e), "--client-names") != NULL);
    CHECK(c.cert == NULL && c.names == NULL);
    CHECK_OK(tls_load(&c, crt, key, ca, ",podres-scheduler,,other", &e));
    CHECK(tls_name_allowed(&c, "podres-scheduler") && tls_name_allowed(&c, "other"));
    CHECK(!tls_name_allowed(&c, "") && !tls_name_allowed(&c, "podres") &&
          !tls_name_allowed(&c, NULL));
    CHECK(strstr(c.ca, "BEGIN CERTIFICATE") != NULL);
    tls_release(&c);
    tls_release(&c);
}

/* The server answers 200, 401 or 403 for what tls_check_caller said. */
static enum MHD_Result answer(void *cls, struct MHD_Connection *conn, const char *url,
                              const char *method, const char *version, const char *data,
                              size_t *size, void **ctx)
{
    static const unsigned codes[] = {200, 401, 403};
    const union MHD_ConnectionInfo *ci = MHD_get_connection_info(
        conn, MHD_CONNECTION_INFO_GNUTLS_SESSION);
    char cn[TLS_NAME_MAX];
    struct MHD_Response *r;
    enum tls_caller who;
    enum MHD_Result ret;

    (void)url, (void)method, (void)version, (void)data, (void)size, (void)ctx;
    who = tls_check_caller(cls, ci ? ci->tls_session : NULL, cn, sizeof(cn));
    r = MHD_create_response_from_buffer(strlen(cn), cn, MHD_RESPMEM_MUST_COPY);
    ret = MHD_queue_response(conn, codes[who], r);
    MHD_destroy_response(r);
    return ret;
}

/* GET / as the client of set 'set' with 'cert' ("" for none): the status. */
static long get(unsigned port, const char *set, const char *cert)
{
    char url[64], ca[128], crt[128], key[128], name[32];
    CURL *h = curl_easy_init();
    long code = 0;

    snprintf(url, sizeof(url), "https://127.0.0.1:%u/", port);
    path(ca, sizeof(ca), "a", "ca.crt");
    curl_easy_setopt(h, CURLOPT_URL, url);
    curl_easy_setopt(h, CURLOPT_CAINFO, ca);
    if (*cert) {
        snprintf(name, sizeof(name), "%s.crt", cert);
        path(crt, sizeof(crt), set, name);
        snprintf(name, sizeof(name), "%s.key", cert);
        path(key, sizeof(key), set, name);
        curl_easy_setopt(h, CURLOPT_SSLCERT, crt);
        curl_easy_setopt(h, CURLOPT_SSLKEY, key);
    }
    curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, fwrite);
    curl_easy_setopt(h, CURLOPT_WRITEDATA, stderr);
    if (curl_easy_perform(h) == CURLE_OK)
        curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &code);
    curl_easy_cleanup(h);
    return code;
}

static void test_callers(void)
{
    struct tls_conf c, other;
    struct error e = {0};
    char crt[128], key[128], ca[128];
    struct MHD_Daemon *d, *d2;
    unsigned port, port2;

    path(crt, sizeof(crt), "a", "server.crt");
    path(key, sizeof(key), "a", "server.key");
    path(ca, sizeof(ca), "a", "ca.crt");
    CHECK_OK(tls_load(&c, crt, key, ca, "podres-scheduler", &e));
    CHECK_OK(tls_load(&other, crt, key, ca, "someone-else", &e));
    d = MHD_start_daemon(MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_TLS, 0, NULL, NULL, answer, &c,
                         MHD_OPTION_HTTPS_MEM_CERT, c.cert, MHD_OPTION_HTTPS_MEM_KEY, c.key,
                         MHD_OPTION_HTTPS_MEM_TRUST, c.ca, MHD_OPTION_END);
    d2 = MHD_start_daemon(MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_TLS, 0, NULL, NULL, answer,
                          &other, MHD_OPTION_HTTPS_MEM_CERT, c.cert, MHD_OPTION_HTTPS_MEM_KEY,
                          c.key, MHD_OPTION_HTTPS_MEM_TRUST, c.ca, MHD_OPTION_END);
    CHECK(d != NULL && d2 != NULL);
    if (!d || !d2)
        return;
    port = MHD_get_daemon_info(d, MHD_DAEMON_INFO_BIND_PORT)->port;
    port2 = MHD_get_daemon_info(d2, MHD_DAEMON_INFO_BIND_PORT)->port;
    CHECK_EQ_INT(get(port, "a", "client"), 200);
    CHECK_EQ_INT(get(port, "a", ""), 401);       /* no certificate */
    CHECK_EQ_INT(get(port, "b", "client"), 401); /* another CA's */
    CHECK_EQ_INT(get(port, "a", "server"), 401); /* not for client authentication */
    CHECK_EQ_INT(get(port2, "a", "client"), 403);
    MHD_stop_daemon(d);
    MHD_stop_daemon(d2);
    tls_release(&c);
    tls_release(&other);
}

static void cleanup(void)
{
    char cmd[128];

    snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
    if (system(cmd) != 0)
        fprintf(stderr, "cannot remove %s\n", dir);
}

static void test_all(void)
{
    char cn[8] = "x";

    CHECK(make_certs());
    CHECK(tls_check_caller(NULL, NULL, cn, sizeof(cn)) == TLS_CALLER_NONE && cn[0] == '\0');
    curl_global_init(CURL_GLOBAL_DEFAULT);
    test_load();
    test_callers();
    curl_global_cleanup();
    cleanup();
}

TEST_MAIN(test_all)
