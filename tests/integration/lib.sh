# lib.sh - shared helpers for integration tests; source it first.
# Starts the real podresd on a temp dir and drives it with curl and jq.
# Every process a test starts is killed by the EXIT trap.
set -euo pipefail

PODRES_ROOT=${PODRES_ROOT:-$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)}
PODRES_BIN=${PODRES_BIN:-$PODRES_ROOT/bin}
# The tests' Python package (tests/py/podres_test): python3 -m podres_test.NAME
export PYTHONPATH=$PODRES_ROOT/tests/py${PYTHONPATH:+:$PYTHONPATH}
MULT=${TEST_TIMEOUT_MULT:-1}
T=$(mktemp -d "${TMPDIR:-/tmp}/podres-it.XXXXXX")
PIDS=()
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=0}
export KUBECACHEDIR=$T/kube-cache  # kubectl's discovery cache stays in the temp dir
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}

cleanup() {
    local p
    for p in "${PIDS[@]:-}"; do
        [ -n "$p" ] && kill -9 "$p" 2>/dev/null || true
    done
    node_down
    kube_down
    rm -rf "$T"
}
trap cleanup EXIT

fail() {
    echo "FAIL: $*" >&2
    local f
    for f in "$T/podresd.log" "$T/syncer.log"; do
        [ -f "$f" ] || continue
        echo "--- ${f##*/}" >&2
        # A sanitizer report is long and its useful part is its start: the
        # runner keeps only the last 40 lines, so show the start alone.
        if grep -qE '^==[0-9]+==ERROR|runtime error:' "$f"; then
            grep -m1 -A24 -E '^==[0-9]+==ERROR|runtime error:' "$f" >&2
        else
            tail -n 20 "$f" >&2
        fi
    done
    exit 1
}
ok() { echo "ok - $*"; }

free_port() { python3 "$PODRES_ROOT/tests/py/podres_test/free_port.py"; }

# jqe FILTER [JQ ARGS...] - `jq -e FILTER` over stdin that also fails on empty
# input: jq -e exits 0 when it reads nothing, so a check piped from a kubectl
# or curl that printed nothing (an error, a timeout, a missing object) would
# pass. Exported, so `bash -c "... | jqe ..."` (wait_until) has it too.
jqe() {
    local in
    in=$(cat)
    [ -n "$in" ] || { echo "jqe: empty input (jq -e $*)" >&2; return 1; }
    printf '%s\n' "$in" | jq -e "$@"
}
export -f jqe

# wait_until SECONDS CMD... - poll CMD every 0.1 s until it succeeds.
wait_until() {
    local limit=$(( $1 * MULT * 10 )) i=0
    shift
    until "$@" >/dev/null 2>&1; do
        i=$((i + 1))
        [ "$i" -ge "$limit" ] && return 1
        sleep 0.1
    done
}

# ---- the fake kubelet (tests/fixtures/fake-kubelet: the podresources gRPC API) ----
FK_SOCK=$T/kubelet/kubelet.sock
# fk_state JSON - rewrite the fake kubelet's state file atomically.
fk_state() { printf '%s\n' "$1" > "$T/state.tmp" && mv "$T/state.tmp" "$T/state.json"; }
# fk_start - serve $T/state.json on $FK_SOCK (calls logged in $T/calls.log); FK_PID.
fk_start() {
    mkdir -p "$(dirname "$FK_SOCK")"
    /usr/bin/python3 "$PODRES_ROOT/tests/fixtures/fake-kubelet" --socket "$FK_SOCK" \
        --state "$T/state.json" --log "$T/calls.log" 2>> "$T/fake-kubelet.log" &
    FK_PID=$!
    PIDS+=("$FK_PID")
    wait_until 10 test -S "$FK_SOCK" || fail "fake kubelet did not start"
}

# pd_config [EXTRA_YAML] - write $T/podresd.yaml (a fresh TCP port in PD_PORT).
pd_config() {
    PD_PORT=${PD_PORT:-$(free_port)}
    PD_SOCK=$T/run/podresd.sock
    PD_DB=${PD_DB:-$T/db/podresd.db}
    cat > "$T/podresd.yaml" <<YAML
db: $PD_DB
socket: $PD_SOCK
listen: 127.0.0.1:$PD_PORT
node_name: test-node
log_level: ${PD_LOG_LEVEL:-info}
${1:-}
YAML
}

# pd_config_kubelet [EXTRA_YAML] - pd_config for source kubelet on the fake kubelet's
# socket, polled every 200 ms.
pd_config_kubelet() {
    pd_config "source: kubelet
kubelet_socket: $FK_SOCK
kubelet_interval: 200ms
${1:-}"
}

# pd_start [FLAGS...] - start podresd on $T/podresd.yaml (written if missing).
pd_start() {
    [ -f "$T/podresd.yaml" ] || pd_config
    "$PODRES_BIN/podresd" --config "$T/podresd.yaml" "$@" >> "$T/podresd.log" 2>&1 &
    PD_PID=$!
    PIDS+=("$PD_PID")
    wait_until 10 curl -sf --unix-socket "$PD_SOCK" http://localhost/healthz ||
        fail "podresd did not become healthy"
}

# pd_stop - SIGTERM; expect exit 0 and a clean sanitizer log.
pd_stop() {
    local rc=0
    kill -TERM "$PD_PID"
    wait "$PD_PID" || rc=$?
    [ "$rc" -eq 0 ] || fail "podresd exited $rc after SIGTERM"
    pd_check_log
    [ ! -e "$PD_SOCK" ] || fail "socket $PD_SOCK left behind"
}

pd_kill9() {
    kill -9 "$PD_PID"
    wait "$PD_PID" 2>/dev/null || true
}

# pd_sql SQL... - run sqlite3 on a copy of podresd's database and WAL:
# podresd holds the file itself while it runs (SQLite's unix-excl VFS), and a
# shell on the file could also checkpoint it. The copy is a crash image,
# whole when no write is in flight.
pd_sql() {
    rm -rf "$T/sqlcopy"
    mkdir -p "$T/sqlcopy"
    cp "$PD_DB" "$T/sqlcopy/db"
    [ ! -e "$PD_DB-wal" ] || cp "$PD_DB-wal" "$T/sqlcopy/db-wal"
    sqlite3 "$T/sqlcopy/db" "$@"
}

pd_check_log() {
    if grep -qE 'AddressSanitizer|LeakSanitizer|runtime error:|UndefinedBehaviorSanitizer' \
        "$T/podresd.log"; then
        cat "$T/podresd.log" >&2
        fail "sanitizer report in the podresd log"
    fi
}

# req METHOD PATH [BODY] - over the unix socket; body in $T/out, status in CODE.
req() {
    local args=(-s -o "$T/out" -w '%{http_code}' -X "$1" --unix-socket "$PD_SOCK")
    [ $# -ge 3 ] && args+=(-H 'Content-Type: application/json' --data-binary "$3")
    CODE=$(curl "${args[@]}" "http://localhost$2")
}

# tcp METHOD PATH [BODY [TOKEN]] - the same over loopback TCP.
tcp() {
    local args=(-s -o "$T/out" -w '%{http_code}' -X "$1")
    [ $# -ge 3 ] && [ -n "$3" ] && args+=(-H 'Content-Type: application/json' --data-binary "$3")
    [ $# -ge 4 ] && args+=(-H "Authorization: Bearer $4")
    CODE=$(curl "${args[@]}" "http://127.0.0.1:$PD_PORT$2")
}

out() { cat "$T/out"; }
# jqo FILTER - jq over the last answer.
jqo() { jq -r "$1" "$T/out"; }

expect_code() {
    [ "$CODE" = "$1" ] || fail "${2:-request}: HTTP $CODE, want $1: $(head -c 400 "$T/out")"
}

# expect_status CODE REASON - a Kubernetes Status body with that code and reason.
expect_status() {
    expect_code "$1" "${3:-request}"
    [ "$(jqo .kind)" = Status ] || fail "${3:-request}: not a Status body: $(out)"
    [ "$(jqo .code)" = "$1" ] || fail "${3:-request}: Status code $(jqo .code), want $1"
    [ "$(jqo .reason)" = "$2" ] || fail "${3:-request}: reason $(jqo .reason), want $2"
}

revision() { curl -s --unix-socket "$PD_SOCK" http://localhost/version | jq -r .revision; }

# register RESOURCE JSON_DEVICES [TTL] - PUT a device set.
register() {
    local body="{\"devices\":$2${3:+,\"ttlSeconds\":$3}}"
    req PUT "/v1/resources/$1/devices" "$body"
    expect_code 200 "register $1"
}

# ---- the real Kubernetes control plane (tests/kube/cluster) and podres-syncer ----

# kube_up [CLUSTER FLAGS...] - a control plane of this test's own in $T/kube
# (stopped by the EXIT trap, or by its watchdog if this shell is killed),
# with the project's CRDs (schema/) and the syncer's namespace,
# ServiceAccount and RBAC from deploy/ (with KUBE_BARE=1 without them, for
# an installer that brings its own). Sets KDIR, KUBE_SERVER, KUBE_CA,
# KUBE_AUDIT, KUBECTL, KCFG (the cluster admin's kubeconfig), KCURL (curl as
# the cluster admin), SY_KCFG (a kubeconfig of the podres-syncer
# ServiceAccount, with a token from the TokenRequest API) and, with
# --scheduler, EXTENDER_URL and XCURL (curl to the extender with
# kube-scheduler's client certificate).
kube_up() {
    local crds=(--crd "$PODRES_ROOT/schema/crd-devicebinding.yaml"
        --crd "$PODRES_ROOT/schema/crd-nodedevices.yaml")
    KDIR=$T/kube
    KUBE_OWNED=1
    [ "${KUBE_BARE:-0}" = 0 ] || crds=()
    "$PODRES_ROOT/tests/kube/cluster" up "$KDIR" --owner $$ "${crds[@]}" "$@" \
        > "$T/kube-up.log" 2>&1 || { cat "$T/kube-up.log" >&2; fail "the control plane did not start"; }
    # shellcheck disable=SC1091
    . "$KDIR/env"
    KCFG=$KUBECONFIG
    unset KUBECONFIG
    KCURL="curl -s --cacert $KUBE_CA --cert $KDIR/pki/admin.crt --key $KDIR/pki/admin.key"
    [ -z "${EXTENDER_URL:-}" ] ||
        XCURL="curl -s --cacert $EXTENDER_CA --cert $EXTENDER_CERT --key $EXTENDER_KEY"
    [ "${KUBE_BARE:-0}" = 1 ] || kube_install
}

# k ARGS... - kubectl of the server's release, as the cluster admin.
k() { "$KUBECTL" --kubeconfig "$KCFG" "$@"; }

# kube_install - the CRDs (Established) and the syncer's identity from deploy/.
kube_install() {
    k apply -f "$PODRES_ROOT/deploy/namespace.yaml" -f "$PODRES_ROOT/schema/crd-devicebinding.yaml" \
        -f "$PODRES_ROOT/schema/crd-nodedevices.yaml" \
        -f "$PODRES_ROOT/deploy/serviceaccount.yaml" -f "$PODRES_ROOT/deploy/rbac.yaml" \
        > "$T/kube-install.log" 2>&1 || { cat "$T/kube-install.log" >&2; fail "cannot install deploy/"; }
    k wait --for condition=Established --timeout 30s crd/devicebindings.podres.dev > /dev/null ||
        fail "the DeviceBinding CRD is not Established"
    SY_KCFG=$T/syncer.kubeconfig
    sa_kubeconfig podres-system podres-syncer "$SY_KCFG"
}

# write_kubeconfig FILE SERVER USER - a kubeconfig for USER at SERVER (the
# cluster's CA); the user's lines (token, or client certificate) on stdin.
write_kubeconfig() {
    {
        cat <<KCFG
apiVersion: v1
kind: Config
clusters:
- name: test
  cluster:
    server: $2
    certificate-authority-data: $(base64 -w0 < "$KUBE_CA")
contexts:
- name: test
  context: {cluster: test, user: $3, namespace: default}
current-context: test
users:
- name: $3
  user:
KCFG
        sed 's/^/    /'
    } > "$1"
    chmod 600 "$1"
}

# sa_kubeconfig NS SA FILE [SERVER] - a kubeconfig for ServiceAccount NS/SA
# (a token from the TokenRequest API) at SERVER (default: the API server).
sa_kubeconfig() {
    local tok
    tok=$(k create token "$2" -n "$1" --duration 2h) || fail "no token for $1/$2"
    echo "token: $tok" | write_kubeconfig "$3" "${4:-$KUBE_SERVER}" "$2"
}

# user_cert USER DIR - DIR/USER.crt and DIR/USER.key: a client certificate of
# user USER signed by the cluster's CA.
user_cert() {
    mkdir -p "$2"
    openssl ecparam -name prime256v1 -genkey -noout -out "$2/$1.key" 2> /dev/null
    openssl req -new -key "$2/$1.key" -subj "/CN=$1" -out "$2/$1.csr" 2> /dev/null
    printf 'extendedKeyUsage=clientAuth\n' > "$2/$1.ext"
    openssl x509 -req -in "$2/$1.csr" -CA "$KUBE_CA" -CAkey "$KDIR/pki/ca.key" -CAcreateserial \
        -CAserial "$2/ca.srl" -days 1 -extfile "$2/$1.ext" -out "$2/$1.crt" 2> /dev/null ||
        fail "cannot sign a client certificate for $1"
    rm -f "$2/$1.csr" "$2/$1.ext"
}

# cert_kubeconfig USER FILE - a kubeconfig for a client certificate of USER
# (made by user_cert in $T/certs), bound to the syncer's ClusterRole.
cert_kubeconfig() {
    user_cert "$1" "$T/certs"
    k create clusterrolebinding "$1" --clusterrole podres-syncer --user "$1" > /dev/null 2>&1 || true
    printf 'client-certificate-data: %s\nclient-key-data: %s\n' "$(base64 -w0 < "$T/certs/$1.crt")" \
        "$(base64 -w0 < "$T/certs/$1.key")" | write_kubeconfig "$2" "$KUBE_SERVER" "$1"
}

# ---- the real node (tests/kube/node): kubelet, containerd, device plugin ----

# node_up [NODE FLAGS...] - a real node of this test's own in $T/node, joined
# to the control plane of kube_up (which needs --scheduler --nodes for
# DaemonSets and scheduled pods), stopped by the EXIT trap or its watchdog.
# Its name is $NODE (default node-1); sets NDIR and, from NDIR/env,
# KUBELET_PODRES_SOCKET, RUNTIME_SOCKET and CTR. The podres image
# (make image, build/image/) is imported into its containerd.
node_up() {
    [ "$(id -u)" = 0 ] || fail "a real node runs as root (tests/kube/node)"
    NDIR=$T/node NODE=${NODE:-node-1}
    NODE_OWNED=1
    "$PODRES_ROOT/tests/kube/node" up "$KDIR" "$NDIR" "$NODE" --owner $$ "$@" \
        > "$T/node-up.log" 2>&1 || { tail -n 40 "$T/node-up.log" >&2; fail "the node did not start"; }
    # shellcheck disable=SC1091
    . "$NDIR/env"
}

node_down() {
    [ "${NODE_OWNED:-0}" = 1 ] && "$PODRES_ROOT/tests/kube/node" down "$NDIR" || true
}

# node_deploy - podres from deploy/ (kubectl apply -k, through an overlay
# that only moves the DaemonSet's database and socket hostPaths into
# $NDIR/podresd-db and $NDIR/podresd-run: /var/lib/podresd and /run/podresd
# are this machine's own, which a podresd run by hand may hold), with the
# project's image; waits until the DaemonSet's pod is Ready. Sets PD_SOCK
# (podresd's socket on the host) and DS_POD (the pod's name).
node_deploy() {
    "$PODRES_ROOT/tests/kube/node" overlay "$NDIR" "$T/overlay" || fail "the deploy/ overlay"
    k apply -k "$T/overlay" > "$T/deploy.log" 2>&1 || { cat "$T/deploy.log" >&2; fail "kubectl apply -k deploy/"; }
    ds_ready 180
    PD_SOCK=$NDIR/podresd-run/podresd.sock
}

# ds_ready SECONDS - until the podres DaemonSet is rolled out and its pod is
# Ready on $NODE; sets DS_POD.
ds_ready() {
    k rollout status ds/podres -n podres-system --timeout "$(( $1 * MULT ))s" > "$T/rollout.log" 2>&1 || {
        cat "$T/rollout.log" >&2
        k get pods -n podres-system -o wide >&2 || true
        k describe pods -n podres-system 2>&1 | tail -n 40 >&2 || true
        fail "the podres DaemonSet did not roll out"
    }
    DS_POD=$(k get pods -n podres-system -l app.kubernetes.io/name=podres \
        --field-selector "spec.nodeName=$NODE,status.phase=Running" -o jsonpath='{.items[0].metadata.name}')
    [ -n "$DS_POD" ] || fail "no running podres pod on $NODE"
}

# node_pod NS NAME [EXTRA SPEC JSON] - a busybox pod (sleep) on the node,
# requesting one example.com/resource unless EXTRA says otherwise (merged
# into the pod's spec); waits until it runs.
node_pod() {
    local extra=${3:-'{}'}
    kube_ns "$1"
    jq -n --arg ns "$1" --arg n "$2" --argjson extra "$extra" '{
        apiVersion: "v1", kind: "Pod", metadata: {name: $n, namespace: $ns},
        spec: ({terminationGracePeriodSeconds: 1, automountServiceAccountToken: false,
               containers: [{name: "main", image: "podres.test/busybox:1",
                             command: ["sleep", "3600"],
                             resources: {limits: {"example.com/resource": "1"}}}]} * $extra)}' |
        k apply -f - > /dev/null || fail "create pod $1/$2"
    k wait --for condition=Ready --timeout "$(( 60 * MULT ))s" -n "$1" "pod/$2" > /dev/null ||
        { k describe pod -n "$1" "$2" | tail -n 20 >&2; fail "pod $1/$2 did not run"; }
}

# pod_devices NS NAME - the sample plugin's devices that the kubelet gave the
# pod's container main, as the container sees them (the plugin mounts
# /tmp/DEVICE-ID into it), sorted and comma-separated.
pod_devices() {
    k exec -n "$1" "$2" -c main -- ls /tmp | grep '^Dev-' | sort | paste -sd, -
}

kube_down() {
    [ "${KUBE_OWNED:-0}" = 1 ] && "$PODRES_ROOT/tests/kube/cluster" down "$KDIR" || true
}

# kapi METHOD PATH [BODY [CONTENT-TYPE]] - a request as the cluster admin; body
# in $T/out, status in CODE.
kapi() {
    local args=(-o "$T/out" -w '%{http_code}' -X "$1")
    [ $# -ge 3 ] && args+=(-H "Content-Type: ${4:-application/json}" --data-binary "$3")
    CODE=$($KCURL "${args[@]}" "$KUBE_SERVER$2")
}

# kube_ns NS - create namespace NS (if needed) and wait for its default
# ServiceAccount, which a Pod needs (ServiceAccount admission).
kube_ns() {
    kapi POST /api/v1/namespaces "{\"apiVersion\":\"v1\",\"kind\":\"Namespace\",\"metadata\":{\"name\":\"$1\"}}"
    [ "$CODE" = 201 ] || [ "$CODE" = 409 ] || fail "create namespace $1: HTTP $CODE $(head -c 300 "$T/out")"
    wait_until 30 sh -c "[ \$($KCURL -o /dev/null -w '%{http_code}' '$KUBE_SERVER/api/v1/namespaces/$1/serviceaccounts/default') = 200 ]" ||
        fail "namespace $1 has no default ServiceAccount"
}

# kube_pod NS NAME NODE - a Pod on NODE (namespace created if needed); prints its uid.
kube_pod() {
    kube_ns "$1"
    kapi POST "/api/v1/namespaces/$1/pods" \
        "{\"apiVersion\":\"v1\",\"kind\":\"Pod\",\"metadata\":{\"name\":\"$2\",\"namespace\":\"$1\"},\"spec\":{\"nodeName\":\"$3\",\"automountServiceAccountToken\":false,\"containers\":[{\"name\":\"main\",\"image\":\"registry.invalid/x\"}]}}"
    [ "$CODE" = 201 ] || fail "create pod $1/$2: HTTP $CODE $(head -c 300 "$T/out")"
    jq -r .metadata.uid "$T/out"
}

# kube_node NAME - a schedulable Node object (no kubelet behind it): capacity
# in its status, and without the not-ready taint that admission puts on a
# new Node and only the node lifecycle controller (not run) would lift.
kube_node() {
    kapi POST /api/v1/nodes "{\"apiVersion\":\"v1\",\"kind\":\"Node\",\"metadata\":{\"name\":\"$1\"}}"
    [ "$CODE" = 201 ] || fail "create node $1: HTTP $CODE $(head -c 300 "$T/out")"
    kapi PATCH "/api/v1/nodes/$1/status" \
        '{"status":{"capacity":{"cpu":"8","memory":"32Gi","pods":"110"},"allocatable":{"cpu":"8","memory":"32Gi","pods":"110"}}}' \
        application/merge-patch+json
    [ "$CODE" = 200 ] || fail "node $1 status: HTTP $CODE $(head -c 300 "$T/out")"
    kapi PATCH "/api/v1/nodes/$1" '{"spec":{"taints":null}}' application/merge-patch+json
    [ "$CODE" = 200 ] || fail "node $1 taints: HTTP $CODE $(head -c 300 "$T/out")"
}

# kube_pod_delete NS NAME - delete a Pod at once (no kubelet confirms a graceful deletion).
kube_pod_delete() {
    kapi DELETE "/api/v1/namespaces/$1/pods/$2" '{"gracePeriodSeconds":0}'
    [ "$CODE" = 200 ] || fail "delete pod $1/$2: HTTP $CODE $(head -c 300 "$T/out")"
}

DVB=/apis/podres.dev/v1alpha1
# dvb NS NAME - GET the DeviceBinding into $T/out; CODE is set.
dvb() { kapi GET "$DVB/namespaces/$1/devicebindings/$2"; }
# dvb_get NS NAME - print the DeviceBinding (nothing when absent).
dvb_get() { $KCURL -f "$KUBE_SERVER$DVB/namespaces/$1/devicebindings/$2" || true; }
# dvb_code NS NAME - the HTTP status of a GET of the DeviceBinding.
dvb_code() { $KCURL -o /dev/null -w '%{http_code}' "$KUBE_SERVER$DVB/namespaces/$1/devicebindings/$2"; }
# dvb_count - number of DeviceBindings in all namespaces.
dvb_count() { $KCURL "$KUBE_SERVER$DVB/devicebindings" | jq '.items | length'; }

# fp_start [FAULT SPEC] - tests/fixtures/fault-proxy in front of the API
# server, serving TLS with the server's own certificate; sets FP_URL and
# FP_KCFG (the syncer's ServiceAccount kubeconfig through the proxy).
fp_start() {
    rm -f "$T/fp.port"
    "$PODRES_ROOT/tests/fixtures/fault-proxy" --listen 127.0.0.1:0 --port-file "$T/fp.port" \
        --upstream "$KUBE_SERVER" --upstream-ca "$KUBE_CA" \
        --tls-cert "$KDIR/pki/apiserver.crt" --tls-key "$KDIR/pki/apiserver.key" \
        ${1:+--faults "$1"} >> "$T/fault-proxy.log" 2>&1 &
    FP_PID=$!
    PIDS+=("$FP_PID")
    wait_until 10 test -s "$T/fp.port" || { cat "$T/fault-proxy.log" >&2; fail "fault-proxy did not start"; }
    FP_URL=https://127.0.0.1:$(cat "$T/fp.port")
    FP_KCFG=$T/syncer-fp.kubeconfig
    sa_kubeconfig podres-system podres-syncer "$FP_KCFG" "$FP_URL"
}

# fp METHOD PATH [BODY] - the fault-proxy's admin API (/_proxy/...); prints the answer.
fp() { curl -s --cacert "$KUBE_CA" -X "$1" ${3:+--data-binary "$3"} "$FP_URL$2"; }

SYNCER_USER=system:serviceaccount:podres-system:podres-syncer
# audit [JQ FILTER] - the API server's audit events (one JSON object a line)
# of the syncer's ServiceAccount, completed, passing FILTER.
audit() {
    jq -c --arg u "$SYNCER_USER" \
        "select(.stage == \"ResponseComplete\" and .user.username == \$u) | select(${1:-true})" "$KUBE_AUDIT"
}
# writes_by USER - USER's successful API writes so far, from the audit log.
writes_by() {
    SYNCER_USER=$1 audit '(.verb | IN("create","update","patch","delete","deletecollection")) and .responseStatus.code < 300' |
        wc -l
}
# writes - the syncer's ServiceAccount's successful API writes so far.
writes() { writes_by "$SYNCER_USER"; }

# sy_start [FLAGS...] - podres-syncer for node test-node against podresd and the control plane (kube_up; $SY_KCFG).
sy_start() {
    SY_PORT=${SY_PORT:-$(free_port)}
    "$PODRES_BIN/podres-syncer" --node-name test-node --podresd-socket "$PD_SOCK" \
        --kubeconfig "$SY_KCFG" --metrics-listen "127.0.0.1:$SY_PORT" "$@" >> "$T/syncer.log" 2>&1 &
    SY_PID=$!
    PIDS+=("$SY_PID")
    wait_until 10 curl -sf "http://127.0.0.1:$SY_PORT/healthz" || { cat "$T/syncer.log" >&2; fail "podres-syncer did not start"; }
}

# sy_stop - SIGTERM; expect exit 0 and a clean sanitizer log.
sy_stop() {
    local rc=0
    kill -TERM "$SY_PID"
    wait "$SY_PID" || rc=$?
    [ "$rc" -eq 0 ] || { tail -20 "$T/syncer.log" >&2; fail "podres-syncer exited $rc after SIGTERM"; }
    if grep -qE 'AddressSanitizer|LeakSanitizer|runtime error:' "$T/syncer.log"; then
        cat "$T/syncer.log" >&2
        fail "sanitizer report in the syncer log"
    fi
}

# bind NS NAME UID DEVICE... - PUT a binding of example.com/gpu devices to container main.
bind() {
    local ns=$1 name=$2 uid=$3 ids
    shift 3
    ids=$(printf '"%s",' "$@")
    req PUT "/v1/namespaces/$ns/pods/$name" \
        "{\"uid\":\"$uid\",\"containers\":[{\"name\":\"main\",\"devices\":[{\"resourceName\":\"example.com/gpu\",\"deviceIds\":[${ids%,}]}]}]}"
    [ "$CODE" = 201 ] || [ "$CODE" = 200 ] || fail "bind $ns/$name: HTTP $CODE $(out)"
}

# node_kubeconfig NODE FILE - a kubeconfig for the syncer's ServiceAccount
# with a token bound to Node NODE (TokenRequest API, as `kubectl create token
# --bound-object-kind Node`): the API server gives its requests
# userInfo.extra["authentication.kubernetes.io/node-name"] = NODE, which
# deploy/admission-node-scope.yaml holds them to. The Node must exist (and
# the token stops working when it is deleted).
node_kubeconfig() {
    local tok
    tok=$(k create token podres-syncer -n podres-system --duration 2h \
        --bound-object-kind Node --bound-object-name "$1") || fail "no token bound to Node $1"
    echo "token: $tok" | write_kubeconfig "$2" "$KUBE_SERVER" podres-syncer
}
