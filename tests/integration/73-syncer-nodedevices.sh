#!/usr/bin/env bash
# NodeDevices on the real control plane: the syncer publishes its node's
# inventory (devices, health, topology, properties, per-resource totals),
# owned by the Node; a health change shows within 2 s; pods starting and
# stopping, an idle node and a restart write nothing; a deleted or edited
# object is restored; a deleted Node takes its NodeDevices with it (the
# garbage collector) and the syncer says why it does not make it again.
. "$(dirname "$0")/lib.sh"

ND=/apis/podres.dev/v1alpha1/nodedevices
nd_get() { $KCURL -f "$KUBE_SERVER$ND/$1" || true; }
nd_writes() {
    audit '.objectRef.resource == "nodedevices" and (.verb | IN("create","update","patch","delete"))
           and .responseStatus.code < 300' | wc -l
}

pd_start
register example.com/gpu '[{"id":"gpu-1","topology":{"nodes":[{"ID":1}]},"properties":{"model":"H100"}},{"id":"gpu-0","topology":{"nodes":[{"ID":0}]},"properties":{"model":"H100"}},{"id":"gpu-2"}]'
register example.com/nic '[{"id":"nic-0","topology":{"nodes":[{"ID":0}]}}]'
kube_up
kube_node test-node
node_uid=$(k get node test-node -o jsonpath='{.metadata.uid}')
SYNCER_USER=system:serviceaccount:podres-system:podres-syncer
sy_start

wait_until 10 bash -c "$KCURL -f '$KUBE_SERVER$ND/test-node' | jqe '.status.summary'" ||
    fail "no NodeDevices test-node: $(tail -5 "$T/syncer.log")"
nd_get test-node > "$T/nd.json"
jqe --arg uid "$node_uid" '
    .metadata.ownerReferences == [{"apiVersion":"v1","kind":"Node","name":"test-node","uid":$uid}]
    and .metadata.labels["podres.dev/node"] == "test-node"
    and .status.summary == "example.com/gpu=3,example.com/nic=1"
    and .status.unhealthy == 0 and .status.truncated == false
    and .status.resources == [{"name":"example.com/gpu","total":3,"healthy":3},{"name":"example.com/nic","total":1,"healthy":1}]
    and ([.status.devices[] | .resourceName + "/" + .id] == ["example.com/gpu/gpu-0","example.com/gpu/gpu-1","example.com/gpu/gpu-2","example.com/nic/nic-0"])
    and .status.devices[1] == {"resourceName":"example.com/gpu","id":"gpu-1","health":"Healthy","topology":{"nodes":[{"id":1}]},"properties":{"model":"H100"}}
    and .status.devices[2].topology == {"nodes":[]}
    and (.status.conditions[0] | .type == "Truncated" and .status == "False")
    and (.status | has("observedRevision"))' < "$T/nd.json" > /dev/null ||
    fail "NodeDevices test-node: $(jq -c . "$T/nd.json")"
ok "NodeDevices test-node: every device sorted, with health, topology (id), properties; totals; owned by the Node"

# (a list can lag the object just written by a moment on a loaded machine,
# showing it as created, before its status was written: poll for the row)
row='^test-node +example.com/gpu=3,example.com/nic=1 +0 '
kget_nd() { k get nodedevices > "$T/kget" 2>&1 && grep -qE "$row" "$T/kget"; }
wait_until 10 kget_nd || true
head -1 "$T/kget" | grep -qE '^NAME +RESOURCES +UNHEALTHY +AGE$' || fail "columns: $(cat "$T/kget");
$(jq -c 'select(.stage == "ResponseComplete" and .objectRef.resource == "nodedevices")
    | [.verb, .objectRef.name, .objectRef.subresource, .user.username, .responseStatus.code, .requestURI]' "$KUBE_AUDIT" | tail -20)"
grep -qE "$row" "$T/kget" || fail "row: $(cat "$T/kget")"
k get nd test-node > /dev/null || fail "short name nd"
k get podres 2>&1 | grep -q 'nodedevices.podres.dev/test-node' || fail "category podres: $(k get podres 2>&1)"
ok "kubectl get nodedevices / nd / podres: NAME RESOURCES UNHEALTHY AGE"

# Health: an Unhealthy device shows within 2 s, once.
w0=$(nd_writes)
req PATCH /v1/resources/example.com/gpu/devices/gpu-1 '{"health":"Unhealthy"}'
[ "$CODE" = 200 ] || fail "PATCH health: $CODE $(out)"
start=$(date +%s%N)
wait_until 5 bash -c "$KCURL -f '$KUBE_SERVER$ND/test-node' | jqe '.status.unhealthy == 1'" ||
    fail "the Unhealthy device did not show: $(nd_get test-node | jq -c .status)"
ms=$(( ($(date +%s%N) - start) / 1000000 ))
[ "$ms" -lt $((2000 * MULT)) ] || fail "the health change took $ms ms"
nd_get test-node | jqe '.status.devices[1].health == "Unhealthy" and .status.resources[0].healthy == 2' > /dev/null ||
    fail "device health: $(nd_get test-node | jq -c .status)"
sleep 1.5
[ "$(( $(nd_writes) - w0 ))" = 1 ] || fail "$(( $(nd_writes) - w0 )) writes for one health change"
ok "a device marked Unhealthy in podresd shows in NodeDevices in $ms ms, with one write"

# Changes come together: five within the interval are at most two writes.
w0=$(nd_writes)
for h in Healthy Unhealthy Healthy Unhealthy Healthy; do
    req PATCH /v1/resources/example.com/gpu/devices/gpu-2 "{\"health\":\"$h\"}"
done
sleep 2.5
n=$(( $(nd_writes) - w0 ))
[ "$n" -ge 1 ] && [ "$n" -le 2 ] || fail "$n writes for five changes within a second"
nd_get test-node | jqe '.status.unhealthy == 1' > /dev/null || fail "after the burst: $(nd_get test-node | jq -c .status)"
ok "five health changes in a burst: $n writes (--inventory-interval 1s), the last state shown"

# Holders are not inventory: binding and releasing pods writes no NodeDevices.
uid_a=$(kube_pod ml train-0 test-node)
w0=$(nd_writes)
bind ml train-0 "$uid_a" gpu-0
wait_until 10 bash -c "$KCURL -f '$KUBE_SERVER$DVB/namespaces/ml/devicebindings/train-0' | jqe '.status.phase == \"Bound\"'" ||
    fail "no Bound DeviceBinding: $(tail -3 "$T/syncer.log")"
req DELETE /v1/namespaces/ml/pods/train-0
wait_until 10 sh -c "[ \$($KCURL -o /dev/null -w '%{http_code}' '$KUBE_SERVER$DVB/namespaces/ml/devicebindings/train-0') = 404 ]" ||
    fail "the DeviceBinding stayed"
sleep 1.5
[ "$(nd_writes)" = "$w0" ] || fail "$(( $(nd_writes) - w0 )) NodeDevices writes for a pod's bind and release"
ok "a pod binding and releasing a device writes no NodeDevices"

# Idle, and across a restart: nothing written.
w0=$(nd_writes)
sleep 4
sy_stop
sy_start
wait_until 10 curl -sf "http://127.0.0.1:$SY_PORT/readyz" > /dev/null || fail "not ready after restart"
sleep 2
[ "$(nd_writes)" = "$w0" ] || fail "$(( $(nd_writes) - w0 )) NodeDevices writes while idle and across a restart"
grep -q '^podres_syncer_inventory_devices 4$' <<<"$(curl -s "http://127.0.0.1:$SY_PORT/metrics")" ||
    fail "metrics: $(curl -s "http://127.0.0.1:$SY_PORT/metrics" | grep inventory)"
ok "idle for 6 s and across a restart: no NodeDevices write"

# Repaired: a hand edit of the status is undone, a deleted object is made again.
kapi PATCH "$ND/test-node/status" '{"status":{"summary":"example.com/gpu=99","unhealthy":7}}' application/merge-patch+json
[ "$CODE" = 200 ] || fail "hand edit: $CODE $(out)"
wait_until 5 bash -c "$KCURL -f '$KUBE_SERVER$ND/test-node' | jqe '.status.summary == \"example.com/gpu=3,example.com/nic=1\" and .status.unhealthy == 1'" ||
    fail "the hand edit stayed: $(nd_get test-node | jq -c .status)"
k delete nodedevices test-node > /dev/null || fail "delete"
wait_until 5 bash -c "$KCURL -f '$KUBE_SERVER$ND/test-node' | jqe '.status.unhealthy == 1'" ||
    fail "the deleted NodeDevices was not made again: $(tail -3 "$T/syncer.log")"
ok "a hand edit of the status is undone, a deleted NodeDevices made again"

# Its Node deleted: the garbage collector removes it; the syncer says why it waits.
k delete node test-node > /dev/null || fail "delete node"
wait_until 60 sh -c "[ \$($KCURL -o /dev/null -w '%{http_code}' '$KUBE_SERVER$ND/test-node') = 404 ]" ||
    fail "NodeDevices outlived its Node"
wait_until 10 grep -q "NodeDevices test-node not written: no Node 'test-node'" "$T/syncer.log" ||
    fail "no reason logged: $(tail -5 "$T/syncer.log")"
grep -qE '^podres_syncer_inventory_skipped_total\{reason="no_node"\} [1-9]' <<<"$(curl -s "http://127.0.0.1:$SY_PORT/metrics")" ||
    fail "no_node not counted"
[ "$(nd_get test-node)" = "" ] || fail "made again without a Node"
ok "the Node deleted: the garbage collector removes its NodeDevices; the syncer logs and counts why it waits"
sy_stop
