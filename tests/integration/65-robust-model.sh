#!/usr/bin/env bash
# 65-robust-model.sh - a seeded, randomized, concurrent run of podresd's write
# API, checked against the change feed and invariants of the state.
#
# MODEL_CLIENTS (default 8) clients, each on its own keep-alive connection,
# send random requests in waves (a random subset of them at once, so that
# podresd commits them in one group, failed ones among them), MODEL_OPS
# (default 150) each: bind (PUT) pods with random device subsets (conflicts,
# unknown devices, a device id two resources share), the same body again,
# allocate and allocate again, release (with no, the right or a wrong uid),
# reservations, re-registration of a device subset (bound devices get
# removed), health PATCHes, and reads (often of the list their last write
# changed). A resource with a 1 s heartbeat lapses meanwhile (podresd's own
# writes). Watchers follow the feed: from the start, a snapshot one started
# mid-run, since=REV mid-run, filtered ones, and one that resumes with
# since= every few events over HTTP/1.0. Every request carries a marker (a
# cpuId, a container name or a device property) so that an event can be
# traced back to the request that made it. Then:
#   - every status is one the contract allows for that request; no 5xx;
#   - each watcher's events have revisions start+1 .. final, once each, in
#     order, each object with its event's revision; types match the state
#     (ADDED for a new key, MODIFIED/DELETED for a present one); no MODIFIED
#     of a pod or reservation that changes nothing;
#   - the state folded from the feed equals every list read during the run at
#     its revision, and the final GET /v1/pods, /v1/devices, /v1/reservations;
#     each other watcher saw exactly W0's events (filtered) after its start;
#   - at every revision an answer reported: no device listed by two pods,
#     holders match the pods' containers, no device held by one pod and
#     reserved for another, reservedFor matches the reservations, and each
#     reservation's state is the one its pod and devices give;
#   - every object in a 2xx answer equals the feed's event at its revision;
#     a 201 made a new object (or a new uid); an allocation is the contract's
#     choice (fewest NUMA nodes, then NUMA ids, then device ids) from the
#     state just before it; no event carries the marker of a request answered
#     4xx; the revisions a client sees never go back (read-your-writes);
#   - after a restart on the same database the lists are identical and
#     since=0 / since=REV replay exactly the events the watchers saw.
# Phases: 1, the whole change log kept (--history 100000); 2, the same
# database on a ring of 400 revisions that the run wraps (since= one before
# the kept ones: 410); 3-8, one allocation failure injected per start
# (FAULT_ALLOC_AT) into short runs: the one request it hits gets a 503 and
# leaves no trace; last, the ring grown back to 100000.
# SEED (printed) replays the same choices: SEED=N ONLY=65 bash tests/run-integration.sh
. "$(dirname "$0")/lib.sh"

START=$SECONDS
SEED=${SEED:-$(( (RANDOM << 15) | RANDOM ))}
echo "# SEED=$SEED (replay: SEED=$SEED ONLY=65 bash tests/run-integration.sh)"
pd_config "history: 100000"
pd_start

mkdir -p "$T/m"
# model run|restart PHASE HISTORY - tests/py/podres_test/model
model() { python3 -m podres_test.model "$1" "$PD_SOCK" "$SEED" "$T/m" "$2" "$3"; }
lapses() { grep -c "heartbeat of resource 'example.com/fpga' lapsed" "$T/podresd.log" || true; }

# Phase 1: the whole change log kept (--history 100000).
model run 1 100000 || fail "phase 1, the concurrent run (SEED=$SEED)"
pd_stop
ok "podresd stopped cleanly after phase 1 ($(lapses) heartbeat lapses)"
pd_start
model restart 1 100000 || fail "phase 1, after the restart (SEED=$SEED)"
pd_stop

# Phase 2: the same database with --history 400: the change log is laid out
# again as a smaller ring, which the run wraps a few times.
rm -f "$T/podresd.yaml"
pd_config "history: 400"
pd_start
grep -q "laid out as a ring of 400 revisions" "$T/podresd.log" || fail "the change log was not laid out again"
model restart 1 400 || fail "phase 2, phase 1's state on a ring of 400 (SEED=$SEED)"
model run 2 400 || fail "phase 2, the concurrent run (SEED=$SEED)"
pd_stop
ok "podresd stopped cleanly after phase 2 ($(lapses) heartbeat lapses in all)"
pd_start
model restart 2 400 || fail "phase 2, after the restart (SEED=$SEED)"
pd_stop

# Phase 3: one allocation failure injected per start (FAULT_ALLOC_AT=N counts
# podresd's guarded allocations from the end of start-up), at a seeded N,
# anywhere in a short concurrent run: the one request it hits gets a 503
# and leaves no trace (a write that failed after emitting events rolls them
# back with its savepoint); everything else is checked as before.
for round in 1 2 3 4 5 6; do
    n=$(( (SEED * 7919 + round * 104729) % 2500 + 450 ))
    export FAULT_ALLOC_AT=$n FAULT_ALLOC_AFTER_START=1
    pd_start
    unset FAULT_ALLOC_AT FAULT_ALLOC_AFTER_START
    echo "# phase $((2 + round)): FAULT_ALLOC_AT=$n"
    MODEL_FAULT=1 model run $((2 + round)) 400 || fail "phase $((2 + round)), FAULT_ALLOC_AT=$n (SEED=$SEED)"
    pd_stop
    pd_start
    model restart $((2 + round)) 400 || fail "phase $((2 + round)), after the restart (SEED=$SEED)"
    pd_stop
done
ok "podresd stopped cleanly after each injected allocation failure"

# The ring grown back to 100000: the 400 revisions it kept are served, the
# one before them is 410.
rm -f "$T/podresd.yaml"
pd_config "history: 100000"
pd_start
model restart 8 400 || fail "the change log grown back to 100000 (SEED=$SEED)"
pd_stop
echo "65-robust-model: SEED=$SEED, $((SECONDS - START)) s"
