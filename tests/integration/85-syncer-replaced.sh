#!/usr/bin/env bash
# The syncer's merge patches of a DeviceBinding hold only while the object is
# the one it read (its uid and resourceVersion in the patch): against the real
# API server, status and ownerReferences patches go through as ever, without a
# 409; an object deleted and made again for another node while the syncer's
# copy is behind (its DeviceBinding watch held back by the fault-proxy) is
# refused to the syncer's status patch (409), read again and left alone. No
# admission policy is deployed: the precondition alone keeps it unwritten.
. "$(dirname "$0")/lib.sh"

NS=$DVB/namespaces/ml/devicebindings
MERGE=application/merge-patch+json
# field FILTER - FILTER over ml/r0 as the API server has it.
field() { $KCURL "$KUBE_SERVER$NS/r0" | jq -r "$1"; }
# is FILTER VALUE - ml/r0's FILTER is VALUE.
is() { [ "$(field "$1")" = "$2" ]; }
# patches CODE - the syncer's PATCHes of ml/r0 (any subresource) answered CODE.
patches() { audit ".verb == \"patch\" and .objectRef.name == \"r0\" and .responseStatus.code == $1" | wc -l; }
# open_watches - the watch streams open through the proxy.
open_watches() { fp GET /_proxy/state | jq .watches; }

pd_start
register example.com/gpu '[{"id":"gpu-0"},{"id":"gpu-1"},{"id":"gpu-2"}]'
kube_up
fp_start
SY_KCFG=$FP_KCFG sy_start --log-level debug
uid=$(kube_pod ml r0 test-node)

# 1. Patches with the preconditions go through: a status change in place, an
# owner reference removed by hand put back.
bind ml r0 "$uid" gpu-0
wait_until 10 is .status.phase Bound || fail "no Bound DeviceBinding ml/r0: $(tail -5 "$T/syncer.log")"
bind ml r0 "$uid" gpu-0 gpu-1
wait_until 5 is .status.summary example.com/gpu=2 || fail "status not updated: $(field .status)"
kapi PATCH "$NS/r0" '{"metadata":{"ownerReferences":null}}' "$MERGE"
[ "$CODE" = 200 ] || fail "removing the owner by hand: HTTP $CODE $(out)"
wait_until 5 is '.metadata.ownerReferences[0].uid' "$uid" ||
    fail "the owner was not put back: $(field .metadata.ownerReferences)"
[ "$(patches 200)" -ge 2 ] || fail "$(patches 200) successful PATCHes of ml/r0 by the syncer"
[ "$(patches 409)" = 0 ] || fail "$(patches 409) PATCHes of ml/r0 refused (409) with nothing racing them"
ok "status and ownerReferences patches carrying uid and resourceVersion are accepted; no 409"

# 2. The syncer's copy falls behind: its DeviceBinding watch is held back.
# The object is deleted and made again for other-node, then podresd's binding
# changes: the status patch names the object read, and is refused.
n=$(open_watches)
fp POST /_proxy/faults 'watch-stall:resource=devicebindings:seconds=60' > /dev/null
fp POST /_proxy/watches/drop > /dev/null
watching() { [ "$(open_watches)" -ge "$n" ]; }
wait_until 10 watching ||
    fail "the syncer did not watch again ($(open_watches) of $n watches)"
sleep 1 # the informer is current again (its list is not held back)
kapi DELETE "$NS/r0"
[ "$CODE" = 200 ] || fail "delete ml/r0 by hand: HTTP $CODE $(out)"
kapi POST "$NS" '{"apiVersion":"podres.dev/v1alpha1","kind":"DeviceBinding","metadata":{"name":"r0","namespace":"ml","labels":{"podres.dev/node":"other-node"}},"spec":{"nodeName":"other-node"}}'
[ "$CODE" = 201 ] || fail "make ml/r0 again for other-node: HTTP $CODE $(out)"
other_uid=$(jqo .metadata.uid) other_rv=$(jqo .metadata.resourceVersion)
untouched() { is .metadata.uid "$other_uid" && is .metadata.resourceVersion "$other_rv" && is .status null; }
seen() { grep -q "DeviceBinding ml/r0 exists but is labelled for node 'other-node', not node 'test-node'" "$T/syncer.log"; }
bind ml r0 "$uid" gpu-2
# reacted - the syncer wrote the object, or read it again and left it alone.
reacted() { ! untouched || seen; }
wait_until 10 reacted || true
untouched || fail "other-node's DeviceBinding was written: $(field .)"
seen || fail "the replaced object is not seen as other-node's: $(tail -5 "$T/syncer.log")"
# The audit log and the syncer's counter may trail the log line a moment.
refused() { [ "$(audit '.verb == "patch" and .objectRef.name == "r0" and .objectRef.subresource == "status" and .responseStatus.code == 409' | wc -l)" -ge 1 ]; }
wait_until 10 refused || fail "no status PATCH of ml/r0 refused with 409"
counted() { curl -s "http://127.0.0.1:$SY_PORT/metrics" | grep -qF 'podres_syncer_api_requests_total{verb="PATCH",code="409"}'; }
wait_until 10 counted || fail "the 409 is not counted in podres_syncer_api_requests_total"
# The watch catches up (the stall ended): still left alone.
fp DELETE /_proxy/faults > /dev/null
fp POST /_proxy/watches/drop > /dev/null
sleep $((3 * MULT))
untouched || fail "other-node's DeviceBinding was written once the syncer caught up: $(field .)"
ok "an object deleted and made again for another node behind the syncer's copy: the status patch is refused (409), read again, left alone"
sy_stop
pd_stop
