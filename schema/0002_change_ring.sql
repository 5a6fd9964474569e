-- podresd schema, version 2: the change log becomes a ring. Revision r is
-- kept in row 'slot' r % ring, where meta 'ring' is the number of slots
-- (--history): a new revision overwrites the row 'ring' revisions older in
-- place, so nothing is trimmed and no page is freed or allocated once the
-- ring is full. Ring 0 means not laid out yet (slot = revision): podresd
-- lays the rows out for its --history when it opens the database (store.c).
-- Applied inside one transaction with PRAGMA user_version = 2; never edited
-- once released.

CREATE TABLE changes_ring (
    slot      INTEGER PRIMARY KEY,             -- revision % ring
    revision  INTEGER NOT NULL,
    kind      TEXT NOT NULL,
    namespace TEXT NOT NULL DEFAULT '',
    event     TEXT NOT NULL
);
INSERT INTO changes_ring(slot, revision, kind, namespace, event)
    SELECT revision, revision, kind, namespace, event FROM changes;
DROP TABLE changes;
ALTER TABLE changes_ring RENAME TO changes;
INSERT INTO meta(key, value) VALUES ('ring', 0);
