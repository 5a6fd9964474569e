#!/usr/bin/env bash
# run-integration.sh [--summary-file F] [TEST...] - run tests/integration/NN-*.sh
# (all, the TEST files given, or those matching $ONLY), each with a time limit,
# printing PASS/FAIL and the tail of a failed test's output. --summary-file F
# writes "passed failed" to F.
#
# Three lanes run side by side (INTEGRATION_LANES=1 for one): the tests that
# bring up the real node (node_up: one per machine, tests/kube/node) one
# after another, with the control-plane tests numbered from 73 on
# (NODE_LANE_FROM) after them; the other tests that start a control plane
# (kube_up) one after another; and the others. So at most one node and two control planes run at
# a time, and a 2-CPU machine is busy while a test waits on a timeout or a
# watch.
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

node=() kube=() other=()
for t in "$@"; do
    [ -n "${ONLY:-}" ] && [[ "$t" != *"$ONLY"* ]] && continue
    # A test that brings up the real node (or starts a control plane) some
    # other way says "# lane: node" (or "# lane: kube").
    if [ "$lanes" -gt 1 ] && grep -qE '^[^#]*node_up|^# lane: node$' "$t"; then
        node+=("$t")
    elif [ "$lanes" -gt 1 ] && grep -qE '^[^#]*kube_up|^# lane: kube$' "$t"; then
        # The control-plane tests from number $NODE_LANE_FROM on run after the
        # node's, which balances the two lanes (measured on 2 CPUs).
        n=$(basename "$t" | cut -c1-2)
        if [ "$((10#$n))" -ge "${NODE_LANE_FROM:-73}" ]; then node+=("$t"); else kube+=("$t"); fi
    else
        other+=("$t")
    fi
done
lane node "${node[@]}" &
lane kube "${kube[@]}" &
lane other "${other[@]}"
wait
pass=$(( $(cat "$out/node.pass") + $(cat "$out/kube.pass") + $(cat "$out/other.pass") ))
fail=$(( $(cat "$out/node.fail") + $(cat "$out/kube.fail") + $(cat "$out/other.fail") ))
[ -n "$summary" ] && echo "$pass $fail" > "$summary"
[ -z "$summary" ] && echo "${pass} passed, ${fail} failed"
[ "$fail" -eq 0 ]
