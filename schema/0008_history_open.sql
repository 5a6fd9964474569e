-- podresd schema, version 8: an open interval ends at 140737488355327
-- (2^47 - 1 ms, in the year 6429), not at NULL, in hist_bind and
-- hist_health. Any time until then is a 6-byte integer in a record, as
-- that end is: closing an interval writes its end over the old one in the
-- row's place. A NULL end takes no byte, so closing grew the row, and a
-- row grown on a full page moved rows to other pages (every page of
-- hist_bind is full but the last: rows are appended). A reader takes an
-- end at or past it for "open" (server/store_hist.c, HIST_OPEN). Applied
-- inside one transaction with PRAGMA user_version = 8; never edited once
-- released.

UPDATE hist_bind SET to_ms = 140737488355327 WHERE to_ms IS NULL;
UPDATE hist_health SET to_ms = 140737488355327 WHERE to_ms IS NULL;
