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
cat > "$T/framing.py" <<'PY'
import json, socket, sys

sock_path, port = sys.argv[1], int(sys.argv[2])
failures = []

def dial(tcp=False):
    if tcp:
        return socket.create_connection(("127.0.0.1", port), timeout=5)
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.settimeout(5)
    s.connect(sock_path)
    return s

def read_until_close(s, limit=3.0):
    """(bytes, closed): closed is False when the connection stayed open."""
    s.settimeout(limit)
    data = b""
    try:
        while True:
            d = s.recv(65536)
            if not d:
                return data, True
            data += d
    except socket.timeout:
        return data, False
    except ConnectionResetError:
        return data, True

def exchange(payload, tcp=False, limit=3.0):
    s = dial(tcp)
    try:
        s.sendall(payload)
    except (BrokenPipeError, ConnectionResetError):
        pass
    data, closed = read_until_close(s, limit)
    s.close()
    return data, closed

def status_of(data):
    """(HTTP code, Status body dict or None) of the first answer in data."""
    if not data.startswith(b"HTTP/1.1 "):
        return None, None
    head, _, rest = data.partition(b"\r\n\r\n")
    length = 0
    for line in head.split(b"\r\n")[1:]:
        k, _, v = line.partition(b":")
        if k.strip().lower() == b"content-length":
            length = int(v)
    try:
        body = json.loads(rest[:length])
    except ValueError:
        body = None
    return int(data[9:12]), body

def want_status(data, code, reason):
    got, body = status_of(data)
    if got != code:
        return "want %d, got %r" % (code, data[:120])
    if not body or body.get("kind") != "Status" or body.get("reason") != reason \
            or body.get("code") != code:
        return "want a Status %d %s, got %r" % (code, reason, data[:300])
    return None

def case(name, fn):
    try:
        msg = fn()
    except Exception as e:  # noqa: BLE001
        msg = "exception %r" % (e,)
    if msg:
        failures.append(name)
        print("not ok - %s: %s" % (name, msg))
    else:
        print("ok - %s" % name)

PUT = (b"PUT /v1/reservations/ns1/r1 HTTP/1.1\r\nHost: localhost\r\n"
       b"Content-Type: application/json\r\n")
BODY = b'{"containers":[]}'
NEXT = b"GET /healthz HTTP/1.1\r\nHost: localhost\r\n\r\n"

def framing(headers, body):
    """400 Status, then the connection closes and the bytes after the head
    (a second request) are never answered."""
    data, closed = exchange(PUT + headers + b"\r\n" + body + NEXT)
    msg = want_status(data, 400, "BadRequest")
    if msg:
        return msg
    if data.count(b"HTTP/1.1 ") != 1:
        return "more than one answer: the rest was read as a request: %r" % data[-200:]
    return None if closed else "the connection stayed open"

def two_lengths():
    return framing(b"Content-Length: %d\r\nContent-Length: 4\r\n" % len(BODY), BODY)

def length_and_chunked():
    chunked = b"%x\r\n%s\r\n0\r\n\r\n" % (len(BODY), BODY)
    return framing(b"Content-Length: %d\r\nTransfer-Encoding: chunked\r\n" % len(chunked),
                   chunked)

def other_coding():
    return framing(b"Transfer-Encoding: gzip, chunked\r\n", b"0\r\n\r\n")

def two_codings():
    return framing(b"Transfer-Encoding: chunked\r\nTransfer-Encoding: chunked\r\n",
                   b"0\r\n\r\n")

def same_length_twice():
    # RFC 9112 6.3 lets a recipient take identical values as one.
    data, _ = exchange(PUT + b"Content-Length: %d\r\nContent-Length: %d\r\n"
                       b"Connection: close\r\n\r\n" % (len(BODY), len(BODY)) + BODY)
    got, _ = status_of(data)
    return None if got == 201 else "want 201, got %r" % data[:120]

def many_args(n, tcp=False):
    s = dial(tcp)
    q = b"&".join([b"a=1"] * n)
    s.sendall(b"GET /v1/pods?" + q + b" HTTP/1.1\r\nHost: localhost\r\n\r\n" + NEXT)
    data, _ = read_until_close(s, 2.0)
    s.close()
    return data

def args_500():
    data = many_args(500)
    msg = want_status(data, 400, "BadRequest")
    if msg:
        return msg
    if not data.endswith(b"\r\n\r\nok"):
        return "the next request on the connection got no answer: %r" % data[-120:]
    return None

def args_500_tcp():
    return want_status(many_args(500, tcp=True), 400, "BadRequest")

def args_64():
    # 64 is within the limit: parsed, and the route then refuses a parameter it does not take
    data = many_args(64)
    got, _ = status_of(data)
    if got != 400 or b"unknown query parameter 'a'" not in data:
        return "64 arguments: want the route's 400 for parameter 'a', got %r" % data[:300]
    return None

def host(value, code, reason):
    data, _ = exchange(b"GET /v1/pods HTTP/1.1\r\nHost: " + value +
                       b"\r\nConnection: close\r\n\r\n", tcp=True)
    if reason:
        return want_status(data, code, reason)
    got, _ = status_of(data)
    return None if got == code else "want %d, got %r" % (code, data[:120])

for name, fn in [
    ("two Content-Length values: 400, closed", two_lengths),
    ("Content-Length with Transfer-Encoding: chunked: 400, closed", length_and_chunked),
    ("Transfer-Encoding: gzip, chunked: 400, closed", other_coding),
    ("two Transfer-Encoding headers: 400, closed", two_codings),
    ("the same Content-Length twice is one", same_length_twice),
    ("a query of 500 pairs: 400 Status, connection usable", args_500),
    ("a query of 500 pairs over TCP: 400 Status", args_500_tcp),
    ("a query of 64 pairs is parsed (the route then names the parameter it does not take)", args_64),
    ("Host 127.0.0.1:80@evil: 403", lambda: host(b"127.0.0.1:80@evil", 403, "Forbidden")),
    ("Host localhost:x: 403", lambda: host(b"localhost:x", 403, "Forbidden")),
    ("Host [::1]:80/x: 403", lambda: host(b"[::1]:80/x", 403, "Forbidden")),
    ("Host 127.0.0.1:%d is served" % port, lambda: host(b"127.0.0.1:%d" % port, 200, None)),
    ("Host [::1] is served", lambda: host(b"[::1]", 200, None)),
]:
    case(name, fn)
sys.exit(1 if failures else 0)
PY
python3 "$T/framing.py" "$PD_SOCK" "$PD_PORT" || fail "HTTP framing and limits"
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
