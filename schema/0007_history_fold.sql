-- podresd schema, version 7: the history's lookups are kept behind its
-- writes. A binding change writes only rows appended at the end of their
-- table (its interval in hist_bind) and closes an interval in place; the
-- lookups by device (hist_ix_dev) and by pod (hist_ix_pod) get their
-- entries in small steps of the pruning tick (server/store_hist.c,
-- "folding"), up to the meta row 'hist_folded' (the last hist_bind id
-- folded). A read takes the rows past it from hist_bind itself. Index
-- entries written at every change land on a page of their own per device;
-- folded in steps, a page takes a step's entries at once. hist_usage gains
-- the device-milliseconds of an interval when a step folds it closed, or,
-- folded while still open (hist_unsettled), at the first step after it
-- closes. A pod instance's uid is kept in its intervals (hist_bind.uid):
-- a hist_pod row written at this schema stands for a pod name (uid ''),
-- which a new instance of the pod finds already there; a row of schemas
-- 4 to 6 stands for one instance and keeps its uid, its intervals an empty
-- one (a reader takes the two joined). Applied inside one transaction with
-- PRAGMA user_version = 7; never edited once released.

DROP INDEX hist_bind_dev;
DROP INDEX hist_bind_pod;
ALTER TABLE hist_bind ADD COLUMN uid TEXT NOT NULL DEFAULT '';

CREATE TABLE hist_ix_dev (
    dev     INTEGER NOT NULL,                  -- hist_dev.id
    from_ms INTEGER NOT NULL,
    id      INTEGER NOT NULL,                  -- hist_bind.id
    PRIMARY KEY (dev, from_ms, id)
) WITHOUT ROWID;

CREATE TABLE hist_ix_pod (
    pod INTEGER NOT NULL,                      -- hist_pod.id
    id  INTEGER NOT NULL,                      -- hist_bind.id
    PRIMARY KEY (pod, id)
) WITHOUT ROWID;

CREATE TABLE hist_unsettled (
    id INTEGER PRIMARY KEY                     -- hist_bind.id, folded while open
);

INSERT INTO hist_ix_dev(dev, from_ms, id) SELECT dev, from_ms, id FROM hist_bind ORDER BY 1, 2, 3;
INSERT INTO hist_ix_pod(pod, id) SELECT pod, id FROM hist_bind ORDER BY 1, 2;
INSERT INTO hist_unsettled(id) SELECT id FROM hist_bind WHERE to_ms IS NULL;
INSERT INTO meta(key, value) VALUES ('hist_folded', ifnull((SELECT max(id) FROM hist_bind), 0));
