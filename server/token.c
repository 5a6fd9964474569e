/* SPDX-License-Identifier: Apache-2.0 */
/* token.c - the write token and its file: read again when the file
 * changes, the last good token kept while it is bad. */
#define LOG_MOD "token"
#include "../common/common.h"
#include "config.h"
#include "token.h"

#include <assert.h>
#include <pthread.h>
#include <strings.h>
#include <sys/stat.h>

struct token {
    pthread_mutex_t mu; /* guards every field below */
    char *path;         /* the file; new */
    char *value;        /* the last good token; new, never logged */
    struct stat seen;   /* the file at the last read, good or bad */
    bool seen_ok;       /* 'seen' holds a stat of the file */
    bool warned;        /* the file's bad state has been logged */
};

err_t token_open(const char *path, struct token **out)
{
    struct token *t = calloc(1, sizeof(*t));
    struct error e = {0};
    err_t rc = ERR_NOMEM;

    assert(path && out);
    if (!t)
        return ERR_NOMEM;
    pthread_mutex_init(&t->mu, NULL);
    t->path = strdup(path);
    if (!t->path)
        goto out;
    t->seen_ok = stat(path, &t->seen) == 0;
    rc = config_read_token(path, &t->value, &e);
    if (rc) {
        log_err("write token file '%s': %s", path, error_msg(&e));
        goto out;
    }
    *out = t;
    t = NULL;
out:
    token_free(t); /* NULL is a no-op */
    return rc;
}

void token_free(struct token *t)
{
    if (!t)
        return;
    pthread_mutex_destroy(&t->mu);
    free(t->path);
    free(t->value);
    free(t);
}

static bool same_file(const struct stat *a, const struct stat *b)
{
    return a->st_dev == b->st_dev && a->st_ino == b->st_ino && a->st_size == b->st_size &&
           a->st_mode == b->st_mode && a->st_mtim.tv_sec == b->st_mtim.tv_sec &&
           a->st_mtim.tv_nsec == b->st_mtim.tv_nsec && a->st_ctim.tv_sec == b->st_ctim.tv_sec &&
           a->st_ctim.tv_nsec == b->st_ctim.tv_nsec;
}

/* A bad state is logged once, until a good token is read again. */
static void warn_once(struct token *t, const char *why)
{
    if (t->warned)
        return;
    t->warned = true;
    log_warn("write token file '%s': %s; the last good token stays in force", t->path, why);
}

/* Read the file again when it changed since the last look. Under t->mu. */
static void refresh(struct token *t)
{
    struct stat sb;
    struct error e = {0};
    char why[512], *value = NULL;

    if (stat(t->path, &sb) != 0) {
        t->seen_ok = false;
        snprintf(why, sizeof(why), "%s", strerror(errno));
        warn_once(t, why);
        return;
    }
    if (t->seen_ok && same_file(&sb, &t->seen))
        return;
    t->seen = sb;
    t->seen_ok = true;
    if (config_read_token(t->path, &value, &e)) {
        warn_once(t, error_msg(&e));
        return;
    }
    if (strcmp(value, t->value) != 0)
        log_info("write token file '%s' changed: the new token is in force", t->path);
    else if (t->warned)
        log_info("write token file '%s' is good again", t->path);
    free(t->value);
    t->value = value;
    t->warned = false;
}

/* Constant time in the length of 'want'. */
static bool same_token(const char *want, const char *got)
{
    size_t i, n = strlen(want), m = strlen(got);
    unsigned char diff = (unsigned char)(n != m);

    for (i = 0; i < n; i++)
        diff |= (unsigned char)(want[i] ^ (i < m ? got[i] : 0));
    return diff == 0;
}

bool token_check(struct token *t, const char *auth)
{
    bool ok;

    if (!t || !auth || strncasecmp(auth, "Bearer ", 7) != 0)
        return false;
    pthread_mutex_lock(&t->mu);
    refresh(t);
    ok = same_token(t->value, auth + 7);
    pthread_mutex_unlock(&t->mu);
    return ok;
}
