#!/usr/bin/env bash
# A pod lifecycle costs the syncer two writes: the DeviceBinding's create and
# its status patch. When the Pod is deleted, kube-controller-manager's garbage
# collector removes the DeviceBinding through its ownerReference and the
# syncer sends no DELETE, whether the Pod is gone at once (gracePeriodSeconds
# 0) or first terminating (a deletionTimestamp) when podresd releases the
# devices. A pod that stays but releases its devices still has its
# DeviceBinding deleted by the syncer.
. "$(dirname "$0")/lib.sh"

pd_start
register example.com/gpu '[{"id":"gpu-0"},{"id":"gpu-1"},{"id":"gpu-2"},{"id":"gpu-3"}]'
kube_up
uid_a=$(kube_pod ml gone test-node)
uid_b=$(kube_pod ml stays test-node)
uid_c=$(kube_pod ml slow test-node)
sy_start

bound() { $KCURL "$KUBE_SERVER$DVB/namespaces/ml/devicebindings/$1" | jqe '.status.phase == "Bound"'; }
absent() { [ "$(dvb_code ml "$1")" = 404 ]; }
# syncer_verbs NAME - the syncer's completed requests on the DeviceBinding
# NAME (status included), "verb code" per line.
syncer_verbs() {
    audit ".objectRef.resource == \"devicebindings\" and .objectRef.name == \"$1\"" |
        jq -r '"\(.verb) \(.responseStatus.code)"'
}

bind ml gone "$uid_a" gpu-0
bind ml stays "$uid_b" gpu-1
bind ml slow "$uid_c" gpu-2
for p in gone stays slow; do
    wait_until 10 bound "$p" || fail "no Bound DeviceBinding for ml/$p: $(tail -5 "$T/syncer.log")"
done
ok "three pods with devices have Bound DeviceBindings"

# The Pod is deleted at once; the kubelet would release the devices after it
# saw the deletion and stopped the containers: a moment later.
kube_pod_delete ml gone
sleep 1
req DELETE /v1/namespaces/ml/pods/gone
expect_code 200 "release ml/gone"
wait_until 15 absent gone || fail "the garbage collector did not remove ml/gone"
sleep 2 # anything the syncer would still send
verbs=$(syncer_verbs gone | sort | tr '\n' ',')
[ "$verbs" = "create 201,patch 200," ] ||
    fail "the syncer's requests on ml/gone: '$verbs', want one create and one status patch"
gc=$(jq -r 'select(.stage == "ResponseComplete" and .verb == "delete" and .objectRef.name == "gone"
    and .objectRef.resource == "devicebindings") | .user.username' "$KUBE_AUDIT" | sort -u)
[ "$gc" = system:serviceaccount:kube-system:generic-garbage-collector ] ||
    fail "ml/gone was deleted by '$gc', want the garbage collector alone"
ok "a deleted pod: create + status patch by the syncer, no DELETE; the garbage collector removed it"

# A graceful deletion: the Pod stays terminating (no kubelet confirms it)
# while podresd releases the devices. The DeviceBinding is the collector's
# once the Pod is gone; the syncer leaves it until then.
kapi DELETE /api/v1/namespaces/ml/pods/slow '{"gracePeriodSeconds":30}'
[ "$CODE" = 200 ] || fail "graceful delete of ml/slow: HTTP $CODE $(head -c 300 "$T/out")"
[ "$(jqo .metadata.deletionTimestamp)" != null ] || fail "ml/slow has no deletionTimestamp: $(out)"
sleep 1
req DELETE /v1/namespaces/ml/pods/slow
expect_code 200 "release ml/slow"
sleep 3
[ "$(dvb_code ml slow)" = 200 ] || fail "ml/slow's DeviceBinding went while its Pod is terminating"
kube_pod_delete ml slow
wait_until 15 absent slow || fail "the garbage collector did not remove ml/slow"
sleep 1
verbs=$(syncer_verbs slow | sort | tr '\n' ',')
[ "$verbs" = "create 201,patch 200," ] ||
    fail "the syncer's requests on ml/slow: '$verbs', want one create and one status patch"
ok "a terminating pod released in podresd: no DELETE by the syncer; the collector removed it"

# The pod stays and releases its devices: no owner goes, so the syncer deletes.
req DELETE /v1/namespaces/ml/pods/stays
expect_code 200 "release ml/stays"
wait_until 5 absent stays || fail "the DeviceBinding of a pod that stays was not deleted"
verbs=$(syncer_verbs stays | sort | tr '\n' ',')
[ "$verbs" = "create 201,delete 200,patch 200," ] ||
    fail "the syncer's requests on ml/stays: '$verbs', want create, status patch, delete"
k get pod -n ml stays > /dev/null || fail "the Pod ml/stays is gone"
ok "a pod that stays but releases its devices: the syncer deletes its DeviceBinding"

sy_stop
pd_stop
