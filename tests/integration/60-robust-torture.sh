#!/usr/bin/env bash
# 60-robust-torture.sh - allocation-failure torture of the request paths.
#
# For each request below and N = 1, 2, ...: podresd starts on a copy of a
# prepared database with FAULT_ALLOC_AT=N FAULT_ALLOC_AFTER_START=1 (the N-th
# guarded allocation after start-up fails), gets the request, and must answer
# either a 5xx Status with the revision unchanged (nothing applied) or the
# normal answer; when it failed, the next request must succeed. At SIGTERM it
# exits 0 with a clean sanitizer log (LeakSanitizer in the sanitizer build).
# The walk of a request ends once it succeeds twice in a row (N is past its
# guarded allocations; the heartbeat may take one count a second).
# TORTURE=full walks every request (make torture); the default is the short
# walk of make test.
. "$(dirname "$0")/lib.sh"

START=$SECONDS
pd_config
pd_start
register example.com/gpu '[{"id":"g0"},{"id":"g1"},{"id":"g2"},{"id":"g3"}]'
bind ns held u-held g0
req PUT /v1/reservations/ns/r0 '{"containers":[{"name":"main","devices":[{"resourceName":"example.com/gpu","deviceIds":["g3"]}]}]}'
expect_code 201 "reservation r0"
pd_stop
cp "$PD_DB" "$T/template.db"

POD='{"uid":"u1","containers":[{"name":"c","devices":[{"resourceName":"example.com/gpu","deviceIds":["g1"]}],"cpuIds":[1,2]}]}'
DEVS='[{"id":"g0"},{"id":"g1","health":"Unhealthy"},{"id":"g2","topology":{"nodes":[{"ID":0}]}},{"id":"g3"},{"id":"g4","properties":{"k":"v"}}]'
ALLOC='{"uid":"u2","containers":[{"name":"c","requests":{"example.com/gpu":1}}]}'
RESV='{"containers":[{"name":"main","devices":[{"resourceName":"example.com/gpu","deviceIds":["g2"]}]}]}'
# METHOD PATH [BODY], one per line; the short walk does the first four.
REQS=(
    "PUT /v1/namespaces/ns/pods/p1 $POD"
    "PUT /v1/resources/example.com/gpu/devices {\"devices\":$DEVS}"
    "POST /v1/namespaces/ns/pods/p2/allocate $ALLOC"
    "GET /v1/pods"
    "PATCH /v1/resources/example.com/gpu/devices/g1 {\"health\":\"Unhealthy\"}"
    "PUT /v1/reservations/ns/r1 $RESV"
    "DELETE /v1/namespaces/ns/pods/held"
    "DELETE /v1/reservations/ns/r0"
    "GET /v1/devices?free=true"
    "GET /v1/allocatable"
    "GET /v1/reservations"
    "GET /v1/namespaces/ns/pods/held"
    "GET /metrics"
)
[ "${TORTURE:-short}" = full ] || REQS=("${REQS[@]:0:4}")

fresh() {
    rm -f "$PD_DB" "$PD_DB-wal" "$PD_DB-shm"
    cp "$T/template.db" "$PD_DB"
}

# send LINE - the request of one REQS line.
send() {
    local m=${1%% *} rest=${1#* } p b=""
    p=${rest%% *}
    [ "$p" != "$rest" ] && b=${rest#* }
    if [ -n "$b" ]; then req "$m" "$p" "$b"; else req "$m" "$p"; fi
}

total=0
for line in "${REQS[@]}"; do
    label=${line:0:60}
    fresh
    pd_start
    send "$line"
    want=$CODE
    pd_stop
    case "$want" in 2??) ;; *) fail "$label: baseline answer $want: $(out)" ;; esac
    n=0 oks=0 fails=0
    while [ "$oks" -lt 2 ]; do
        n=$((n + 1))
        [ "$n" -le 200 ] || fail "$label: still failing at N=$n"
        fresh
        FAULT_ALLOC_AT=$n FAULT_ALLOC_AFTER_START=1 pd_start
        r0=$(revision)
        send "$line"
        if [ "$CODE" = "$want" ]; then
            oks=$((oks + 1))
        else
            oks=0
            fails=$((fails + 1))
            case "$CODE" in 5??) ;; *) fail "$label N=$n: HTTP $CODE, want $want or a 5xx: $(out)" ;; esac
            [ "$(jqo .kind)" = Status ] || fail "$label N=$n: not a Status: $(out)"
            [ "$(revision)" = "$r0" ] || fail "$label N=$n: a failed request changed the revision"
            send "$line"
            [ "$CODE" = "$want" ] || fail "$label N=$n: the next request got $CODE, want $want: $(out)"
        fi
        pd_stop
    done
    total=$((total + n))
    ok "$label: N=1..$n, $fails failed cleanly with a 5xx, then the request succeeded"
done
echo "60-robust-torture: ${#REQS[@]} requests, $total fault points, $((SECONDS - START)) s"
