/* SPDX-License-Identifier: Apache-2.0 */
/* passed.c - a JSON object uid -> {"at": ms, "nodes": {name: true}}. When
 * a note would go past the capacity, expired entries are swept, then the
 * oldest go: O(n) then, which a scheduler's pace (one filter a pod) makes
 * rare next to the notes. */
#define LOG_MOD "passed"
#include "../common/common.h"
#include "passed.h"

#include <assert.h>
#include <pthread.h>

struct passed {
    pthread_mutex_t mu; /* guards all below */
    json_t *pods;       /* uid -> {"at", "nodes"} */
    size_t cap;         /* most pods kept */
    uint64_t ttl_ms;    /* how long a filter's answer holds */
};

struct passed *passed_new(size_t cap, uint64_t ttl_ms)
{
    struct passed *p = calloc(1, sizeof(*p));

    assert(cap > 0);
    if (!p)
        return NULL;
    p->pods = json_object();
    if (!p->pods) {
        free(p);
        return NULL;
    }
    pthread_mutex_init(&p->mu, NULL);
    p->cap = cap;
    p->ttl_ms = ttl_ms;
    return p;
}

void passed_free(struct passed *p)
{
    if (!p)
        return;
    json_decref(p->pods);
    pthread_mutex_destroy(&p->mu);
    free(p);
}

static uint64_t entry_at(const json_t *ent)
{
    return (uint64_t)json_integer_value(json_object_get(ent, "at"));
}

/* Under the lock: drop expired entries, then the oldest until one more fits. */
static void make_room(struct passed *p, uint64_t now_ms)
{
    const char *uid, *oldest;
    json_t *ent;
    void *tmp;
    uint64_t at;

    json_object_foreach_safe(p->pods, tmp, uid, ent) {
        if (now_ms - entry_at(ent) > p->ttl_ms)
            json_object_del(p->pods, uid);
    }
    while (json_object_size(p->pods) >= p->cap) {
        oldest = NULL;
        at = UINT64_MAX;
        json_object_foreach(p->pods, uid, ent) {
            if (entry_at(ent) < at) {
                at = entry_at(ent);
                oldest = uid;
            }
        }
        if (!oldest)
            break;
        json_object_del(p->pods, oldest);
    }
}

err_t passed_note(struct passed *p, const char *uid, const json_t *nodes, uint64_t now_ms)
{
    json_t *set = json_object(), *ent;
    const json_t *n;
    size_t i;
    err_t rc = ERR_OK;

    if (!set)
        return ERR_NOMEM;
    json_array_foreach(nodes, i, n) {
        if (json_is_string(n) && json_object_set_new(set, json_string_value(n), json_true())) {
            json_decref(set);
            return ERR_NOMEM;
        }
    }
    ent = json_pack("{s:I,s:o}", "at", (json_int_t)now_ms, "nodes", set);
    if (!ent)
        return ERR_NOMEM;
    pthread_mutex_lock(&p->mu);
    if (!json_object_get(p->pods, uid) && json_object_size(p->pods) >= p->cap)
        make_room(p, now_ms);
    if (json_object_set_new(p->pods, uid, ent))
        rc = ERR_NOMEM;
    pthread_mutex_unlock(&p->mu);
    return rc;
}

bool passed_has(struct passed *p, const char *uid, const char *node, uint64_t now_ms)
{
    const json_t *ent;
    bool ok;

    pthread_mutex_lock(&p->mu);
    ent = json_object_get(p->pods, uid);
    ok = ent && now_ms - entry_at(ent) <= p->ttl_ms &&
         json_object_get(json_object_get(ent, "nodes"), node) != NULL;
    pthread_mutex_unlock(&p->mu);
    return ok;
}

size_t passed_count(struct passed *p)
{
    size_t n;

    pthread_mutex_lock(&p->mu);
    n = json_object_size(p->pods);
    pthread_mutex_unlock(&p->mu);
    return n;
}
