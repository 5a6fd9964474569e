-- podresd schema, version 3: a device's bindings row stays when the device is
-- let go (namespace, pod and container become '') and records in 'revision'
-- the revision at which its holder last changed. A device's revision is the
-- newer of devices.revision and that one, so a bind writes the rows of the
-- devices whose holder changed and not the devices' own rows. A pod's
-- bindings are found from the devices its stored containers list (a binding
-- is always of one of them), so the index by pod goes: a bind writes two
-- pages fewer (docs/DESIGN.md). Rows of schema 2 keep revision 0: their
-- devices' rows still hold the newest revision. A pod row written by a bind
-- lists those devices' keys in 'device_keys' ("resource|id" lines), so they
-- are read without walking the JSON; NULL (older rows, the kubelet mirror's)
-- means: walk 'containers'. Applied inside one transaction with
-- PRAGMA user_version = 3; never edited once released.

ALTER TABLE bindings ADD COLUMN revision INTEGER NOT NULL DEFAULT 0;
DROP INDEX bindings_pod;
ALTER TABLE pods ADD COLUMN device_keys TEXT;
