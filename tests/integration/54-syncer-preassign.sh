#!/usr/bin/env bash
# Pre-assignment: a scheduler writes a DeviceBinding spec; the node reserves
# the devices and reports Pending, Bound (PreassignmentHonored=True) or
# Conflict with the reason; the reservation goes with the object, and after
# --reservation-ttl when the pod never arrives.
. "$(dirname "$0")/lib.sh"

preassign() { # NAME DEVICE...
    local name=$1 ids
    shift
    ids=$(printf '"%s",' "$@")
    cat > "$T/pa-$name.json" <<JSON
{"apiVersion":"podres.dev/v1alpha1","kind":"DeviceBinding",
 "metadata":{"name":"$name","namespace":"ml","labels":{"podres.dev/node":"test-node"}},
 "spec":{"nodeName":"test-node","containers":[{"name":"main","devices":[{"resourceName":"example.com/gpu","deviceIds":[${ids%,}]}]}]}}
JSON
    k apply -f "$T/pa-$name.json" > /dev/null || fail "kubectl apply $name"
}
phase_is() { # NAME PHASE
    $KCURL "$KUBE_SERVER/apis/podres.dev/v1alpha1/namespaces/ml/devicebindings/$1" | jqe ".status.phase == \"$2\"" > /dev/null
}
cond() { # NAME FIELD
    $KCURL "$KUBE_SERVER/apis/podres.dev/v1alpha1/namespaces/ml/devicebindings/$1" |
        jq -r ".status.conditions[] | select(.type==\"PreassignmentHonored\") | .$2"
}
resv_state() { curl -s --unix-socket "$PD_SOCK" "http://localhost/v1/reservations/ml/$1" | jq -r '.reservation.state // "none"'; }

pd_start
register example.com/gpu "$(jq -nc '[range(0;6) | {id: "gpu-\(.)"}]')"
kube_up
fp_start
SY_KCFG=$FP_KCFG sy_start --reservation-ttl 4s
kube_ns ml

# Before the pod exists: Pending, devices reserved in podresd.
preassign p1 gpu-0
wait_until 3 phase_is p1 Pending || fail "p1 is not Pending: $(kapi GET /apis/podres.dev/v1alpha1/namespaces/ml/devicebindings/p1; out)"
[ "$(resv_state p1)" = Pending ] || fail "no reservation in podresd"
req GET /v1/devices
[ "$(jqo '.devices[] | select(.id=="gpu-0") | .reservedFor.name')" = p1 ] || fail "reservedFor"
[ "$(cond p1 status)" = Unknown ] || fail "condition while pending: $(cond p1 status)"
ok "a pre-assignment written with kubectl is Pending and reserved in podresd"

# The pod arrives and allocates: the reservation is used; Bound, honoured.
uid1=$(kube_pod ml p1 test-node)
req POST /v1/namespaces/ml/pods/p1/allocate "{\"uid\":\"$uid1\",\"containers\":[{\"name\":\"main\",\"requests\":{\"example.com/gpu\":1}}]}"
expect_code 201 "allocate p1"
[ "$(jqo '.podResources.containers[0].devices[0].deviceIds[0]')" = gpu-0 ] || fail "allocate ignored the reservation"
wait_until 3 phase_is p1 Bound || fail "p1 is not Bound"
[ "$(cond p1 status)" = True ] && [ "$(cond p1 reason)" = Matched ] || fail "condition: $(cond p1 status) $(cond p1 reason)"
[ -n "$(cond p1 lastTransitionTime)" ] || fail "no lastTransitionTime"
dvb ml p1
[ "$(jqo '.metadata.ownerReferences[0].uid')" = "$uid1" ] || fail "no ownerReference to the pod"
[ "$(jqo '.spec.containers[0].devices[0].deviceIds[0]')" = gpu-0 ] || fail "the scheduler's spec was touched"
wait_until 5 bash -c "$KCURL '$KUBE_SERVER/apis/events.k8s.io/v1/namespaces/ml/events' | jqe '[.items[] | select(.regarding.name == \"p1\" and .reason == \"PreassignmentHonored\" and .type == \"Normal\")] | length == 1'" ||
    fail "no PreassignmentHonored event on p1"
ok "allocate uses the reservation; Bound with PreassignmentHonored=True and a lastTransitionTime, and a Normal Event"

# Two pre-assignments of one device: the second is a Conflict naming it.
kube_pod ml p2 test-node > /dev/null
kube_pod ml p3 test-node > /dev/null
preassign p2 gpu-1
wait_until 3 phase_is p2 Pending || fail "p2 is not Pending"
preassign p3 gpu-1
wait_until 3 phase_is p3 Conflict || fail "p3 is not a Conflict"
cond p3 message | grep -q "gpu-1 is reserved for pod ml/p2" || fail "message: $(cond p3 message)"
ok "a second pre-assignment of the same device is a Conflict naming it: $(cond p3 message)"

# The Conflict is an Event on the DeviceBinding; the same conflict again (a
# flap: the scheduler moves p3 away and back twice) counts one series.
# events_of NAME REASON - the Events (events.k8s.io/v1) about DeviceBinding ml/NAME with REASON.
events_of() {
    $KCURL "$KUBE_SERVER/apis/events.k8s.io/v1/namespaces/ml/events" |
        jq -c --arg n "$1" --arg r "$2" '[.items[] | select(.regarding.kind == "DeviceBinding"
            and .regarding.name == $n and .reason == $r)]'
}
wait_until 5 bash -c "$KCURL '$KUBE_SERVER/apis/events.k8s.io/v1/namespaces/ml/events' | jqe '[.items[] | select(.regarding.name == \"p3\" and .reason == \"Conflict\")] | length == 1'" ||
    fail "no Conflict event on p3: $(events_of p3 Conflict)"
for i in 1 2; do
    preassign p3 gpu-3
    wait_until 3 phase_is p3 Pending || fail "p3 did not move to gpu-3"
    preassign p3 gpu-1
    wait_until 3 phase_is p3 Conflict || fail "p3 did not come back to the conflict"
done
series() { events_of p3 Conflict | jqe 'length == 1 and .[0].series.count == 3' > /dev/null; }
wait_until 5 series || fail "a flapping conflict is not one series of 3: $(events_of p3 Conflict)"
events_of p3 Conflict | jqe '.[0] | .type == "Warning" and .reportingController == "podres.dev/podres-syncer"
    and .reportingInstance == "test-node" and .action == "Reserve" and (.note | contains("gpu-1 is reserved for pod ml/p2"))
    and .regarding.uid != ""' > /dev/null || fail "the Conflict event: $(events_of p3 Conflict)"
k events -n ml --for devicebinding/p3 > "$T/kevents" 2>&1 || fail "kubectl events: $(cat "$T/kevents")"
grep -E '\(x3 over .*Warning +Conflict +DeviceBinding/p3 ' "$T/kevents" | grep -q 'gpu-1 is reserved for pod ml/p2' ||
    fail "kubectl events --for devicebinding/p3: $(cat "$T/kevents")"
ok "the Conflict is a Warning Event on the DeviceBinding (kubectl events --for devicebinding/p3); a flapping conflict is one series (count 3)"

# Unhealthy and unknown devices.
req PATCH /v1/resources/example.com/gpu/devices/gpu-2 '{"health":"Unhealthy"}'
kube_pod ml p4 test-node > /dev/null
kube_pod ml p5 test-node > /dev/null
preassign p4 gpu-2
preassign p5 gpu-9
wait_until 3 phase_is p4 Conflict || fail "unhealthy device: not a Conflict"
cond p4 message | grep -q "gpu-2 is Unhealthy" || fail "message: $(cond p4 message)"
wait_until 3 phase_is p5 Conflict || fail "unknown device: not a Conflict"
cond p5 message | grep -q "gpu-9 is not registered" || fail "message: $(cond p5 message)"
ok "unhealthy and unknown devices are Conflicts with the reason"

# The scheduler changes its mind: the reservation follows.
preassign p3 gpu-3
wait_until 3 phase_is p3 Pending || fail "p3 did not follow its new spec"
req GET /v1/devices
[ "$(jqo '.devices[] | select(.id=="gpu-3") | .reservedFor.name')" = p3 ] || fail "reservation not moved"
ok "a changed spec.containers moves the reservation and re-evaluates"

# Deleting the DeviceBinding releases the reservation.
kapi DELETE /apis/podres.dev/v1alpha1/namespaces/ml/devicebindings/p2
wait_until 3 sh -c "[ \"\$(curl -s --unix-socket '$PD_SOCK' http://localhost/v1/reservations/ml/p2 | jq -r .code)\" = 404 ]" ||
    fail "the reservation survived its DeviceBinding"
ok "deleting the DeviceBinding releases the reservation"

# The pod goes away: the garbage collector removes the DeviceBinding (its
# owner was set when the pod appeared) and the reservation is released.
# The collector works on its own schedule: under load that takes seconds.
owners() { $KCURL "$KUBE_SERVER/apis/podres.dev/v1alpha1/namespaces/ml/devicebindings/$1" | jq -c '[.metadata.ownerReferences[]?.uid]'; }
wait_until 5 sh -c "[ '$(jq -nc --arg u "$uid1" '[$u]')' = \"\$($KCURL '$KUBE_SERVER/apis/podres.dev/v1alpha1/namespaces/ml/devicebindings/p1' | jq -c '[.metadata.ownerReferences[]?.uid]')\" ]" ||
    fail "p1's DeviceBinding is not owned by its pod $uid1: owners $(owners p1)"
kube_pod_delete ml p1
wait_until 20 sh -c "[ \"\$(curl -s --unix-socket '$PD_SOCK' http://localhost/v1/reservations/ml/p1 | jq -r .code)\" = 404 ]" ||
    fail "the reservation survived its pod: $(resv_state p1); its DeviceBinding: $($KCURL "$KUBE_SERVER/apis/podres.dev/v1alpha1/namespaces/ml/devicebindings/p1" | jq -c '{owners: [.metadata.ownerReferences[]?.uid], phase: .status.phase, code: .code}')"
ok "the pod goes away: DeviceBinding collected, reservation released"

# A pre-assignment whose device another pod holds, or another pre-assignment
# reserved, waits as a Conflict; when the device is let go it is reserved at
# once, not at the next resync (300 s away).
hold_uid=$(kube_pod ml holder test-node)
bind ml holder "$hold_uid" gpu-4
kube_pod ml p7 test-node > /dev/null
kube_pod ml p8 test-node > /dev/null
preassign p7 gpu-4
wait_until 3 phase_is p7 Conflict || fail "p7: a held device is not a Conflict"
cond p7 message | grep -q "gpu-4 is bound to pod ml/holder" || fail "message: $(cond p7 message)"
req DELETE /v1/namespaces/ml/pods/holder
expect_code 200 "release the holder"
wait_until 5 phase_is p7 Pending || fail "p7 still waits after the holder let gpu-4 go: $(cond p7 message)"
[ "$(resv_state p7)" = Pending ] || fail "p7: no reservation"
preassign p8 gpu-4
wait_until 3 phase_is p8 Conflict || fail "p8: a reserved device is not a Conflict"
kapi DELETE /apis/podres.dev/v1alpha1/namespaces/ml/devicebindings/p7
wait_until 5 phase_is p8 Pending || fail "p8 still waits after p7's reservation went: $(cond p8 message)"
[ "$(resv_state p8)" = Pending ] || fail "p8: no reservation"
ok "a pre-assignment waiting for a held or reserved device gets it as soon as it is let go"

# Nothing is rewritten while nothing changes.
sleep 1
w0=$(writes)
sleep $((3 * MULT))
[ "$(writes)" = "$w0" ] || fail "$(( $(writes) - w0 )) writes while nothing changed"
ok "no writes while nothing changes"

# A pod that never arrives: the reservation is released after the TTL.
preassign p6 gpu-5
wait_until 3 phase_is p6 Pending || fail "p6 is not Pending"
wait_until 8 phase_is p6 Conflict || fail "the TTL did not expire p6"
[ "$(cond p6 reason)" = ReservationExpired ] || fail "reason $(cond p6 reason)"
[ "$(resv_state p6)" = none ] || fail "the reservation of p6 was not released"
wait_until 5 bash -c "$KCURL '$KUBE_SERVER/apis/events.k8s.io/v1/namespaces/ml/events' | jqe '[.items[] | select(.regarding.name == \"p6\" and .reason == \"ReservationExpired\" and .type == \"Warning\")] | length == 1'" ||
    fail "no ReservationExpired event on p6"
ok "the TTL releases an unused reservation and says so, in the condition and a Warning Event: $(cond p6 message)"

# A scheduler's own owner (a PodGroup) stays when the Pod owner is added.
kapi POST /apis/podres.dev/v1alpha1/namespaces/ml/devicebindings \
    '{"apiVersion":"podres.dev/v1alpha1","kind":"DeviceBinding","metadata":{"name":"grp","namespace":"ml","labels":{"podres.dev/node":"test-node"},"ownerReferences":[{"apiVersion":"scheduling.x-k8s.io/v1alpha1","kind":"PodGroup","name":"g","uid":"pg-1"}]},"spec":{"nodeName":"test-node","containers":[{"name":"main","devices":[{"resourceName":"example.com/gpu","deviceIds":["gpu-9"]}]}]}}'
[ "$CODE" = 201 ] || fail "create ml/grp: HTTP $CODE $(out)"
grp_uid=$(kube_pod ml grp test-node)
owners() { $KCURL "$KUBE_SERVER/apis/podres.dev/v1alpha1/namespaces/ml/devicebindings/grp" | jq -c '[.metadata.ownerReferences[] | [.kind, .uid]] | sort'; }
wait_until 5 bash -c "$KCURL '$KUBE_SERVER/apis/podres.dev/v1alpha1/namespaces/ml/devicebindings/grp' | jqe '.metadata.ownerReferences | length == 2' > /dev/null" ||
    fail "owners of ml/grp: $(owners)"
[ "$(owners)" = "[[\"Pod\",\"$grp_uid\"],[\"PodGroup\",\"pg-1\"]]" ] || fail "owners of ml/grp: $(owners)"
ok "a scheduler's owner reference is kept beside the Pod's"

# The syncer's copy is behind: a scheduler pre-assigns on a DeviceBinding
# the syncer is about to delete (its pod lets its devices go). The DELETE
# carries the resourceVersion it decided on: 409, read again, kept.
st_uid=$(kube_pod ml stale test-node)
bind ml stale "$st_uid" gpu-5
wait_until 5 phase_is stale Bound || fail "no Bound DeviceBinding for ml/stale"
fp POST /_proxy/faults 'watch-stall:resource=devicebindings:seconds=4' > /dev/null
fp POST /_proxy/watches/drop > /dev/null
sleep 1
kapi PATCH /apis/podres.dev/v1alpha1/namespaces/ml/devicebindings/stale \
    '{"spec":{"containers":[{"name":"main","devices":[{"resourceName":"example.com/gpu","deviceIds":["gpu-5"]}]}]}}' \
    application/merge-patch+json
[ "$CODE" = 200 ] || fail "the scheduler's PATCH: HTTP $CODE $(out)"
req DELETE /v1/namespaces/ml/pods/stale
expect_code 200 "release ml/stale"
sleep 2
dvb ml stale
[ "$CODE" = 200 ] || fail "the syncer deleted a pre-assignment its copy had not seen: HTTP $CODE"
wait_until 8 phase_is stale Pending || fail "ml/stale is not a Pending pre-assignment: $(kapi GET /apis/podres.dev/v1alpha1/namespaces/ml/devicebindings/stale; out)"
ok "a DELETE decided on a stale copy is refused (resourceVersion) and the pre-assignment kept"
sy_stop
pd_stop
