#!/usr/bin/env bash
# kubectl podres on the real control plane, run through the real kubectl
# (PATH holds the build's bin/, so kubectl's plugin mechanism finds
# kubectl-podres). Two nodes each with a real podresd and podres-syncer
# publishing NodeDevices and DeviceBindings of pods bound in podresd, one
# pre-assignment written with kubectl that is not yet Bound, and a third
# node whose NodeDevices (with aliases: podresd takes none yet) and one
# DeviceBinding are written by hand. Checks nodes, node, who (id and alias),
# pods (-A, -n, the context's namespace), -o json|yaml|wide, the errors
# (unknown node and device, 403, CRD missing), an exec-credential
# kubeconfig, --context and $KUBECONFIG.
. "$(dirname "$0")/lib.sh"

ND=$DVB/nodedevices
NODES="node-a node-b"

kube_up
kube_ns ml
kube_ns web

# kp ARGS... - `kubectl podres ARGS` through the real kubectl; stdout in
# $T/kp.out, stderr in $T/kp.err, exit status in KP_RC; no sanitizer report.
kp() {
    KP_RC=0
    PATH="$PODRES_BIN:$PATH" "$KUBECTL" podres "$@" > "$T/kp.out" 2> "$T/kp.err" || KP_RC=$?
    if grep -qE 'AddressSanitizer|LeakSanitizer|runtime error:' "$T/kp.err"; then
        cat "$T/kp.err" >&2
        fail "sanitizer report from kubectl podres $*"
    fi
}
# kpa ARGS... - kp as the cluster admin; must succeed.
kpa() {
    kp --kubeconfig "$KCFG" "$@"
    [ "$KP_RC" = 0 ] || fail "kubectl podres $*: exit $KP_RC: $(cat "$T/kp.err")"
}
# expect_err PATTERN ARGS... - kp ARGS exits 1 with one line on stderr matching PATTERN.
expect_err() {
    local pat=$1
    shift
    kp "$@"
    [ "$KP_RC" = 1 ] || fail "kubectl podres $*: exit $KP_RC, want 1: $(cat "$T/kp.out" "$T/kp.err")"
    [ "$(wc -l < "$T/kp.err")" = 1 ] || fail "kubectl podres $*: not one line on stderr: $(cat "$T/kp.err")"
    grep -qE -- "$pat" "$T/kp.err" || fail "kubectl podres $*: stderr '$(cat "$T/kp.err")' lacks /$pat/"
}
# line PATTERN - the output of the last kp has a line matching the extended regex.
line() { grep -qE -- "$1" "$T/kp.out" || fail "no line /$1/ in:
$(cat "$T/kp.out")"; }

PATH="$PODRES_BIN:$PATH" "$KUBECTL" plugin list 2> /dev/null | grep -q '/kubectl-podres$' ||
    fail "kubectl plugin list does not find kubectl-podres"
ok "kubectl plugin list finds kubectl-podres on PATH"

# ---- two nodes, each with podresd and podres-syncer ----
declare -A SOCK
for n in $NODES; do
    kube_node "$n"
    mkdir -p "$T/$n" && chmod 700 "$T/$n"
    SOCK[$n]=$T/$n/podresd.sock
    "$PODRES_BIN/podresd" --db "$T/$n/podresd.db" --socket "${SOCK[$n]}" --listen "127.0.0.1:$(free_port)" \
        --node-name "$n" >> "$T/$n/podresd.log" 2>&1 &
    PIDS+=("$!")
    wait_until 10 curl -sf --unix-socket "${SOCK[$n]}" http://localhost/healthz || fail "podresd of $n did not start"
    PD_SOCK=${SOCK[$n]}
    p=${n#node-}
    register example.com/gpu "$(jq -nc --arg p "$p" '[range(0;4) | {id: "\($p)-g\(.)", topology: {nodes: [{ID: (if . < 2 then 0 else 1 end)}]}}]')"
    "$PODRES_BIN/podres-syncer" --node-name "$n" --podresd-socket "${SOCK[$n]}" --kubeconfig "$SY_KCFG" \
        --metrics-listen "127.0.0.1:$(free_port)" >> "$T/$n/syncer.log" 2>&1 &
    PIDS+=("$!")
done
PD_SOCK=${SOCK[node-b]}
req PATCH /v1/resources/example.com/gpu/devices/b-g3 '{"health":"Unhealthy"}'
[ "$CODE" = 200 ] || fail "mark b-g3 Unhealthy: $CODE $(out)"

# Pods bound in podresd: ml/train-0 (a-g0, a-g1) and web/infer-0 (a-g2) on node-a,
# ml/train-1 (b-g0) on node-b.
PD_SOCK=${SOCK[node-a]}
bind ml train-0 "$(kube_pod ml train-0 node-a)" a-g0 a-g1
bind web infer-0 "$(kube_pod web infer-0 node-a)" a-g2
PD_SOCK=${SOCK[node-b]}
bind ml train-1 "$(kube_pod ml train-1 node-b)" b-g0

# A scheduler's pre-assignment of b-g1 to ml/train-2, whose pod is not there yet.
k apply -f - > /dev/null <<EOF || fail "cannot write the pre-assignment"
apiVersion: podres.dev/v1alpha1
kind: DeviceBinding
metadata: {name: train-2, namespace: ml, labels: {podres.dev/node: node-b}}
spec:
  nodeName: node-b
  containers: [{name: main, devices: [{resourceName: example.com/gpu, deviceIds: [b-g1]}]}]
EOF

# node-c: no podresd or syncer; its NodeDevices, with aliases, and a DeviceBinding by hand.
k apply -f - > /dev/null <<EOF || fail "cannot create NodeDevices node-c"
apiVersion: podres.dev/v1alpha1
kind: NodeDevices
metadata: {name: node-c}
spec: {}
EOF
k patch nodedevices node-c --subresource=status --type=merge -p '{"status":{"summary":"example.com/gpu=2",
  "unhealthy":0,"resources":[{"name":"example.com/gpu","total":2,"healthy":2}],"devices":[
  {"resourceName":"example.com/gpu","id":"c-g0","health":"Healthy","topology":{"nodes":[{"id":1}]},"aliases":["nvidia0","0000:3b:00.0"]},
  {"resourceName":"example.com/gpu","id":"c-g1","health":"Healthy","aliases":["nvidia1"]}]}}' > /dev/null ||
    fail "cannot write the status of NodeDevices node-c"
k apply -f - > /dev/null <<EOF || fail "cannot create DeviceBinding ml/c-pod"
apiVersion: podres.dev/v1alpha1
kind: DeviceBinding
metadata: {name: c-pod, namespace: ml, labels: {podres.dev/node: node-c}}
spec: {nodeName: node-c}
EOF
k patch dvb -n ml c-pod --subresource=status --type=merge -p '{"status":{"nodeName":"node-c","podUID":"c-uid",
  "phase":"Bound","summary":"example.com/gpu=1","containers":[{"name":"main","devices":[
  {"resourceName":"example.com/gpu","deviceIds":["c-g0"]}]}]}}' > /dev/null ||
    fail "cannot write the status of DeviceBinding ml/c-pod"

settled() {
    $KCURL -f "$KUBE_SERVER$ND" > "$T/nds.json" && $KCURL -f "$KUBE_SERVER$DVB/devicebindings" > "$T/dvbs.json" &&
        [ "$(jq -r '[.items[] | "\(.metadata.name)=\(.status.summary)/\(.status.unhealthy)"] | join(" ")' "$T/nds.json")" = \
            "node-a=example.com/gpu=4/0 node-b=example.com/gpu=4/1 node-c=example.com/gpu=2/0" ] &&
        [ "$(jq -r '[.items[] | "\(.metadata.name)=\(.status.phase)"] | sort | join(" ")' "$T/dvbs.json")" = \
            "c-pod=Bound infer-0=Bound train-0=Bound train-1=Bound train-2=Pending" ]
}
wait_until 20 settled || fail "the syncers did not publish: $(jq -c '[.items[] | {n: .metadata.name, s: .status.summary}]' "$T/nds.json") $(jq -c '[.items[] | {n: .metadata.name, p: .status.phase}]' "$T/dvbs.json") $(tail -3 "$T"/node-?/syncer.log)"
ok "two nodes publish NodeDevices and DeviceBindings (one pre-assignment Pending); node-c written by hand"

# ---- nodes ----
kpa nodes
[ "$(head -1 "$T/kp.out")" = "NODE     RESOURCE          TOTAL   HEALTHY   HELD   RESERVED   FREE" ] ||
    fail "the header is not aligned as kubectl's: '$(head -1 "$T/kp.out")'"
[ "$(sed -n 2p "$T/kp.out")" = "node-a   example.com/gpu   4       4         3      0          1" ] ||
    fail "node-a's line: '$(sed -n 2p "$T/kp.out")'"
line '^node-b +example.com/gpu +4 +3 +1 +1 +1$'
line '^node-c +example.com/gpu +2 +2 +1 +0 +1$'
[ "$(wc -l < "$T/kp.out")" = 4 ] || fail "kubectl podres nodes: $(cat "$T/kp.out")"
# The same numbers from the DeviceBindings themselves (jq over the API's lists).
kpa nodes -o json
jqe . < "$T/kp.out" > /dev/null || fail "-o json is not JSON"
jq -n --slurpfile nd "$T/nds.json" --slurpfile dvb "$T/dvbs.json" '
    [$dvb[0].items[] | .status.nodeName as $n | .status.containers[]?.devices[].deviceIds[] | "\($n)/\(.)"] as $held |
    ([$dvb[0].items[] | select(.status.phase != "Bound") | .spec.nodeName as $n
        | .spec.containers[]?.devices[].deviceIds[] | "\($n)/\(.)"] - $held) as $resv |
    [$nd[0].items[] | .metadata.name as $n | .status.devices as $d |
        {node: $n, total: ($d | length), healthy: ([$d[] | select(.health == "Healthy")] | length),
         held: ([$d[] | select(("\($n)/\(.id)") | IN($held[]))] | length),
         reserved: ([$d[] | select(("\($n)/\(.id)") | IN($resv[]))] | length)}
        | .free = ([$d[] | select(.health == "Healthy" and (("\($n)/\(.id)") | IN($held[], $resv[]) | not))] | length)]' \
    > "$T/want.json"
jqe --slurpfile want "$T/want.json" '[.items[] | {node, total, healthy, held, reserved, free}] == $want[0]' < "$T/kp.out" > /dev/null ||
    fail "kubectl podres nodes -o json: $(jq -c '.items' "$T/kp.out"), from the DeviceBindings: $(jq -c . "$T/want.json")"
kpa nodes -o yaml
python3 -c 'import sys, yaml; d = yaml.safe_load(open(sys.argv[1])); assert [r["free"] for r in d["items"]] == [1, 1, 1], d' \
    "$T/kp.out" || fail "-o yaml is not the YAML expected: $(cat "$T/kp.out")"
kpa nodes -o wide
line '^NODE +RESOURCE +TOTAL +HEALTHY +HELD +RESERVED +FREE +UNHEALTHY +PODS$'
line '^node-a +example.com/gpu +4 +4 +3 +0 +1 +0 +2$'
ok "kubectl podres nodes: total, healthy, held, reserved, free per node match the DeviceBindings; aligned as kubectl's; -o json, yaml (valid), wide"

# ---- node NODE ----
kpa node node-b
line '^RESOURCE +ID +HEALTH +NUMA +STATE +HOLDER +SINCE$'
line '^example.com/gpu +b-g0 +Healthy +0 +held +ml/train-1/main +[0-9]+[sm]'
line '^example.com/gpu +b-g1 +Healthy +0 +reserved +ml/train-2/main +[0-9]+[sm]'
line '^example.com/gpu +b-g2 +Healthy +1 +free +<none> +<none>$'
line '^example.com/gpu +b-g3 +Unhealthy +1 +unhealthy +<none> +<none>$'
kpa node node-a -o yaml
python3 - "$T/kp.out" <<'PY' || fail "node node-a -o yaml: $(cat "$T/kp.out")"
import sys, yaml
d = yaml.safe_load(open(sys.argv[1]))
held = {r["id"]: (r["holder"] or {}).get("pod") for r in d["items"]}
assert held == {"a-g0": "train-0", "a-g1": "train-0", "a-g2": "infer-0", "a-g3": None}, held
assert all(isinstance(r["since"], str) for r in d["items"] if r["holder"]), d
PY
ok "kubectl podres node NODE: each device with health, NUMA, state and holder (or the reservation) and since"

# ---- who ----
kpa who a-g2
line '^NODE +RESOURCE +ID +HEALTH +STATE +HOLDER +SINCE$'
line '^node-a +example.com/gpu +a-g2 +Healthy +held +web/infer-0/main +'
kpa who nvidia0
line '^node-c +example.com/gpu +c-g0 +Healthy +held +ml/c-pod/main +'
kpa who 0000:3b:00.0 -o json
jqe '.items | length == 1 and .[0].node == "node-c" and .[0].id == "c-g0" and .[0].holder.pod == "c-pod"
    and .[0].aliases == ["nvidia0", "0000:3b:00.0"]' < "$T/kp.out" > /dev/null || fail "who by PCI address: $(cat "$T/kp.out")"
kpa who nvidia1 -o wide
line '^node-c +example.com/gpu +c-g1 +Healthy +<none> +free +<none> +<none> +nvidia1$'
ok "kubectl podres who: a device by id and by alias (NodeDevices aliases), its node and holder"

# ---- pods ----
kpa pods -A
line '^NAMESPACE +NAME +NODE +PHASE +DEVICE-IDS$'
line '^ml +c-pod +node-c +Bound +c-g0$'
line '^ml +train-0 +node-a +Bound +a-g0,a-g1$'
line '^ml +train-1 +node-b +Bound +b-g0$'
line '^ml +train-2 +node-b +Pending +b-g1$'
line '^web +infer-0 +node-a +Bound +a-g2$'
[ "$(wc -l < "$T/kp.out")" = 6 ] || fail "pods -A: $(cat "$T/kp.out")"
kpa pods -n web
[ "$(cat "$T/kp.out")" = "NAME      NODE     PHASE   DEVICE-IDS
infer-0   node-a   Bound   a-g2" ] || fail "pods -n web: $(cat "$T/kp.out")"
kpa pods
[ ! -s "$T/kp.out" ] && grep -qx 'No resources found in default namespace.' "$T/kp.err" ||
    fail "pods in the context's namespace (default): $(cat "$T/kp.out" "$T/kp.err")"
kpa pods -A -o yaml
python3 -c 'import sys, yaml; d = yaml.safe_load(open(sys.argv[1])); assert len(d["items"]) == 5, d' "$T/kp.out" ||
    fail "pods -A -o yaml: $(cat "$T/kp.out")"
ok "kubectl podres pods: -A, -n, the context's namespace; -o yaml"

# ---- errors ----
expect_err '^error: node "nope" has no NodeDevices' --kubeconfig "$KCFG" node nope
expect_err '^error: no device "gpu-x" on any node' --kubeconfig "$KCFG" who gpu-x
k create serviceaccount nobody -n default > /dev/null || fail "create ServiceAccount nobody"
sa_kubeconfig default nobody "$T/nobody.kubeconfig"
expect_err '^error: cannot list nodedevices.podres.dev \(Forbidden\): .*cannot list resource "nodedevices" in API group "podres.dev"' \
    --kubeconfig "$T/nobody.kubeconfig" nodes
expect_err '^error: cannot list devicebindings.podres.dev \(Forbidden\): .*cannot list resource "devicebindings"' \
    --kubeconfig "$T/nobody.kubeconfig" pods -n ml
ok "errors, one line each, exit 1: unknown node, unknown device, 403 naming the verb and resource"

# ---- an exec credential plugin, --context, $KUBECONFIG ----
k create serviceaccount viewer -n default > /dev/null || fail "create ServiceAccount viewer"
k create clusterrole podres-viewer --verb=get,list --resource=nodedevices.podres.dev,devicebindings.podres.dev > /dev/null ||
    fail "create ClusterRole podres-viewer"
k create clusterrolebinding podres-viewer --clusterrole podres-viewer --serviceaccount default:viewer > /dev/null ||
    fail "create ClusterRoleBinding podres-viewer"
k create token viewer -n default --duration 1h > "$T/viewer.token" || fail "no token for viewer"
mkdir -p "$T/plugins"
cat > "$T/plugins/get-token.sh" <<'EOF'
#!/bin/sh
# An exec credential plugin: counts its runs, prints the ServiceAccount token.
[ "$1" = --audience ] && [ "$2" = podres ] || { echo "bad args: $*" >&2; exit 2; }
echo run >> "$RUNS"
printf '{"apiVersion":"client.authentication.k8s.io/v1","kind":"ExecCredential","status":{"token":"%s","expirationTimestamp":"%s"}}\n' \
    "$(cat "$TOKEN_FILE")" "$(date -u -d '+1 hour' +%Y-%m-%dT%H:%M:%SZ)"
EOF
chmod 755 "$T/plugins/get-token.sh"
cat > "$T/exec.kubeconfig" <<EOF
apiVersion: v1
kind: Config
clusters:
- name: test
  cluster:
    server: $KUBE_SERVER
    certificate-authority-data: $(base64 -w0 < "$KUBE_CA")
- name: nowhere
  cluster: {server: 'https://127.0.0.1:1', certificate-authority-data: $(base64 -w0 < "$KUBE_CA")}
contexts:
- name: broken
  context: {cluster: nowhere, user: viewer}
- name: viewer
  context: {cluster: test, user: viewer, namespace: web}
current-context: broken
users:
- name: viewer
  user:
    exec:
      apiVersion: client.authentication.k8s.io/v1
      command: ./plugins/get-token.sh
      args: [--audience, podres]
      env: [{name: TOKEN_FILE, value: $T/viewer.token}, {name: RUNS, value: $T/exec.runs}]
      interactiveMode: Never
EOF
kp --kubeconfig "$T/exec.kubeconfig" --context viewer nodes
[ "$KP_RC" = 0 ] || fail "exec credential kubeconfig: exit $KP_RC: $(cat "$T/kp.err")"
line '^node-b +example.com/gpu +4 +3 +1 +1 +1$'
[ "$(wc -l < "$T/exec.runs")" = 1 ] || fail "the exec plugin ran $(wc -l < "$T/exec.runs") times for two lists"
kp --kubeconfig "$T/exec.kubeconfig" --context viewer pods
[ "$KP_RC" = 0 ] || fail "pods in the context's namespace: $(cat "$T/kp.err")"
[ "$(cat "$T/kp.out")" = "NAME      NODE     PHASE   DEVICE-IDS
infer-0   node-a   Bound   a-g2" ] || fail "pods in the context's namespace (web): $(cat "$T/kp.out")"
ok "an exec credential plugin (args, env, relative command) gives a ServiceAccount token, run once per invocation; --context picks a non-current context and its namespace"
expect_err '^error: cannot list nodedevices.podres.dev: .*(127.0.0.1|refused|connect)' --kubeconfig "$T/exec.kubeconfig" nodes
expect_err '^error: kubeconfig .*context "nope" not found' --kubeconfig "$T/exec.kubeconfig" --context nope nodes
KP_RC=0
KUBECONFIG=$T/nobody.kubeconfig:$KCFG PATH="$PODRES_BIN:$PATH" "$KUBECTL" podres who a-g0 > "$T/kp.out" 2> "$T/kp.err" || KP_RC=$?
[ "$KP_RC" = 1 ] && grep -q Forbidden "$T/kp.err" || fail "\$KUBECONFIG's first file: exit $KP_RC $(cat "$T/kp.err")"
KUBECONFIG=$KCFG PATH="$PODRES_BIN:$PATH" "$KUBECTL" podres who a-g0 > "$T/kp.out" 2> "$T/kp.err" ||
    fail "\$KUBECONFIG: $(cat "$T/kp.err")"
line '^node-a +example.com/gpu +a-g0 +Healthy +held +ml/train-0/main'
ok "the current context (unreachable) fails with one line; an unknown --context is named; \$KUBECONFIG is read"

# ---- text from the API that would drive a terminal ----
# The CRDs refuse control characters in device ids, aliases and node names; what they
# let through (a resource name, a container name) reaches the table escaped, as kubectl
# escapes it: no ESC or BEL byte on the terminal, ^[ and ^G instead.
k create -f - > /dev/null <<EOF || fail "cannot create NodeDevices node-evil"
{"apiVersion": "podres.dev/v1alpha1", "kind": "NodeDevices", "metadata": {"name": "node-evil"}}
EOF
evil_status() { # ID ALIAS RESOURCE - patch node-evil's status with one device so named
    jq -nc --arg id "$1" --arg al "$2" --arg r "$3" '{status: {summary: "x", unhealthy: 0,
        resources: [{name: $r, total: 1, healthy: 1}],
        devices: [{resourceName: $r, id: $id, health: "Healthy", aliases: [$al]}]}}' > "$T/evil.json"
    k patch nodedevices node-evil --subresource=status --type=merge --patch-file "$T/evil.json" > "$T/evil.out" 2>&1
}
ESC=$'\e' TITLE=$'\e]0;PWNED-TITLE\a' CLEAR=$'\e[2J' LINK=$'\e]8;;http://evil.example/\a'
evil_status "g$TITLE" ok example.com/gpu && fail "the CRD took a device id with ESC"
grep -q 'should match' "$T/evil.out" || fail "no pattern message for the id: $(cat "$T/evil.out")"
evil_status g "nv$CLEAR" example.com/gpu && fail "the CRD took an alias with ESC"
evil_status g $'nv\xc2\x9b2J' example.com/gpu && fail "the CRD took an alias with a C1 CSI"
k create -f - > "$T/evil.out" 2>&1 <<EOF && fail "the CRD took a spec.nodeName with ESC"
{"apiVersion": "podres.dev/v1alpha1", "kind": "DeviceBinding", "metadata": {"name": "evil", "namespace": "ml"},
 "spec": {"nodeName": "n${TITLE}"}}
EOF
evil_status g ok "example.com/gpu$LINK" || fail "cannot write node-evil: $(cat "$T/evil.out")"
jq -nc --arg c "main$CLEAR" '{apiVersion: "podres.dev/v1alpha1", kind: "DeviceBinding",
    metadata: {name: "evil", namespace: "ml", labels: {"podres.dev/node": "node-evil"}}, spec: {nodeName: "node-evil"}}' |
    k create -f - > /dev/null || fail "cannot create DeviceBinding ml/evil"
jq -nc --arg c "main$CLEAR" --arg r "example.com/gpu$LINK" '{status: {nodeName: "node-evil", podUID: "e-uid",
    phase: "Bound", containers: [{name: $c, devices: [{resourceName: $r, deviceIds: ["g"]}]}]}}' > "$T/evil-dvb.json"
k patch dvb -n ml evil --subresource=status --type=merge --patch-file "$T/evil-dvb.json" > /dev/null ||
    fail "cannot write the status of DeviceBinding ml/evil"
for args in "nodes" "node node-evil" "who g" "pods -A" "pods -n ml -o wide" "pods -n ml -o yaml"; do
    # shellcheck disable=SC2086
    kpa $args
    [ -s "$T/kp.out" ] || fail "kubectl podres $args printed nothing"
    ! grep -q "[$ESC"$'\a'"]" "$T/kp.out" || fail "kubectl podres $args printed a raw ESC or BEL: $(cat -v "$T/kp.out")"
done
kpa node node-evil
line 'example.com/gpu\^\[\]8;;http://evil.example/\^G'
kpa pods -n ml
kpa who g
line 'ml/evil/main\^\[\[2J'
ok "the CRDs refuse ESC and C1 in ids, aliases and spec.nodeName; what else holds escapes prints as ^[ and ^G (nodes, node, who, pods, -o wide, -o yaml)"

# ---- the CRD missing ----
k delete crd nodedevices.podres.dev --wait=true --timeout=60s > /dev/null || fail "cannot delete the NodeDevices CRD"
gone() { kp --kubeconfig "$KCFG" nodes; [ "$KP_RC" = 1 ] && grep -q 'does not serve' "$T/kp.err"; }
wait_until 30 gone || true
expect_err '^error: the server does not serve nodedevices.podres.dev: is podres installed\?$' --kubeconfig "$KCFG" nodes
kpa pods -A # pods needs DeviceBindings only
ok "the CRD deleted: 'the server does not serve nodedevices.podres.dev: is podres installed?', exit 1"
