/* SPDX-License-Identifier: Apache-2.0 */
/* curlfn.h - libcurl, loaded at run time. Only the kubelet source needs
 * libcurl; linked in, libcurl and what it pulls (OpenSSL, Kerberos, LDAP,
 * SSH, ...) cost every podresd about 3.3 MiB of resident memory whether the
 * source is used or not. So podresd does not link it: the first
 * curlfn_load() dlopen()s libcurl.so.4 and fills 'curlfn'. Use the types of
 * <curl/curl.h>, call through curlfn. */
#ifndef PODRES_CURLFN_H
#define PODRES_CURLFN_H
#include <curl/curl.h>
#include <stddef.h>

#include "../common/err.h"

struct curlfn {
    CURLcode (*global_init)(long flags);
    void (*global_cleanup)(void);
    CURL *(*easy_init)(void);
    void (*easy_cleanup)(CURL *h);
    void (*easy_reset)(CURL *h);
    CURLcode (*easy_setopt)(CURL *h, CURLoption opt, ...);
    CURLcode (*easy_getinfo)(CURL *h, CURLINFO info, ...);
    CURLcode (*easy_perform)(CURL *h);
    const char *(*easy_strerror)(CURLcode e);
    struct curl_slist *(*slist_append)(struct curl_slist *l, const char *s);
    void (*slist_free_all)(struct curl_slist *l);
};

/* Filled by curlfn_load(); all NULL before. */
extern struct curlfn curlfn;

/* Load libcurl and run curl_global_init once (thread-safe; later calls
 * return the first result). ERR_UNAVAIL when the library or a symbol is
 * missing, with the reason in 'e' (may be NULL). */
err_t curlfn_load(struct error *e) WARN_UNUSED;
/* curl_global_cleanup() if loaded; the library stays mapped. */
void curlfn_cleanup(void);

#endif
