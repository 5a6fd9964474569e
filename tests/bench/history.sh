# tests/bench/history.sh - rows H: the cost of history (sourced by run.sh, whose
# helpers it uses). H1: PUT-binding writes/s (each PUT moves a pod to another
# device with a new uid: one interval closed and one opened) of this build
# against the same sources built with -DPODRES_NO_HISTORY (mk/bench.mk,
# $TOOLS/nohist/podresd: no history triggers), interleaved run by run. H2-H4:
# a database holding a year of churn (HIST_DAYS, default 365, of 110 pods x 8
# devices, each pod restarted once an hour: tests/bench/hist_year.py writes
# it straight into the schema), then p50/p99 of history?device= (a random
# device, a one-day window) and at= (a random time) against GET /version
# through the same connection (tests/bench/hist_query.py), and its size.
log "H: history: writes with and without it; queries on ${HIST_DAYS:-365} days of churn"
NOHIST=$TOOLS/nohist/podresd
# H1's runs: at least 10, an even number (each build first in half of them);
# the figures are 3 s each and move by several per cent from run to run,
# with the host's load: the ratio is the median of each run's pair (the two
# builds one after the other), which that drift moves less than the medians
# of the rates do.
H1_RUNS=$((RUNS < 10 ? 10 : RUNS + RUNS % 2))
[ -x "$NOHIST" ] || die "no $NOHIST (mk/bench.mk builds it)"
hw=() nw=() hw1=() nw1=()
for build in hist nohist; do
    if [ $build = nohist ]; then HBIN=$BIN; BIN=$(dirname "$NOHIST"); fi
    pd_start "h-$build"
    [ $build = nohist ] && BIN=$HBIN
    eval "H_${build}_PID=\$PD_PID H_${build}_SOCK=\$PD_SOCK"
    python3 "$BENCH/populate.py" "$PD_SOCK" devs 16
    "$TOOLS/podbench" put "$PD_SOCK" 16 3 200000 > /dev/null || die "warm-up put"
done
# One 3 s run of build $1 with $2 clients, its rate appended to array $3;
# from a disk with nothing of the run before still to write (a run leaves
# tens of MiB of WAL and checkpoint writeback, which would slow the next
# run's syncs, whichever build that is).
h1_run() {
    local sock l
    eval "sock=\$H_${1}_SOCK"
    sync
    l=$("$TOOLS/podbench" put "$sock" "$2" 3 200000) || die "put: $l"
    log "  H1 $1, $2 clients: $(kv rate "$l") writes/s"
    eval "$3+=(\"\$(kv rate \"\$l\")\")"
}
# Runs alternate which build goes first (hist, nohist; then nohist, hist),
# so neither always follows the other.
for r in $(seq "$H1_RUNS"); do
    if [ $((r % 2)) = 1 ]; then order="hist nohist"; else order="nohist hist"; fi
    for b in $order; do
        if [ $b = hist ]; then h1_run hist 16 hw; else h1_run nohist 16 nw; fi
    done
    for b in $order; do
        if [ $b = hist ]; then h1_run hist 1 hw1; else h1_run nohist 1 nw1; fi
    done
done
pd_stop "$H_hist_PID"; pd_stop "$H_nohist_PID"
# The median of the runs' ratios hist/nohist: arrays $1 and $2, run by run.
paired() {
    local -n x=$1 y=$2
    local i r=()
    for i in "${!x[@]}"; do r+=("$(ratio "${x[$i]}" "${y[$i]}")"); done
    log "  H1 ratios run by run: ${r[*]}"
    printf '%.2f' "$(median "${r[@]}")"
}
a=$(median "${hw[@]}") b=$(median "${nw[@]}") q=$(paired hw nw)
row H1a "PUT binding with history, 16 clients, writes/s (ratio: median of the runs')" "$a" "$b (-DPODRES_NO_HISTORY)" "$q" "≥ 0.9×" "$(meets "$q >= 0.9")"
a=$(median "${hw1[@]}") b=$(median "${nw1[@]}") q=$(paired hw1 nw1)
row H1b "PUT binding with history, 1 client, writes/s (ratio: median of the runs')" "$a" "$b (-DPODRES_NO_HISTORY)" "$q" "≥ 0.9×" "$(meets "$q >= 0.9")"

HDAYS=${HIST_DAYS:-365}
mkdir -p "$T/h-year"
PD_DB_OVERRIDE=$T/h-year/podresd.db pd_start h-year "history_retention: 400d
history_max_intervals: 100000000"
pd_stop "$PD_PID"
l=$(python3 "$BENCH/hist_year.py" "$T/h-year/podresd.db" "$HDAYS") || die "hist_year: $l"
log "  $l"
# hist_year.py leaves ~700 MiB of dirty pages (synchronous=OFF): write them
# out first, so that the queries do not share the disk with their writeback.
sync "$T/h-year/podresd.db"
PD_DB_OVERRIDE=$T/h-year/podresd.db pd_start h-year "history_retention: 400d
history_max_intervals: 100000000"
now=$(date +%s%3N)
l=$(python3 "$BENCH/hist_query.py" "$PD_SOCK" 400 880 $((now - HDAYS * 86400000)) $((now - 3600000))) ||
    die "hist_query: $l"
log "  $l"
pd_stop "$PD_PID"
size=$(stat -c %s "$T/h-year/podresd.db")
a=$(kv device_p50 "$l") b=$(kv version_p50 "$l")
row H2a "history?device= (one day) p50 ms, $HDAYS days of 110 pods x 8 devices x hourly restarts" "$a" "$b (GET /version)" "$(ratio "$a" "$b")" "-" "-"
a=$(kv device_p99 "$l") b=$(kv version_p99 "$l")
row H2b "history?device= (one day) p99 ms" "$a" "$b (GET /version)" "$(ratio "$a" "$b")" "≤ 20 ms" "$(meets "$a <= 20")"
a=$(kv at_p50 "$l") b=$(kv version_p50 "$l")
row H3a "history?at= (every device) p50 ms, $(kv at_n "$l") intervals an answer" "$a" "$b (GET /version)" "$(ratio "$a" "$b")" "-" "-"
a=$(kv at_p99 "$l") b=$(kv version_p99 "$l")
row H3b "history?at= p99 ms" "$a" "$b (GET /version)" "$(ratio "$a" "$b")" "≤ 20 ms" "$(meets "$a <= 20")"
row H4 "database MiB after $HDAYS days of churn ($(kv intervals "$(python3 -c "print('intervals=%d' % ($HDAYS * 24 * 880))")") intervals)" "$(mib $((size / 1024)))" "-" "-" "≤ 1024" "$(meets "$size <= 1073741824")"
