# SPDX-License-Identifier: Apache-2.0
"""podres_test.client - HTTP to podresd for the tests and the bench.

An http.client connection over podresd's unix socket (UnixConn, call, once);
raw sockets for requests written byte by byte and answers read as they come
(dial, exchange, read_until_close, read_answer); the readers of a watch
stream (stream_lines as it arrives, dechunk when read whole); and /metrics
as a dict. Not a general HTTP client: what the tests need to say to podresd
and to see of its answers, exactly.
"""
import http.client
import json
import socket
import time

JSON = "application/json"


def dial(target, timeout=None, retries=0):
    """A connected socket. TARGET: a unix socket's path (str), or a loopback
    TCP port (int). TIMEOUT: of each socket operation, None for none.
    RETRIES: a connect that finds the listen backlog full (BlockingIOError)
    is tried again, 10 ms later, up to that many times, then SystemExit."""
    if isinstance(target, int):
        return socket.create_connection(("127.0.0.1", target), timeout=timeout)
    for _ in range(max(retries, 1)):
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.settimeout(timeout)
        try:
            s.connect(target)
            return s
        except BlockingIOError:  # the listen backlog is full: let podresd accept
            s.close()
            if not retries:
                raise
            time.sleep(0.01)
    raise SystemExit("cannot connect")


class UnixConn(http.client.HTTPConnection):
    """An http.client connection to the unix socket at PATH (Host: localhost),
    kept alive between requests; TIMEOUT and RETRIES as dial()'s."""

    def __init__(self, path, timeout=10, retries=0):
        super().__init__("localhost", timeout=timeout)
        self.unix_path, self.retries = path, retries

    def connect(self):
        self.sock = dial(self.unix_path, self.timeout, self.retries)


def decode(raw):
    """An answer's body: its JSON, or its text when it is not JSON."""
    try:
        return json.loads(raw)
    except ValueError:
        return raw.decode("utf-8", "replace")


def call(conn, method, path, body=None, ctype=JSON, retry=False):
    """One request on CONN: (status, decode(answer)). BODY: bytes or str as
    they are, anything else as JSON; with a body, Content-Type CTYPE. RETRY:
    once more when the server had closed the idle keep-alive connection (the
    bench's long-lived connections); a test that counts a dropped connection
    as a finding leaves it off."""
    data = body if body is None or isinstance(body, (bytes, str)) else json.dumps(body)
    hdrs = {"Content-Type": ctype} if data is not None else {}
    for attempt in (0, 1) if retry else (1,):
        try:
            conn.request(method, path, data, hdrs)
            r = conn.getresponse()
            raw = r.read()
            break
        except (BrokenPipeError, ConnectionResetError, http.client.RemoteDisconnected):
            conn.close()
            if attempt:
                raise
    return r.status, decode(raw)


def once(sock, method, path, body=None, ctype=JSON, timeout=10, retries=0):
    """One request on a connection of its own to the unix socket SOCK, closed
    after it: (status, the answer's bytes)."""
    c = UnixConn(sock, timeout, retries)
    try:
        c.request(method, path, body, {"Content-Type": ctype} if body is not None else {})
        r = c.getresponse()
        return r.status, r.read()
    finally:
        c.close()


def read_until_close(s, limit=None):
    """What S sends until the peer closes (a reset counts as a close) or
    LIMIT seconds pass without a byte: (bytes, closed)."""
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


def exchange(target, payload, limit=5.0, timeout=10):
    """PAYLOAD on a new connection to TARGET (dial()'s), then what comes back
    until it closes or LIMIT seconds pass: (bytes, closed). A peer that
    closes before it has read the whole payload is no error."""
    s = dial(target, timeout)
    try:
        s.sendall(payload)
    except (BrokenPipeError, ConnectionResetError):
        pass
    data, closed = read_until_close(s, limit)
    s.close()
    return data, closed


def read_answer(s):
    """One HTTP/1.1 answer framed by Content-Length from S: (status, body).
    RuntimeError when the connection closes first."""
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = s.recv(65536)
        if not chunk:
            raise RuntimeError("closed before the head: %r" % data[:200])
        data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    length = 0
    for line in head.split(b"\r\n")[1:]:
        k, _, v = line.partition(b":")
        if k.strip().lower() == b"content-length":
            length = int(v)
    while len(body) < length:
        chunk = s.recv(65536)
        if not chunk:
            raise RuntimeError("closed mid-body")
        body += chunk
    return int(head.split(b" ")[1]), body


def dechunk(b):
    """The body of a whole answer (head included) read off the wire: the
    chunks joined when it is chunked, up to the last chunk or the first one
    cut short."""
    head, rest = bytes(b).split(b"\r\n\r\n", 1)
    if b"chunked" not in head.lower():
        return rest
    out = bytearray()
    while True:
        nl = rest.find(b"\r\n")
        if nl < 0:
            return bytes(out)
        n = int(rest[:nl].split(b";")[0], 16)
        if n == 0 or len(rest) < nl + 2 + n:
            return bytes(out)
        out += rest[nl + 2:nl + 2 + n]
        rest = rest[nl + 4 + n:]


class Prefixed:
    """A socket whose first recv() returns REST, the bytes read with the head."""

    def __init__(self, s, rest):
        self.s, self.rest = s, rest

    def recv(self, k):
        if self.rest:
            r, self.rest = self.rest, b""
            return r
        return self.s.recv(k)


def stream_lines(s, chunked, stop):
    """The NDJSON lines of a watch body on socket S (its head already read;
    see Prefixed), as they arrive, chunked or not. Ends at the last chunk,
    at the close of an unchunked stream, or when stop() is true between
    reads (a socket timeout is a chance to ask); ValueError for a chunked
    stream cut before its last chunk or a chunk framed wrong."""
    buf, body, need, eof = b"", b"", None, False
    while True:
        if chunked:
            while True:
                if need is None:
                    i = buf.find(b"\r\n")
                    if i < 0:
                        break
                    size = int(buf[:i].split(b";")[0], 16)
                    buf = buf[i + 2:]
                    if size == 0:
                        eof = True
                        break
                    need = size
                if need > 0:
                    take = buf[:need]
                    body += take
                    buf = buf[len(take):]
                    need -= len(take)
                    if need > 0:
                        break
                if len(buf) < 2:
                    break
                if buf[:2] != b"\r\n":
                    raise ValueError("bad chunk framing: %r" % buf[:40])
                buf, need = buf[2:], None
        else:
            body, buf = body + buf, b""
        while b"\n" in body:
            line, body = body.split(b"\n", 1)
            yield line
        if eof:
            return
        if stop():
            return
        try:
            d = s.recv(65536)
        except socket.timeout:
            continue
        if not d:
            if chunked:
                raise ValueError("the stream ended without its last chunk")
            return
        buf += d


def metrics(target, timeout=None):
    """podresd's /metrics from TARGET (dial()'s) as {sample: value}, empty
    when it does not answer 200; a sample is its name with its labels, as the
    text format writes them."""
    s = dial(target, timeout)
    s.sendall(b"GET /metrics HTTP/1.0\r\n\r\n")
    data, _ = read_until_close(s, timeout)
    s.close()
    head, _, body = data.partition(b"\r\n\r\n")
    out = {}
    if head.split(b" ")[1:2] != [b"200"]:
        return out
    for line in body.decode("utf-8", "replace").splitlines():
        name, _, value = line.rpartition(" ")
        if name and not line.startswith("#"):
            try:
                out[name] = float(value)
            except ValueError:
                pass
    return out
