-- podresd schema, version 6: names. devices and hist_dev gain an index by
-- device id alone: a device is asked for by a name, with or without its
-- resource (GET /v1/devices/{name}, /v1/history?device=), and a name may
-- stand for several devices (schema 5), so each is looked up by its id. The triggers of
-- schema 5 that keep 'aliases' and 'device_names' are replaced: a device
-- written by an upsert (INSERT .. ON CONFLICT DO UPDATE) made their INSERT
-- OR IGNORE abort on a name the device had before, since the outer
-- statement's conflict handling wins over a trigger's; and a device lets go
-- only of the aliases it holds itself, so that devices of one write may
-- trade names (the write checks the names it leaves, store_ident.c).
-- Applied inside one transaction with PRAGMA user_version = 6; never edited
-- once released.

CREATE INDEX devices_id ON devices(id);
CREATE INDEX hist_dev_device ON hist_dev(device_id);

DROP TRIGGER devices_names_ins;
DROP TRIGGER devices_names_upd;
DROP TRIGGER devices_names_del;

CREATE TRIGGER devices_names_ins AFTER INSERT ON devices
WHEN NEW.aliases <> '[]' OR NEW.physical <> '' BEGIN
    INSERT INTO aliases(name, resource, device_id)
        SELECT value, NEW.resource, NEW.id FROM json_each(NEW.aliases)
        WHERE NOT EXISTS (SELECT 1 FROM aliases a WHERE a.name = value);
    INSERT INTO device_names(name, resource, device_id)
        SELECT n, NEW.resource, NEW.id FROM (SELECT value AS n FROM json_each(NEW.aliases)
            UNION SELECT NEW.physical WHERE NEW.physical <> '')
        WHERE NOT EXISTS (SELECT 1 FROM device_names x WHERE x.name = n
            AND x.resource = NEW.resource AND x.device_id = NEW.id);
END;

CREATE TRIGGER devices_names_upd AFTER UPDATE OF aliases, physical ON devices
WHEN NEW.aliases <> OLD.aliases OR NEW.physical <> OLD.physical BEGIN
    DELETE FROM aliases WHERE resource = OLD.resource AND device_id = OLD.id
        AND name IN (SELECT value FROM json_each(OLD.aliases));
    INSERT INTO aliases(name, resource, device_id)
        SELECT value, NEW.resource, NEW.id FROM json_each(NEW.aliases)
        WHERE NOT EXISTS (SELECT 1 FROM aliases a WHERE a.name = value);
    INSERT INTO device_names(name, resource, device_id)
        SELECT n, NEW.resource, NEW.id FROM (SELECT value AS n FROM json_each(NEW.aliases)
            UNION SELECT NEW.physical WHERE NEW.physical <> '')
        WHERE NOT EXISTS (SELECT 1 FROM device_names x WHERE x.name = n
            AND x.resource = NEW.resource AND x.device_id = NEW.id);
END;

CREATE TRIGGER devices_names_del AFTER DELETE ON devices WHEN OLD.aliases <> '[]' BEGIN
    DELETE FROM aliases WHERE resource = OLD.resource AND device_id = OLD.id
        AND name IN (SELECT value FROM json_each(OLD.aliases));
END;
