#!/usr/bin/env bash
# Node-scoped write authority (deploy/admission-node-scope.yaml, docs/SYNCER.md): against the
# real API server, a request of the podres-syncer ServiceAccount may write only the
# DeviceBindings labelled with, and the NodeDevices named after, the node its token is bound to
# (userInfo.extra authentication.kubernetes.io/node-name): a token bound to Node node-a writes
# node-a's objects (create, patch, status, delete) and gets 403 Forbidden, with a message naming
# both nodes, for node-b's, for relabelling, for a foreign spec/status.nodeName; a token bound
# to a Pod on node-a is node-a; a token without a node name is refused and told why; the
# cluster admin and another ServiceAccount (podres-extender) are not restricted; the real
# podres-syncer with a node-bound token works as before.
. "$(dirname "$0")/lib.sh"

pd_start
register example.com/gpu '[{"id":"g0"},{"id":"g1"}]'
kube_up
POLICY=podres-syncer-node-scope
k apply -f "$PODRES_ROOT/deploy/admission-node-scope.yaml" > "$T/apply.log" 2>&1 ||
    fail "cannot apply deploy/admission-node-scope.yaml: $(cat "$T/apply.log")"
# deploy/rbac.yaml may not grant NodeDevices (yet): a test-only role lets the
# syncer's ServiceAccount reach admission for them, so the policy is what refuses.
k create clusterrole test-nodedevices --verb=get,list,create,update,patch,delete \
    --resource=nodedevices.podres.dev,nodedevices.podres.dev/status > /dev/null &&
    k create clusterrolebinding test-nodedevices --clusterrole=test-nodedevices \
        --serviceaccount=podres-system:podres-syncer > /dev/null || fail "cannot grant NodeDevices for the test"
kube_node node-a
kube_node node-b
kube_ns ml
node_kubeconfig node-a "$T/a.kubeconfig"
node_kubeconfig node-b "$T/b.kubeconfig"

# as KUBECONFIG METHOD PATH [BODY [CONTENT-TYPE]] - a request with the
# kubeconfig's bearer token; body in $T/out, status in CODE.
as() {
    local tok args=(-o "$T/out" -w '%{http_code}' -X "$2")
    tok=$(sed -n 's/^    token: //p' "$1")
    [ $# -ge 4 ] && args+=(-H "Content-Type: ${5:-application/json}" --data-binary "$4")
    CODE=$(curl -s --cacert "$KUBE_CA" -H "Authorization: Bearer $tok" "${args[@]}" "$KUBE_SERVER$3")
}
MERGE=application/merge-patch+json
ND=$DVB/nodedevices
NS=$DVB/namespaces/ml/devicebindings
# dvb_json NAME LABEL [SPEC_NODE] - a DeviceBinding in ml labelled podres.dev/node=LABEL.
dvb_json() {
    echo "{\"apiVersion\":\"podres.dev/v1alpha1\",\"kind\":\"DeviceBinding\",\"metadata\":{\"name\":\"$1\",\"namespace\":\"ml\",\"labels\":{\"podres.dev/node\":\"$2\"}},\"spec\":{\"nodeName\":\"${3:-$2}\"}}"
}
nd_json() { echo "{\"apiVersion\":\"podres.dev/v1alpha1\",\"kind\":\"NodeDevices\",\"metadata\":{\"name\":\"$1\"}}"; }
# allowed WHAT - the last request succeeded.
allowed() { [[ "$CODE" == 20? ]] || fail "$1: HTTP $CODE $(head -c 600 "$T/out")"; }
# denied WHAT MESSAGE - the last request was refused by the policy: 403
# Forbidden, a Status whose message is the policy's, ending in MESSAGE.
denied() {
    [ "$CODE" = 403 ] || fail "$1: want 403, got HTTP $CODE $(head -c 600 "$T/out")"
    jqe --arg p "$POLICY" --arg m "$2" '.kind == "Status" and .reason == "Forbidden" and .code == 403
        and (.message | contains("ValidatingAdmissionPolicy '\''" + $p + "'\'' with binding '\''" + $p + "'\'' denied request: "))
        and (.message | endswith($m))' < "$T/out" > /dev/null ||
        fail "$1: not the policy's refusal (want ...$2): $(cat "$T/out")"
}

# 0. What the policy relies on: a token bound to a Node carries its name.
as "$T/a.kubeconfig" POST /apis/authentication.k8s.io/v1/selfsubjectreviews \
    '{"apiVersion":"authentication.k8s.io/v1","kind":"SelfSubjectReview"}'
allowed "SelfSubjectReview"
jqe '.status.userInfo.username == "system:serviceaccount:podres-system:podres-syncer"
    and .status.userInfo.extra["authentication.kubernetes.io/node-name"] == ["node-a"]' < "$T/out" > /dev/null ||
    fail "a Node-bound token's user: $(jq -c .status.userInfo "$T/out")"
ok "a token bound to Node node-a authenticates as the syncer's ServiceAccount with extra node-name [node-a]"

# The policy takes effect asynchronously: poll with a dry run until it refuses.
policy_active() {
    as "$T/a.kubeconfig" POST "$NS?dryRun=All" "$(dvb_json probe node-b)"
    [ "$CODE" = 403 ]
}
wait_until 30 policy_active || fail "the policy never refused a dry run: HTTP $CODE $(cat "$T/out")"
ok "the policy is active (a dry-run create of node-b's DeviceBinding is refused)"

# 1. node-a's token writes node-a's objects.
as "$T/a.kubeconfig" POST "$NS" "$(dvb_json a1 node-a)"
allowed "node-a creates DeviceBinding ml/a1 labelled node-a"
as "$T/a.kubeconfig" PATCH "$NS/a1" '{"metadata":{"annotations":{"x":"y"}}}' "$MERGE"
allowed "node-a patches its DeviceBinding"
as "$T/a.kubeconfig" PATCH "$NS/a1/status" '{"status":{"nodeName":"node-a","phase":"Bound","summary":"example.com/gpu=1"}}' "$MERGE"
allowed "node-a patches its DeviceBinding's status"
as "$T/a.kubeconfig" PUT "$NS/a1" "$(jq -c '.metadata.annotations.x = "z"' "$T/out")"
allowed "node-a updates (PUT) its DeviceBinding"
as "$T/a.kubeconfig" DELETE "$NS/a1"
allowed "node-a deletes its DeviceBinding"
as "$T/a.kubeconfig" POST "$ND" "$(nd_json node-a)"
allowed "node-a creates NodeDevices node-a"
as "$T/a.kubeconfig" PATCH "$ND/node-a/status" '{"status":{"summary":"example.com/gpu=2","unhealthy":0}}' "$MERGE"
allowed "node-a patches NodeDevices node-a's status"
[ "$(k get nd node-a -o jsonpath='{.status.summary}')" = example.com/gpu=2 ] || fail "NodeDevices node-a: $(k get nd node-a -o json)"
ok "node-a's token creates, patches, updates, status-patches and deletes DeviceBindings labelled node-a, creates and status-patches NodeDevices node-a"

# 2. ... and is refused node-b's, with the reason.
k create -f - > /dev/null <<EOF || fail "admin: node-b's objects"
$(dvb_json b1 node-b)
$(nd_json node-b)
EOF
as "$T/a.kubeconfig" POST "$NS" "$(dvb_json b2 node-b)"
denied "node-a creates a DeviceBinding labelled node-b" \
    "podres-syncer of node 'node-a' may write only DeviceBindings labelled podres.dev/node=node-a; refusing CREATE of DeviceBinding ml/b2, which would be labelled for node 'node-b'"
as "$T/a.kubeconfig" PATCH "$NS/b1/status" '{"status":{"phase":"Bound"}}' "$MERGE"
denied "node-a patches node-b's DeviceBinding's status" \
    "refusing UPDATE of DeviceBinding ml/b1 (status), which is labelled for node 'node-b'"
as "$T/a.kubeconfig" PATCH "$NS/b1" '{"metadata":{"labels":{"podres.dev/node":"node-a"}}}' "$MERGE"
denied "node-a relabels node-b's DeviceBinding to node-a" \
    "refusing UPDATE of DeviceBinding ml/b1, which is labelled for node 'node-b'"
as "$T/a.kubeconfig" DELETE "$NS/b1"
denied "node-a deletes node-b's DeviceBinding" "refusing DELETE of DeviceBinding ml/b1, which is labelled for node 'node-b'"
as "$T/a.kubeconfig" POST "$NS" "$(dvb_json a2 node-a)"
allowed "node-a creates DeviceBinding ml/a2"
as "$T/a.kubeconfig" PATCH "$NS/a2" '{"metadata":{"labels":{"podres.dev/node":"node-b"}}}' "$MERGE"
denied "node-a relabels its own DeviceBinding to node-b" \
    "refusing UPDATE of DeviceBinding ml/a2, which would be labelled for node 'node-b'"
as "$T/a.kubeconfig" PATCH "$NS/a2" '{"metadata":{"labels":{"podres.dev/node":null}}}' "$MERGE"
denied "node-a removes its DeviceBinding's label" "refusing UPDATE of DeviceBinding ml/a2, which would be labelled for no node"
as "$T/a.kubeconfig" POST "$NS" "$(dvb_json a3 node-a node-b)"
denied "node-a creates a DeviceBinding labelled node-a for spec.nodeName node-b" \
    "podres-syncer of node 'node-a' may write only DeviceBindings of that node; refusing CREATE of DeviceBinding ml/a3, which would have spec.nodeName 'node-b'"
as "$T/a.kubeconfig" PATCH "$NS/a2/status" '{"status":{"nodeName":"node-b"}}' "$MERGE"
denied "node-a writes status.nodeName node-b" "refusing UPDATE of DeviceBinding ml/a2 (status), which would have status.nodeName 'node-b'"
as "$T/a.kubeconfig" POST "$ND" "$(nd_json node-c)"
denied "node-a creates NodeDevices node-c" \
    "podres-syncer of node 'node-a' may write only the NodeDevices named 'node-a'; refusing CREATE of NodeDevices node-c, the inventory of node 'node-c'"
as "$T/a.kubeconfig" PATCH "$ND/node-b/status" '{"status":{"summary":"example.com/gpu=99"}}' "$MERGE"
denied "node-a patches NodeDevices node-b's status" "refusing UPDATE of NodeDevices node-b (status), the inventory of node 'node-b'"
as "$T/a.kubeconfig" PATCH "$ND/node-b" '{"metadata":{"labels":{"x":"y"}}}' "$MERGE"
denied "node-a patches NodeDevices node-b" "refusing UPDATE of NodeDevices node-b, the inventory of node 'node-b'"
as "$T/a.kubeconfig" DELETE "$ND/node-b"
denied "node-a deletes NodeDevices node-b" "refusing DELETE of NodeDevices node-b, the inventory of node 'node-b'"
k get dvb -n ml b1 -o json | jqe '.metadata.labels["podres.dev/node"] == "node-b" and .status == null' > /dev/null &&
    k get nd node-b -o json | jqe '.status == null and .metadata.labels == null' > /dev/null &&
    [ "$(k get dvb -n ml a2 -o jsonpath='{.metadata.labels.podres\.dev/node}')" = node-a ] ||
    fail "a refused write changed something"
ok "node-a's token gets 403 Forbidden with the policy's message for node-b's DeviceBinding (create, status, relabel, delete), relabelling its own away, a foreign spec/status.nodeName, and NodeDevices node-b/node-c (create, status, patch, delete); nothing changed"

# node-b's token is node-b: the same objects are its own.
as "$T/b.kubeconfig" PATCH "$NS/b1/status" '{"status":{"phase":"Bound"}}' "$MERGE"
allowed "node-b patches its DeviceBinding's status"
as "$T/b.kubeconfig" PATCH "$ND/node-b/status" '{"status":{"summary":"example.com/gpu=1"}}' "$MERGE"
allowed "node-b patches NodeDevices node-b's status"
as "$T/b.kubeconfig" PATCH "$NS/a2/status" '{"status":{"phase":"Bound"}}' "$MERGE"
denied "node-b patches node-a's DeviceBinding's status" \
    "podres-syncer of node 'node-b' may write only DeviceBindings labelled podres.dev/node=node-b; refusing UPDATE of DeviceBinding ml/a2 (status), which is labelled for node 'node-a'"
# Reads are not the policy's business (RBAC's: the syncer lists cluster-wide).
as "$T/a.kubeconfig" GET "$NS/b1"
allowed "node-a reads node-b's DeviceBinding"
ok "node-b's token writes node-b's objects and is refused node-a's; reads are not restricted"

# 3. A token without a node name (TokenRequest without a bound object) is refused, and told why.
NONODE="podres-syncer may write only its own node's objects, and its token carries no node name (userInfo.extra authentication.kubernetes.io/node-name): use a token bound to its Pod (the DaemonSet's projected token) or to its Node (kubectl create token --bound-object-kind Node); "
as "$SY_KCFG" POST "$NS" "$(dvb_json u1 node-a)"
denied "an unbound token creates a DeviceBinding" "${NONODE}refusing CREATE of DeviceBinding ml/u1"
as "$SY_KCFG" PATCH "$NS/a2/status" '{"status":{"phase":"Bound"}}' "$MERGE"
denied "an unbound token patches a DeviceBinding's status" "${NONODE}refusing UPDATE of DeviceBinding ml/a2 (status)"
as "$SY_KCFG" PATCH "$ND/node-a/status" '{"status":{"unhealthy":1}}' "$MERGE"
denied "an unbound token patches NodeDevices' status" "${NONODE}refusing UPDATE of NodeDevices node-a (status)"
ok "a token with no node name is refused every write, with a message that says why"

# 4. A token bound to a Pod on node-a is node-a (the DaemonSet's projected token is
# such a token: the kubelet asks the TokenRequest API for one bound to the pod).
kapi POST /api/v1/namespaces/podres-system/pods '{"apiVersion":"v1","kind":"Pod","metadata":{"name":"syncer-a","namespace":"podres-system"},
    "spec":{"nodeName":"node-a","serviceAccountName":"podres-syncer","automountServiceAccountToken":false,"containers":[{"name":"main","image":"registry.invalid/x"}]}}'
[ "$CODE" = 201 ] || fail "create pod podres-system/syncer-a: HTTP $CODE $(head -c 300 "$T/out")"
tok=$(k create token podres-syncer -n podres-system --duration 1h --bound-object-kind Pod --bound-object-name syncer-a) ||
    fail "no token bound to Pod syncer-a"
echo "token: $tok" | write_kubeconfig "$T/pod.kubeconfig" "$KUBE_SERVER" podres-syncer
as "$T/pod.kubeconfig" POST /apis/authentication.k8s.io/v1/selfsubjectreviews \
    '{"apiVersion":"authentication.k8s.io/v1","kind":"SelfSubjectReview"}'
jqe '.status.userInfo.extra | .["authentication.kubernetes.io/node-name"] == ["node-a"]
    and .["authentication.kubernetes.io/pod-name"] == ["syncer-a"]' < "$T/out" > /dev/null ||
    fail "a Pod-bound token's user: $(jq -c .status.userInfo "$T/out")"
as "$T/pod.kubeconfig" PATCH "$NS/a2/status" '{"status":{"phase":"Pending"}}' "$MERGE"
allowed "the Pod-bound token patches node-a's DeviceBinding's status"
as "$T/pod.kubeconfig" PATCH "$NS/b1/status" '{"status":{"phase":"Pending"}}' "$MERGE"
denied "the Pod-bound token patches node-b's DeviceBinding's status" \
    "podres-syncer of node 'node-a' may write only DeviceBindings labelled podres.dev/node=node-a; refusing UPDATE of DeviceBinding ml/b1 (status), which is labelled for node 'node-b'"
ok "a token bound to a Pod with spec.nodeName node-a carries node-name node-a (and pod-name) and is held to node-a"

# 5. Other users are not restricted: the cluster admin, and podres-extender's ServiceAccount.
k label dvb -n ml a2 podres.dev/node=node-b --overwrite > /dev/null || fail "the admin cannot relabel"
k patch nd node-b --subresource=status --type=merge -p '{"status":{"unhealthy":3}}' > /dev/null ||
    fail "the admin cannot write NodeDevices node-b's status"
k create serviceaccount podres-extender -n podres-system > /dev/null &&
    k create clusterrole test-extender --verb=get,create,update,patch,delete \
        --resource=devicebindings.podres.dev,devicebindings.podres.dev/status,nodedevices.podres.dev > /dev/null &&
    k create clusterrolebinding test-extender --clusterrole=test-extender \
        --serviceaccount=podres-system:podres-extender > /dev/null || fail "cannot make the extender's ServiceAccount"
sa_kubeconfig podres-system podres-extender "$T/ext.kubeconfig"
as "$T/ext.kubeconfig" POST "$NS" "$(dvb_json e1 node-b)"
allowed "the extender (unbound token) creates a DeviceBinding labelled node-b"
as "$T/ext.kubeconfig" PATCH "$NS/b1" '{"metadata":{"labels":{"podres.dev/node":"node-a"}}}' "$MERGE"
allowed "the extender relabels a DeviceBinding"
as "$T/ext.kubeconfig" DELETE "$NS/e1"
allowed "the extender deletes a DeviceBinding"
ok "the cluster admin and podres-system/podres-extender (a token without a node name) write any node's objects"

# 6. A Node-bound token dies with its Node.
k create -f - > /dev/null <<EOF || fail "cannot create Node node-c"
{"apiVersion":"v1","kind":"Node","metadata":{"name":"node-c"}}
EOF
node_kubeconfig node-c "$T/c.kubeconfig"
as "$T/c.kubeconfig" GET "$NS"
allowed "node-c's token reads"
k delete node node-c > /dev/null || fail "cannot delete Node node-c"
# (the API server caches a token's successful authentication for 10 s)
c_refused() { as "$T/c.kubeconfig" GET "$NS"; [ "$CODE" = 401 ]; }
wait_until 30 c_refused ||
    fail "a token bound to a deleted Node still works after 30 s"
ok "a token bound to a Node is refused (401) once the Node is deleted"

# 7. The real podres-syncer, with a token bound to its Node, works under the policy:
# create, status, delete of its node's DeviceBinding.
kube_node test-node
node_kubeconfig test-node "$SY_KCFG"
uid=$(kube_pod ml p0 test-node)
sy_start
bind ml p0 "$uid" g0
wait_until 10 bash -c "$KCURL '$KUBE_SERVER$NS/p0' | jqe '.status.phase == \"Bound\"'" ||
    fail "no Bound DeviceBinding for ml/p0 under the policy: $(tail -20 "$T/syncer.log")"
req DELETE /v1/namespaces/ml/pods/p0
wait_until 10 sh -c "[ \"\$($KCURL -o /dev/null -w '%{http_code}' '$KUBE_SERVER$NS/p0')\" = 404 ]" ||
    fail "the DeviceBinding ml/p0 was not deleted: $(tail -20 "$T/syncer.log")"
sy_stop
pd_stop
w=$(audit '.responseStatus.code < 300 and (.verb | IN("create","patch","delete")) and .objectRef.resource == "devicebindings"
    and .user.extra["authentication.kubernetes.io/node-name"] == ["test-node"]' | jq -r '.verb + "/" + (.objectRef.subresource // "")' | sort -u | paste -sd' ')
[ "$w" = "create/ delete/ patch/status" ] || fail "the syncer's writes with its node-bound token (audit log): $w"
n=$(audit '.responseStatus.code == 403 and (.objectRef.resource == "devicebindings") and .user.extra["authentication.kubernetes.io/node-name"] == ["test-node"]' | wc -l)
[ "$n" = 0 ] || fail "the syncer of test-node was refused $n times: $(audit '.responseStatus.code == 403' | tail -3)"
ok "podres-syncer with a token bound to its Node creates, status-patches and deletes its DeviceBinding, never refused"
