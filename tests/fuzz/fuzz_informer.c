/* SPDX-License-Identifier: Apache-2.0 */
/* fuzz_informer.c - libFuzzer target for the syncer's handling of API
 * server JSON: each input line is a watch event (ADDED/MODIFIED/DELETED/
 * BOOKMARK/ERROR with any object, or a Status) fed to the informer's
 * on_event into a cache (and into a second one through the Pod informer's
 * dvb_pod_view); every object also goes through cache_key_of and
 * dvb_status (as if it were podresd's PodResources), and through
 * dra_slice_view and dra_inventory (as if it were a ResourceSlice, whole
 * and as the cache keeps it). Reaches the static on_event by including
 * informer.c. */
#include "../../kube/informer.c"
#include "../../syncer/dra.h"
#include "../../syncer/dvb.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* 'obj' as a ResourceSlice of the node: its view, and the DRA inventory of
 * it and of its view. */
static void one_slice(json_t *obj)
{
    json_t *view = dra_slice_view(obj);
    json_t *slices = json_pack("{s:O,s:O?}", "whole", obj, "view", view);

    json_decref(dra_inventory(slices));
    json_decref(slices);
    json_decref(view);
}

static void one_line(struct watch_state *ws, struct watch_state *slim, const char *line,
                     size_t n)
{
    json_t *ev = json_loadb(line, n, 0, NULL), *st;
    json_t *obj;
    char key[512];

    if (!ev)
        return;
    (void)on_event(ws, ev);
    (void)on_event(slim, ev);
    obj = json_object_get(ev, "object");
    (void)cache_key_of(obj ? obj : ev, key, sizeof(key));
    st = dvb_status(obj ? obj : ev, "uid-1", "node-1");
    json_decref(st);
    (void)dvb_has_devices(obj ? obj : ev);
    one_slice(obj ? obj : ev);
    json_decref(ev);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct informer inf = {.name = "fuzz", .path = "/x", .query = ""};
    struct informer pods = {.name = "pods", .path = "/x", .query = "", .slim = dvb_pod_view};
    struct watch_state ws = {.inf = &inf}, ws_pods = {.inf = &pods};
    const char *p = (const char *)data, *end = p + size, *nl;

    inf.cache = cache_new(NULL, NULL);
    pods.cache = cache_new(NULL, NULL);
    if (!inf.cache || !pods.cache) {
        cache_free(inf.cache);
        cache_free(pods.cache);
        return 0;
    }
    while (p < end) {
        nl = memchr(p, '\n', (size_t)(end - p));
        if (!nl)
            nl = end;
        one_line(&ws, &ws_pods, p, (size_t)(nl - p));
        p = nl + 1;
    }
    if (strlen(inf.rv) >= sizeof(inf.rv) || strlen(pods.rv) >= sizeof(pods.rv))
        abort();
    cache_free(inf.cache);
    cache_free(pods.cache);
    return 0;
}
