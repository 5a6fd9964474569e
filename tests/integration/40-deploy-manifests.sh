#!/usr/bin/env bash
# deploy/ (issue 7) against a real control plane (tests/kube/cluster: kube-apiserver, etcd and
# kube-controller-manager of the pinned release): kubectl apply -k deploy/ --server-side on an
# empty cluster, then (after delete -k) client-side apply -k, then the switch to --server-side -
# every object accepted by the real validation without a warning, applying again changes
# nothing, the CRD passes the structural-schema checks and is Established; the machine's older
# kubectl (1.32) dry-runs it; every file with --dry-run=server and then -f (examples included);
# an image change through a kustomize overlay is one strategic merge PATCH; the server refuses
# a misspelt field, a dangling volumeMount and a non-structural CRD copy; kubectl explain shows
# the CRD's field descriptions; the ClusterRole grants exactly the syncer's list (the checker is
# first shown to reject widened copies) and `kubectl auth can-i` as the ServiceAccount agrees,
# with no right beyond it (a widened copy of rbac.yaml is caught); the DaemonSet as stored by
# apps/v1 has what issue 7 asks for and its pod passes pod admission (PodSecurity privileged;
# baseline refuses the hostPaths). Without the API: every YAML parses, the kustomization lists
# every manifest and takes the CRDs from schema/ (no copy in deploy/, the same objects), both
# podresd configs are accepted by bin/podresd, the Dockerfile's stages and runtime libraries
# match `ldd`/`dpkg -S`, the systemd units pass `systemd-analyze verify` (when installed) and
# a structural check.
. "$(dirname "$0")/lib.sh"
cd "$PODRES_ROOT"
PY=/usr/bin/python3
export HOME=$T/home
mkdir -p "$HOME"
say() { echo "# $*"; }

# ---- 1. the CRDs: schema/'s files, no copy in deploy/
copies=$(ls deploy/crd-*.yaml 2>/dev/null || true)
[ -z "$copies" ] || fail "CRD copies in deploy/ (deploy/kustomization.yaml takes schema/'s): $copies"
ok "deploy/ holds no copy of schema/'s CRDs"

# ---- 2. every YAML file parses; the kustomizations list every top-level manifest
out=$($PY - <<'EOF' 2>&1
import glob, os, sys, yaml
bad = []
# (a Helm chart's templates are Go templates: 79-helm.sh renders and checks them)
files = sorted(f for f in glob.glob("deploy/**/*.yaml", recursive=True) if "/templates/" not in f)
files += sorted(glob.glob("schema/*.yaml"))
for f in files:
    try:
        docs = [d for d in yaml.safe_load_all(open(f)) if d is not None]
    except yaml.YAMLError as e:
        bad.append("%s: %s" % (f, e)); continue
    if not docs or not all(isinstance(d, dict) for d in docs):
        bad.append("%s: not a YAML mapping" % f)
    for d in docs:
        if "kind" in d and not (d.get("apiVersion") and (d.get("metadata") or {}).get("name")
                                or d["kind"] == "Kustomization"):
            bad.append("%s: %s without apiVersion or metadata.name" % (f, d["kind"]))
kust = yaml.safe_load(open("deploy/kustomization.yaml"))
top = sorted(os.path.basename(f) for f in glob.glob("deploy/*.yaml") if not f.endswith("kustomization.yaml"))
if sorted(kust.get("resources") or []) != sorted(top + ["../schema"]):
    bad.append("kustomization resources %s != manifests %s and ../schema" % (kust.get("resources"), top))
crds = sorted(os.path.basename(f) for f in glob.glob("schema/crd-*.yaml"))
skust = yaml.safe_load(open("schema/kustomization.yaml"))
if sorted(skust.get("resources") or []) != crds or len(crds) != 2:
    bad.append("schema/kustomization.yaml resources %s != the CRDs %s" % (skust.get("resources"), crds))
if kust.get("namespace") != "podres-system":
    bad.append("kustomization namespace is %r" % kust.get("namespace"))
print("\n".join(bad) if bad else "%d files" % len(files))
sys.exit(1 if bad else 0)
EOF
) || fail "deploy YAML: $out"
ok "every YAML file under deploy/ and schema/ parses ($out); deploy/kustomization.yaml lists every manifest and ../schema, schema/kustomization.yaml both CRDs"

# ---- 3. kubectl apply -k / -f against a real API server
# kube_up_bare - kube_up without the CRD and deploy/'s objects: apply -k makes them all.
kube_up_bare() {
    KDIR=$T/kube
    KUBE_OWNED=1
    "$PODRES_ROOT/tests/kube/cluster" up "$KDIR" --owner $$ > "$T/kube-up.log" 2>&1 ||
        { cat "$T/kube-up.log" >&2; fail "the control plane did not start"; }
    # shellcheck disable=SC1091
    . "$KDIR/env"
    KCFG=$KUBECONFIG
    unset KUBECONFIG
    KCURL="curl -s --cacert $KUBE_CA --cert $KDIR/pki/admin.crt --key $KDIR/pki/admin.key"
}
kube_up_bare
ADMIN=kubernetes-admin # the CN of the admin's client certificate

expect_apply() {  # expect_apply DESCRIPTION WANT_REGEX_PER_LINE COUNT kubectl-args...
    local what=$1 re=$2 n=$3 out err
    shift 3
    out=$(k "$@" 2>"$T/stderr") || fail "$what: kubectl $*: $out $(cat "$T/stderr")"
    err=$(cat "$T/stderr")
    [ -z "$err" ] || fail "$what: kubectl printed on stderr (warnings?): $err"
    [ "$(grep -c . <<<"$out")" = "$n" ] || fail "$what: want $n lines: $out"
    local extra
    extra=$(grep -Ev "$re" <<<"$out" || true)
    [ -z "$extra" ] || fail "$what: unexpected lines: $extra"
    ok "$what"
}
# rvs - kind/name and resourceVersion of every object of deploy/, one a line.
rvs() {
    k get -k deploy/ -o json | jq -r '.items[] | "\(.kind)/\(.metadata.name) \(.metadata.resourceVersion)"'
}
# audit_mark; audit_new FILTER - the admin's completed requests since audit_mark, passing FILTER.
audit_mark() { AMARK=$(wc -l < "$KUBE_AUDIT"); }
audit_new() {
    tail -n +$((AMARK + 1)) "$KUBE_AUDIT" | jq -c --arg u "$ADMIN" \
        "select(.stage == \"ResponseComplete\" and .user.username == \$u) | select(${1:-true})"
}
WRITE='(.verb | IN("create","update","patch","delete","deletecollection"))'
crd_ok() {  # the CRD is Established with its names accepted, and no condition says otherwise
    k get crd devicebindings.podres.dev -o json | jqe '[.status.conditions[] | {(.type): .status}] | add
        | .Established == "True" and .NamesAccepted == "True" and .NonStructuralSchema == null' > /dev/null
}
OBJS="namespace/podres-system customresourcedefinition.apiextensions.k8s.io/devicebindings.podres.dev
    serviceaccount/podres-syncer clusterrole.rbac.authorization.k8s.io/podres-syncer
    clusterrolebinding.rbac.authorization.k8s.io/podres-syncer configmap/podresd-config daemonset.apps/podres"

files=(deploy/namespace.yaml) # every file, the CRDs and examples included, namespaces first
for f in schema/crd-*.yaml deploy/*.yaml deploy/examples/namespace-*.yaml deploy/examples/*.yaml; do
    [[ " ${files[*]} " == *" $f "* ]] || [ "$f" = deploy/kustomization.yaml ] || files+=("$f")
done
# per_file DESCRIPTION [--server-side] - each file: apply --dry-run=server, then apply.
per_file() {
    local what=$1 mode=${2:-} f n out run sent=0
    audit_mark
    for f in "${files[@]}"; do
        n=$("$PY" -c 'import sys, yaml; print(sum(1 for d in yaml.safe_load_all(open(sys.argv[1])) if d))' "$f")
        for run in --dry-run=server ""; do
            out=$(k apply $run $mode -f "$f" 2>"$T/stderr") || fail "kubectl apply $run $mode -f $f: $out $(cat "$T/stderr")"
            [ ! -s "$T/stderr" ] || fail "kubectl apply $run $mode -f $f warned: $(cat "$T/stderr")"
            [ "$(grep -cE " (unchanged|created|serverside-applied)${run:+ \\(server dry run\\)}$" <<<"$out")" = "$n" ] ||
                fail "kubectl apply $run $mode -f $f: want $n objects: $out"
        done
        sent=$((sent + n))
    done
    # deploy/'s objects are as they were; with --server-side every dry run
    # reached the server (a client-side one of an unchanged object sends nothing).
    rvs > "$T/rv.c"
    cmp -s "$T/rv.b" "$T/rv.c" || fail "$what: applying the unchanged deploy/ files wrote: $(diff "$T/rv.b" "$T/rv.c")"
    if [ -n "$mode" ]; then
        n=$(audit_new "(.requestURI | contains(\"dryRun=All\")) and .verb == \"patch\" and .responseStatus.code < 300" | wc -l)
        [ "$n" = "$sent" ] || fail "$what: $n server-side dry-run applies answered 2xx, want $sent"
    fi
    out=$(k get dvb -n ml -o json | jq -r '.items[] | .metadata.name + " " + .spec.nodeName + " "
          + ([.spec.containers[].devices[].deviceIds[]] | join(","))')
    [ "$out" = "train-0 node-a GPU-0b1c2d3e,GPU-4f5a6b7c,nic-1" ] || fail "$what: pre-assignment example: $out"
    ok "$what: every file (${#files[@]}, examples included) with --dry-run=server, then for real, without error or warning; the pre-assignment example is a DeviceBinding with spec.containers"
}

# -- Server-side apply on an empty cluster: each object sent whole and validated.
k kustomize deploy/ > "$T/kustomize.yaml" || fail "kubectl kustomize deploy/"
NOBJ=$(grep -c '^kind:' "$T/kustomize.yaml")
[ "$NOBJ" -ge 8 ] || fail "kubectl kustomize deploy/ gave $NOBJ objects"
out=$($PY - "$T/kustomize.yaml" schema/crd-*.yaml <<'EOF' 2>&1
import sys, yaml
got = [d for d in yaml.safe_load_all(open(sys.argv[1])) if d and d["kind"] == "CustomResourceDefinition"]
want = [yaml.safe_load(open(f)) for f in sys.argv[2:]]
key = lambda d: d["metadata"]["name"]
if sorted(got, key=key) != sorted(want, key=key):
    print("the CRDs kubectl kustomize deploy/ gives are not schema/'s: %s" % [key(d) for d in got])
    sys.exit(1)
print(" ".join(sorted(key(d) for d in got)))
EOF
) || fail "$out"
ok "kubectl kustomize deploy/ gives schema/'s CRDs unchanged ($out)"
expect_apply "kubectl apply -k deploy/ --server-side creates all $NOBJ objects without warnings" \
    '^[a-z0-9.]+/[a-z0-9.-]+ serverside-applied$' "$NOBJ" apply -k deploy/ --server-side
k wait --for condition=Established --timeout 30s crd/devicebindings.podres.dev > /dev/null ||
    fail "the DeviceBinding CRD is not Established: $(k get crd devicebindings.podres.dev -o json | jq -c .status)"
crd_ok || fail "CRD conditions: $(k get crd devicebindings.podres.dev -o json | jq -c .status.conditions)"
rvs > "$T/rv.a"
expect_apply "apply -k --server-side again" ' serverside-applied$' "$NOBJ" apply -k deploy/ --server-side
rvs > "$T/rv.b"
cmp -s "$T/rv.a" "$T/rv.b" || fail "apply -k --server-side again wrote: $(diff "$T/rv.a" "$T/rv.b")"
ok "... the CRD passes the structural-schema checks and is Established; applying again writes nothing"
per_file "kubectl apply --server-side -f" --server-side

# The machine's older kubectl (1.32, beyond the supported skew of a 1.36 server).
OLD_KUBECTL=/usr/bin/kubectl
if [ -x "$OLD_KUBECTL" ]; then
    oldv=$("$OLD_KUBECTL" version --client -o json | jq -r .clientVersion.gitVersion)
    audit_mark
    KUBECTL=$OLD_KUBECTL expect_apply "kubectl $oldv apply -k deploy/ --server-side --dry-run=server" \
        ' serverside-applied \(server dry run\)$' "$NOBJ" apply -k deploy/ --server-side --dry-run=server
    n=$(audit_new "$WRITE and (.userAgent | startswith(\"kubectl/${oldv%%-*} \"))
        and (.requestURI | contains(\"dryRun=All\")) and .responseStatus.code == 200" | wc -l)
    [ "$n" = "$NOBJ" ] || fail "want $NOBJ dry-run applies answered 200 from kubectl $oldv, saw $n: $(audit_new "$WRITE")"
    wet=$(audit_new "$WRITE and (.requestURI | contains(\"dryRun=All\") | not)")
    [ -z "$wet" ] || fail "a dry run wrote: $wet"
    ok "... the server validated its $NOBJ dry-run applies (audit log: user agent kubectl/${oldv%%-*}), nothing written"
else
    say "no $OLD_KUBECTL: the older client is not tried"
fi
k delete namespace ml --wait=false > /dev/null || fail "cannot delete namespace ml"
out=$(k delete -k deploy/ --wait --timeout 60s 2>&1) || fail "kubectl delete -k deploy/: $out"
k wait --for=delete namespace/ml --timeout 60s > /dev/null 2>&1 || fail "namespace ml is not deleted"

# -- Client-side apply (kubectl's default) on the empty cluster.
expect_apply "kubectl apply -k deploy/ creates all $NOBJ objects without warnings" \
    '^[a-z0-9.]+/[a-z0-9.-]+ created$' "$NOBJ" apply -k deploy/
for want in $OBJS; do
    k get "$want" -n podres-system -o name >/dev/null || fail "apply -k: $want is not there"
done
ok "kubectl get finds every applied object"
k wait --for condition=Established --timeout 30s crd/devicebindings.podres.dev > /dev/null && crd_ok ||
    fail "CRD conditions after apply -k: $(k get crd devicebindings.podres.dev -o json | jq -c .status.conditions)"
rvs > "$T/rv.a"
expect_apply "apply -k again: all unchanged" ' unchanged$' "$NOBJ" apply -k deploy/
rvs > "$T/rv.b"
cmp -s "$T/rv.a" "$T/rv.b" || fail "apply -k again wrote: $(diff "$T/rv.a" "$T/rv.b")"
if [ -x "$OLD_KUBECTL" ]; then
    KUBECTL=$OLD_KUBECTL expect_apply "kubectl $oldv apply -k deploy/ --dry-run=server: all unchanged" \
        ' unchanged \(server dry run\)$' "$NOBJ" apply -k deploy/ --dry-run=server
fi
per_file "kubectl apply -f"

# an image change through a kustomize overlay goes out as a strategic merge patch
mkdir -p "$T/overlay"
cat >"$T/overlay/kustomization.yaml" <<EOF
apiVersion: kustomize.config.k8s.io/v1beta1
kind: Kustomization
resources:
- $(realpath --relative-to="$T/overlay" deploy)
images:
- name: podres
  newName: registry.example.com/podres
  newTag: 0.2.0
EOF
audit_mark
out=$(k apply -k "$T/overlay" -v=9 2>"$T/overlay.log") || fail "overlay apply: $out $(tail -5 "$T/overlay.log")"
grep -q '^daemonset.apps/podres configured$' <<<"$out" && [ "$(grep -c ' unchanged$' <<<"$out")" = $((NOBJ - 1)) ] \
    || fail "overlay apply: $out"
w=$(audit_new "$WRITE")
jq -se 'length == 1 and .[0].verb == "patch" and .[0].objectRef.resource == "daemonsets"
    and .[0].responseStatus.code == 200' <<<"$w" > /dev/null || fail "the overlay's writes: $w"
grep -- '-XPATCH' "$T/overlay.log" | grep -q 'Content-Type: application/strategic-merge-patch+json' ||
    fail "the image change was not a strategic merge PATCH: $(grep -- '-XPATCH' "$T/overlay.log")"
out=$(k get ds podres -n podres-system -o json | jq -r '[.spec.template.spec.containers[]
      | "\(.name)=\(.image):\(.volumeMounts | length)"] | join(" ")')
[ "$out" = "podresd=registry.example.com/podres:0.2.0:5 podres-syncer=registry.example.com/podres:0.2.0:1" ] \
    || fail "after the overlay: $out"
ok "an image change via a kustomize overlay: one strategic merge PATCH, both containers kept whole"

# the server checks what it is sent: a typo, a dangling mount, a non-structural CRD are refused
sed 's/readOnlyRootFilesystem/readOnlyRootFileSystem/' deploy/daemonset.yaml >"$T/typo.yaml"
out=$(k apply -f "$T/typo.yaml" 2>&1) && fail "a DaemonSet with a misspelt field was accepted: $out"
grep -q 'unknown field "spec.template.spec.containers\[0\].securityContext.readOnlyRootFileSystem"' <<<"$out" \
    || fail "typo: $out"
perl -0pe 's/- name: tmp\n(\s+)emptyDir/- name: scratch\n$1emptyDir/; s/\n  name: podres\n/\n  name: podres-bad\n/' \
    deploy/daemonset.yaml >"$T/dangling.yaml"
grep -q 'name: scratch' "$T/dangling.yaml" || fail "could not make the dangling-mount copy"
out=$(k apply -f "$T/dangling.yaml" 2>&1) && fail "a dangling volumeMount was accepted: $out"
grep -q 'volumeMounts\[4\].name: Not found: "tmp"' <<<"$out" || fail "dangling mount: $out"
perl -0pe 's/(\n          spec:\n(?:            description:.*\n)?)            type: object\n/$1/' \
    schema/crd-devicebinding.yaml >"$T/nonstructural.yaml"
cmp -s schema/crd-devicebinding.yaml "$T/nonstructural.yaml" && fail "could not make the non-structural CRD copy"
out=$(k apply --dry-run=server -f "$T/nonstructural.yaml" 2>&1) && fail "a non-structural CRD was accepted: $out"
grep -q 'openAPIV3Schema.properties\[spec\].type: Required value' <<<"$out" || fail "non-structural CRD: $out"
ok "the server refuses a misspelt field (strict field validation), a mount of a missing volume and a non-structural CRD"

# -- The switch from client-side to server-side apply (of the overlay: the image stays).
expect_apply "kubectl apply -k --server-side then takes the objects over without a conflict or warning" \
    ' serverside-applied$' "$NOBJ" apply -k "$T/overlay" --server-side
rvs > "$T/rv.a"
expect_apply "apply -k --server-side again" ' serverside-applied$' "$NOBJ" apply -k "$T/overlay" --server-side
rvs > "$T/rv.b"
cmp -s "$T/rv.a" "$T/rv.b" || fail "apply -k --server-side again wrote: $(diff "$T/rv.a" "$T/rv.b")"
ok "... and once taken over, applying again writes nothing"

# kubectl explain: the CRD's published OpenAPI schema, descriptions included
wait_until 30 k explain devicebinding.spec || fail "kubectl explain devicebinding.spec: $(k explain devicebinding.spec 2>&1)"
for p in spec spec.containers; do
    k explain "devicebinding.$p" >"$T/explain.$p" 2>&1 || fail "kubectl explain devicebinding.$p: $(cat "$T/explain.$p")"
    out=$($PY - schema/crd-devicebinding.yaml "$p" "$T/explain.$p" <<'EOF' 2>&1
import re, sys, yaml
crd, path, text = yaml.safe_load(open(sys.argv[1])), sys.argv[2], open(sys.argv[3]).read()
node = crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
for part in path.split("."):
    node = node["properties"][part]
    node = node.get("items", node) if part != path.split(".")[-1] else node
fields = (node.get("items") or node).get("properties") or {}
required = set((node.get("items") or node).get("required") or [])
flat = " ".join(text.split())
bad = []
if not node.get("description"):
    bad.append("%s has no description in the CRD" % path)
elif " ".join(node["description"].split()) not in flat:
    bad.append("description of %s not shown" % path)
for name, f in fields.items():
    m = re.search(r"^  %s\t<[^>]+>( -required-)?$" % re.escape(name), text, re.M)
    if not m:
        bad.append("field %s not listed" % name)
    elif bool(m.group(1)) != (name in required):
        bad.append("field %s: -required- is %s" % (name, bool(m.group(1))))
    if f.get("description") and " ".join(f["description"].split()) not in flat:
        bad.append("description of %s.%s not shown" % (path, name))
print("\n".join(bad) if bad else "%d fields" % len(fields))
sys.exit(1 if bad else 0)
EOF
) || fail "kubectl explain devicebinding.$p: $out
$(cat "$T/explain.$p")"
    explained="${explained:+$explained, }$p ($out)"
done
ok "kubectl explain devicebinding: $explained, with the CRD's descriptions and required fields"

# ---- 4. least privilege: the ClusterRole as stored by the API server, and what the syncer may do
k get clusterrole podres-syncer -o json >"$T/role.json"
out=$($PY -m podres_test.rbac_check "$T/role.json" selftest) || fail "least-privilege checker self-test: $out"
ok "least-privilege checker: $out"
out=$($PY -m podres_test.rbac_check "$T/role.json") || fail "ClusterRole podres-syncer is not least privilege: $out"
ok "ClusterRole podres-syncer grants exactly devicebindings{,/status} get/list/watch/create/update/patch/delete, pods get/list/watch, nodes get, nodedevices get/list/watch/create, nodedevices/status patch, events create/patch and resourceslices get/list/watch"
# (deploy/scheduler/ is another kustomization, with the extender's own identity)
n=$(grep -lE '^kind: *(Role|ClusterRole|RoleBinding|ClusterRoleBinding)$' deploy/*.yaml | wc -l)
[ "$n" = 1 ] || fail "RBAC objects outside deploy/rbac.yaml: $(grep -lE '^kind: *(Role|ClusterRole|RoleBinding)' deploy/*.yaml)"
k get clusterrolebinding podres-syncer -o json | jqe '.roleRef == {"apiGroup":"rbac.authorization.k8s.io",
    "kind":"ClusterRole","name":"podres-syncer"} and .subjects == [{"kind":"ServiceAccount",
    "name":"podres-syncer","namespace":"podres-system"}]' >/dev/null || fail "ClusterRoleBinding subjects/roleRef"
ok "the binding gives that role to ServiceAccount podres-system/podres-syncer only; no other RBAC object"
SA=system:serviceaccount:podres-system:podres-syncer
# can SA_OR_USER VERB RESOURCE [kubectl auth can-i FLAGS...] - yes (0) or no (1), nothing on stderr.
can() {
    local who=$1 verb=$2 res=$3 out rc=0
    shift 3
    out=$(k auth can-i "$verb" "$res" --as="$who" "$@" 2>"$T/stderr") || rc=$?
    [ ! -s "$T/stderr" ] || fail "kubectl auth can-i $verb $res $*: $(cat "$T/stderr")"
    case $rc:$out in 0:yes) return 0 ;; 1:no) return 1 ;; esac
    fail "kubectl auth can-i $verb $res $*: rc $rc, $out"
}
for verb in get list watch create update patch delete; do
    for sub in "" status; do
        can "$SA" "$verb" devicebindings.podres.dev -n ml ${sub:+--subresource=$sub} ||
            fail "the syncer cannot $verb devicebindings${sub:+/$sub} in ml"
    done
done
for verb in get list watch; do
    can "$SA" "$verb" devicebindings -A || fail "the syncer cannot $verb devicebindings cluster-wide"
    can "$SA" "$verb" pods -A || fail "the syncer cannot $verb pods cluster-wide"
done
can "$SA" get nodes -A || fail "the syncer cannot get nodes"
for verb in get list watch create; do
    can "$SA" "$verb" nodedevices.podres.dev -A || fail "the syncer cannot $verb nodedevices"
done
can "$SA" patch nodedevices.podres.dev -A --subresource=status || fail "the syncer cannot patch nodedevices/status"
for verb in create patch; do
    can "$SA" "$verb" events.events.k8s.io -n ml || fail "the syncer cannot $verb events"
done
for verb in get list watch; do
    can "$SA" "$verb" resourceslices.resource.k8s.io -A || fail "the syncer cannot $verb resourceslices"
done
nos=0
while read -r verb res flags; do
    # shellcheck disable=SC2086
    can "$SA" "$verb" "$res" $flags && fail "the syncer can $verb $res $flags"
    nos=$((nos + 1))
done <<'EOF'
create pods -n ml
update pods -n ml
delete pods -n ml
patch pods -n ml --subresource=status
create pods -n ml --subresource=eviction
list secrets -A
get secrets -n podres-system
list nodes -A
watch nodes -A
patch nodes -A
create events -n ml
list events.events.k8s.io -n ml
delete events.events.k8s.io -n ml
deletecollection devicebindings -n ml
create resourceslices.resource.k8s.io -A
update resourceslices.resource.k8s.io -A
delete resourceslices.resource.k8s.io -A
list resourceclaims.resource.k8s.io -A
delete nodedevices.podres.dev -A
update nodedevices.podres.dev -A
patch nodedevices.podres.dev -A
update nodedevices.podres.dev -A --subresource=status
get configmaps -n podres-system
create serviceaccounts -n podres-system --subresource=token
impersonate serviceaccounts -A
escalate clusterroles -A
EOF
ok "kubectl auth can-i as $SA: yes to get/list/watch/create/update/patch/delete devicebindings{,/status}, get/list/watch pods, get nodes, get/list/watch/create nodedevices and patch their status, create/patch events, get/list/watch resourceslices; no to all $nos others tried (create pods, list secrets, list nodes, core events, write resourceslices, ...)"

# rights USER NS - what USER may do in NS (kubectl auth can-i --list), one normalized rule a line.
rights() {
    k auth can-i --list --as="$1" -n "$2" | tail -n +2 | $PY -c '
import re, sys
for line in sys.stdin:
    print(line.split("[")[0].strip(), *["[%s]" % " ".join(sorted(g.split())) for g in re.findall(r"\[([^]]*)\]", line)])' |
        sort -u
}
WANT_RIGHTS='devicebindings.podres.dev [] [] [create delete get list patch update watch]
devicebindings.podres.dev/status [] [] [create delete get list patch update watch]
events.events.k8s.io [] [] [create patch]
nodedevices.podres.dev [] [] [create get list watch]
nodedevices.podres.dev/status [] [] [patch]
nodes [] [] [get]
pods [] [] [get list watch]
resourceslices.resource.k8s.io [] [] [get list watch]'
# rights_exact NS - the syncer's rights in NS beyond those of any ServiceAccount
# (podres-system/default's) are exactly WANT_RIGHTS; else print the difference.
rights_exact() {
    local extra
    extra=$(comm -23 <(rights "$SA" "$1") <(rights system:serviceaccount:podres-system:default "$1"))
    [ "$extra" = "$WANT_RIGHTS" ] && return 0
    diff <(echo "$WANT_RIGHTS") <(echo "$extra") | grep '^[<>]'
    return 1
}
not() { ! "$@"; }
for ns in podres-system ml default; do
    out=$(rights_exact "$ns") || fail "the syncer's rights in namespace $ns (< missing, > extra): $out"
done
# The check is shown to catch a widened copy of deploy/rbac.yaml (bound, then removed).
$PY - deploy/rbac.yaml >"$T/rbac-widened.yaml" <<'EOF'
import sys, yaml
docs = [d for d in yaml.safe_load_all(open(sys.argv[1])) if d]
for d in docs:
    d["metadata"]["name"] += "-widened"
    if d["kind"] == "ClusterRole":
        d["rules"].append({"apiGroups": [""], "resources": ["secrets"], "verbs": ["list"]})
    else:
        d["roleRef"]["name"] += "-widened"
yaml.safe_dump_all(docs, sys.stdout)
EOF
k apply -f "$T/rbac-widened.yaml" > /dev/null || fail "cannot apply the widened copy"
wait_until 10 not rights_exact podres-system || fail "the rights check did not see the widened copy"
out=$(rights_exact ml || true)
grep -q '^> secrets \[\] \[\] \[list\]$' <<<"$out" || fail "the widened copy: $out"
k delete -f "$T/rbac-widened.yaml" > /dev/null || fail "cannot delete the widened copy"
wait_until 10 rights_exact podres-system || fail "rights after the widened copy is gone: $(rights_exact podres-system)"
ok "kubectl auth can-i --list: in podres-system, ml and default the syncer may do exactly that beyond any ServiceAccount (a widened copy of rbac.yaml is caught)"

# ---- 4b. deploy/scheduler: the second scheduler with podres-extender, validated by the server
out=$(k apply -k deploy/scheduler --server-side --dry-run=server 2>&1) ||
    fail "kubectl apply -k deploy/scheduler --dry-run=server: $out"
! grep -qi warning <<<"$out" || fail "deploy/scheduler: $out"
[ "$(grep -c 'serverside-applied (server dry run)$' <<<"$out")" = "$(k kustomize deploy/scheduler | grep -c '^kind:')" ] ||
    fail "deploy/scheduler: $out"
ok "kubectl apply -k deploy/scheduler --server-side --dry-run=server: every object accepted, no warning"

# ---- 5. the DaemonSet as stored (after the overlay: only the image differs)
k get ds podres -n podres-system -o json >"$T/ds.json"
k get cm podresd-config -n podres-system -o json >"$T/cm.json"
out=$($PY - "$T/ds.json" "$T/cm.json" <<'EOF' 2>&1
import json, sys, yaml
ds, cm = json.load(open(sys.argv[1])), json.load(open(sys.argv[2]))
bad = []
def need(cond, what):
    if not cond:
        bad.append(what)
ps = ds["spec"]["template"]["spec"]
cs = {c["name"]: c for c in ps["containers"]}
need(list(cs) == ["podresd", "podres-syncer"], "containers %s" % list(cs))
need(ps.get("serviceAccountName") == "podres-syncer", "serviceAccountName")
for f in ("hostNetwork", "hostPID", "hostIPC"):
    need(not ps.get(f), f)
vols = {v["name"]: v for v in ps["volumes"]}
hp = {v["hostPath"]["path"]: n for n, v in vols.items() if "hostPath" in v}
for p in ("/var/lib/kubelet/pod-resources", "/var/lib/podresd", "/run/podresd"):
    need(p in hp, "hostPath %s" % p)
need(set(hp) == {"/var/lib/kubelet/pod-resources", "/var/lib/podresd", "/run/podresd"},
     "hostPaths beyond the three: %s" % sorted(hp))
conf = yaml.safe_load(cm["data"]["podresd.yaml"])
need(conf.get("source") == "kubelet", "config source %r" % conf.get("source"))
sock = conf["socket"]
sockdir = sock.rsplit("/", 1)[0]
def mounts(c):
    return {m["mountPath"]: m for m in c.get("volumeMounts") or []}
pd, sy = cs["podresd"], cs["podres-syncer"]
need(mounts(pd).get(sockdir, {}).get("name") == hp["/run/podresd"] == mounts(sy).get(sockdir, {}).get("name"),
     "both containers mount the socket dir %s" % sockdir)
need(mounts(pd).get("/var/lib/kubelet/pod-resources", {}).get("name") == hp["/var/lib/kubelet/pod-resources"],
     "podresd mounts the kubelet pod-resources dir")
need(conf["db"].startswith(next((p for p, m in mounts(pd).items() if m["name"] == hp["/var/lib/podresd"]), "?") + "/"),
     "the database is on the hostPath /var/lib/podresd")
cfgmount = next((p for p, m in mounts(pd).items()
                 if vols[m["name"]].get("configMap", {}).get("name") == cm["metadata"]["name"]), None)
need(cfgmount and pd["command"][-2:] == ["--config", cfgmount + "/podresd.yaml"],
     "podresd reads the ConfigMap: %s %s" % (cfgmount, pd.get("command")))
need("--podresd-socket=" + sock in sy["command"], "syncer --podresd-socket=%s" % sock)
need("--metrics-listen=127.0.0.1:9445" in sy["command"], "syncer --metrics-listen")
need(pd["image"] == sy["image"], "one image")
for n, c in cs.items():
    env = {e["name"]: e for e in c.get("env") or []}
    need(env.get("NODE_NAME", {}).get("valueFrom", {}).get("fieldRef", {}).get("fieldPath") == "spec.nodeName",
         "%s: NODE_NAME from the downward API" % n)
    for pr in ("livenessProbe", "readinessProbe"):
        p = c.get(pr) or {}
        need("exec" in p and "httpGet" not in p, "%s: %s is an exec probe" % (n, pr))
    r = c.get("resources") or {}
    for kind in ("requests", "limits"):
        need(set(r.get(kind) or {}) >= {"cpu", "memory"}, "%s: resources.%s cpu and memory" % (n, kind))
    sc = c.get("securityContext") or {}
    need(sc.get("readOnlyRootFilesystem") is True, "%s: readOnlyRootFilesystem" % n)
    need(sc.get("allowPrivilegeEscalation") is False, "%s: allowPrivilegeEscalation false" % n)
    need(not sc.get("privileged"), "%s: not privileged" % n)
    need((sc.get("capabilities") or {}).get("drop") == ["ALL"] and not (sc.get("capabilities") or {}).get("add"),
         "%s: drops ALL capabilities, adds none" % n)
    for m in (c.get("volumeMounts") or []):
        if vols[m["name"]].get("hostPath", {}).get("path") == "/var/lib/kubelet/pod-resources":
            need(m.get("readOnly") is True, "%s: the kubelet dir is mounted read-only" % n)
lp, rp = pd["livenessProbe"]["exec"]["command"], pd["readinessProbe"]["exec"]["command"]
need(lp[-1].endswith("/healthz") and sock in lp, "podresd liveness: /healthz on the socket: %s" % lp)
need(rp[-1].endswith("/readyz") and sock in rp, "podresd readiness: /readyz on the socket: %s" % rp)
need(sy["livenessProbe"]["exec"]["command"][-1] == "http://127.0.0.1:9445/healthz", "syncer liveness")
need(sy["readinessProbe"]["exec"]["command"][-1] == "http://127.0.0.1:9445/readyz", "syncer readiness: /readyz")
need(sy["securityContext"].get("runAsNonRoot") is True and sy["securityContext"].get("runAsUser", 0) != 0,
     "the syncer runs as non-root")
need(pd["securityContext"].get("runAsGroup") == sy["securityContext"].get("runAsGroup"),
     "podresd's group (owner group of its 0660 socket) is the syncer's group")
print("\n".join(bad) if bad else "ok")
sys.exit(1 if bad else 0)
EOF
) || fail "DaemonSet: $out"
ok "DaemonSet: 3 hostPaths, source kubelet, shared socket dir, NODE_NAME, exec probes, requests/limits, read-only root, no capabilities, non-root syncer"
# apps/v1 validated, defaulted and stored it (no kubelet and no DaemonSet controller: the
# object is checked, not pods): one spec change since its creation, the overlay's.
k get ds podres -n podres-system -o json | jqe '.metadata.generation == 2 and .spec.revisionHistoryLimit == 10
    and .spec.updateStrategy.rollingUpdate.maxSurge == 0 and .spec.template.spec.dnsPolicy == "ClusterFirst"
    and .spec.template.spec.schedulerName == "default-scheduler"
    and ([.spec.template.spec.containers[].terminationMessagePolicy] == ["File", "File"])' > /dev/null ||
    fail "the stored DaemonSet: $(k get ds podres -n podres-system -o json | jq -c '{generation: .metadata.generation, spec: (.spec | del(.template))}')"
# The pod it would make passes pod admission in podres-system (Pod Security
# "privileged", system-node-critical resolved, its ServiceAccount found), and
# a "baseline" namespace refuses it for the three hostPath volumes alone.
pod_of() {  # pod_of NS - the DaemonSet's pod for node-a in NS, as JSON
    jq --arg ns "$1" '{apiVersion: "v1", kind: "Pod", metadata: {name: "podres-node-a", namespace: $ns,
        labels: .spec.template.metadata.labels}, spec: (.spec.template.spec + {nodeName: "node-a"})}' "$T/ds.json"
}
pod_of podres-system >"$T/pod.json"
out=$(k create --dry-run=server -o json -f "$T/pod.json" 2>"$T/stderr") || fail "the DaemonSet's pod in podres-system: $out $(cat "$T/stderr")"
[ ! -s "$T/stderr" ] || fail "the DaemonSet's pod in podres-system: warnings: $(cat "$T/stderr")"
jqe '.spec.priority == 2000001000 and .spec.serviceAccountName == "podres-syncer"' <<<"$out" > /dev/null ||
    fail "the DaemonSet's pod as admitted: $(jq -c '{priority: .spec.priority, sa: .spec.serviceAccountName}' <<<"$out")"
# Its syncer's token is the projected service-account token (bound to the pod by the kubelet,
# so it carries the node's name: deploy/admission-node-scope.yaml relies on it).
jqe '.spec.automountServiceAccountToken == true
    and any(.spec.volumes[]; (.name | startswith("kube-api-access-"))
        and any(.projected.sources[]?; .serviceAccountToken.path == "token" and .serviceAccountToken.expirationSeconds > 0))
    and any(.spec.containers[] | select(.name == "podres-syncer") | .volumeMounts[];
        (.name | startswith("kube-api-access-")) and .mountPath == "/var/run/secrets/kubernetes.io/serviceaccount")' \
    <<<"$out" > /dev/null || fail "the DaemonSet's pod as admitted has no projected token for the syncer: $(jq -c '.spec.volumes' <<<"$out")"
k create namespace podres-baseline > /dev/null && k label namespace podres-baseline pod-security.kubernetes.io/enforce=baseline > /dev/null &&
    k create serviceaccount podres-syncer -n podres-baseline > /dev/null || fail "cannot make namespace podres-baseline"
pod_of podres-baseline >"$T/pod-baseline.json"
out=$(k create --dry-run=server -f "$T/pod-baseline.json" 2>&1) && fail "a baseline namespace admitted the DaemonSet's pod: $out"
grep -q 'violates PodSecurity "baseline:latest": hostPath volumes (volumes "pod-resources", "db", "socket-dir")$' <<<"$out" ||
    fail "the DaemonSet's pod in a baseline namespace: $out"
ok "DaemonSet as stored by apps/v1 (defaulted, generation 2); its pod passes pod admission in podres-system (the syncer gets the projected, pod-bound service-account token), and baseline refuses only its hostPaths"

# ---- 6. the configurations are accepted by podresd
check_config() {  # check_config FILE [YAML-KEY]: start podresd on it (paths moved to $T)
    local f=$1 key=${2:-} d=$T/cfg.$RANDOM pid i
    mkdir -p "$d"
    if [ -n "$key" ]; then
        $PY -c 'import sys,yaml; print(yaml.safe_load(open(sys.argv[1]))["data"][sys.argv[2]])' "$f" "$key" >"$d/c.yaml"
    else
        cp "$f" "$d/c.yaml"
    fi
    # --source api: flags win over the file; the kubelet source is not in every build.
    "$PD" --config "$d/c.yaml" --db "$d/db/p.db" --socket "$d/run/p.sock" --listen 127.0.0.1:0 \
        --source api >"$d/log" 2>&1 &
    pid=$!
    PIDS+=("$pid")
    for i in $(seq 100); do
        curl -sf --unix-socket "$d/run/p.sock" http://localhost/healthz >/dev/null 2>&1 && break
        kill -0 "$pid" 2>/dev/null || fail "podresd refused $f: $(cat "$d/log")"
        sleep 0.05
    done
    curl -sf --unix-socket "$d/run/p.sock" http://localhost/healthz >/dev/null || fail "podresd on $f: $(cat "$d/log")"
    kill -TERM "$pid"
    wait "$pid" || fail "podresd on $f exited $?"
}
PD=${PODRES_BIN:-bin}/podresd
[ -x "$PD" ] || fail "$PD not built"
check_config deploy/configmap.yaml podresd.yaml
check_config deploy/systemd/podresd.yaml
ok "podresd starts on the ConfigMap's configuration and on deploy/systemd/podresd.yaml"
SY=${PODRES_BIN:-bin}/podres-syncer
if [ -x "$SY" ]; then
    help=$("$SY" --help 2>&1 || true)
    for f in $( (grep -o -- '--[a-z-]*' deploy/daemonset.yaml | grep -v -- '--config$\|--max-time\|--unix-socket';
                 sed -n 's/^ExecStart=[^ ]*podres-syncer//p' deploy/systemd/podres-syncer.service | grep -o -- '--[a-z-]*') | sort -u); do
        case $f in --podresd-socket|--metrics-listen|--log-format|--kubeconfig) ;; *) continue ;; esac
        grep -q -- "$f" <<<"$help" || fail "podres-syncer --help does not know $f (used in deploy/)"
    done
    ok "every podres-syncer flag deploy/ uses is in its --help"
else
    say "podres-syncer not built: its flags are not checked"
fi

# ---- 7. Dockerfile: stages, and runtime libraries against ldd / dpkg -S
$PY - >"$T/docker.txt" <<'EOF'
import re
text = re.sub(r"\\\n", " ", open("deploy/Dockerfile").read())
stages, cur = [], None
for line in text.splitlines():
    line = line.strip()
    if line.upper().startswith("FROM "):
        cur = {"from": line, "pkgs": [], "user": None, "run": []}
        stages.append(cur)
    elif cur is not None and line.upper().startswith("RUN "):
        cur["run"].append(line)
        for m in re.finditer(r"apt-get install((?:\s+[^&;|]+)*)", line):
            cur["pkgs"] += [t for t in m.group(1).split() if not t.startswith("-")]
    elif cur is not None and line.upper().startswith("USER "):
        cur["user"] = line.split()[1]
for s in stages:
    print("FROM\t" + s["from"])
print("BUILD\t" + " ".join(stages[0]["pkgs"]))
print("BUILDMAKE\t" + str(any(re.search(r"\bmake\b.*\ball\b|\bmake\s*(&&|$)", r) for r in stages[0]["run"])))
print("RUNTIME\t" + " ".join(stages[-1]["pkgs"]))
print("USER\t" + str(stages[-1]["user"]))
EOF
froms=$(grep '^FROM' "$T/docker.txt" | cut -f2)
[ "$froms" = $'FROM debian:12 AS build\nFROM debian:12-slim' ] || fail "Dockerfile FROM lines: $froms"
grep -q $'^BUILDMAKE\tTrue' "$T/docker.txt" || fail "the build stage does not run make"
user=$(grep '^USER' "$T/docker.txt" | cut -f2)
[ -n "$user" ] && [ "$user" != None ] && [ "${user%%:*}" != 0 ] && [ "${user%%:*}" != root ] \
    || fail "the runtime stage has no non-root USER: $user"
ok "Dockerfile: debian:12 build stage running make, debian:12-slim runtime, non-root USER $user"
read -r -a runtime <<<"$(grep '^RUNTIME' "$T/docker.txt" | cut -f2)"
read -r -a build <<<"$(grep '^BUILD	' "$T/docker.txt" | cut -f2)"
pkg_of() {  # pkg_of PATH: the Debian package that ships it (without :arch)
    local p=$1 r
    for cand in "$p" "$(readlink -f "$p")" "/usr${p#/usr}" "${p#/usr}"; do
        r=$(dpkg -S "$cand" 2>/dev/null | head -1) && [ -n "$r" ] && { echo "${r%%:*}" | sed 's/:.*//'; return; }
    done
    echo "?$p"
}
# the libraries the link line can name (pkg-config of the Makefile's PKGS) -> runtime packages
pkgs=$(sed -n 's/^PKGS *:= *//p' Makefile)
multi=$(gcc -print-multiarch 2>/dev/null || echo x86_64-linux-gnu)
declare -A linkable=()
# ... and the syncer's libcurl (SYNCER_CURL: -l:libcurl-gnutls.so.4, a file name)
for l in $(pkg-config --libs-only-l $pkgs) $(sed -n 's/^SYNCER_CURL *:= *//p' Makefile); do
    case $l in -l:*) so=/usr/lib/$multi/${l#-l:} ;; *) so=/usr/lib/$multi/lib${l#-l}.so ;; esac
    [ -e "$so" ] || fail "link library $so not found"
    linkable[$(pkg_of "$(readlink -f "$so")")]=1
done
declare -A installed=()
for p in "${runtime[@]}"; do installed[$p]=1; done
# every library the binaries need is installed (libc6 is in the base image)
needed_pkgs=()
# (bin/: the plain build the image ships; a sanitizer build links more)
[ -x bin/podresd ] || say "bin/podresd not built: only the link-line check runs"
for b in bin/podresd bin/podres-syncer bin/podres-extender; do
    [ -x "$b" ] || continue
    for so in $(readelf -d "$b" | sed -n 's/.*NEEDED.*\[\(.*\)\]/\1/p'); do
        path=$(ldd "$b" | awk -v s="$so" '$1 == s { print $3 }')
        [ -n "$path" ] || fail "ldd $b does not resolve $so"
        pkg=$(pkg_of "$path")
        needed_pkgs+=("$pkg")
        [ "$pkg" = libc6 ] || [ -n "${installed[$pkg]:-}" ] \
            || fail "$b needs $so from $pkg, which deploy/Dockerfile does not install"
    done
done
# every lib package installed is one the link line names (nothing stale or extra)
for p in "${runtime[@]}"; do
    case $p in
    ca-certificates|curl|openssl) ;;
    lib*) [ -n "${linkable[$p]:-}" ] || fail "Dockerfile installs $p, which no library on the link line ($pkgs) comes from (linkable: ${!linkable[*]})" ;;
    *) fail "Dockerfile installs $p at run time: only libraries, ca-certificates, curl and openssl (podres-extender-certs) belong there" ;;
    esac
done
for p in "${!linkable[@]}"; do
    [ -n "${installed[$p]}" ] || fail "the link line names a library of $p, which the runtime stage lacks"
done
ok "Dockerfile runtime libraries = the link line's (${!linkable[*]}); ldd needs $(printf '%s\n' "${needed_pkgs[@]}" | sort -u | tr '\n' ' ')- all installed"
for p in $(sed -n '/^DEBIAN_PKGS/,/^$/p' Makefile | tr -d '\\' | sed 's/^DEBIAN_PKGS *:= *//'); do
    case $p in *-dev|gcc|make|pkg-config|protobuf-c-compiler|libcurl3-gnutls)  # the last: linked by name
        [[ " ${build[*]} " == *" $p "* ]] || fail "the build stage lacks $p (Makefile DEBIAN_PKGS)";;
    esac
done
ok "the build stage installs every compiler/-dev package of the Makefile's DEBIAN_PKGS (and libcurl3-gnutls)"

# ---- 8. systemd units
$PY - <<'EOF' || fail "systemd units: structural check failed"
import re, sys
def parse(f):
    secs, cur = {}, None
    for n, line in enumerate(open(f), 1):
        line = line.rstrip("\n")
        if not line.strip() or line.lstrip().startswith(("#", ";")):
            continue
        m = re.match(r"^\[([A-Za-z]+)\]$", line)
        if m:
            cur = secs.setdefault(m.group(1), {})
            continue
        m = re.match(r"^([A-Za-z][A-Za-z0-9]*)=(.*)$", line)
        if not m or cur is None:
            print("%s:%d: not KEY=VALUE in a section: %s" % (f, n, line)); sys.exit(1)
        cur.setdefault(m.group(1), []).append(m.group(2))
    return secs
common = {"NoNewPrivileges": "yes", "ProtectSystem": "strict", "ProtectHome": "yes", "PrivateTmp": "yes",
          "CapabilityBoundingSet": "", "RestrictSUIDSGID": "yes", "Restart": "on-failure"}
want = {"deploy/systemd/podresd.service": dict(common, StateDirectory="podresd", RuntimeDirectory="podresd",
                                               RuntimeDirectoryMode="0750", Group="podres"),
        "deploy/systemd/podres-syncer.service": dict(common, User="podres", Group="podres")}
bad = []
for f, keys in want.items():
    s = parse(f)
    if set(s) != {"Unit", "Service", "Install"}:
        bad.append("%s: sections %s" % (f, sorted(s)))
        continue
    for k, v in keys.items():
        if s["Service"].get(k, [None])[-1] != v:
            bad.append("%s: %s=%r, want %r" % (f, k, s["Service"].get(k), v))
    if not s["Install"].get("WantedBy"):
        bad.append("%s: no WantedBy" % f)
    ex = s["Service"]["ExecStart"][-1]
    if "podresd.service" in f and "--config /etc/podres/podresd.yaml" not in ex:
        bad.append("%s: ExecStart %s" % (f, ex))
    if "syncer" in f:
        for flag in ("--podresd-socket /run/podresd/podresd.sock", "--kubeconfig ", "--metrics-listen 127.0.0.1:9445"):
            if flag not in ex:
                bad.append("%s: ExecStart lacks %s" % (f, flag))
        if "podresd.service" not in " ".join(s["Unit"].get("After", [])):
            bad.append("%s: not After=podresd.service" % f)
for b in bad:
    print(b)
sys.exit(1 if bad else 0)
EOF
ok "systemd units: sections, hardening keys, State/RuntimeDirectory=podresd (0750), ExecStart flags"
if command -v systemd-analyze >/dev/null; then
    u=$T/units
    mkdir -p "$u"
    verify() {  # verify UNIT...: systemd-analyze verify must be silent
        local out
        out=$(systemd-analyze verify --man=no "$@" 2>&1) || { echo "$out"; return 1; }
        [ -z "$out" ] || { echo "$out"; return 1; }
    }
    # ExecStart must name an existing executable: point both at the podresd
    # under test (bin/, or build/san/bin/ for the sanitizer suite).
    exe=$(readlink -f "$PD")
    for f in deploy/systemd/*.service; do
        sed "s#/usr/local/bin/podres-syncer#$exe#; s#/usr/local/bin/podresd#$exe#" "$f" \
            >"$u/$(basename "$f")"
    done
    out=$(verify "$u/podresd.service" "$u/podres-syncer.service") || fail "systemd-analyze verify: $out"
    cp "$u/podresd.service" "$u/broken.service"
    sed -i 's/^NoNewPrivileges=yes/NoNewPrivileges=maybe/; s/^ProtectSystem=strict/ProtectSytem=strict/' "$u/broken.service"
    verify "$u/broken.service" >/dev/null && fail "the verify check accepted a broken unit"
    for f in podresd podres-syncer; do
        score=$(systemd-analyze security --offline=yes "$u/$f.service" 2>/dev/null \
            | sed -n 's/.*Overall exposure level for .*: \([0-9.]*\) .*/\1/p')
        [ -n "$score" ] || continue
        awk -v s="$score" 'BEGIN { exit !(s <= 3.0) }' || fail "$f.service exposure $score > 3.0"
        say "$f.service: systemd-analyze security exposure $score"
    done
    ok "systemd-analyze verify: both units clean (and a broken copy is caught); exposure <= 3.0"
else
    say "systemd-analyze not installed: structural check only"
fi
