# SPDX-License-Identifier: Apache-2.0
"""python3 -m podres_test.idle PORT N - N TCP connections to 127.0.0.1:PORT
that never send a byte (non-blocking connects, not waited for), held until
standard input closes; prints N once they are all started. For the tests of
podresd's descriptor and connection budgets (68, 72): the shell holds a fifo
on standard input while it looks, and closes it to let them go.
"""
import socket
import sys

port, n = int(sys.argv[1]), int(sys.argv[2])
held = []
for i in range(n):
    s = socket.socket()
    s.setblocking(False)
    s.connect_ex(("127.0.0.1", port))
    held.append(s)
print(len(held), flush=True)
sys.stdin.read()
