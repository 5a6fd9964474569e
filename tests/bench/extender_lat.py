#!/usr/bin/env python3
"""extender_lat.py URL PODJSON NODES N CERTDIR - POST N ExtenderArgs of one pod
and NODES node names (node-0 ..) to URL/filter (https) on one kept-alive
connection, with CERTDIR's client certificate (podres-extender-certs); prints
"p50_ms p99_ms passed" (passed: NodeNames in the last answer)."""
import http.client, json, ssl, sys, time, urllib.parse

url, podfile, nodes, n, certs = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), sys.argv[5]
u = urllib.parse.urlparse(url)
tls = ssl.create_default_context(cafile=certs + "/ca.crt")
tls.load_cert_chain(certs + "/client.crt", certs + "/client.key")
pod = json.load(open(podfile))
body = json.dumps({"Pod": pod, "NodeNames": ["node-%d" % i for i in range(nodes)]}).encode()
c = http.client.HTTPSConnection(u.hostname, u.port, context=tls)
lat, ans = [], None
for i in range(n + 5):
    t = time.perf_counter()
    c.request("POST", u.path + "/filter", body, {"Content-Type": "application/json"})
    r = c.getresponse()
    data = r.read()
    if i >= 5:  # warm-up
        lat.append((time.perf_counter() - t) * 1000)
    if r.status != 200:
        sys.exit("filter: HTTP %d %s" % (r.status, data[:200]))
    ans = json.loads(data)
lat.sort()
print("%.3f %.3f %d" % (lat[len(lat) // 2], lat[min(len(lat) - 1, int(len(lat) * 0.99))],
                        len(ans.get("NodeNames") or [])))
