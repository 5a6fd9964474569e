#!/usr/bin/env bash
# tests/bench/run.sh - `make bench`: podres against its references, side by side
# in one run on this machine. Usage: run.sh BIN_DIR TOOLS_DIR [OUT_DIR]
# Every figure is the median of BENCH_RUNS (default 3) runs; each reference is
# measured in the same run, interleaved with the podres figure. Only 127.0.0.1
# and unix sockets are used; every loop is bounded in count and time.
# BENCH_ONLY="writes kubelet" runs only the named parts (get, watchers, writes,
# syncer, restart, kubelet, extender, node, history).
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
BIN=$(cd "$1" && pwd)
TOOLS=$(cd "$2" && pwd)
OUT=${3:-$ROOT/build/bench}
mkdir -p "$OUT" && OUT=$(cd "$OUT" && pwd)
RUNS=${BENCH_RUNS:-3}
BENCH=$ROOT/tests/bench
mkdir -p "$OUT"
# The temp dir is on the disk that holds the repository (the "same disk" for
# podresd and the raw SQLite loop); /dev/shm is used only to prepare the 10k
# binding database quickly.
T=$(mktemp -d "$OUT/run.XXXXXX")
SHM=$(mktemp -d /dev/shm/podres-bench.XXXXXX)
PIDS=()
cleanup() {
    local p
    exec 2>/dev/null   # no "Killed" job notices
    for p in "${PIDS[@]:-}"; do [ -n "$p" ] && kill -9 "$p" 2>/dev/null || true; done
    [ -z "${KDIR:-}" ] || "$ROOT/tests/kube/cluster" down "$KDIR" >/dev/null 2>&1 || true
    [ -n "${BENCH_KEEP:-}" ] || rm -rf "$T"; rm -rf "$SHM"
    [ -z "${PROBE:-}" ] || perf probe -q -d "$PROBE" >/dev/null 2>&1 || true
}
trap cleanup EXIT
trap "exit 130" INT TERM
export PYTHONPATH=$BENCH${PYTHONPATH:+:$PYTHONPATH}
export KUBECACHEDIR=$T/kube-cache  # kubectl's discovery cache stays in the temp dir

log() { printf '[bench %s] %s\n' "$(date +%T)" "$*" >&2; }
die() { log "FAIL: $*"; exit 1; }
free_port() { python3 "$ROOT/tests/py/podres_test/free_port.py"; }
wait_until() { # SECONDS CMD...
    local i=0 limit=$(( $1 * 20 )); shift
    until "$@" >/dev/null 2>&1; do i=$((i + 1)); [ $i -ge $limit ] && return 1; sleep 0.05; done
}
# kv KEY LINE - the value of KEY=VALUE in LINE
kv() { sed -n "s/.*\\b$1=\\([^ ]*\\).*/\\1/p" <<< "$2"; }
median() { printf '%s\n' "$@" | sort -g | awk '{a[NR]=$1} END {if (NR % 2) print a[(NR+1)/2]; else print (a[NR/2]+a[NR/2+1])/2}'; }
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (b == 0) print "-"; else printf "%.2f", a / b }'; }
rss_kib() { awk '/^VmRSS/ {print $2}' "/proc/$1/status"; }
anon_kib() { awk '/^RssAnon/ {print $2}' "/proc/$1/status"; }
mib() { awk -v k="$1" 'BEGIN { printf "%.1f", k / 1024 }'; }
# cpu_ticks PID - user+system clock ticks of the whole process, exited threads included
cpu_ticks() { awk '{print $14 + $15}' "/proc/$1/stat"; }
# metric SOCK NAME - one podresd counter from /metrics
metric() { curl -s --unix-socket "$1" http://localhost/metrics | awk -v n="$2" '$1 == n {print $2}'; }
# cpu_stat - "TOTAL STEAL": all CPUs' clock ticks so far, and those the
# hypervisor gave to other guests (/proc/stat; 0 on bare metal)
cpu_stat() { awk '$1 == "cpu" {print $2 + $3 + $4 + $5 + $6 + $7 + $8 + $9, $9; exit}' /proc/stat; }
# steal_pct "TOTAL0 STEAL0" "TOTAL1 STEAL1" - per cent of the CPU time between
# the two readings that the host took for other guests
steal_pct() {
    awk -v a="$1" -v b="$2" 'BEGIN { split(a, x, " "); split(b, y, " "); t = y[1] - x[1]
        if (t <= 0) print "0.0"; else printf "%.1f", 100 * (y[2] - x[2]) / t }'
}
# cpu_ns PID - CPU time of all threads of PID, in ns
cpu_ns() { cat /proc/"$1"/task/*/schedstat 2>/dev/null | awk '{s += $1} END {printf "%.0f", s}'; }

ROWS=()
# BENCH_ONLY="get writes syncer restart kubelet" - run only those parts
want() { [ -z "${BENCH_ONLY:-}" ] || [[ " $BENCH_ONLY " == *" $1 "* ]]; }
# row ID FIGURE PODRES REFERENCE RATIO GOAL MET
row() { ROWS+=("$1|$2|$3|$4|$5|$6|$7"); printf '  %s %s: %s | ref %s | ratio %s | goal %s | %s\n' "$@" >&2; }
# meets EXPR - "yes" or "**no**" by awk expression
meets() { awk "BEGIN { exit !($1) }" && echo yes || echo '**no**'; }

# pd_start NAME [YAML] - podresd with its own dir $T/NAME; sets PD_PID PD_SOCK PD_PORT PD_DB
pd_start() {
    local d=$T/$1
    mkdir -p "$d"
    PD_PORT=$(free_port); PD_SOCK=$d/podresd.sock; PD_DB=${PD_DB_OVERRIDE:-$d/podresd.db}
    cat > "$d/podresd.yaml" <<YAML
db: $PD_DB
socket: $PD_SOCK
listen: 127.0.0.1:$PD_PORT
node_name: bench-node
log_level: warn
${2:-}
YAML
    "$BIN/podresd" --config "$d/podresd.yaml" >> "$d/podresd.log" 2>&1 &
    PD_PID=$!; PIDS+=("$PD_PID")
    wait_until 10 curl -sf --unix-socket "$PD_SOCK" http://localhost/readyz || die "podresd $1 not ready"
}
pd_stop() { kill -TERM "$1" 2>/dev/null || true; wait "$1" 2>/dev/null || true; }

# kube_up - a real control plane in $T/kube (tests/kube/cluster: etcd, kube-apiserver
# with TLS, RBAC and an audit log, kube-controller-manager; stopped by kube_down, or by
# its watchdog once this shell is gone) with the DeviceBinding CRD and the syncer's
# namespace, ServiceAccount and RBAC from deploy/. Sets KDIR KUBE_SERVER KUBE_CA
# KUBE_AUDIT KUBECTL KCFG (the cluster admin's kubeconfig) KCURL (curl as the admin) and
# SY_KCFG: the podres-syncer ServiceAccount's kubeconfig (a TokenRequest token and the
# cluster's CA), so the syncer runs as in a cluster, with the rights of deploy/rbac.yaml.
KDIR=
kube_up() {
    local tok
    KDIR=$T/kube
    "$ROOT/tests/kube/cluster" up "$KDIR" --owner $$ --crd "$ROOT/schema/crd-devicebinding.yaml" \
        --crd "$ROOT/schema/crd-nodedevices.yaml" \
        > "$T/kube-up.log" 2>&1 || { cat "$T/kube-up.log" >&2; die "the control plane did not start"; }
    # shellcheck disable=SC1091
    . "$KDIR/env"
    KCFG=$KUBECONFIG
    unset KUBECONFIG
    KCURL=(curl -s --cacert "$KUBE_CA" --cert "$KDIR/pki/admin.crt" --key "$KDIR/pki/admin.key")
    "$KUBECTL" --kubeconfig "$KCFG" apply -f "$ROOT/deploy/namespace.yaml" \
        -f "$ROOT/deploy/serviceaccount.yaml" -f "$ROOT/deploy/rbac.yaml" > "$T/kube-install.log" 2>&1 ||
        { cat "$T/kube-install.log" >&2; die "cannot apply deploy/"; }
    # the node's Node, so that the syncer publishes its NodeDevices (owned by it)
    "${KCURL[@]}" -o /dev/null -f -X POST "$KUBE_SERVER/api/v1/nodes" -H 'Content-Type: application/json' \
        --data-binary '{"apiVersion":"v1","kind":"Node","metadata":{"name":"bench-node"}}' ||
        die "cannot create Node bench-node"
    tok=$("$KUBECTL" --kubeconfig "$KCFG" create token podres-syncer -n podres-system --duration 2h) ||
        die "no token for podres-system/podres-syncer"
    SY_KCFG=$T/syncer.kubeconfig
    cat > "$SY_KCFG" <<KCFG
apiVersion: v1
kind: Config
clusters:
- name: bench
  cluster:
    server: $KUBE_SERVER
    certificate-authority-data: $(base64 -w0 < "$KUBE_CA")
users:
- name: podres-syncer
  user:
    token: $tok
contexts:
- name: bench
  context: {cluster: bench, user: podres-syncer, namespace: default}
current-context: bench
KCFG
    chmod 600 "$SY_KCFG"
}
kube_down() { [ -z "$KDIR" ] || "$ROOT/tests/kube/cluster" down "$KDIR" > /dev/null 2>&1 || true; KDIR=; }

# syncer_up - podresd "syncer" and podres-syncer (SY_KCFG) against the control plane of
# kube_up; returns once the node's 110 pods are Bound DeviceBindings.
# Sets S_SOCK S_PID SY_PORT SY_PID.
syncer_up() {
    local d=$T/syncer
    pd_start syncer
    S_SOCK=$PD_SOCK S_PID=$PD_PID
    SY_PORT=$(free_port)
    "$BIN/podres-syncer" --node-name bench-node --podresd-socket "$S_SOCK" --kubeconfig "$SY_KCFG" \
        --metrics-listen "127.0.0.1:$SY_PORT" --qps 1000 --burst 1000 >> "$d/syncer.log" 2>&1 &
    SY_PID=$!; PIDS+=("$SY_PID")
    wait_until 10 curl -sf "http://127.0.0.1:$SY_PORT/healthz" || die "the syncer did not start"
    python3 "$BENCH/syncer_lag.py" setup "$S_SOCK" "$KDIR" bench-node 110 >&2 ||
        die "the syncer did not sync 110 pods"
    sleep 1
}
syncer_down() {
    kill -TERM "$SY_PID" 2>/dev/null || true; wait "$SY_PID" 2>/dev/null || true
    pd_stop "$S_PID"
}

START=$(date +%s) STAT0=$(cpu_stat)
log "machine: $(nproc) CPUs, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ *//')"

# ---------------------------------------------------------------------------
# 1, 2, 6: GET /v1/pods of 110 pods vs nginx; podresd memory
if want get; then
log "1/2/6: podresd with 110 pods x 2 containers x 1..8 devices"
pd_start main
MAIN_PID=$PD_PID MAIN_SOCK=$PD_SOCK MAIN_PORT=$PD_PORT
sleep 0.5
RSS_IDLE=$(rss_kib "$MAIN_PID") AN_IDLE=$(anon_kib "$MAIN_PID")
python3 "$BENCH/populate.py" "$MAIN_SOCK" node 110 >&2
# Steady state: one run of podresd's 10 s housekeeping (idle read connections
# closed, heap trimmed) after the writes; the figure just after is logged too.
sleep 0.5
log "  RSS right after populating: $(mib "$(rss_kib "$MAIN_PID")") MiB"
sleep 10.5
RSS_110=$(rss_kib "$MAIN_PID") AN_110=$(anon_kib "$MAIN_PID")
mkdir -p "$T/www/v1"
curl -sf "http://127.0.0.1:$MAIN_PORT/v1/pods" -o "$T/www/v1/pods"
BODY_BYTES=$(stat -c %s "$T/www/v1/pods")
[ "$(jq '.podResources | length' "$T/www/v1/pods")" = 110 ] || die "110 pods expected"

NG_PORT=$(free_port)
mkdir -p "$T/nginx"
cat > "$T/nginx/nginx.conf" <<NGX
user root;
worker_processes 1;
daemon off;
pid $T/nginx/nginx.pid;
error_log $T/nginx/error.log warn;
events { worker_connections 1024; }
http {
    access_log off;
    client_body_temp_path $T/nginx/body;
    proxy_temp_path $T/nginx/proxy;
    fastcgi_temp_path $T/nginx/fastcgi;
    uwsgi_temp_path $T/nginx/uwsgi;
    scgi_temp_path $T/nginx/scgi;
    keepalive_requests 1000000;
    keepalive_timeout 30s;
    server {
        listen 127.0.0.1:$NG_PORT;
        root $T/www;
        location = /v1/pods { default_type application/json; }
    }
}
NGX
nginx -c "$T/nginx/nginx.conf" -p "$T/nginx" 2>>"$T/nginx/error.log" &
NG_PID=$!; PIDS+=("$NG_PID")
wait_until 10 curl -sf "http://127.0.0.1:$NG_PORT/v1/pods" -o /dev/null || die "nginx did not start"
cmp -s "$T/www/v1/pods" <(curl -sf "http://127.0.0.1:$NG_PORT/v1/pods") || die "nginx bytes differ"

# wrk_run DURATION URL [ARGS] - sets RPS P99 (ms) ERRS
wrk_run() {
    local d=$1 url=$2; shift 2
    wrk -t2 -c32 -d"${d}s" --latency "$@" "$url" > "$T/wrk.out" 2>&1 || true
    RPS=$(awk '/^Requests\/sec/ {print $2}' "$T/wrk.out")
    P99=$(awk '$1 == "99%" { v = $2; if (v ~ /us$/) { sub(/us$/, "", v); v /= 1000 }
          else if (v ~ /ms$/) sub(/ms$/, "", v); else if (v ~ /s$/) { sub(/s$/, "", v); v *= 1000 }
          print v }' "$T/wrk.out")
    ERRS=$(awk '/Non-2xx/ {n += $NF} /Socket errors/ {gsub(/,/, ""); n += $4 + $6 + $8 + $10} END {print n + 0}' "$T/wrk.out")
    [ -n "$RPS" ] || { cat "$T/wrk.out" >&2; die "wrk gave no result"; }
}
PD_URL=http://127.0.0.1:$MAIN_PORT/v1/pods NG_URL=http://127.0.0.1:$NG_PORT/v1/pods
wrk_run 1 "$PD_URL"; wrk_run 1 "$NG_URL"   # warm-up
ka_pd=() ka_ng=() p99_pd=() p99_ng=() cl_pd=() cl_ng=() errs=0
for r in $(seq "$RUNS"); do
    wrk_run 5 "$PD_URL"; ka_pd+=("$RPS"); p99_pd+=("$P99"); errs=$((errs + ERRS))
    wrk_run 5 "$NG_URL"; ka_ng+=("$RPS"); p99_ng+=("$P99")
    log "  keep-alive run $r: podres ${ka_pd[-1]} req/s p99 ${p99_pd[-1]} ms; nginx ${ka_ng[-1]} req/s p99 ${p99_ng[-1]} ms"
done
for r in $(seq "$RUNS"); do
    wrk_run 3 "$PD_URL" -H 'Connection: close'; cl_pd+=("$RPS"); errs=$((errs + ERRS))
    sleep 1
    wrk_run 3 "$NG_URL" -H 'Connection: close'; cl_ng+=("$RPS")
    sleep 1
    log "  close run $r: podres ${cl_pd[-1]} req/s; nginx ${cl_ng[-1]} req/s"
done
a=$(median "${ka_pd[@]}") b=$(median "${ka_ng[@]}"); q=$(ratio "$a" "$b")
row 1a "GET /v1/pods keep-alive req/s (${BODY_BYTES} B, wrk -t2 -c32)" "$a" "$b (nginx)" "$q" "≥ 0.8×" "$(meets "$q >= 0.8")"
a=$(median "${p99_pd[@]}") b=$(median "${p99_ng[@]}"); q=$(ratio "$a" "$b")
row 1b "GET /v1/pods keep-alive p99 ms" "$a" "$b (nginx)" "$q" "≤ 2×" "$(meets "$q <= 2")"
a=$(median "${cl_pd[@]}") b=$(median "${cl_ng[@]}"); q=$(ratio "$a" "$b")
row 2 "GET /v1/pods Connection: close req/s" "$a" "$b (nginx)" "$q" "≥ 0.8×" "$(meets "$q >= 0.8")"
[ "$errs" = 0 ] || log "  podresd: $errs wrk errors (non-2xx or socket errors)"
kill -TERM "$NG_PID" 2>/dev/null || true; wait "$NG_PID" 2>/dev/null || true

# 6: 100 watchers on the 110-pod node
rm -f "$T/watch.ready"
python3 "$BENCH/hold_watchers.py" "$MAIN_SOCK" 100 20 "$T/watch.ready" &
HW=$!; PIDS+=("$HW")
wait_until 15 test -e "$T/watch.ready" || die "100 watchers did not get their lists"
sleep 0.5
log "  RSS right after 100 watchers got their lists: $(mib "$(rss_kib "$MAIN_PID")") MiB"
sleep 10.5
RSS_W=$(rss_kib "$MAIN_PID") AN_W=$(anon_kib "$MAIN_PID")
kill "$HW" 2>/dev/null || true; wait "$HW" 2>/dev/null || true
pd_stop "$MAIN_PID"

fi

# ---------------------------------------------------------------------------
# 6f: 1000 watchers that never read (4 KiB receive buffers) on a node of 2000
# devices; measured before the stall time (30 s) drops them
if want watchers; then
log "6f: 1000 watchers that do not read, 2000 devices"
pd_start stopped
python3 "$BENCH/populate.py" "$PD_SOCK" devs 1000
rm -f "$T/stopped.ready"
python3 "$BENCH/hold_watchers.py" "$PD_SOCK" 1000 28 "$T/stopped.ready" stopped &
HW=$!; PIDS+=("$HW")
wait_until 25 test -e "$T/stopped.ready" || die "1000 watchers did not start"
sleep 1
RSS_STOP=$(rss_kib "$PD_PID") AN_STOP=$(anon_kib "$PD_PID")
kill "$HW" 2>/dev/null || true; wait "$HW" 2>/dev/null || true
pd_stop "$PD_PID"
fi

# ---------------------------------------------------------------------------
# 3, 4: durable writes vs a raw SQLite commit loop; change-feed latency
if want writes; then
log "3/4: durable writes and change-feed latency"
pd_start writes
W_PID=$PD_PID W_SOCK=$PD_SOCK
python3 "$BENCH/populate.py" "$W_SOCK" devs 16
# Steady state, as a node's podresd runs: a 3 s warm-up fills the change
# log's ring (--history 10,000 revisions, three a PUT) and grows the WAL to
# the size it cycles at; a fresh database's first seconds append rows and
# grow files instead. The raw loop reaches its own steady state (a 1,000-frame
# WAL) within each of its runs.
"$TOOLS/podbench" put "$W_SOCK" 16 3 200000 >/dev/null || die "warm-up put"
w1=() w16=() raw=() w1p99=() w16p99=() rtt=() cpus=() per=() steal=()
hz=$(getconf CLK_TCK)
for r in $(seq "$RUNS"); do
    rm -f "$T/raw.db"*
    l=$("$TOOLS/sqlite_commit" "$T/raw.db" 3 200000); raw+=("$(kv rate "$l")")
    l=$("$TOOLS/podbench" get "$W_SOCK" /version 2000); rtt+=("$(kv p50 "$l")")
    l=$("$TOOLS/podbench" put "$W_SOCK" 1 3 200000) || die "put 1: $l"; w1+=("$(kv rate "$l")"); w1p99+=("$(kv p99 "$l")")
    c0=$(cpu_ticks "$W_PID") m0=$(metric "$W_SOCK" podresd_store_commits_total) n0=$(metric "$W_SOCK" podresd_store_writes_total) s0=$(cpu_stat)
    l=$("$TOOLS/podbench" put "$W_SOCK" 16 3 200000) || die "put 16: $l"; w16+=("$(kv rate "$l")"); w16p99+=("$(kv p99 "$l")")
    c1=$(cpu_ticks "$W_PID") m1=$(metric "$W_SOCK" podresd_store_commits_total) n1=$(metric "$W_SOCK" podresd_store_writes_total) s1=$(cpu_stat)
    steal+=("$(steal_pct "$s0" "$s1")")
    cpus+=("$(awk -v t=$((c1 - c0)) -v hz="$hz" -v s="$(kv secs "$l")" 'BEGIN {printf "%.2f", t / hz / s}')")
    per+=("$(ratio $((n1 - n0)) $((m1 - m0)))")
    log "  run $r: raw ${raw[-1]}/s; GET /version p50 ${rtt[-1]} ms; podres 1 client ${w1[-1]}/s (p99 ${w1p99[-1]} ms), 16 clients ${w16[-1]}/s (p99 ${w16p99[-1]} ms, podresd on ${cpus[-1]} CPUs, ${per[-1]} writes/COMMIT, ${steal[-1]} % of CPU time stolen)"
done
rawm=$(median "${raw[@]}")
a=$(median "${w1[@]}"); q=$(ratio "$a" "$rawm")
row 3a "PUT binding, 1 client, writes/s" "$a" "$rawm (raw commit loop)" "$q" "≥ 0.6×" "$(meets "$q >= 0.6")"
a=$(median "${w16[@]}"); q=$(ratio "$a" "$rawm")
row 3b "PUT binding, 16 clients, writes/s (podresd busy on $(median "${cpus[@]}") of $(nproc) CPUs; $(median "${per[@]}") writes per COMMIT; $(median "${steal[@]}") % of CPU time stolen by the host)" "$a" "$rawm (raw, 1 row/commit)" "$q" "≥ 2×" "$(meets "$q >= 2")"
# What one client could reach at best here: one HTTP round trip of a trivial
# request plus one raw commit per write, nothing else.
a=$(awk -v raw="$rawm" -v rtt="$(median "${rtt[@]}")" 'BEGIN {printf "%.1f", 1000 / (1000 / raw + rtt)}')
row 3c "bound for 3a: 1 s / (raw commit + GET /version round trip p50 $(median "${rtt[@]}") ms), writes/s" "$a" "$rawm (raw commit loop)" "$(ratio "$a" "$rawm")" "-" "-"

# Row 4 is COMMIT -> event: a uprobe on feed_publish, which the store calls
# right after a batch's COMMIT returned (its WAL synced), gives each COMMIT's
# time on the clock podbench reads (perf record -k CLOCK_MONOTONIC; root and
# perf needed). Without one, the figure falls back to PUT sent -> last
# watcher, which also holds the write's own parsing, bind and sync.
PROBE=
if [ "$(id -u)" = 0 ] && command -v perf >/dev/null; then
    perf probe -q -d probe_podresd:podres_commit >/dev/null 2>&1 || true # an aborted run's
    if perf probe -q -x "$BIN/podresd" --add 'podres_commit=feed_publish' >/dev/null 2>&1; then
        PROBE=probe_podresd:podres_commit
    fi
fi
f50=() f99=() r50=() r99=() s50=() s99=() q99=()
for r in $(seq "$RUNS"); do
    pp=
    if [ -n "$PROBE" ]; then
        # podbench watch spends its first 2 s on the watchers' lists: perf
        # is attached before the first PUT
        perf record -q -k CLOCK_MONOTONIC -e "$PROBE" -p "$W_PID" -o "$T/commit.$r.data" >/dev/null 2>&1 &
        pp=$!
        PIDS+=("$pp")
    fi
    l=$("$TOOLS/podbench" watch "$W_SOCK" 100 200 "$T/events.$r") || die "watch: $l"
    # the same pace without podresd: a raw commit after every 10 ms of idle
    rm -f "$T/paced.db"*
    p=$("$TOOLS/sqlite_commit" "$T/paced.db" 10 200 10); q99+=("$(kv p99 "$p")")
    r50+=("$(kv put_rtt_p50 "$l")") r99+=("$(kv put_rtt_p99 "$l")")
    s50+=("$(kv p50 "$l")") s99+=("$(kv p99 "$l")")
    if [ -n "$pp" ]; then
        kill -INT "$pp"; wait "$pp" || true
        perf script -i "$T/commit.$r.data" -F time > "$T/commit.$r.txt" 2>/dev/null
        c=$(python3 "$BENCH/feed_commit.py" "$T/commit.$r.txt" "$T/events.$r")
        [ "$(kv unmatched "$c")" = 0 ] || die "COMMIT times for only some events: $c"
        f50+=("$(kv p50 "$c")") f99+=("$(kv p99 "$c")")
        log "  run $r: $l; COMMIT -> watchers: $c; raw commit every 10 ms: $p"
    else
        f50+=("$(kv p50 "$l")") f99+=("$(kv p99 "$l")")
        log "  run $r: $l; raw commit every 10 ms: $p"
    fi
done
[ -z "$PROBE" ] || perf probe -q -d "$PROBE" >/dev/null 2>&1 || true
if [ -n "$PROBE" ]; then from="COMMIT (uprobe)"; else from="PUT sent (no uprobe here)"; fi
g=$("$TOOLS/podbench" get "$W_SOCK" /version 1000)
a=$(median "${f50[@]}") b=$(median "${r50[@]}")
row 4a "change feed p50 ms, $from → last of 100 watchers" "$a" "$b (PUT round trip p50)" "$(ratio "$a" "$b")" "-" "-"
a=$(median "${f99[@]}") b=$(median "${r99[@]}")
row 4b "change feed p99 ms, $from → last of 100 watchers (GET /version RTT p99 $(kv p99 "$g") ms)" "$a" "$b (PUT round trip p99)" "$(ratio "$a" "$b")" "< 10 ms" "$(meets "$a < 10")"
if [ -n "$PROBE" ]; then
    a=$(median "${s99[@]}") b=$(median "${q99[@]}")
    row 4c "p99 ms, PUT sent → last of 100 watchers (the write's own bind and sync included; p50 $(median "${s50[@]}"); PUT round trip p99 $(median "${r99[@]}"))" "$a" "$b (raw commit after 10 ms idle, p99)" "$(ratio "$a" "$b")" "-" "-"
fi
pd_stop "$W_PID"

fi

# ---------------------------------------------------------------------------
# 5, 6: podres-syncer against a real control plane
if want syncer; then
log "5/6: podres-syncer against kube-apiserver"
kube_up
log "  control plane: kube-apiserver $KUBE_VERSION, etcd $ETCD_VERSION on $KUBE_SERVER"
syncer_up
RSS_SY=$(rss_kib "$SY_PID") AN_SY=$(anon_kib "$SY_PID")
# The floor under 6e: the syncer's libraries linked and started, nothing else, its one GET
# over TLS trusting the cluster's CA alone (/version: readable without credentials,
# system:public-info-viewer).
l=$("$TOOLS/lib_floor" "$KUBE_SERVER/version" "$KUBE_CA") || die "lib_floor: $l"
FLOOR_SY=$(kv rss_kib "$l") FLOOR_AN=$(kv anon_kib "$l")
log "  syncer RSS $(mib "$RSS_SY") MiB; its libraries alone (lib_floor over TLS): $(mib "$FLOOR_SY") MiB ($(mib "$FLOOR_AN") anonymous)"
# sylag - the syncer's own sync_lag histogram (a change seen -> acknowledged): "SUM COUNT"
sylag() { curl -s "http://127.0.0.1:$SY_PORT/metrics" | awk '/^podres_syncer_sync_lag_seconds_sum/ {s = $2} /^podres_syncer_sync_lag_seconds_count/ {n = $2} END {print s + 0, n + 0}'; }
lag0=$(sylag)
log "  syncer's own sync_lag mean over the 110 pods' first sync: $(awk '{ if ($2) printf "%.1f", $1 / $2 * 1000; else print "-" }' <<< "$lag0") ms"
# NodeDevices writes from here on: the inventory is steady while pods churn
ndw() { jq -c 'select(.stage == "ResponseComplete" and .objectRef.resource == "nodedevices"
    and (.verb | IN("create","update","patch","delete")) and .responseStatus.code < 300)' "$KUBE_AUDIT" | wc -l; }
# The churn runs' resources registered now (each run's PUT is then no change): what
# follows changes holders only.
for r in $(seq "$RUNS"); do
    curl -sf -o /dev/null --unix-socket "$S_SOCK" -X PUT -H 'Content-Type: application/json' \
        --data-binary "$(jq -nc '{devices: [range(0;50) | {id: "x\(.)"}]}')" \
        "http://localhost/v1/resources/bench.io/lcr$r/devices" || die "register bench.io/lcr$r"
done
nd_has() { "${KCURL[@]}" -f "$KUBE_SERVER/apis/podres.dev/v1alpha1/nodedevices/bench-node" |
    jq -e --arg r "bench.io/lcr$RUNS=50" '.status.summary | contains($r)'; }
wait_until 10 nd_has || die "NodeDevices bench-node lacks bench.io/lcr$RUNS: $(tail -3 "$T/syncer/syncer.log")"
sleep 1.5  # past --inventory-interval: a write still due would be counted
nd0=$(ndw) nd_t0=$(date +%s)
l50=() l99=() per=() ew=()
for r in $(seq "$RUNS"); do
    l=$(python3 "$BENCH/syncer_lag.py" churn "$S_SOCK" "$KDIR" bench-node "r$r" 50 20) || log "  churn: $l"
    l50+=("$(kv p50 "$l")") l99+=("$(kv p99 "$l")") per+=("$(kv per_lifecycle "$l")") ew+=("$(kv api_watch_p50 "$l")")
    log "  run $r: $l"
done
c=$("${KCURL[@]}" -o /dev/null -w '%{http_code}' -X POST "$KUBE_SERVER/api/v1/namespaces" -H 'Content-Type: application/json' \
    --data-binary '{"apiVersion":"v1","kind":"Namespace","metadata":{"name":"curlref"}}')
[ "$c" = 201 ] || die "create namespace curlref: HTTP $c"
cref=() chs=()
for i in $(seq 15); do
    l=$("${KCURL[@]}" -o /dev/null -w '%{http_code} %{time_total} %{time_appconnect}' -X POST -H 'Content-Type: application/json' \
        --data-binary "{\"apiVersion\":\"podres.dev/v1alpha1\",\"kind\":\"DeviceBinding\",\"metadata\":{\"name\":\"ref-$i\",\"namespace\":\"curlref\"},\"spec\":{\"nodeName\":\"nowhere\"}}" \
        "$KUBE_SERVER/apis/podres.dev/v1alpha1/namespaces/curlref/devicebindings")
    [ "${l%% *}" = 201 ] || die "curl POST of a DeviceBinding: HTTP ${l%% *}"
    cref+=("$(awk '{printf "%.3f", $2 * 1000}' <<< "$l")") chs+=("$(awk '{printf "%.3f", $3 * 1000}' <<< "$l")")
done
cm=$(median "${cref[@]}") chm=$(median "${chs[@]}") ewm=$(median "${ew[@]}")
# the syncer's own sync_lag mean over the churn runs alone
SYLAG=$(awk -v a="$lag0" -v b="$(sylag)" 'BEGIN { split(a, x, " "); split(b, y, " ")
    if (y[2] > x[2]) printf "%.1f", (y[1] - x[1]) / (y[2] - x[2]) * 1000; else print "-" }')
log "  kube-apiserver: bare POST -> its own watch event p50 $ewm ms; curl POST p50 $cm ms, of it the TLS handshake (client certificate) $chm ms; syncer's own sync_lag mean (feed seen -> ack) $SYLAG ms"
a=$(median "${l50[@]}")
row 5a "syncer lag p50 ms at 20 changes/s (podresd answer → DeviceBinding watch event, kube-apiserver)" "$a" "$cm (curl POST p50)" "$(ratio "$a" "$cm")" "-" "-"
a=$(median "${l99[@]}")
row 5b "syncer lag p99 ms (kube-apiserver: POST sent → own watch event p50 $ewm ms; syncer's sync_lag mean $SYLAG ms)" "$a" "$cm (curl POST p50)" "$(ratio "$a" "$cm")" "-" "-"
a=$(median "${per[@]}")
row 5c "syncer API requests per pod lifecycle (audit log)" "$a" "1 (curl POST)" "-" "≤ 3" "$(meets "$a <= 3")"
sleep 2
nd_s=$(( $(date +%s) - nd_t0 )) a=$(( ($(ndw) - nd0) * 3600 / nd_s ))
row 5d "NodeDevices writes per hour, steady inventory while pods churn ($nd_s s watched, audit log)" "$a" "-" "-" "0" "$(meets "$a == 0")"
syncer_down
kube_down

fi

if want get; then
row 6a "podresd RSS idle MiB (anonymous part)" "$(mib "$RSS_IDLE") ($(mib "$AN_IDLE"))" "-" "-" "≤ 10" "$(meets "$RSS_IDLE <= 10240")"
row 6b "podresd RSS with 110 pods MiB (anonymous)" "$(mib "$RSS_110") ($(mib "$AN_110"))" "-" "-" "≤ 10" "$(meets "$RSS_110 <= 10240")"
row 6c "podresd RSS 110 pods + 100 watchers MiB (anonymous)" "$(mib "$RSS_W") ($(mib "$AN_W"))" "-" "-" "≤ 10" "$(meets "$RSS_W <= 10240")"
fi
want watchers && row 6f "podresd RSS, 1000 watchers that do not read, 2000 devices MiB (anonymous)" "$(mib "$RSS_STOP") ($(mib "$AN_STOP"))" "-" "-" "< 64" "$(meets "$RSS_STOP < 65536")"
want syncer && row 6e "podres-syncer RSS with 110 pods MiB (anonymous), TLS and a ServiceAccount token" "$(mib "$RSS_SY") ($(mib "$AN_SY"))" "$(mib "$FLOOR_SY") ($(mib "$FLOOR_AN")) (lib_floor over TLS: its libraries started, nothing else)" "$(ratio "$RSS_SY" "$FLOOR_SY")" "≤ 10" "$(meets "$RSS_SY <= 10240")"

# ---------------------------------------------------------------------------
# 7: restart to ready after SIGKILL with 10k bindings
if want restart; then
log "7: restart after SIGKILL with 10k bindings"
PD_DB_OVERRIDE=$SHM/podresd.db pd_start fill
python3 "$BENCH/populate.py" "$PD_SOCK" fill 10000 >&2
pd_stop "$PD_PID"
mkdir -p "$T/restart"
cp "$SHM"/podresd.db* "$T/restart/"
RDB=$T/restart/podresd.db
PD_DB_OVERRIDE=$RDB pd_start restart
R_SOCK=$PD_SOCK
"$TOOLS/podbench" put "$R_SOCK" 4 1 200 > /dev/null 2>&1 || true   # leave a WAL behind
kill -9 "$PD_PID"; wait "$PD_PID" 2>/dev/null || true
rs=() qc=()
for r in $(seq "$RUNS"); do
    l=$("$TOOLS/podbench" ready "$R_SOCK" 30000 "$T/restart/podresd.log" "$BIN/podresd" --config "$T/restart/podresd.yaml") ||
        die "restart: $l"
    rs+=("$(kv ms "$l")"); p=$(kv pid "$l"); PIDS+=("$p")
    "$TOOLS/podbench" put "$R_SOCK" 4 0.5 100 > /dev/null 2>&1 || true
    kill -9 "$p"; sleep 0.2
    l2=$("$TOOLS/podbench" time sqlite3 "$RDB" 'PRAGMA quick_check'); qc+=("$(kv ms "$l2")")
    log "  run $r: restart to ready ${rs[-1]} ms; quick_check ${qc[-1]} ms"
done
[ "$(sqlite3 "$RDB" 'SELECT count(*) FROM pods')" -ge 10000 ] || die "10k bindings expected"
a=$(median "${rs[@]}") b=$(median "${qc[@]}")
row 7 "restart to ready after SIGKILL, 10k bindings, ms" "$a" "$b (sqlite3 quick_check)" "$(ratio "$a" "$b")" "-" "-"

fi

# ---------------------------------------------------------------------------
# 8: kubelet source, an unchanged 110-pod List
if want kubelet; then
log "8: kubelet source"
mkdir -p "$T/kubelet"
python3 - "$T/kubelet/state.json" <<'PY'
import json, sys
import pdhttp
devices, pods = pdhttp.node_pods(110)
out = {"pods": [{"name": n, "namespace": ns, "containers": [
    {"name": c["name"], "devices": [dict(g, topology={"nodes": [{"ID": 0}]}) for g in c["devices"]],
     "cpuIds": c["cpuIds"]} for c in conts]} for ns, n, _, conts in pods],
    "allocatable": {"devices": [{"resourceName": "bench.io/gpu", "deviceIds": [d["id"]],
                                 "topology": d["topology"]} for d in devices], "cpuIds": [], "memory": []}}
json.dump(out, open(sys.argv[1], "w"))
PY
FK_SOCK=$T/kubelet/kubelet.sock
/usr/bin/python3 "$ROOT/tests/fixtures/fake-kubelet" --socket "$FK_SOCK" --state "$T/kubelet/state.json" \
    --log "$T/kubelet/calls.log" 2>> "$T/kubelet/fake.log" &
PIDS+=("$!")
wait_until 15 test -S "$FK_SOCK" || die "fake kubelet did not start"
pd_start kubelet "source: kubelet
kubelet_socket: $FK_SOCK
kubelet_interval: 100ms"
K_PID=$PD_PID K_SOCK=$PD_SOCK K_DB=$PD_DB
wait_until 10 test "$(curl -s --unix-socket "$K_SOCK" http://localhost/v1/pods | jq '.podResources | length')" = 110 ||
    die "kubelet mode did not mirror 110 pods"
sleep 1
printf '\0\0\0\0\0' > "$T/kubelet/empty.bin"
pcpu=() lref=() writes=0
for r in $(seq "$RUNS"); do
    rev0=$(curl -s --unix-socket "$K_SOCK" http://localhost/version | jq .revision)
    st0=$(stat -c '%s %Y' "$K_DB" "$K_DB-wal" 2>/dev/null | tr '\n' ' ')
    c0=$(grep -c List "$T/kubelet/calls.log"); n0=$(cpu_ns "$K_PID")
    sleep 3
    c1=$(grep -c List "$T/kubelet/calls.log"); n1=$(cpu_ns "$K_PID")
    rev1=$(curl -s --unix-socket "$K_SOCK" http://localhost/version | jq .revision)
    st1=$(stat -c '%s %Y' "$K_DB" "$K_DB-wal" 2>/dev/null | tr '\n' ' ')
    [ "$rev0" = "$rev1" ] && [ "$st0" = "$st1" ] || writes=$((writes + 1))
    polls=$((c1 - c0))
    pcpu+=("$(awk -v n=$((n1 - n0)) -v p=$polls 'BEGIN { printf "%.3f", n / p / 1e6 }')")
    lt=()
    for i in $(seq 9); do
        lt+=("$(curl -s --http2-prior-knowledge --unix-socket "$FK_SOCK" -H 'content-type: application/grpc' \
            -H 'te: trailers' --data-binary @"$T/kubelet/empty.bin" -o /dev/null -w '%{time_total}' \
            http://localhost/v1.PodResourcesLister/List | awk '{printf "%.3f", $1 * 1000}')")
        sleep 0.05
    done
    lref+=("$(median "${lt[@]}")")
    log "  run $r: $polls polls, podresd CPU ${pcpu[-1]} ms/poll, revision $rev0 -> $rev1, List alone ${lref[-1]} ms"
done
a=$(median "${pcpu[@]}") b=$(median "${lref[@]}")
row 8a "kubelet poll+reconcile, unchanged 110-pod List: podresd CPU ms/poll" "$a" "$b (List call alone, wall, curl)" "$(ratio "$a" "$b")" "-" "-"
row 8b "database writes during $((RUNS * 3)) s of unchanged polls (runs with a change)" "$writes" "-" "-" "0" "$(meets "$writes == 0")"
pd_stop "$K_PID"

fi

# 9: podres-extender's filter over 5000 nodes vs an empty extender (tests/bench/extender.sh)
if want extender; then
    while IFS='|' read -r tag id fig a b q goal; do
        [ "$tag" = ROW ] && row "$id" "$fig" "$a" "$b" "$q" "$goal" "$(meets "$q <= 3")"
    done < <(bash "$BENCH/extender.sh" "$BIN" "$TOOLS" "$T/extender") || die "extender bench"
fi

# N: on a real node, a pod's creation to its DeviceBinding Bound (tests/bench/node.sh)
if want node; then
    while IFS='|' read -r tag id fig a b q goal met; do
        [ "$tag" = ROW ] && row "$id" "$fig" "$a" "$b" "$q" "$goal" "${met/no/**no**}"
    done < <(bash "$BENCH/node.sh" "$BIN" "$T/node") || die "node bench"
fi

# ---------------------------------------------------------------------------
# H: history (tests/bench/history.sh)
if want history; then . "$BENCH/history.sh"; fi

# ---------------------------------------------------------------------------
{
    echo "| # | figure | podres | reference | ratio | goal | met |"
    echo "| --- | --- | ---: | --- | ---: | --- | --- |"
    for r in "${ROWS[@]}"; do echo "| ${r//|/ | } |"; done
} > "$OUT/table.md"
{
    echo "machine: $(nproc) CPUs, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ *//'), $(free -m | awk '/^Mem/ {print $2}') MiB RAM"
    echo "disk: $(df -h --output=source,fstype "$T" | tail -1 | tr -s ' ') (rotational=$(cat /sys/block/"$(basename "$(df --output=source "$T" | tail -1)")"/queue/rotational 2>/dev/null || echo ?))"
    # (nginx and wrk only when installed: a BENCH_ONLY run may go without make bench-deps)
    echo "kernel: $(uname -r); $(command -v nginx > /dev/null && nginx -v 2>&1 || echo 'no nginx');" \
        "$(command -v wrk > /dev/null && wrk --version 2>&1 | head -1 | cut -c1-40 || echo 'no wrk');" \
        "sqlite $(sqlite3 --version | cut -d' ' -f1)"
    [ -z "${KUBE_VERSION:-}" ] || echo "control plane (rows 5, 6e): kube-apiserver $KUBE_VERSION, etcd $ETCD_VERSION (tests/kube/cluster)"
    echo "runs per figure: $RUNS (medians); total $(( $(date +%s) - START )) s; CPU time stolen by the host (/proc/stat steal): $(steal_pct "$STAT0" "$(cpu_stat)") %"
} > "$OUT/machine.txt"
echo
cat "$OUT/machine.txt"
echo
cat "$OUT/table.md"
