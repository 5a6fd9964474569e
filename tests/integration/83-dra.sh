#!/usr/bin/env bash
# DRA on the real control plane: a ResourceSlice of the node (resource.k8s.io/v1,
# created through the API) with uuid and pciBusID attributes, a DeviceClass, and a
# ResourceClaim allocated to a pod (status subresource) that the fake kubelet's List
# gives as the container's dynamicResources. podres-syncer, as its ServiceAccount
# with deploy/rbac.yaml, hands the slice's devices to podresd (podresd in kubelet
# mode), which then finds the DRA device by its UUID or PCI address; the
# DeviceBinding shows the DRA device with its claim, NodeDevices with its aliases,
# and `kubectl podres who <uuid>` names the pod and the claim. Also: ResourceSlices
# not served (a 404 through the fault proxy) leave the rest of the syncer working;
# nothing is pushed while nothing changes; a MIG slice (parentUUID) is found through
# its GPU; podresd restarted is told again; an alias that names another device is
# refused (409), logged and counted; a deleted slice empties the driver's set.
. "$(dirname "$0")/lib.sh"

UUID=GPU-3b0f6ad2-1c55-4a1f-9e53-2b8d2f1a7c01
MIG=MIG-5e1f0c3a-8d2b-4c6e-a1f7-0b9e3d2c4a55
PCI=0000:3b:00.0
DRIVER=gpu.example.com
RS=/apis/resource.k8s.io/v1
ND=$DVB/nodedevices

# The kubelet's allocatable: one device-plugin GPU, whose id a DRA alias will clash with.
ALLOC='"allocatable":{"devices":[{"resourceName":"example.com/gpu","deviceIds":["GPU-dp-7"],"topology":{"nodes":[{"ID":0}]}}],"cpuIds":[],"memory":[]}'
# train-0's container holds claim-1's device gpu-0 of pool test-node (DRA).
TRAIN='{"name":"train-0","namespace":"ml","containers":[{"name":"main","dynamicResources":[{"claimName":"claim-1","claimNamespace":"ml","claimResources":[{"driverName":"gpu.example.com","poolName":"test-node","deviceName":"gpu-0"}]}]}]}'
INFER='{"name":"infer-0","namespace":"ml","containers":[{"name":"main","devices":[{"resourceName":"example.com/gpu","deviceIds":["GPU-dp-7"],"topology":{"nodes":[{"ID":0}]}}]}]}'

# kp ARGS... - `kubectl podres ARGS` through the real kubectl as the cluster admin;
# stdout in $T/kp.out; must succeed with no sanitizer report.
kp() {
    local rc=0
    PATH="$PODRES_BIN:$PATH" "$KUBECTL" podres --kubeconfig "$KCFG" "$@" > "$T/kp.out" 2> "$T/kp.err" || rc=$?
    ! grep -qE 'AddressSanitizer|LeakSanitizer|runtime error:' "$T/kp.err" || { cat "$T/kp.err" >&2; fail "sanitizer report from kubectl podres $*"; }
    [ "$rc" = 0 ] || fail "kubectl podres $*: exit $rc: $(cat "$T/kp.err")"
}
line() { grep -qE -- "$1" "$T/kp.out" || fail "no line /$1/ in:
$(cat "$T/kp.out")"; }
metric() { curl -s "http://127.0.0.1:$SY_PORT/metrics" | awk -v m="$1" '$1 == m {print $2}'; }
pushes() { metric "podres_syncer_dra_pushes_total{result=\"$1\"}"; }
# pushes_over RESULT N - more than N pushes with that result.
pushes_over() { local v; v=$(pushes "$1"); [ -n "$v" ] && [ "$v" -gt "$2" ]; }
not_served_counted() { local v; v=$(metric 'podres_syncer_dra_skipped_total{reason="not_served"}'); [ -n "$v" ] && [ "$v" -ge 1 ]; }
# pd_device NAME - GET /v1/devices/NAME from podresd into $T/out; CODE set.
pd_device() { req GET "/v1/devices/$1"; }
nd_writes() {
    audit '.objectRef.resource == "nodedevices" and (.verb | IN("create","update","patch","delete"))
           and .responseStatus.code < 300' | wc -l
}
# slice NAME DRIVER GENERATION DEVICES_JSON - create or replace a ResourceSlice of test-node.
slice() {
    jq -n --arg n "$1" --arg d "$2" --argjson g "$3" --argjson devs "$4" \
        '{apiVersion: "resource.k8s.io/v1", kind: "ResourceSlice", metadata: {name: $n},
          spec: {driver: $d, nodeName: "test-node", pool: {name: "test-node", generation: $g, resourceSliceCount: 1},
                 devices: $devs}}' | k apply -f - > "$T/out" 2>&1 || fail "ResourceSlice $1: $(out)"
}
GPUS="[{\"name\":\"gpu-0\",\"attributes\":{\"uuid\":{\"string\":\"$UUID\"},\"resource.kubernetes.io/pciBusID\":{\"string\":\"$PCI\"},\"model\":{\"string\":\"H100\"},\"index\":{\"int\":0}}},
       {\"name\":\"gpu-1\",\"attributes\":{\"uuid\":{\"string\":\"GPU-77aa\"},\"index\":{\"int\":1}}}]"

fk_state "{\"pods\":[$TRAIN],$ALLOC}"
fk_start
pd_config_kubelet
pd_start
kube_up
kube_ns ml
kube_node test-node

# ---- the DRA objects, through the API ----
kapi POST "$RS/deviceclasses" "{\"apiVersion\":\"resource.k8s.io/v1\",\"kind\":\"DeviceClass\",\"metadata\":{\"name\":\"$DRIVER\"},\"spec\":{\"selectors\":[{\"cel\":{\"expression\":\"device.driver == '$DRIVER'\"}}]}}"
[ "$CODE" = 201 ] || fail "DeviceClass: HTTP $CODE $(out)"
slice test-node-gpu "$DRIVER" 1 "$GPUS"
kapi POST "$RS/namespaces/ml/resourceclaims" "{\"apiVersion\":\"resource.k8s.io/v1\",\"kind\":\"ResourceClaim\",\"metadata\":{\"name\":\"claim-1\",\"namespace\":\"ml\"},\"spec\":{\"devices\":{\"requests\":[{\"name\":\"gpu\",\"exactly\":{\"deviceClassName\":\"$DRIVER\"}}]}}}"
[ "$CODE" = 201 ] || fail "ResourceClaim: HTTP $CODE $(out)"
kapi POST /api/v1/namespaces/ml/pods '{"apiVersion":"v1","kind":"Pod","metadata":{"name":"train-0","namespace":"ml"},"spec":{"nodeName":"test-node","automountServiceAccountToken":false,"resourceClaims":[{"name":"gpu","resourceClaimName":"claim-1"}],"containers":[{"name":"main","image":"registry.invalid/x","resources":{"claims":[{"name":"gpu"}]}}]}}'
[ "$CODE" = 201 ] || fail "Pod train-0: HTTP $CODE $(out)"
uid=$(jqo .metadata.uid)
kapi PATCH "$RS/namespaces/ml/resourceclaims/claim-1/status" "{\"status\":{\"allocation\":{\"devices\":{\"results\":[{\"request\":\"gpu\",\"driver\":\"$DRIVER\",\"pool\":\"test-node\",\"device\":\"gpu-0\"}]},\"nodeSelector\":{\"nodeSelectorTerms\":[{\"matchFields\":[{\"key\":\"metadata.name\",\"operator\":\"In\",\"values\":[\"test-node\"]}]}]}},\"reservedFor\":[{\"resource\":\"pods\",\"name\":\"train-0\",\"uid\":\"$uid\"}]}}" \
    application/merge-patch+json
[ "$CODE" = 200 ] || fail "ResourceClaim status: HTTP $CODE $(out)"
ok "through the API: DeviceClass, ResourceSlice (uuid, pciBusID), ResourceClaim allocated to and reserved for pod ml/train-0"

# ---- ResourceSlices not served (a 404 through the fault proxy): the rest works ----
fp_start "404:resource=resourceslices"
SY_KCFG_DIRECT=$SY_KCFG
SY_KCFG=$FP_KCFG
sy_start
wait_until 10 grep -q "the API server does not serve resourceslices (404 for $RS/resourceslices; is resource.k8s.io/v1 served" "$T/syncer.log" ||
    fail "no line about resourceslices not served: $(tail -5 "$T/syncer.log")"
phase_bound() { dvb ml train-0; [ "$CODE" = 200 ] && [ "$(jqo .status.phase)" = Bound ]; }
wait_until 10 phase_bound || fail "no DeviceBinding for train-0 without ResourceSlices: $(tail -5 "$T/syncer.log")"
wait_until 10 curl -sf "http://127.0.0.1:$SY_PORT/readyz" || fail "not ready without ResourceSlices: $(curl -s "http://127.0.0.1:$SY_PORT/readyz")"
wait_until 5 not_served_counted ||
    fail "not_served not counted: $(curl -s "http://127.0.0.1:$SY_PORT/metrics" | grep dra_)"
[ "$(pushes ok)" = 0 ] || fail "pushed without slices"
pd_device "$UUID"
[ "$CODE" = 404 ] || fail "podresd knows $UUID without the slices: $CODE $(out)"
sy_stop
SY_KCFG=$SY_KCFG_DIRECT
ok "ResourceSlices not served: said once, counted, ready; the DeviceBinding is mirrored; podresd is told nothing"

# ---- served: podresd learns the slice's devices ----
sy_start
wait_until 10 bash -c "curl -s --unix-socket '$PD_SOCK' 'http://localhost/v1/devices/$UUID' | jqe '.device.id == \"test-node/gpu-0\"'" ||
    fail "podresd does not find $UUID: $(curl -s --unix-socket "$PD_SOCK" "http://localhost/v1/devices/$UUID") $(tail -5 "$T/syncer.log")"
pd_device "$UUID"
jqe --arg u "$UUID" --arg p "$PCI" '.device | .resourceName == "gpu.example.com" and .id == "test-node/gpu-0"
    and (.aliases | index($u) != null and index($p) != null) and .properties.model == "H100"
    and .properties.index == "0" and .physical == "test-node/gpu-0"' < "$T/out" > /dev/null ||
    fail "GET /v1/devices/$UUID: $(out)"
pd_device "$PCI"
[ "$(jqo .device.id)" = test-node/gpu-0 ] || fail "GET /v1/devices/$PCI: $CODE $(out)"
pd_device GPU-77aa
[ "$(jqo .device.id)" = test-node/gpu-1 ] || fail "GET /v1/devices/GPU-77aa: $CODE $(out)"
[ "$(pushes ok)" = 1 ] || fail "$(pushes ok) pushes for one driver"
[ "$(metric podres_syncer_dra_devices)" = 2 ] || fail "podres_syncer_dra_devices $(metric podres_syncer_dra_devices)"
ok "podresd finds the DRA device by its UUID and PCI bus id (aliases, properties), after one push"

# The DeviceBinding: the DRA device with its claim.
has_claim() {
    dvb ml train-0
    jqe '.status.containers[0].devices | map(select(.resourceName == "gpu.example.com"))
        == [{"resourceName":"gpu.example.com","deviceIds":["test-node/gpu-0"],"topology":{"nodes":[]},
             "claims":[{"namespace":"ml","name":"claim-1","deviceIds":["test-node/gpu-0"]}]}]' < "$T/out"
}
wait_until 10 has_claim || fail "DeviceBinding ml/train-0: $(out)"
[ "$(jqo .status.summary)" = "gpu.example.com=1" ] || fail "summary $(jqo .status.summary)"
ok "DeviceBinding ml/train-0: the DRA device test-node/gpu-0 with claim ml/claim-1"

# NodeDevices: the DRA devices with their aliases.
nd_dra() {
    $KCURL -f "$KUBE_SERVER$ND/test-node" > "$T/nd.json" &&
        jqe --arg u "$UUID" --arg p "$PCI" '[.status.devices[] | select(.resourceName == "gpu.example.com")] as $d
        | ($d | map(.id)) == ["test-node/gpu-0","test-node/gpu-1"]
        and ($d[0].aliases | sort) == ([$u, $p] | sort) and $d[0].properties.model == "H100"
        and ($d[0] | has("physical") | not)' < "$T/nd.json"
}
wait_until 10 nd_dra || fail "NodeDevices test-node: $(jq -c '.status.devices' "$T/nd.json")"
ok "NodeDevices test-node lists the DRA devices with their aliases and properties"

# kubectl podres who <uuid>: the pod and the claim.
kp who "$UUID"
line '^NODE +RESOURCE +ID +HEALTH +STATE +HOLDER +CLAIM +SINCE$'
line "^test-node +gpu.example.com +test-node/gpu-0 +Healthy +held +ml/train-0/main +claim-1 "
kp who "$PCI" -o json
jqe '.items | length == 1 and .[0].holder.pod == "train-0" and .[0].holder.claim == {"namespace":"ml","name":"claim-1"}' \
    < "$T/kp.out" > /dev/null || fail "who $PCI -o json: $(cat "$T/kp.out")"
kp node test-node
line '^RESOURCE +ID +HEALTH +NUMA +STATE +HOLDER +CLAIM +SINCE$'
line '^gpu.example.com +test-node/gpu-0 +Healthy +<none> +held +ml/train-0/main +claim-1 '
line '^gpu.example.com +test-node/gpu-1 +Healthy +<none> +free +<none> +<none> +<none>$'
ok "kubectl podres who <uuid> (and <pci>) names ml/train-0/main and claim-1; node shows the claim"

# ---- nothing changed: nothing pushed, nothing written ----
p0=$(pushes ok)
w0=$(nd_writes)
sleep 3
[ "$(pushes ok)" = "$p0" ] || fail "$(( $(pushes ok) - p0 )) pushes while idle"
[ "$(nd_writes)" = "$w0" ] || fail "$(( $(nd_writes) - w0 )) NodeDevices writes while idle"
ok "idle: no push to podresd, no NodeDevices write"

# ---- a MIG instance of gpu-0 (parentUUID): found through the GPU ----
slice test-node-gpu "$DRIVER" 2 "$(jq -c --arg m "$MIG" --arg u "$UUID" '. + [{"name":"gpu-0-mig-0","attributes":{"uuid":{"string":$m},"parentUUID":{"string":$u}}}]' <<<"$GPUS")"
wait_until 10 bash -c "curl -s --unix-socket '$PD_SOCK' 'http://localhost/v1/devices/$MIG' | jqe '.device.physical == \"$UUID\"'" ||
    fail "podresd does not know the MIG: $(curl -s --unix-socket "$PD_SOCK" "http://localhost/v1/devices/$MIG")"
pd_device "$UUID"
[ "$(jq -c '[.devices[].id] | sort' "$T/out")" = '["test-node/gpu-0","test-node/gpu-0-mig-0"]' ] ||
    fail "GET /v1/devices/$UUID does not cover the MIG: $(out)"
nd_mig() {
    $KCURL -f "$KUBE_SERVER$ND/test-node" | jqe --arg u "$UUID" \
        '.status.devices[] | select(.id == "test-node/gpu-0-mig-0") | .physical == $u'
}
wait_until 10 nd_mig || fail "NodeDevices: the MIG's physical: $($KCURL "$KUBE_SERVER$ND/test-node" | jq -c .status.devices)"
kp who "$UUID"
line "^test-node +gpu.example.com +test-node/gpu-0 +Healthy +held +ml/train-0/main +claim-1 "
line '^test-node +gpu.example.com +test-node/gpu-0-mig-0 +Healthy +free +<none> +<none> +<none>$'
[ "$(wc -l < "$T/kp.out")" = 3 ] || fail "who $UUID: $(cat "$T/kp.out")"
ok "a MIG instance (parentUUID) is pushed, NodeDevices names its physical GPU, who <gpu uuid> answers with both"

# ---- podresd restarted: told again ----
p0=$(pushes ok)
pd_stop
pd_start
wait_until 15 pushes_over ok "$p0" ||
    fail "no push after podresd restarted: $(tail -5 "$T/syncer.log")"
pd_device "$UUID"
[ "$(jqo .device.id)" = test-node/gpu-0 ] || fail "after the restart, GET /v1/devices/$UUID: $CODE $(out)"
ok "podresd restarted: the syncer's feed reconnects and the driver's set is sent again"

# ---- an alias that names another device: 409, logged with podresd's message, counted ----
slice test-node-nic nic.example.com 1 '[{"name":"nic-0","attributes":{"serial":{"string":"GPU-dp-7"}}}]'
wait_until 10 pushes_over conflict 0 ||
    fail "no conflict counted: $(curl -s "http://127.0.0.1:$SY_PORT/metrics" | grep dra_pushes) $(tail -3 "$T/syncer.log")"
grep -q "podresd refused the devices (1) of DRA driver 'nic.example.com' of the node's ResourceSlices: HTTP 409: .*GPU-dp-7" "$T/syncer.log" ||
    fail "the refusal is not logged with podresd's message: $(grep nic.example.com "$T/syncer.log")"
sleep 2
[ "$(pushes conflict)" = 1 ] || fail "the refused set was sent again: $(pushes conflict)"
pd_device "$UUID"
[ "$(jqo .device.id)" = test-node/gpu-0 ] || fail "the other driver suffered: $(out)"
ok "an alias naming a device plugin's device: podresd's 409 logged with its message, counted once, other drivers unaffected"

# ---- the rest of the syncer still works: a device plugin's pod is mirrored ----
kube_pod ml infer-0 test-node > /dev/null
fk_state "{\"pods\":[$TRAIN,$INFER],$ALLOC}"
wait_until 10 bash -c "$KCURL -f '$KUBE_SERVER$DVB/namespaces/ml/devicebindings/infer-0' | jqe '.status.summary == \"example.com/gpu=1\"'" ||
    fail "no DeviceBinding for infer-0: $(tail -3 "$T/syncer.log")"
ok "a device plugin's pod beside them is mirrored as before"

# ---- the GPU slice deleted: the driver's set emptied; the bound device stays ----
kapi DELETE "$RS/resourceslices/test-node-gpu"
[ "$CODE" = 200 ] || fail "delete the slice: HTTP $CODE $(out)"
gone() { req GET /v1/devices/GPU-77aa; [ "$CODE" = 404 ]; }
wait_until 10 gone || fail "podresd still lists gpu-1 after its slice went: $CODE $(out)"
pd_device test-node/gpu-0
[ "$CODE" = 200 ] || fail "the bound DRA device went with its slice: $CODE $(out)"
[ "$(metric podres_syncer_dra_devices)" = 1 ] || fail "podres_syncer_dra_devices $(metric podres_syncer_dra_devices)"
kp who test-node/gpu-0
line "^test-node +gpu.example.com +test-node/gpu-0 +.* +held +ml/train-0/main +claim-1 "
ok "the slice deleted: an empty set for the driver; the device train-0 holds stays, and who still names its pod"

sy_stop
pd_stop
