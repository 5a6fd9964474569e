#!/usr/bin/env bash
# The whole loop on the real control plane (cluster up --scheduler): two
# nodes, each with its own podresd and podres-syncer (a token bound to its
# Node, under deploy/'s node-scope admission policy), publish NodeDevices; the
# real kube-scheduler places eight GPU pods through podres-extender, which
# pre-assigns devices in each pod's DeviceBinding; each node's runtime
# allocates exactly those devices; every DeviceBinding ends Bound with
# PreassignmentHonored=True; no device is given twice; a pod that fits
# nowhere stays Pending with the extender's reason; nothing is written while
# nothing changes.
. "$(dirname "$0")/lib.sh"

ND=$DVB/nodedevices
NODES="node-a node-b"

kube_up --scheduler
k apply -f "$PODRES_ROOT/deploy/admission-node-scope.yaml" > /dev/null || fail "cannot apply the admission policy"
kube_ns ml
for n in $NODES; do
    kube_node "$n"
    # The kubelet would say 8 (what its device plugin registered); podresd knows 6, and
    # the extender goes by podresd's inventory.
    kapi PATCH "/api/v1/nodes/$n/status" '{"status":{"capacity":{"example.com/gpu":"8"},"allocatable":{"example.com/gpu":"8"}}}' \
        application/merge-patch+json
    [ "$CODE" = 200 ] || fail "allocatable of $n: $CODE $(out)"
done
# The policy takes effect asynchronously: wait until it refuses an unbound token.
policy_active() {
    CODE=$(curl -s -o "$T/out" -w '%{http_code}' --cacert "$KUBE_CA" -X POST -H 'Content-Type: application/json' \
        -H "Authorization: Bearer $(sed -n 's/^ *token: //p' "$SY_KCFG")" \
        --data-binary '{"apiVersion":"podres.dev/v1alpha1","kind":"NodeDevices","metadata":{"name":"node-a"}}' \
        "$KUBE_SERVER$ND?dryRun=All")
    [ "$CODE" = 403 ]
}
wait_until 30 policy_active || fail "the node-scope policy never took effect: $CODE $(out)"

# One podresd and one syncer per node. Devices n-g0..n-g5: g0-g2 on NUMA 0, g3-g5 on NUMA 1.
declare -A SOCK SYPORT
for n in $NODES; do
    mkdir -p "$T/$n" && chmod 700 "$T/$n"
    SOCK[$n]=$T/$n/podresd.sock
    "$PODRES_BIN/podresd" --db "$T/$n/podresd.db" --socket "${SOCK[$n]}" --listen "127.0.0.1:$(free_port)" \
        --node-name "$n" >> "$T/$n/podresd.log" 2>&1 &
    PIDS+=("$!")
    wait_until 10 curl -sf --unix-socket "${SOCK[$n]}" http://localhost/healthz || fail "podresd of $n did not start"
    PD_SOCK=${SOCK[$n]}
    register example.com/gpu "$(jq -nc --arg n "$n" '[range(0;6) | {id: "\($n)-g\(.)", topology: {nodes: [{ID: (if . < 3 then 0 else 1 end)}]}}]')"
    node_kubeconfig "$n" "$T/$n/syncer.kubeconfig"
    SYPORT[$n]=$(free_port)
    "$PODRES_BIN/podres-syncer" --node-name "$n" --podresd-socket "${SOCK[$n]}" \
        --kubeconfig "$T/$n/syncer.kubeconfig" --metrics-listen "127.0.0.1:${SYPORT[$n]}" >> "$T/$n/syncer.log" 2>&1 &
    PIDS+=("$!")
done
for n in $NODES; do
    wait_until 15 bash -c "$KCURL -f '$KUBE_SERVER$ND/$n' | jqe '.status.summary == \"example.com/gpu=6\"'" ||
        fail "no NodeDevices $n: $(tail -5 "$T/$n/syncer.log")"
done
rows() { k get nodedevices > "$T/kget" 2>&1 && [ "$(grep -cE '^node-[ab] +example.com/gpu=6 +0 ' "$T/kget")" = 2 ]; }
wait_until 5 rows || true
for n in $NODES; do
    grep -qE "^$n +example.com/gpu=6 +0 " "$T/kget" ||
        fail "kubectl get nodedevices: $(cat "$T/kget"); $(tail -n 5 "$T"/node-?/syncer.log);
$(jq -c 'select(.stage == "ResponseComplete" and .objectRef.resource == "nodedevices" and .verb != "watch" and .verb != "list")
    | [.verb, .objectRef.name, .objectRef.subresource, .user.username, .responseStatus.code]' "$KUBE_AUDIT")"
done
ok "kubectl get nodedevices shows node-a and node-b with example.com/gpu=6, each written by its own syncer under the policy"

# Health shows within 2 s.
PD_SOCK=${SOCK[node-b]}
req PATCH /v1/resources/example.com/gpu/devices/node-b-g5 '{"health":"Unhealthy"}'
[ "$CODE" = 200 ] || fail "PATCH health: $CODE $(out)"
start=$(date +%s%N)
wait_until 5 bash -c "$KCURL -f '$KUBE_SERVER$ND/node-b' | jqe '.status.unhealthy == 1'" ||
    fail "node-b's Unhealthy device did not show"
ms=$(( ($(date +%s%N) - start) / 1000000 ))
[ "$ms" -lt $((2000 * MULT)) ] || fail "the health change took $ms ms"
ok "a device marked Unhealthy in node-b's podresd shows in NodeDevices node-b in $ms ms"

# writes_all - successful writes of DeviceBindings and NodeDevices by anyone.
writes_all() {
    jq -c 'select(.stage == "ResponseComplete" and (.objectRef.resource | IN("devicebindings","nodedevices"))
        and (.verb | IN("create","update","patch","delete")) and .responseStatus.code < 300)' "$KUBE_AUDIT" | wc -l
}
sleep 1.5
w0=$(writes_all)
sleep 4
[ "$(writes_all)" = "$w0" ] || fail "$(( $(writes_all) - w0 )) writes in 4 s while nothing changed"
ok "nothing changes: no API write in 4 s"

# Eight pods, 11 GPUs among 11 healthy: the scheduler places them through the extender.
pod_yaml() {  # NAME GPUS
    cat <<EOF
apiVersion: v1
kind: Pod
metadata: {name: $1, namespace: ml}
spec:
  containers:
  - name: main
    image: registry.k8s.io/pause:3.10
    resources: {limits: {example.com/gpu: "$2"}}
EOF
}
declare -A WANT
i=0
for g in 2 1 2 1 2 1 1 1; do
    WANT[p$i]=$g
    pod_yaml "p$i" "$g" | k apply -f - > /dev/null || fail "create pod p$i"
    i=$((i + 1))
done
scheduled() { [ "$(k get pods -n ml -o json | jq '[.items[] | select(.spec.nodeName)] | length')" = 8 ]; }
wait_until 60 scheduled || fail "not all eight pods were scheduled: $(k get pods -n ml -o wide 2>&1) $(tail -5 "$KDIR/podres-extender.log")"
ok "kube-scheduler placed all eight pods through podres-extender"

# Each has its pre-assignment on its node, from that node's inventory, and no device twice.
k get pods -n ml -o json > "$T/pods.json"
k get dvb -n ml -o json > "$T/dvbs.json"
for p in "${!WANT[@]}"; do
    node=$(jq -r --arg p "$p" '.items[] | select(.metadata.name == $p) | .spec.nodeName' "$T/pods.json")
    uid=$(jq -r --arg p "$p" '.items[] | select(.metadata.name == $p) | .metadata.uid' "$T/pods.json")
    jqe --arg p "$p" --arg n "$node" --arg uid "$uid" --argjson w "${WANT[$p]}" '.items[] | select(.metadata.name == $p)
        | .spec.nodeName == $n and .metadata.labels["podres.dev/node"] == $n
        and .metadata.ownerReferences[0].uid == $uid
        and ([.spec.containers[].devices[] | select(.resourceName == "example.com/gpu") | .deviceIds[]] | length) == $w
        and all(.spec.containers[].devices[].deviceIds[]; startswith($n + "-g"))' < "$T/dvbs.json" > /dev/null ||
        fail "pre-assignment of $p on $node: $(jq -c --arg p "$p" '.items[] | select(.metadata.name == $p) | {metadata: {labels: .metadata.labels}, spec}' "$T/dvbs.json")"
done
dups=$(jq -r '[.items[].spec.containers[]?.devices[].deviceIds[]] | group_by(.) | map(select(length > 1) | .[0]) | join(",")' "$T/dvbs.json")
[ -z "$dups" ] || fail "devices pre-assigned twice: $dups"
jqe '[.items[].spec.containers[]?.devices[].deviceIds[]] | index("node-b-g5") == null' < "$T/dvbs.json" > /dev/null ||
    fail "the Unhealthy device was pre-assigned"
ok "every pod has a DeviceBinding pre-assignment on its node (label, owner, the requested count of that node's devices); no device twice, none Unhealthy"

# Each node's runtime allocates: exactly the pre-assigned devices; Bound and honoured.
for p in "${!WANT[@]}"; do
    node=$(jq -r --arg p "$p" '.items[] | select(.metadata.name == $p) | .spec.nodeName' "$T/pods.json")
    uid=$(jq -r --arg p "$p" '.items[] | select(.metadata.name == $p) | .metadata.uid' "$T/pods.json")
    want=$(jq -r --arg p "$p" '.items[] | select(.metadata.name == $p) | [.spec.containers[].devices[].deviceIds[]] | sort | join(",")' "$T/dvbs.json")
    PD_SOCK=${SOCK[$node]}
    resv() { [ "$(curl -s --unix-socket "$PD_SOCK" "http://localhost/v1/reservations/ml/$1" | jq -r '.reservation.state // ""')" != "" ]; }
    wait_until 10 resv "$p" || fail "no reservation for $p in $node's podresd: $(tail -3 "$T/$node/syncer.log")"
    req POST "/v1/namespaces/ml/pods/$p/allocate" "{\"uid\":\"$uid\",\"containers\":[{\"name\":\"main\",\"requests\":{\"example.com/gpu\":${WANT[$p]}}}]}"
    [ "$CODE" = 201 ] || fail "allocate $p on $node: $CODE $(out)"
    got=$(jqo '[.podResources.containers[].devices[].deviceIds[]] | sort | join(",")')
    [ "$got" = "$want" ] || fail "$p on $node allocated $got, pre-assigned $want"
done
honoured() {
    [ "$($KCURL "$KUBE_SERVER$DVB/namespaces/ml/devicebindings" | jq '[.items[] | select(.status.phase == "Bound"
        and any(.status.conditions[]?; .type == "PreassignmentHonored" and .status == "True"))] | length')" = 8 ]
}
wait_until 15 honoured || fail "not every DeviceBinding is Bound and honoured: $(k get dvb -n ml -o wide)"
ok "each node allocated exactly the pre-assigned devices; all eight DeviceBindings Bound with PreassignmentHonored=True"

# A pod that fits nowhere (the scheduler counts 8 per node, podresd has none free on
# each) stays Pending, and says why: the extender's reason.
pod_yaml big 2 | k apply -f - > /dev/null || fail "create pod big"
why() { k describe pod -n ml big | grep -q 'example.com/gpu: 0 free healthy, 2 requested'; }
wait_until 30 why || fail "no extender reason for big: $(k describe pod -n ml big | tail -8)"
[ -z "$(k get pod -n ml big -o jsonpath='{.spec.nodeName}')" ] || fail "big was scheduled"
dvb_code ml big | grep -qx 404 || fail "big got a DeviceBinding"
ok "a pod that fits nowhere stays Pending; kubectl describe pod shows the extender's reason"

# The extender restarted (SIGKILL): what it knows comes back from the API server, so a
# 1-GPU pod still fits nowhere (held devices, from the DeviceBindings' status).
read -r epid _ < <(grep ' podres-extender$' "$KDIR/pids" | tail -1)
kill -9 "$epid"
xc=$KDIR/extender-certs
setsid "$PODRES_BIN/podres-extender" --kubeconfig "$KDIR/extender.kubeconfig" --listen "${EXTENDER_URL#https://}" \
    --tls-cert-file "$xc/server.crt" --tls-private-key-file "$xc/server.key" --client-ca-file "$xc/ca.crt" \
    --scheduler-names default-scheduler >> "$KDIR/podres-extender.log" 2>&1 < /dev/null &
echo "$! podres-extender" >> "$KDIR/pids"
wait_until 10 $XCURL -f "$EXTENDER_URL/readyz" || fail "the extender did not come back: $(tail -3 "$KDIR/podres-extender.log")"
pod_yaml small 1 > "$T/small.yaml"
k create --dry-run=client -o json -f "$T/small.yaml" > "$T/small.json"
jq -c '{Pod: ., NodeNames: ["node-a", "node-b"]}' "$T/small.json" |
    $XCURL -o "$T/out" -H 'Content-Type: application/json' --data-binary @- "$EXTENDER_URL/filter"
jqe '.NodeNames == [] and .FailedNodes["node-a"] == "example.com/gpu: 0 free healthy, 1 requested"
    and .FailedNodes["node-b"] == "example.com/gpu: 0 free healthy, 1 requested"' < "$T/out" > /dev/null ||
    fail "after a restart the extender's view: $(out)"
ok "the extender restarted: its view, rebuilt from the API server, still has no device free"

# A pod goes (the runtime releases its devices, the garbage collector its DeviceBinding):
# the next pod gets one of them.
victim=$(jq -r '[.items[] | select(.metadata.name | IN("p1", "p3", "p5", "p6", "p7"))][0] | "\(.metadata.name) \(.spec.nodeName)"' "$T/pods.json")
read -r vp vnode <<<"$victim"
freed=$(jq -r --arg p "$vp" '.items[] | select(.metadata.name == $p) | [.spec.containers[].devices[].deviceIds[]] | join(",")' "$T/dvbs.json")
kube_pod_delete ml "$vp"
PD_SOCK=${SOCK[$vnode]}
req DELETE "/v1/namespaces/ml/pods/$vp"
[ "$CODE" = 200 ] || fail "release $vp in $vnode's podresd: $CODE $(out)"
k apply -f "$T/small.yaml" > /dev/null || fail "create pod small"
wait_until 30 sh -c "'$KUBECTL' --kubeconfig '$KCFG' get pod -n ml small -o jsonpath='{.spec.nodeName}' | grep -qx '$vnode'" ||
    fail "small was not placed on $vnode: $(k get pod -n ml small -o wide)"
wait_until 10 bash -c "$KCURL -f '$KUBE_SERVER$DVB/namespaces/ml/devicebindings/small' | jqe '.spec.containers'" ||
    fail "no pre-assignment for small"
got=$($KCURL "$KUBE_SERVER$DVB/namespaces/ml/devicebindings/small" | jq -r '[.spec.containers[].devices[].deviceIds[]] | join(",")')
[ "$got" = "$freed" ] || fail "small was given $got, the freed device is $freed"
ok "$vp released on $vnode: the next pod is placed there and given its device ($got)"

# Settled: nothing written while nothing changes.
sleep 2
w0=$(writes_all)
sleep 4
[ "$(writes_all)" = "$w0" ] || fail "$(( $(writes_all) - w0 )) writes in 4 s after all settled"
ok "all settled: no API write in 4 s"

for f in "$KDIR/podres-extender.log" "$T"/node-?/syncer.log "$T"/node-?/podresd.log; do
    if grep -qE 'AddressSanitizer|LeakSanitizer|runtime error:' "$f"; then
        cat "$f" >&2
        fail "sanitizer report in $f"
    fi
done
