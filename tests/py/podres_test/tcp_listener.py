# SPDX-License-Identifier: Apache-2.0
"""python3 -m podres_test.tcp_listener PORT PID SOCK - test 17's checks of the
read-only TCP listener on 127.0.0.1:PORT of podresd PID (unix socket SOCK):
keep-alive, Connection: close and HTTP/1.0 answers; 100 open keep-alive
connections add no threads; 50 partial requests held open stall no other
client; a watch over TCP sees a write made on the unix socket. Prints "ok -
..." per check; exits 1 at the first that fails.
"""
import os
import sys
import time

from podres_test.client import dial as dial_to, read_answer, read_until_close

port, pid, sock_path = int(sys.argv[1]), sys.argv[2], sys.argv[3]
GET = b"GET /v1/pods HTTP/1.1\r\nHost: localhost\r\n\r\n"


def threads():
    return len(os.listdir("/proc/%s/task" % pid))


def dial():
    return dial_to(port, 10)


def fail(msg):
    print("not ok - " + msg)
    sys.exit(1)


# keep-alive: three answers on one connection (0.9.75 closes keep-alive when
# an answer is queued on the first callback)
s = dial()
for i in range(3):
    s.sendall(GET)
    st, body = read_answer(s)
    if st != 200 or b'"p0"' not in body:
        fail("keep-alive answer %d: %d %r" % (i, st, body[:100]))
s.close()
print("ok - three answers on one keep-alive connection")

# Connection: close and HTTP/1.0: the answer, then the close
for req in (b"GET /v1/pods HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n",
            b"GET /v1/pods HTTP/1.0\r\nHost: localhost\r\n\r\n"):
    s = dial()
    s.sendall(req)
    data, _ = read_until_close(s, 10)
    s.close()
    if b" 200 " not in data.split(b"\r\n")[0] or not data.rstrip().endswith(b"}"):
        fail("close answer: %r" % data[:120])
print("ok - Connection: close and HTTP/1.0 answer whole, then close")

# 100 open keep-alive connections, each answered once, add no threads
base = threads()
held = []
for i in range(100):
    s = dial()
    s.sendall(GET)
    st, _ = read_answer(s)
    if st != 200:
        fail("connection %d: %d" % (i, st))
    held.append(s)
now = threads()
if now > base + 4:
    fail("100 open TCP connections took %d threads (%d before)" % (now - base, base))
print("ok - 100 open keep-alive connections: %d threads before, %d with them" % (base, now))

# 50 partial requests held open do not stall another client
partial = []
for i in range(50):
    s = dial()
    s.sendall(b"GET /v1/pods HTTP/1.1\r\nHost: local")
    partial.append(s)
t0 = time.monotonic()
s = dial()
s.sendall(GET)
st, _ = read_answer(s)
took = time.monotonic() - t0
s.close()
if st != 200 or took > 2:
    fail("a GET beside 50 partial requests: %d after %.2f s" % (st, took))
# and the held connections still answer
for i, h in enumerate(held[:10]):
    h.sendall(GET)
    st, _ = read_answer(h)
    if st != 200:
        fail("held connection %d after the partial ones: %d" % (i, st))
print("ok - 50 partial requests held open: another GET answered in %.3f s" % took)
for h in held + partial:
    h.close()

# a watch over TCP: the stream loop takes it and it sees a write
s = dial()
s.sendall(b"GET /v1/watch?kind=PodResources HTTP/1.1\r\nHost: localhost\r\n\r\n")
s.settimeout(10)
data = b""
while b"\r\n\r\n" not in data:
    data += s.recv(4096)
if b"Transfer-Encoding: chunked" not in data or b" 200 " not in data.split(b"\r\n")[0]:
    fail("watch head: %r" % data[:200])
u = dial_to(sock_path)
body = b'{"uid":"u2","containers":[]}'
u.sendall(b"PUT /v1/namespaces/ns1/pods/p2 HTTP/1.1\r\nHost: localhost\r\n"
          b"Content-Type: application/json\r\nContent-Length: %d\r\n\r\n%s" % (len(body), body))
st, _ = read_answer(u)
u.close()
if st != 201:
    fail("bind p2 over the unix socket: %d" % st)
while b'"name":"p2"' not in data:
    chunk = s.recv(4096)
    if not chunk:
        fail("the TCP watch closed before the event: %r" % data[-200:])
    data += chunk
s.close()
print("ok - a watch over TCP gets the event of a write")
