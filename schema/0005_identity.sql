-- podresd schema, version 5: device identity and DRA.
-- A device's 'physical' is the id of the physical device it is a slice or
-- replica of ('' when whole), 'aliases' its other names (a sorted JSON array
-- of strings). The table 'aliases' is their index: one row per alias, so an
-- alias names one device (its primary key); the triggers below keep it equal
-- to the devices' 'aliases'. 'device_names' keeps every alias and physical id
-- a device has had, never pruned (bounded by the node's devices), so history
-- is found by a name a device no longer has or a device no longer there.
-- A bindings row's 'claim' is the DRA claim ("namespace/name") through which
-- the device is held; '' for a device-plugin binding. A resource with 'dra'
-- 1 is a DRA driver whose devices were published through its ResourceSlices
-- (PUT /v1/drivers/{driver}/devices). Applied inside one transaction with
-- PRAGMA user_version = 5; never edited once released.

ALTER TABLE devices ADD COLUMN physical TEXT NOT NULL DEFAULT '';
ALTER TABLE devices ADD COLUMN aliases TEXT NOT NULL DEFAULT '[]';
ALTER TABLE bindings ADD COLUMN claim TEXT NOT NULL DEFAULT '';
ALTER TABLE resources ADD COLUMN dra INTEGER NOT NULL DEFAULT 0;

CREATE TABLE aliases (
    name      TEXT PRIMARY KEY,
    resource  TEXT NOT NULL,
    device_id TEXT NOT NULL
) WITHOUT ROWID;

CREATE TABLE device_names (
    name      TEXT NOT NULL,                   -- an alias or the physical id
    resource  TEXT NOT NULL,
    device_id TEXT NOT NULL,
    PRIMARY KEY (name, resource, device_id)
) WITHOUT ROWID;

CREATE INDEX devices_physical ON devices(physical) WHERE physical <> '';

CREATE TRIGGER devices_names_ins AFTER INSERT ON devices
WHEN NEW.aliases <> '[]' OR NEW.physical <> '' BEGIN
    INSERT INTO aliases(name, resource, device_id)
        SELECT value, NEW.resource, NEW.id FROM json_each(NEW.aliases);
    INSERT OR IGNORE INTO device_names(name, resource, device_id)
        SELECT value, NEW.resource, NEW.id FROM json_each(NEW.aliases)
        UNION ALL SELECT NEW.physical, NEW.resource, NEW.id WHERE NEW.physical <> '';
END;

CREATE TRIGGER devices_names_upd AFTER UPDATE OF aliases, physical ON devices
WHEN NEW.aliases <> OLD.aliases OR NEW.physical <> OLD.physical BEGIN
    DELETE FROM aliases WHERE name IN (SELECT value FROM json_each(OLD.aliases));
    INSERT INTO aliases(name, resource, device_id)
        SELECT value, NEW.resource, NEW.id FROM json_each(NEW.aliases);
    INSERT OR IGNORE INTO device_names(name, resource, device_id)
        SELECT value, NEW.resource, NEW.id FROM json_each(NEW.aliases)
        UNION ALL SELECT NEW.physical, NEW.resource, NEW.id WHERE NEW.physical <> '';
END;

CREATE TRIGGER devices_names_del AFTER DELETE ON devices WHEN OLD.aliases <> '[]' BEGIN
    DELETE FROM aliases WHERE name IN (SELECT value FROM json_each(OLD.aliases));
END;
