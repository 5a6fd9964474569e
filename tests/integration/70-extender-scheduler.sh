#!/usr/bin/env bash
# podres-extender behind the real kube-scheduler (cluster up --scheduler):
# pods requesting example.com/gpu are filtered, scored and bound through it;
# each bound pod has a DeviceBinding pre-assignment on its node naming as
# many of that node's devices as it asked for, no device twice; a pod that
# fits nowhere stays Pending with the extender's reason in its events; a
# node without NodeDevices is filtered out; malformed JSON gets 400.
. "$(dirname "$0")/lib.sh"

ND=/apis/podres.dev/v1alpha1/nodedevices

# gpu_node NAME COUNT - a schedulable Node with COUNT example.com/gpu allocatable.
gpu_node() {
    kube_node "$1"
    kapi PATCH "/api/v1/nodes/$1/status" \
        "{\"status\":{\"capacity\":{\"example.com/gpu\":\"$2\"},\"allocatable\":{\"example.com/gpu\":\"$2\"}}}" \
        application/merge-patch+json
    [ "$CODE" = 200 ] || fail "node $1 gpus: HTTP $CODE $(out)"
}

# node_devices NAME - its NodeDevices: 4 healthy GPUs, two on NUMA 0, two on NUMA 1.
node_devices() {
    k create -f - > /dev/null <<JSON || fail "create NodeDevices $1"
{"apiVersion":"podres.dev/v1alpha1","kind":"NodeDevices","metadata":{"name":"$1"}}
JSON
    k patch nodedevices "$1" --subresource=status --type=merge -p "$(jq -nc --arg n "$1" '{status: {
        summary: "example.com/gpu=4", unhealthy: 0,
        resources: [{name: "example.com/gpu", total: 4, healthy: 4}],
        devices: [range(0;4) | {resourceName: "example.com/gpu", id: "\($n)-gpu\(.)",
                                health: "Healthy", topology: {nodes: [{id: (. / 2 | floor)}]}}]}}')" \
        > /dev/null || fail "patch NodeDevices $1 status"
}

# gpu_pod NAME COUNT - a Pod in ml asking for COUNT example.com/gpu, not yet scheduled.
gpu_pod() {
    kapi POST /api/v1/namespaces/ml/pods "$(jq -nc --arg n "$1" --arg c "$2" '{apiVersion: "v1",
        kind: "Pod", metadata: {name: $n, namespace: "ml"}, spec: {automountServiceAccountToken: false,
        containers: [{name: "main", image: "registry.invalid/x",
                      resources: {limits: {"example.com/gpu": $c}}}]}}')"
    [ "$CODE" = 201 ] || fail "create pod $1: HTTP $CODE $(out)"
}

pods_json() { $KCURL "$KUBE_SERVER/api/v1/namespaces/ml/pods" > "$T/pods.json"; }
# gpus_on NODE - example.com/gpu requested by the pods bound to NODE.
gpus_on() {
    jq --arg n "$1" '[.items[] | select(.spec.nodeName == $n) |
        .spec.containers[0].resources.limits["example.com/gpu"] | tonumber] | add // 0' "$T/pods.json"
}
# settled - no pending pod (but big) fits the free GPUs of either GPU node.
settled() {
    pods_json
    local fa fb
    fa=$((4 - $(gpus_on gpu-a))) fb=$((4 - $(gpus_on gpu-b)))
    jqe --argjson a "$fa" --argjson b "$fb" '[.items[] | select(.metadata.name != "big" and
        (.spec.nodeName // "") == "") | .spec.containers[0].resources.limits["example.com/gpu"] |
        tonumber | select(. <= $a or . <= $b)] | length == 0' < "$T/pods.json" > /dev/null
}

kube_up --scheduler
wait_until 30 curl -sf "$EXTENDER_URL/readyz" ||
    { tail -20 "$KDIR/podres-extender.log" >&2; fail "podres-extender is not ready"; }
ok "cluster up --scheduler starts podres-extender; /readyz ok"

gpu_node gpu-a 4
gpu_node gpu-b 4
gpu_node plain-c 8
node_devices gpu-a
node_devices gpu-b
kube_ns ml

i=0
for n in 1 2 1 2 1 1 1 1; do
    i=$((i + 1))
    gpu_pod "p$i" "$n"
done
gpu_pod big 5
wait_until 60 settled || { grep -m1 -A14 -E "ERROR|runtime error" "$KDIR/podres-extender.log" >&2; tail -n 3 "$KDIR/kube-scheduler.log" >&2; fail "the scheduler did not place what fits: $(jq -c '[.items[] | {n: .metadata.name, node: .spec.nodeName}]' "$T/pods.json")"; }
pods_json
[ "$(gpus_on gpu-a)" -le 4 ] && [ "$(gpus_on gpu-b)" -le 4 ] || fail "a node is over its GPUs"
[ "$(gpus_on plain-c)" = 0 ] || fail "a GPU pod went to plain-c, which has no NodeDevices"
bound=$(jq '[.items[] | select(.spec.nodeName)] | length' "$T/pods.json")
[ "$bound" -ge 6 ] || fail "only $bound pods bound"
ok "kube-scheduler placed $bound pods through the extender, none on a node without NodeDevices"

# Every bound pod: its DeviceBinding pre-assigns exactly its count of its node's devices.
$KCURL "$KUBE_SERVER$ND" > "$T/nd.json"
$KCURL "$KUBE_SERVER$DVB/namespaces/ml/devicebindings" > "$T/dvb.json"
for p in $(jq -r '.items[] | select(.spec.nodeName) | .metadata.name' "$T/pods.json"); do
    node=$(jq -r --arg p "$p" '.items[] | select(.metadata.name == $p) | .spec.nodeName' "$T/pods.json")
    uid=$(jq -r --arg p "$p" '.items[] | select(.metadata.name == $p) | .metadata.uid' "$T/pods.json")
    want=$(jq -r --arg p "$p" '.items[] | select(.metadata.name == $p) |
        .spec.containers[0].resources.limits["example.com/gpu"]' "$T/pods.json")
    jqe --arg p "$p" --arg node "$node" --arg uid "$uid" --argjson want "$want" --slurpfile nd "$T/nd.json" '
        .items[] | select(.metadata.name == $p) |
        ($nd[0].items[] | select(.metadata.name == $node) | [.status.devices[].id]) as $ids |
        .spec.nodeName == $node and .metadata.labels["podres.dev/node"] == $node and
        (.metadata.ownerReferences | any(.kind == "Pod" and .uid == $uid)) and
        (.spec.containers | length) == 1 and .spec.containers[0].name == "main" and
        (.spec.containers[0].devices[0].deviceIds | length) == $want and
        (.spec.containers[0].devices[0].deviceIds | all(. as $d | $ids | index($d)))' \
        < "$T/dvb.json" > /dev/null ||
        fail "DeviceBinding ml/$p is not $want devices of $node: $(jq -c --arg p "$p" '.items[] | select(.metadata.name == $p)' "$T/dvb.json")"
done
[ "$(jq '.items | length' "$T/dvb.json")" = "$bound" ] || fail "DeviceBindings for unbound pods"
dups=$(jq '[.items[].spec.containers[].devices[].deviceIds[]] | group_by(.) | map(select(length > 1)) | length' "$T/dvb.json")
[ "$dups" = 0 ] || fail "a device is pre-assigned twice: $(jq -c '[.items[] | {n: .metadata.name, d: .spec.containers}]' "$T/dvb.json")"
ok "each bound pod's DeviceBinding names exactly its count of its node's devices; none twice"

# The pod that fits nowhere: Pending, the extender's reason in its events.
wait_until 30 sh -c "'$KUBECTL' --kubeconfig '$KCFG' -n ml describe pod big | grep -q 'node has no NodeDevices'" ||
    fail "no extender reason for big: $(k -n ml describe pod big | tail -5)"
[ "$($KCURL "$KUBE_SERVER/api/v1/namespaces/ml/pods/big" | jq -r '.spec.nodeName // ""')" = "" ] ||
    fail "big was bound"
ok "the 5-GPU pod stays Pending; its events show 'node has no NodeDevices'"

# The extender directly: reasons per node; 400 for malformed JSON.
big=$($KCURL "$KUBE_SERVER/api/v1/namespaces/ml/pods/big")
code=$(jq -nc --argjson pod "$big" '{Pod: $pod, NodeNames: ["gpu-a", "gpu-b", "plain-c"]}' |
    curl -s -o "$T/out" -w '%{http_code}' -H 'Content-Type: application/json' --data-binary @- \
        "$EXTENDER_URL/filter")
[ "$code" = 200 ] || fail "filter: HTTP $code $(out)"
[ "$(jqo '.NodeNames | length')" = 0 ] || fail "filter kept nodes for big: $(out)"
[ "$(jqo '.FailedNodes["plain-c"]')" = "node has no NodeDevices" ] || fail "plain-c reason: $(out)"
jqo '.FailedNodes["gpu-a"]' | grep -Eq '^example.com/gpu: [0-4] free healthy, 5 requested$' ||
    fail "gpu-a reason: $(out)"
ok "filter names the reason per node: $(jqo '.FailedNodes["gpu-a"]')"

code=$(curl -s -o "$T/out" -w '%{http_code}' -H 'Content-Type: application/json' \
    --data-binary '{"Pod": {' "$EXTENDER_URL/filter")
[ "$code" = 400 ] || fail "malformed filter: HTTP $code, want 400"
[ -n "$(jqo .Error)" ] || fail "no message for malformed JSON: $(out)"
code=$(curl -s -o "$T/out" -w '%{http_code}' --data-binary '{"PodName": "../x"}' "$EXTENDER_URL/bind")
[ "$code" = 400 ] || fail "malformed bind: HTTP $code, want 400"
ok "malformed JSON gets 400 with a message ($(jqo .Error))"

# A Binding that fails takes its pre-assignment back: a pod bound already
# (spec.nodeName set at creation) cannot be bound again (409).
kapi POST /api/v1/namespaces/ml/pods "$(jq -nc '{apiVersion: "v1", kind: "Pod",
    metadata: {name: "prebound", namespace: "ml"}, spec: {nodeName: "gpu-a", automountServiceAccountToken: false,
    containers: [{name: "main", image: "registry.invalid/x", resources: {limits: {"example.com/gpu": "1"}}}]}}')"
[ "$CODE" = 201 ] || fail "create pod prebound: HTTP $CODE $(out)"
uid=$(jqo .metadata.uid)
pod=$(out)
# gpu-b gets a fifth device, free
k patch nodedevices gpu-b --subresource=status --type=json -p '[{"op":"add","path":"/status/devices/-",
    "value":{"resourceName":"example.com/gpu","id":"gpu-b-gpu4","health":"Healthy","topology":{"nodes":[{"id":1}]}}}]' \
    > /dev/null || fail "add a device to gpu-b"
fits() {
    jq -nc --argjson pod "$pod" '{Pod: $pod, NodeNames: ["gpu-b"]}' |
        curl -s -H 'Content-Type: application/json' --data-binary @- "$EXTENDER_URL/filter" |
        jqe '.NodeNames == ["gpu-b"]'
}
wait_until 10 fits || fail "the extender did not see gpu-b's fifth device"
code=$(curl -s -o "$T/out" -w '%{http_code}' -H 'Content-Type: application/json' --data-binary \
    "{\"PodName\":\"prebound\",\"PodNamespace\":\"ml\",\"PodUID\":\"$uid\",\"Node\":\"gpu-b\"}" "$EXTENDER_URL/bind")
[ "$code" = 200 ] && [ -n "$(jqo '.Error // ""')" ] || fail "bind of a bound pod: HTTP $code $(out)"
err=$(jqo .Error)
[ "$($KCURL -o /dev/null -w '%{http_code}' "$KUBE_SERVER/apis/podres.dev/v1alpha1/namespaces/ml/devicebindings/prebound")" = 404 ] ||
    fail "the pre-assignment of the failed bind stayed"
grep -qx 'podres_extender_preassignments_removed_total 1' <<<"$(curl -s "$EXTENDER_URL/metrics")" ||
    fail "removal not counted (bind said: $err): $(curl -s "$EXTENDER_URL/metrics" | grep removed)"
ok "a Binding that fails ($err) takes its pre-assignment back, counted"

m=$(curl -s "$EXTENDER_URL/metrics")
b=$(awk '$1 == "podres_extender_binds_total" {print $2}' <<< "$m")
[ "$b" -ge "$bound" ] || fail "podres_extender_binds_total $b < $bound"
grep -q 'podres_extender_requests_total{verb="filter",outcome="bad_request"} 1' <<< "$m" ||
    fail "the bad request is not counted: $(grep requests_total <<< "$m")"
ok "metrics count $b binds and the bad request"

if grep -qE 'AddressSanitizer|LeakSanitizer|runtime error:' "$KDIR/podres-extender.log"; then
    cat "$KDIR/podres-extender.log" >&2
    fail "sanitizer report in the extender log"
fi
