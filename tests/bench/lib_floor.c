/* SPDX-License-Identifier: Apache-2.0 */
/* lib_floor.c - the reference for podres-syncer's RSS (bench row 6d): a
 * program linked against the syncer's libraries (libcurl's GnuTLS build,
 * libmicrohttpd, jansson, libyaml) that does only what touches them at
 * start: libcurl initialised as the syncer does it (rest_global_init: libssh2
 * first, without its crypto) and one GET to the API server, a libmicrohttpd
 * daemon on a loopback port (the syncer's /metrics), one JSON document
 * parsed. It then prints "rss_kib=N anon_kib=N" and exits. With CAFILE, the
 * GET goes over TLS trusting that CA alone, as the syncer does (row 6e).
 * Usage: lib_floor URL [CAFILE] */
#include <curl/curl.h>
#include <dlfcn.h>
#include <jansson.h>
#include <microhttpd.h>
#include <stdio.h>
#include <string.h>
#include <yaml.h>

static size_t sink(char *p, size_t size, size_t n, void *ud)
{
    (void)p;
    (void)ud;
    return size * n;
}

static enum MHD_Result on_http(void *cls, struct MHD_Connection *c, const char *url,
                               const char *method, const char *version, const char *data,
                               size_t *size, void **con_cls)
{
    (void)cls, (void)c, (void)url, (void)method, (void)version, (void)data, (void)size;
    (void)con_cls;
    return MHD_NO;
}

static long status_kib(const char *key)
{
    char line[256];
    long v = -1;
    FILE *f = fopen("/proc/self/status", "r");

    while (f && fgets(line, sizeof(line), f))
        if (strncmp(line, key, strlen(key)) == 0)
            sscanf(line + strlen(key), "%ld", &v);
    if (f)
        fclose(f);
    return v;
}

int main(int argc, char **argv)
{
    struct MHD_Daemon *d;
    yaml_parser_t yp;
    json_t *j;
    CURL *c;
    long code = 0;
    int (*ssh2_init)(int);
    void *p;

    if (argc != 2 && argc != 3) {
        fprintf(stderr, "usage: lib_floor URL [CAFILE]\n");
        return 2;
    }
    p = dlsym(RTLD_DEFAULT, "libssh2_init"); /* as kube/rest.c rest_global_init */
    if (p) {
        memcpy(&ssh2_init, &p, sizeof(p));
        ssh2_init(1); /* LIBSSH2_INIT_NO_CRYPTO */
    }
    curl_global_init(CURL_GLOBAL_DEFAULT);
    c = curl_easy_init();
    curl_easy_setopt(c, CURLOPT_URL, argv[1]);
    if (argc == 3) { /* as kube/rest.c sets TLS up */
        curl_easy_setopt(c, CURLOPT_CAPATH, NULL);
        curl_easy_setopt(c, CURLOPT_CAINFO, argv[2]);
    }
    curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, sink);
    if (curl_easy_perform(c) == CURLE_OK)
        curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &code);
    d = MHD_start_daemon(MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_POLL, 0, NULL, NULL, on_http,
                         NULL, MHD_OPTION_END);
    j = json_loads("{\"kind\":\"DeviceBinding\",\"items\":[1,2,3]}", 0, NULL);
    yaml_parser_initialize(&yp);
    printf("rss_kib=%ld anon_kib=%ld http=%ld\n", status_kib("VmRSS:"), status_kib("RssAnon:"),
           code);
    yaml_parser_delete(&yp);
    json_decref(j);
    if (d)
        MHD_stop_daemon(d);
    curl_easy_cleanup(c);
    curl_global_cleanup();
    return code == 200 ? 0 : 1;
}
