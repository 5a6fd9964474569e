# Shell helpers for tests/integration/3x-emulator-*.sh (sourced, bash).
# Start the emulator on a free port, wait with bounded deadlines scaled by
# $TEST_TIMEOUT_MULT, run kubectl with a private cache dir, clean up on exit.

EMU_BIN=tests/fixtures/kube-apiserver-emulator
MULT=${TEST_TIMEOUT_MULT:-1}
TMP=$(mktemp -d)
PIDS=()
EMU_LOG=

say()  { echo "# $*"; }
pass() { echo "ok - $*"; }
fail() {
    echo "FAIL - $*" >&2
    if [ -n "$EMU_LOG" ] && [ -f "$EMU_LOG" ]; then
        echo "--- emulator log $EMU_LOG ---" >&2
        tail -40 "$EMU_LOG" >&2
    fi
    exit 1
}

cleanup() {
    local p
    for p in "${PIDS[@]}"; do
        kill "$p" 2>/dev/null || true
    done
    for p in "${PIDS[@]}"; do
        wait "$p" 2>/dev/null || true
    done
    rm -rf "$TMP"
}
trap cleanup EXIT

ms_scaled() { awk -v s="$1" -v m="$MULT" 'BEGIN { printf "%d", s * m * 1000 }'; }
now_ms() { date +%s%3N; }

# wait_until SECONDS DESCRIPTION COMMAND...: poll COMMAND until it succeeds.
wait_until() {
    local secs=$1 what=$2
    shift 2
    local end=$(( $(now_ms) + $(ms_scaled "$secs") ))
    until "$@" >/dev/null 2>&1; do
        [ "$(now_ms)" -lt "$end" ] || fail "timed out after ${secs}s (x$MULT) waiting for $what"
        sleep 0.05
    done
}

# start_emulator NAME [EMULATOR FLAGS...]: sets EMU_DIR EMU_PID EMU_PORT EMU_URL
# EMU_ADMIN KCFG KCACHE EMU_LOG; exports KUBECONFIG.
start_emulator() {
    local name=$1
    shift
    EMU_DIR=$TMP/$name
    mkdir -p "$EMU_DIR"
    EMU_LOG=$EMU_DIR/emulator.log
    /usr/bin/python3 "$EMU_BIN" --listen 127.0.0.1:0 --port-file "$EMU_DIR/port" \
        --kubeconfig-out "$EMU_DIR/kubeconfig" "$@" >"$EMU_LOG" 2>&1 &
    EMU_PID=$!
    PIDS+=("$EMU_PID")
    wait_until 10 "the emulator to write its port" test -s "$EMU_DIR/port"
    EMU_PORT=$(cat "$EMU_DIR/port")
    KCFG=$EMU_DIR/kubeconfig
    KCACHE=$EMU_DIR/kube-cache
    export KUBECONFIG=$KCFG
    if grep -q https "$KCFG"; then EMU_URL=https://127.0.0.1:$EMU_PORT; else EMU_URL=http://127.0.0.1:$EMU_PORT; fi
    EMU_ADMIN=$EMU_URL/_emulator
}

stop_emulator() {
    kill -TERM "$EMU_PID"
    local rc=0
    wait "$EMU_PID" || rc=$?
    [ "$rc" -eq 0 ] || fail "emulator exited $rc on SIGTERM"
}

# kubectl_dir: where the Google Cloud SDK keeps kubectl.1.27 and friends.
kubectl_dir() { dirname "$(readlink -f "$(command -v kubectl)")"; }
