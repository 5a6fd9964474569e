#!/usr/bin/env bash
# run-integration.sh [--summary-file F] [TEST...] - run tests/integration/NN-*.sh
# (all, the TEST files given, or those matching $ONLY), each with a time limit,
# printing PASS/FAIL and the tail of a failed test's output. --summary-file F
# writes "passed failed" to F.
set -u
cd "$(dirname "$0")/.."
summary=""
[ "${1:-}" = "--summary-file" ] && { summary=$2; shift 2; }
mult=${TEST_TIMEOUT_MULT:-1}
export PODRES_BIN=${PODRES_BIN:-$PWD/bin} PODRES_ROOT=$PWD
pass=0 fail=0
[ $# -gt 0 ] || set -- tests/integration/[0-9][0-9]-*.sh
for t in "$@"; do
    [ -n "${ONLY:-}" ] && [[ "$t" != *"$ONLY"* ]] && continue
    log=$(mktemp)
    start=$(date +%s)
    if timeout -k 10 $((300 * mult)) bash "$t" > "$log" 2>&1; then
        pass=$((pass + 1)); echo "PASS $t ($(( $(date +%s) - start ))s)"
    else
        fail=$((fail + 1)); echo "FAIL $t ($(( $(date +%s) - start ))s)"
        tail -n 40 "$log" | sed 's/^/    /'
    fi
    rm -f "$log"
done
[ -n "$summary" ] && echo "$pass $fail" > "$summary"
[ -z "$summary" ] && echo "${pass} passed, ${fail} failed"
[ "$fail" -eq 0 ]
