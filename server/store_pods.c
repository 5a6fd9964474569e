/* SPDX-License-Identifier: Apache-2.0 */
/* store_pods.c - the pod writes: bind (the hot write), allocate (devices
 * taken from the pod's reservation, or chosen by alloc.h among the free
 * ones) and release. Each public function is one write; events are emitted
 * in the order the objects change. Device keys in the in-memory maps are
 * "resource|id". */
#define LOG_MOD "store"
#include "../common/common.h"
#include "../common/jsonx.h"
#include "alloc.h"
#include "store_rows.h"
#include "store_view.h"

#include <assert.h>
#include <inttypes.h>

#define POD_REF_MAX 512 /* "ns/name" of a pod */

/* ---- checking and storing a bind's containers ---- */

/* Check one device of resource 'r' for pod 'self' ("ns/name"), adding its
 * NUMA ids to 'numa' and its row to 'seen'. */
static err_t check_device(struct store *st, const char *self, const char *r, const char *id,
                          json_t *numa, struct devseen **seen, struct error *e)
{
    struct devrow d;
    err_t rc = st_devrow_get(st, r, id, &d, seen);

    if (rc)
        goto out;
    /* A removed device that another pod still holds is listed (Unhealthy,
     * with its holder): held, 409, as any held device; unknown once free.
     * (Only a row found has a holder.) */
    if (d.holder[0] && strcmp(d.holder, self) != 0)
        rc = errorf(e, ERR_CONFLICT, "device %s %s is held by pod %s (container %s)", r, id,
                    d.holder, d.container);
    else if (!d.found || (d.removed && strcmp(d.holder, self) != 0))
        rc = errorf(e, ERR_UNPROCESSABLE, "unknown device %s %s", r, id);
    else if (d.reserved[0] && strcmp(d.reserved, self) != 0)
        rc = errorf(e, ERR_CONFLICT, "device %s %s is reserved for pod %s", r, id, d.reserved);
    else
        st_numa_union(numa, d.numa);
out:
    json_decref(d.numa);
    return rc;
}

/* Check the devices of group 'g' (of a container of pod 'self', "ns/name")
 * and append its stored form to 'groups': a new object sharing g's other
 * values, with its ids sorted and its topology added. */
static err_t resolve_group(struct store *st, const char *self, const json_t *g, json_t *groups,
                           struct devseen **seen, struct error *e)
{
    const char *r = json_string_value(json_object_get(g, "resourceName"));
    const json_t *ids = json_object_get(g, "deviceIds");
    json_t *ng = json_copy((json_t *)g), *numa = json_array(), *id;
    size_t k;
    err_t rc = ERR_NOMEM;

    if (!ng || !numa || json_array_append(groups, ng) != 0)
        goto out;
    json_array_foreach(ids, k, id) {
        rc = check_device(st, self, r, json_string_value(id), numa, seen, e);
        if (rc)
            goto out;
    }
    rc = ERR_NOMEM;
    if (json_object_set_new(ng, "deviceIds", jsonx_sorted_strings(ids, false, NULL)) ||
        json_object_set_new(ng, "topology", st_topology(numa)))
        goto out;
    rc = ERR_OK;
out:
    json_decref(ng);
    json_decref(numa);
    return rc;
}

/* Append the stored form of container 'c' of pod 'self' to 'res': a shallow
 * copy (the values are shared) whose device groups are resolve_group()'s. */
static err_t resolve_container(struct store *st, const char *self, const json_t *c, json_t *res,
                               struct devseen **seen, struct error *e)
{
    const json_t *devs = json_object_get(c, "devices");
    json_t *nc = json_copy((json_t *)c), *groups, *g;
    size_t j;
    err_t rc;

    if (!nc || json_array_append_new(res, nc) != 0)
        return ERR_NOMEM;
    if (!devs)
        return ERR_OK;
    groups = json_array();
    if (!groups || json_object_set_new(nc, "devices", groups) != 0)
        return ERR_NOMEM;
    json_array_foreach(devs, j, g) {
        rc = resolve_group(st, self, g, groups, seen, e);
        if (rc)
            return rc;
    }
    return ERR_OK;
}

/* Check every device of 'containers' for this pod and build the stored form
 * (sorted ids, topology added). The input is not changed: the stored form
 * has new container and group objects that share its other values. The rows
 * read are put in 'seen' (the caller frees it, on failure too). On ERR_OK
 * *out is new. */
static err_t resolve_containers(struct store *st, const struct store_pod *pod,
                                const json_t *containers, struct devseen **seen, struct error *e,
                                json_t **out)
{
    json_t *res = json_array(), *c;
    char self[POD_REF_MAX];
    size_t i;
    err_t rc;

    if (!res)
        return ERR_NOMEM;
    str_join(self, sizeof(self), pod->ns, '/', pod->name);
    json_array_foreach(containers, i, c) {
        rc = resolve_container(st, self, c, res, seen, e);
        if (rc) {
            json_decref(res);
            return rc;
        }
    }
    *out = res;
    return ERR_OK;
}

/* ---- a pod's row and bindings ---- */

/* A pod's row, as a bind or a release reads it. */
struct podrow {
    bool found;        /* the pod exists */
    char uid[256];     /* its uid */
    char *containers;  /* stored JSON; new */
    char *keys;        /* its devices' keys as "resource|id" lines, or NULL; new */
    char *request;     /* stored allocate request or NULL; new */
    uint64_t revision; /* its revision */
};

/* Copy column 'col' of 's' into *out (new), or leave NULL for an SQL NULL. */
static err_t dup_column(sqlite3_stmt *s, int col, char **out)
{
    if (sqlite3_column_type(s, col) == SQLITE_NULL)
        return ERR_OK;
    *out = strdup(db_text(s, col));
    return *out ? ERR_OK : ERR_NOMEM;
}

/* Pod ns/name into *p (p->found false without a row); release it with
 * podrow_release(), on failure too. */
static err_t podrow_get(struct store *st, const char *ns, const char *name, struct podrow *p)
{
    sqlite3_stmt *s = NULL;
    bool row = false;
    err_t rc = db_prep(st->commit.db, &s,
                       "SELECT uid,containers,request,revision,device_keys FROM pods WHERE "
                       "namespace=? AND name=?",
                       "tt", ns, name);

    memset(p, 0, sizeof(*p));
    if (rc)
        return rc;
    rc = db_step(st->commit.db, s, &row);
    if (rc || !row)
        goto out;
    p->found = true;
    str_copy(p->uid, sizeof(p->uid), db_text(s, 0));
    p->revision = (uint64_t)sqlite3_column_int64(s, 3);
    p->containers = strdup(db_text(s, 1));
    rc = p->containers ? ERR_OK : ERR_NOMEM;
    if (!rc)
        rc = dup_column(s, 2, &p->request);
    if (!rc)
        rc = dup_column(s, 4, &p->keys);
out:
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

static err_t map_binding(struct store *st, const char *container, const char *resource,
                         const char *id, void *ctx)
{
    char key[KEY_MAX];

    (void)st;
    st_dev_key(key, resource, id);
    return json_object_set_new(ctx, key, json_string(container)) ? ERR_NOMEM : ERR_OK;
}

/* Map key -> container of the devices listed in 'containers' (a pod's
 * stored form); on ERR_OK *out is new. */
static err_t binding_map(const json_t *containers, json_t **out)
{
    json_t *map = json_object();
    err_t rc = map ? st_each_device(NULL, containers, map_binding, map) : ERR_NOMEM;

    return st_map_out(rc, map, out);
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
    if (rc)
        return rc;
    rc = db_step(st->commit.db, s, &row);
    if (!rc && row && json_object_set_new(map, key, json_string(db_text(s, 0))))
        rc = ERR_NOMEM;
    db_done(s);
    return rc;
}

/* held_by() for each of the "resource|id" lines of 'keys'. */
static err_t held_by_keys(struct store *st, const char *ns, const char *name, const char *keys,
                          json_t *map)
{
    char key[KEY_MAX];
    const char *at, *nl;
    size_t len;
    err_t rc = ERR_OK;

    for (at = keys; !rc && *at; at += len + (at[len] == '\n')) {
        nl = strchr(at, '\n');
        len = nl ? (size_t)(nl - at) : strlen(at);
        if (len >= sizeof(key) || !memchr(at, '|', len))
            return db_err(NULL, SQLITE_CORRUPT, "read a pod's device keys");
        memcpy(key, at, len);
        key[len] = '\0';
        rc = held_by(st, ns, name, key, map);
    }
    return rc;
}

/* Map key -> container of the devices bound to pod ns/name, whose row lists
 * its devices' keys in 'keys' ("resource|id" lines; NULL: not recorded) and
 * its stored containers in 'text'; on ERR_OK *out is new. A pod's bindings
 * are always of devices its stored containers list (a bind and the kubelet
 * reconcile write both together), so each of those is looked up by its
 * key: the bindings table has no index by pod (schema 3). Without the key
 * lines SQLite walks the stored JSON, which costs more than the lines;
 * CROSS JOIN keeps the lookups last, by key. */
static err_t pod_bound(struct store *st, const char *ns, const char *name, const char *keys,
                       const char *text, json_t **out)
{
    sqlite3_stmt *s = NULL;
    json_t *map = json_object();
    err_t rc = map ? ERR_OK : ERR_NOMEM;

    if (!rc && keys)
        rc = held_by_keys(st, ns, name, keys, map);
    else if (!rc)
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

/* The keys of 'map' as "resource|id" lines (pods.device_keys); new, or
 * NULL if out of memory. */
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

/* ---- bind ---- */

/* One bind inside a write, from its input to the rows it writes. */
struct bind {
    const struct store_pod *pod; /* the pod, with the uid it gets */
    const char *request;         /* allocate's canonical request, or NULL */
    struct podrow row;           /* the pod's row before */
    struct devseen *seen;        /* the device rows the bind checked */
    json_t *stored;              /* the containers' stored form; new */
    char *text;                  /* its canonical text; new */
};

static void bind_release(struct bind *b)
{
    podrow_release(&b->row);
    st_devseen_free(b->seen);
    json_decref(b->stored);
    free(b->text);
}

/* Emit the pod's event from the values just written (no read back); with
 * 'keep', the object is appended to it too: the write's answer. */
static err_t emit_pod(struct store *st, const char *type, const struct bind *b, struct jsonw *keep)
{
    const struct store_pod *pod = b->pod;
    struct jsonw w = JSONW_INIT;
    err_t rc;

    st_pod_text(&w, pod->ns, pod->name, pod->uid, b->text, changelog_next(&st->log));
    rc = jsonw_done(&w);
    if (!rc)
        rc = changelog_emit_text(&st->log, type, "PodResources", pod->ns, w.sb.buf, w.sb.len);
    if (!rc && keep) {
        jsonw_raw(keep, w.sb.buf, w.sb.len);
        rc = jsonw_done(keep);
    }
    jsonw_release(&w);
    return rc;
}

/* The bindings the pod had ('before', new) and gets ('after', new). */
static err_t bind_maps(struct store *st, const struct bind *b, json_t **before, json_t **after)
{
    const struct podrow *p = &b->row;
    err_t rc;

    if (p->found)
        rc = pod_bound(st, b->pod->ns, b->pod->name, p->keys, p->containers, before);
    else
        rc = (*before = json_object()) ? ERR_OK : ERR_NOMEM;
    return rc ? rc : binding_map(b->stored, after);
}

/* Write the pod's new row, emit its event (appended to 'podtext' too, if
 * not NULL) and its devices', and refresh its reservation. The bindings rows
 * are written by st_emit_key_changes(): those that changed. */
static err_t bind_write(struct store *st, const struct bind *b, struct jsonw *podtext)
{
    const struct store_pod *pod = b->pod;
    bool new_uid = b->row.found && strcmp(b->row.uid, pod->uid) != 0;
    json_t *before = NULL, *after = NULL;
    char *keys = NULL;
    err_t rc = bind_maps(st, b, &before, &after);

    if (rc)
        goto out;
    keys = key_lines(after);
    if (!keys) {
        rc = ERR_NOMEM;
        goto out;
    }
    rc = db_exec(st->commit.db,
                 "INSERT OR REPLACE INTO pods(namespace,name,uid,containers,request,revision,"
                 "device_keys) VALUES(?,?,?,?,?,?,?)",
                 "tttttut", pod->ns, pod->name, pod->uid, b->text, b->request,
                 changelog_next(&st->log), keys);
    if (rc)
        goto out;
    rc = emit_pod(st, b->row.found ? "MODIFIED" : "ADDED", b, podtext);
    if (rc)
        goto out;
    rc = st_emit_key_changes(st, before, after, new_uid,
                             &(struct pod_key){pod->ns, pod->name, pod->uid, b->seen});
    if (!rc)
        rc = st_resv_refresh(st, pod->ns, pod->name);
out:
    json_decref(before);
    json_decref(after);
    free(keys);
    return rc;
}

/* The shared body of bind and allocate, inside the caller's write.
 * 'podtext' (if not NULL) gets the pod's state, new or unchanged. */
static err_t bind_pod(struct store *st, const struct store_pod *pod, const json_t *containers,
                      const char *request, struct error *e, struct store_outcome *did,
                      struct jsonw *podtext)
{
    struct bind b = {.pod = pod, .request = request};
    err_t rc;

    assert(pod->uid);
    rc = podrow_get(st, pod->ns, pod->name, &b.row);
    if (rc)
        goto out;
    rc = resolve_containers(st, pod, containers, &b.seen, e, &b.stored);
    if (rc)
        goto out;
    b.text = jsonx_dumps(b.stored);
    if (!b.text) {
        rc = ERR_NOMEM;
        goto out;
    }
    did->created = !b.row.found || strcmp(b.row.uid, pod->uid) != 0;
    did->changed = did->created || strcmp(b.row.containers, b.text) != 0;
    if (did->changed) {
        rc = bind_write(st, &b, podtext);
    } else if (podtext) {
        st_pod_text(podtext, pod->ns, pod->name, b.row.uid, b.row.containers, b.row.revision);
        rc = jsonw_done(podtext);
    }
out:
    bind_release(&b);
    return rc;
}

/* A bind as st_write() runs it. */
struct bind_op {
    const struct store_pod *pod; /* the pod */
    const json_t *containers;    /* validated */
    struct error *e;             /* why it failed */
    struct store_outcome did;    /* what it did */
    struct jsonw doc;            /* the answer, but for its revision */
};

static err_t bind_run(struct store *st, void *ctx)
{
    struct bind_op *b = ctx;
    struct jsonw pod = JSONW_INIT;
    err_t rc = bind_pod(st, b->pod, b->containers, NULL, b->e, &b->did, &pod);

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

err_t store_pod_bind(struct store *st, const struct store_pod *pod, const json_t *containers,
                     struct error *e, char **out, size_t *len, struct store_outcome *did)
{
    struct bind_op b = {pod, containers, e, {false, false}, JSONW_INIT};
    err_t rc = st_write(st, bind_run, &b);

    if (rc) {
        jsonw_release(&b.doc);
        return rc;
    }
    *did = b.did;
    jsonw_u64(&b.doc, store_revision(st));
    jsonw_lit(&b.doc, "}");
    *out = jsonw_detach(&b.doc, len);
    return ERR_OK;
}

/* ---- allocate: choosing the devices ---- */

/* The devices an allocate may choose from. */
struct cands {
    struct alloc_dev *devs; /* their ids (new) and NUMA nodes */
    size_t n;               /* devices in 'devs' */
    size_t room;            /* slots allocated in 'devs' */
};

static void cands_release(struct cands *c)
{
    size_t i;

    for (i = 0; i < c->n; i++)
        free((char *)c->devs[i].id);
    free(c->devs);
}

/* Add device 'id' whose NUMA ids are the JSON text 'numa'. */
static err_t cands_add(struct cands *c, const char *id, const char *numa)
{
    json_t *ids;
    char *copy;

    if (c->n == c->room) {
        size_t room = c->room ? 2 * c->room : 16;
        struct alloc_dev *d = realloc(c->devs, room * sizeof(*d));

        if (!d)
            return ERR_NOMEM;
        c->devs = d;
        c->room = room;
    }
    copy = strdup(id);
    if (!copy)
        return ERR_NOMEM;
    ids = json_loads(numa, JSON_DECODE_ANY, NULL);
    c->devs[c->n].id = copy;
    c->devs[c->n].numa = json_array_size(ids) ? (int)json_integer_value(json_array_get(ids, 0))
                                              : ALLOC_NO_NUMA;
    c->n++;
    json_decref(ids);
    return ERR_OK;
}

/* The devices of 'resource' pod ns/name may have (healthy, registered,
 * neither held nor reserved by another pod), less those in 'taken' (keys),
 * into 'c' (release it, on failure too). */
static err_t candidates(struct store *st, const struct store_pod *pod, const char *resource,
                        const json_t *taken, struct cands *c)
{
    sqlite3_stmt *s = NULL;
    char key[KEY_MAX];
    bool row;
    err_t rc = db_prep(
        st->commit.db, &s,
        "SELECT d.id,d.numa FROM devices d WHERE d.resource=?1 AND d.health='Healthy' AND "
        "d.removed=0 AND NOT EXISTS (SELECT 1 FROM bindings b WHERE b.resource=d.resource AND "
        "b.device_id=d.id AND b.pod<>'' AND NOT (b.namespace=?2 AND b.pod=?3)) AND NOT EXISTS "
        "(SELECT 1 FROM reserved r WHERE r.resource=d.resource AND r.device_id=d.id AND NOT "
        "(r.namespace=?2 AND r.pod=?3)) ORDER BY d.id",
        "ttt", resource, pod->ns, pod->name);

    while (!rc) {
        rc = db_step(st->commit.db, s, &row);
        if (rc || !row)
            break;
        st_dev_key(key, resource, db_text(s, 0));
        if (!json_object_get(taken, key))
            rc = cands_add(c, db_text(s, 0), db_text(s, 1));
    }
    db_done(s);
    return rc;
}

/* Why 'want' devices of 'resource' cannot be had, 'n' being free: a
 * resource the node has no device of is not there at all (ERR_NOTFOUND: a
 * typo, or the wrong node), else there are too few free (ERR_CONFLICT,
 * with the counts). */
static err_t shortage(struct store *st, const char *resource, const char *container, size_t want,
                      size_t n, struct error *e)
{
    uint64_t known = 1;
    err_t rc = ERR_OK;

    if (n == 0)
        rc = db_get_u64(st->commit.db, &known,
                        "SELECT 1 FROM devices WHERE resource=?1 AND removed=0 LIMIT 1", "t",
                        resource);
    if (rc)
        return rc;
    if (!known)
        return errorf(e, ERR_NOTFOUND,
                      "no device of resource \"%s\" is registered on this node (container %s "
                      "requested %zu)",
                      resource, container, want);
    return errorf(e, ERR_CONFLICT, "insufficient %s for container %s: requested %zu, available %zu",
                  resource, container, want, n);
}

/* What one request of an allocate is for. */
struct want {
    const char *container; /* the container */
    const char *resource;  /* the resource */
    size_t n;              /* devices wanted (> 0) */
};

/* Choose w->n devices of w->resource for pod 'pod', none of 'taken' (the
 * keys chosen so far, to which they are added), into a new
 * ContainerDevices *group. */
static err_t choose(struct store *st, const struct store_pod *pod, const struct want *w,
                    json_t *taken, struct error *e, json_t **group)
{
    struct cands c = {0};
    size_t i, *picked = calloc(w->n, sizeof(size_t));
    json_t *ids = json_array();
    char key[KEY_MAX];
    err_t rc = ERR_NOMEM;

    assert(w->n > 0);
    if (!picked || !ids)
        goto out;
    rc = candidates(st, pod, w->resource, taken, &c);
    if (!rc)
        rc = alloc_choose(c.devs, c.n, w->n, picked);
    if (rc == ERR_CONFLICT)
        rc = shortage(st, w->resource, w->container, w->n, c.n, e);
    if (rc)
        goto out;
    for (i = 0; i < w->n; i++) {
        json_array_append_new(ids, json_string(c.devs[picked[i]].id));
        st_dev_key(key, w->resource, c.devs[picked[i]].id);
        json_object_set_new(taken, key, json_true());
    }
    *group = json_pack("{s:s,s:O}", "resourceName", w->resource, "deviceIds", ids);
    rc = *group ? ERR_OK : ERR_NOMEM;
out:
    cands_release(&c);
    free(picked);
    json_decref(ids);
    return rc;
}

/* The containers of a reservation as an allocate binds them; new. */
static json_t *reserved_containers(const json_t *resv)
{
    json_t *res = json_array(), *c;
    size_t i;

    json_array_foreach(json_object_get(resv, "containers"), i, c) {
        json_array_append_new(res, json_pack("{s:O,s:O,s:[],s:[]}", "name",
                                             json_object_get(c, "name"), "devices",
                                             json_object_get(c, "devices"), "cpuIds", "memory"));
    }
    return res;
}

/* The container of request 'c' with devices chosen for each of its
 * requests, appended to 'res'. */
static err_t plan_container(struct store *st, const struct store_pod *pod, const json_t *c,
                            json_t *taken, struct error *e, json_t *res)
{
    struct want w = {json_string_value(json_object_get(c, "name")), NULL, 0};
    json_t *devs = json_array(), *g = NULL, *v;
    err_t rc = ERR_OK;

    json_object_foreach(json_object_get(c, "requests"), w.resource, v) {
        w.n = (size_t)json_integer_value(v);
        if (rc || w.n == 0)
            continue;
        rc = choose(st, pod, &w, taken, e, &g);
        if (!rc)
            json_array_append_new(devs, g);
    }
    json_array_append_new(res, json_pack("{s:O,s:o,s:[],s:[]}", "name", json_object_get(c, "name"),
                                         "devices", devs, "cpuIds", "memory"));
    return rc;
}

/* Containers for an allocate request, from the reservation or by choice;
 * on ERR_OK *out is new. */
static err_t plan(struct store *st, const struct store_pod *pod, const json_t *request,
                  struct error *e, json_t **out)
{
    json_t *resv = NULL, *res = NULL, *taken = NULL, *c;
    size_t i;
    err_t rc = st_reservation_json(st->commit.db, pod->ns, pod->name, &resv);

    if (rc == ERR_OK) {
        res = reserved_containers(resv);
        goto out;
    }
    if (rc != ERR_NOTFOUND)
        goto out;
    res = json_array();
    taken = json_object();
    rc = ERR_OK;
    json_array_foreach(request, i, c) {
        rc = plan_container(st, pod, c, taken, e, res);
        if (rc)
            break;
    }
out:
    json_decref(resv);
    json_decref(taken);
    return st_map_out(rc, res, out);
}

/* ---- allocate and release ---- */

/* An allocate or a release as st_write() runs it; its answer is {key: obj}. */
struct pod_op {
    const struct store_pod *pod; /* the pod */
    uint64_t rev;                /* release: its revision as a precondition, or 0 */
    const json_t *request;       /* allocate: the validated request */
    char *req;                   /* allocate: its canonical text */
    struct error *e;             /* why it failed */
    struct store_outcome did;    /* allocate: what it did */
    json_t *obj;                 /* the pod: the answer; new */
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

/* Bind the devices plan() chose. A reserved device that is not registered
 * (or removed) is the reservation's fault, not the request's: the request
 * is fine, the reservation cannot be used now, as when devices are short:
 * 409. (The allocator picks registered devices only; a reservation is used
 * as written.) */
static err_t bind_planned(struct store *st, struct pod_op *o, const json_t *containers,
                          struct jsonw *pod)
{
    char why[512];
    err_t rc = bind_pod(st, o->pod, containers, o->req, o->e, &o->did, pod);

    if (rc != ERR_UNPROCESSABLE)
        return rc;
    str_copy(why, sizeof(why), o->e ? o->e->msg : "");
    return errorf(o->e, ERR_CONFLICT, "the reservation of pod %s/%s cannot be used: %s", o->pod->ns,
                  o->pod->name, why);
}

/* The same uid allocating again: the same request is answered with the pod
 * as it is, another one (or a bind's pod) refused. */
static err_t allocate_again(struct pod_op *o, const struct podrow *p)
{
    o->did = (struct store_outcome){false, false};
    if (p->request && strcmp(p->request, o->req) == 0)
        return ERR_OK;
    return errorf(o->e, ERR_CONFLICT, "pod %s/%s (uid %s) is already bound %s; release it first",
                  o->pod->ns, o->pod->name, o->pod->uid,
                  p->request ? "with a different request" : "by a bind");
}

/* Plan and bind; o->obj is the pod bound, or stays NULL when it did not
 * change. */
static err_t allocate_new(struct store *st, struct pod_op *o)
{
    struct jsonw pod = JSONW_INIT;
    json_t *containers = NULL;
    err_t rc = plan(st, o->pod, o->request, o->e, &containers);

    if (!rc)
        rc = bind_planned(st, o, containers, &pod);
    if (!rc && pod.sb.len) {
        o->obj = json_loadb(pod.sb.buf, pod.sb.len, 0, NULL);
        rc = o->obj ? ERR_OK : ERR_NOMEM;
    }
    jsonw_release(&pod);
    json_decref(containers);
    return rc;
}

static err_t allocate_run(struct store *st, void *ctx)
{
    struct pod_op *o = ctx;
    struct podrow p = {0};
    err_t rc = podrow_get(st, o->pod->ns, o->pod->name, &p);

    o->obj = NULL;
    if (rc)
        goto out;
    if (p.found && strcmp(p.uid, o->pod->uid) == 0)
        rc = allocate_again(o, &p);
    else
        rc = allocate_new(st, o);
    if (!rc && !o->obj)
        rc = st_pod_json(st->commit.db, o->pod->ns, o->pod->name, &o->obj);
out:
    podrow_release(&p);
    if (rc) {
        json_decref(o->obj);
        o->obj = NULL;
    }
    return rc;
}

err_t store_pod_allocate(struct store *st, const struct store_pod *pod, const json_t *request,
                         struct error *e, json_t **out, struct store_outcome *did)
{
    struct pod_op o = {.pod = pod, .request = request, .e = e};
    err_t rc;

    assert(pod->uid);
    o.req = jsonx_dumps(request);
    if (!o.req)
        return ERR_NOMEM;
    rc = st_write(st, allocate_run, &o);
    free(o.req);
    if (!rc)
        *did = o.did;
    return pod_answer(st, rc, &o, out);
}

/* The pod a release names ('p'): there, and with the uid and revision it
 * requires, if any. */
static err_t release_check(const struct pod_op *o, const struct podrow *p)
{
    const struct store_pod *pod = o->pod;

    if (!p->found)
        return errorf(o->e, ERR_NOTFOUND, "pod %s/%s not found", pod->ns, pod->name);
    if (pod->uid && strcmp(pod->uid, p->uid) != 0)
        return errorf(o->e, ERR_CONFLICT, "pod %s/%s has uid \"%s\", not \"%s\"", pod->ns,
                      pod->name, p->uid, pod->uid);
    if (o->rev && o->rev != p->revision)
        return errorf(o->e, ERR_CONFLICT,
                      "pod %s/%s has revision %" PRIu64 ", not %" PRIu64 " (the precondition's)",
                      pod->ns, pod->name, p->revision, o->rev);
    return ERR_OK;
}

/* Emit DELETED for the pod with its last state (o->obj, new) and delete
 * its row. */
static err_t release_pod(struct store *st, struct pod_op *o)
{
    const struct store_pod *pod = o->pod;
    err_t rc = st_pod_json(st->commit.db, pod->ns, pod->name, &o->obj);

    if (rc)
        return rc;
    if (json_object_set_new(o->obj, "revision", json_integer((json_int_t)changelog_next(&st->log))))
        return ERR_NOMEM;
    rc = changelog_emit(&st->log, "DELETED", "PodResources", pod->ns, o->obj);
    if (rc)
        return rc;
    return db_exec(st->commit.db, "DELETE FROM pods WHERE namespace=? AND name=?", "tt", pod->ns,
                   pod->name);
}

static err_t release_run(struct store *st, void *ctx)
{
    struct pod_op *o = ctx;
    const struct store_pod *pod = o->pod;
    struct podrow p = {0};
    json_t *before = NULL, *none = json_object();
    err_t rc = none ? podrow_get(st, pod->ns, pod->name, &p) : ERR_NOMEM;

    o->obj = NULL;
    if (rc)
        goto out;
    rc = release_check(o, &p);
    if (rc)
        goto out;
    rc = pod_bound(st, pod->ns, pod->name, p.keys, p.containers, &before);
    if (rc)
        goto out;
    rc = release_pod(st, o);
    if (rc)
        goto out;
    rc = st_emit_key_changes(st, before, none, false, /* no 'after': no uid */
                             &(struct pod_key){pod->ns, pod->name, NULL, NULL});
    if (!rc)
        rc = st_resv_refresh(st, pod->ns, pod->name);
out:
    podrow_release(&p);
    json_decref(before);
    json_decref(none);
    if (rc) {
        json_decref(o->obj);
        o->obj = NULL;
    }
    return rc;
}

err_t store_pod_release(struct store *st, const struct store_pod *pod, uint64_t rev,
                        struct error *e, json_t **out)
{
    struct pod_op o = {.pod = pod, .rev = rev, .e = e};

    return pod_answer(st, st_write(st, release_run, &o), &o, out);
}
