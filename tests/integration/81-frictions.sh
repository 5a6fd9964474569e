#!/usr/bin/env bash
# Issue 33's small frictions and the metrics listener: podresd's
# --metrics-listen on a non-loopback address serves GET /metrics, /healthz and
# /readyz and 404s everything else (no binding read, no write, no watch);
# podres-syncer's --metrics-listen does the same; the real port is logged for
# ":0"; every log line starts with an RFC 3339 UTC time (text and JSON); the
# debug request log names method, path, status and duration and never a
# header; docs/API.md's resume loop (follow.sh) lists again after a 410 and
# then follows live changes.
. "$(dirname "$0")/lib.sh"

# An address of this machine that is not loopback, when it has one.
IP=$(hostname -I 2>/dev/null | tr ' ' '\n' | grep -m1 -E '^[0-9]+\.[0-9]+\.[0-9]+\.[0-9]+$' || true)
[ -n "$IP" ] || IP=0.0.0.0
CIP=$([ "$IP" = 0.0.0.0 ] && echo 127.0.0.1 || echo "$IP") # where to connect
RFC3339='[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}\.[0-9]{3}Z'

# ---- 1. podresd's metrics-only listener
PD_LOG_LEVEL=debug pd_config "metrics_listen: $IP:0
history: 3"
pd_start --listen 127.0.0.1:0
grep -qE "listening on 127\.0\.0\.1:[1-9][0-9]* \(the loopback API; asked for 127\.0\.0\.1:0\)" "$T/podresd.log" ||
    fail "the real loopback port is not logged: $(cat "$T/podresd.log")"
PD_PORT=$(grep -oE 'listening on 127\.0\.0\.1:[0-9]+' "$T/podresd.log" | head -1 | sed 's/.*://')
MX=$(grep -oE "listening on [0-9.]+:[0-9]+ \(metrics" "$T/podresd.log" | head -1 | sed -E 's/.*:([0-9]+) .*/\1/')
[ -n "$MX" ] && [ "$MX" != 0 ] || fail "the metrics listener's port is not logged: $(cat "$T/podresd.log")"
tcp GET /healthz
expect_code 200 "the loopback API on the port logged"
ok "port 0: the ports the kernel picked are logged (loopback API $PD_PORT, metrics $IP:$MX)"

register example.com/gpu '[{"id":"gpu-0"},{"id":"gpu-1"}]'
req PUT /v1/namespaces/ml/pods/train-0 \
    '{"uid":"u1","containers":[{"name":"main","devices":[{"resourceName":"example.com/gpu","deviceIds":["gpu-0"]}]}]}'
expect_code 201 "bind"
# mx METHOD PATH [BODY] - to the metrics listener; body in $T/out, status in CODE.
mx() {
    local m=(-X "$1")
    [ "$1" != HEAD ] || m=(-I)
    CODE=$(curl -s -o "$T/out" -w '%{http_code}' "${m[@]}" ${3:+--data-binary "$3"} "http://$CIP:$MX$2")
}
mx GET /metrics
expect_code 200 "GET /metrics on the metrics listener"
grep -q '^podres_device_allocated{resource="example.com/gpu",device="gpu-0",namespace="ml",pod="train-0",container="main"} 1$' "$T/out" ||
    fail "the metrics listener's /metrics lacks the device series: $(head -c 600 "$T/out")"
mx GET /healthz
expect_code 200 "GET /healthz on the metrics listener"
mx GET /readyz
expect_code 200 "GET /readyz on the metrics listener"
mx HEAD /metrics
expect_code 200 "HEAD /metrics on the metrics listener"
rev=$(revision)
for p in /v1/pods /v1/namespaces/ml/pods/train-0 /v1/devices /v1/watch /version /v1/history /nope /; do
    mx GET "$p"
    expect_status 404 NotFound "GET $p on the metrics listener"
done
mx DELETE /v1/namespaces/ml/pods/train-0
expect_status 404 NotFound "DELETE on the metrics listener"
mx PUT /v1/resources/example.com/gpu/devices '{"devices":[]}'
expect_status 404 NotFound "PUT on the metrics listener"
mx POST /metrics '{}'
expect_status 404 NotFound "POST /metrics on the metrics listener"
[ "$(revision)" = "$rev" ] || fail "a request on the metrics listener changed the state"
ok "--metrics-listen $IP: GET/HEAD /metrics, /healthz, /readyz answered; reads, writes, watch and every other path 404, nothing changed"

# ---- 2. logs: an RFC 3339 time first; the debug request log
curl -s -o /dev/null -H 'Authorization: Bearer sekrit-token-81' "http://127.0.0.1:$PD_PORT/v1/pods?namespace=ml"
wait_until 5 grep -q 'GET /v1/pods on TCP: 200 in [0-9.]* ms' "$T/podresd.log" ||
    fail "no debug request log line for GET /v1/pods: $(tail -5 "$T/podresd.log")"
grep -qE "GET /metrics on the metrics listener: 200 in [0-9.]+ ms" "$T/podresd.log" || fail "no request log of the metrics listener"
grep -qE "PUT /v1/namespaces/ml/pods/train-0 on the unix socket: 201 in [0-9.]+ ms" "$T/podresd.log" ||
    fail "no request log of the bind"
! grep -q 'sekrit-token-81\|Authorization\|namespace=ml' "$T/podresd.log" || fail "a header or the query was logged"
! grep -q '"uid":"u1"' "$T/podresd.log" || fail "a body was logged"
bad=$(grep -vE "^time=$RFC3339 level=(err|warn|info|debug) mod=[a-z_]+ msg=\"" "$T/podresd.log" || true)
[ -z "$bad" ] || fail "log lines without a leading RFC 3339 time: $bad"
pd_stop
ok "text log lines start with time=RFC 3339 UTC ms; debug request log (method, path, listener, status, ms), no header, query or body"

"$PODRES_BIN/podresd" --db "$T/j.db" --socket "$T/j.sock" --log-format json --log-level debug > "$T/json.log" 2>&1 &
J=$!
PIDS+=("$J")
wait_until 10 curl -sf --unix-socket "$T/j.sock" http://localhost/healthz || fail "podresd (json log) did not start"
kill -TERM "$J"
wait "$J" || fail "podresd (json log) exited $?"
python3 - "$T/json.log" "$RFC3339" <<'EOF' || fail "JSON log lines: $(cat "$T/json.log")"
import json, re, sys
lines = open(sys.argv[1]).read().splitlines()
assert lines, "no lines"
for l in lines:
    d = json.loads(l)
    assert list(d)[:2] == ["time", "level"], l
    assert re.fullmatch(sys.argv[2], d["time"]), l
assert any("GET /healthz on the unix socket: 200" in json.loads(l)["msg"] for l in lines), "no request log"
EOF
ok "JSON log lines: {\"time\": RFC 3339 UTC ms, \"level\", ...}, the request log too"

# ---- 3. bad metrics_listen values stop start-up, naming the key
for v in 9446 10.0.0.1: nohost:9446 10.0.0.1:99999; do
    rc=0
    timeout 10 "$PODRES_BIN/podresd" --db "$T/m.db" --socket "$T/m.sock" --metrics-listen "$v" > "$T/start.log" 2>&1 || rc=$?
    [ "$rc" = 1 ] || fail "--metrics-listen $v: exit $rc"
    grep -q 'key "metrics_listen"' "$T/start.log" || fail "--metrics-listen $v: $(cat "$T/start.log")"
done
[ ! -e "$T/m.db" ] || fail "a bad --metrics-listen created the database"
ok "a bad --metrics-listen (no port, no host, a name, port > 65535) stops start-up naming the key"

# ---- 4. podres-syncer's --metrics-listen on the same non-loopback address
SP=$(python3 -c 'import socket; s=socket.socket(); s.bind(("",0)); print(s.getsockname()[1])')
cat > "$T/kc" <<'EOF'
apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: "https://127.0.0.1:1"}}]
users: [{name: u, user: {token: none}}]
contexts: [{name: c, context: {cluster: c, user: u}}]
current-context: c
EOF
"$PODRES_BIN/podres-syncer" --kubeconfig "$T/kc" --podresd-socket "$T/none.sock" --node-name n1 \
    --metrics-listen "$IP:$SP" > "$T/syncer.log" 2>&1 &
S=$!
PIDS+=("$S")
wait_until 10 curl -sf "http://$CIP:$SP/healthz" || fail "podres-syncer's metrics listener on $IP"
for p in /metrics /healthz; do
    [ "$(curl -s -o /dev/null -w '%{http_code}' "http://$CIP:$SP$p")" = 200 ] || fail "syncer $p"
done
[ "$(curl -s -o /dev/null -w '%{http_code}' "http://$CIP:$SP/readyz")" = 503 ] || fail "syncer /readyz without an API server"
for p in /v1/pods /apis /; do
    [ "$(curl -s -o /dev/null -w '%{http_code}' "http://$CIP:$SP$p")" = 404 ] || fail "syncer $p not 404"
done
[ "$(curl -s -o /dev/null -w '%{http_code}' -X POST "http://$CIP:$SP/metrics")" = 405 ] || fail "syncer POST /metrics"
kill -TERM "$S"
wait "$S" || fail "podres-syncer exited $?"
grep -qE "^time=$RFC3339 level=" "$T/syncer.log" || fail "syncer log lines lack the time: $(head -3 "$T/syncer.log")"
rm -f "$T/syncer.log"
ok "podres-syncer --metrics-listen $IP: /metrics and /healthz 200, /readyz 503 (no API server), others 404, POST 405; its log lines carry the time"

# ---- 5. docs/API.md's follow.sh: 410 before the stream -> list again -> live
PD_DB=$T/db/follow.db PD_LOG_LEVEL=info pd_config "history: 3"
pd_start
for i in 1 2 3 4 5 6; do
    register example.com/fpga "[{\"id\":\"f$i\"}]"
done
awk '/^# follow.sh/ { on = 1 } on && /^```/ { exit } on' "$PODRES_ROOT/docs/API.md" > "$T/follow.sh"
grep -q '^sock=/run/podresd/podresd.sock$' "$T/follow.sh" || fail "no follow.sh in docs/API.md"
# from revision 1, long out of the kept history (3 events): the first answer is a 410
sed -i -e "s|^sock=.*|sock=$PD_SOCK|" -e 's|^rev=""|rev=1|' "$T/follow.sh"
timeout $((10 * MULT)) bash "$T/follow.sh" > "$T/follow.out" 2>"$T/follow.err" &
F=$!
wait_until 5 grep -q '"type":"ADDED","kind":"Device".*"id":"f6"' "$T/follow.out" ||
    fail "follow.sh did not list again after the 410: $(cat "$T/follow.out" "$T/follow.err")"
register example.com/fpga '[{"id":"f7"}]'
wait_until 5 grep -q '"type":"DELETED","kind":"Device".*"id":"f6"' "$T/follow.out" ||
    fail "follow.sh did not follow: $(cat "$T/follow.out")"
grep -q '"type":"ADDED","kind":"Device".*"id":"f7"' "$T/follow.out" || fail "follow.sh: no ADDED f7: $(cat "$T/follow.out")"
kill -TERM "$F" 2>/dev/null || true
wait "$F" || true
pd_stop
ok "docs/API.md's follow.sh: a 410 before the stream lists again, then follows live changes"
