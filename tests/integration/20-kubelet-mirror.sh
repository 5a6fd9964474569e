#!/usr/bin/env bash
# podresd with source kubelet mirrors the fake kubelet's pods, devices,
# topology, cpuIds and memory; changes reach the change feed within an
# interval, an unchanged kubelet produces no event and no revision; device
# and binding writes are 403, reservations stay writable.
. "$(dirname "$0")/lib.sh"


ready() { [ "$(curl -s -o /dev/null -w '%{http_code}' --unix-socket "$PD_SOCK" http://localhost/readyz)" = 200 ]; }
now_ms() { date +%s%3N; }
# feed_has TYPE KIND JQ_COND - an event of that type and kind whose object matches.
feed_has() {
    [ -n "$(jq -c --arg t "$1" --arg k "$2" \
        "select(.type==\$t and .kind==\$k and (.object | $3))" "$T/feed" 2>/dev/null)" ]
}
# changes - the number of ADDED/MODIFIED/DELETED events in the feed.
changes() { jq -c 'select(.type!="BOOKMARK")' "$T/feed" | wc -l; }

GPU0='{"resourceName":"example.com/gpu","deviceIds":["gpu-0","gpu-1"],"topology":{"nodes":[{"ID":0}]}}'
GPU1='{"resourceName":"example.com/gpu","deviceIds":["gpu-2"],"topology":{"nodes":[{"ID":1}]}}'
NIC='{"resourceName":"example.com/nic","deviceIds":["nic-0"],"topology":{"nodes":[{"ID":0},{"ID":1}]}}'
TRAIN='{"name":"train-0","namespace":"ml","containers":[{"name":"main","devices":[{"resourceName":"example.com/gpu","deviceIds":["gpu-1","gpu-0"],"topology":{"nodes":[{"ID":0}]}},{"resourceName":"example.com/nic","deviceIds":["nic-0"],"topology":{"nodes":[{"ID":0},{"ID":1}]}}],"cpuIds":[4,5,6,7],"memory":[{"memoryType":"memory","size":1073741824,"topology":{"nodes":[{"ID":0}]}},{"memoryType":"hugepages-2Mi","size":4194304}]},{"name":"sidecar","cpuIds":[8]}]}'
WEB='{"name":"web","namespace":"default","containers":[{"name":"nginx"}]}'

fk_state "{\"pods\":[$TRAIN,$WEB],\"allocatable\":{\"devices\":[$GPU0,$GPU1,$NIC],\"cpuIds\":[0,1,2,3,4,5,6,7,8],\"memory\":[{\"memoryType\":\"memory\",\"size\":8589934592,\"topology\":{\"nodes\":[{\"ID\":0}]}}]}}"
fk_start
pd_config_kubelet
pd_start
wait_until 10 ready || fail "podresd in kubelet mode did not become ready: $(curl -s --unix-socket "$PD_SOCK" http://localhost/readyz)"
ok "ready after the first sync"

req GET /v1/pods
expect_code 200 "list pods"
[ "$(jqo '.podResources | length')" = 2 ] || fail "2 pods expected: $(out)"
[ "$(jqo '.podResources[] | select(.name=="web") | .containers[0].name')" = nginx ] ||
    fail "the pod without devices is not kept: $(out)"
req GET /v1/namespaces/ml/pods/train-0
expect_code 200 "get train-0"
[ "$(jqo .podResources.uid)" = "" ] || fail "uid invented: $(out)"
c='.podResources.containers[] | select(.name=="main")'
[ "$(jqo "$c | .devices | map(.resourceName) | join(\",\")")" = "example.com/gpu,example.com/nic" ] ||
    fail "device groups: $(out)"
[ "$(jqo "$c | .devices[0].deviceIds | join(\",\")")" = "gpu-0,gpu-1" ] || fail "device ids: $(out)"
[ "$(jqo "$c | .devices[1].topology.nodes | map(.ID) | join(\",\")")" = "0,1" ] || fail "topology: $(out)"
[ "$(jqo "$c | .cpuIds | join(\",\")")" = "4,5,6,7" ] || fail "cpuIds: $(out)"
[ "$(jqo "$c | .memory[0].memoryType + \"=\" + (.memory[0].size|tostring)")" = "memory=1073741824" ] ||
    fail "memory: $(out)"
[ "$(jqo "$c | .memory[0].topology.nodes[0].ID")" = 0 ] || fail "memory topology: $(out)"
[ "$(jqo "$c | .memory[1].memoryType")" = hugepages-2Mi ] || fail "hugepages: $(out)"
[ "$(jqo '.podResources.containers[] | select(.name=="sidecar") | .cpuIds[0]')" = 8 ] || fail "sidecar"
ok "pods mirrored: devices, topology, cpuIds, memory; empty uid; a pod without devices kept"

req GET /v1/devices
[ "$(jqo '.devices | length')" = 4 ] || fail "4 devices expected: $(out)"
[ "$(jqo '[.devices[] | select(.health=="Healthy")] | length')" = 4 ] || fail "all healthy: $(out)"
[ "$(jqo '.devices[] | select(.id=="gpu-0") | .holder.name + "/" + .holder.container')" = train-0/main ] ||
    fail "holder: $(out)"
[ "$(jqo '.devices[] | select(.id=="gpu-2") | .topology.nodes[0].ID')" = 1 ] || fail "device topology"
[ "$(jqo '.devices[] | select(.id=="gpu-2") | .holder')" = null ] || fail "free device"
req GET /v1/allocatable
[ "$(jqo '.devices | length')" = 4 ] || fail "allocatable: $(out)"
[ "$(jqo '.cpuIds | join(",")')" = 0,1,2,3,4,5,6,7,8 ] || fail "allocatable cpuIds: $(out)"
[ "$(jq -c .memory "$T/out")" = '[{"memoryType":"memory","size":8589934592,"topology":{"nodes":[{"ID":0}]}}]' ] ||
    fail "allocatable memory: $(out)"
ok "devices, CPUs and memory mirrored from GetAllocatableResources, holders from List"

# An unchanged kubelet: no event, no revision, over ten polls.
rev=$(revision)
curl -sN --unix-socket "$PD_SOCK" "http://localhost/v1/watch?since=$rev" > "$T/feed" &
PIDS+=("$!")
calls=$(wc -l < "$T/calls.log")
sleep 2
[ "$(revision)" = "$rev" ] || fail "revision moved from $rev to $(revision) with nothing changed"
[ "$(changes)" = 0 ] ||
    fail "events without a change: $(cat "$T/feed")"
[ $(( $(wc -l < "$T/calls.log") - calls )) -ge 10 ] || fail "podresd did not keep polling"
ok "unchanged kubelet: $(( $(wc -l < "$T/calls.log") - calls )) calls in 2 s, no event, revision $rev"

# A change: gpu-2 goes to a new pod, train-0 gets more CPUs, nic-0 leaves
# the allocatable set while still bound (turns Unhealthy).
INFER='{"name":"infer-0","namespace":"ml","containers":[{"name":"main","devices":[{"resourceName":"example.com/gpu","deviceIds":["gpu-2"],"topology":{"nodes":[{"ID":1}]}}]}]}'
TRAIN2=$(jq -c '.containers[0].cpuIds += [9]' <<< "$TRAIN")
t0=$(now_ms)
fk_state "{\"pods\":[$TRAIN2,$WEB,$INFER],\"allocatable\":{\"devices\":[$GPU0,$GPU1]}}"
wait_until 5 feed_has ADDED PodResources '.name=="infer-0"' || fail "infer-0 not in the feed: $(cat "$T/feed")"
t1=$(now_ms)
wait_until 5 feed_has MODIFIED Device '.id=="nic-0" and .health=="Unhealthy"' || fail "nic-0 not Unhealthy"
sleep 0.5
feed_has MODIFIED PodResources '.name=="train-0" and (.containers[0].cpuIds | length) == 5' ||
    fail "train-0 MODIFIED"
feed_has MODIFIED Device '.id=="gpu-2" and .holder.name=="infer-0"' || fail "gpu-2 holder MODIFIED"
n=$(changes)
[ "$n" = 4 ] || fail "4 events expected (2 pods, gpu-2, nic-0), got $n: $(cat "$T/feed")"
req GET /v1/allocatable
[ "$(jqo '[.devices[].deviceIds[0]] | join(",")')" = "gpu-0,gpu-1,gpu-2" ] || fail "allocatable: $(out)"
ok "a kubelet change reached the feed in $((t1 - t0)) ms (interval 200 ms): exactly 4 events"

# Pods and devices leave: DELETED events.
fk_state "{\"pods\":[$WEB],\"allocatable\":{\"devices\":[$GPU0]}}"
wait_until 5 feed_has DELETED PodResources '.name=="train-0"' || fail "train-0 not DELETED"
wait_until 5 feed_has DELETED Device '.id=="nic-0"' || fail "nic-0 not DELETED"
wait_until 5 feed_has DELETED Device '.id=="gpu-2"' || fail "gpu-2 not DELETED"
req GET /v1/devices
[ "$(jqo '[.devices[].id] | join(",")')" = "gpu-0,gpu-1" ] || fail "devices after removal: $(out)"
[ "$(jqo '[.devices[] | select(.holder != null)] | length')" = 0 ] || fail "stale holders: $(out)"
ok "removed pods and devices are DELETED; their bindings are gone"

# Writes: devices and bindings are read-only, reservations writable.
req PUT /v1/resources/example.com/gpu/devices '{"devices":[{"id":"gpu-9"}]}'
expect_status 403 Forbidden "PUT devices"
req PATCH /v1/resources/example.com/gpu/devices/gpu-0 '{"health":"Unhealthy"}'
expect_status 403 Forbidden "PATCH device"
req PUT /v1/namespaces/ml/pods/x '{"uid":"u","containers":[]}'
expect_status 403 Forbidden "PUT pod"
req POST /v1/namespaces/ml/pods/x/allocate '{"uid":"u","containers":[]}'
expect_status 403 Forbidden "allocate"
req DELETE /v1/namespaces/default/pods/web
expect_status 403 Forbidden "DELETE pod"
req PUT /v1/reservations/ml/next '{"containers":[{"name":"main","devices":[{"resourceName":"example.com/gpu","deviceIds":["gpu-1"]}]}]}'
expect_code 201 "PUT reservation"
req DELETE /v1/reservations/ml/next
expect_code 200 "DELETE reservation"
ok "devices and bindings 403 in kubelet mode; reservations writable"

pd_stop
ok "clean shutdown with the poll thread running"
