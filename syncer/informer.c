/* SPDX-License-Identifier: Apache-2.0 */
/* informer.c - list, watch, resume, relist. Failures are logged once by the
 * client's gate; the loop only waits and tries again. */
#define LOG_MOD "informer"
#include "../common/common.h"
#include "informer.h"

#define WATCH_TIMEOUT_S 240 /* the server ends a watch after this; we resume */

/* The part of 'obj' the cache keeps (new). */
static json_t *kept(const struct informer *inf, json_t *obj)
{
    return inf->slim ? inf->slim(obj) : json_incref(obj);
}

err_t informer_list(struct informer *inf)
{
    char path[1024], msg[512], key[512];
    json_t *list = NULL, *all, *item;
    const char *rv;
    size_t i;
    err_t rc;

    snprintf(path, sizeof(path), "%s?%s", inf->path, inf->query);
    rc = kube_do(inf->kube, "GET", path, NULL, NULL, &list, msg, sizeof(msg));
    if (rc) {
        if (rc != ERR_UNAVAIL)
            log_debug("cannot list %s: %s", inf->name, msg);
        return rc;
    }
    all = json_object();
    json_array_foreach(json_object_get(list, "items"), i, item) {
        if (cache_key_of(item, key, sizeof(key)))
            json_object_set_new(all, key, kept(inf, item));
    }
    rv = json_string_value(json_object_get(json_object_get(list, "metadata"), "resourceVersion"));
    snprintf(inf->rv, sizeof(inf->rv), "%s", rv ? rv : "");
    cache_replace(inf->cache, all);
    json_decref(all);
    json_decref(list);
    return ERR_OK;
}

struct watch_state {
    struct informer *inf; /* borrowed */
    bool gone;            /* an ERROR 410 arrived: relist */
};

static bool on_event(void *ctx, json_t *ev)
{
    struct watch_state *ws = ctx;
    const char *type = json_string_value(json_object_get(ev, "type"));
    json_t *obj = json_object_get(ev, "object");
    const char *rv = json_string_value(
        json_object_get(json_object_get(obj, "metadata"), "resourceVersion"));
    char key[512];

    if (!type || !obj)
        return false;
    if (strcmp(type, "ERROR") == 0) {
        ws->gone = json_integer_value(json_object_get(obj, "code")) == 410;
        return false;
    }
    if (rv)
        snprintf(ws->inf->rv, sizeof(ws->inf->rv), "%s", rv);
    if (strcmp(type, "BOOKMARK") == 0 || !cache_key_of(obj, key, sizeof(key)))
        return true;
    if (strcmp(type, "DELETED") == 0) {
        cache_del(ws->inf->cache, key);
    } else {
        json_t *keep = kept(ws->inf, obj);

        if (keep)
            cache_set(ws->inf->cache, key, keep, true);
        json_decref(keep);
    }
    return true;
}

static err_t watch_once(struct informer *inf)
{
    struct watch_state ws = {.inf = inf};
    char path[1200], msg[512];
    err_t rc;

    snprintf(path, sizeof(path),
             "%s?%s&watch=true&allowWatchBookmarks=true&resourceVersion=%s&timeoutSeconds=%d",
             inf->path, inf->query, inf->rv, WATCH_TIMEOUT_S);
    rc = kube_stream(inf->kube, path, on_event, &ws, msg, sizeof(msg));
    if (ws.gone || rc == ERR_GONE) {
        log_info("watch of %s expired; listing again", inf->name);
        inf->rv[0] = '\0';
        return ERR_OK;
    }
    if (rc)
        log_debug("watch of %s ended: %s", inf->name, msg);
    return rc;
}

void *informer_run(void *arg)
{
    struct informer *inf = arg;
    err_t rc;

    while (!kube_gate_stopped(inf->gate)) {
        rc = inf->rv[0] ? watch_once(inf) : informer_list(inf);
        if (rc && !kube_gate_sleep(inf->gate, 1000))
            break;
    }
    return NULL;
}
