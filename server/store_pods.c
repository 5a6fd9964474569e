/* SPDX-License-Identifier: Apache-2.0 */
/* store_pods.c - the pod writes: bind (the hot write), allocate (devices
 * chosen here, from the reservation or by alloc.h) and release. Each public
 * function is one write; events are emitted in the order the objects
 * change. Device keys in the in-memory maps are "resource|id". */
#define LOG_MOD "store"
#include "../common/common.h"
#include "../common/jsonx.h"
#include "alloc.h"
#include "store_rows.h"
#include "store_view.h"

#include <inttypes.h>

/* Check one device of group 'r' for pod 'self' ("ns/name"), adding its NUMA
 * ids to 'numa' and its row to 'seen'. */
static err_t check_device(struct store *st, const char *self, const char *r, const char *id,
                          json_t *numa, struct devseen **seen, char *msg, size_t cap)
{
    struct devrow d;
    err_t rc = st_devrow_get(st, r, id, &d, seen);

    /* A removed device that another pod still holds is listed (Unhealthy,
     * with its holder): held, 409, as any held device; unknown once free.
     * (Only a row found has a holder.) */
    if (!rc && d.holder[0] && strcmp(d.holder, self) != 0) {
        snprintf(msg, cap, "device %s %s is held by pod %s (container %s)", r, id, d.holder,
                 d.container);
        rc = ERR_CONFLICT;
    } else if (!rc && (!d.found || (d.removed && strcmp(d.holder, self) != 0))) {
        snprintf(msg, cap, "unknown device %s %s", r, id);
        rc = ERR_UNPROCESSABLE;
    } else if (!rc && d.reserved[0] && strcmp(d.reserved, self) != 0) {
        snprintf(msg, cap, "device %s %s is reserved for pod %s", r, id, d.reserved);
        rc = ERR_CONFLICT;
    }
    if (!rc)
        st_numa_union(numa, d.numa);
    json_decref(d.numa);
    return rc;
}

/* Check the devices of group 'g' (of a container of pod 'self', "ns/name")
 * and append its stored form to 'groups': a new object sharing g's other
 * values, with its ids sorted and its topology added. */
static err_t resolve_group(struct store *st, const char *self, const json_t *g, json_t *groups,
                           struct devseen **seen, char *msg, size_t cap)
{
    const char *r = json_string_value(json_object_get(g, "resourceName"));
    json_t *ng = json_copy((json_t *)g), *numa = json_array(), *id;
    size_t k;
    err_t rc = ng && numa && json_array_append(groups, ng) == 0 ? ERR_OK : ERR_NOMEM;

    json_array_foreach(json_object_get(g, "deviceIds"), k, id) {
        if (rc)
            break;
        rc = check_device(st, self, r, json_string_value(id), numa, seen, msg, cap);
    }
    if (!rc &&
        (json_object_set_new(ng, "deviceIds", st_sorted_strings(json_object_get(g, "deviceIds"))) ||
         json_object_set_new(ng, "topology", st_topology(numa))))
        rc = ERR_NOMEM;
    json_decref(ng);
    json_decref(numa);
    return rc;
}

/* Check every device of 'containers' for this pod and build the stored form
 * (sorted ids, topology added). The input is not changed: the stored form
 * has new container and group objects that share its other values. The rows
 * read are put in 'seen' (the caller frees it, on failure too). */
static err_t resolve_containers(struct store *st, const char *ns, const char *name,
                                const json_t *containers, struct devseen **seen, char *msg,
                                size_t cap, json_t **out)
{
    json_t *res = json_array(), *c, *g, *nc, *groups, *devs;
    char self[512];
    size_t i, j;
    err_t rc = res ? ERR_OK : ERR_NOMEM;

    str_join(self, sizeof(self), ns, '/', name);
    json_array_foreach(containers, i, c) {
        if (rc)
            break;
        nc = json_copy((json_t *)c); /* shallow: the values are shared */
        if (!nc || json_array_append_new(res, nc) != 0) {
            rc = ERR_NOMEM;
            break;
        }
        devs = json_object_get(c, "devices");
        if (!devs)
            continue;
        groups = json_array();
        if (!groups || json_object_set_new(nc, "devices", groups) != 0) {
            rc = ERR_NOMEM;
            break;
        }
        json_array_foreach(devs, j, g) {
            rc = resolve_group(st, self, g, groups, seen, msg, cap);
            if (rc)
                break;
        }
    }
    if (rc) {
        json_decref(res);
        return rc;
    }
    *out = res;
    return ERR_OK;
}

/* Emit the pod's event from the values just written (no read back); with
 * 'keep', the object is appended to it too: the write's answer. */
static err_t emit_pod(struct store *st, const char *type, const char *ns, const char *name,
                      const char *uid, const char *containers, struct jsonw *keep)
{
    struct jsonw w = JSONW_INIT;
    err_t rc;

    st_pod_text(&w, ns, name, uid, containers, changelog_next(&st->log));
    rc = jsonw_done(&w);
    if (!rc)
        rc = changelog_emit_text(&st->log, type, "PodResources", ns, w.sb.buf, w.sb.len);
    if (!rc && keep) {
        jsonw_raw(keep, w.sb.buf, w.sb.len);
        rc = jsonw_done(keep);
    }
    jsonw_release(&w);
    return rc;
}

static err_t map_binding(struct store *st, const char *container, const char *resource,
                         const char *id, void *ctx)
{
    char key[KEY_MAX];

    (void)st;
    st_dev_key(key, resource, id);
    return json_object_set_new(ctx, key, json_string(container)) ? ERR_NOMEM : ERR_OK;
}

/* Map key -> container of the devices listed in 'containers' (a pod's
 * stored form). */
static err_t binding_map(const json_t *containers, json_t **out)
{
    json_t *map = json_object();
    err_t rc = map ? st_each_device(NULL, containers, map_binding, map) : ERR_NOMEM;

    if (rc) {
        json_decref(map);
        return rc;
    }
    *out = map;
    return ERR_OK;
}

/* Add 'key' ("resource|id") -> its bindings row's container to 'map' when
 * pod ns/name holds it. */
static err_t held_by(struct store *st, const char *ns, const char *name, const char *key,
                     json_t *map)
{
    char k[KEY_MAX];
    sqlite3_stmt *s = NULL;
    bool row = false;
    err_t rc;

    str_copy(k, sizeof(k), key);
    rc = db_prep(st->commit.db, &s,
                 "SELECT container FROM bindings WHERE resource=? AND device_id=? AND "
                 "namespace=? AND pod=?",
                 "tttt", k, st_key_split(k), ns, name);
    if (!rc)
        rc = db_step(st->commit.db, s, &row);
    if (!rc && row && json_object_set_new(map, key, json_string(db_text(s, 0))))
        rc = ERR_NOMEM;
    db_done(s);
    return rc;
}

/* Map key -> container of the devices bound to pod ns/name, whose row lists
 * its devices' keys in 'keys' ("resource|id" lines; NULL: not recorded) and
 * its stored containers in 'text'. A pod's bindings are always of devices
 * its stored containers list (a bind and the kubelet reconcile write both
 * together), so each of those is looked up by its key: the bindings table
 * has no index by pod (schema 3). Without the key lines SQLite walks the
 * JSON (half the instructions of jansson's json_loads here, and ~25 k more
 * than the lines); CROSS JOIN keeps the lookups last, by key. */
static err_t pod_bound(struct store *st, const char *ns, const char *name, const char *keys,
                       const char *text, json_t **out)
{
    char key[KEY_MAX];
    const char *at, *nl;
    size_t len;
    sqlite3_stmt *s = NULL;
    json_t *map = json_object();
    err_t rc = map ? ERR_OK : ERR_NOMEM;

    for (at = keys; !rc && at && *at; at += len + (at[len] == '\n')) {
        nl = strchr(at, '\n');
        len = nl ? (size_t)(nl - at) : strlen(at);
        if (len >= sizeof(key) || !memchr(at, '|', len)) {
            rc = db_err(NULL, SQLITE_CORRUPT, "read a pod's device keys");
            break;
        }
        memcpy(key, at, len);
        key[len] = '\0';
        rc = held_by(st, ns, name, key, map);
    }
    if (!rc && !keys)
        rc = db_prep(st->commit.db, &s,
                     "SELECT b.resource,b.device_id,b.container FROM json_each(?1) c CROSS "
                     "JOIN json_each(c.value,'$.devices') g CROSS JOIN json_each(g.value,"
                     "'$.deviceIds') i CROSS JOIN bindings b WHERE b.resource=json_extract("
                     "g.value,'$.resourceName') AND b.device_id=i.value AND b.namespace=?2 AND "
                     "b.pod=?3",
                     "ttt", text, ns, name);
    if (!rc)
        rc = st_map_rows(st, s, map);
    return st_map_out(rc, map, out);
}

/* The keys of 'map' as "resource|id" lines (pods.device_keys); new. */
static char *key_lines(const json_t *map)
{
    struct strbuf sb = STRBUF_INIT;
    const char *key;
    json_t *v;
    err_t rc = strbuf_add(&sb, "", 0);

    json_object_foreach((json_t *)map, key, v) {
        if (!rc && sb.len)
            rc = strbuf_add(&sb, "\n", 1);
        if (!rc)
            rc = strbuf_add(&sb, key, strlen(key));
    }
    if (rc) {
        strbuf_release(&sb);
        return NULL;
    }
    return strbuf_detach(&sb, NULL);
}

struct podrow {
    bool found;        /* the pod exists */
    char uid[256];     /* its uid */
    char *containers;  /* stored JSON; new */
    char *keys;        /* its devices' keys as "resource|id" lines, or NULL; new */
    char *request;     /* stored allocate request or NULL; new */
    uint64_t revision; /* its revision */
};

static err_t podrow_get(struct store *st, const char *ns, const char *name, struct podrow *p)
{
    sqlite3_stmt *s = NULL;
    bool row = false;
    err_t rc = db_prep(st->commit.db, &s,
                       "SELECT uid,containers,request,revision,device_keys FROM pods WHERE "
                       "namespace=? AND name=?",
                       "tt", ns, name);

    memset(p, 0, sizeof(*p));
    if (!rc)
        rc = db_step(st->commit.db, s, &row);
    if (!rc && row) {
        p->found = true;
        str_copy(p->uid, sizeof(p->uid), db_text(s, 0));
        p->containers = strdup(db_text(s, 1));
        if (sqlite3_column_type(s, 2) != SQLITE_NULL)
            p->request = strdup(db_text(s, 2));
        p->revision = (uint64_t)sqlite3_column_int64(s, 3);
        if (sqlite3_column_type(s, 4) != SQLITE_NULL)
            p->keys = strdup(db_text(s, 4));
        if (!p->containers || (sqlite3_column_type(s, 4) != SQLITE_NULL && !p->keys))
            rc = ERR_NOMEM;
    }
    db_done(s);
    return rc;
}

static void podrow_release(struct podrow *p)
{
    free(p->containers);
    free(p->keys);
    free(p->request);
    memset(p, 0, sizeof(*p));
}

/* The shared body of bind and allocate, inside the caller's transaction.
 * 'podtext' (if not NULL) gets the pod's state, new or unchanged. */
static err_t bind_pod(struct store *st, const char *ns, const char *name, const char *uid,
                      const json_t *containers, const char *request, char *msg, size_t cap,
                      bool *created, bool *changed, struct jsonw *podtext)
{
    struct podrow p;
    struct devseen *seen = NULL;
    json_t *stored = NULL, *before = NULL, *after = NULL;
    char *text = NULL, *keys = NULL;
    err_t rc = podrow_get(st, ns, name, &p);

    if (!rc)
        rc = resolve_containers(st, ns, name, containers, &seen, msg, cap, &stored);
    if (!rc)
        text = jsonx_dumps(stored);
    if (!rc && !text)
        rc = ERR_NOMEM;
    if (rc)
        goto out;
    *created = !p.found || strcmp(p.uid, uid) != 0;
    *changed = *created || strcmp(p.containers, text) != 0;
    if (!*changed) {
        if (podtext)
            st_pod_text(podtext, ns, name, p.uid, p.containers, p.revision);
        rc = podtext ? jsonw_done(podtext) : ERR_OK;
        goto out;
    }
    /* the bindings rows are written by st_emit_key_changes: those that changed */
    rc = p.found ? pod_bound(st, ns, name, p.keys, p.containers, &before) : ERR_OK;
    if (!rc && !before && !(before = json_object()))
        rc = ERR_NOMEM;
    if (!rc)
        rc = binding_map(stored, &after);
    if (!rc && !(keys = key_lines(after)))
        rc = ERR_NOMEM;
    if (!rc)
        rc = db_exec(st->commit.db,
                     "INSERT OR REPLACE INTO pods(namespace,name,uid,containers,request,revision,"
                     "device_keys) VALUES(?,?,?,?,?,?,?)",
                     "tttttut", ns, name, uid, text, request, changelog_next(&st->log), keys);
    if (!rc)
        rc = emit_pod(st, p.found ? "MODIFIED" : "ADDED", ns, name, uid, text, podtext);
    if (!rc)
        rc = st_emit_key_changes(st, before, after, p.found && strcmp(p.uid, uid) != 0,
                                 &(struct pod_key){ns, name, uid, seen});
    if (!rc)
        rc = st_resv_refresh(st, ns, name);
out:
    podrow_release(&p);
    st_devseen_free(seen);
    json_decref(stored);
    json_decref(before);
    json_decref(after);
    free(text);
    free(keys);
    return rc;
}

static err_t pod_result(struct store *st, const char *ns, const char *name, json_t **obj)
{
    return st_pod_json(st->commit.db, ns, name, obj);
}

struct bind_op {
    const char *ns, *name, *uid; /* the pod */
    const json_t *containers;    /* validated */
    char *msg;                   /* why it failed, 'cap' bytes */
    size_t cap;
    bool created, changed; /* results */
    struct jsonw doc;      /* the answer, but for its revision */
};

static err_t bind_run(struct store *st, void *ctx)
{
    struct bind_op *b = ctx;
    struct jsonw pod = JSONW_INIT;
    err_t rc = bind_pod(st, b->ns, b->name, b->uid, b->containers, NULL, b->msg, b->cap,
                        &b->created, &b->changed, &pod);

    /* The answer is written before the COMMIT, with room for the revision
     * it gets after: once committed, nothing may fail. */
    if (!rc) {
        jsonw_lit(&b->doc, "{\"podResources\":");
        jsonw_raw(&b->doc, pod.sb.buf, pod.sb.len);
        jsonw_lit(&b->doc, ",\"revision\":");
        jsonw_reserve(&b->doc, 24); /* 20 digits and "}" */
        rc = jsonw_done(&b->doc);
    }
    jsonw_release(&pod);
    if (rc)
        jsonw_release(&b->doc);
    return rc;
}

err_t store_pod_bind(struct store *st, const char *ns, const char *name, const char *uid,
                     const json_t *containers, char *msg, size_t cap, char **out, size_t *len,
                     bool *created, bool *changed)
{
    struct bind_op b = {ns, name, uid, containers, msg, cap, false, false, JSONW_INIT};
    err_t rc = st_write(st, bind_run, &b);

    if (rc) {
        jsonw_release(&b.doc);
        return rc;
    }
    *created = b.created;
    *changed = b.changed;
    jsonw_u64(&b.doc, store_revision(st));
    jsonw_lit(&b.doc, "}");
    *out = jsonw_detach(&b.doc, len);
    return ERR_OK;
}

/* Candidates of 'resource' for pod ns/name, minus 'taken' (keys). */
static err_t candidates(struct store *st, const char *ns, const char *name, const char *resource,
                        const json_t *taken, struct alloc_dev **devs, size_t *n, json_t **keep)
{
    sqlite3_stmt *s = NULL;
    json_t *ids = json_array(), *numa;
    char key[KEY_MAX];
    bool row;
    err_t rc = db_prep(
        st->commit.db, &s,
        "SELECT d.id,d.numa FROM devices d WHERE d.resource=?1 AND d.health='Healthy' AND "
        "d.removed=0 AND NOT EXISTS (SELECT 1 FROM bindings b WHERE b.resource=d.resource AND "
        "b.device_id=d.id AND b.pod<>'' AND NOT (b.namespace=?2 AND b.pod=?3)) AND NOT EXISTS "
        "(SELECT 1 FROM reserved r WHERE r.resource=d.resource AND r.device_id=d.id AND NOT "
        "(r.namespace=?2 AND r.pod=?3)) ORDER BY d.id",
        "ttt", resource, ns, name);

    while (!rc) {
        rc = db_step(st->commit.db, s, &row);
        if (rc || !row)
            break;
        st_dev_key(key, resource, db_text(s, 0));
        if (json_object_get(taken, key))
            continue;
        numa = db_json(s, 1);
        json_array_append_new(ids, json_pack("[s,I]", db_text(s, 0),
                                             json_array_size(numa)
                                                 ? json_integer_value(json_array_get(numa, 0))
                                                 : (json_int_t)ALLOC_NO_NUMA));
        json_decref(numa);
    }
    db_done(s);
    *n = json_array_size(ids);
    *devs = calloc(*n ? *n : 1, sizeof(**devs));
    if (!rc && !*devs)
        rc = ERR_NOMEM;
    for (size_t i = 0; !rc && i < *n; i++) {
        json_t *e = json_array_get(ids, i);

        (*devs)[i].id = json_string_value(json_array_get(e, 0));
        (*devs)[i].numa = (int)json_integer_value(json_array_get(e, 1));
    }
    *keep = ids; /* owns the id strings */
    return rc;
}

/* Whether any device of 'resource' is registered (not removed). */
static err_t resource_known(struct store *st, const char *resource, bool *known)
{
    sqlite3_stmt *s = NULL;
    err_t rc = db_prep(st->commit.db, &s,
                       "SELECT 1 FROM devices WHERE resource=?1 AND removed=0 LIMIT 1", "t",
                       resource);

    if (!rc)
        rc = db_step(st->commit.db, s, known);
    db_done(s);
    return rc;
}

/* Why 'want' devices of 'resource' cannot be had: a resource the node has
 * no device of is not there at all (ERR_NOTFOUND: a typo, or the wrong
 * node), else there are too few free (ERR_CONFLICT, with the counts). */
static err_t shortage(struct store *st, const char *resource, const char *container, size_t want,
                      size_t n, char *msg, size_t cap)
{
    bool known = true;
    err_t rc = n ? ERR_OK : resource_known(st, resource, &known);

    if (rc)
        return rc;
    if (!known) {
        snprintf(msg, cap,
                 "no device of resource \"%s\" is registered on this node (container %s "
                 "requested %zu)",
                 resource, container, want);
        return ERR_NOTFOUND;
    }
    snprintf(msg, cap, "insufficient %s for container %s: requested %zu, available %zu", resource,
             container, want, n);
    return ERR_CONFLICT;
}

/* Choose 'want' devices of 'resource' into a new ContainerDevices. */
static err_t choose(struct store *st, const char *ns, const char *name, const char *container,
                    const char *resource, size_t want, json_t *taken, char *msg, size_t cap,
                    json_t **group)
{
    struct alloc_dev *devs = NULL;
    size_t n = 0, i, *picked = calloc(want ? want : 1, sizeof(size_t));
    json_t *keep = NULL, *ids = json_array();
    char key[KEY_MAX];
    err_t rc = picked && ids ? ERR_OK : ERR_NOMEM;

    if (!rc)
        rc = candidates(st, ns, name, resource, taken, &devs, &n, &keep);
    if (!rc)
        rc = alloc_choose(devs, n, want, picked);
    if (rc == ERR_CONFLICT)
        rc = shortage(st, resource, container, want, n, msg, cap);
    for (i = 0; !rc && i < want; i++) {
        json_array_append_new(ids, json_string(devs[picked[i]].id));
        st_dev_key(key, resource, devs[picked[i]].id);
        json_object_set_new(taken, key, json_true());
    }
    if (!rc) {
        *group = json_pack("{s:s,s:O}", "resourceName", resource, "deviceIds", ids);
        if (!*group)
            rc = ERR_NOMEM;
    }
    free(devs);
    free(picked);
    json_decref(keep);
    json_decref(ids);
    return rc;
}

/* Containers for an allocate request, from the reservation or by choice. */
static err_t plan(struct store *st, const char *ns, const char *name, const json_t *request,
                  char *msg, size_t cap, json_t **out)
{
    json_t *resv = NULL, *res = json_array(), *taken = json_object(), *c, *g = NULL, *devs, *v;
    const char *rname;
    size_t i;
    err_t rc = st_reservation_json(st->commit.db, ns, name, &resv);

    if (rc == ERR_OK) {
        json_array_foreach(json_object_get(resv, "containers"), i, c) {
            json_array_append_new(
                res, json_pack("{s:O,s:O,s:[],s:[]}", "name", json_object_get(c, "name"), "devices",
                               json_object_get(c, "devices"), "cpuIds", "memory"));
        }
        goto out;
    }
    if (rc != ERR_NOTFOUND)
        goto out;
    rc = ERR_OK;
    json_array_foreach(request, i, c) {
        devs = json_array();
        json_object_foreach(json_object_get(c, "requests"), rname, v) {
            if (rc || json_integer_value(v) == 0)
                continue;
            rc = choose(st, ns, name, json_string_value(json_object_get(c, "name")), rname,
                        (size_t)json_integer_value(v), taken, msg, cap, &g);
            if (!rc)
                json_array_append_new(devs, g);
        }
        json_array_append_new(res,
                              json_pack("{s:O,s:o,s:[],s:[]}", "name", json_object_get(c, "name"),
                                        "devices", devs, "cpuIds", "memory"));
    }
out:
    json_decref(resv);
    json_decref(taken);
    if (rc) {
        json_decref(res);
        return rc;
    }
    *out = res;
    return ERR_OK;
}

/* A pod write run by the combiner (st_write) whose answer is {key: obj}. */
struct pod_op {
    const char *ns, *name, *uid; /* the pod */
    uint64_t rev;                /* release: its revision as a precondition, or 0 */
    const json_t *request;       /* allocate: the validated request */
    char *req;                   /* allocate: its canonical text */
    char *msg;                   /* why it failed, 'cap' bytes */
    size_t cap;
    bool created, changed; /* allocate's results */
    json_t *obj;           /* the pod: the answer */
};

/* The answer {"podResources": obj, "revision": N} once committed. */
static err_t pod_answer(struct store *st, err_t rc, struct pod_op *o, json_t **out)
{
    if (rc) {
        json_decref(o->obj);
        return rc;
    }
    *out = st_wrap("podResources", o->obj, store_revision(st));
    return *out ? ERR_OK : ERR_NOMEM;
}

/* An allocate whose reservation names a device that is not registered (or
 * removed): the request is fine, the reservation cannot be used now, as
 * when devices are short: 409. (The allocator picks registered devices
 * only; a reservation is used as written.) */
static err_t resv_unusable(struct pod_op *o)
{
    char why[512];

    str_copy(why, sizeof(why), o->msg);
    snprintf(o->msg, o->cap, "the reservation of pod %s/%s cannot be used: %s", o->ns, o->name,
             why);
    return ERR_CONFLICT;
}

/* Bind the devices plan() chose; a reserved device that is not there is
 * the reservation's fault, not the request's. */
static err_t bind_planned(struct store *st, struct pod_op *o, const json_t *containers,
                          struct jsonw *pod)
{
    err_t rc = bind_pod(st, o->ns, o->name, o->uid, containers, o->req, o->msg, o->cap, &o->created,
                        &o->changed, pod);

    return rc == ERR_UNPROCESSABLE ? resv_unusable(o) : rc;
}

static err_t allocate_run(struct store *st, void *ctx)
{
    struct pod_op *o = ctx;
    struct podrow p = {0};
    struct jsonw pod = JSONW_INIT;
    json_t *containers = NULL;
    err_t rc = podrow_get(st, o->ns, o->name, &p);

    o->obj = NULL;
    if (!rc && p.found && strcmp(p.uid, o->uid) == 0) {
        o->created = false;
        o->changed = false;
        if (!p.request || strcmp(p.request, o->req) != 0) {
            snprintf(o->msg, o->cap, "pod %s/%s (uid %s) is already bound %s; release it first",
                     o->ns, o->name, o->uid, p.request ? "with a different request" : "by a bind");
            rc = ERR_CONFLICT;
        }
        goto out;
    }
    if (!rc)
        rc = plan(st, o->ns, o->name, o->request, o->msg, o->cap, &containers);
    if (!rc)
        rc = bind_planned(st, o, containers, &pod);
    if (!rc && pod.sb.len) {
        o->obj = json_loadb(pod.sb.buf, pod.sb.len, 0, NULL);
        rc = o->obj ? ERR_OK : ERR_NOMEM;
    }
out:
    if (!rc && !o->obj)
        rc = pod_result(st, o->ns, o->name, &o->obj);
    jsonw_release(&pod);
    podrow_release(&p);
    json_decref(containers);
    if (rc) {
        json_decref(o->obj);
        o->obj = NULL;
    }
    return rc;
}

err_t store_pod_allocate(struct store *st, const char *ns, const char *name, const char *uid,
                         const json_t *request, char *msg, size_t cap, json_t **out, bool *created,
                         bool *changed)
{
    struct pod_op o = {
        .ns = ns, .name = name, .uid = uid, .request = request, .msg = msg, .cap = cap};
    err_t rc;

    o.req = jsonx_dumps(request);
    if (!o.req)
        return ERR_NOMEM;
    rc = st_write(st, allocate_run, &o);
    free(o.req);
    if (!rc) {
        *created = o.created;
        *changed = o.changed;
    }
    return pod_answer(st, rc, &o, out);
}

/* The pod a release names ('p'): there, and with the uid it gives, if any. */
static err_t release_check(struct pod_op *o, const struct podrow *p)
{
    if (!p->found) {
        snprintf(o->msg, o->cap, "pod %s/%s not found", o->ns, o->name);
        return ERR_NOTFOUND;
    }
    if (o->uid && strcmp(o->uid, p->uid) != 0) {
        snprintf(o->msg, o->cap, "pod %s/%s has uid \"%s\", not \"%s\"", o->ns, o->name, p->uid,
                 o->uid);
        return ERR_CONFLICT;
    }
    if (o->rev && o->rev != p->revision) {
        snprintf(o->msg, o->cap,
                 "pod %s/%s has revision %" PRIu64 ", not %" PRIu64 " (the precondition's)", o->ns,
                 o->name, p->revision, o->rev);
        return ERR_CONFLICT;
    }
    return ERR_OK;
}

static err_t release_run(struct store *st, void *ctx)
{
    struct pod_op *o = ctx;
    struct podrow p;
    json_t *before = NULL, *none = json_object();
    err_t rc = none ? podrow_get(st, o->ns, o->name, &p) : ERR_NOMEM;

    o->obj = NULL;
    if (!rc)
        rc = release_check(o, &p);
    if (!rc)
        rc = pod_bound(st, o->ns, o->name, p.keys, p.containers, &before);
    if (!rc)
        rc = st_pod_json(st->commit.db, o->ns, o->name, &o->obj);
    if (!rc &&
        json_object_set_new(o->obj, "revision", json_integer((json_int_t)changelog_next(&st->log))))
        rc = ERR_NOMEM;
    if (!rc)
        rc = changelog_emit(&st->log, "DELETED", "PodResources", o->ns, o->obj);
    if (!rc)
        rc = db_exec(st->commit.db, "DELETE FROM pods WHERE namespace=? AND name=?", "tt", o->ns,
                     o->name);
    if (!rc)
        rc = st_emit_key_changes(st, before, none, false, /* no 'after': no uid */
                                 &(struct pod_key){o->ns, o->name, NULL, NULL});
    if (!rc)
        rc = st_resv_refresh(st, o->ns, o->name);
    if (none)
        podrow_release(&p);
    json_decref(before);
    json_decref(none);
    if (rc) {
        json_decref(o->obj);
        o->obj = NULL;
    }
    return rc;
}

err_t store_pod_release(struct store *st, const char *ns, const char *name, const char *uid,
                        uint64_t rev, char *msg, size_t cap, json_t **out)
{
    struct pod_op o = {.ns = ns, .name = name, .uid = uid, .rev = rev, .msg = msg, .cap = cap};

    return pod_answer(st, st_write(st, release_run, &o), &o, out);
}
