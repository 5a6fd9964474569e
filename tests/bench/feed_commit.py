#!/usr/bin/env python3
"""feed_commit.py - row 4 of `make bench`: COMMIT -> event at the watchers.

Usage: feed_commit.py PERF_TIMES EVENTS

PERF_TIMES is `perf script -F time` of a uprobe on podresd's feed_publish,
recorded with `-k CLOCK_MONOTONIC`: one line per batch published, which the
store does right after the batch's COMMIT returned (its WAL synced). EVENTS
is `podbench watch`'s file: per event "sent first last answer", CLOCK_MONOTONIC
milliseconds. Each event is paired with the last publish between its PUT being
sent and its first watcher having it. Prints p50/p99 of COMMIT -> last watcher
and COMMIT -> first watcher, and how many events had no publish to pair with
(`podbench watch`'s own percentile rule).
"""
import bisect
import sys


def pct(values, p):
    if not values:
        return 0.0
    v = sorted(values)
    return v[int(p * (len(v) - 1) + 0.5)]


def main():
    if len(sys.argv) != 3:
        sys.exit("usage: feed_commit.py PERF_TIMES EVENTS")
    pubs = []
    with open(sys.argv[1]) as f:
        for line in f:
            word = line.strip().rstrip(":")
            if word:
                pubs.append(float(word) * 1e3)
    pubs.sort()
    last, first, unmatched = [], [], 0
    with open(sys.argv[2]) as f:
        for line in f:
            sent, t_first, t_last, _answer = (float(x) for x in line.split())
            i = bisect.bisect_right(pubs, t_first) - 1
            if i < 0 or pubs[i] < sent:
                unmatched += 1
                continue
            last.append(t_last - pubs[i])
            first.append(t_first - pubs[i])
    print("n=%d unmatched=%d p50=%.3f p99=%.3f first_p50=%.3f first_p99=%.3f"
          % (len(last), unmatched, pct(last, 0.5), pct(last, 0.99), pct(first, 0.5),
             pct(first, 0.99)))


if __name__ == "__main__":
    main()
