-- podresd schema, version 9: a pod's intervals are found through the
-- devices it held. hist_pod_dev has a row for each pod (hist_pod row) and
-- device it held, with the span of the starts of its folded intervals on
-- that device and the last one's id; a read by pod takes each such
-- device's intervals in that span from hist_ix_dev, and those of the pod
-- past the fold from hist_bind. It replaces hist_ix_pod, which had an entry
-- for every interval: a fold step writes a row for each pod and device of
-- the step instead. A row whose last interval was pruned goes with the
-- pruning of pods (server/store_hist.c). Applied inside one transaction
-- with PRAGMA user_version = 9; never edited once released.

CREATE TABLE hist_pod_dev (
    pod      INTEGER NOT NULL,                 -- hist_pod.id
    dev      INTEGER NOT NULL,                 -- hist_dev.id
    first_ms INTEGER NOT NULL,                 -- the first start of its intervals
    last_ms  INTEGER NOT NULL,                 -- the last start
    last_id  INTEGER NOT NULL,                 -- the last interval's hist_bind.id
    PRIMARY KEY (pod, dev)
) WITHOUT ROWID;

INSERT INTO hist_pod_dev(pod, dev, first_ms, last_ms, last_id)
    SELECT pod, dev, min(from_ms), max(from_ms), max(id) FROM hist_bind
    WHERE id <= (SELECT value FROM meta WHERE key = 'hist_folded') GROUP BY pod, dev;
DROP TABLE hist_ix_pod;
