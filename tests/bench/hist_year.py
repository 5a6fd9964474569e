#!/usr/bin/env python3
"""hist_year.py DB DAYS [PODS] [DEVS] - write DAYS days of binding history into
a podresd database (schema 9, made by podresd and closed): PODS pods
(default 110) of DEVS devices each (default 8, bench.io/gpu "gpu-N"), each
pod restarted once an hour (a new uid of 36 characters, a 2 s gap), ending an
hour ago, all intervals closed. Rows go in time order with the ids podresd gives
(from_ms * 1024 + n), then all of them are folded into the lookups at once,
as podresd's pruning steps would have (schema/0007_history_fold.sql,
0009_history_pod_devices.sql). Prints intervals=N pods=N seconds=S."""
import sqlite3
import sys
import time

db, days = sys.argv[1], int(sys.argv[2])
pods = int(sys.argv[3]) if len(sys.argv) > 3 else 110
devs = int(sys.argv[4]) if len(sys.argv) > 4 else 8
t0 = time.time()
c = sqlite3.connect(db)
c.execute("PRAGMA journal_mode=WAL")
c.execute("PRAGMA synchronous=OFF")
c.execute("PRAGMA cache_size=-262144")
idx = c.execute("SELECT sql FROM sqlite_master WHERE type='index' AND "
                "tbl_name IN ('hist_bind','hist_pod') AND sql IS NOT NULL").fetchall()
for (sql,) in idx:
    c.execute("DROP INDEX " + sql.split()[2])
c.executemany("INSERT OR IGNORE INTO hist_dev(id,resource,device_id) VALUES(?,?,?)",
              [(d + 1, "bench.io/gpu", "gpu-%d" % d) for d in range(pods * devs)])
end_ms = int((time.time() - 3600) * 1000) // 3600000 * 3600000
start_ms = end_ms - days * 86400000
hours = days * 24
seq_last = 0


def rows():
    global seq_last
    n = 0
    for h in range(hours):
        base = start_ms + h * 3600000
        for p in range(pods):
            n += 1
            f = base + p * 1000  # pods restart a second apart
            t = f + 3600000 - 2000
            uid = "%08x-%04x-4%03x-8%03x-%012x" % (n * 2654435761 % 2**32, p, h % 4096, n % 4096, n)
            for k in range(devs):
                i = max(f << 10, seq_last + 1)
                seq_last = i
                yield (i, p * devs + k + 1, p + 1, uid, "main", f, t)


c.executemany("INSERT INTO hist_pod(id,namespace,name,uid) VALUES(?,?,?,'')",
              [(p + 1, "team-%d" % (p % 10), "job-%d" % p) for p in range(pods)])
c.executemany("INSERT INTO hist_bind(id,dev,pod,uid,container,from_ms,to_ms) VALUES(?,?,?,?,?,?,?)",
              rows())
c.execute("INSERT INTO hist_usage(namespace,resource,ms) SELECT p.namespace,'bench.io/gpu',"
          "sum(b.to_ms-b.from_ms) FROM hist_bind b JOIN hist_pod p ON p.id=b.pod GROUP BY 1")
for (sql,) in idx:
    c.execute(sql)
c.execute("INSERT INTO hist_ix_dev(dev,from_ms,id) SELECT dev,from_ms,id FROM hist_bind ORDER BY 1,2,3")
c.execute("INSERT INTO hist_pod_dev(pod,dev,first_ms,last_ms,last_id) SELECT pod,dev,min(from_ms),"
          "max(from_ms),max(id) FROM hist_bind GROUP BY 1,2")
c.execute("UPDATE meta SET value=(SELECT max(id) FROM hist_bind) WHERE key='hist_folded'")
c.commit()
c.execute("PRAGMA wal_checkpoint(TRUNCATE)")
c.close()
print("intervals=%d pods=%d seconds=%.0f" % (hours * pods * devs, hours * pods, time.time() - t0))
