#!/usr/bin/env bash
# podres-extender behind the real kube-scheduler (cluster up --scheduler):
# pods requesting example.com/gpu are filtered, scored and bound through it;
# each bound pod has a DeviceBinding pre-assignment on its node naming as
# many of that node's devices as it asked for, no device twice; a pod that
# fits nowhere stays Pending with the extender's reason in its events; a
# node without NodeDevices is filtered out; malformed JSON gets 400.
# Who may call it: HTTPS only, kube-scheduler's client certificate (401 with
# none or another CA's, 403 for a name not allowed, /readyz open); bind
# checks the pod itself (uid given, not bound, a served scheduler, the node
# passed filter for it); one client address holding hundreds of idle
# connections does not lock kube-scheduler out.
. "$(dirname "$0")/lib.sh"

ND=/apis/podres.dev/v1alpha1/nodedevices

# gpu_node NAME COUNT - a schedulable Node with COUNT example.com/gpu allocatable.
gpu_node() {
    kube_node "$1"
    kapi PATCH "/api/v1/nodes/$1/status" \
        "{\"status\":{\"capacity\":{\"example.com/gpu\":\"$2\"},\"allocatable\":{\"example.com/gpu\":\"$2\"}}}" \
        application/merge-patch+json
    [ "$CODE" = 200 ] || fail "node $1 gpus: HTTP $CODE $(out)"
}

# node_devices NAME - its NodeDevices: 4 healthy GPUs, two on NUMA 0, two on NUMA 1.
node_devices() {
    k create -f - > /dev/null <<JSON || fail "create NodeDevices $1"
{"apiVersion":"podres.dev/v1alpha1","kind":"NodeDevices","metadata":{"name":"$1"}}
JSON
    k patch nodedevices "$1" --subresource=status --type=merge -p "$(jq -nc --arg n "$1" '{status: {
        summary: "example.com/gpu=4", unhealthy: 0,
        resources: [{name: "example.com/gpu", total: 4, healthy: 4}],
        devices: [range(0;4) | {resourceName: "example.com/gpu", id: "\($n)-gpu\(.)",
                                health: "Healthy", topology: {nodes: [{id: (. / 2 | floor)}]}}]}}')" \
        > /dev/null || fail "patch NodeDevices $1 status"
}

# gpu_pod NAME COUNT - a Pod in ml asking for COUNT example.com/gpu, not yet scheduled.
gpu_pod() {
    kapi POST /api/v1/namespaces/ml/pods "$(jq -nc --arg n "$1" --arg c "$2" '{apiVersion: "v1",
        kind: "Pod", metadata: {name: $n, namespace: "ml"}, spec: {automountServiceAccountToken: false,
        containers: [{name: "main", image: "registry.invalid/x",
                      resources: {limits: {"example.com/gpu": $c}}}]}}')"
    [ "$CODE" = 201 ] || fail "create pod $1: HTTP $CODE $(out)"
}

pods_json() { $KCURL "$KUBE_SERVER/api/v1/namespaces/ml/pods" > "$T/pods.json"; }
# gpus_on NODE - example.com/gpu requested by the pods bound to NODE.
gpus_on() {
    jq --arg n "$1" '[.items[] | select(.spec.nodeName == $n) |
        .spec.containers[0].resources.limits["example.com/gpu"] | tonumber] | add // 0' "$T/pods.json"
}
# settled - no pending pod (but big) fits the free GPUs of either GPU node.
settled() {
    pods_json
    local fa fb
    fa=$((4 - $(gpus_on gpu-a))) fb=$((4 - $(gpus_on gpu-b)))
    jqe --argjson a "$fa" --argjson b "$fb" '[.items[] | select(.metadata.name != "big" and
        (.spec.nodeName // "") == "") | .spec.containers[0].resources.limits["example.com/gpu"] |
        tonumber | select(. <= $a or . <= $b)] | length == 0' < "$T/pods.json" > /dev/null
}

kube_up --scheduler
wait_until 30 curl -sf --cacert "$EXTENDER_CA" "$EXTENDER_URL/readyz" ||
    { tail -20 "$KDIR/podres-extender.log" >&2; fail "podres-extender is not ready"; }
ok "cluster up --scheduler starts podres-extender; /readyz ok"

gpu_node gpu-a 4
gpu_node gpu-b 4
gpu_node plain-c 8
node_devices gpu-a
node_devices gpu-b
kube_ns ml

i=0
for n in 1 2 1 2 1 1 1 1; do
    i=$((i + 1))
    gpu_pod "p$i" "$n"
done
gpu_pod big 5
wait_until 60 settled || { grep -m1 -A14 -E "ERROR|runtime error" "$KDIR/podres-extender.log" >&2; tail -n 3 "$KDIR/kube-scheduler.log" >&2; fail "the scheduler did not place what fits: $(jq -c '[.items[] | {n: .metadata.name, node: .spec.nodeName}]' "$T/pods.json")"; }
pods_json
[ "$(gpus_on gpu-a)" -le 4 ] && [ "$(gpus_on gpu-b)" -le 4 ] || fail "a node is over its GPUs"
[ "$(gpus_on plain-c)" = 0 ] || fail "a GPU pod went to plain-c, which has no NodeDevices"
bound=$(jq '[.items[] | select(.spec.nodeName)] | length' "$T/pods.json")
[ "$bound" -ge 6 ] || fail "only $bound pods bound"
ok "kube-scheduler placed $bound pods through the extender, none on a node without NodeDevices"

# Every bound pod: its DeviceBinding pre-assigns exactly its count of its node's devices.
$KCURL "$KUBE_SERVER$ND" > "$T/nd.json"
$KCURL "$KUBE_SERVER$DVB/namespaces/ml/devicebindings" > "$T/dvb.json"
for p in $(jq -r '.items[] | select(.spec.nodeName) | .metadata.name' "$T/pods.json"); do
    node=$(jq -r --arg p "$p" '.items[] | select(.metadata.name == $p) | .spec.nodeName' "$T/pods.json")
    uid=$(jq -r --arg p "$p" '.items[] | select(.metadata.name == $p) | .metadata.uid' "$T/pods.json")
    want=$(jq -r --arg p "$p" '.items[] | select(.metadata.name == $p) |
        .spec.containers[0].resources.limits["example.com/gpu"]' "$T/pods.json")
    jqe --arg p "$p" --arg node "$node" --arg uid "$uid" --argjson want "$want" --slurpfile nd "$T/nd.json" '
        .items[] | select(.metadata.name == $p) |
        ($nd[0].items[] | select(.metadata.name == $node) | [.status.devices[].id]) as $ids |
        .spec.nodeName == $node and .metadata.labels["podres.dev/node"] == $node and
        (.metadata.ownerReferences | any(.kind == "Pod" and .uid == $uid)) and
        (.spec.containers | length) == 1 and .spec.containers[0].name == "main" and
        (.spec.containers[0].devices[0].deviceIds | length) == $want and
        (.spec.containers[0].devices[0].deviceIds | all(. as $d | $ids | index($d)))' \
        < "$T/dvb.json" > /dev/null ||
        fail "DeviceBinding ml/$p is not $want devices of $node: $(jq -c --arg p "$p" '.items[] | select(.metadata.name == $p)' "$T/dvb.json")"
done
[ "$(jq '.items | length' "$T/dvb.json")" = "$bound" ] || fail "DeviceBindings for unbound pods"
dups=$(jq '[.items[].spec.containers[].devices[].deviceIds[]] | group_by(.) | map(select(length > 1)) | length' "$T/dvb.json")
[ "$dups" = 0 ] || fail "a device is pre-assigned twice: $(jq -c '[.items[] | {n: .metadata.name, d: .spec.containers}]' "$T/dvb.json")"
ok "each bound pod's DeviceBinding names exactly its count of its node's devices; none twice"

# The pod that fits nowhere: Pending, the extender's reason in its events.
wait_until 30 sh -c "'$KUBECTL' --kubeconfig '$KCFG' -n ml describe pod big | grep -q 'node has no NodeDevices'" ||
    fail "no extender reason for big: $(k -n ml describe pod big | tail -5)"
[ "$($KCURL "$KUBE_SERVER/api/v1/namespaces/ml/pods/big" | jq -r '.spec.nodeName // ""')" = "" ] ||
    fail "big was bound"
ok "the 5-GPU pod stays Pending; its events show 'node has no NodeDevices'"

# The extender directly: reasons per node; 400 for malformed JSON.
big=$($KCURL "$KUBE_SERVER/api/v1/namespaces/ml/pods/big")
code=$(jq -nc --argjson pod "$big" '{Pod: $pod, NodeNames: ["gpu-a", "gpu-b", "plain-c"]}' |
    $XCURL -o "$T/out" -w '%{http_code}' -H 'Content-Type: application/json' --data-binary @- \
        "$EXTENDER_URL/filter")
[ "$code" = 200 ] || fail "filter: HTTP $code $(out)"
[ "$(jqo '.NodeNames | length')" = 0 ] || fail "filter kept nodes for big: $(out)"
[ "$(jqo '.FailedNodes["plain-c"]')" = "node has no NodeDevices" ] || fail "plain-c reason: $(out)"
jqo '.FailedNodes["gpu-a"]' | grep -Eq '^example.com/gpu: [0-4] free healthy, 5 requested$' ||
    fail "gpu-a reason: $(out)"
ok "filter names the reason per node: $(jqo '.FailedNodes["gpu-a"]')"

code=$($XCURL -o "$T/out" -w '%{http_code}' -H 'Content-Type: application/json' \
    --data-binary '{"Pod": {' "$EXTENDER_URL/filter")
[ "$code" = 400 ] || fail "malformed filter: HTTP $code, want 400"
[ -n "$(jqo .Error)" ] || fail "no message for malformed JSON: $(out)"
code=$($XCURL -o "$T/out" -w '%{http_code}' --data-binary '{"PodName": "../x"}' "$EXTENDER_URL/bind")
[ "$code" = 400 ] || fail "malformed bind: HTTP $code, want 400"
ok "malformed JSON gets 400 with a message ($(jqo .Error))"

# Bind checks the pod before it writes anything.
# bind_call NAME UID NODE - POST /bind as kube-scheduler; the HTTP code in $code, the answer in $T/out.
bind_call() {
    code=$($XCURL -o "$T/out" -w '%{http_code}' -H 'Content-Type: application/json' --data-binary \
        "{\"PodName\":\"$1\",\"PodNamespace\":\"ml\",\"PodUID\":\"$2\",\"Node\":\"$3\"}" "$EXTENDER_URL/bind")
}
# filter_call POD_JSON NODE... - POST /filter for that pod on those nodes.
filter_call() {
    local pod=$1
    shift
    jq -nc --argjson pod "$pod" '{Pod: $pod, NodeNames: $ARGS.positional}' --args "$@" |
        $XCURL -H 'Content-Type: application/json' --data-binary @- "$EXTENDER_URL/filter"
}
# held_pod NAME [SPEC_JSON] - a 1-GPU pod kube-scheduler leaves alone (a scheduling gate), its
# spec merged with SPEC_JSON; its object in $pod, its uid in $uid.
held_pod() {
    kapi POST /api/v1/namespaces/ml/pods "$(jq -nc --arg n "$1" --argjson extra "${2:-null}" '{apiVersion: "v1",
        kind: "Pod", metadata: {name: $n, namespace: "ml"}, spec: ({automountServiceAccountToken: false,
        schedulingGates: [{name: "podres.dev/test-hold"}],
        containers: [{name: "main", image: "registry.invalid/x", resources: {limits: {"example.com/gpu": "1"}}}]}
        + ($extra // {}))}')"
    [ "$CODE" = 201 ] || fail "create pod $1: HTTP $CODE $(out)"
    pod=$(out) uid=$(jqo .metadata.uid)
}
# refused WHY POD - the last bind was refused with WHY in its Error and wrote no DeviceBinding for POD.
refused() {
    [ "$code" = 200 ] && jqo .Error | grep -qF -- "$1" || fail "bind not refused with '$1': HTTP $code $(out)"
    [ "$(dvb_code ml "$2")" = 404 ] || fail "a refused bind wrote a DeviceBinding for $2"
}
# gpu-b gets a fifth device, free
k patch nodedevices gpu-b --subresource=status --type=json -p '[{"op":"add","path":"/status/devices/-",
    "value":{"resourceName":"example.com/gpu","id":"gpu-b-gpu4","health":"Healthy","topology":{"nodes":[{"id":1}]}}}]' \
    > /dev/null || fail "add a device to gpu-b"
held_pod stray
fits() { filter_call "$pod" gpu-b | jqe '.NodeNames == ["gpu-b"]' > /dev/null; }
wait_until 10 fits || fail "the extender did not see gpu-b's fifth device"
stray_uid=$uid
bind_call stray "" gpu-b
[ "$code" = 400 ] && jqo .Error | grep -q PodUID || fail "bind without PodUID: HTTP $code $(out)"
bind_call stray "$uid" gpu-a
refused "node 'gpu-a' did not pass filter" stray
bind_call stray "$uid" ghost
refused "node 'ghost' did not pass filter" stray
bind_call stray "00000000-0000-0000-0000-000000000000" gpu-b
refused "another instance" stray
held_pod other '{"schedulerName": "other-scheduler"}'
filter_call "$pod" gpu-b > /dev/null
bind_call other "$uid" gpu-b
refused "scheduler 'other-scheduler' is not served" other
kapi POST /api/v1/namespaces/ml/pods "$(jq -nc '{apiVersion: "v1", kind: "Pod",
    metadata: {name: "prebound", namespace: "ml"}, spec: {nodeName: "gpu-a", automountServiceAccountToken: false,
    containers: [{name: "main", image: "registry.invalid/x", resources: {limits: {"example.com/gpu": "1"}}}]}}')"
[ "$CODE" = 201 ] || fail "create pod prebound: HTTP $CODE $(out)"
uid=$(jqo .metadata.uid)
filter_call "$(out)" gpu-b > /dev/null
bind_call prebound "$uid" gpu-b
refused "bound already (to node 'gpu-a')" prebound
[ "$(k get pod -n ml stray -o jsonpath='{.spec.nodeName}')$(k get pod -n ml other -o jsonpath='{.spec.nodeName}')" = "" ] ||
    fail "a refused bind bound a pod"
grep -qx 'podres_extender_binds_refused_total 5' <<<"$($XCURL "$EXTENDER_URL/metrics")" ||
    fail "refusals not counted: $($XCURL "$EXTENDER_URL/metrics" | grep refused)"
ok "bind refuses and writes nothing: no PodUID (400); a node not passed by filter, or none; another uid; another scheduler's pod; a bound pod (5 counted)"

# A Binding that fails takes its pre-assignment back: the API server refuses to bind a pod
# with a scheduling gate, after the checks passed and the pre-assignment was written.
held_pod gated
filter_call "$pod" gpu-b | jqe '.NodeNames == ["gpu-b"]' > /dev/null || fail "gated does not fit gpu-b"
bind_call gated "$uid" gpu-b
[ "$code" = 200 ] && [ -n "$(jqo '.Error // ""')" ] || fail "bind of a gated pod: HTTP $code $(out)"
err=$(jqo .Error)
[ "$(dvb_code ml gated)" = 404 ] || fail "the pre-assignment of the failed bind stayed"
grep -qx 'podres_extender_preassignments_removed_total 1' <<<"$($XCURL "$EXTENDER_URL/metrics")" ||
    fail "removal not counted (bind said: $err): $($XCURL "$EXTENDER_URL/metrics" | grep removed)"
ok "a Binding that fails ($err) takes its pre-assignment back, counted"

# Who may call: nobody without kube-scheduler's certificate; the probes' paths are open.
filter_call "$($KCURL "$KUBE_SERVER/api/v1/namespaces/ml/pods/stray")" gpu-b > /dev/null
code=$(curl -s -o "$T/out" -w '%{http_code}' --cacert "$EXTENDER_CA" -H 'Content-Type: application/json' \
    --data-binary "{\"PodName\":\"stray\",\"PodNamespace\":\"ml\",\"PodUID\":\"$stray_uid\",\"Node\":\"gpu-b\"}" "$EXTENDER_URL/bind")
[ "$code" = 401 ] || fail "bind without a client certificate: HTTP $code $(out)"
"$PODRES_ROOT/deploy/scheduler/podres-extender-certs" "$T/other-ca" > /dev/null 2>&1 || fail "cannot make other certificates"
for p in filter prioritize bind metrics; do
    code=$(curl -s -o "$T/out" -w '%{http_code}' --cacert "$EXTENDER_CA" --cert "$T/other-ca/client.crt" \
        --key "$T/other-ca/client.key" --data-binary '{}' "$EXTENDER_URL/$p")
    [ "$code" = 401 ] || fail "/$p with another CA's client certificate: HTTP $code $(out)"
done
code=$(curl -s -o /dev/null -w '%{http_code}' --cacert "$EXTENDER_CA" --key "$KDIR/extender-certs/server.key" \
    --cert "$KDIR/extender-certs/server.crt" "$EXTENDER_URL/metrics")
[ "$code" = 401 ] || fail "the extender's own serving certificate as a client: HTTP $code"
code=$(curl -s -m 5 -o /dev/null -w '%{http_code}' --data-binary '{}' "http://${EXTENDER_URL#https://}/filter" || true)
[ "$code" = 000 ] || fail "plain HTTP answered: $code"
[ "$(curl -s --cacert "$EXTENDER_CA" "$EXTENDER_URL/readyz")" = ok ] || fail "/readyz needs a certificate"
[ "$(dvb_code ml stray)" = 404 ] && [ -z "$(k get pod -n ml stray -o jsonpath='{.spec.nodeName}')" ] ||
    fail "an unauthenticated bind bound stray"
grep -q 'podres_extender_requests_denied_total{reason="no_certificate"} [1-9]' <<<"$($XCURL "$EXTENDER_URL/metrics")" ||
    fail "denials not counted"
grep -q 'refused a request for /bind: no client certificate' "$KDIR/podres-extender.log" || fail "denial not logged"
# a second extender that allows another name: kube-scheduler's certificate is valid there, but 403
P2=$(free_port)
xc=$KDIR/extender-certs
"$PODRES_BIN/podres-extender" --kubeconfig "$KDIR/extender.kubeconfig" --listen "127.0.0.1:$P2" \
    --tls-cert-file "$xc/server.crt" --tls-private-key-file "$xc/server.key" --client-ca-file "$xc/ca.crt" \
    --client-names someone-else > "$T/ext2.log" 2>&1 &
ext2=$!
wait_until 10 curl -sf --cacert "$EXTENDER_CA" "https://127.0.0.1:$P2/healthz" > /dev/null || fail "second extender: $(cat "$T/ext2.log")"
code=$($XCURL -o /dev/null -w '%{http_code}' "https://127.0.0.1:$P2/metrics")
kill "$ext2"
[ "$code" = 403 ] || fail "a certificate of a name not in --client-names: HTTP $code"
"$PODRES_BIN/podres-extender" --kubeconfig "$KDIR/extender.kubeconfig" --listen "127.0.0.1:$(free_port)" \
    > "$T/ext3.log" 2>&1 && fail "the extender started without certificates"
grep -q -- '--tls-cert-file is required' "$T/ext3.log" || fail "no reason to refuse start-up: $(cat "$T/ext3.log")"
ok "HTTPS only; without kube-scheduler's certificate 401 (none, another CA's, a server certificate), 403 for a name not allowed; /readyz open; no certificates, no start"

# One client address holding 300 idle connections gets its share (32), not all: kube-scheduler
# still schedules a pod through the extender meanwhile.
cat > "$T/hold.py" <<'PYEND'
import socket, sys, time
socks = []
for _ in range(300):
    s = socket.socket()
    s.bind(("127.0.0.2", 0))
    try:
        s.connect(("127.0.0.1", int(sys.argv[1])))
        socks.append(s)
    except OSError:
        pass
time.sleep(1)
held = 0
for s in socks:
    s.setblocking(False)
    try:
        held += s.recv(1, socket.MSG_PEEK) != b""
    except BlockingIOError:
        held += 1
    except OSError:
        pass
print(held, flush=True)
time.sleep(25)
PYEND
python3 "$T/hold.py" "${EXTENDER_URL##*:}" > "$T/held" 2>&1 &
hpid=$!
wait_until 10 test -s "$T/held" || fail "the connection holder did not report"
held=$(head -1 "$T/held")
[ "$held" -le 32 ] && [ "$held" -ge 16 ] || fail "one client address holds $held connections"
kapi POST /api/v1/namespaces/ml/pods "$(jq -nc '{apiVersion: "v1", kind: "Pod", metadata: {name: "late", namespace: "ml"},
    spec: {automountServiceAccountToken: false, containers: [{name: "main", image: "registry.invalid/x",
    resources: {limits: {"nvidia.com/gpu": "1"}}}]}}')"
[ "$CODE" = 201 ] || fail "create pod late: HTTP $CODE $(out)"
gpu_node gpu-d 0
kapi PATCH /api/v1/nodes/gpu-d/status '{"status":{"capacity":{"nvidia.com/gpu":"1"},"allocatable":{"nvidia.com/gpu":"1"}}}' \
    application/merge-patch+json
[ "$CODE" = 200 ] || fail "node gpu-d: HTTP $CODE $(out)"
k create -f - > /dev/null <<JSON || fail "create NodeDevices gpu-d"
{"apiVersion":"podres.dev/v1alpha1","kind":"NodeDevices","metadata":{"name":"gpu-d"}}
JSON
k patch nodedevices gpu-d --subresource=status --type=merge -p '{"status": {"summary": "nvidia.com/gpu=1",
    "unhealthy": 0, "resources": [{"name": "nvidia.com/gpu", "total": 1, "healthy": 1}],
    "devices": [{"resourceName": "nvidia.com/gpu", "id": "gpu-d-0", "health": "Healthy"}]}}' > /dev/null ||
    fail "patch NodeDevices gpu-d"
late() { [ "$(k get pod -n ml late -o jsonpath='{.spec.nodeName}')" = gpu-d ]; }
wait_until 20 late || fail "kube-scheduler did not place late while one address held $held connections: $(k describe pod -n ml late | tail -4)"
kill "$hpid" 2>/dev/null || true
ok "one client address opening 300 idle connections keeps $held; kube-scheduler placed a pod meanwhile"

m=$($XCURL "$EXTENDER_URL/metrics")
b=$(awk '$1 == "podres_extender_binds_total" {print $2}' <<< "$m")
[ "$b" -ge "$bound" ] || fail "podres_extender_binds_total $b < $bound"
grep -q 'podres_extender_requests_total{verb="filter",outcome="bad_request"} 1' <<< "$m" ||
    fail "the bad request is not counted: $(grep requests_total <<< "$m")"
ok "metrics count $b binds and the bad request"

if grep -qE 'AddressSanitizer|LeakSanitizer|runtime error:' "$KDIR/podres-extender.log"; then
    cat "$KDIR/podres-extender.log" >&2
    fail "sanitizer report in the extender log"
fi
