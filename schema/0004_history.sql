-- podresd schema, version 4: history. Every interval during which a
-- container held a device (hist_bind) and during which a device was
-- Unhealthy (hist_health), written by triggers of the write connection in
-- the transaction of the change (server/store_hist.c). Times are wall-clock
-- milliseconds; 'to_ms' is NULL while the interval is open. An interval's
-- id is from_ms * 1024 plus a sequence number (never less than the id
-- before it), so the rowid order is the time order and a time window is a
-- rowid range. Devices and pod instances are interned (hist_dev, hist_pod)
-- to keep a year of churn small. A device's open interval is its last in
-- the (dev, from_ms) index (intervals of a device do not overlap), so no
-- index of the open ones is kept. hist_usage holds the device-milliseconds
-- of closed intervals per namespace and resource since the database was
-- made (never pruned: the podres_device_seconds_total counter).
-- Bindings and Unhealthy devices present at migration open their interval
-- now. Applied inside one transaction with PRAGMA user_version = 4; never
-- edited once released.

CREATE TABLE hist_dev (
    id        INTEGER PRIMARY KEY,
    resource  TEXT NOT NULL,
    device_id TEXT NOT NULL,
    UNIQUE (resource, device_id)
);

CREATE TABLE hist_pod (
    id        INTEGER PRIMARY KEY,
    namespace TEXT NOT NULL,
    name      TEXT NOT NULL,
    uid       TEXT NOT NULL,
    UNIQUE (namespace, name, uid)
);

CREATE TABLE hist_bind (
    id        INTEGER PRIMARY KEY,             -- from_ms * 1024 + sequence
    dev       INTEGER NOT NULL,                -- hist_dev.id
    pod       INTEGER NOT NULL,                -- hist_pod.id
    container TEXT NOT NULL,
    from_ms   INTEGER NOT NULL,
    to_ms     INTEGER                          -- NULL while held
);
CREATE INDEX hist_bind_dev ON hist_bind(dev, from_ms);
CREATE INDEX hist_bind_pod ON hist_bind(pod);

CREATE TABLE hist_health (
    id      INTEGER PRIMARY KEY,               -- from_ms * 1024 + sequence
    dev     INTEGER NOT NULL,                  -- hist_dev.id
    from_ms INTEGER NOT NULL,
    to_ms   INTEGER                            -- NULL while Unhealthy
);
CREATE INDEX hist_health_dev ON hist_health(dev, from_ms);

CREATE TABLE hist_usage (
    namespace TEXT NOT NULL,
    resource  TEXT NOT NULL,
    ms        INTEGER NOT NULL,                -- device-milliseconds of closed intervals
    PRIMARY KEY (namespace, resource)
) WITHOUT ROWID;

CREATE TEMP TABLE hist_mig AS
    SELECT CAST((julianday('now') - 2440587.5) * 86400000 AS INTEGER) AS ms;

INSERT OR IGNORE INTO hist_dev(resource, device_id)
    SELECT resource, id FROM devices WHERE health = 'Unhealthy'
    UNION SELECT resource, device_id FROM bindings WHERE pod <> '';
INSERT OR IGNORE INTO hist_pod(namespace, name, uid)
    SELECT DISTINCT b.namespace, b.pod, ifnull(p.uid, '') FROM bindings b
    LEFT JOIN pods p ON p.namespace = b.namespace AND p.name = b.pod WHERE b.pod <> '';
INSERT INTO hist_bind(id, dev, pod, container, from_ms)
    SELECT (m.ms << 10) + row_number() OVER (), d.id, hp.id, b.container, m.ms
    FROM bindings b JOIN hist_mig m
    JOIN hist_dev d ON d.resource = b.resource AND d.device_id = b.device_id
    LEFT JOIN pods p ON p.namespace = b.namespace AND p.name = b.pod
    JOIN hist_pod hp ON hp.namespace = b.namespace AND hp.name = b.pod
        AND hp.uid = ifnull(p.uid, '')
    WHERE b.pod <> '';
INSERT INTO hist_health(id, dev, from_ms)
    SELECT (m.ms << 10) + row_number() OVER (), d.id, m.ms
    FROM devices v JOIN hist_mig m
    JOIN hist_dev d ON d.resource = v.resource AND d.device_id = v.id
    WHERE v.health = 'Unhealthy';
DROP TABLE hist_mig;
