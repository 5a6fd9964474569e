/* SPDX-License-Identifier: Apache-2.0 */
/* store_rows.h - what the store's writes share (store_devices.c,
 * store_pods.c, store_resv.c): a device's row with its holder and
 * reservation, device keys, walking a containers array, the Device events
 * of devices that change hands, and the end of a write whose answer is one
 * object. Everything here runs inside a write (st_write), on the write
 * connection, under the writer's lock. Not the reads (store_view.h). */
#ifndef PODRES_STORE_ROWS_H
#define PODRES_STORE_ROWS_H
#include <jansson.h>
#include <sqlite3.h>
#include <stdbool.h>

#include "../common/err.h"
#include "store_int.h"

/* A device key is "resource|id"; keys of in-memory maps of devices. */
#define KEY_MAX 600 /* bytes of a key, NUL included */

/* Write the key of device 'resource' 'id' into 'key' (KEY_MAX bytes). */
void st_dev_key(char *key, const char *resource, const char *id);
/* Split the key 'key' in place: it becomes the resource; returns the id. */
const char *st_key_split(char *key);

/* A device's row, its holder and its reservation. */
struct devrow {
    bool found;         /* the row exists */
    char health[16];    /* Healthy or Unhealthy */
    bool removed;       /* no longer registered */
    char holder[512];   /* "ns/pod" or "" */
    char container[64]; /* holder's container */
    char reserved[512]; /* "ns/pod" reserved for, or "" */
    json_t *numa;       /* array of NUMA ids; new, or NULL when not found */
};

/* A device row that a bind checked, kept for the device's event
 * (st_emit_key_changes), which then reads no row: inside one write nothing
 * changes the row between the two. One allocation; the strings point into
 * 'text'. */
struct devseen {
    struct devseen *next;                   /* the next row kept, or NULL */
    const char *resource, *id;              /* the device */
    const char *health, *numa, *properties; /* its columns, as stored */
    const char *physical, *aliases;         /* its identity, as stored */
    const char *resv_ns, *resv_name;        /* reserved for; NULL, "" when not */
    char text[];                            /* the strings above */
};

/* Device 'resource' 'id' into *d (d->found false when there is no row; on
 * ERR_OK d->numa is new: json_decref() it); with 'seen', the row is also
 * put in front of *seen (free the list with st_devseen_free()). */
err_t st_devrow_get(struct store *st, const char *resource, const char *id, struct devrow *d,
                    struct devseen **seen) WARN_UNUSED;
void st_devseen_free(struct devseen *l); /* NULL is a no-op */

/* Add the rows (resource, id, value) of 's' to 'map' as key -> value; 's'
 * (may be NULL: nothing to add) is given back with db_done(). */
err_t st_map_rows(struct store *st, sqlite3_stmt *s, json_t *map) WARN_UNUSED;
/* *out = 'map' (stolen) when 'rc' is ERR_OK, else 'map' is freed; returns 'rc'. */
err_t st_map_out(err_t rc, json_t *map, json_t **out);

/* Merge the NUMA ids of 'ids' into 'numa', kept sorted and unique. */
void st_numa_union(json_t *numa, const json_t *ids);

/* Called by st_each_device() for one device of a containers array. */
typedef err_t (*st_device_fn)(struct store *st, const char *container, const char *resource,
                              const char *id, void *ctx);
/* Call 'fn' for every device id of 'containers' ([{"name","devices":
 * [{"resourceName","deviceIds"}]}]) in order; stops at the first error and
 * returns it. 'st' is passed on (it may be NULL when 'fn' needs none). */
err_t st_each_device(struct store *st, const json_t *containers, st_device_fn fn, void *ctx);

/* Stamp device 'resource' 'id' with the next revision and emit 'type' with
 * its object. */
err_t st_emit_device(struct store *st, const char *type, const char *resource,
                     const char *id) WARN_UNUSED;
/* Emit DELETED with the last state of an unbound device, then remove its
 * row and its let-go bindings row, if any. */
err_t st_emit_device_deleted(struct store *st, const char *resource, const char *id) WARN_UNUSED;

/* The pod whose bindings a write just replaced. */
struct pod_key {
    const char *ns, *name, *uid; /* the pod (uid NULL: it is gone) */
    const struct devseen *seen;  /* the rows of its devices that the write read, or NULL */
};

/* Emit the Device events for keys ("resource|id" -> container) that changed
 * between 'before' and 'after': MODIFIED for keys new in 'after', with
 * another value, or all of them when 'force'; for keys only in 'before',
 * DELETED when the device is removed and now unbound, else MODIFIED. With
 * 'bound', the maps are that pod's bindings before and after the write:
 * the bindings rows of the keys that changed are written here (it holds the
 * keys of 'after', nobody the others), the others are already right. */
err_t st_emit_key_changes(struct store *st, json_t *before, json_t *after, bool force,
                          const struct pod_key *bound) WARN_UNUSED;

/* The body of a write whose answer is one object: on ERR_OK *obj is new. */
typedef err_t (*st_json_body)(struct store *st, void *args, json_t **obj);
/* Run 'body' as one write (st_write); once committed, *out is new:
 * {key: obj, "revision": N}. */
err_t st_write_json(struct store *st, const char *key, st_json_body body, void *args,
                    json_t **out) WARN_UNUSED;

#endif
