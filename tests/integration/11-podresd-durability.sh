#!/usr/bin/env bash
# Every acknowledged write survives a restart, SIGKILL included; revisions
# are persisted and never reused.
. "$(dirname "$0")/lib.sh"

pd_start
register example.com/gpu "$(jq -nc '[range(0;64) | {id: "gpu-\(.)"}]')"

# Concurrent binds over the socket while podresd is SIGKILLed.
writer() {
    local i code
    for i in $(seq "$1" 8 400); do
        code=$(curl -s -o /dev/null -w '%{http_code}' -X PUT --unix-socket "$PD_SOCK" \
            -H 'Content-Type: application/json' \
            --data-binary "{\"uid\":\"u$i\",\"containers\":[{\"name\":\"c\",\"cpuIds\":[$i]}]}" \
            "http://localhost/v1/namespaces/ns/pods/p$i" 2>/dev/null) || true
        [ "$code" = 201 ] && echo "p$i" >> "$T/acked.$1"
    done
    return 0
}
for round in 1 2 3; do
    for w in 1 2 3 4; do writer $(( (round - 1) * 4 + w )) & done
    wait_until 5 test -s "$T/acked.$(( (round - 1) * 4 + 1 ))" || true
    sleep 0.$((RANDOM % 5 + 2))
    pd_kill9
    wait || true
    pd_start
    [ "$(pd_sql 'PRAGMA integrity_check')" = ok ] || fail "integrity_check after SIGKILL"
done
# Every acknowledged bind is present.
req GET /v1/pods
jq -r '.podResources[].name' "$T/out" | sort > "$T/present"
cat "$T"/acked.* 2>/dev/null | sort -u > "$T/acked"
missing=$(comm -23 "$T/acked" "$T/present")
[ -z "$missing" ] || fail "acknowledged binds lost after SIGKILL: $missing"
ok "acknowledged binds survive SIGKILL ($(wc -l < "$T/acked") acked)"

rev_before=$(revision)
req PUT /v1/namespaces/keep/pods/k '{"uid":"k","containers":[{"name":"c","devices":[{"resourceName":"example.com/gpu","deviceIds":["gpu-63"]}]}]}'
[ "$CODE" = 201 ] || [ "$CODE" = 409 ] || fail "bind keep/k: $CODE"
rev_after=$(revision)
pd_kill9
pd_start
[ "$(revision)" = "$rev_after" ] || fail "revision after SIGKILL $(revision), want $rev_after"
[ "$rev_after" -gt "$rev_before" ] || [ "$CODE" = 409 ] || fail "revision did not grow"
# The change log has one row per revision, strictly increasing, no gap at the end.
last=$(pd_sql 'SELECT max(revision) FROM changes')
[ "$last" = "$rev_after" ] || fail "change log ends at $last, revision is $rev_after"
gaps=$(pd_sql 'SELECT count(*) FROM changes a WHERE NOT EXISTS (SELECT 1 FROM changes b WHERE b.revision=a.revision-1) AND a.revision > (SELECT min(revision) FROM changes)')
[ "$gaps" = 0 ] || fail "the change log has $gaps gaps"
ok "revision persisted across SIGKILL; change log contiguous"

# A resumed watch after a restart sees the next change exactly once.
r0=$(revision)
pd_stop
pd_start
req PUT /v1/namespaces/keep/pods/k2 '{"uid":"k2","containers":[]}'
expect_code 201
timeout 3 curl -sN --unix-socket "$PD_SOCK" "http://localhost/v1/watch?since=$r0&timeoutSeconds=1" > "$T/w" || true
[ "$(jq -r 'select(.type=="ADDED") | .object.name' "$T/w")" = k2 ] || fail "resume after restart: $(cat "$T/w")"
[ "$(jq -r 'select(.type!="BOOKMARK") | .revision' "$T/w" | head -1)" = $((r0 + 1)) ] || fail "first resumed revision"
ok "watch resumes across a restart"
pd_stop
