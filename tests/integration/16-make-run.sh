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

# The README's "Use from bash" block, run as written (twice: it leaves nothing behind) in make
# run's directory: it writes its own resource, and the demo's sets stay as they were.
awk '/^## Use from bash$/ { on = 1 } on && /^```sh$/ { body = 1; next } body && /^```$/ { exit } body' \
    "$PODRES_ROOT/README.md" > "$T/use.sh"
grep -q 'example.com/fpga' "$T/use.sh" || fail "no 'Use from bash' block with its own resource: $(cat "$T/use.sh")"
curl -s http://127.0.0.1:9444/v1/devices | jq -S '[.devices[] | {resourceName, id, health, holder}]' > "$T/before.json"
for run in 1 2; do
    (cd "$T/w" && timeout $((30 * MULT)) bash -e -o pipefail "$T/use.sh") > "$T/use.out" 2>&1 ||
        fail "the README's 'Use from bash' block (run $run): $(cat "$T/use.out")"
    grep -q '"namespace": "ml"' "$T/use.out" || fail "no holder of fpga-0 shown: $(cat "$T/use.out")"
    grep -qx 'ml/train-0 fpga-0' "$T/use.out" && grep -qx 'ml/train-1 fpga-1' "$T/use.out" ||
        fail "the pods' lines (run $run): $(cat "$T/use.out")"
    grep -q '"type":"BOOKMARK"' "$T/use.out" || fail "the watch showed no bookmark: $(cat "$T/use.out")"
done
curl -s http://127.0.0.1:9444/v1/devices | jq -S '[.devices[] | select(.resourceName != "example.com/fpga") | {resourceName, id, health, holder}]' > "$T/after.json"
cmp -s "$T/before.json" "$T/after.json" || fail "the README block changed the demo's devices: $(diff "$T/before.json" "$T/after.json")"
[ "$(curl -s http://127.0.0.1:9444/v1/pods | jq '.podResources | length')" = 0 ] || fail "the README block left pods behind"
ok "the README's 'Use from bash' block runs as written against make run (twice), on its own example.com/fpga; the demo devices unchanged"
pd_stop
