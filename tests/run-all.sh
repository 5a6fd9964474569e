#!/usr/bin/env bash
# run-all.sh - the whole suite: the static checks (make lint, make
# complexity, make format-check), the Go test fixtures' tests, unit test
# binaries ($UNIT_BINS, TAP) and every tests/integration/NN-*.sh. Prints one
# line per test and the summary "N passed, N failed"; exits non-zero when
# anything failed.
set -u
cd "$(dirname "$0")/.."
pass=0 fail=0 failed=()
logdir=$(mktemp -d "${TMPDIR:-/tmp}/podres-tests.XXXXXX")

# The style rules a tool checks: cppcheck (make lint), pmccabe's cyclomatic
# limit of 15 outside tests/complexity-allow.txt (make complexity) and the
# layout of .clang-format (make format-check). A sub-make inherits the
# caller's variables (SANITIZE=...).
for c in lint complexity format-check; do
    if ${MAKE:-make} -s --no-print-directory "$c" > "$logdir/$c.log" 2>&1; then
        pass=$((pass + 1)); echo "PASS static/$c"
    else
        fail=$((fail + 1)); failed+=("static/$c"); echo "FAIL static/$c"
        tail -n 30 "$logdir/$c.log" | sed 's/^/    /'
    fi
done

# The Go test fixtures' own tests (fault-proxy's fault grammar, streaming
# and admin API), with the Go that `make kube` builds them with.
go=$(command -v go || echo /usr/local/go/bin/go)
if (cd tests/kube && "$go" test ./fault-proxy) > "$logdir/fixtures.log" 2>&1; then
    pass=$((pass + 1)); echo "PASS fixtures/fault-proxy"
else
    fail=$((fail + 1)); failed+=("fixtures/fault-proxy"); echo "FAIL fixtures/fault-proxy"
    tail -n 30 "$logdir/fixtures.log" | sed 's/^/    /'
fi

for t in ${UNIT_BINS:-}; do
    name=unit/$(basename "$t")
    if "$t" > "$logdir/$(basename "$t").log" 2>&1; then
        pass=$((pass + 1)); echo "PASS $name"
    else
        fail=$((fail + 1)); failed+=("$name"); echo "FAIL $name"
        grep -v '^ok ' "$logdir/$(basename "$t").log" | tail -n 30 | sed 's/^/    /'
    fi
done

PODRES_BIN=${PODRES_BIN:-$PWD/bin} ONLY=${ONLY:-} tests/run-integration.sh --summary-file "$logdir/int" || true
read -r ip if_ < "$logdir/int" || { ip=0; if_=1; }
pass=$((pass + ip)); fail=$((fail + if_))
rm -rf "$logdir"
echo "${pass} passed, ${fail} failed"
[ "$fail" -eq 0 ]
