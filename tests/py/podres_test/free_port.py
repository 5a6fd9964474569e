# SPDX-License-Identifier: Apache-2.0
"""podres_test.free_port - a free loopback TCP port for a test's listener;
run as a script (tests/integration/lib.sh, tests/kube/cluster, the bench)
it prints one.

The port is taken below the kernel's ephemeral range: a port from bind(0)
lies inside it, where any outgoing connection on the machine (a test's
curl, the API server's to etcd) may take it before the listener binds.
"""
import random
import socket

SPAN = 10000  # ports tried below the ephemeral range


def ephemeral_low():
    try:
        with open("/proc/sys/net/ipv4/ip_local_port_range") as f:
            return int(f.read().split()[0])
    except (OSError, ValueError, IndexError):
        return 32768


def bindable(port):
    s = socket.socket()
    try:
        s.bind(("127.0.0.1", port))
        return True
    except OSError:
        return False
    finally:
        s.close()


def free_port():
    low = ephemeral_low()
    if low - SPAN >= 1024:
        for _ in range(100):
            port = random.randrange(low - SPAN, low)
            if bindable(port):
                return port
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


if __name__ == "__main__":
    print(free_port())
