/* SPDX-License-Identifier: Apache-2.0 */
/* fuzz_informer.c - libFuzzer target for the syncer's handling of API
 * server JSON: each input line is a watch event (ADDED/MODIFIED/DELETED/
 * BOOKMARK/ERROR with any object, or a Status) fed to the informer's
 * on_event into a cache; every object also goes through cache_key_of and
 * reconcile_status (as if it were podresd's PodResources). Reaches the
 * static on_event by including informer.c. */
#include "../../syncer/informer.c"
#include "../../syncer/reconcile.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void one_line(struct watch_state *ws, const char *line, size_t n)
{
    json_t *ev = json_loadb(line, n, 0, NULL), *st;
    json_t *obj;
    char key[512];

    if (!ev)
        return;
    (void)on_event(ws, ev);
    obj = json_object_get(ev, "object");
    (void)cache_key_of(obj ? obj : ev, key, sizeof(key));
    st = reconcile_status(obj ? obj : ev, "uid-1", "node-1");
    json_decref(st);
    (void)reconcile_has_devices(obj ? obj : ev);
    json_decref(ev);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct informer inf = {.name = "fuzz", .path = "/x", .query = ""};
    struct watch_state ws = {.inf = &inf};
    const char *p = (const char *)data, *end = p + size, *nl;

    inf.cache = cache_new(NULL, NULL);
    if (!inf.cache)
        return 0;
    while (p < end) {
        nl = memchr(p, '\n', (size_t)(end - p));
        if (!nl)
            nl = end;
        one_line(&ws, p, (size_t)(nl - p));
        p = nl + 1;
    }
    if (strlen(inf.rv) >= sizeof(inf.rv))
        abort();
    cache_free(inf.cache);
    return 0;
}
