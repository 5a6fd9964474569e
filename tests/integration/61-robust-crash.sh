#!/usr/bin/env bash
# 61-robust-crash.sh - crash safety.
#
# 1. A schema migration that fails part-way (a table of migration 1 already
#    exists) leaves the database exactly as it was, and podresd exits 1.
# 2. podresd SIGKILLed at every pwrite64, then every fdatasync, of the first
#    start-up (strace
#    injects the signal, so the crash lands inside migration 1 and its
#    commit): the database holds the old schema (nothing) or the new one
#    (all of it), never half, and the next start works.
# 3. $ROUNDS rounds (default 20; make soak runs 200) of concurrent binding
#    writes SIGKILLed at a random moment: every acknowledged write is
#    present after restart, PRAGMA integrity_check is ok, the revision never
#    goes back, the change log is contiguous, and a feed client that resumes
#    with since= after every restart has seen each revision exactly once, in
#    order (no gap, no repeat).
. "$(dirname "$0")/lib.sh"

ROUNDS=${ROUNDS:-20}
START=$SECONDS
pd_config "history: 1000000"
mkdir -p "$(dirname "$PD_DB")"
schema() { sqlite3 "$1" 'PRAGMA user_version; SELECT type || " " || name FROM sqlite_master ORDER BY 1'; }

# ---- 1. a migration that fails part-way ----
sqlite3 "$PD_DB" 'CREATE TABLE devices (x); INSERT INTO devices VALUES (42);'
before=$(schema "$PD_DB")
rc=0
timeout 10 "$PODRES_BIN/podresd" --config "$T/podresd.yaml" >> "$T/podresd.log" 2>&1 || rc=$?
[ "$rc" = 1 ] || fail "podresd on a conflicting database exited $rc, want 1"
grep -q 'apply a schema migration' "$T/podresd.log" || fail "no migration error logged"
[ "$(schema "$PD_DB")" = "$before" ] || fail "failed migration left: $(schema "$PD_DB")"
[ "$(sqlite3 "$PD_DB" 'SELECT x FROM devices')" = 42 ] || fail "pre-existing data changed"
pd_check_log
ok "a migration failing part-way leaves the database as it was (user_version 0)"

# ---- 2. SIGKILL inside the first migration ----
rm -f "$PD_DB"*
pd_start
pd_stop
full=$(schema "$PD_DB")
[ "$(echo "$full" | head -1)" -ge 1 ] || fail "no schema after a clean start"
# kill_walk SYSCALL - SIGKILL at its k-th call for k = 1, 2, ... until
# start-up ends first; counts into OLD and NEW.
kill_walk() {
    local sc=$1 k=0 sp got
    while :; do
        k=$((k + 1))
        rm -f "$PD_DB"*
        strace -f -qq -o /dev/null -e trace="$sc" -e inject="$sc":signal=KILL:when=$k \
            "$PODRES_BIN/podresd" --config "$T/podresd.yaml" >> "$T/podresd.log" 2>&1 &
        sp=$!
        PIDS+=("$sp")
        # Done once podresd serves: the k-th call is past start-up.
        wait_until 5 sh -c "! kill -0 $sp || curl -sf --unix-socket $PD_SOCK http://localhost/healthz" ||
            true
        if kill -0 "$sp" 2>/dev/null; then
            kill -TERM $(pgrep -P "$sp") 2>/dev/null || true # podresd, strace's child
            wait "$sp" 2>/dev/null || true
            break
        fi
        wait "$sp" 2>/dev/null || true
        got=$(schema "$PD_DB" 2>&1) || fail "$sc #$k: unreadable database: $got"
        if [ "$got" = "$full" ]; then
            NEW=$((NEW + 1))
        elif [ "$got" = 0 ]; then
            OLD=$((OLD + 1))
        else
            fail "SIGKILL at $sc #$k left a half schema: $got"
        fi
        [ "$(sqlite3 "$PD_DB" 'PRAGMA integrity_check')" = ok ] || fail "$sc #$k: integrity"
        [ "$k" -lt 200 ] || fail "start-up does not end"
    done
    KILLS=$((KILLS + k - 1))
}
if strace -qq -o /dev/null true 2>/dev/null; then
    OLD=0 NEW=0 KILLS=0
    kill_walk pwrite64 2>/dev/null
    kill_walk fdatasync 2>/dev/null
    [ "$OLD" -gt 0 ] && [ "$NEW" -gt 0 ] || fail "the kills did not land on both sides ($OLD/$NEW)"
    pd_start
    pd_stop
    [ "$(schema "$PD_DB")" = "$full" ] || fail "restart after the kills: $(schema "$PD_DB")"
    ok "SIGKILL at each of $KILLS pwrite64/fdatasync of start-up: $OLD x old schema, $NEW x new, never half"
else
    echo "skip - strace cannot trace here; SIGKILL inside a migration not tested"
fi

# ---- 3. SIGKILL during concurrent writes, with a resuming feed client ----
rm -f "$PD_DB"*
pd_start
register example.com/gpu "$(jq -nc '[range(0;8) | {id: "gpu-\(.)"}]')"
R0=$(revision)

echo "$R0" > "$T/feed.since"
python3 -m podres_test.crash_load "$PD_SOCK" follow "$T/feed" &
FPID=$!
PIDS+=("$FPID")
prev=$R0
for round in $(seq 1 "$ROUNDS"); do
    python3 -m podres_test.crash_load "$PD_SOCK" write "$T/acked" "$round" &
    lp=$!
    wait_until 20 test -e "$T/acked.started.$round" || fail "round $round: the writer did not start"
    # every fifth round lives past podresd's first tick, which folds history
    if [ $((round % 5)) = 0 ]; then
        sleep "1.$((RANDOM % 4))$((RANDOM % 10))"
    else
        sleep "0.$((RANDOM % 3 + 1))$((RANDOM % 10))"
    fi
    pd_kill9
    wait "$lp" || fail "round $round: the writer failed"
    pd_start
    [ "$(pd_sql 'PRAGMA integrity_check')" = ok ] || fail "round $round: integrity_check"
    r=$(revision)
    [ "$r" -ge "$prev" ] || fail "round $round: revision went back from $prev to $r"
    prev=$r
done
ok "$ROUNDS rounds of SIGKILL during concurrent writes; integrity_check ok after each"

# Every acknowledged write is present.
req GET /v1/pods
expect_code 200 "list pods"
jq -r '.podResources[] | .namespace + "/" + .name' "$T/out" | sort > "$T/present"
sort -u "$T/acked" > "$T/acked.s"
[ -s "$T/acked.s" ] || fail "no write was acknowledged in $ROUNDS rounds"
missing=$(comm -23 "$T/acked.s" "$T/present" | head -5)
[ -z "$missing" ] || fail "acknowledged writes lost: $missing"
ok "all $(wc -l < "$T/acked.s") acknowledged writes present ($(wc -l < "$T/present") pods)"

# Every binding has its open history interval, with the same holder, and no
# interval is open without a binding (schema/0004_history.sql; the pod's uid
# is its interval's, 0007_history_fold.sql; an open interval ends at 2^47 - 1
# ms, 0008_history_open.sql, and none at NULL). The intervals are made from
# the binding operations of the change log's rows, all replayed at open
# (0010_history_ops.sql).
left=$(pd_sql "SELECT count(*) FROM changes WHERE hist IS NOT NULL AND revision>(SELECT value
  FROM meta WHERE key='hist_replayed')")
[ "$left" = 0 ] || fail "$left change log rows with binding operations not replayed"
OPEN=140737488355327
orphans=$(pd_sql "SELECT count(*) FROM bindings b LEFT JOIN pods p ON p.namespace=b.namespace
  AND p.name=b.pod WHERE b.pod<>'' AND NOT EXISTS (SELECT 1 FROM hist_bind h JOIN hist_dev d
  ON d.id=h.dev JOIN hist_pod hp ON hp.id=h.pod WHERE h.to_ms=$OPEN AND
  d.resource=b.resource AND d.device_id=b.device_id AND hp.namespace=b.namespace AND
  hp.name=b.pod AND hp.uid||h.uid=ifnull(p.uid,'') AND h.container=b.container)")
[ "$orphans" = 0 ] || fail "$orphans bindings without their open history interval"
nb=$(pd_sql "SELECT count(*) FROM bindings WHERE pod<>''")
no=$(pd_sql "SELECT count(*) FROM hist_bind WHERE to_ms IS NULL OR to_ms>=$OPEN")
[ "$nb" = "$no" ] || fail "$no open intervals for $nb bindings"
[ "$nb" -gt 0 ] || fail "no binding was acknowledged"
ok "each of the $nb bindings has its open history interval, and no other interval is open"

# The lookups hold exactly the intervals up to the fold's mark (by device,
# and each pod's devices with the span of its intervals' starts there), and
# the usage counter exactly the closed ones (nothing was pruned), whichever
# step of the fold the kills hit (schema/0007_history_fold.sql,
# 0009_history_pod_devices.sql).
F="(SELECT value FROM meta WHERE key='hist_folded')"
PD="SELECT pod,dev,min(from_ms),max(from_ms),max(id) FROM hist_bind WHERE id<=$F GROUP BY 1,2"
PDX="SELECT pod,dev,first_ms,last_ms,last_id FROM hist_pod_dev"
bad=$(pd_sql "SELECT (SELECT count(*) FROM hist_bind b WHERE b.id<=$F AND NOT EXISTS (SELECT 1
  FROM hist_ix_dev x WHERE x.dev=b.dev AND x.from_ms=b.from_ms AND x.id=b.id)) + (SELECT count(*)
  FROM hist_ix_dev WHERE id>$F) + (SELECT count(*) FROM ($PD EXCEPT $PDX)) + (SELECT count(*)
  FROM ($PDX EXCEPT $PD))")
[ "$bad" = 0 ] || fail "$bad intervals whose lookup entries disagree with the fold's mark"
usage=$(pd_sql "SELECT ifnull((SELECT sum(ms) FROM hist_usage),0) + ifnull((SELECT
  sum(to_ms-from_ms) FROM hist_bind WHERE to_ms<$OPEN AND (id>$F OR id IN (SELECT id FROM
  hist_unsettled))),0) = ifnull((SELECT sum(to_ms-from_ms) FROM hist_bind WHERE
  to_ms<$OPEN),0)")
[ "$usage" = 1 ] || fail "the usage counter disagrees with the closed intervals"
folded=$(pd_sql "SELECT count(*) FROM hist_bind WHERE id<=$F")
[ "$folded" -gt 0 ] || fail "no interval was folded: the check above checked nothing"
ok "the lookups hold the $folded folded intervals and no other, the usage all closed ones"

# The change log is contiguous and ends at the revision.
final=$(revision)
[ "$(pd_sql 'SELECT max(revision) FROM changes')" = "$final" ] || fail "change log end"
gaps=$(pd_sql "SELECT count(*) FROM changes a WHERE a.revision > $R0 + 1 AND NOT EXISTS (SELECT 1 FROM changes b WHERE b.revision = a.revision - 1)")
[ "$gaps" = 0 ] || fail "the change log has $gaps gaps"

# The feed client saw R0+1 .. final exactly once each, in order.
wait_until 10 grep -q "^$final " "$T/feed" || fail "the feed client did not reach $final"
touch "$T/feed.stop"
kill "$FPID" 2>/dev/null || true
grep -q '^HTTP' "$T/feed" && fail "the feed client got $(grep '^HTTP' "$T/feed" | head -1)"
cut -d' ' -f1 "$T/feed" > "$T/revs"
seq $((R0 + 1)) "$final" > "$T/want"
cmp -s "$T/revs" "$T/want" || fail "feed revisions not R0+1..$final once each: $(diff "$T/want" "$T/revs" | head -5)"
# Every acknowledged pod was seen ADDED in the feed.
awk '$2 == "ADDED" && $3 == "PodResources" { print $4 }' "$T/feed" | sort -u > "$T/fed"
[ -z "$(comm -23 "$T/acked.s" "$T/fed" | head -1)" ] || fail "acked pods missing from the feed"
ok "the resuming feed client saw revisions $((R0 + 1))..$final once each, in order"
pd_stop
echo "61-robust-crash: $ROUNDS rounds, $((SECONDS - START)) s"
