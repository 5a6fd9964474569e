/* SPDX-License-Identifier: Apache-2.0 */
/* store_ident.c - a device's names: its identity as a write gives it (the
 * registration's, else the identity rules', ident.h), the check that an
 * alias names one device, and the lookup of devices by any name: id, alias,
 * or the physical id of slices and replicas (schema/0005_identity.sql).
 * Not the history's lookup by name (store_hist.c), which also knows the
 * names of devices gone. */
#define LOG_MOD "store"
#include "../common/common.h"
#include "../common/jsonx.h"
#include "ident.h"
#include "store_int.h"
#include "store_view.h"

#include <stdatomic.h>

#define FAMILY_MAX 4096 /* devices one name covers, at most */

void store_set_ident(struct store *st, const struct ident_rules *rules)
{
    st->ident = rules;
}

uint64_t store_alias_conflicts(struct store *st)
{
    return atomic_load_explicit(&st->alias_conflicts, memory_order_relaxed);
}

err_t st_ident_of(struct store *st, const char *resource, const char *id, const json_t *given,
                  const char **physical, char **aliases)
{
    const char *gp = json_string_value(json_object_get(given, "physical"));
    const json_t *ga = json_object_get(given, "aliases");
    json_t *all = json_array(), *sorted;
    char *derived = NULL;
    err_t rc = all ? ERR_OK : ERR_NOMEM;

    *physical = NULL;
    *aliases = NULL;
    if (!rc && json_is_array(ga) && json_array_extend(all, (json_t *)ga))
        rc = ERR_NOMEM;
    if (!rc && st->ident)
        rc = ident_derive(st->ident, resource, id, &derived, all);
    if (rc)
        goto out;
    if (gp && gp[0]) { /* the registration's own physical wins; its own id: whole */
        free(derived);
        derived = strdup(strcmp(gp, id) == 0 ? "" : gp);
    } else if (!derived) {
        derived = strdup("");
    }
    sorted = jsonx_sorted_strings(all, true, id);
    *aliases = sorted ? jsonx_dumps(sorted) : NULL;
    json_decref(sorted);
    if (!derived || !*aliases) {
        free(*aliases);
        *aliases = NULL;
        rc = ERR_NOMEM;
        goto out;
    }
    *physical = derived;
    derived = NULL;
out:
    free(derived);
    json_decref(all);
    return rc;
}

/* The first alias of resource/id (aliases, a JSON array text) that names
 * another device, or with 'id_too' its id that is another device's alias:
 * ERR_CONFLICT, 'e' naming both. */
err_t st_names_check(struct store *st, const char *resource, const char *id, const char *aliases,
                     bool id_too, struct error *e)
{
    sqlite3_stmt *s = NULL;
    bool row = false;
    err_t rc = db_prep(
        st->commit.db, &s,
        "SELECT j.value,a.resource,a.device_id,1 FROM json_each(?3) j JOIN aliases a "
        "ON a.name=j.value WHERE NOT (a.resource=?1 AND a.device_id=?2) "
        "UNION ALL SELECT j.value,d.resource,d.id,2 FROM json_each(?3) j JOIN "
        "devices d ON d.id=j.value "
        "UNION ALL SELECT ?2,a.resource,a.device_id,3 FROM aliases a WHERE ?4 AND "
        "a.name=?2 AND NOT (a.resource=?1 AND a.device_id=?2) LIMIT 1",
        "ttti", resource, id, aliases, (int64_t)id_too);

    if (!rc)
        rc = db_step(st->commit.db, s, &row);
    if (rc || !row)
        goto out;
    if (sqlite3_column_int(s, 3) == 3)
        rc = errorf(e, ERR_CONFLICT,
                    "device %.253s %.253s: its id is an alias of device %.253s %.253s", resource,
                    id, db_text(s, 1), db_text(s, 2));
    else
        rc = errorf(e, ERR_CONFLICT,
                    "alias %.253s of device %.253s %.253s is %s device %.253s %.253s",
                    db_text(s, 0), resource, id,
                    sqlite3_column_int(s, 3) == 1 ? "an alias of" : "the id of", db_text(s, 1),
                    db_text(s, 2));
out:
    db_done(s);
    return rc;
}

/* The first name the devices of 'resource' hold that would name two
 * devices: an alias another resource's device holds (1), one two of its
 * devices hold (1), an alias that is a device's id (2), an id that is
 * another resource's alias (3): the name, the device of 'resource', the
 * other device. Read from devices.aliases, so that a write may trade names
 * between its devices in any order. */
static const char settle_check_sql[] =
    "SELECT j.value,d.id,a.resource,a.device_id,1 FROM devices d,json_each(d.aliases) j JOIN "
    "aliases a ON a.name=j.value WHERE d.resource=?1 AND a.resource<>?1 "
    "UNION ALL SELECT * FROM (SELECT j.value,min(d.id),?1,max(d.id),1 FROM devices d,"
    "json_each(d.aliases) j WHERE d.resource=?1 GROUP BY j.value HAVING count(*)>1) "
    "UNION ALL SELECT j.value,d.id,x.resource,x.id,2 FROM devices d,json_each(d.aliases) j JOIN "
    "devices x ON x.id=j.value WHERE d.resource=?1 "
    "UNION ALL SELECT d.id,d.id,a.resource,a.device_id,3 FROM devices d JOIN aliases a ON "
    "a.name=d.id WHERE d.resource=?1 AND a.resource<>?1 LIMIT 1";

err_t st_names_settle(struct store *st, const char *resource, struct error *e)
{
    sqlite3_stmt *s = NULL;
    bool row = false;
    err_t rc = db_prep(st->commit.db, &s, settle_check_sql, "t", resource);

    if (!rc)
        rc = db_step(st->commit.db, s, &row);
    if (!rc && row && sqlite3_column_int(s, 4) == 3)
        rc = errorf(e, ERR_CONFLICT,
                    "device %.253s %.253s: its id is an alias of device %.253s %.253s", resource,
                    db_text(s, 1), db_text(s, 2), db_text(s, 3));
    else if (!rc && row)
        rc = errorf(e, ERR_CONFLICT,
                    "alias %.253s of device %.253s %.253s is %s device %.253s %.253s",
                    db_text(s, 0), resource, db_text(s, 1),
                    sqlite3_column_int(s, 4) == 1 ? "an alias of" : "the id of", db_text(s, 2),
                    db_text(s, 3));
    db_done(s);
    if (!rc)
        rc = db_exec(st->commit.db, "DELETE FROM aliases WHERE resource=?", "t", resource);
    if (!rc)
        rc = db_exec(st->commit.db,
                     "INSERT INTO aliases(name,resource,device_id) SELECT j.value,d.resource,d.id "
                     "FROM devices d,json_each(d.aliases) j WHERE d.resource=?",
                     "t", resource);
    return rc;
}

void st_alias_conflict_count(struct store *st)
{
    atomic_fetch_add_explicit(&st->alias_conflicts, 1, memory_order_relaxed);
}

/* ---- lookup by any name ---- */

/* The devices a name names directly: by id or alias, of 'resource' if given. */
struct direct {
    int n;              /* how many */
    char res[512];      /* the first's resource */
    char id[512];       /* and id */
    char aliases[8192]; /* and aliases (JSON text: at most 16 of 253 bytes, quoted) */
    char names[512];    /* all of them "resource id", joined by ", " (cut to fit) */
};

static err_t direct_of(sqlite3 *db, const char *name, const char *resource, struct direct *d)
{
    sqlite3_stmt *s = NULL;
    bool row;
    size_t used;
    err_t rc = db_prep(db, &s,
                       "SELECT resource,id,aliases FROM devices WHERE id=?1 AND (?2 IS NULL OR "
                       "resource=?2) UNION SELECT d.resource,d.id,d.aliases FROM aliases a JOIN "
                       "devices d ON d.resource=a.resource AND d.id=a.device_id WHERE a.name=?1 "
                       "AND (?2 IS NULL OR a.resource=?2) ORDER BY 1,2",
                       "tt", name, resource);

    memset(d, 0, sizeof(*d));
    while (!rc) {
        rc = db_step(db, s, &row);
        if (rc || !row)
            break;
        if (d->n == 0) {
            str_copy(d->res, sizeof(d->res), db_text(s, 0));
            str_copy(d->id, sizeof(d->id), db_text(s, 1));
            str_copy(d->aliases, sizeof(d->aliases), db_text(s, 2));
        }
        used = strlen(d->names);
        snprintf(d->names + used, sizeof(d->names) - used, "%s%s %s", d->n ? ", " : "",
                 db_text(s, 0), db_text(s, 1));
        d->n++;
    }
    db_done(s);
    return rc;
}

/* Every device 'name' covers, as Device objects into 'arr': the device it
 * names directly ('d', n <= 1), and every slice or replica whose physical
 * is the name, that device's id or one of its aliases, or (recursively) the
 * id or an alias of one found so (a DRA MIG device's physical is its GPU's
 * UUID, an alias); without a direct device only those of 'resource'. */
static err_t family_of(sqlite3 *db, const char *name, const char *resource, const struct direct *d,
                       json_t *arr)
{
    sqlite3_stmt *s = NULL;
    json_t *dev;
    bool row;
    err_t rc = db_prep(
        db, &s,
        "WITH RECURSIVE seed(n) AS (SELECT ?1 UNION SELECT ?3 WHERE ?3 IS NOT NULL UNION "
        "SELECT value FROM json_each(?4)), fam(resource,id) AS (SELECT resource,id FROM devices "
        "WHERE resource=?2 AND id=?3 UNION SELECT d.resource,d.id FROM devices d JOIN seed ON "
        "d.physical=seed.n UNION SELECT d.resource,d.id FROM fam f JOIN devices fd ON "
        "fd.resource=f.resource AND fd.id=f.id JOIN devices d ON d.physical<>'' AND "
        "(d.physical=f.id OR d.physical IN (SELECT value FROM json_each(fd.aliases)))) "
        "SELECT resource,id FROM fam WHERE ?3 IS NOT NULL OR ?5 IS NULL OR "
        "resource=?5 ORDER BY resource,id LIMIT ?6",
        "ttttti", name, d->n ? d->res : NULL, d->n ? d->id : NULL, d->n ? d->aliases : "[]",
        resource, (int64_t)FAMILY_MAX);

    while (!rc) {
        rc = db_step(db, s, &row);
        if (rc || !row)
            break;
        rc = st_device_json(db, db_text(s, 0), db_text(s, 1), &dev);
        if (!rc && json_array_append_new(arr, dev))
            rc = ERR_NOMEM;
    }
    db_done(s);
    return rc;
}

/* In one read transaction: the revision, the direct devices, and when
 * there is at most one, the devices the name covers (*devs, new). */
static err_t find(struct store *st, const char *name, const char *resource, struct direct *d,
                  uint64_t *rev, json_t **direct, json_t **devs)
{
    sqlite3 *db = NULL;
    err_t rc = db_read_begin(&st->readers, &db);

    if (rc)
        return rc;
    rc = changelog_db_revision(&st->log, db, rev);
    if (!rc)
        rc = direct_of(db, name, resource, d);
    if (!rc && d->n == 1)
        rc = st_device_json(db, d->res, d->id, direct);
    if (!rc && d->n <= 1) {
        *devs = json_array();
        rc = *devs ? family_of(db, name, resource, d, *devs) : ERR_NOMEM;
    }
    db_read_end(&st->readers, db);
    return rc;
}

err_t store_device_find(struct store *st, const char *name, const char *resource, struct error *e,
                        json_t **out)
{
    struct direct d;
    json_t *direct = NULL, *devs = NULL;
    uint64_t rev = 0;
    err_t rc = find(st, name, resource, &d, &rev, &direct, &devs);

    if (rc)
        goto out;
    if (d.n > 1) {
        rc = errorf(e, ERR_CONFLICT, "%.200s names %d devices (%.300s): add ?resource=", name, d.n,
                    d.names);
        goto out;
    }
    if (json_array_size(devs) == 0) {
        rc = errorf(e, ERR_NOTFOUND, "device %.200s not found%s%.200s", name,
                    resource ? " in " : "", resource ? resource : "");
        goto out;
    }
    *out = json_pack("{s:o,s:O,s:I}", "device", direct ? direct : json_null(), "devices", devs,
                     "revision", (json_int_t)rev);
    direct = NULL;
    rc = *out ? ERR_OK : ERR_NOMEM;
out:
    json_decref(direct);
    json_decref(devs);
    return rc;
}
