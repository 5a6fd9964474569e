#!/usr/bin/env bash
# 90-node-deploy.sh - podres as users run it, on a real node (tests/kube/node:
# the upstream kubelet, containerd, runc, CNI, the upstream sample device
# plugin): `kubectl apply -k deploy/` with the project's image (make image);
# the DaemonSet's pod Ready with its exec probes; podresd in kubelet mode
# reads the real kubelet through the hostPath socket; a pod given a device
# by the real kubelet shows up as a Bound DeviceBinding with that device,
# in `kubectl podres who` and in the history; the pod deleted, its binding
# is released and its DeviceBinding collected; an upgrade of the DaemonSet
# (a new image tag) keeps the database and history, and the change feed
# resumes from the last revision seen before it without a gap.
. "$(dirname "$0")/lib.sh"

[ -f "$PODRES_ROOT/build/image/podres-0.1.0.tar" ] || fail "no image: run 'make image' first"
kube_up --scheduler --nodes
node_up --device-plugin
node_deploy
ok "DaemonSet pod $DS_POD Ready (2/2) on the real node"

pd() { curl -sf --max-time 5 --unix-socket "$PD_SOCK" "http://localhost$1"; }
pd /version | jqe '.nodeName == "'"$NODE"'"' > /dev/null || fail "podresd /version: $(pd /version)"
wait_until 30 bash -c "curl -sf --unix-socket '$PD_SOCK' 'http://localhost/v1/devices?resource=example.com/resource' |
    jqe '[.devices[].id] | sort == [\"Dev-1\",\"Dev-2\"]'" ||
    fail "podresd does not list the kubelet's devices: $(pd '/v1/devices?resource=example.com/resource')"
ok "podresd reads the real kubelet: example.com/resource Dev-1, Dev-2"

# ---- a pod given a device by the kubelet --------------------------------------
node_pod ml dp-0
dev=$(pod_devices ml dp-0)
case $dev in Dev-1 | Dev-2) ;; *) fail "pod ml/dp-0 sees devices '$dev', want one of Dev-1, Dev-2" ;; esac
# The kubelet's own record of its choice agrees.
jqe --arg d "$dev" '[.Data.PodDeviceEntries[] | select(.ResourceName == "example.com/resource")
    | .DeviceIDs[][]] == [$d]' < /var/lib/kubelet/device-plugins/kubelet_internal_checkpoint > /dev/null ||
    fail "kubelet checkpoint disagrees with $dev: $(cat /var/lib/kubelet/device-plugins/kubelet_internal_checkpoint)"
ok "the kubelet gave ml/dp-0 $dev"

wait_until 20 bash -c "curl -sf --unix-socket '$PD_SOCK' http://localhost/v1/namespaces/ml/pods/dp-0 |
    jqe '.podResources.containers[0].devices[0].deviceIds == [\"$dev\"]'" ||
    fail "podresd's binding of ml/dp-0: $(pd /v1/namespaces/ml/pods/dp-0)"
pd "/v1/devices?resource=example.com/resource" |
    jqe --arg d "$dev" '.devices[] | select(.id == $d) | .holder.name == "dp-0" and .holder.namespace == "ml"' \
    > /dev/null || fail "the device's holder: $(pd /v1/devices)"
ok "podresd binds ml/dp-0 to $dev"

wait_until 30 bash -c "$KCURL -f '$KUBE_SERVER$DVB/namespaces/ml/devicebindings/dp-0' |
    jqe '.status.phase == \"Bound\" and .status.containers[0].devices[0].deviceIds == [\"$dev\"]'" ||
    fail "DeviceBinding ml/dp-0: $(dvb_get ml dp-0)"
uid=$(k get pod -n ml dp-0 -o jsonpath='{.metadata.uid}')
dvb_get ml dp-0 | jqe --arg u "$uid" '.metadata.ownerReferences[0].uid == $u
    and .metadata.labels["podres.dev/node"] == "'"$NODE"'"' > /dev/null ||
    fail "DeviceBinding ml/dp-0 owner/node: $(dvb_get ml dp-0)"
# Written with the pod's projected token, which the API server binds to the node, under
# deploy/admission-node-scope.yaml's policy.
k get validatingadmissionpolicybinding -o name | grep -q . || fail "no admission policy binding from deploy/"
audit '.objectRef.resource == "devicebindings" and .objectRef.name == "dp-0" and .verb == "create"
    and .responseStatus.code < 300
    and .user.extra["authentication.kubernetes.io/node-name"] == ["'"$NODE"'"]
    and (.user.extra["authentication.kubernetes.io/pod-name"] | length == 1)' | grep -q . ||
    fail "no create of ml/dp-0 by the syncer with a token bound to its pod on $NODE: $(audit '.objectRef.resource == "devicebindings"' | head -3)"
ok "DeviceBinding ml/dp-0 Bound with $dev, owned by the pod, written by the syncer in the pod with its node-bound token"

"$PODRES_BIN/kubectl-podres" --kubeconfig "$KCFG" who "$dev" > "$T/who" 2>&1 ||
    fail "kubectl podres who $dev: $(cat "$T/who")"
grep -q "ml/dp-0" "$T/who" || fail "kubectl podres who $dev does not name ml/dp-0: $(cat "$T/who")"
ok "kubectl podres who $dev names ml/dp-0"

pd "/v1/history?device=$dev" > "$T/hist" || fail "history of $dev"
jqe '[.intervals[] | select(.name == "dp-0" and .namespace == "ml" and .to == null)] | length == 1' \
    < "$T/hist" > /dev/null || fail "history of $dev: $(cat "$T/hist")"
ok "the history holds ml/dp-0's open interval on $dev"

# ---- the pod deleted ----------------------------------------------------------
k delete pod -n ml dp-0 --wait=true --timeout "$(( 60 * MULT ))s" > /dev/null || fail "delete ml/dp-0"
wait_until 20 bash -c "[ \$(curl -s -o /dev/null -w '%{http_code}' --unix-socket '$PD_SOCK' http://localhost/v1/namespaces/ml/pods/dp-0) = 404 ]" ||
    fail "podresd still binds ml/dp-0: $(pd /v1/namespaces/ml/pods/dp-0)"
wait_until 30 bash -c "[ \$($KCURL -o /dev/null -w '%{http_code}' '$KUBE_SERVER$DVB/namespaces/ml/devicebindings/dp-0') = 404 ]" ||
    fail "DeviceBinding ml/dp-0 not collected: $(dvb_get ml dp-0)"
pd "/v1/history?device=$dev" | jqe '[.intervals[] | select(.name == "dp-0")] | length == 1 and .[0].to != null' \
    > /dev/null || fail "history after the delete: $(pd "/v1/history?device=$dev")"
ok "ml/dp-0 deleted: released, its DeviceBinding collected, its interval closed"

# ---- an upgrade of the DaemonSet ------------------------------------------------
rev=$(pd /version | jq -r .revision)
[ -n "$rev" ] && [ "$rev" -gt 0 ] || fail "podresd's revision: $(pd /version)"
old_pod=$DS_POD
$CTR images tag docker.io/library/podres:0.1.0 docker.io/library/podres:0.1.1 > /dev/null ||
    fail "tag the image 0.1.1"
k set image -n podres-system ds/podres podresd=podres:0.1.1 podres-syncer=podres:0.1.1 > /dev/null ||
    fail "kubectl set image"
ds_ready 180
[ "$DS_POD" != "$old_pod" ] || fail "the DaemonSet's pod was not replaced"
[ "$(k get pod -n podres-system "$DS_POD" -o jsonpath='{.spec.containers[*].image}')" = \
    "podres:0.1.1 podres:0.1.1" ] || fail "the new pod's images: $(k get pod -n podres-system "$DS_POD" -o jsonpath='{.spec.containers[*].image}')"
pd "/v1/history?device=$dev" | jqe '[.intervals[] | select(.name == "dp-0")] | length == 1' > /dev/null ||
    fail "history lost in the upgrade: $(pd "/v1/history?device=$dev")"
node_pod ml dp-1
dev1=$(pod_devices ml dp-1)
wait_until 30 bash -c "$KCURL -f '$KUBE_SERVER$DVB/namespaces/ml/devicebindings/dp-1' |
    jqe '.status.phase == \"Bound\" and .status.containers[0].devices[0].deviceIds == [\"$dev1\"]'" ||
    fail "DeviceBinding ml/dp-1 after the upgrade: $(dvb_get ml dp-1)"
curl -s --max-time 10 --unix-socket "$PD_SOCK" "http://localhost/v1/watch?since=$rev&timeoutSeconds=2" \
    > "$T/feed" || true
grep -v '"BOOKMARK"' "$T/feed" > "$T/events" || true
[ -s "$T/events" ] || fail "no change since revision $rev: $(head -c 400 "$T/feed")"
jq -s --argjson r "$rev" '[.[].revision] as $v | $v[0] == $r + 1 and
    ([range(1; $v | length)] | all($v[.] == $v[. - 1] + 1))' "$T/events" | grep -qx true ||
    fail "the feed from $rev has a gap: $(jq -c '[.type, .kind, .revision]' "$T/events" | paste -sd' ')"
jqe -s '[.[] | select(.kind == "PodResources" and .object.name == "dp-1")] | length >= 1' \
    < "$T/events" > /dev/null || fail "the feed from $rev lacks ml/dp-1: $(cat "$T/events")"
ok "upgraded to podres:0.1.1: history kept, ml/dp-1 Bound, the feed from $rev has no gap"
