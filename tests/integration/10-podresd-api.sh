#!/usr/bin/env bash
# podresd REST API in source api mode: devices, bind, allocate, reservations,
# release, filters, access rules and metrics.
. "$(dirname "$0")/lib.sh"

echo "s3cret-token" > "$T/token"
chmod 600 "$T/token"
pd_config "write_token_file: $T/token"
pd_start

# Socket and directory modes.
[ "$(stat -c %a "$PD_SOCK")" = 660 ] || fail "socket mode $(stat -c %a "$PD_SOCK"), want 660"
[ "$(stat -c %a "$T/run")" = 750 ] || fail "socket dir mode $(stat -c %a "$T/run"), want 750"
[ "$(stat -c %a "$PD_DB")" = 640 ] || fail "db mode $(stat -c %a "$PD_DB"), want 640"
ok "socket 0660 in a 0750 directory, database 0640"

register example.com/gpu '[{"id":"gpu-0","topology":{"nodes":[{"ID":0}]}},
  {"id":"gpu-1","topology":{"nodes":[{"ID":0}]}},{"id":"gpu-2","topology":{"nodes":[{"ID":1}]}},
  {"id":"gpu-3","topology":{"nodes":[{"ID":1}]}},{"id":"gpu-4","topology":{"nodes":[{"ID":1}]}}]'
[ "$(jqo '.devices | length')" = 5 ] || fail "5 devices expected"
rev=$(revision)
register example.com/gpu '[{"id":"gpu-0","topology":{"nodes":[{"ID":0}]}},
  {"id":"gpu-1","topology":{"nodes":[{"ID":0}]}},{"id":"gpu-2","topology":{"nodes":[{"ID":1}]}},
  {"id":"gpu-3","topology":{"nodes":[{"ID":1}]}},{"id":"gpu-4","topology":{"nodes":[{"ID":1}]}}]'
[ "$(revision)" = "$rev" ] || fail "re-registering the same devices changed the revision"
ok "register devices; the same set again is no change"

# Bind.
req PUT /v1/namespaces/ml/pods/train-0 \
  '{"uid":"uid-a","containers":[{"name":"main","devices":[{"resourceName":"example.com/gpu","deviceIds":["gpu-1","gpu-0"]}],"cpuIds":[2,3],"memory":[{"memoryType":"memory","size":1024}]}]}'
expect_code 201 "bind train-0"
[ "$(jqo '.podResources.containers[0].devices[0].deviceIds | join(",")')" = "gpu-0,gpu-1" ] ||
    fail "bound ids: $(out)"
[ "$(jqo '.podResources.containers[0].devices[0].topology.nodes[0].ID')" = 0 ] || fail "topology"
[ "$(jqo '.podResources.containers[0].cpuIds | join(",")')" = "2,3" ] || fail "cpuIds"
rev=$(revision)
req PUT /v1/namespaces/ml/pods/train-0 \
  '{"uid":"uid-a","containers":[{"name":"main","devices":[{"resourceName":"example.com/gpu","deviceIds":["gpu-0","gpu-1"]}],"cpuIds":[2,3],"memory":[{"memoryType":"memory","size":1024}]}]}'
expect_code 200 "same bind again"
[ "$(revision)" = "$rev" ] || fail "the same bind again made a new revision"
ok "bind; the same body again is 200 with no new revision"

req GET '/v1/devices?resource=example.com/gpu'
[ "$(jqo '.devices[] | select(.id=="gpu-0") | .holder.name')" = train-0 ] || fail "holder: $(out)"
[ "$(jqo '.devices[] | select(.id=="gpu-0") | .holder.uid')" = uid-a ] || fail "holder uid"
[ "$(jqo '.devices[] | select(.id=="gpu-2") | .holder')" = null ] || fail "free device holder"
req GET '/v1/devices?free=true'
[ "$(jqo '[.devices[].id] | join(",")')" = "gpu-2,gpu-3,gpu-4" ] || fail "free=true: $(out)"
ok "device view shows the holder; free=true filters"

req PUT /v1/namespaces/ml/pods/other \
  '{"uid":"uid-b","containers":[{"name":"c","devices":[{"resourceName":"example.com/gpu","deviceIds":["gpu-1"]}]}]}'
expect_status 409 Conflict "bind a held device"
jqo .message | grep -q "ml/train-0" || fail "409 does not name the holder: $(out)"
req PUT /v1/namespaces/ml/pods/other \
  '{"uid":"uid-b","containers":[{"name":"c","devices":[{"resourceName":"example.com/gpu","deviceIds":["gpu-9"]}]}]}'
expect_status 422 Invalid "unknown device"
req GET /v1/namespaces/ml/pods/other
expect_status 404 NotFound "failed binds leave nothing"
ok "held device 409 naming the holder; unknown device 422"

# Allocate: NUMA preference (NUMA 1 has 3 free devices, NUMA 0 none).
req POST /v1/namespaces/ml/pods/infer-0/allocate \
  '{"uid":"uid-c","containers":[{"name":"main","requests":{"example.com/gpu":2}}]}'
expect_code 201 "allocate"
first=$(jq -c .podResources.containers "$T/out")
[ "$(jqo '.podResources.containers[0].devices[0].deviceIds | join(",")')" = "gpu-2,gpu-3" ] ||
    fail "allocate chose $(out)"
rev=$(revision)
req POST /v1/namespaces/ml/pods/infer-0/allocate \
  '{"uid":"uid-c","containers":[{"name":"main","requests":{"example.com/gpu":2}}]}'
expect_code 200 "allocate again"
[ "$(jq -c .podResources.containers "$T/out")" = "$first" ] || fail "second allocate differs"
[ "$(revision)" = "$rev" ] || fail "repeated allocate made a new revision"
req POST /v1/namespaces/ml/pods/big/allocate \
  '{"uid":"uid-d","containers":[{"name":"main","requests":{"example.com/gpu":5}}]}'
expect_status 409 Conflict "allocate too many"
jqo .message | grep -q "requested 5, available 1" || fail "409 counts: $(out)"
ok "allocate: deterministic, NUMA-local, idempotent, 409 with counts"
# A resource the node has no device of is not a shortage: 404 naming it
# (a typo, or the wrong node), and nothing changes.
rev=$(revision)
req POST /v1/namespaces/ml/pods/big/allocate \
  '{"uid":"uid-d","containers":[{"name":"main","requests":{"example.com/gpu":1,"example.com/gpus":1}}]}'
expect_status 404 NotFound "allocate of an unknown resource"
jqo .message | grep -q 'no device of resource "example.com/gpus" is registered on this node' ||
    fail "404 message: $(out)"
[ "$(revision)" = "$rev" ] || fail "a refused allocate made a new revision"
req GET /v1/namespaces/ml/pods/big
expect_code 404 "the refused pod"
ok "allocate of a resource the node has never had: 404 NotFound naming it, no change"

# NUMA: with one free device on each of two nodes, a request of 2 spans both;
# a request of 1 takes the lowest NUMA id.
register example.com/nic '[{"id":"nic-b","topology":{"nodes":[{"ID":1}]}},{"id":"nic-a","topology":{"nodes":[{"ID":1}]}},{"id":"nic-z","topology":{"nodes":[{"ID":0}]}}]'
req POST /v1/namespaces/net/pods/p1/allocate '{"uid":"n1","containers":[{"name":"c","requests":{"example.com/nic":2}}]}'
expect_code 201
[ "$(jqo '.podResources.containers[0].devices[0].deviceIds | join(",")')" = "nic-a,nic-b" ] ||
    fail "2 NICs should come from NUMA 1: $(out)"
ok "allocate prefers one NUMA node over the lowest ids"

# Reservations: used by their pod, avoided by others.
req PUT /v1/reservations/ml/sched-0 \
  '{"containers":[{"name":"main","devices":[{"resourceName":"example.com/gpu","deviceIds":["gpu-4"]}]}]}'
expect_code 201 "reserve"
[ "$(jqo .reservation.state)" = Pending ] || fail "reservation state $(out)"
# its device groups are ContainerDevices: the topology of the devices registered
[ "$(jq -c '.reservation.containers[0].devices[0].topology' "$T/out")" = '{"nodes":[{"ID":1}]}' ] ||
    fail "reservation topology: $(out)"
req PUT /v1/reservations/ml/early '{"containers":[{"name":"main","devices":[{"resourceName":"example.com/gpu","deviceIds":["gpu-9"]}]}]}'
expect_code 201 "reserve a device not registered yet"
[ "$(jq -c '.reservation.containers[0].devices[0].topology' "$T/out")" = '{"nodes":[]}' ] ||
    fail "topology of a device not registered: $(out)"
req DELETE /v1/reservations/ml/early
expect_code 200 "release it"
req GET /v1/devices
[ "$(jqo '.devices[] | select(.id=="gpu-4") | .reservedFor.name')" = sched-0 ] || fail "reservedFor"
req POST /v1/namespaces/ml/pods/someone/allocate '{"uid":"x","containers":[{"name":"main","requests":{"example.com/gpu":1}}]}'
expect_status 409 Conflict "others never get a reserved device"
req PUT /v1/namespaces/ml/pods/someone '{"uid":"x","containers":[{"name":"main","devices":[{"resourceName":"example.com/gpu","deviceIds":["gpu-4"]}]}]}'
expect_status 409 Conflict "bind a device reserved for another pod"
jqo .message | grep -q "reserved for pod ml/sched-0" || fail "message: $(out)"
req PUT /v1/reservations/ml/thief '{"containers":[{"name":"main","devices":[{"resourceName":"example.com/gpu","deviceIds":["gpu-0"]}]}]}'
expect_status 409 Conflict "reserve a bound device"
req POST /v1/namespaces/ml/pods/sched-0/allocate '{"uid":"s0","containers":[{"name":"main","requests":{"example.com/gpu":1}}]}'
expect_code 201 "allocate with reservation"
[ "$(jqo '.podResources.containers[0].devices[0].deviceIds[0]')" = gpu-4 ] || fail "reservation not used: $(out)"
req GET /v1/reservations
[ "$(jqo '.reservations[0].state')" = Bound ] || fail "reservation should be Bound: $(out)"
req DELETE /v1/reservations/ml/sched-0 '{"preconditions":{"uid":"u"}}'
expect_status 400 BadRequest "a reservation has no uid to check"
req DELETE /v1/reservations/ml/sched-0 '{"preconditions":{"resourceVersion":"1"}}'
expect_status 409 Conflict "delete a reservation with another revision as precondition"
req GET /v1/reservations
req DELETE /v1/reservations/ml/sched-0 "{\"preconditions\":{\"resourceVersion\":\"$(jqo '.reservations[0].revision')\"}}"
expect_code 200 "delete reservation"
req GET /v1/reservations
[ "$(jqo '.reservations | length')" = 0 ] || fail "reservation left"
ok "a reservation is used by its pod's allocate and avoided by others"

# Release.
req DELETE '/v1/namespaces/ml/pods/train-0?uid=wrong'
expect_status 409 Conflict "release with another uid"
# A DeleteOptions body, as kubectl and client-go send one: its preconditions
# hold (uid; resourceVersion, the pod's revision); bad ones change nothing.
req GET /v1/namespaces/ml/pods/train-0
prev=$(jqo .podResources.revision)
req DELETE /v1/namespaces/ml/pods/train-0 '{"kind":"DeleteOptions","apiVersion":"v1","preconditions":{"uid":"wrong"}}'
expect_status 409 Conflict "release with preconditions.uid another uid"
req DELETE /v1/namespaces/ml/pods/train-0 "{\"preconditions\":{\"uid\":\"uid-a\",\"resourceVersion\":\"$((prev + 1000))\"}}"
expect_status 409 Conflict "release with preconditions.resourceVersion another revision"
jqo .message | grep -q "has revision $prev, not $((prev + 1000))" || fail "message: $(out)"
for body in 'garbage' '[]' '{"kind":"Pod"}' '{"dryRun":["All"]}' '{"preconditions":"x"}' \
    '{"preconditions":{"resourceVersion":7}}' '{"preconditions":{"resourceVersion":"07"}}' \
    '{"preconditions":{"uid":"uid-b"}}?uid=uid-a'; do
    path=/v1/namespaces/ml/pods/train-0
    case $body in *'?uid='*) path="$path?${body##*\?}" body=${body%%\?*} ;; esac
    req DELETE "$path" "$body"
    expect_status 400 BadRequest "release with the body $body"
done
req GET /v1/namespaces/ml/pods/train-0
expect_code 200 "the pod is still there after refused DELETEs"
req DELETE /v1/namespaces/ml/pods/train-0?uid=uid-a "{\"propagationPolicy\":\"Background\",\"gracePeriodSeconds\":0,\"preconditions\":{\"uid\":\"uid-a\",\"resourceVersion\":\"$prev\"}}"
expect_code 200 "release"
req DELETE /v1/namespaces/ml/pods/train-0
expect_status 404 NotFound "release twice"
req GET /v1/devices
[ "$(jqo '.devices[] | select(.id=="gpu-0") | .holder')" = null ] || fail "released device still held"
ok "release frees the devices; 404 and uid 409"

# Removing a bound device keeps it Unhealthy until release.
register example.com/gpu '[{"id":"gpu-0"},{"id":"gpu-1"}]'
req GET '/v1/devices?resource=example.com/gpu'
[ "$(jqo '.devices[] | select(.id=="gpu-2") | .health')" = Unhealthy ] || fail "removed bound device: $(out)"
[ "$(jqo '[.devices[] | select(.id=="gpu-3")] | length')" = 1 ] || fail "removed bound gpu-3 vanished"
req DELETE /v1/namespaces/ml/pods/infer-0
req GET '/v1/devices?resource=example.com/gpu'
[ "$(jqo '[.devices[].id] | join(",")')" = "gpu-0,gpu-1,gpu-4" ] || fail "after release: $(out)"
ok "a removed device stays listed Unhealthy until released"

# Health PATCH and filters; allocatable lists healthy devices only.
req PATCH /v1/resources/example.com/gpu/devices/gpu-1 '{"health":"Unhealthy"}'
expect_code 200 "patch health"
req GET '/v1/devices?health=Unhealthy'
[ "$(jqo '[.devices[].id] | join(",")')" = "gpu-1,gpu-4" ] || fail "health filter: $(out)"
req GET /v1/allocatable
jqo '[.devices[].deviceIds[]] | join(",")' | grep -q gpu-1 && fail "allocatable lists an unhealthy device"
req PATCH /v1/resources/example.com/gpu/devices/nope '{"health":"Healthy"}'
expect_status 404 NotFound "patch unknown device"
ok "health PATCH, health filter, allocatable"

req GET '/v1/pods?namespace=net'
[ "$(jqo '.podResources | length')" = 1 ] || fail "namespace filter"
req GET '/v1/pods?resource=example.com/gpu'
[ "$(jqo '[.podResources[].name] | join(",")')" = sched-0 ] || fail "resource filter: $(out)"
ok "pod filters"

# TCP: reads open, writes need the token.
tcp GET /v1/pods
expect_code 200 "TCP read"
tcp PUT /v1/namespaces/tcp/pods/p '{"uid":"t","containers":[]}'
expect_status 403 Forbidden "TCP write without token"
tcp PUT /v1/namespaces/tcp/pods/p '{"uid":"t","containers":[]}' wrong
expect_status 403 Forbidden "TCP write with a wrong token"
tcp PUT /v1/namespaces/tcp/pods/p '{"uid":"t","containers":[]}' s3cret-token
expect_code 201 "TCP write with the token"
CODE=$(curl -s -o "$T/out" -w '%{http_code}' -H 'Host: evil.example.com' "http://127.0.0.1:$PD_PORT/v1/pods")
expect_status 403 Forbidden "non-loopback Host"
ok "TCP reads open; writes need the bearer token; Host checked"

# A device dropped from the set while bound stays listed, Unhealthy, with its
# holder: another pod binding it gets 409 naming the holder, as for any held
# device (it used to get 422 "unknown device"). An allocate whose reservation
# names a device not registered is 409 too: the request is fine.
register example.com/fpga '[{"id":"f0"},{"id":"f1"}]'
req PUT /v1/namespaces/hw/pods/a '{"uid":"ua","containers":[{"name":"c","devices":[{"resourceName":"example.com/fpga","deviceIds":["f0"]}]}]}'
expect_code 201 "bind f0"
register example.com/fpga '[{"id":"f1"}]'
req GET '/v1/devices?resource=example.com/fpga'
[ "$(jqo '.devices[] | select(.id=="f0") | "\(.health) \(.holder.name)"')" = "Unhealthy a" ] ||
    fail "a dropped, bound device: $(out)"
req PUT /v1/namespaces/hw/pods/b '{"uid":"ub","containers":[{"name":"c","devices":[{"resourceName":"example.com/fpga","deviceIds":["f0"]}]}]}'
expect_status 409 Conflict "bind a dropped device another pod holds"
jqo .message | grep -q "held by pod hw/a" || fail "message: $(out)"
req DELETE /v1/namespaces/hw/pods/a
expect_code 200 "release a"
req PUT /v1/namespaces/hw/pods/b '{"uid":"ub","containers":[{"name":"c","devices":[{"resourceName":"example.com/fpga","deviceIds":["f0"]}]}]}'
expect_status 422 Invalid "bind a dropped device once free: unknown"
req PUT /v1/reservations/hw/d '{"containers":[{"name":"m","devices":[{"resourceName":"example.com/fpga","deviceIds":["f9"]}]}]}'
expect_code 201 "reserve a device not registered"
req POST /v1/namespaces/hw/pods/d/allocate '{"uid":"ud","containers":[{"name":"m","requests":{"example.com/fpga":1}}]}'
expect_status 409 Conflict "allocate with a reservation that cannot be used"
jqo .message | grep -q "reservation of pod hw/d cannot be used: unknown device example.com/fpga f9" ||
    fail "message: $(out)"
req DELETE /v1/reservations/hw/d
expect_code 200 "release the reservation"
ok "a dropped device held elsewhere: 409; an unusable reservation: 409"

# A declared body over the first block podresd sets aside for it (64 KiB,
# http.c) is read whole: 2,000 devices with 400-byte properties, ~900 KiB.
python3 -c 'import json; print(json.dumps({"devices": [{"id": "d%d" % i, "properties":
    {"pad": "x" * 400}} for i in range(2000)]}))' > "$T/wide.json"
[ "$(stat -c %s "$T/wide.json")" -gt $((800 * 1024)) ] || fail "wide.json is too small to test"
req PUT /v1/resources/example.com/wide/devices "@$T/wide.json"
expect_code 200 "register 2000 devices in one ~900 KiB body"
req GET '/v1/devices?resource=example.com/wide'
[ "$(jqo '[.devices[] | select(.properties.pad | length == 400)] | length')" = 2000 ] ||
    fail "a ~900 KiB body: $(jqo '.devices | length') devices stored, want 2000 whole"
ok "a ~900 KiB body is read whole"

# Metrics and health.
curl -sf --unix-socket "$PD_SOCK" http://localhost/readyz | grep -q ok || fail readyz
for p in healthz readyz; do # exactly "ok", as the API server's own
    [ "$(curl -s --unix-socket "$PD_SOCK" "http://localhost/$p" | od -An -tx1 | tr -d ' \n')" = 6f6b ] ||
        fail "/$p: $(curl -s --unix-socket "$PD_SOCK" "http://localhost/$p" | od -c)"
done
req POST /v1/pods '{}'
expect_code 405 "POST /v1/pods"
curl -s --unix-socket "$PD_SOCK" http://localhost/metrics > "$T/metrics"
# a 405 matched no route: it is counted as unmatched, not under GET /v1/pods
grep -qF 'route="/v1/pods",code="405"' "$T/metrics" && fail "a POST's 405 counted under GET /v1/pods"
for m in 'podresd_http_requests_total{method="PUT",route="/v1/namespaces/{ns}/pods/{name}",code="409"}' \
         'podresd_http_requests_total{method="",route="unmatched",code="405"} 1' \
         'podresd_http_request_duration_seconds_bucket' 'podresd_pods 3' \
         'podresd_devices{resource="example.com/gpu",health="Unhealthy"} 2' \
         'podresd_bound_devices' 'podresd_revision' 'podresd_watchers 0'; do
    grep -qF "$m" "$T/metrics" || fail "metrics lack $m"
done
ok "/metrics exposes requests, latency, pods, devices, revision, watchers"
grep -q "s3cret-token" "$T/podresd.log" && fail "the token appears in the log"
pd_stop
ok "clean shutdown"
