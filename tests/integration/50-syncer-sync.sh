#!/usr/bin/env bash
# podres-syncer against real podresd and a real control plane: bindings become
# DeviceBindings, releases delete them, restarts leave no duplicates or
# orphans, hand edits are repaired, other nodes' objects are left alone, the
# garbage collector is not fought, and an idle node writes nothing.
. "$(dirname "$0")/lib.sh"

pd_start
register example.com/gpu '[{"id":"gpu-0","topology":{"nodes":[{"ID":0}]}},{"id":"gpu-1","topology":{"nodes":[{"ID":0}]}},{"id":"gpu-2","topology":{"nodes":[{"ID":1}]}},{"id":"gpu-3"}]'
kube_up
uid_a=$(kube_pod ml train-0 test-node)
uid_b=$(kube_pod ml train-1 test-node)
uid_c=$(kube_pod web nginx test-node)
sy_start

# A binding appears in seconds, not at the next resync (300 s), with the
# right status. The bound is loose: a loaded CI runner is slow, not wrong.
bind ml train-0 "$uid_a" gpu-0 gpu-1
start=$(date +%s%N)
wait_until 10 bash -c "$KCURL '$KUBE_SERVER/apis/podres.dev/v1alpha1/namespaces/ml/devicebindings/train-0' | jqe '.status.phase == \"Bound\"'" ||
    fail "no Bound DeviceBinding for ml/train-0: $(cat "$T/syncer.log")"
ms=$(( ($(date +%s%N) - start) / 1000000 ))
[ "$ms" -lt $((5000 * MULT)) ] || fail "the DeviceBinding took ${ms} ms"
dvb ml train-0
[ "$(jqo .status.summary)" = "example.com/gpu=2" ] || fail "summary: $(out)"
[ "$(jqo '.status.containers[0].devices[0].deviceIds | join(",")')" = "gpu-0,gpu-1" ] || fail "ids"
[ "$(jqo .status.boundDevices)" = "gpu-0,gpu-1" ] || fail "boundDevices: $(jqo .status.boundDevices)"
[ "$(jqo '.status.containers[0].devices[0].topology.nodes[0].id')" = 0 ] || fail "topology"
[ "$(jqo .status.podUID)" = "$uid_a" ] || fail "podUID"
[ "$(jqo .status.nodeName)" = test-node ] && [ "$(jqo .spec.nodeName)" = test-node ] || fail "nodeName"
[ "$(jqo '.metadata.labels["podres.dev/node"]')" = test-node ] || fail "label"
[ "$(jqo '.metadata.ownerReferences[0].uid')" = "$uid_a" ] || fail "ownerReference"
[ "$(jqo .status.observedRevision)" = "$(curl -s --unix-socket "$PD_SOCK" http://localhost/v1/namespaces/ml/pods/train-0 | jq .podResources.revision)" ] ||
    fail "observedRevision"
ok "a binding is a Bound DeviceBinding in ${ms} ms, with label, owner and status"

# (a list can lag the status just written by a moment on a loaded machine: poll)
row='^ml +train-0 +test-node +Bound +example.com/gpu=2 '
kget_dvb() { k get devicebindings -A > "$T/kget" 2>&1 && grep -qE "$row" "$T/kget"; }
wait_until 10 kget_dvb || true
head -1 "$T/kget" | grep -qE 'NAMESPACE +NAME +NODE +PHASE +DEVICES +AGE' || fail "columns: $(cat "$T/kget")"
grep -qE "$row" "$T/kget" || fail "row: $(cat "$T/kget")"
ok "kubectl get devicebindings -A shows it"

# A pod without devices gets none; releasing deletes; rebinding recreates.
req PUT /v1/namespaces/web/pods/nginx "{\"uid\":\"$uid_c\",\"containers\":[{\"name\":\"main\"}]}"
bind ml train-1 "$uid_b" gpu-2
wait_until 3 bash -c "$KCURL '$KUBE_SERVER/apis/podres.dev/v1alpha1/namespaces/ml/devicebindings/train-1' | jqe '.status.phase'" ||
    fail "no DeviceBinding for ml/train-1"
dvb web nginx; [ "$CODE" = 404 ] || fail "a pod without devices got a DeviceBinding"
req DELETE /v1/namespaces/ml/pods/train-1
wait_until 3 sh -c "[ \$($KCURL -o /dev/null -w '%{http_code}' '$KUBE_SERVER/apis/podres.dev/v1alpha1/namespaces/ml/devicebindings/train-1') = 404 ]" ||
    fail "release did not delete the DeviceBinding"
bind ml train-1 "$uid_b" gpu-2 gpu-3
wait_until 3 bash -c "$KCURL '$KUBE_SERVER/apis/podres.dev/v1alpha1/namespaces/ml/devicebindings/train-1' | jqe '.status.summary == \"example.com/gpu=2\"'" ||
    fail "rebinding did not recreate it"
ok "release deletes, rebind recreates, a pod without devices gets none"

# A change of the binding updates the status in place.
bind ml train-0 "$uid_a" gpu-0
wait_until 3 bash -c "$KCURL '$KUBE_SERVER/apis/podres.dev/v1alpha1/namespaces/ml/devicebindings/train-0' | jqe '.status.summary == \"example.com/gpu=1\"'" ||
    fail "status not updated"
ok "a changed binding updates the status"

# Other nodes' DeviceBindings are never touched.
kapi POST /apis/podres.dev/v1alpha1/namespaces/ml/devicebindings \
  '{"apiVersion":"podres.dev/v1alpha1","kind":"DeviceBinding","metadata":{"name":"elsewhere","namespace":"ml","labels":{"podres.dev/node":"other-node"}},"spec":{"nodeName":"other-node"}}'
[ "$CODE" = 201 ] || fail "create other node's object: $CODE"
other_rv=$(jqo .metadata.resourceVersion)
# ... not even when one of this node's pods has its name: read, logged, and
# left alone for 30 s and more, not tried again every few hundred ms.
kapi POST /apis/podres.dev/v1alpha1/namespaces/ml/devicebindings \
  '{"apiVersion":"podres.dev/v1alpha1","kind":"DeviceBinding","metadata":{"name":"clash","namespace":"ml","labels":{"podres.dev/node":"other-node"}},"spec":{"nodeName":"other-node"}}'
[ "$CODE" = 201 ] || fail "create other node's clash: $CODE"
clash_rv=$(jqo .metadata.resourceVersion)
uid_clash=$(kube_pod ml clash test-node)
bind ml clash "$uid_clash" gpu-1
wait_until 5 grep -q "DeviceBinding ml/clash exists but is labelled for node 'other-node'" "$T/syncer.log" ||
    fail "the clash is not logged: $(tail -3 "$T/syncer.log")"
sleep 4
posts=$(audit '.verb == "create" and .objectRef.resource == "devicebindings" and .objectRef.namespace == "ml" and .responseStatus.code == 409' | wc -l)
[ "$posts" -le 2 ] || fail "$posts creates of ml/clash in 4 s"
kapi GET /apis/podres.dev/v1alpha1/namespaces/ml/devicebindings/clash
[ "$(jqo .metadata.resourceVersion)" = "$clash_rv" ] || fail "the other node's clash was written"
req DELETE /v1/namespaces/ml/pods/clash
ok "a name taken by another node's DeviceBinding: left alone, logged, not hammered ($posts create)"

# Hand edits: a deleted object comes back, an edited status is repaired.
kapi DELETE /apis/podres.dev/v1alpha1/namespaces/ml/devicebindings/train-0
wait_until 10 bash -c "$KCURL '$KUBE_SERVER/apis/podres.dev/v1alpha1/namespaces/ml/devicebindings/train-0' | jqe '.status.phase == \"Bound\"'" ||
    fail "a DeviceBinding deleted by hand was not recreated"
kapi PATCH /apis/podres.dev/v1alpha1/namespaces/ml/devicebindings/train-1/status '{"status":{"summary":"bogus","phase":"Conflict"}}' application/merge-patch+json
[ "$CODE" = 200 ] || fail "hand edit: $CODE"
wait_until 3 bash -c "$KCURL '$KUBE_SERVER/apis/podres.dev/v1alpha1/namespaces/ml/devicebindings/train-1' | jqe '.status.summary == \"example.com/gpu=2\" and .status.phase == \"Bound\"'" ||
    fail "a status edited by hand was not repaired"
ok "deleted and edited DeviceBindings are repaired"

# Restart, SIGKILL included: no duplicates, no orphans.
kill -9 "$SY_PID"; wait "$SY_PID" 2>/dev/null || true
req DELETE /v1/namespaces/ml/pods/train-1
bind ml train-0 "$uid_a" gpu-0 gpu-1
sy_start --resync-interval 5s # resyncs inside the idle window below
wait_until 5 sh -c "[ \$($KCURL -o /dev/null -w '%{http_code}' '$KUBE_SERVER/apis/podres.dev/v1alpha1/namespaces/ml/devicebindings/train-1') = 404 ]" ||
    fail "an orphan survived a restart"
wait_until 3 bash -c "$KCURL '$KUBE_SERVER/apis/podres.dev/v1alpha1/namespaces/ml/devicebindings/train-0' | jqe '.status.summary == \"example.com/gpu=2\"'" ||
    fail "a change made while the syncer was down was not applied"
[ "$($KCURL "$KUBE_SERVER/apis/podres.dev/v1alpha1/devicebindings?labelSelector=podres.dev%2Fnode%3Dtest-node" | jq '.items | length')" = 1 ] ||
    fail "duplicates or orphans after SIGKILL"
kapi GET /apis/podres.dev/v1alpha1/namespaces/ml/devicebindings/elsewhere
[ "$(jqo .metadata.resourceVersion)" = "$other_rv" ] || fail "another node's DeviceBinding was modified"
ok "after SIGKILL and restart: exactly the node's state; other nodes untouched"

# Idle: no writes at all in 15 s, across resyncs (every key reconciled again,
# every 5 s here) and podresd's feed bookmarks (every 10 s).
resync_ts() {
    curl -s "http://127.0.0.1:$SY_PORT/metrics" |
        awk '$1 == "podres_syncer_last_resync_timestamp_seconds" {print $2}'
}
sleep 1
w0=$(writes) r0=$(resync_ts)
sleep $((15 * MULT))
[ "$(writes)" = "$w0" ] || fail "$(( $(writes) - w0 )) API writes while nothing changed"
[ "$(resync_ts)" -ge $((r0 + 5)) ] || fail "no resync in the idle window (last at $(resync_ts), was $r0)"
ok "no change on the node: zero API writes in 15 s, across resyncs"

# The Pod is deleted in the API server: kube-controller-manager's garbage
# collector removes the DeviceBinding through its ownerReference, and the
# syncer does not recreate it (podresd still has the binding).
kube_pod_delete ml train-0
wait_until 5 sh -c "[ \$($KCURL -o /dev/null -w '%{http_code}' '$KUBE_SERVER/apis/podres.dev/v1alpha1/namespaces/ml/devicebindings/train-0') = 404 ]" ||
    fail "the GC did not remove the DeviceBinding"
w0=$(writes)
sleep 2
dvb ml train-0
[ "$CODE" = 404 ] || fail "the syncer recreated a DeviceBinding of a deleted Pod"
[ "$(writes)" = "$w0" ] || fail "the syncer wrote after the GC"
gc_deletes=$(jq -c 'select(.stage == "ResponseComplete" and .verb == "delete" and .objectRef.name == "train-0"
    and .objectRef.resource == "devicebindings" and .user.username != "kubernetes-admin") | .user.username' "$KUBE_AUDIT" |
    sort -u)
[ "$gc_deletes" = '"system:serviceaccount:kube-system:generic-garbage-collector"' ] ||
    fail "the DeviceBinding was deleted by others than the garbage collector: $gc_deletes"
ok "the garbage collector deletes the DeviceBinding; the syncer sends no DELETE and does not recreate it"

curl -s "http://127.0.0.1:$SY_PORT/metrics" > "$T/m"
for m in 'podres_syncer_api_requests_total{verb="PATCH",code="200"}' podres_syncer_queue_depth \
         podres_syncer_sync_lag_seconds_bucket podres_syncer_last_resync_timestamp_seconds \
         podres_syncer_api_retries_total; do
    grep -qF "$m" "$T/m" || fail "metrics lack $m"
done
ok "metrics"
sy_stop
pd_stop
