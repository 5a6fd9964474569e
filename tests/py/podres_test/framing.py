# SPDX-License-Identifier: Apache-2.0
"""python3 -m podres_test.framing SOCK PORT - test 67's HTTP framing and request
limits, on podresd's unix socket SOCK and its loopback TCP port PORT: two
Content-Length values, Content-Length with chunked, a coding other than one
"chunked", a header name with a space before its colon, two Host headers, a
Host that is not host[:port] or whose port is over 65535 get a 400 Status and
a close; a chunk that declares 2^64-1 bytes gets 413 once the body passes the
limit, at once; a query of 500 pairs a 400 Status on a connection that stays
usable; a Host that names no loopback address is refused (403). Prints "ok - CASE" or "not ok - CASE: why" for each; exits 1 when
any failed.
"""
import json
import sys

from podres_test import client

sock_path, port = sys.argv[1], int(sys.argv[2])
failures = []


def dial(tcp=False):
    return client.dial(port if tcp else sock_path, 5)


def exchange(payload, tcp=False, limit=3.0):
    return client.exchange(port if tcp else sock_path, payload, limit, timeout=5)


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


def space_before_colon():
    # "Transfer-Encoding :chunked" is no Transfer-Encoding to libmicrohttpd,
    # but may be one to a proxy in front: the Content-Length would be ignored there.
    return framing(b"Transfer-Encoding :chunked\r\nContent-Length: %d\r\n" % len(BODY), BODY)


def two_hosts():
    return framing(b"Host: evil.example\r\nContent-Length: %d\r\n" % len(BODY), BODY)


def huge_chunk(tcp=False):
    """A chunk of 2^64-1 bytes, then 2 MiB of it and no more: 413 within 3 s."""
    s = dial(tcp)
    s.sendall(PUT + b"Transfer-Encoding: chunked\r\n\r\nffffffffffffffff\r\n")
    try:
        for _ in range(64):
            s.sendall(b"x" * 32768)
    except OSError:
        pass  # the answer came and the connection closed while sending
    data, _ = client.read_until_close(s, 3.0)
    s.close()
    return want_status(data, 413, "RequestEntityTooLarge")


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
    data, _ = client.read_until_close(s, 2.0)
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
    ("a space before a header's colon: 400, closed", space_before_colon),
    ("two Host headers: 400, closed", two_hosts),
    ("a chunk of 2^64-1 bytes: 413 at the limit", huge_chunk),
    ("a chunk of 2^64-1 bytes over TCP: 413 at the limit", lambda: huge_chunk(True)),
    ("Host 127.0.0.1:80@evil: 400", lambda: host(b"127.0.0.1:80@evil", 400, "BadRequest")),
    ("Host localhost:x: 400", lambda: host(b"localhost:x", 400, "BadRequest")),
    ("Host localhost:99999: 400", lambda: host(b"localhost:99999", 400, "BadRequest")),
    ("Host [::1]:80/x: 400", lambda: host(b"[::1]:80/x", 400, "BadRequest")),
    ("Host evil.example: 403", lambda: host(b"evil.example", 403, "Forbidden")),
    ("Host 127.0.0.1:%d is served" % port, lambda: host(b"127.0.0.1:%d" % port, 200, None)),
    ("Host [::1] is served", lambda: host(b"[::1]", 200, None)),
]:
    case(name, fn)
sys.exit(1 if failures else 0)
