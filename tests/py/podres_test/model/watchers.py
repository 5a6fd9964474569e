# SPDX-License-Identifier: Apache-2.0
"""podres_test.model.watchers - the model's watchers of the change feed: each a
thread that follows GET /v1/watch (from the start, a snapshot, since=REV,
filtered, or resuming over HTTP/1.0) and keeps every event it read, until
the run's last revision (STOP) or its deadline. W holds them, W[0] the one
the checks fold the state from. Not the checks themselves (check.py).
"""
import json
import socket
import threading
import time

from podres_test.client import Prefixed, dial, stream_lines
from podres_test.model.env import FAULT, FAULT_HITS, MULT, SOCK, short

STOP = {"target": None}
DEADLINE = [time.monotonic() + 120 * MULT]


class Watcher(threading.Thread):
    """GET /v1/watch; every line kept in 'lines' as (connection number, event)."""

    def __init__(self, name, query="", since=None, http10=False, resume_every=0):
        super().__init__(daemon=True)
        self.wname, self.query, self.since = name, query, since
        self.http10, self.resume_every = http10, resume_every
        self.filtered = "kind=" in query or "namespace=" in query
        self.lines, self.conns, self.last, self.err, self.done = [], 0, None, None, False
        self.idle_since = time.monotonic()
        self.ready = threading.Event()  # the initial list is in (or since= answered)

    def url(self, since):
        q = (["since=%d" % since] if since is not None else []) + ([self.query] if self.query else [])
        return "/v1/watch" + ("?" + "&".join(q) if q else "")

    def stop(self):
        if time.monotonic() > DEADLINE[0]:
            return True
        if STOP["target"] is None:
            return False
        if self.filtered:
            return W[0].done and time.monotonic() - self.idle_since > 0.5 * MULT
        return self.last is not None and self.last >= STOP["target"]

    def run(self):
        try:
            self.follow()
        except Exception as e:
            self.err = "%s: %s: %s" % (self.wname, type(e).__name__, e)
        self.ready.set()
        self.done = True

    def follow(self):
        since = self.since
        while not self.stop():
            s = dial(SOCK, 0.2)
            self.conns += 1
            s.sendall(("GET %s HTTP/1.%d\r\nHost: localhost\r\n\r\n" %
                       (self.url(since), 0 if self.http10 else 1)).encode())
            head = b""
            while b"\r\n\r\n" not in head:
                try:
                    d = s.recv(4096)
                except socket.timeout:
                    if time.monotonic() > DEADLINE[0]:
                        raise
                    continue
                if not d:
                    raise ValueError("connection closed before the head: %r" % head[:200])
                head += d
            head, rest = head.split(b"\r\n\r\n", 1)
            status = int(head.split(b" ", 2)[1])
            if status != 200:
                if FAULT and status == 503:  # the injected failure: try once more
                    FAULT_HITS.append("watch %s %s: %r" % (self.wname, self.url(since), rest[:200]))
                    s.close()
                    continue
                raise ValueError("HTTP %d for %s: %r" % (status, self.url(since), rest[:300]))
            chunked = b"transfer-encoding: chunked" in head.lower()
            initial = since is None
            if not initial:
                self.ready.set()
            n = 0
            for line in stream_lines(Prefixed(s, rest), chunked, self.stop):
                ev = json.loads(line)
                self.lines.append((self.conns, ev))
                self.idle_since = time.monotonic()
                if ev.get("type") == "ERROR":
                    raise ValueError("ERROR event: %s" % short(ev))
                if ev.get("type") == "BOOKMARK":
                    if initial and ev.get("initialEventsEnd"):
                        initial = False
                        self.ready.set()
                    if not initial:
                        self.last = ev["revision"]
                    continue
                if initial:
                    continue
                self.last = ev["revision"]
                n += 1
                if self.resume_every and n >= self.resume_every:
                    break
            s.close()
            if self.last is not None:
                since = self.last
            elif since is None:
                raise ValueError("the stream ended before its initial list did")

    def parts(self):
        """(initial ADDED list, its bookmark revision or None, the live events)."""
        init, live, bm, initial = [], [], None, self.since is None
        for _, ev in self.lines:
            if ev.get("type") == "BOOKMARK":
                if initial and ev.get("initialEventsEnd"):
                    initial, bm = False, ev["revision"]
                continue
            (init if initial else live).append(ev)
        return init, bm, live


W = []
