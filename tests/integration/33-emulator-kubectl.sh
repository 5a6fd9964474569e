#!/bin/bash
# Real kubectl against tests/fixtures/kube-apiserver-emulator (KUBE_API_SUBSET
# checklist 51): the machine's kubectl over plain http, kubectl 1.27 over TLS
# with a bearer token; apply the project's CRD with default validation, apply
# a DeviceBinding (created, unchanged, configured), get -A columns, -o yaml /
# -o json, get -w with a background change, delete (and its wait). Then a
# short run of every other kubectl.1.* found, and 401 over TLS.
set -euo pipefail
cd "$(dirname "$0")/../.."
. tests/emulator/lib.sh

command -v kubectl >/dev/null || fail "kubectl not on PATH"
KDIR=$(kubectl_dir)
K127=$KDIR/kubectl.1.27
[ -x "$K127" ] || fail "kubectl.1.27 not found in $KDIR"
CRD=deploy/crd-devicebinding.yaml
# kubectl keeps caches under $HOME/.kube even with --cache-dir in some paths: keep them in $TMP.
export HOME=$TMP/home
mkdir -p "$HOME"

# k ARGS...: the kubectl under test, with a private discovery cache (never ~/.kube).
k() { "$KUBECTL" --cache-dir "$KCACHE" --request-timeout=20s "$@"; }

expect_out() {  # expect_out REGEX DESCRIPTION COMMAND...
    local re=$1 what=$2 out
    shift 2
    out=$("$@" 2>&1) || fail "$what: '$*' failed: $out"
    grep -Eq -- "$re" <<<"$out" || fail "$what: want /$re/ in: $out"
    pass "$what"
}

write_cr() {  # write_cr FILE NODE
    cat >"$1" <<EOF
apiVersion: podres.dev/v1alpha1
kind: DeviceBinding
metadata:
  name: train-0
  namespace: ml
  labels: {podres.dev/node: $2}
spec:
  nodeName: $2
EOF
}

sequence() {  # sequence LABEL: the full checklist-51 run with $KUBECTL
    local label=$1 d=$EMU_DIR
    say "$label: $($KUBECTL version --client 2>/dev/null | head -1)"
    expect_out 'customresourcedefinition.apiextensions.k8s.io/devicebindings.podres.dev created' \
        "$label: apply CRD with default validation" k apply -f "$CRD"
    expect_out 'unchanged' "$label: re-apply CRD is unchanged" k apply -f "$CRD"
    expect_out 'devicebindings.podres.dev +[0-9]{4}-' "$label: get crd" k get crd
    expect_out 'namespace/ml created' "$label: create namespace" k create namespace ml
    expect_out '^ml +Active' "$label: get ns" k get ns ml --no-headers

    write_cr "$d/cr.yaml" node-a
    expect_out '^devicebinding.podres.dev/train-0 created$' "$label: apply DeviceBinding" k apply -f "$d/cr.yaml"
    expect_out '^devicebinding.podres.dev/train-0 unchanged$' "$label: apply again is unchanged" \
        k apply -f "$d/cr.yaml"
    write_cr "$d/cr.yaml" node-b
    curl -sf ${CURL_CA:+--cacert "$CURL_CA"} -X DELETE "$EMU_ADMIN/requests" >/dev/null
    expect_out '^devicebinding.podres.dev/train-0 configured$' "$label: changed file is configured" \
        k apply -f "$d/cr.yaml"
    curl -sf ${CURL_CA:+--cacert "$CURL_CA"} "$EMU_ADMIN/requests" | jq -e '[.requests[] | select(.verb == "patch"
        and .resource == "devicebindings" and .code == 200
        and (.contentType | startswith("application/merge-patch+json")))] | length == 1' >/dev/null \
        || fail "$label: configured was not one merge-patch PATCH"
    pass "$label: configured went out as a merge-patch PATCH"
    expect_out 'patched' "$label: status through the status subresource" \
        k patch dvb train-0 -n ml --subresource=status --type=merge \
        -p '{"status":{"phase":"Bound","summary":"nvidia.com/gpu=2","nodeName":"node-b"}}'

    local out
    out=$(k get devicebindings -A 2>&1) || fail "$label: get -A: $out"
    grep -Eq '^NAMESPACE +NAME +NODE +PHASE +DEVICES +AGE$' <<<"$out" || fail "$label: get -A header: $out"
    grep -Eq '^ml +train-0 +node-b +Bound +nvidia.com/gpu=2 +[0-9]+s$' <<<"$out" || fail "$label: get -A row: $out"
    pass "$label: get devicebindings -A shows NAMESPACE NAME NODE PHASE DEVICES AGE with values"
    expect_out '^train-0 +node-b +Bound' "$label: short name dvb" k get dvb -n ml --no-headers
    expect_out '^ml +train-0 +node-b +Bound' "$label: category podres" k get podres -A --no-headers
    out=$(k get devicebindings -n ml -o yaml) || fail "$label: -o yaml"
    grep -q '^kind: List' <<<"$out" && grep -q 'name: train-0' <<<"$out" && grep -q 'phase: Bound' <<<"$out" \
        || fail "$label: -o yaml: $out"
    pass "$label: get -o yaml"
    out=$(k get devicebinding train-0 -n ml -o json | jq -r '.kind + " " + .spec.nodeName + " " + .status.summary')
    [ "$out" = "DeviceBinding node-b nvidia.com/gpu=2" ] || fail "$label: -o json: $out"
    pass "$label: get devicebinding -o json"
    out=$(k get dvb nosuch -n ml 2>&1) && fail "$label: get of a missing object succeeded: $out"
    grep -q 'Error from server (NotFound): devicebindings.podres.dev "nosuch" not found' <<<"$out" \
        || fail "$label: NotFound message: $out"
    pass "$label: NotFound error as upstream prints it"

    # get -w sees a change made in the background
    k get devicebindings -n ml -w >"$d/watch.out" 2>&1 &
    local wpid=$!
    PIDS+=("$wpid")
    wait_until 15 "$label: get -w to print the first row" grep -Eq '^train-0 +node-b' "$d/watch.out"
    expect_out 'devicebinding.podres.dev/train-0 patched' "$label: background merge patch" \
        k patch devicebinding train-0 -n ml --type=merge -p '{"spec":{"nodeName":"node-c"}}'
    wait_until 15 "$label: get -w to print the changed row" grep -Eq '^train-0 +node-c +Bound' "$d/watch.out"
    [ "$(grep -c '^NAME' "$d/watch.out")" = 1 ] || fail "$label: get -w printed the header twice: $(cat "$d/watch.out")"
    [ "$(grep -c '^train-0' "$d/watch.out")" = 2 ] || fail "$label: get -w rows: $(cat "$d/watch.out")"
    kill "$wpid" 2>/dev/null || true
    pass "$label: get -w shows the row, then the change"

    expect_out '^devicebinding.podres.dev "train-0" deleted$' "$label: delete" k delete devicebinding train-0 -n ml
    expect_out 'No resources found' "$label: nothing left" k get devicebindings -A

    # delete waits for finalizers to go
    cat >"$d/held.yaml" <<'EOF'
apiVersion: podres.dev/v1alpha1
kind: DeviceBinding
metadata: {name: held, namespace: ml, finalizers: [podres.dev/test]}
spec: {nodeName: node-a}
EOF
    k apply -f "$d/held.yaml" >/dev/null
    k delete devicebinding held -n ml --timeout=60s >"$d/delete.out" 2>&1 &
    local dpid=$!
    sleep 1
    kill -0 "$dpid" 2>/dev/null || fail "$label: delete did not wait for the finalizer: $(cat "$d/delete.out")"
    k get dvb held -n ml -o jsonpath='{.metadata.deletionTimestamp}' | grep -q . \
        || fail "$label: held object has no deletionTimestamp"
    k patch dvb held -n ml --type=json -p '[{"op":"remove","path":"/metadata/finalizers"}]' >/dev/null
    local rc=0
    wait "$dpid" || rc=$?
    [ "$rc" = 0 ] && grep -q '"held" deleted' "$d/delete.out" || fail "$label: delete wait: rc=$rc $(cat "$d/delete.out")"
    pass "$label: delete waits until the object is gone, then succeeds"
}

# 1. the machine's kubectl, plain http
start_emulator plain
KUBECTL=kubectl
sequence "kubectl (plain http)"
stop_emulator

# 2. kubectl 1.27 over TLS with a bearer token, then the machine's kubectl there too
tests/fixtures/make-test-certs "$TMP/certs"
CURL_CA=$TMP/certs/ca.crt
start_emulator tls --tls-cert "$TMP/certs/server.crt" --tls-key "$TMP/certs/server.key" \
    --ca-cert "$TMP/certs/ca.crt" --token "tok-$$"
grep -q "token: \"tok-$$\"" "$KCFG" || fail "kubeconfig has no token"
KUBECTL=$K127
sequence "kubectl.1.27 (TLS + token)"
KUBECTL=kubectl
write_cr "$EMU_DIR/cr.yaml" node-t
expect_out 'train-0 created' "kubectl over TLS + token: apply" k apply -f "$EMU_DIR/cr.yaml"
expect_out '^ml +train-0 +node-t' "kubectl over TLS + token: get -A" k get dvb -A
expect_out 'control plane.* is running at' "kubectl cluster-info (lists kube-system's services)" k cluster-info
curl -sf --cacert "$TMP/certs/ca.crt" "$EMU_ADMIN/counters?verb=list&code=401" | jq -e '.total == 0' >/dev/null \
    || fail "requests were refused with 401 during the TLS run"
pass "no 401 while the token was right"
sed "s/tok-$$/wrong/" "$KCFG" >"$EMU_DIR/bad-kubeconfig"
for KUBECTL in kubectl "$K127"; do
    out=$(KUBECONFIG=$EMU_DIR/bad-kubeconfig k get dvb -A 2>&1) && fail "wrong token accepted: $out"
    grep -q 'error: You must be logged in to the server (Unauthorized)' <<<"$out" \
        || fail "$KUBECTL with a wrong token: $out"
    pass "$(basename "$KUBECTL") with a wrong token: Unauthorized"
done
stop_emulator

CURL_CA=
# 3. every other kubectl.1.* installed: apply, get -A, delete
start_emulator others
KUBECTL=kubectl
k create namespace ml >/dev/null
n=0
for KUBECTL in "$KDIR"/kubectl.1.*; do
    [ "$KUBECTL" = "$K127" ] && continue
    v=${KUBECTL##*/}
    k apply -f "$CRD" >/dev/null || fail "$v: apply CRD"
    write_cr "$EMU_DIR/cr.yaml" "node-$n"
    k apply -f "$EMU_DIR/cr.yaml" >/dev/null || fail "$v: apply CR"
    out=$(k get devicebindings -A)
    grep -Eq "^ml +train-0 +node-$n " <<<"$out" || fail "$v: get -A: $out"
    k delete dvb train-0 -n ml >/dev/null || fail "$v: delete"
    pass "$v: apply CRD and DeviceBinding, get -A, delete"
    n=$((n + 1))
done
stop_emulator
