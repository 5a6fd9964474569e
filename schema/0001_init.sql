-- podresd schema, version 1. Applied inside one transaction with
-- PRAGMA user_version = 1; never edited once released.

-- One row per persisted counter; 'revision' is the node-wide revision.
CREATE TABLE meta (
    key   TEXT PRIMARY KEY,
    value INTEGER NOT NULL
) WITHOUT ROWID;
INSERT INTO meta(key, value) VALUES ('revision', 0);

-- A device-plugin resource ("vendor.com/gpu") and its heartbeat.
CREATE TABLE resources (
    name         TEXT PRIMARY KEY,
    ttl_ms       INTEGER NOT NULL DEFAULT 0,   -- 0: no heartbeat
    refreshed_ms INTEGER NOT NULL DEFAULT 0,   -- wall clock of the last PUT
    expired      INTEGER NOT NULL DEFAULT 0    -- 1 once the heartbeat lapsed
) WITHOUT ROWID;

-- Devices of a resource. 'removed' = no longer registered but still bound.
CREATE TABLE devices (
    resource   TEXT NOT NULL,
    id         TEXT NOT NULL,
    health     TEXT NOT NULL CHECK (health IN ('Healthy', 'Unhealthy')),
    numa       TEXT NOT NULL DEFAULT '[]',     -- JSON array of NUMA node ids
    properties TEXT NOT NULL DEFAULT '{}',     -- JSON object of strings
    removed    INTEGER NOT NULL DEFAULT 0,
    revision   INTEGER NOT NULL,
    PRIMARY KEY (resource, id)
) WITHOUT ROWID;

-- A pod's recorded binding. 'containers' is the canonical JSON array of
-- ContainerResources; 'request' the canonical allocate request, if any.
CREATE TABLE pods (
    namespace  TEXT NOT NULL,
    name       TEXT NOT NULL,
    uid        TEXT NOT NULL DEFAULT '',
    containers TEXT NOT NULL,
    request    TEXT,
    revision   INTEGER NOT NULL,
    PRIMARY KEY (namespace, name)
) WITHOUT ROWID;

-- Which container holds a device: at most one, by the primary key.
CREATE TABLE bindings (
    resource  TEXT NOT NULL,
    device_id TEXT NOT NULL,
    namespace TEXT NOT NULL,
    pod       TEXT NOT NULL,
    container TEXT NOT NULL,
    PRIMARY KEY (resource, device_id)
) WITHOUT ROWID;
CREATE INDEX bindings_pod ON bindings(namespace, pod);

-- Pre-assignments written for pods that are not bound yet.
CREATE TABLE reservations (
    namespace  TEXT NOT NULL,
    name       TEXT NOT NULL,
    containers TEXT NOT NULL,                  -- canonical JSON array
    state      TEXT NOT NULL CHECK (state IN ('Pending', 'Bound', 'Conflict')),
    message    TEXT NOT NULL DEFAULT '',
    revision   INTEGER NOT NULL,
    PRIMARY KEY (namespace, name)
) WITHOUT ROWID;

-- Which pod a device is reserved for: at most one, by the primary key.
CREATE TABLE reserved (
    resource  TEXT NOT NULL,
    device_id TEXT NOT NULL,
    namespace TEXT NOT NULL,
    pod       TEXT NOT NULL,
    PRIMARY KEY (resource, device_id)
) WITHOUT ROWID;
CREATE INDEX reserved_pod ON reserved(namespace, pod);

-- The change log: one row per revision, the serialised feed event.
CREATE TABLE changes (
    revision  INTEGER PRIMARY KEY,
    kind      TEXT NOT NULL,
    namespace TEXT NOT NULL DEFAULT '',
    event     TEXT NOT NULL
);
