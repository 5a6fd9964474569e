-- podresd schema, version 6: hist_dev by device id alone. The history of a
-- device is asked for by a name, with or without its resource
-- (GET /v1/history?device=), and a name may stand for several devices
-- (schema 5), so each is looked up by its id. Applied inside one
-- transaction with PRAGMA user_version = 6; never edited once released.

CREATE INDEX hist_dev_device ON hist_dev(device_id);
