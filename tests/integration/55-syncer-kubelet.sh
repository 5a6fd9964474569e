#!/usr/bin/env bash
# podres-syncer on top of podresd in kubelet mode: the kubelet's bindings
# become DeviceBindings (uid from the API server), a pre-assignment the
# kubelet honours is Bound, one it does not is a Conflict naming both device
# sets, a container the kubelet lists with several groups of one resource
# has one group of it in the status, and a pod the kubelet drops loses its
# DeviceBinding.
. "$(dirname "$0")/lib.sh"

pod() { # NAME DEVICE...
    local ids
    ids=$(printf '"%s",' "${@:2}")
    printf '{"name":"%s","namespace":"ml","containers":[{"name":"main","devices":[{"resourceName":"example.com/gpu","deviceIds":[%s],"topology":{"nodes":[{"ID":0}]}}]}]}' "$1" "${ids%,}"
}
ALLOC='"allocatable":{"devices":[{"resourceName":"example.com/gpu","deviceIds":["gpu-0","gpu-1","gpu-2","gpu-3"],"topology":{"nodes":[{"ID":0}]}},{"resourceName":"example.com/gpu","deviceIds":["gpu-4"],"topology":{"nodes":[{"ID":1}]}},{"resourceName":"example.com/gpu","deviceIds":["gpu-5"],"topology":{"nodes":[{"ID":0}]}}],"cpuIds":[],"memory":[]}'
phase_is() { $KCURL "$KUBE_SERVER/apis/podres.dev/v1alpha1/namespaces/ml/devicebindings/$1" | jqe ".status.phase == \"$2\"" > /dev/null; }
cond() { $KCURL "$KUBE_SERVER/apis/podres.dev/v1alpha1/namespaces/ml/devicebindings/$1" |
         jq -r ".status.conditions[] | select(.type==\"PreassignmentHonored\") | .$2"; }

fk_state "{\"pods\":[],$ALLOC}"
fk_start
pd_config_kubelet
pd_start
kube_up
kube_ns ml
uid_a=$(kube_pod ml a test-node)
kube_pod ml b test-node > /dev/null
kube_pod ml c test-node > /dev/null
kube_pod ml d test-node > /dev/null
sy_start

# Pre-assign gpu-1 to b and gpu-2 to c before the kubelet admits them.
for p in b:gpu-1 c:gpu-2; do
    kapi POST /apis/podres.dev/v1alpha1/namespaces/ml/devicebindings \
      "{\"apiVersion\":\"podres.dev/v1alpha1\",\"kind\":\"DeviceBinding\",\"metadata\":{\"name\":\"${p%%:*}\",\"namespace\":\"ml\",\"labels\":{\"podres.dev/node\":\"test-node\"}},\"spec\":{\"nodeName\":\"test-node\",\"containers\":[{\"name\":\"main\",\"devices\":[{\"resourceName\":\"example.com/gpu\",\"deviceIds\":[\"${p##*:}\"]}]}]}}"
    [ "$CODE" = 201 ] || fail "pre-assign ${p%%:*}: $CODE $(out)"
done
wait_until 5 phase_is b Pending || fail "b is not Pending"
wait_until 5 phase_is c Pending || fail "c is not Pending"

# The kubelet binds a (no pre-assignment), b as pre-assigned, c to another device.
fk_state "{\"pods\":[$(pod a gpu-0),$(pod b gpu-1),$(pod c gpu-3)],$ALLOC}"
wait_until 5 phase_is a Bound || fail "no DeviceBinding for the kubelet's pod a: $(tail -5 "$T/syncer.log")"
dvb ml a
[ "$(jqo .status.podUID)" = "$uid_a" ] || fail "podUID should come from the API server: $(out)"
[ "$(jqo '.status.containers[0].devices[0].deviceIds[0]')" = gpu-0 ] || fail "devices: $(out)"
ok "kubelet mode: the kubelet's binding is a DeviceBinding with the API server's pod uid"
wait_until 5 phase_is b Bound || fail "b is not Bound"
[ "$(cond b status)" = True ] || fail "b: PreassignmentHonored $(cond b status)"
ok "a pre-assignment the kubelet honours is Bound, PreassignmentHonored=True"
wait_until 5 phase_is c Conflict || fail "c is not a Conflict"
msg=$(cond c message)
echo "$msg" | grep -q "gpu-3" && echo "$msg" | grep -q "gpu-2" || fail "the message does not name both sets: $msg"
[ "$(cond c reason)" = Mismatch ] || fail "reason $(cond c reason)"
ok "the kubelet chose other devices: Conflict naming both sets ($msg)"

# The kubelet's List gives one group per device and NUMA node: d's
# container has two of example.com/gpu. The CRD keys a container's groups
# by resourceName, so the status has one, with both devices and nodes.
two='{"name":"d","namespace":"ml","containers":[{"name":"main","devices":[{"resourceName":"example.com/gpu","deviceIds":["gpu-4"],"topology":{"nodes":[{"ID":1}]}},{"resourceName":"example.com/gpu","deviceIds":["gpu-5"],"topology":{"nodes":[{"ID":0}]}}]}]}'
fk_state "{\"pods\":[$(pod a gpu-0),$(pod b gpu-1),$(pod c gpu-3),$two],$ALLOC}"
wait_until 5 phase_is d Bound || fail "d is not Bound: $(tail -5 "$T/syncer.log")"
dvb ml d
[ "$(jq -cS '.status.containers[0].devices' "$T/out")" = \
  '[{"deviceIds":["gpu-4","gpu-5"],"resourceName":"example.com/gpu","topology":{"nodes":[{"id":1},{"id":0}]}}]' ] ||
    fail "d's groups: $(jq -c .status "$T/out")"
[ "$(jqo .status.summary)" = example.com/gpu=2 ] || fail "summary: $(jqo .status.summary)"
ok "two groups of one resource in a container are one group of the status: $(jqo .status.boundDevices)"

# The kubelet drops pod a: its DeviceBinding goes.
fk_state "{\"pods\":[$(pod b gpu-1),$(pod c gpu-3),$two],$ALLOC}"
wait_until 5 sh -c "[ \$($KCURL -o /dev/null -w '%{http_code}' '$KUBE_SERVER/apis/podres.dev/v1alpha1/namespaces/ml/devicebindings/a') = 404 ]" ||
    fail "the DeviceBinding of a dropped pod stayed"
ok "a pod the kubelet drops loses its DeviceBinding"
sy_stop
pd_stop
