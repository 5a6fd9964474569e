#!/usr/bin/env bash
# run-integration.sh [--summary-file F] [TEST...] - run tests/integration/NN-*.sh
# (all, the TEST files given, or those matching $ONLY), each with a time limit,
# printing PASS/FAIL and the tail of a failed test's output. --summary-file F
# writes "passed failed" to F.
#
# Two lanes run side by side (INTEGRATION_LANES=1 for one): the tests that
# start a control plane (kube_up) one after another in one lane, the others
# in the second. So at most one control plane runs at a time, and a 2-CPU
# machine is busy while a test waits on a timeout or a watch.
set -u
cd "$(dirname "$0")/.."
summary=""
[ "${1:-}" = "--summary-file" ] && { summary=$2; shift 2; }
mult=${TEST_TIMEOUT_MULT:-1}
lanes=${INTEGRATION_LANES:-2}
export PODRES_BIN=${PODRES_BIN:-$PWD/bin} PODRES_ROOT=$PWD
[ $# -gt 0 ] || set -- tests/integration/[0-9][0-9]-*.sh
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT

# lane NAME TEST... - run the tests one by one; each result line goes to
# stdout at once, and NAME.pass / NAME.fail count them.
lane() {
    local name=$1 t log start pass=0 fail=0
    shift
    for t in "$@"; do
        log=$(mktemp)
        start=$(date +%s)
        if timeout -k 10 $((300 * mult)) bash "$t" > "$log" 2>&1; then
            pass=$((pass + 1)); echo "PASS $t ($(( $(date +%s) - start ))s)"
        else
            fail=$((fail + 1))
            { echo "FAIL $t ($(( $(date +%s) - start ))s)"; tail -n 40 "$log" | sed 's/^/    /'; } |
                cat   # one write: the other lane's lines do not cut into it
        fi
        rm -f "$log"
    done
    echo "$pass" > "$out/$name.pass"
    echo "$fail" > "$out/$name.fail"
}

kube=() other=()
for t in "$@"; do
    [ -n "${ONLY:-}" ] && [[ "$t" != *"$ONLY"* ]] && continue
    # A test that starts a control plane some other way says "# lane: kube".
    if [ "$lanes" -gt 1 ] && grep -qE '^[^#]*kube_up|^# lane: kube$' "$t"; then
        kube+=("$t")
    else
        other+=("$t")
    fi
done
lane kube "${kube[@]}" &
lane other "${other[@]}"
wait
pass=$(( $(cat "$out/kube.pass") + $(cat "$out/other.pass") ))
fail=$(( $(cat "$out/kube.fail") + $(cat "$out/other.fail") ))
[ -n "$summary" ] && echo "$pass $fail" > "$summary"
[ -z "$summary" ] && echo "${pass} passed, ${fail} failed"
[ "$fail" -eq 0 ]
