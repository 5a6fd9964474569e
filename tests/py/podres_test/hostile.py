# SPDX-License-Identifier: Apache-2.0
"""python3 -m podres_test.hostile SOCK - test 12's raw hostile byte streams on
podresd's unix socket SOCK: oversized and malformed request lines, headers
and framing, bodies and watches abandoned half way, slowloris, pipelined bad
writes. Each case must get its 4xx (or a close, where that is the answer)
and leave /healthz answering. Prints "ok - raw CASE" or "not ok - raw
CASE: why" for each; exits 1 when any failed. What podresd's state looks
like afterwards is the shell test's to check.
"""
import sys
import threading
import time

from podres_test import client

sock_path = sys.argv[1]
failures = []


def conn():
    return client.dial(sock_path, 10)


def read_all(s, limit=5.0):
    return client.read_until_close(s, limit)[0]


def exchange(payload, limit=5.0):
    return client.exchange(sock_path, payload, limit, timeout=10)[0]


def healthz():
    data = exchange(b"GET /healthz HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n")
    return data.startswith(b"HTTP/1.1 200") and data.endswith(b"\r\n\r\nok")


def case(name, fn):
    try:
        msg = fn()
    except Exception as e:  # noqa: BLE001
        msg = "exception %r" % (e,)
    if msg:
        failures.append("%s: %s" % (name, msg))
        print("not ok - raw %s: %s" % (name, msg))
    elif not healthz():
        failures.append("%s: /healthz does not answer afterwards" % name)
        print("not ok - raw %s: /healthz does not answer afterwards" % name)
    else:
        print("ok - raw %s" % name)


def status_4xx(data):
    return data[:9] == b"HTTP/1.1 " and data[9:10] == b"4"


def long_request_line():
    d = exchange(b"GET /v1/pods?x=" + b"a" * 100000 + b" HTTP/1.1\r\nHost: localhost\r\n\r\n")
    return None if status_4xx(d) else "want a 4xx, got %r" % d[:80]


def long_header():
    d = exchange(b"GET /healthz HTTP/1.1\r\nHost: localhost\r\nX-Big: " + b"a" * 100000 + b"\r\n\r\n")
    return None if status_4xx(d) else "want a 4xx, got %r" % d[:80]


def many_headers():
    d = exchange(b"GET /healthz HTTP/1.1\r\nHost: localhost\r\n" + b"X-A: b\r\n" * 20000 + b"\r\n")
    return None if status_4xx(d) else "want a 4xx, got %r" % d[:80]


def long_auth_header():
    d = exchange(b"PUT /v1/reservations/ns1/r1 HTTP/1.1\r\nHost: localhost\r\nAuthorization: Bearer "
                 + b"t" * 200000 + b"\r\nContent-Length: 2\r\n\r\n{}")
    return None if status_4xx(d) else "want a 4xx, got %r" % d[:80]


def slowloris():
    # 32 connections that never finish their headers, all held open while
    # podresd must keep answering; then abandoned.
    held = []
    for i in range(32):
        s = conn()
        s.sendall(b"PUT /v1/namespaces/ns1/pods/slow-%d HTTP/1.1\r\nHost: local" % i)
        held.append(s)
    time.sleep(0.3)
    for s in held:
        s.sendall(b"h")
    ok = healthz()
    for s in held:
        s.close()
    return None if ok else "/healthz did not answer while 32 partial requests were open"


def abandoned_body():
    s = conn()
    s.sendall(b"PUT /v1/namespaces/ns1/pods/half HTTP/1.1\r\nHost: localhost\r\n"
              b"Content-Type: application/json\r\nContent-Length: 400\r\n\r\n"
              b'{"uid":"u","containers":[{"name":"m","devices":[{"resourceName":"vendor.com/gpu",')
    time.sleep(0.2)
    s.close()
    return None


def abandoned_chunked():
    s = conn()
    s.sendall(b"PUT /v1/namespaces/ns1/pods/half HTTP/1.1\r\nHost: localhost\r\n"
              b"Content-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n"
              b"40\r\n" + b'{"uid":"u","containers":[' + b" " * 30)
    time.sleep(0.2)
    s.close()
    return None


def abandoned_big_body():
    s = conn()
    s.sendall(b"PUT /v1/resources/vendor.com/gpu/devices HTTP/1.1\r\nHost: localhost\r\n"
              b"Content-Type: application/json\r\nContent-Length: 1000000\r\n\r\n" + b" " * 500000)
    s.close()
    return None


def chunked_oversize():
    # Finding: podresd should answer 413; today it drops the connection.
    # Here: it must survive and must not apply anything.
    s = conn()
    s.sendall(b"PUT /v1/resources/vendor.com/gpu/devices HTTP/1.1\r\nHost: localhost\r\n"
              b"Content-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n")
    chunk = b"[" * 65536
    try:
        for _ in range(20):
            s.sendall(b"%x\r\n" % len(chunk) + chunk + b"\r\n")
        s.sendall(b"0\r\n\r\n")
    except (BrokenPipeError, ConnectionResetError):
        pass
    d = read_all(s, 3)
    s.close()
    if d and not d.startswith(b"HTTP/1.1 413"):
        return "want 413 or a dropped connection, got %r" % d[:80]
    return None


def tls_hello():
    d = exchange(b"\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03" + b"\x00" * 200, limit=1.0)
    return None if (not d or status_4xx(d)) else "unexpected answer %r" % d[:80]


def binary_garbage():
    exchange(bytes(range(256)) * 64 + b"\r\n\r\n", limit=1.0)
    return None


def bad_version():
    d = exchange(b"GET /healthz HTTP/9.9\r\nHost: localhost\r\n\r\n")
    return None if d[:10] in (b"HTTP/1.1 4", b"HTTP/1.1 5") else "got %r" % d[:80]


def negative_content_length():
    d = exchange(b"PUT /v1/reservations/ns1/r1 HTTP/1.1\r\nHost: localhost\r\n"
                 b"Content-Length: -1\r\n\r\n{}")
    return None if status_4xx(d) else "want a 4xx, got %r" % d[:80]


def huge_content_length():
    d = exchange(b"PUT /v1/reservations/ns1/r1 HTTP/1.1\r\nHost: localhost\r\n"
                 b"Content-Length: 99999999999999999999999999\r\n\r\n{}")
    return None if status_4xx(d) else "want a 4xx, got %r" % d[:80]


def bad_chunk_size():
    d = exchange(b"PUT /v1/reservations/ns1/r1 HTTP/1.1\r\nHost: localhost\r\n"
                 b"Content-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n"
                 b"zz\r\n{}\r\n0\r\n\r\n")
    return None if status_4xx(d) else "want a 4xx, got %r" % d[:80]


def huge_chunk_size():
    d = exchange(b"PUT /v1/reservations/ns1/r1 HTTP/1.1\r\nHost: localhost\r\n"
                 b"Content-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n"
                 b"ffffffffffffffffffff\r\n{}\r\n0\r\n\r\n", limit=2.0)
    return None if (not d or status_4xx(d)) else "want a 4xx or a close, got %r" % d[:80]


def keepalive_after_error():
    # A 400 must not poison the connection: the next request is answered.
    s = conn()
    body = b'{"devices":['
    s.sendall(b"PUT /v1/resources/vendor.com/gpu/devices HTTP/1.1\r\nHost: localhost\r\n"
              b"Content-Type: application/json\r\nContent-Length: %d\r\n\r\n" % len(body) + body)
    s.sendall(b"GET /healthz HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n")
    d = read_all(s)
    s.close()
    if not d.startswith(b"HTTP/1.1 400") or b'"kind":"Status"' not in d:
        return "first answer is not a 400 Status: %r" % d[:120]
    if b"HTTP/1.1 200" not in d or not d.endswith(b"\r\n\r\nok"):
        return "second request on the connection not answered: %r" % d[-120:]
    return None


def pipelined_hostile():
    reqs = b""
    for body in (b"[1", b'{"x":1}', b'{"containers":{}}', b"\xff\xfe"):
        reqs += (b"PUT /v1/reservations/ns1/r1 HTTP/1.1\r\nHost: localhost\r\n"
                 b"Content-Type: application/json\r\nContent-Length: %d\r\n\r\n" % len(body) + body)
    reqs += b"GET /healthz HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n"
    d = exchange(reqs)
    n400 = d.count(b"HTTP/1.1 400 ")
    if n400 != 4 or not d.endswith(b"\r\n\r\nok"):
        return "want 4 x 400 then ok, got %d x 400: %r" % (n400, d[-120:])
    return None


def watch_abandoned():
    # a watch stream opened and dropped mid-stream, and a bad one
    s = conn()
    s.sendall(b"GET /v1/watch HTTP/1.1\r\nHost: localhost\r\n\r\n")
    s.recv(4096)
    s.close()
    d = exchange(b"GET /v1/watch?since=x HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n")
    return None if d.startswith(b"HTTP/1.1 400") else "bad watch: %r" % d[:80]


def many_short_connections():
    def one():
        try:
            s = conn()
            s.sendall(b"PUT /v1/namespaces/ns1/pods/x HTTP/1.1\r\nHost: localhost\r\n"
                      b"Content-Type: application/json\r\nContent-Length: 5\r\n\r\n{\"a\"")
            s.close()
        except OSError:
            pass
    ths = [threading.Thread(target=one) for _ in range(64)]
    for th in ths:
        th.start()
    for th in ths:
        th.join()
    return None


for name, fn in [
    ("request line of 100 KB", long_request_line),
    ("a header of 100 KB", long_header),
    ("20000 headers", many_headers),
    ("Authorization of 200 KB", long_auth_header),
    ("slowloris: 32 partial requests held open", slowloris),
    ("body abandoned half way", abandoned_body),
    ("chunked body abandoned half way", abandoned_chunked),
    ("1 MB body abandoned half way", abandoned_big_body),
    ("chunked body over 1 MiB", chunked_oversize),
    ("TLS ClientHello on the HTTP socket", tls_hello),
    ("binary garbage", binary_garbage),
    ("HTTP/9.9", bad_version),
    ("Content-Length: -1", negative_content_length),
    ("Content-Length: 10^26", huge_content_length),
    ("chunk size zz", bad_chunk_size),
    ("chunk size 2^80", huge_chunk_size),
    ("keep-alive after a 400", keepalive_after_error),
    ("4 pipelined bad writes", pipelined_hostile),
    ("watch dropped mid-stream", watch_abandoned),
    ("64 truncated writes in parallel", many_short_connections),
]:
    case(name, fn)

sys.exit(1 if failures else 0)
