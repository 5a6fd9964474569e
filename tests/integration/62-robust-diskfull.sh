#!/usr/bin/env bash
# 62-robust-diskfull.sh - the database on a full filesystem (a 2 MiB tmpfs):
# writes answer a 507 InsufficientStorage (or 503) Status and are not
# acknowledged (the revision does not move), reads keep working, and once
# space is freed writes work again without a restart. Needs root for mount;
# skipped otherwise.
. "$(dirname "$0")/lib.sh"

MNT=$T/fs
mkdir -p "$MNT"
if [ "$(id -u)" != 0 ] || ! mount -t tmpfs -o size=2m tmpfs "$MNT" 2>/dev/null; then
    echo "skip - cannot mount a tmpfs (needs root)"
    exit 0
fi
unmount() { kill -9 "${PD_PID:-}" 2>/dev/null || true; wait 2>/dev/null || true; umount -l "$MNT" 2>/dev/null || true; cleanup; }
trap unmount EXIT

PD_DB=$MNT/podresd.db
pd_config
pd_start
register example.com/gpu '[{"id":"g0"},{"id":"g1"},{"id":"g2"},{"id":"g3"}]'
bind ns p0 u0 g0

# Fill the filesystem, leaving the database no room to grow.
dd if=/dev/zero of="$MNT/filler" bs=64k 2>/dev/null || true
sync
R0=$(revision)
big=$(python3 -c 'print("x" * 3000)')
full=0
for i in $(seq 1 400); do
    req PUT "/v1/resources/example.com/big$i/devices" \
        "{\"devices\":[{\"id\":\"d0\",\"properties\":{\"k\":\"$big\"}},{\"id\":\"d1\",\"properties\":{\"k\":\"$big\"}}]}"
    case "$CODE" in
        507) [ "$(jqo .reason)" = InsufficientStorage ] || fail "507 reason $(jqo .reason)"; full=1; break ;;
        503) [ "$(jqo .kind)" = Status ] || fail "503 without a Status: $(out)"; full=1; break ;;
        200) R0=$(revision) ;;
        *) fail "write on a full disk: HTTP $CODE $(out)" ;;
    esac
done
[ "$full" = 1 ] || fail "400 writes fit on a full 2 MiB filesystem?"
[ "$(jqo .kind)" = Status ] || fail "not a Status: $(out)"
ok "a write on a full disk answers $CODE $(jqo .reason)"

# More writes of every kind fail the same way and change nothing.
for n in 1 2 3; do
    case $n in
        1) req PUT "/v1/resources/example.com/more/devices" "{\"devices\":[{\"id\":\"d0\",\"properties\":{\"k\":\"$big\"}}]}" ;;
        2) req PUT /v1/namespaces/ns/pods/more "{\"uid\":\"m\",\"containers\":[{\"name\":\"c\",\"cpuIds\":[1]}]}" ;;
        3) req PATCH /v1/resources/example.com/gpu/devices/g1 '{"health":"Unhealthy"}' ;;
    esac
    case "$CODE" in 507|503) ;; *) fail "write $n on a full disk: HTTP $CODE $(out)" ;; esac
    [ "$(revision)" = "$R0" ] || fail "a refused write moved the revision"
done
req GET "/v1/namespaces/ns/pods/more"
expect_code 404 "a refused write is not visible"
ok "refused writes are not acknowledged: revision stays $R0"

# Reads work.
req GET /v1/pods
expect_code 200 "read on a full disk"
jqo '.podResources[].name' | grep -qx p0 || fail "p0 missing from reads"
req GET /v1/devices
expect_code 200 "devices on a full disk"
curl -sf --unix-socket "$PD_SOCK" http://localhost/healthz > /dev/null || fail "healthz on a full disk"
ok "reads keep working on a full disk"

# Free the space: writes work again, without a restart.
rm -f "$MNT/filler"
wait_until 5 sh -c "curl -s -o /dev/null -w '%{http_code}' -X PUT --unix-socket $PD_SOCK -H 'Content-Type: application/json' --data-binary '{\"uid\":\"a\",\"containers\":[{\"name\":\"c\"}]}' http://localhost/v1/namespaces/ns/pods/after | grep -qx 201" ||
    fail "writes do not resume after freeing space"
req GET /v1/namespaces/ns/pods/after
expect_code 200 "the write after freeing space"
[ "$(revision)" -gt "$R0" ] || fail "revision did not move after freeing space"
[ "$(pd_sql 'PRAGMA integrity_check')" = ok ] || fail "integrity_check after disk full"
ok "writes resume once space is freed, same process"
pd_stop
