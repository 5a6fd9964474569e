#!/bin/bash
# deploy/ (issue 7): every manifest parses and applies with real kubectl to the Kubernetes API
# emulator (kubectl apply -k, then -f per file, then an image change through a kustomize overlay
# as a strategic merge patch); the ClusterRole grants exactly the syncer's list and nothing
# more (the checker is first shown to reject widened copies); the DaemonSet has what issue 7
# asks for; both podresd configs are accepted by bin/podresd; the CRD copies are identical;
# the Dockerfile's stages and runtime libraries match `ldd`/`dpkg -S`; the systemd units pass
# `systemd-analyze verify` (when installed) and a structural check.
set -euo pipefail
cd "$(dirname "$0")/../.."
. tests/emulator/lib.sh
PY=/usr/bin/python3
export HOME=$TMP/home
mkdir -p "$HOME"
k() { kubectl --cache-dir "$KCACHE" --request-timeout=20s "$@"; }

# ---- 1. the CRD copies
cmp -s schema/crd-devicebinding.yaml deploy/crd-devicebinding.yaml \
    || fail "deploy/crd-devicebinding.yaml differs from schema/crd-devicebinding.yaml"
pass "deploy/crd-devicebinding.yaml is byte-identical to schema/"

# ---- 2. every YAML file parses; the kustomization lists every top-level manifest
out=$($PY - <<'EOF' 2>&1
import glob, os, sys, yaml
bad = []
files = sorted(glob.glob("deploy/**/*.yaml", recursive=True))
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
if sorted(kust.get("resources") or []) != top:
    bad.append("kustomization resources %s != manifests %s" % (kust.get("resources"), top))
if kust.get("namespace") != "podres-system":
    bad.append("kustomization namespace is %r" % kust.get("namespace"))
print("\n".join(bad) if bad else "%d files" % len(files))
sys.exit(1 if bad else 0)
EOF
) || fail "deploy YAML: $out"
pass "every YAML file under deploy/ parses ($out); kustomization.yaml lists every manifest"

# ---- 3. kubectl apply -k / -f against the emulator
start_emulator deploy
expect_apply() {  # expect_apply DESCRIPTION WANT_REGEX_PER_LINE COUNT kubectl-args...
    local what=$1 re=$2 n=$3 out err
    shift 3
    out=$(k "$@" 2>"$EMU_DIR/stderr") || fail "$what: kubectl $*: $out $(cat "$EMU_DIR/stderr")"
    err=$(cat "$EMU_DIR/stderr")
    [ -z "$err" ] || fail "$what: kubectl printed on stderr (warnings?): $err"
    [ "$(grep -c . <<<"$out")" = "$n" ] || fail "$what: want $n lines: $out"
    local extra
    extra=$(grep -Ev "$re" <<<"$out" || true)
    [ -z "$extra" ] || fail "$what: unexpected lines: $extra"
    pass "$what"
}
expect_apply "kubectl apply -k deploy/ creates all 7 objects without warnings" \
    '^[a-z0-9.]+/[a-z0-9.-]+ created$' 7 apply -k deploy/
for want in namespace/podres-system customresourcedefinition.apiextensions.k8s.io/devicebindings.podres.dev \
    serviceaccount/podres-syncer clusterrole.rbac.authorization.k8s.io/podres-syncer \
    clusterrolebinding.rbac.authorization.k8s.io/podres-syncer configmap/podresd-config daemonset.apps/podres; do
    k get "$want" -n podres-system -o name >/dev/null || fail "apply -k: $want is not there"
done
pass "kubectl get finds every applied object"
expect_apply "apply -k again: all unchanged" ' unchanged$' 7 apply -k deploy/
K127="$(kubectl_dir)/kubectl.1.27"
if [ -x "$K127" ]; then
    out=$("$K127" --cache-dir "$KCACHE" apply -k deploy/ 2>&1) || fail "kubectl 1.27 apply -k: $out"
    [ "$(grep -c ' unchanged$' <<<"$out")" = 7 ] || fail "kubectl 1.27 apply -k: $out"
    pass "kubectl 1.27 apply -k deploy/: all unchanged"
fi
files=(deploy/namespace.yaml)
for f in deploy/*.yaml deploy/examples/namespace-*.yaml deploy/examples/*.yaml; do
    [[ " ${files[*]} " == *" $f "* ]] || [ "$f" = deploy/kustomization.yaml ] || files+=("$f")
done
for f in "${files[@]}"; do
    out=$(k apply -f "$f" 2>"$EMU_DIR/stderr") || fail "kubectl apply -f $f: $out $(cat "$EMU_DIR/stderr")"
    [ ! -s "$EMU_DIR/stderr" ] || fail "kubectl apply -f $f warned: $(cat "$EMU_DIR/stderr")"
    grep -Evq ' (unchanged|created)$' <<<"$out" && fail "kubectl apply -f $f: $out"
done
pass "kubectl apply -f per file (${#files[@]} files, examples included) without error or warning"
out=$(k get dvb -n ml -o json | jq -r '.items[] | .metadata.name + " " + .spec.nodeName + " "
      + ([.spec.containers[].devices[].deviceIds[]] | join(","))')
[ "$out" = "train-0 node-a GPU-0b1c2d3e,GPU-4f5a6b7c,nic-1" ] || fail "pre-assignment example: $out"
pass "the scheduler pre-assignment example is a valid DeviceBinding with spec.containers"

# an image change through a kustomize overlay goes out as a strategic merge patch
mkdir -p "$TMP/overlay"
cat >"$TMP/overlay/kustomization.yaml" <<EOF
apiVersion: kustomize.config.k8s.io/v1beta1
kind: Kustomization
resources:
- $(realpath --relative-to="$TMP/overlay" deploy)
images:
- name: podres
  newName: registry.example.com/podres
  newTag: 0.2.0
EOF
curl -sf -X DELETE "$EMU_ADMIN/requests" >/dev/null
out=$(k apply -k "$TMP/overlay" 2>&1) || fail "overlay apply: $out"
grep -q '^daemonset.apps/podres configured$' <<<"$out" && [ "$(grep -c ' unchanged$' <<<"$out")" = 6 ] \
    || fail "overlay apply: $out"
curl -sf "$EMU_ADMIN/requests" | jq -e '[.requests[] | select(.verb == "patch" and .resource == "daemonsets"
    and .code == 200 and (.contentType | startswith("application/strategic-merge-patch+json")))]
    | length == 1' >/dev/null || fail "the image change was not one strategic merge PATCH"
out=$(k get ds podres -n podres-system -o json | jq -r '[.spec.template.spec.containers[]
      | "\(.name)=\(.image):\(.volumeMounts | length)"] | join(" ")')
[ "$out" = "podresd=registry.example.com/podres:0.2.0:5 podres-syncer=registry.example.com/podres:0.2.0:1" ] \
    || fail "after the overlay: $out"
pass "an image change via a kustomize overlay: one strategic merge PATCH, both containers kept whole"

# the emulator checks what it is sent: a typo and a dangling mount are refused
sed 's/readOnlyRootFilesystem/readOnlyRootFileSystem/' deploy/daemonset.yaml >"$TMP/typo.yaml"
out=$(k apply -f "$TMP/typo.yaml" 2>&1) && fail "a DaemonSet with a misspelt field was accepted: $out"
grep -q 'unknown field "spec.template.spec.containers\[0\].securityContext.readOnlyRootFileSystem"' <<<"$out" \
    || fail "typo: $out"
perl -0pe 's/- name: tmp\n(\s+)emptyDir/- name: scratch\n$1emptyDir/; s/\n  name: podres\n/\n  name: podres-bad\n/' \
    deploy/daemonset.yaml >"$TMP/dangling.yaml"
grep -q 'name: scratch' "$TMP/dangling.yaml" || fail "could not make the dangling-mount copy"
out=$(k apply -f "$TMP/dangling.yaml" 2>&1) && fail "a dangling volumeMount was accepted: $out"
grep -q 'volumeMounts\[4\].name: Not found: "tmp"' <<<"$out" || fail "dangling mount: $out"
pass "the emulator refuses a misspelt field (strict decoding) and a mount of a missing volume (422)"

# ---- 4. least privilege: the ClusterRole as stored by the API server
cat >"$TMP/rbac_check.py" <<'EOF'
import json, sys
ALLOWED = {("podres.dev", "devicebindings"): {"get", "list", "watch", "create", "update", "patch", "delete"},
           ("podres.dev", "devicebindings/status"): {"get", "list", "watch", "create", "update", "patch", "delete"},
           ("", "pods"): {"get", "list", "watch"}}

def problems(role):
    out, granted = [], set()
    if role.get("aggregationRule"):
        out.append("aggregationRule (aggregates other roles' rules)")
    for i, r in enumerate(role.get("rules") or []):
        if r.get("nonResourceURLs"):
            out.append("rules[%d]: nonResourceURLs %s" % (i, r["nonResourceURLs"]))
        for g in r.get("apiGroups") or []:
            for res in r.get("resources") or []:
                for v in r.get("verbs") or []:
                    if "*" in (g, res, v):
                        out.append("rules[%d]: wildcard (%r, %r, %r)" % (i, g, res, v))
                    elif v not in ALLOWED.get((g, res), ()):
                        out.append("rules[%d]: grants %s on %s in group %r" % (i, v, res, g))
                    else:
                        granted.add((g, res, v))
    missing = sorted((g, r, v) for (g, r), vs in ALLOWED.items() for v in vs if (g, r, v) not in granted)
    if missing:
        out.append("missing grants the syncer needs: %s" % missing)
    return out

role = json.load(open(sys.argv[1]))
if sys.argv[2:] == ["selftest"]:
    import copy
    widen = [lambda r: r["rules"][0]["verbs"].append("deletecollection"),
             lambda r: r["rules"][1]["resources"].append("secrets"),
             lambda r: r["rules"][1]["verbs"].append("delete"),
             lambda r: r["rules"].append({"apiGroups": [""], "resources": ["events"], "verbs": ["create"]}),
             lambda r: r["rules"].append({"apiGroups": ["*"], "resources": ["devicebindings"], "verbs": ["get"]}),
             lambda r: r["rules"].append({"nonResourceURLs": ["/metrics"], "verbs": ["get"]}),
             lambda r: r.__setitem__("aggregationRule", {"clusterRoleSelectors": [{"matchLabels": {"a": "b"}}]}),
             lambda r: r["rules"][0]["verbs"].remove("watch")]
    for i, w in enumerate(widen):
        r = copy.deepcopy(role)
        w(r)
        if not problems(r):
            print("the checker accepted altered copy #%d: %s" % (i, json.dumps(r["rules"])))
            sys.exit(1)
    print("%d altered copies rejected" % len(widen))
    sys.exit(0)
p = problems(role)
print("\n".join(p) if p else "ok")
sys.exit(1 if p else 0)
EOF
k get clusterrole podres-syncer -o json >"$TMP/role.json"
out=$($PY "$TMP/rbac_check.py" "$TMP/role.json" selftest) || fail "least-privilege checker self-test: $out"
pass "least-privilege checker: $out"
out=$($PY "$TMP/rbac_check.py" "$TMP/role.json") || fail "ClusterRole podres-syncer is not least privilege: $out"
pass "ClusterRole podres-syncer grants exactly devicebindings{,/status} get/list/watch/create/update/patch/delete and pods get/list/watch"
n=$(grep -rlE '^kind: *(Role|ClusterRole|RoleBinding|ClusterRoleBinding)$' deploy | wc -l)
[ "$n" = 1 ] || fail "RBAC objects outside deploy/rbac.yaml: $(grep -rlE '^kind: *(Role|ClusterRole|RoleBinding)' deploy)"
k get clusterrolebinding podres-syncer -o json | jq -e '.roleRef == {"apiGroup":"rbac.authorization.k8s.io",
    "kind":"ClusterRole","name":"podres-syncer"} and .subjects == [{"kind":"ServiceAccount",
    "name":"podres-syncer","namespace":"podres-system"}]' >/dev/null || fail "ClusterRoleBinding subjects/roleRef"
pass "the binding gives that role to ServiceAccount podres-system/podres-syncer only; no other RBAC object"

# ---- 5. the DaemonSet as stored (after the overlay: only the image differs)
k get ds podres -n podres-system -o json >"$TMP/ds.json"
k get cm podresd-config -n podres-system -o json >"$TMP/cm.json"
out=$($PY - "$TMP/ds.json" "$TMP/cm.json" <<'EOF' 2>&1
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
need(sy["securityContext"].get("runAsNonRoot") is True and sy["securityContext"].get("runAsUser", 0) != 0,
     "the syncer runs as non-root")
need(pd["securityContext"].get("runAsGroup") == sy["securityContext"].get("runAsGroup"),
     "podresd's group (owner group of its 0660 socket) is the syncer's group")
print("\n".join(bad) if bad else "ok")
sys.exit(1 if bad else 0)
EOF
) || fail "DaemonSet: $out"
pass "DaemonSet: 3 hostPaths, source kubelet, shared socket dir, NODE_NAME, exec probes, requests/limits, read-only root, no capabilities, non-root syncer"
stop_emulator

# ---- 6. the configurations are accepted by podresd
check_config() {  # check_config FILE [YAML-KEY]: start podresd on it (paths moved to $TMP)
    local f=$1 key=${2:-} d=$TMP/cfg.$RANDOM pid i
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
pass "podresd starts on the ConfigMap's configuration and on deploy/systemd/podresd.yaml"
SY=${PODRES_BIN:-bin}/podres-syncer
if [ -x "$SY" ]; then
    help=$("$SY" --help 2>&1 || true)
    for f in $( (grep -o -- '--[a-z-]*' deploy/daemonset.yaml | grep -v -- '--config$\|--max-time\|--unix-socket';
                 sed -n 's/^ExecStart=[^ ]*podres-syncer//p' deploy/systemd/podres-syncer.service | grep -o -- '--[a-z-]*') | sort -u); do
        case $f in --podresd-socket|--metrics-listen|--log-format|--kubeconfig) ;; *) continue ;; esac
        grep -q -- "$f" <<<"$help" || fail "podres-syncer --help does not know $f (used in deploy/)"
    done
    pass "every podres-syncer flag deploy/ uses is in its --help"
else
    say "podres-syncer not built: its flags are not checked"
fi

# ---- 7. Dockerfile: stages, and runtime libraries against ldd / dpkg -S
$PY - >"$TMP/docker.txt" <<'EOF'
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
froms=$(grep '^FROM' "$TMP/docker.txt" | cut -f2)
[ "$froms" = $'FROM debian:12 AS build\nFROM debian:12-slim' ] || fail "Dockerfile FROM lines: $froms"
grep -q $'^BUILDMAKE\tTrue' "$TMP/docker.txt" || fail "the build stage does not run make"
user=$(grep '^USER' "$TMP/docker.txt" | cut -f2)
[ -n "$user" ] && [ "$user" != None ] && [ "${user%%:*}" != 0 ] && [ "${user%%:*}" != root ] \
    || fail "the runtime stage has no non-root USER: $user"
pass "Dockerfile: debian:12 build stage running make, debian:12-slim runtime, non-root USER $user"
read -r -a runtime <<<"$(grep '^RUNTIME' "$TMP/docker.txt" | cut -f2)"
read -r -a build <<<"$(grep '^BUILD	' "$TMP/docker.txt" | cut -f2)"
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
for b in bin/podresd bin/podres-syncer; do
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
    ca-certificates|curl) ;;
    lib*) [ -n "${linkable[$p]:-}" ] || fail "Dockerfile installs $p, which no library on the link line ($pkgs) comes from (linkable: ${!linkable[*]})" ;;
    *) fail "Dockerfile installs $p at run time: only libraries, ca-certificates and curl belong there" ;;
    esac
done
for p in "${!linkable[@]}"; do
    [ -n "${installed[$p]}" ] || fail "the link line names a library of $p, which the runtime stage lacks"
done
pass "Dockerfile runtime libraries = the link line's (${!linkable[*]}); ldd needs $(printf '%s\n' "${needed_pkgs[@]}" | sort -u | tr '\n' ' ')- all installed"
for p in $(sed -n '/^DEBIAN_PKGS/,/^$/p' Makefile | tr -d '\\' | sed 's/^DEBIAN_PKGS *:= *//'); do
    case $p in *-dev|gcc|make|pkg-config|protobuf-c-compiler|libcurl3-gnutls)  # the last: linked by name
        [[ " ${build[*]} " == *" $p "* ]] || fail "the build stage lacks $p (Makefile DEBIAN_PKGS)";;
    esac
done
pass "the build stage installs every compiler/-dev package of the Makefile's DEBIAN_PKGS (and libcurl3-gnutls)"

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
pass "systemd units: sections, hardening keys, State/RuntimeDirectory=podresd (0750), ExecStart flags"
if command -v systemd-analyze >/dev/null; then
    u=$TMP/units
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
    pass "systemd-analyze verify: both units clean (and a broken copy is caught); exposure <= 3.0"
else
    say "systemd-analyze not installed: structural check only"
fi
