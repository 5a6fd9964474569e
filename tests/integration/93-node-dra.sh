#!/usr/bin/env bash
# 93-node-dra.sh - DRA on a real node (tests/kube/node --dra): the upstream DRA
# test driver publishes its ResourceSlice, the real kube-scheduler allocates a
# claim from a ResourceClaimTemplate, the resourceclaim controller makes the
# claim, the real kubelet has the driver prepare it and runs the pod. podresd
# (kubelet mode, this tree's binary) shows the binding with its claim, as the
# kubelet's List gives it; podres-syncer hands the slice's devices to podresd,
# so the device is found by its pool/device name; the DeviceBinding shows the
# DRA device with its claim and `kubectl podres who POOL/DEVICE` names the pod
# and the claim; a claim of two devices gives each its own CDI ids (the
# kubelet's List repeats the first's on the second); the pod deleted,
# released. (The test driver's devices carry
# no uuid or pciBusID attribute, so lookups by alias stay with 83-dra.sh.)
. "$(dirname "$0")/lib.sh"

DRIVER=test-driver.cdi.k8s.io
NODE=test-node # the name lib.sh's podresd and syncer run as
kube_up --scheduler --nodes
node_up --dra
pd_config "source: kubelet
kubelet_socket: $KUBELET_PODRES_SOCKET
kubelet_interval: 200ms"
pd_start
node_kubeconfig "$NODE" "$SY_KCFG"
sy_start
pd() { curl -sf --max-time 5 --unix-socket "$PD_SOCK" "http://localhost$1"; }

wait_until 20 bash -c "curl -sf --unix-socket '$PD_SOCK' 'http://localhost/v1/devices?resource=$DRIVER' |
    jqe '[.devices[].id] | sort == [\"$NODE/device-00\",\"$NODE/device-01\",\"$NODE/device-02\",\"$NODE/device-03\"]'" ||
    fail "podresd lacks the driver's devices: $(pd "/v1/devices?resource=$DRIVER") $(tail -5 "$T/syncer.log")"
ok "the DRA test driver's ResourceSlice reaches podresd through the syncer: 4 devices of pool $NODE"

kube_ns ml
k apply -f - > /dev/null <<YAML || fail "DeviceClass and ResourceClaimTemplate"
apiVersion: resource.k8s.io/v1
kind: DeviceClass
metadata: {name: test-dra}
spec:
  selectors:
  - cel: {expression: 'device.driver == "$DRIVER"'}
---
apiVersion: resource.k8s.io/v1
kind: ResourceClaimTemplate
metadata: {name: one-device, namespace: ml}
spec:
  spec:
    devices:
      requests:
      - name: dev
        exactly: {deviceClassName: test-dra}
YAML
# dra_pod NAME TEMPLATE - a busybox pod whose container holds a claim made from
# ResourceClaimTemplate TEMPLATE; no nodeName: a DRA pod is placed by
# kube-scheduler, which allocates its claim. Waits until it runs.
dra_pod() {
    k apply -f - > /dev/null <<YAML || fail "pod ml/$1"
apiVersion: v1
kind: Pod
metadata: {name: $1, namespace: ml}
spec:
  terminationGracePeriodSeconds: 1
  automountServiceAccountToken: false
  containers:
  - name: main
    image: podres.test/busybox:1
    command: [sleep, "3600"]
    resources:
      claims: [{name: dev}]
  resourceClaims:
  - name: dev
    resourceClaimTemplateName: $2
YAML
    k wait --for condition=Ready --timeout "$(( 90 * MULT ))s" -n ml "pod/$1" > /dev/null || {
        k describe pod -n ml "$1" | tail -n 20 >&2
        tail -n 20 "$NDIR/dra-driver.log" >&2
        fail "ml/$1 did not run"
    }
}
dra_pod dra-0 one-device
claim=$(k get pod -n ml dra-0 -o jsonpath='{.status.resourceClaimStatuses[0].resourceClaimName}')
[ -n "$claim" ] || fail "ml/dra-0 has no generated claim: $(k get pod -n ml dra-0 -o jsonpath='{.status}')"
dev=$(k get resourceclaim -n ml "$claim" -o json | jq -r '.status.allocation.devices.results[0] |
    select(.driver == "'"$DRIVER"'") | .pool + "/" + .device')
case $dev in "$NODE"/device-0[0-3]) ;; *) fail "claim $claim allocated '$dev'" ;; esac
ok "kube-scheduler allocated ml/$claim ($dev), the kubelet had the driver prepare it, ml/dra-0 runs"

group() {
    curl -sf --unix-socket "$PD_SOCK" http://localhost/v1/namespaces/ml/pods/dra-0 |
        jqe --arg r "$DRIVER" --arg d "$dev" --arg c "$claim" '.podResources.containers[0].devices[]
        | select(.resourceName == $r) | .deviceIds == [$d] and .claims == [{"namespace":"ml","name":$c,"deviceIds":[$d]}]'
}
wait_until 20 group || fail "podresd's binding of ml/dra-0: $(pd /v1/namespaces/ml/pods/dra-0)"
pd /v1/namespaces/ml/pods/dra-0 | jqe --arg c "$claim" --arg d "${dev#*/}" '.podResources.containers[0].dynamicResources
    | any(.claimName == $c and .claimNamespace == "ml" and (.claimResources | any(.deviceName == $d)))' \
    > /dev/null || fail "dynamicResources of ml/dra-0: $(pd /v1/namespaces/ml/pods/dra-0)"
ok "podresd binds ml/dra-0 to $dev through claim $claim, as the kubelet's List says"

pd "/v1/devices/${dev/\//%2F}" | jqe --arg d "$dev" '.device.id == $d and .device.holder.name == "dra-0"' \
    > /dev/null || fail "GET /v1/devices/$dev: $(pd "/v1/devices/${dev/\//%2F}")"
has_claim() {
    dvb ml dra-0
    jqe --arg r "$DRIVER" --arg d "$dev" --arg c "$claim" '.status.phase == "Bound" and
        (.status.containers[0].devices[] | select(.resourceName == $r)
         | .deviceIds == [$d] and .claims == [{"namespace":"ml","name":$c,"deviceIds":[$d]}])' < "$T/out"
}
wait_until 20 has_claim || fail "DeviceBinding ml/dra-0: $(out)"
PATH="$PODRES_BIN:$PATH" "$KUBECTL" podres --kubeconfig "$KCFG" who "$dev" > "$T/who" 2>&1 ||
    fail "kubectl podres who $dev: $(cat "$T/who")"
grep -qE "^$NODE +$DRIVER +$dev +Healthy +held +ml/dra-0/main +$claim " "$T/who" ||
    fail "kubectl podres who $dev: $(cat "$T/who")"
ok "found by its pool/device name; DeviceBinding Bound with the claim; kubectl podres who names ml/dra-0 and $claim"

# ---- a claim of two devices: each with its own CDI ids ----------------------------
# The 1.36 kubelet's List gives each device of a driver the CDI ids of the
# claim's devices before it too; podresd gives each device its own.
k apply -f - > /dev/null <<YAML || fail "ResourceClaimTemplate two-devices"
apiVersion: resource.k8s.io/v1
kind: ResourceClaimTemplate
metadata: {name: two-devices, namespace: ml}
spec:
  spec:
    devices:
      requests:
      - name: dev
        exactly: {deviceClassName: test-dra, allocationMode: ExactCount, count: 2}
YAML
dra_pod dra-2 two-devices
wait_until 20 bash -c "curl -sf --unix-socket '$PD_SOCK' http://localhost/v1/namespaces/ml/pods/dra-2 |
    jqe '.podResources.containers[0].dynamicResources[0].claimResources | length == 2'" ||
    fail "ml/dra-2's claim resources: $(pd /v1/namespaces/ml/pods/dra-2)"
pd /v1/namespaces/ml/pods/dra-2 | jqe '.podResources.containers[0].dynamicResources[0].claimResources
    | map(.cdiDevices | length) == [1, 1] and (.[0].cdiDevices[0].name | startswith("'"$DRIVER"'/test=claim-"))' \
    > /dev/null || fail "ml/dra-2's CDI ids per device: $(pd /v1/namespaces/ml/pods/dra-2 | jq -c '.podResources.containers[0].dynamicResources')"
ok "a claim of two devices: each device with its own CDI id, not its predecessor's too"

k delete pod -n ml dra-0 --timeout "$(( 60 * MULT ))s" > /dev/null || fail "delete ml/dra-0"
wait_until 20 bash -c "[ \$(curl -s -o /dev/null -w '%{http_code}' --unix-socket '$PD_SOCK' http://localhost/v1/namespaces/ml/pods/dra-0) = 404 ]" ||
    fail "ml/dra-0 still bound: $(pd /v1/namespaces/ml/pods/dra-0)"
pd "/v1/history?device=${dev/\//%2F}" | jqe '[.intervals[] | select(.name == "dra-0")] | length == 1 and .[0].to != null' \
    > /dev/null || fail "history of $dev: $(pd "/v1/history?device=${dev/\//%2F}")"
ok "ml/dra-0 deleted: released, its interval closed"
sy_stop
pd_stop
