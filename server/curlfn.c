/* SPDX-License-Identifier: Apache-2.0 */
/* curlfn.c - libcurl through dlopen(); see curlfn.h. */
#include "../common/common.h"
#include "curlfn.h"

#include <dlfcn.h>
#include <pthread.h>

#define CURL_SONAME "libcurl.so.4"

struct curlfn curlfn;

static pthread_once_t once = PTHREAD_ONCE_INIT;
static err_t load_rc;
static char load_msg[256];

/* Assign a dlsym() result to a function pointer without a cast from an
 * object pointer (ISO C does not define one). */
static int sym(void *lib, const char *name, void *fnptr)
{
    void *p = dlsym(lib, name);

    if (!p) {
        snprintf(load_msg, sizeof(load_msg), "%s has no %s", CURL_SONAME, name);
        return -1;
    }
    memcpy(fnptr, &p, sizeof(p));
    return 0;
}

static void load(void)
{
    struct curlfn f;
    void *lib = dlopen(CURL_SONAME, RTLD_NOW | RTLD_LOCAL);

    memset(&f, 0, sizeof(f));
    load_rc = ERR_UNAVAIL;
    if (!lib) {
        snprintf(load_msg, sizeof(load_msg), "cannot load %s: %s", CURL_SONAME, dlerror());
        return;
    }
    if (sym(lib, "curl_global_init", &f.global_init) ||
        sym(lib, "curl_global_cleanup", &f.global_cleanup) ||
        sym(lib, "curl_easy_init", &f.easy_init) ||
        sym(lib, "curl_easy_cleanup", &f.easy_cleanup) ||
        sym(lib, "curl_easy_reset", &f.easy_reset) ||
        sym(lib, "curl_easy_setopt", &f.easy_setopt) ||
        sym(lib, "curl_easy_getinfo", &f.easy_getinfo) ||
        sym(lib, "curl_easy_perform", &f.easy_perform) ||
        sym(lib, "curl_easy_strerror", &f.easy_strerror) ||
        sym(lib, "curl_slist_append", &f.slist_append) ||
        sym(lib, "curl_slist_free_all", &f.slist_free_all))
        return; /* the library stays loaded; nothing else uses it */
    if (f.global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK) {
        snprintf(load_msg, sizeof(load_msg), "cannot initialise libcurl");
        return;
    }
    curlfn = f;
    load_rc = ERR_OK;
}

err_t curlfn_load(struct error *e)
{
    pthread_once(&once, load);
    if (load_rc)
        return errorf(e, load_rc, "%s", load_msg);
    return ERR_OK;
}

void curlfn_cleanup(void)
{
    if (curlfn.global_cleanup)
        curlfn.global_cleanup();
}
