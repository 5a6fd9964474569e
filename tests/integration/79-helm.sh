#!/usr/bin/env bash
# deploy/helm/podres with a real helm (make helm) against a real control plane
# (tests/kube/cluster): helm lint --strict of the defaults and of every option; helm template
# into kubectl apply --server-side --dry-run=server (defaults; extender, admission policy,
# write token and device-node selector on; policy and CRDs off) with no error or
# warning; with the defaults the chart renders exactly deploy/'s objects (kubectl kustomize
# deploy/: the DaemonSet's containers, args, probes, volumes and everything else equal, labels
# aside) and with the extender also deploy/scheduler/'s; the values reach the objects; the
# chart's CRDs are links to schema/'s, which helm package copies in; the rendered podresd
# config starts podresd; the README's device-node kustomize overlay is accepted; and helm
# install, upgrade and uninstall work on the API server (uninstall keeps the CRDs, as the
# README says).
. "$(dirname "$0")/lib.sh"
cd "$PODRES_ROOT"
PY=/usr/bin/python3
CH=deploy/helm/podres
HELM=$PODRES_ROOT/build/helm/helm
[ -x "$HELM" ] || fail "$HELM is missing: make helm"
export HELM_CACHE_HOME=$T/helm/cache HELM_CONFIG_HOME=$T/helm/config HELM_DATA_HOME=$T/helm/data
export HOME=$T/home
mkdir -p "$HOME"
h() { "$HELM" "$@"; }
# helm_stderr - $T/stderr but the notes helm writes for each symbolic link it
# follows (files/ links to schema/'s CRDs): whatever else helm says is a finding.
helm_stderr() {
    grep -v '^level=INFO msg="found symbolic link in path. Contents of linked file included and used" path=[^ ]*/files/crd-[a-z]*\.yaml resolved=[^ ]*/schema/crd-[a-z]*\.yaml$' \
        "$T/stderr" || true
}

# ---- 1. without the API server: the CRDs, lint
for crd in crd-devicebinding.yaml crd-nodedevices.yaml; do
    [ -L "$CH/files/$crd" ] && [ "$(readlink -f "$CH/files/$crd")" = "$(readlink -f "schema/$crd")" ] ||
        fail "$CH/files/$crd is not a link to schema/$crd"
done
h package "$CH" -d "$T/pkg" > /dev/null 2>"$T/stderr" || fail "helm package: $(cat "$T/stderr")"
[ -z "$(helm_stderr)" ] || fail "helm package printed: $(helm_stderr)"
for crd in crd-devicebinding.yaml crd-nodedevices.yaml; do
    tar -xzOf "$T"/pkg/podres-*.tgz "podres/files/$crd" | cmp -s - "schema/$crd" ||
        fail "the packaged chart's files/$crd is not schema/$crd"
done
ok "the chart's CRDs (files/) are links to schema/'s; helm package copies schema/'s files in"

ALL_ON=(--set extender.enabled=true --set admissionPolicy.enabled=true
    --set podresd.writeToken.secretName=podres-write-token --set logLevel=debug
    --set image.repository=registry.example.com/podres --set image.tag=0.2.0
    --set-string 'nodeSelector.podres\.dev/device-node=true' --set metrics.syncerListen=127.0.0.1:9555)
OFF=(--set admissionPolicy.enabled=false --set crds.install=false)
METRICS=(--set metrics.enabled=true)
for v in defaults all-on off metrics podmonitor; do
    case $v in
    defaults) set -- ;;
    all-on) set -- "${ALL_ON[@]}" ;;
    off) set -- "${OFF[@]}" ;;
    metrics) set -- "${METRICS[@]}" ;;
    podmonitor) set -- "${METRICS[@]}" --set metrics.podMonitor.enabled=true --set-string metrics.podMonitor.labels.release=kps ;;
    esac
    out=$(h lint --strict "$CH" "$@" 2>&1) || fail "helm lint --strict ($v): $out"
    grep -q '1 chart(s) linted, 0 chart(s) failed' <<<"$out" || fail "helm lint ($v): $out"
    ! grep -Eq '\[(WARNING|ERROR)\]' <<<"$out" || fail "helm lint ($v) warned: $out"
done
ok "helm lint --strict: no warning with the defaults, with every option on, with policy and CRDs off, with metrics and the PodMonitor on ($(h version --short))"

# ---- 2. the real API server
KDIR=$T/kube
KUBE_OWNED=1
"$PODRES_ROOT/tests/kube/cluster" up "$KDIR" --owner $$ > "$T/kube-up.log" 2>&1 ||
    { cat "$T/kube-up.log" >&2; fail "the control plane did not start"; }
# shellcheck disable=SC1091
. "$KDIR/env"
KCFG=$KUBECONFIG
unset KUBECONFIG
KV=$(k version -o json | jq -r .serverVersion.gitVersion)
k apply --server-side -f deploy/namespace.yaml > /dev/null || fail "cannot create namespace podres-system"

# render NAME VALUES... - helm template into $T/NAME.yaml, as the server's version.
render() {
    local name=$1
    shift
    h template podres "$CH" -n podres-system --kube-version "$KV" "$@" > "$T/$name.yaml" 2>"$T/stderr" ||
        fail "helm template ($name): $(cat "$T/stderr")"
    [ -z "$(helm_stderr)" ] || fail "helm template ($name) printed: $(helm_stderr)"
}
# dry_run NAME - every object of $T/NAME.yaml accepted by kubectl apply --server-side --dry-run=server.
dry_run() {
    local n out
    n=$("$PY" -c 'import sys, yaml; print(sum(1 for d in yaml.safe_load_all(open(sys.argv[1])) if d))' "$T/$1.yaml")
    out=$(k apply --server-side --dry-run=server -f "$T/$1.yaml" 2>"$T/stderr") ||
        fail "kubectl apply --server-side --dry-run=server ($1): $out $(cat "$T/stderr")"
    [ ! -s "$T/stderr" ] || fail "kubectl apply --dry-run=server ($1) warned: $(cat "$T/stderr")"
    [ "$(grep -c ' serverside-applied (server dry run)$' <<<"$out")" = "$n" ] ||
        fail "kubectl apply --dry-run=server ($1): want $n objects: $out"
    DRY_N=$n
}
render defaults
dry_run defaults
ok "helm template (defaults) | kubectl apply --server-side --dry-run=server: all $DRY_N objects accepted by $KV, no warning"
render all-on "${ALL_ON[@]}"
dry_run all-on
ok "... with extender, admission policy, write token, device-node selector and a metrics address: all $DRY_N accepted"
render off "${OFF[@]}"
dry_run off
ok "... with the admission policy and the CRDs off: all $DRY_N accepted"
# (the PodMonitor is not dry-run: this API server has no monitoring.coreos.com CRDs)
render metrics "${METRICS[@]}"
dry_run metrics
ok "... with metrics.enabled (pod-IP listeners, httpGet probes on a named port, the Service): all $DRY_N accepted"

# ---- 3. the chart renders deploy/'s objects (and deploy/scheduler/'s)
k kustomize deploy/ > "$T/kustomize.yaml" || fail "kubectl kustomize deploy/"
k kustomize deploy/scheduler > "$T/kustomize-scheduler.yaml" || fail "kubectl kustomize deploy/scheduler"
out=$($PY -m podres_test.compare_objects "$T/kustomize.yaml" "$T/defaults.yaml") ||
    fail "helm template (defaults) differs from kubectl kustomize deploy/:
$out"
ok "helm template (defaults) = kubectl kustomize deploy/ but the Namespace, labels and annotations ($out): the DaemonSet's containers, args, probes, volumes, nodeSelector and tolerations included"
render extender --set extender.enabled=true
out=$($PY -m podres_test.compare_objects "$T/kustomize-scheduler.yaml" "$T/extender.yaml" --only-in-want) ||
    fail "helm template --set extender.enabled=true differs from kubectl kustomize deploy/scheduler:
$out"
ok "helm template --set extender.enabled=true adds deploy/scheduler/'s objects, equal ($out)"
# deploy/monitoring's components in an overlay of deploy/ = the chart with metrics (and the PodMonitor) on
mkdir -p "$T/mon" "$T/mon-pm"
for d in mon mon-pm; do
    {
        echo "resources:"
        echo "- $(realpath --relative-to="$T/$d" deploy)"
        echo "components:"
        echo "- $(realpath --relative-to="$T/$d" deploy/monitoring)"
        [ "$d" = mon ] || echo "- $(realpath --relative-to="$T/$d" deploy/monitoring/podmonitor)"
    } > "$T/$d/kustomization.yaml"
    k kustomize "$T/$d" > "$T/kustomize-$d.yaml" || fail "kubectl kustomize with deploy/monitoring ($d)"
done
out=$($PY -m podres_test.compare_objects "$T/kustomize-mon.yaml" "$T/metrics.yaml") ||
    fail "helm template --set metrics.enabled=true differs from deploy/ with deploy/monitoring:
$out"
render podmonitor "${METRICS[@]}" --set metrics.podMonitor.enabled=true
out2=$($PY -m podres_test.compare_objects "$T/kustomize-mon-pm.yaml" "$T/podmonitor.yaml") ||
    fail "helm template with metrics.podMonitor.enabled differs from deploy/ with deploy/monitoring and its podmonitor:
$out2"
! grep -q '^kind: PodMonitor' "$T/metrics.yaml" "$T/defaults.yaml" || fail "a PodMonitor without metrics.podMonitor.enabled"
! grep -q 'POD_IP\|^kind: Service$' "$T/defaults.yaml" || fail "the defaults listen on the pod IP or have a Service"
ok "helm template --set metrics.enabled=true = deploy/ + the deploy/monitoring component ($out); with metrics.podMonitor.enabled = + deploy/monitoring/podmonitor ($out2); the defaults stay loopback-only"
out=$($PY - "$T/off.yaml" <<'EOF'
import sys, yaml
kinds = sorted(d["kind"] for d in yaml.safe_load_all(open(sys.argv[1])) if d)
bad = [k for k in kinds if k in ("CustomResourceDefinition", "ValidatingAdmissionPolicy", "ValidatingAdmissionPolicyBinding")]
print("rendered: %s" % bad if bad else " ".join(kinds))
sys.exit(1 if bad else 0)
EOF
) || fail "policy and CRDs off: $out"
ok "admissionPolicy.enabled=false, crds.install=false: neither rendered ($out)"

# ---- 4. the values reach the objects
out=$($PY - "$T/all-on.yaml" "$T/defaults.yaml" <<'EOF'
import sys, yaml
docs = {(d["kind"], d["metadata"]["name"]): d for d in yaml.safe_load_all(open(sys.argv[1])) if d}
dflt = {(d["kind"], d["metadata"]["name"]): d for d in yaml.safe_load_all(open(sys.argv[2])) if d}
bad = []
def need(c, what):
    if not c:
        bad.append(what)
ps = docs[("DaemonSet", "podres")]["spec"]["template"]["spec"]
cs = {c["name"]: c for c in ps["containers"]}
pd, sy = cs["podresd"], cs["podres-syncer"]
need(ps["nodeSelector"] == {"kubernetes.io/os": "linux", "podres.dev/device-node": "true"}, "nodeSelector %s" % ps.get("nodeSelector"))
need(pd["image"] == sy["image"] == "registry.example.com/podres:0.2.0", "image %s" % pd["image"])
need("--log-level=debug" in sy["command"] and "--metrics-listen=127.0.0.1:9555" in sy["command"], "syncer args %s" % sy["command"])
need(sy["readinessProbe"]["exec"]["command"][-1] == "http://127.0.0.1:9555/readyz", "syncer readiness %s" % sy["readinessProbe"])
need(sy["livenessProbe"]["exec"]["command"][-1] == "http://127.0.0.1:9555/healthz", "syncer liveness %s" % sy["livenessProbe"])
conf = yaml.safe_load(docs[("ConfigMap", "podresd-config")]["data"]["podresd.yaml"])
need(conf["log_level"] == "debug" and conf["write_token_file"] == "/etc/podres-token/token", "config %s" % conf)
vols = {v["name"]: v for v in ps["volumes"]}
need(vols.get("write-token", {}).get("secret") == {"secretName": "podres-write-token", "defaultMode": 0o400,
     "items": [{"key": "token", "path": "token"}]}, "write-token volume %s" % vols.get("write-token"))
need({"name": "write-token", "mountPath": "/etc/podres-token", "readOnly": True} in pd["volumeMounts"], "write-token mount")
need(("Deployment", "podres-scheduler") in docs, "the scheduler Deployment")
ann = docs[("DaemonSet", "podres")]["spec"]["template"]["metadata"]["annotations"]["checksum/config"]
need(ann != dflt[("DaemonSet", "podres")]["spec"]["template"]["metadata"]["annotations"]["checksum/config"],
     "a config change changes the pod template (checksum/config)")
crd = dflt[("CustomResourceDefinition", "devicebindings.podres.dev")]["metadata"]
need(crd.get("annotations") == {"helm.sh/resource-policy": "keep"}, "CRD keep annotation %s" % crd)
print("\n".join(bad) if bad else "ok")
sys.exit(1 if bad else 0)
EOF
) || fail "values: $out"
ok "values reach the objects: image, nodeSelector, log level, metrics address (args and probes), write token (Secret volume 0400, config), extender; a config change rolls the pods; CRDs kept on uninstall"

# the rendered podresd configuration starts podresd (paths moved to $T; api source)
$PY -c 'import sys, yaml
for d in yaml.safe_load_all(open(sys.argv[1])):
    if d and d["kind"] == "ConfigMap" and d["metadata"]["name"] == "podresd-config":
        print(d["data"]["podresd.yaml"])' "$T/all-on.yaml" > "$T/podresd.chart.yaml"
grep -q '^write_token_file: /etc/podres-token/token$' "$T/podresd.chart.yaml" || fail "no write_token_file: $(cat "$T/podresd.chart.yaml")"
sed "s|^write_token_file: .*|write_token_file: $T/token|" "$T/podresd.chart.yaml" > "$T/podresd.yaml"
(umask 077 && echo "$RANDOM$RANDOM$RANDOM" > "$T/token")
"$PODRES_BIN/podresd" --config "$T/podresd.yaml" --db "$T/db/p.db" --socket "$T/run/p.sock" \
    --listen 127.0.0.1:0 --source api > "$T/podresd.log" 2>&1 &
PD_PID=$!
PIDS+=("$PD_PID")
wait_until 10 curl -sf --unix-socket "$T/run/p.sock" http://localhost/healthz || fail "podresd on the chart's config"
kill -TERM "$PD_PID"
wait "$PD_PID" || fail "podresd on the chart's config exited $?"
ok "podresd starts on the chart's configuration (write token, debug log) and exits 0 on SIGTERM"

# ---- 5. the README's kustomize overlay for device nodes: deploy/ on labelled nodes only
mkdir -p "$T/my-podres"
awk '/^# my-podres\/kustomization.yaml/ { on = 1 } on && /^```/ { exit } on' README.md |
    sed "s|^- ../podres/deploy .*|- $(realpath --relative-to="$T/my-podres" deploy)|" > "$T/my-podres/kustomization.yaml"
grep -q '^patches:' "$T/my-podres/kustomization.yaml" || fail "no device-node overlay in the README"
out=$(k kustomize "$T/my-podres" | $PY -c 'import sys, json, yaml
for d in yaml.safe_load_all(sys.stdin):
    if d and d["kind"] == "DaemonSet":
        print(json.dumps(d["spec"]["template"]["spec"]["nodeSelector"], sort_keys=True))')
[ "$out" = '{"kubernetes.io/os": "linux", "podres.dev/device-node": "true"}' ] || fail "device-node overlay: nodeSelector $out"
out=$(k apply --server-side --dry-run=server -k "$T/my-podres" 2>&1) || fail "device-node overlay: $out"
! grep -qi warning <<<"$out" || fail "device-node overlay: $out"
ok "the README's device-node overlay: nodeSelector kubernetes.io/os=linux and podres.dev/device-node=true, accepted by the server"

# ---- 6. helm install, upgrade, uninstall against the API server
hk() { h --kubeconfig "$KCFG" -n podres-system "$@"; }
out=$(hk install podres "$CH" --set extender.enabled=true 2>&1) || fail "helm install: $out"
k get ds/podres deploy/podres-scheduler cm/podresd-config -n podres-system -o name > /dev/null ||
    fail "helm install: objects missing"
k wait --for condition=Established --timeout 30s crd/devicebindings.podres.dev crd/nodedevices.podres.dev > /dev/null ||
    fail "helm install: CRDs not Established"
gen=$(k get ds podres -n podres-system -o jsonpath='{.metadata.generation}')
out=$(hk upgrade podres "$CH" --reset-then-reuse-values --set logLevel=debug 2>&1) || fail "helm upgrade: $out"
cmd=$(k get ds podres -n podres-system -o json | jq -r '.spec.template.spec.containers[1].command | join(" ")')
grep -q -- '--log-level=debug' <<<"$cmd" || fail "helm upgrade: syncer command $cmd"
[ "$(k get ds podres -n podres-system -o jsonpath='{.metadata.generation}')" -gt "$gen" ] || fail "helm upgrade did not change the DaemonSet"
k get cm podresd-config -n podres-system -o jsonpath='{.data.podresd\.yaml}' | grep -q '^log_level: debug$' ||
    fail "helm upgrade: the ConfigMap"
k get deploy podres-scheduler -n podres-system -o name > /dev/null || fail "helm upgrade --reset-then-reuse-values lost the extender"
out=$(hk uninstall podres 2>&1) || fail "helm uninstall: $out"
wait_until 30 sh -c "! $KUBECTL --kubeconfig $KCFG get ds/podres -n podres-system" || fail "helm uninstall left the DaemonSet"
for o in deploy/podres-scheduler cm/podresd-config sa/podres-syncer; do
    ! k get "$o" -n podres-system > /dev/null 2>&1 || fail "helm uninstall left $o"
done
! k get clusterrole podres-syncer > /dev/null 2>&1 || fail "helm uninstall left the ClusterRole"
! k get validatingadmissionpolicy podres-syncer-node-scope > /dev/null 2>&1 || fail "helm uninstall left the policy"
k get crd devicebindings.podres.dev nodedevices.podres.dev -o name > /dev/null || fail "helm uninstall deleted the CRDs"
ok "helm install (extender on), upgrade --reset-then-reuse-values --set logLevel=debug (DaemonSet and ConfigMap changed), uninstall (all gone but the CRDs, kept)"
