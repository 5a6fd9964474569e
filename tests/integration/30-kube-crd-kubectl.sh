#!/usr/bin/env bash
# The DeviceBinding CRD on the real API server, through real kubectl: the
# structural schema is accepted and Established; printer columns (and
# -o wide), short name and category; selectable fields; CEL validation
# refuses bad specs with their messages; containers merge by name under
# server-side apply (list-map keys); explain, events, get -w, delete with a
# finalizer; kubectl of the server's release and every older kubectl on the
# machine (1.27 .. 1.33) work against it; a wrong token is Unauthorized;
# kube-scheduler (cluster up --scheduler) binds a pod to a Node.
. "$(dirname "$0")/lib.sh"

kube_up --scheduler
export HOME=$T/home
mkdir -p "$HOME"
KUBECTL_UNDER_TEST=$KUBECTL
# kc ARGS... - the kubectl under test, as the cluster admin.
kc() { "$KUBECTL_UNDER_TEST" --kubeconfig "$KCFG" --cache-dir "$T/kcache" --request-timeout=20s "$@"; }
expect_out() { # REGEX DESCRIPTION COMMAND...
    local re=$1 what=$2 o
    shift 2
    o=$("$@" 2>&1) || fail "$what: '$*' failed: $o"
    grep -Eq -- "$re" <<<"$o" || fail "$what: want /$re/ in: $o"
}
expect_refused() { # REGEX DESCRIPTION COMMAND... - the command fails with REGEX
    local re=$1 what=$2 o
    shift 2
    o=$("$@" 2>&1) && fail "$what: accepted: $o"
    grep -Eq -- "$re" <<<"$o" || fail "$what: want /$re/ in: $o"
}
dvb_yaml() { # NAME NODE [CONTAINERS_JSON]
    cat <<EOF
apiVersion: podres.dev/v1alpha1
kind: DeviceBinding
metadata: {name: $1, namespace: ml, labels: {podres.dev/node: $2}}
spec: {nodeName: $2${3:+, containers: $3}}
EOF
}

# The CRD: accepted as structural, Established, names accepted.
k get crd devicebindings.podres.dev -o json > "$T/crd.json"
jqe '[.status.conditions[] | select(.type == "Established" and .status == "True")] | length == 1' \
    < "$T/crd.json" > /dev/null || fail "not Established: $(jq -c .status.conditions "$T/crd.json")"
jqe '[.status.conditions[] | select(.type == "NonStructuralSchema")] | length == 0' < "$T/crd.json" > /dev/null ||
    fail "the schema is not structural: $(jq -c .status.conditions "$T/crd.json")"
[ "$(jq -c .status.acceptedNames.shortNames "$T/crd.json")" = '["dvb"]' ] || fail "short names"
k create namespace ml > /dev/null
ok "the CRD is structural and Established on kube-apiserver $KUBE_VERSION"

# sequence LABEL - apply, get (columns, short name, category, yaml, json),
# NotFound, get -w, delete, delete with a finalizer; with $KUBECTL_UNDER_TEST.
sequence() {
    local label=$1 o wpid dpid rc=0
    dvb_yaml train-0 node-a > "$T/cr.yaml"
    expect_out '^devicebinding.podres.dev/train-0 created$' "$label: apply" kc apply -f "$T/cr.yaml"
    expect_out '^devicebinding.podres.dev/train-0 unchanged$' "$label: apply again" kc apply -f "$T/cr.yaml"
    expect_out 'patched' "$label: status through the status subresource" \
        kc patch dvb train-0 -n ml --subresource=status --type=merge \
        -p '{"status":{"phase":"Bound","summary":"nvidia.com/gpu=2","boundDevices":"g0,g1","podUID":"u-1"}}'
    o=$(kc get devicebindings -A 2>&1) || fail "$label: get -A: $o"
    grep -Eq '^NAMESPACE +NAME +NODE +PHASE +DEVICES +AGE$' <<<"$o" || fail "$label: header: $o"
    grep -Eq '^ml +train-0 +node-a +Bound +nvidia.com/gpu=2 +[0-9]+s$' <<<"$o" || fail "$label: row: $o"
    expect_out '^train-0 +node-a +Bound' "$label: short name dvb" kc get dvb -n ml --no-headers
    expect_out '^ml +devicebinding.podres.dev/train-0 +node-a +Bound' "$label: category podres" kc get podres -A --no-headers
    o=$(kc get dvb -n ml -o wide 2>&1)
    grep -Eq '^NAME +NODE +PHASE +DEVICES +AGE +DEVICE-IDS +POD-UID$' <<<"$o" &&
        grep -Eq '^train-0 .* g0,g1 +u-1$' <<<"$o" ||
        fail "$label: -o wide: $o"
    o=$(kc get devicebinding train-0 -n ml -o json | jq -r '.kind + " " + .spec.nodeName + " " + .status.summary')
    [ "$o" = "DeviceBinding node-a nvidia.com/gpu=2" ] || fail "$label: -o json: $o"
    expect_refused 'Error from server \(NotFound\): devicebindings.podres.dev "nosuch" not found' \
        "$label: NotFound" kc get dvb nosuch -n ml

    kc get devicebindings -n ml -w > "$T/watch.out" 2>&1 &
    wpid=$!
    PIDS+=("$wpid")
    wait_until 15 grep -Eq '^train-0 +node-a' "$T/watch.out" || fail "$label: get -w: $(cat "$T/watch.out")"
    kc patch dvb train-0 -n ml --subresource=status --type=merge -p '{"status":{"phase":"Conflict"}}' > /dev/null
    wait_until 15 grep -Eq '^train-0 +node-a +Conflict' "$T/watch.out" ||
        fail "$label: get -w missed the change: $(cat "$T/watch.out")"
    kill "$wpid" 2> /dev/null || true
    expect_out '^devicebinding.podres.dev "train-0" deleted' "$label: delete" kc delete dvb train-0 -n ml

    printf 'apiVersion: podres.dev/v1alpha1\nkind: DeviceBinding\nmetadata: {name: held, namespace: ml, finalizers: [podres.dev/test]}\nspec: {nodeName: node-a}\n' \
        > "$T/held.yaml"
    kc apply -f "$T/held.yaml" > /dev/null
    kc delete dvb held -n ml --timeout=60s > "$T/delete.out" 2>&1 &
    dpid=$!
    sleep 1
    kill -0 "$dpid" 2> /dev/null || fail "$label: delete did not wait for the finalizer: $(cat "$T/delete.out")"
    kc patch dvb held -n ml --type=json -p '[{"op":"remove","path":"/metadata/finalizers"}]' > /dev/null
    wait "$dpid" || rc=$?
    [ "$rc" = 0 ] && grep -q '"held" deleted' "$T/delete.out" || fail "$label: delete: rc=$rc $(cat "$T/delete.out")"
    ok "$label: apply, columns (wide too), short name, category, json, NotFound, get -w, delete (finalizer)"
}

sequence "kubectl $("$KUBECTL" version --client -o json | jq -r .clientVersion.gitVersion)"

# CEL validation and list-map keys: the real server refuses with the CRD's messages.
dvb_yaml bad-0 node-a '[{name: Main_1, devices: [{resourceName: nvidia.com/gpu, deviceIds: [g0]}]}]' > "$T/bad.yaml"
expect_refused 'a container name must be a DNS-1123 label' "CEL: container name" k apply -f "$T/bad.yaml"
dvb_yaml bad-1 node-a '[{name: main, devices: [{resourceName: gpu, deviceIds: [g0]}]}]' > "$T/bad.yaml"
expect_refused 'resourceName must be an extended resource name' "CEL: resource name" k apply -f "$T/bad.yaml"
dvb_yaml bad-2 node-a '[{name: main, devices: [{resourceName: nvidia.com/gpu, deviceIds: []}]}]' > "$T/bad.yaml"
expect_refused 'deviceIds must name at least one device' "CEL: empty device list" k apply -f "$T/bad.yaml"
dvb_yaml bad-3 node-a '[{name: main}, {name: main}]' > "$T/bad.yaml"
expect_refused 'Duplicate value' "list-map: a container twice" k apply -f "$T/bad.yaml"
dvb_yaml fixed node-a > "$T/fixed.yaml"
k apply -f "$T/fixed.yaml" > /dev/null
expect_refused 'spec.nodeName is immutable' "CEL: nodeName immutable" \
    k patch dvb fixed -n ml --type=merge -p '{"spec":{"nodeName":"node-b"}}'
k get dvb -A -o name | grep -q bad- && fail "a refused DeviceBinding exists"
ok "CEL rules refuse bad names, an empty device list, a moved nodeName; list-map keys refuse duplicates"

# Server-side apply: two managers' containers merge by name.
dvb_yaml ssa node-a '[{name: a, devices: [{resourceName: nvidia.com/gpu, deviceIds: [g0]}]}]' |
    k apply --server-side --field-manager sched-a -f - > /dev/null || fail "server-side apply a"
dvb_yaml ssa node-a '[{name: b, devices: [{resourceName: nvidia.com/gpu, deviceIds: [g1]}]}]' |
    k apply --server-side --field-manager sched-b -f - > /dev/null || fail "server-side apply b"
[ "$(k get dvb ssa -n ml -o json | jq -c '[.spec.containers[].name]')" = '["a","b"]' ] ||
    fail "containers did not merge by name: $(k get dvb ssa -n ml -o json | jq -c .spec)"
ok "server-side apply merges containers by name"

# Selectable fields.
for n in s1:node-x s2:node-x s3:node-y; do
    dvb_yaml "${n%%:*}" "${n#*:}" | k apply -f - > /dev/null
done
k patch dvb s2 -n ml --subresource=status --type=merge -p '{"status":{"phase":"Conflict"}}' > /dev/null
k patch dvb s1 -n ml --subresource=status --type=merge -p '{"status":{"phase":"Bound"}}' > /dev/null
o=$(k get dvb -A --field-selector spec.nodeName=node-x,status.phase=Conflict -o name)
[ "$o" = devicebinding.podres.dev/s2 ] || fail "field selector: $o"
expect_refused 'field label not supported' "an unselectable field" k get dvb -A --field-selector spec.containers=x
ok "field selectors spec.nodeName and status.phase"

# explain and events.
expect_out 'containers.*<\[\]Object>' "explain" k explain devicebinding.spec
expect_out 'Written by whoever creates the object' "explain: the description" k explain devicebinding.spec
uid=$(k get dvb s2 -n ml -o jsonpath='{.metadata.uid}')
kapi POST /apis/events.k8s.io/v1/namespaces/ml/events "{\"apiVersion\":\"events.k8s.io/v1\",\"kind\":\"Event\",
  \"metadata\":{\"name\":\"s2.test\"},\"eventTime\":\"$(date -u +%Y-%m-%dT%H:%M:%S.000000Z)\",
  \"reportingController\":\"podres.dev/test\",\"reportingInstance\":\"node-x\",\"action\":\"Reserve\",
  \"reason\":\"Conflict\",\"note\":\"gpu-1 is bound to pod ml/other\",\"type\":\"Warning\",
  \"regarding\":{\"apiVersion\":\"podres.dev/v1alpha1\",\"kind\":\"DeviceBinding\",\"namespace\":\"ml\",\"name\":\"s2\",\"uid\":\"$uid\"}}"
[ "$CODE" = 201 ] || fail "create an Event: HTTP $CODE $(out)"
expect_out 'Warning +Conflict +DeviceBinding/s2 +gpu-1 is bound to pod ml/other' "kubectl events --for" \
    k events -n ml --for devicebinding/s2
ok "kubectl explain shows the schema's descriptions; kubectl events --for a DeviceBinding"

# Every older kubectl on the machine against the newer server.
kdir=$(dirname "$(readlink -f "$(command -v kubectl)")")
n=0
for KUBECTL_UNDER_TEST in "$(command -v kubectl)" "$kdir"/kubectl.1.*; do
    [ -x "$KUBECTL_UNDER_TEST" ] || continue
    v=$("$KUBECTL_UNDER_TEST" version --client -o json 2> /dev/null | jq -r .clientVersion.gitVersion)
    if [ "$n" = 0 ]; then
        sequence "kubectl $v"
    else
        dvb_yaml "v-$n" node-a > "$T/cr.yaml"
        kc apply -f "$T/cr.yaml" > /dev/null || fail "$v: apply"
        o=$(kc get devicebindings -n ml)
        grep -Eq "^v-$n +node-a " <<<"$o" || fail "$v: get: $o"
        kc delete dvb "v-$n" -n ml > /dev/null || fail "$v: delete"
        ok "kubectl $v: apply, get, delete"
    fi
    n=$((n + 1))
done
[ "$n" -ge 2 ] || fail "no older kubectl found beside $(command -v kubectl)"

# kube-scheduler places a pod on the one schedulable Node.
kube_node sched-node
k -n ml run sched-pod --image=registry.invalid/x --restart=Never > /dev/null
wait_until 15 sh -c "[ \"\$('$KUBECTL' --kubeconfig '$KCFG' -n ml get pod sched-pod -o jsonpath='{.spec.nodeName}')\" = sched-node ]" ||
    fail "kube-scheduler did not bind the pod: $(k -n ml get events 2>&1 | tail -3)"
ok "kube-scheduler binds a pod to the schedulable Node"

# A wrong token: Unauthorized, as kubectl prints it.
sed "s/^    token: .*/    token: wrong/" "$SY_KCFG" > "$T/bad.kubeconfig"
o=$("$KUBECTL" --kubeconfig "$T/bad.kubeconfig" get dvb -A 2>&1) && fail "a wrong token was accepted: $o"
grep -q 'error: You must be logged in to the server (Unauthorized)' <<<"$o" || fail "wrong token: $o"
ok "a wrong token is Unauthorized"
