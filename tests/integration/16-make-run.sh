#!/usr/bin/env bash
# `make run`'s embedded default serves the demo devices, and the README's
# curl line works against it.
. "$(dirname "$0")/lib.sh"

make -s -n -C "$PODRES_ROOT" run > "$T/make-n.out" 2>&1 || fail "make -n run failed"
grep -q 'podresd --config deploy/dev/podresd.yaml' "$T/make-n.out" ||
    fail "make run does not start podresd on deploy/dev/podresd.yaml: $(cat "$T/make-n.out")"
if curl -s -o /dev/null http://127.0.0.1:9444/healthz; then
    fail "port 9444 is already in use; stop whatever runs there (make run?)"
fi
mkdir -p "$T/w/deploy/dev"
cp "$PODRES_ROOT/deploy/dev/podresd.yaml" "$T/w/deploy/dev/"
(cd "$T/w" && exec "$PODRES_BIN/podresd" --config deploy/dev/podresd.yaml) >> "$T/podresd.log" 2>&1 &
PD_PID=$!; PIDS+=("$PD_PID"); PD_SOCK=$T/w/var/podresd.sock
wait_until 10 curl -sf http://127.0.0.1:9444/healthz || fail "make run's podresd is not up"
line=$(grep -m1 "curl -s http://127.0.0.1:9444/v1/devices" "$PODRES_ROOT/README.md")
[ -n "$line" ] || fail "the README's first curl line is missing"
bash -c "$line" > "$T/readme.out" || fail "README curl line failed"
[ "$(jq -s 'length' "$T/readme.out")" -ge 4 ] || fail "README curl line: $(cat "$T/readme.out")"
jq -s -e 'map(.id) | index("gpu-0") != null' "$T/readme.out" >/dev/null || fail "no demo gpu-0"
ok "the embedded default serves the demo devices; the README line works"
pd_stop
