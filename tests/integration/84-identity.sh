#!/usr/bin/env bash
# One device, any name: aliases registered and found, an alias naming two
# devices refused (409 naming both, nothing changed), identity rules of the
# config (a bad pattern stops start-up naming the key), and in kubelet mode
# with the fake kubelet: time-sliced replicas, MIG devices and DRA
# dynamicResources in one List, each found by its GPU's UUID, a DRA driver's
# published devices (PUT /v1/drivers) with their UUID alias, history by UUID.
. "$(dirname "$0")/lib.sh"

UUID_A=GPU-0a1b2c3d-0000-1111-2222-333344445555
UUID_B=GPU-0b1b2c3d-0000-1111-2222-333344445555
UUID_C=GPU-0c1b2c3d-0000-1111-2222-333344445555

# ---- start-up: a bad identity pattern names its key ----
pd_config "identity:
  - resource: example.com/nic
    pattern: '^(?<physical>card[0-9]+-vf[0-9'"
rc=0
"$PODRES_BIN/podresd" --config "$T/podresd.yaml" > "$T/bad.log" 2>&1 || rc=$?
[ "$rc" -ne 0 ] || fail "podresd started with a bad identity pattern"
grep -q 'identity\[0\].pattern' "$T/bad.log" || fail "the error does not name the key: $(cat "$T/bad.log")"
pd_config "identity:
  - resource: '*'
    pattern: '^(?<physical>(a|b?)+)\$'"
rc=0
timeout 20 "$PODRES_BIN/podresd" --config "$T/podresd.yaml" > "$T/bad.log" 2>&1 || rc=$?
[ "$rc" -eq 1 ] || fail "a pattern the C library may never finish matching: exit $rc: $(cat "$T/bad.log")"
grep -q 'identity\[0\].pattern' "$T/bad.log" || fail "the error does not name the key: $(cat "$T/bad.log")"
ok "a bad identity pattern stops start-up naming identity[0].pattern"

# ---- api mode: registered aliases, a rule of the config, conflicts ----
pd_config "identity:
  - resource: example.com/nic
    pattern: '^(?<physical>card[0-9]+)-vf[0-9]+\$'"
pd_start
req PUT /v1/resources/example.com/gpu/devices \
    "{\"devices\":[{\"id\":\"gpu-0\",\"aliases\":[\"nvidia0\",\"$UUID_A\",\"0000:3b:00.0\"]},{\"id\":\"gpu-1\",\"aliases\":[\"nvidia1\"]}]}"
expect_code 200 "register GPUs with aliases"
[ "$(jqo '.devices[0].aliases | join(",")')" = "0000:3b:00.0,$UUID_A,nvidia0" ] || fail "aliases: $(out)"
[ "$(jqo '.devices[0].physical')" = gpu-0 ] || fail "a whole device is its own physical: $(out)"
for name in nvidia0 "$UUID_A" 0000:3b:00.0 gpu-0; do
    req GET "/v1/devices/$name"
    expect_code 200 "GET /v1/devices/$name"
    [ "$(jqo '.device.id + " " + (.devices | map(.id) | join(","))')" = "gpu-0 gpu-0" ] ||
        fail "$name: $(out)"
done
req GET /v1/devices/nvidia7
expect_code 404 "an unknown name"
ok "a device is found by its id and by each alias"

rev=$(revision)
req PUT /v1/resources/example.com/nic/devices '{"devices":[{"id":"nic-0","aliases":["nvidia1"]}]}'
expect_status 409 Conflict "an alias of another device"
out | grep -q 'nvidia1' && out | grep -q 'nic-0' && out | grep -q 'gpu-1' || fail "409 names both: $(out)"
req PUT /v1/resources/example.com/nic/devices '{"devices":[{"id":"nic-0","aliases":["gpu-0"]}]}'
expect_status 409 Conflict "an alias that is another device's id"
req PUT /v1/resources/example.com/nic/devices '{"devices":[{"id":"nvidia0"}]}'
expect_status 409 Conflict "an id that is another device's alias"
[ "$(revision)" = "$rev" ] || fail "a refused write changed the revision"
req GET /v1/devices/nic-0
expect_code 404 "nothing of the refused writes is kept"
ok "an alias naming two devices is 409 naming both; nothing changes"

req PUT /v1/resources/example.com/nic/devices '{"devices":[{"id":"card0-vf0"},{"id":"card0-vf1"},{"id":"card1-vf0"}]}'
expect_code 200 "register VFs"
[ "$(jqo '.devices | map(.physical) | join(",")')" = "card0,card0,card1" ] || fail "rule physical: $(out)"
req GET /v1/devices/card0
expect_code 200 "the physical id of a config rule"
[ "$(jqo '(.device // "-" | tostring) + " " + (.devices | map(.id) | join(","))')" = "- card0-vf0,card0-vf1" ] ||
    fail "card0: $(out)"
req GET "/v1/devices/MIG-GPU-aa/1/0"
expect_code 404 "a MIG id with slashes is a name"
ok "a rule of the config gives the physical id; the physical id finds its slices"
pd_stop

# ---- kubelet mode: replicas, MIG devices and DRA in one List ----
rm -f "$T/podresd.yaml"
PD_DB=$T/db2/podresd.db
REPLICAS="{\"resourceName\":\"nvidia.com/gpu\",\"deviceIds\":[\"$UUID_A::0\",\"$UUID_A::1\",\"$UUID_A::2\"]}"
MIGS="{\"resourceName\":\"nvidia.com/mig-1g.10gb\",\"deviceIds\":[\"MIG-$UUID_B/1/0\",\"MIG-$UUID_B/2/0\"]}"
TRAIN="{\"name\":\"train\",\"namespace\":\"ml\",\"containers\":[{\"name\":\"main\",\"devices\":[{\"resourceName\":\"nvidia.com/gpu\",\"deviceIds\":[\"$UUID_A::2\"]}]}]}"
MIGPOD="{\"name\":\"infer\",\"namespace\":\"ml\",\"containers\":[{\"name\":\"main\",\"devices\":[{\"resourceName\":\"nvidia.com/mig-1g.10gb\",\"deviceIds\":[\"MIG-$UUID_B/2/0\"]}]}]}"
DRAPOD='{"name":"dra","namespace":"ml","containers":[{"name":"main","dynamicResources":[{"claimName":"gpu-claim","claimNamespace":"ml","claimResources":[{"driverName":"gpu.example.com","poolName":"test-node","deviceName":"gpu-0","cdiDevices":[{"name":"example.com/gpu=gpu-0"}]}]}]}]}'
fk_state "{\"pods\":[$TRAIN,$MIGPOD,$DRAPOD],\"allocatable\":{\"devices\":[$REPLICAS,$MIGS]}}"
fk_start
pd_config_kubelet
pd_start
held() { req GET "/v1/devices/$1" && [ "$CODE" = 200 ] && [ "$(jqo "$2")" = "$3" ]; }
wait_until 10 held "$UUID_A" '.devices | map(.id + "=" + (.holder.name // "-")) | join(",")' \
    "$UUID_A::0=-,$UUID_A::1=-,$UUID_A::2=train" || fail "replicas by UUID: $(out)"
[ "$(jqo '.device')" = null ] || fail "no device is the GPU itself: $(out)"
ok "GET /v1/devices/<uuid> finds the time-sliced replicas and their holder"
held "$UUID_B" '.devices | map(.id + "=" + (.holder.name // "-")) | join(",")' \
    "MIG-$UUID_B/1/0=-,MIG-$UUID_B/2/0=infer" || fail "MIG devices by UUID: $(out)"
held "MIG-$UUID_B/2/0" '.device.physical' "$UUID_B" || fail "a MIG device's physical: $(out)"
ok "GET /v1/devices/<uuid> finds the MIG devices of the GPU"

held test-node/gpu-0 '.device.resourceName + " " + .device.holder.name + " " + .device.holder.claim.namespace + "/" + .device.holder.claim.name' \
    "gpu.example.com dra ml/gpu-claim" || fail "DRA device: $(out)"
req GET /v1/namespaces/ml/pods/dra
[ "$(jqo '.podResources.containers[0].devices[0] | .resourceName + " " + (.deviceIds | join(",")) + " " + .claims[0].name')" = \
    "gpu.example.com test-node/gpu-0 gpu-claim" ] || fail "DRA device group: $(out)"
[ "$(jqo '.podResources.containers[0].dynamicResources[0].claimName')" = gpu-claim ] ||
    fail "dynamicResources kept: $(out)"
# the driver's ResourceSlice devices, as podres-syncer hands them over
req PUT /v1/resources/example.com/gpu/devices '{"devices":[{"id":"x"}]}'
expect_code 403 "device writes are read-only with source kubelet"
tcp PUT /v1/drivers/gpu.example.com/devices '{"devices":[]}'
expect_code 403 "driver writes over TCP need the token"
req PUT /v1/drivers/gpu.example.com/devices \
    "{\"devices\":[{\"id\":\"test-node/gpu-0\",\"aliases\":[\"$UUID_C\"],\"properties\":{\"uuid\":\"$UUID_C\"}},{\"id\":\"test-node/gpu-1\",\"aliases\":[\"GPU-other\"]}]}"
expect_code 200 "a DRA driver's devices in kubelet mode"
req PUT /v1/drivers/Bad_Driver/devices '{"devices":[]}'
expect_code 422 "a bad driver name"
held "$UUID_C" '.device.id + " " + .device.holder.claim.name + " " + .device.properties.uuid' \
    "test-node/gpu-0 gpu-claim $UUID_C" || fail "DRA device by UUID: $(out)"
req GET /v1/allocatable
[ "$(jqo '[.devices[] | select(.resourceName == "gpu.example.com")] | length')" = 0 ] ||
    fail "DRA devices are not allocatable: $(out)"
req GET "/v1/devices?resource=gpu.example.com"
[ "$(jqo '.devices | map(.id) | join(",")')" = test-node/gpu-0,test-node/gpu-1 ] ||
    fail "a driver as resource filter: $(out)"
ok "a DRA device is held with its claim and found by the UUID its driver published"

# the pods end: history by UUID still names the replica's holder
fk_state "{\"pods\":[],\"allocatable\":{\"devices\":[$REPLICAS,$MIGS]}}"
wait_until 10 held "$UUID_A" '.devices | map(.holder.name // "-") | join(",")' "-,-,-" ||
    fail "released: $(out)"
req GET "/v1/history?device=$UUID_A"
expect_code 200 "history by UUID"
[ "$(jqo '.intervals | map(.deviceId + "=" + .name + (if .to == null then " open" else " closed" end)) | join(",")')" = \
    "$UUID_A::2=train closed" ] || fail "history by UUID: $(out)"
req GET "/v1/history?device=$UUID_C"
[ "$(jqo '.intervals | map(.deviceId + "=" + .name) | join(",")')" = "test-node/gpu-0=dra" ] ||
    fail "history by a DRA alias: $(out)"
held "$UUID_C" '.device.holder' null || fail "the published DRA device stays, free: $(out)"
ok "history by UUID covers a replica's holder and a DRA device's"
pd_stop
