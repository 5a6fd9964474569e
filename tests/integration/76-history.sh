#!/usr/bin/env bash
# 76-history.sh - binding and health history (CONTRACT §9): intervals for a
# bind, a rebind to another pod and to a new uid, a release, a device removed
# while bound, health flaps and a restart in between; at= exactly at the
# boundaries (from inclusive, to exclusive); usage sums equal to the
# device-seconds computed here from the intervals read back; limit and
# continue; CSV; 400s naming the parameter; GET /v1/devices/{id}; the
# per-device metrics; pruning by age and by the row cap; and the intervals
# of the kubelet mirror.
. "$(dirname "$0")/lib.sh"

GPU=example.com/gpu
# ms RFC3339 - Unix milliseconds; rfc MS - back to RFC 3339.
ms() { date -u -d "$1" +%s%3N; }
rfc() { printf '%s.%03dZ' "$(date -u -d "@$(($1 / 1000))" +%Y-%m-%dT%H:%M:%S)" $(($1 % 1000)); }
hist() { req GET "/v1/history?$1"; expect_code 200 "history?$1"; }
# put_pod NS NAME UID DEVICE... - bind container main to those GPUs.
put_pod() {
    local ns=$1 name=$2 uid=$3
    shift 3
    req PUT "/v1/namespaces/$ns/pods/$name" "$(jq -nc --arg u "$uid" --arg r $GPU \
        '{uid:$u,containers:[{name:"main",devices:[{resourceName:$r,deviceIds:$ARGS.positional}]}]}' \
        --args "$@")"
    [ "$CODE" = 200 ] || [ "$CODE" = 201 ] || fail "bind $ns/$name: HTTP $CODE $(out)"
}
release() { req DELETE "/v1/namespaces/$1/pods/$2"; expect_code 200 "release $1/$2"; }
health() {
    req PATCH "/v1/resources/$GPU/devices/$1" "{\"health\":\"$2\"}"
    expect_code 200 "health $1 $2"
}
tick() { sleep 0.05; } # distinct milliseconds between writes

pd_config
pd_start
register $GPU '[{"id":"gpu-0"},{"id":"gpu-1"},{"id":"gpu-2"}]'
register example.com/nic '[{"id":"gpu-0"}]'

# ---- intervals ----
put_pod ml a uid-a gpu-0; tick
release ml a; tick
put_pod ml b uid-b gpu-0; tick
put_pod ml b uid-b2 gpu-0; tick # a new instance of the same pod
release ml b; tick
put_pod team c uid-c gpu-1; tick
register $GPU '[{"id":"gpu-0"},{"id":"gpu-2"}]' # gpu-1 removed while bound
tick
hist "device=gpu-1"
[ "$(jqo '.intervals | length')" = 1 ] && [ "$(jqo '.intervals[0].to')" = null ] ||
    fail "a removed device's binding still open: $(out)"
release team c; tick
health gpu-2 Unhealthy; tick
health gpu-2 Healthy; tick
health gpu-2 Unhealthy; tick
put_pod ml d uid-d gpu-2; tick

hist "device=gpu-0&resource=$GPU"
jq -c . "$T/out" > "$T/gpu0"
[ "$(jqo '[.intervals[] | .name + "/" + .uid + "/" + .container] | join(",")')" = \
    "a/uid-a/main,b/uid-b/main,b/uid-b2/main" ] || fail "gpu-0 intervals: $(out)"
[ "$(jqo '[.intervals[] | .to == null] | any')" = false ] || fail "gpu-0 left open: $(out)"
[ "$(jqo '.intervals[0].resourceName + " " + .intervals[0].deviceId + " " + .intervals[0].namespace')" = \
    "$GPU gpu-0 ml" ] || fail "interval fields: $(out)"
A_FROM=$(jqo '.intervals[0].from') A_TO=$(jqo '.intervals[0].to')
B_FROM=$(jqo '.intervals[1].from') B_TO=$(jqo '.intervals[1].to')
B2_FROM=$(jqo '.intervals[2].from') B2_TO=$(jqo '.intervals[2].to')
[ "$B_TO" = "$B2_FROM" ] || fail "a new uid closes and opens in one write: $B_TO vs $B2_FROM"
[ "$(ms "$A_FROM")" -lt "$(ms "$A_TO")" ] && [ "$(ms "$A_TO")" -lt "$(ms "$B_FROM")" ] ||
    fail "times out of order: $(out)"
hist "namespace=ml&name=b"
[ "$(jqo '[.intervals[].uid] | join(",")')" = "uid-b,uid-b2" ] || fail "by pod: $(out)"
hist "device=gpu-1"
[ "$(jqo '.intervals | length')" = 1 ] && [ "$(jqo '.intervals[0].to')" != null ] ||
    fail "gpu-1 closed on release: $(out)"
hist "device=gpu-1&kind=health"
[ "$(jqo '.intervals | length')" = 1 ] && [ "$(jqo '.intervals[0].to')" != null ] ||
    fail "a removed device is Unhealthy till it goes: $(out)"
ok "bind, release, rebind to another pod and to a new uid, removal while bound"

hist "device=gpu-2&kind=health"
[ "$(jqo '.intervals | length')" = 2 ] || fail "two Unhealthy spells: $(out)"
[ "$(jqo '.intervals[0].to != null and .intervals[1].to == null')" = true ] || fail "flaps: $(out)"
[ "$(jqo '.intervals[0].health')" = Unhealthy ] || fail "health field: $(out)"
H2_FROM=$(jqo '.intervals[1].from')

# ---- a restart in between ----
pd_stop
pd_start
hist "device=gpu-2"
[ "$(jqo '.intervals | length')" = 1 ] && [ "$(jqo '.intervals[0].to')" = null ] ||
    fail "an open interval survives the restart: $(out)"
D_FROM=$(jqo '.intervals[0].from')
tick
release ml d; tick
health gpu-2 Healthy
hist "device=gpu-2"
[ "$(jqo '.intervals[0].from')" = "$D_FROM" ] && [ "$(jqo '.intervals[0].to')" != null ] ||
    fail "closed after the restart: $(out)"
D_TO=$(jqo '.intervals[0].to')
hist "device=gpu-2&kind=health"
[ "$(jqo '.intervals[1].from')" = "$H2_FROM" ] && [ "$(jqo '.intervals[1].to')" != null ] ||
    fail "health closed after the restart: $(out)"
ok "intervals open across a restart close after it; health flaps"

# ---- at= at the boundaries ----
at_holder() { # T DEVICE - name/uid holding DEVICE at T, or ""
    hist "at=$1&resource=$GPU"
    jq -r --arg d "$2" '.intervals[] | select(.deviceId == $d) | .name + "/" + .uid' "$T/out"
}
[ "$(at_holder "$A_FROM" gpu-0)" = a/uid-a ] || fail "at=from holds: $(out)"
[ "$(at_holder "$(rfc $(($(ms "$A_FROM") - 1)))" gpu-0)" = "" ] || fail "before from: $(out)"
[ "$(at_holder "$(rfc $(($(ms "$A_TO") - 1)))" gpu-0)" = a/uid-a ] || fail "to-1ms holds: $(out)"
[ "$(at_holder "$A_TO" gpu-0)" = "" ] || fail "at=to does not hold: $(out)"
[ "$(at_holder "$B_TO" gpu-0)" = b/uid-b2 ] || fail "at a shared boundary, the next: $(out)"
[ "$(at_holder "$D_FROM" gpu-2)" = d/uid-d ] || fail "at= across the restart: $(out)"
hist "at=$B_FROM"
[ "$(jqo '[.intervals[].deviceId] | join(",")')" = gpu-0 ] || fail "at= lists held devices: $(out)"
ok "at= from inclusive, to exclusive, at every boundary"

# ---- usage = the device-seconds of the intervals read back ----
F=$(rfc $(($(ms "$A_FROM") + 7)))
TO=$(rfc $(($(ms "$D_TO") - 3))) # clips gpu-2's interval
for d in gpu-0 gpu-1 gpu-2; do hist "device=$d&resource=$GPU" && jq -c '.intervals[]' "$T/out"; done > "$T/all"
expect() { # GROUP_JQ - {group: ms} from the intervals, clipped to [F, TO)
    jq -s --arg f "$F" --arg t "$TO" "
      def ms: (.[0:19] + \"Z\" | fromdate) * 1000 + (.[20:23] | tonumber);
      map({g: ($1), v: ([([(.to // \$t | ms), (\$t | ms)] | min) - ([(.from | ms), (\$f | ms)] | max), 0] | max)})
      | group_by(.g) | map({(.[0].g): (map(.v) | add)}) | add" "$T/all"
}
got() { # BY GROUP_JQ - {group: ms} from /v1/usage
    req GET "/v1/usage?from=$F&to=$TO&by=$1"
    expect_code 200 "usage by $1"
    jq "[.usage[] | {(($2)): (.deviceSeconds * 1000 | round)}] | add // {}" "$T/out"
}
for by in namespace pod device; do
    case $by in
    namespace) g='.namespace + " " + .resourceName' ;;
    pod) g='.namespace + "/" + .name + " " + .resourceName' ;;
    device) g='.resourceName + " " + .deviceId' ;;
    esac
    want=$(expect "$g" | jq -S 'with_entries(select(.value > 0))')
    have=$(got $by "$g" | jq -S 'with_entries(select(.value > 0))')
    [ "$want" = "$have" ] || fail "usage by $by: $have, want $want"
done
[ "$(jq '.ml' <<< "$(expect '.namespace')")" -gt 0 ] || fail "no usage computed"
# whole milliseconds, written as such: 0.349, not 0.34899999999999998
req GET "/v1/usage?from=$F&to=$TO&by=device"
bad=$(grep -o '"deviceSeconds":[^,}]*' "$T/out" | grep -v '^"deviceSeconds":[0-9]*\(\.[0-9]\{1,3\}\)\?$' || true)
[ -z "$bad" ] || fail "deviceSeconds not in milliseconds: $bad"
ok "usage by namespace, pod and device equals the clipped intervals' device-seconds"

curl -s -H 'Accept: text/csv' --unix-socket "$PD_SOCK" \
    "http://localhost/v1/usage?from=$F&to=$TO&by=namespace" > "$T/csv"
[ "$(head -1 "$T/csv" | tr -d '\r')" = "namespace,resourceName,deviceSeconds" ] ||
    fail "CSV header: $(cat "$T/csv")"
grep -q "^ml,$GPU,[0-9]*\.[0-9]\{3\}" "$T/csv" || fail "CSV row: $(cat "$T/csv")"
curl -s -H 'Accept: text/csv' --unix-socket "$PD_SOCK" \
    "http://localhost/v1/history?device=gpu-0&resource=$GPU" > "$T/csv"
[ "$(wc -l < "$T/csv")" = 4 ] || fail "history CSV: $(cat "$T/csv")"
ok "CSV for usage and history"

# ---- limit and continue ----
tok="" n=0 names=""
while :; do
    hist "device=gpu-0&resource=$GPU&limit=1${tok:+&continue=$tok}"
    names="$names$(jqo '.intervals[] | .name + "/" + .uid'),"
    n=$((n + 1))
    tok=$(jqo '.continue // empty')
    [ -n "$tok" ] || break
    [ $n -lt 10 ] || fail "continue does not end"
done
[ "$names" = "a/uid-a,b/uid-b,b/uid-b2," ] || fail "pages: $names"
ok "limit=1 and continue walk the intervals in order"

# ---- windows ----
hist "device=gpu-0&resource=$GPU&from=$B_FROM&to=$B2_FROM"
[ "$(jqo '[.intervals[].uid] | join(",")')" = uid-b ] || fail "window [from, to): $(out)"
hist "device=gpu-0&resource=$GPU&from=$(rfc $(($(ms "$A_TO") - 1)))&to=$B_FROM"
[ "$(jqo '[.intervals[].uid] | join(",")')" = uid-a ] || fail "window reaching in: $(out)"

# ---- bad input ----
bad() { # QUERY WORD [PATH]
    req GET "${3:-/v1/history}?$1"
    expect_status 400 BadRequest "?$1"
    jqo .message | grep -q "$2" || fail "?$1: message does not name $2: $(out)"
}
bad "device=gpu-0&from=yesterday" from
bad "device=gpu-0&from=2026-02-30T00:00:00Z" from
bad "at=2026-01-01T00:00:00" at
bad "device=gpu-0&from=2026-01-02T00:00:00Z&to=2026-01-01T00:00:00Z" to
bad "device=gpu-0&colour=red" colour
bad "device=gpu-0&device=gpu-1" device
bad "device=gpu-0&limit=0" limit
bad "device=gpu-0&continue=abc" continue
bad "namespace=ml" name
bad "namespace=ml&name=b&kind=health" kind
bad "at=2026-01-01T00:00:00Z&from=2026-01-01T00:00:00Z" from
bad "" device
bad "from=$F&to=$TO&by=team" by /v1/usage
bad "from=$F" to /v1/usage
bad "from=$TO&to=$F" to /v1/usage
bad "from=$F&to=$TO&device=gpu-0" device /v1/usage
hist "device=gpu-0&from=2026-01-01T01:00:00.5%2B01:00&to=2126-01-01t00:00:00z"
ok "bad times, inverted windows, unknown by and unknown parameters are 400 naming them"

# ---- one device ----
req GET /v1/devices/gpu-0
expect_status 409 Conflict "an id of two resources"
jqo .message | grep -q "example.com/nic" && jqo .message | grep -q "$GPU" || fail "409: $(out)"
req GET "/v1/devices/gpu-0?resource=example.com/nic"
expect_code 200 "by id and resource"
[ "$(jqo '.device.resourceName + " " + .device.id')" = "example.com/nic gpu-0" ] || fail "$(out)"
req GET /v1/devices/gpu-2
expect_code 200 "by id"
[ "$(jqo '.device.id + " " + .device.health')" = "gpu-2 Healthy" ] && [ "$(jqo .revision)" -gt 0 ] ||
    fail "device: $(out)"
req GET /v1/devices/gpu-1
expect_status 404 NotFound "a device gone"
req GET "/v1/devices/gpu-2?x=1"
expect_status 400 BadRequest "unknown parameter"
req GET "/v1/devices/gpu-2?resource=Bad_Name"
expect_status 400 BadRequest "a bad resource"
req GET "/v1/devices/gpu%202"
expect_status 422 Invalid "a name out of the alias characters"
ok "GET /v1/devices/{id}: 200, 404, 409 naming the resources, ?resource="

# ---- metrics ----
put_pod ml e uid-e gpu-0
health gpu-2 Unhealthy
metrics() { curl -s --unix-socket "$PD_SOCK" http://localhost/metrics; }
metrics > "$T/m"
grep -qx "podres_device_allocated{resource=\"$GPU\",device=\"gpu-0\",namespace=\"ml\",pod=\"e\",container=\"main\"} 1" "$T/m" ||
    fail "allocated: $(grep podres_device "$T/m")"
grep -qx "podres_device_healthy{resource=\"$GPU\",device=\"gpu-2\"} 0" "$T/m" || fail "healthy 0"
grep -qx "podres_device_healthy{resource=\"$GPU\",device=\"gpu-0\"} 1" "$T/m" || fail "healthy 1"
s1=$(awk -v k="podres_device_seconds_total{namespace=\"ml\",resource=\"$GPU\"}" '$1 == k {print $2}' "$T/m")
[ -n "$s1" ] || fail "seconds_total: $(grep podres_device "$T/m")"
release ml e
metrics > "$T/m"
! grep -q 'pod="e"' "$T/m" || fail "a released device's series stays"
s2=$(awk -v k="podres_device_seconds_total{namespace=\"ml\",resource=\"$GPU\"}" '$1 == k {print $2}' "$T/m")
awk -v a="$s1" -v b="$s2" 'BEGIN { exit !(b >= a) }' || fail "seconds_total went back: $s1 -> $s2"
ok "podres_device_allocated, _healthy and _seconds_total"

# ---- retention and the row cap ----
pd_stop
before=$(pd_sql "SELECT count(*) FROM hist_bind")
pd_config "history_max_intervals: 3"
pd_start
wait_until 10 sh -c "[ \$(cp $PD_DB $T/c.db && cp $PD_DB-wal $T/c.db-wal 2>/dev/null; sqlite3 $T/c.db 'SELECT count(*) FROM hist_bind') -le 3 ]" ||
    fail "the row cap did not prune ($before rows)"
hist "device=gpu-0&resource=$GPU"
[ "$(jqo '.intervals[0].uid')" != uid-a ] || fail "the cap keeps the newest: $(out)"
pd_stop
pd_config "history_retention: 1s"
pd_start
health gpu-0 Unhealthy # an open interval stays, however old
sleep 2.5
hist "device=gpu-0&resource=$GPU"
[ "$(jqo '.intervals | length')" = 0 ] || fail "retention did not prune: $(out)"
hist "device=gpu-0&resource=$GPU&kind=health"
[ "$(jqo '.intervals | length')" = 1 ] || fail "an open interval was pruned: $(out)"
[ "$(pd_sql "SELECT count(*) FROM hist_pod")" = 0 ] || fail "pod rows left: $(pd_sql 'SELECT * FROM hist_pod')"
s3=$(curl -s --unix-socket "$PD_SOCK" http://localhost/metrics |
    awk -v k="podres_device_seconds_total{namespace=\"ml\",resource=\"$GPU\"}" '$1 == k {print $2}')
awk -v a="$s2" -v b="$s3" 'BEGIN { exit !(b >= a) }' || fail "pruning lowered seconds_total: $s2 -> $s3"
pd_stop
ok "pruned by the row cap and by age; open intervals and seconds_total stay"

# ---- the kubelet mirror ----
DEVS='{"resourceName":"example.com/gpu","deviceIds":["gpu-0","gpu-1"],"topology":{"nodes":[{"ID":0}]}}'
POD='{"name":"train","namespace":"ml","containers":[{"name":"main","devices":[{"resourceName":"example.com/gpu","deviceIds":["gpu-1"]}]}]}'
fk_state "{\"pods\":[$POD],\"allocatable\":{\"devices\":[$DEVS]}}"
fk_start
PD_DB=$T/db2/podresd.db
pd_config_kubelet
pd_start
wait_until 10 sh -c "curl -s --unix-socket $PD_SOCK 'http://localhost/v1/history?device=gpu-1' | grep -q train" ||
    fail "no kubelet-mode interval"
hist "device=gpu-1"
[ "$(jqo '.intervals[0].namespace + "/" + .intervals[0].name + "/" + .intervals[0].container')" = ml/train/main ] &&
    [ "$(jqo '.intervals[0].to')" = null ] || fail "kubelet interval: $(out)"
fk_state "{\"pods\":[],\"allocatable\":{\"devices\":[$DEVS]}}"
wait_until 10 bash -c "curl -s --unix-socket $PD_SOCK 'http://localhost/v1/history?device=gpu-1' | jqe '.intervals[0].to != null'" ||
    fail "the kubelet interval did not close: $(curl -s --unix-socket "$PD_SOCK" 'http://localhost/v1/history?device=gpu-1')"
pd_stop
ok "kubelet mode: the poll that first and last saw a binding opens and closes its interval"
