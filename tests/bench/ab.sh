#!/usr/bin/env bash
# tests/bench/ab.sh - `make bench-ab`: durable writes (row 3) of several podresd
# binaries against each other and against the raw SQLite loop, in sets.
# Usage: ab.sh TOOLS_DIR SETS CLIENTS BIN...
# Each binary gets its own daemon and database on the repository's disk,
# 16 devices per client pair (populate.py devs 16) and a 3 s 16-client
# warm-up. Then, per set: the raw loop for 3 s, and each binary's 3 s
# `podbench put` run, the binaries' order rotated by one each set (a binary
# run right after another is not always the same one). Prints each set's
# line, then per binary the median writes/s, the median of its ratios to its
# own set's raw loop, and in how many sets it beat the first binary.
# The share of CPU time the host took (steal) is printed for the whole run.
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
TOOLS=$(cd "$1" && pwd)
SETS=$2
CLIENTS=$3
shift 3
[ $# -ge 1 ] || { echo "usage: ab.sh TOOLS_DIR SETS CLIENTS BIN..." >&2; exit 2; }
BINS=()
for b in "$@"; do BINS+=("$(readlink -f "$b")"); done
N=${#BINS[@]}
mkdir -p "$ROOT/build/bench"
T=$(mktemp -d "$ROOT/build/bench/ab.XXXXXX")
PIDS=()
cleanup() {
    local p
    exec 2>/dev/null
    for p in "${PIDS[@]:-}"; do
        if [ -n "$p" ]; then kill -9 "$p" 2>/dev/null || true; fi
    done
    rm -rf "$T"
}
trap cleanup EXIT
trap "exit 130" INT TERM

die() { echo "ab.sh: $*" >&2; exit 1; }
rate() { sed -n 's/.*\brate=\([0-9.]*\).*/\1/p' <<< "$1"; }
median() { printf '%s\n' "$@" | sort -g | awk '{a[NR]=$1} END {if (NR % 2) print a[(NR+1)/2]; else print (a[NR/2]+a[NR/2+1])/2}'; }
cpu_stat() { awk '$1 == "cpu" {print $2 + $3 + $4 + $5 + $6 + $7 + $8 + $9, $9; exit}' /proc/stat; }

for k in $(seq 0 $((N - 1))); do
    d=$T/$k
    mkdir -p "$d"
    printf 'db: %s/p.db\nsocket: %s/p.sock\nnode_name: bench-node\nlog_level: warn\n' "$d" "$d" > "$d/p.yaml"
    "${BINS[$k]}" --config "$d/p.yaml" >> "$d/log" 2>&1 &
    PIDS+=($!)
    for _ in $(seq 100); do
        curl -sf --unix-socket "$d/p.sock" http://localhost/readyz > /dev/null 2>&1 && break
        sleep 0.1
    done
    curl -sf --unix-socket "$d/p.sock" http://localhost/readyz > /dev/null || die "${BINS[$k]} did not start: $(tail -3 "$d/log")"
    python3 "$ROOT/tests/bench/populate.py" "$d/p.sock" devs 16 > /dev/null || die "populate"
    "$TOOLS/podbench" put "$d/p.sock" 16 3 200000 > /dev/null || die "warm-up"
done

declare -A RATES RATIOS WINS
s0=$(cpu_stat)
for s in $(seq 1 "$SETS"); do
    raw=$(rate "$("$TOOLS/sqlite_commit" "$T/raw.db" 3 200000)")
    line="set $s: raw $raw"
    declare -A got=()
    for i in $(seq 0 $((N - 1))); do
        k=$(( (i + s - 1) % N ))
        got[$k]=$(rate "$("$TOOLS/podbench" put "$T/$k/p.sock" "$CLIENTS" 3 200000)")
    done
    for k in $(seq 0 $((N - 1))); do
        line="$line | $(basename "${BINS[$k]}") ${got[$k]}"
        RATES[$k]="${RATES[$k]:-} ${got[$k]}"
        RATIOS[$k]="${RATIOS[$k]:-} $(awk -v a="${got[$k]}" -v b="$raw" 'BEGIN { printf "%.3f", a / b }')"
        if awk -v a="${got[$k]}" -v b="${got[0]}" 'BEGIN { exit !(a > b) }'; then
            WINS[$k]=$(( ${WINS[$k]:-0} + 1 ))
        fi
    done
    unset got
    echo "$line"
done
s1=$(cpu_stat)
for k in $(seq 0 $((N - 1))); do
    # shellcheck disable=SC2086 # the lists are space-separated numbers
    printf '%s: %s clients, median %s writes/s, median ratio to raw %s' "$(basename "${BINS[$k]}")" \
        "$CLIENTS" "$(median ${RATES[$k]})" "$(median ${RATIOS[$k]})"
    [ "$k" -gt 0 ] && printf ', ahead of %s in %s of %s sets' "$(basename "${BINS[0]}")" "${WINS[$k]:-0}" "$SETS"
    echo
done
awk -v a="$s0" -v b="$s1" 'BEGIN { split(a, x, " "); split(b, y, " "); t = y[1] - x[1]
    printf "steal: %.1f %% of the CPU time\n", (t > 0 ? 100 * (y[2] - x[2]) / t : 0) }'
