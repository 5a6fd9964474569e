/* SPDX-License-Identifier: Apache-2.0 */
/* store_view.h - rows as the JSON shapes of docs/API.md (Device,
 * PodResources, Reservation): as new json_t values, or written as text
 * byte for byte what serialising those values gives (the write path's
 * events and answers, built without a json_t). On any connection, in a
 * transaction the caller holds; defined in store_view.c, whose public
 * reads (store.h) are built on them. Not the writes. */
#ifndef PODRES_STORE_VIEW_H
#define PODRES_STORE_VIEW_H
#include <jansson.h>
#include <sqlite3.h>
#include <stdint.h>

#include "../common/err.h"
#include "../common/jsonw.h"

/* {"nodes":[{"ID":n}...]} for the NUMA ids 'numa_ids' (borrowed); new. */
json_t *st_topology(const json_t *numa_ids);
/* The object of device 'resource' 'id', pod ns/name, reservation ns/name:
 * on ERR_OK *out is new. ERR_NOTFOUND without a row. */
err_t st_device_json(sqlite3 *db, const char *resource, const char *id, json_t **out) WARN_UNUSED;
err_t st_pod_json(sqlite3 *db, const char *ns, const char *name, json_t **out) WARN_UNUSED;
err_t st_reservation_json(sqlite3 *db, const char *ns, const char *name, json_t **out) WARN_UNUSED;
/* {key: obj, "revision": rev}; steals 'obj' (NULL: out of memory). New, or
 * NULL if out of memory. */
json_t *st_wrap(const char *key, json_t *obj, uint64_t rev);

/* A device object's fields as stored: numa and properties are the stored
 * JSON text; a NULL holder_ns / resv_ns is no holder / no reservation. All
 * borrowed. */
struct devtext {
    const char *resource, *id, *health, *numa, *properties;              /* its row */
    const char *holder_ns, *holder_name, *holder_uid, *holder_container; /* its holder */
    const char *resv_ns, *resv_name;                                     /* reserved for */
    const char *physical, *aliases; /* its identity as stored; NULL: none ('', "[]") */
    const char *holder_claim;       /* DRA claim "namespace/name"; NULL or "": none */
    uint64_t revision;              /* its revision */
};
/* A Device's holder {"namespace","name","uid","container"[,"claim"]} ('claim'
 * "namespace/name", or NULL or "" for none); new, NULL if out of memory. */
json_t *st_holder_json(const char *ns, const char *name, const char *uid, const char *container,
                       const char *claim);
/* Append the text of the device object 'd' (st_device_json()'s shape). */
void st_devtext(struct jsonw *w, const struct devtext *d);
/* The text of st_device_json()'s object, appended to 'w'. A 'rev' other
 * than 0 stands in for the row's revision (a DELETED event). ERR_NOTFOUND
 * without a row. */
err_t st_device_text(sqlite3 *db, const char *resource, const char *id, uint64_t rev,
                     struct jsonw *w) WARN_UNUSED;
/* The text of a pod object (st_pod_json()'s shape) from its column values;
 * 'containers' is the stored canonical JSON. */
void st_pod_text(struct jsonw *w, const char *ns, const char *name, const char *uid,
                 const char *containers, uint64_t rev);

#endif
