# lib.sh - shared helpers for integration tests; source it first.
# Starts the real podresd on a temp dir and drives it with curl and jq.
# Every process a test starts is killed by the EXIT trap.
set -euo pipefail

PODRES_ROOT=${PODRES_ROOT:-$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)}
PODRES_BIN=${PODRES_BIN:-$PODRES_ROOT/bin}
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

free_port() {
    python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'
}

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

# ---- the Kubernetes API emulator and podres-syncer ----

# emu_start [EMULATOR FLAGS...] - start the emulator with the project's CRD on
# a free port; sets EMU_URL, EMU_KCFG (its kubeconfig), EMU_PID.
emu_start() {
    mkdir -p "$T/emu"
    rm -f "$T/emu/port"
    /usr/bin/python3 "$PODRES_ROOT/tests/fixtures/kube-apiserver-emulator" --listen 127.0.0.1:${EMU_PORT:-0} \
        --port-file "$T/emu/port" --kubeconfig-out "$T/emu/kubeconfig" \
        --crd "$PODRES_ROOT/deploy/crd-devicebinding.yaml" "$@" >> "$T/emu/log" 2>&1 &
    EMU_PID=$!
    PIDS+=("$EMU_PID")
    wait_until 10 test -s "$T/emu/port" || fail "the emulator did not start"
    EMU_PORT=$(cat "$T/emu/port")
    EMU_KCFG=$T/emu/kubeconfig
    if grep -q https "$EMU_KCFG"; then EMU_URL=https://127.0.0.1:$EMU_PORT; else EMU_URL=http://127.0.0.1:$EMU_PORT; fi
    wait_until 10 curl -skf "$EMU_URL/_emulator/state" || fail "the emulator does not answer"
}

emu_stop() {
    kill -TERM "$EMU_PID" 2>/dev/null || true
    wait "$EMU_PID" 2>/dev/null || true
}

# kapi METHOD PATH [BODY [CONTENT-TYPE]] - plain request to the emulator; body in $T/out.
kapi() {
    local args=(-sk -o "$T/out" -w '%{http_code}' -X "$1")
    [ $# -ge 3 ] && args+=(-H "Content-Type: ${4:-application/json}" --data-binary "$3")
    CODE=$(curl "${args[@]}" "$EMU_URL$2")
}

# emu_pod NS NAME NODE - create the namespace (if needed) and a Pod on NODE; prints its uid.
emu_pod() {
    kapi POST /api/v1/namespaces "{\"apiVersion\":\"v1\",\"kind\":\"Namespace\",\"metadata\":{\"name\":\"$1\"}}"
    kapi POST "/api/v1/namespaces/$1/pods" \
        "{\"apiVersion\":\"v1\",\"kind\":\"Pod\",\"metadata\":{\"name\":\"$2\",\"namespace\":\"$1\"},\"spec\":{\"nodeName\":\"$3\",\"containers\":[{\"name\":\"main\",\"image\":\"x\"}]}}"
    [ "$CODE" = 201 ] || fail "create pod $1/$2: HTTP $CODE $(head -c 300 "$T/out")"
    jq -r .metadata.uid "$T/out"
}

# dvb NS NAME - GET the DeviceBinding into $T/out; CODE is set.
dvb() { kapi GET "/apis/podres.dev/v1alpha1/namespaces/$1/devicebindings/$2"; }

# dvb_count - number of DeviceBindings in all namespaces.
dvb_count() { curl -sk "$EMU_URL/apis/podres.dev/v1alpha1/devicebindings" | jq '.items | length'; }

# writes - successful API writes counted by the emulator.
writes() {
    curl -sk "$EMU_URL/_emulator/counters?verb=create,update,patch,delete&code=2xx" | jq .total
}

# sy_start [FLAGS...] - podres-syncer for node test-node against podresd and the emulator.
sy_start() {
    SY_PORT=${SY_PORT:-$(free_port)}
    "$PODRES_BIN/podres-syncer" --node-name test-node --podresd-socket "$PD_SOCK" \
        --kubeconfig "$EMU_KCFG" --metrics-listen "127.0.0.1:$SY_PORT" "$@" >> "$T/syncer.log" 2>&1 &
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
