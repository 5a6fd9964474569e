#!/usr/bin/env bash
# 67-robust-podresd.sh - podresd's own hardening: HTTP framing and request
# limits that libmicrohttpd leaves open, and the write token's life cycle.
#
# Framing (RFC 9112 6.1, 6.3): two Content-Length headers with different
# values, Content-Length with Transfer-Encoding, or a Transfer-Encoding other
# than one "chunked" get 400 (a Status, reason BadRequest) and the connection
# closes, so that nothing after the headers is read as another request. A
# query of 500 short pairs gets a 400 Status, not a silent close, on a
# connection that stays usable. On TCP a Host whose port part is not digits
# ("127.0.0.1:80@evil") is not loopback: 403 as any other foreign Host.
#
# The write token file is read again when it changes: after a rotation (a
# new file renamed over it, or rewritten in place) the new token works and
# the old one gets 403, without a restart. A file that turns bad (open to
# others, empty, gone) leaves the last good token in force, logged once;
# no token ever reaches the log.
. "$(dirname "$0")/lib.sh"
START=$SECONDS

printf '%s\n' first-token-0123456789 > "$T/token"
chmod 600 "$T/token"
pd_config "write_token_file: $T/token"
pd_start

echo "# HTTP framing and limits"
python3 -m podres_test.framing "$PD_SOCK" "$PD_PORT" || fail "HTTP framing and limits"
req GET /v1/reservations
[ "$(jqo '[.reservations[].name] | join(",")')" = r1 ] ||
    fail "only the well-framed PUT may have written: $(out)"
ok "nothing but the well-framed request was applied"

echo "# the write token file"
W='{"containers":[]}'
tput() { # NAME TOKEN - a reservation written over TCP with TOKEN
    tcp PUT "/v1/reservations/ns1/$1" "$W" "$2"
}
tput t1 first-token-0123456789
expect_code 201 "TCP write with the token read at start"
printf '%s\n' second-token > "$T/token.new"
chmod 600 "$T/token.new"
mv "$T/token.new" "$T/token"
tput t2 first-token-0123456789
expect_status 403 Forbidden "the old token after a rotation by rename"
tput t2 second-token
expect_code 201 "the new token after a rotation by rename"
ok "a token rotated by rename: the new one works, the old one is refused"
printf '%s\n' third--token > "$T/token" # in place, the same size
tput t2 second-token
expect_status 403 Forbidden "the old token after a rewrite in place"
tput t2 third--token
expect_code 200 "the new token after a rewrite in place"
ok "a token rewritten in place: the new one works, the old one is refused"

chmod 644 "$T/token"
for i in 1 2 3; do
    tput t2 third--token
    expect_code 200 "the last good token while the file is open to others ($i)"
done
printf '%s\n' fourth-token > "$T/token" # still 0644: not taken
tput t2 fourth-token
expect_status 403 Forbidden "a token from a file open to others"
n=$(grep -c "write token file '$T/token': permissions 0644 are too open.*last good token" \
    "$T/podresd.log" || true)
[ "$n" = 1 ] || fail "a file open to others: logged $n times, want once"
chmod 600 "$T/token"
tput t2 fourth-token
expect_code 200 "the token once the file is 0600 again"
: > "$T/token" # empty
tput t2 fourth-token
expect_code 200 "the last good token while the file is empty"
rm "$T/token"
tput t2 fourth-token
expect_code 200 "the last good token while the file is gone"
tput t2 third--token
expect_status 403 Forbidden "an older token while the file is gone"
n=$(grep -c "write token file '$T/token': .*last good token" "$T/podresd.log" || true)
[ "$n" = 2 ] || fail "two bad spells (open, then empty and gone): $n warnings, want 2"
printf '%s\n' fifth-token > "$T/token"
chmod 600 "$T/token"
tput t2 fifth-token
expect_code 200 "a good file again"
tput t2 fourth-token
expect_status 403 Forbidden "the last good token once a new good file is read"
! grep -qE 'first-token|second-token|third--token|fourth-token|fifth-token' "$T/podresd.log" ||
    fail "a token in the log"
ok "a bad token file keeps the last good token, logged once a spell; no token logged"

pd_stop
echo "67-robust-podresd: $((SECONDS - START)) s"
