-- podresd schema, version 10: a binding change writes its interval's
-- change into the change log's row, not into hist_bind. changes.hist holds
-- the binding operations (a device taken by a pod's container, or let go,
-- at a time) that the write made before the row's event and after the one
-- before it; podresd applies them to hist_bind in revision order
-- ("replaying", server/store_histw.c), up to the meta row 'hist_replayed'
-- (the last revision applied), before a ring overwrites a row not yet
-- applied and before the history is read. The row's page is written by
-- the change anyway: an interval costs a binding change no page of its own.
-- Every revision so far was applied as it was written. Applied inside one
-- transaction with PRAGMA user_version = 10; never edited once released.

ALTER TABLE changes ADD COLUMN hist BLOB;
INSERT INTO meta(key, value) VALUES ('hist_replayed',
    max(ifnull((SELECT max(revision) FROM changes), 0),
        ifnull((SELECT value FROM meta WHERE key = 'revision'), 0)));
