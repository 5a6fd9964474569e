#!/usr/bin/env bash
# The API server comes back with its state reset (etcd wiped, as after a
# restore to an empty or older snapshot): every object is gone and
# resourceVersions go backwards. The syncer, not restarted, notices (a watch
# from a resourceVersion the server does not have yet), lists again, says so
# once at info level, is not ready while it cannot make progress, and
# converges to exactly the node's state within its resync bound.
. "$(dirname "$0")/lib.sh"

pd_start
register example.com/gpu "$(jq -nc '[range(0;6) | {id: "gpu-\(.)"}]')"
kube_up
# A client certificate survives the wipe (a ServiceAccount token names the
# ServiceAccount's uid, which a wiped server no longer has).
cert_kubeconfig podres-syncer-node "$T/syncer-cert.kubeconfig"
uid0=$(kube_pod ml p0 test-node)
uid1=$(kube_pod ml p1 test-node)
bind ml p0 "$uid0" gpu-0
bind ml p1 "$uid1" gpu-1 gpu-2
SY_KCFG=$T/syncer-cert.kubeconfig sy_start --resync-interval 10s
bound() { [ "$(dvb_get ml "$1" | jq -r '.status.phase // empty')" = Bound ]; }
wait_until 10 bound p0 && wait_until 5 bound p1 || fail "no DeviceBindings before the reset"

# Enough writes that the resourceVersion the syncer holds is well past what
# a fresh server reaches after its bootstrap and the objects made again.
$KCURL -o /dev/null -X POST -H 'Content-Type: application/json' \
    -d '{"apiVersion":"v1","kind":"ConfigMap","metadata":{"generateName":"filler-"}}' \
    $(for _ in $(seq 1 400); do printf '%s ' "$KUBE_SERVER/api/v1/namespaces/default/configmaps"; done)
rv_of() { $KCURL "$KUBE_SERVER/api/v1/namespaces/default/configmaps?limit=1" | jq -r .metadata.resourceVersion; }
rv_before=$(rv_of)
# A change the syncer writes, so that its DeviceBinding watch moves on too.
bind ml p1 "$uid1" gpu-1
wait_until 5 sh -c "[ \"\$($KCURL '$KUBE_SERVER$DVB/namespaces/ml/devicebindings/p1' | jq -r .status.summary)\" = example.com/gpu=1 ]" ||
    fail "no update before the reset"
wait_until 5 sh -c "curl -sf http://127.0.0.1:$SY_PORT/readyz | grep -qx ok" || fail "not ready before the reset"
ok "synced; resourceVersion $rv_before"

# Down: the syncer cannot make progress, and says so on /readyz.
"$PODRES_ROOT/tests/kube/cluster" down "$KDIR"
wait_until 30 sh -c "[ \$(curl -s -o /dev/null -w '%{http_code}' http://127.0.0.1:$SY_PORT/readyz) = 503 ]" ||
    fail "still ready with the API server down: $(curl -s "http://127.0.0.1:$SY_PORT/readyz")"
"$PODRES_ROOT/tests/kube/cluster" restart "$KDIR" --wipe > "$T/restart.log" 2>&1 ||
    { cat "$T/restart.log" >&2; fail "the control plane did not come back"; }
kube_install
k create clusterrolebinding podres-syncer-node --clusterrole podres-syncer --user podres-syncer-node > /dev/null
# The pods come back as new instances (new uids); the runtime binds them again.
# p0 does not come back: its binding in podresd goes.
uid1b=$(kube_pod ml p1 test-node)
uid2=$(kube_pod ml p2 test-node)
req DELETE /v1/namespaces/ml/pods/p0
bind ml p1 "$uid1b" gpu-1 gpu-3
bind ml p2 "$uid2" gpu-4
rv_after=$(rv_of)
[ "$rv_after" -lt "$rv_before" ] ||
    fail "the resourceVersion did not go back ($rv_before, then $rv_after): the test tests nothing"
ok "etcd wiped: resourceVersion $rv_before went back to $rv_after"

# Exactly the node's state: p1 and p2 with their new owners, nothing else,
# within the resync bound (10 s) and a margin for the backoff.
exact() {
    [ "$($KCURL "$KUBE_SERVER$DVB/devicebindings" | jq -r '[.items[] | "\(.metadata.namespace)/\(.metadata.name)=\(.status.summary)@\(.metadata.ownerReferences[0].uid)"] | sort | join(" ")')" = \
      "ml/p1=example.com/gpu=2@$uid1b ml/p2=example.com/gpu=1@$uid2" ]
}
t0=$(date +%s)
wait_until 30 exact || fail "not the node's state after the reset: $($KCURL "$KUBE_SERVER$DVB/devicebindings" | jq -c '[.items[] | {n: .metadata.name, s: .status.summary, o: .metadata.ownerReferences}]'); $(tail -5 "$T/syncer.log")"
ok "converged to exactly the node's state in $(( $(date +%s) - t0 )) s, without a restart"

wait_until 10 sh -c "curl -sf http://127.0.0.1:$SY_PORT/readyz | grep -qx ok" || fail "not ready after the reset"
n=$(grep -ciE 'state (was )?reset|resourceVersion went back|too large resource version' "$T/syncer.log" || true)
[ "$n" -ge 1 ] || fail "the reset is not logged: $(grep -i 'info\|warn' "$T/syncer.log" | tail -5)"
[ "$n" -le 4 ] || fail "the reset is logged $n times: $(grep -iE 'reset|went back|too large' "$T/syncer.log" | head -5)"
ok "the reset is logged ($n lines), and the syncer is ready again"

# Idle afterwards: no writes.
w0=$(writes_by podres-syncer-node)
sleep $((12 * MULT))
[ "$(writes_by podres-syncer-node)" = "$w0" ] || fail "writes while nothing changed after the reset"
ok "no writes while nothing changes"
sy_stop
pd_stop
