#!/usr/bin/env bash
# The syncer says what it does not do, against the real control plane: a
# bearer token over plain http is refused at start; every binding it does
# not mirror is logged once with its reason and counted by reason (no Pod,
# another Pod instance, the DeviceBinding CRD deleted and applied again); a
# reservation made by hand in podresd is removed and said once.
. "$(dirname "$0")/lib.sh"

metric() { # REASON - podres_syncer_skipped_total{reason=REASON}
    curl -s "http://127.0.0.1:$SY_PORT/metrics" |
        awk -v r="podres_syncer_skipped_total{reason=\"$1\"}" '$1 == r { print $2 }'
}
logged() { grep -cF -- "$1" "$T/syncer.log" || true; } # TEXT - how many log lines hold it
resv_code() { curl -s -o /dev/null -w '%{http_code}' --unix-socket "$PD_SOCK" "http://localhost/v1/reservations/$1"; }
resv_put() { # NS/NAME DEVICE
    req PUT "/v1/reservations/$1" "{\"containers\":[{\"name\":\"main\",\"devices\":[{\"resourceName\":\"example.com/gpu\",\"deviceIds\":[\"$2\"]}]}]}"
    [ "$CODE" = 201 ] || [ "$CODE" = 200 ] || fail "PUT reservation $1: HTTP $CODE $(out)"
}

# ---- a bearer token over http:// ----
# A listener stands where the server would be: it must receive nothing.
HTTP_PORT=$(free_port)
python3 -c '
import socket, sys
s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("127.0.0.1", int(sys.argv[1]))); s.listen(8); s.settimeout(30)
with open(sys.argv[2], "wb") as f:
    while True:
        try:
            c, _ = s.accept()
        except OSError:
            break
        c.settimeout(2)
        try:
            f.write(c.recv(65536)); f.flush()
        except OSError:
            pass
        c.close()
' "$HTTP_PORT" "$T/http-got" &
PIDS+=("$!")
cat > "$T/http.kubeconfig" <<KCFG
apiVersion: v1
kind: Config
clusters:
- name: plain
  cluster: {server: "http://127.0.0.1:$HTTP_PORT"}
users:
- name: robot
  user: {token: not-for-the-wire}
contexts:
- name: main
  context: {cluster: plain, user: robot}
current-context: main
KCFG
rc=0
timeout 20 "$PODRES_BIN/podres-syncer" --node-name test-node --podresd-socket "$T/none.sock" \
    --kubeconfig "$T/http.kubeconfig" --metrics-listen "127.0.0.1:$(free_port)" > "$T/http.log" 2>&1 || rc=$?
[ "$rc" -ne 0 ] && [ "$rc" -ne 124 ] || fail "the syncer with a token over http:// exited $rc: $(cat "$T/http.log")"
grep -qF "cluster \\\"plain\\\" has server 'http://127.0.0.1:$HTTP_PORT' (plain http) and user \\\"robot\\\" a bearer token; refusing to send the token unencrypted" "$T/http.log" ||
    fail "no message naming the cluster and the user: $(cat "$T/http.log")"
! grep -q "not-for-the-wire" "$T/http.log" || fail "the token is in the log"
[ ! -s "$T/http-got" ] || fail "the server received: $(head -c 300 "$T/http-got")"
ok "a kubeconfig with a token over http:// is refused at start, naming cluster and user (exit $rc)"

pd_start
register example.com/gpu "$(jq -nc '[range(0;8) | {id: "gpu-\(.)"}]')"
kube_up
sy_start
kube_ns ml

# ---- a reservation made by hand in podresd ----
resv_put ml/by-hand gpu-7
wait_until 3 sh -c "[ \$(curl -s -o /dev/null -w '%{http_code}' --unix-socket '$PD_SOCK' http://localhost/v1/reservations/ml/by-hand) = 404 ]" ||
    fail "the reservation made by hand is still there: $(resv_code ml/by-hand)"
wait_until 2 grep -qF "removing reservation ml/by-hand made outside a DeviceBinding: this node's reservations are owned by DeviceBindings; pre-assign with a DeviceBinding instead" "$T/syncer.log" ||
    fail "its removal is not logged"
resv_put ml/by-hand-2 gpu-6
wait_until 3 sh -c "[ \$(curl -s -o /dev/null -w '%{http_code}' --unix-socket '$PD_SOCK' http://localhost/v1/reservations/ml/by-hand-2) = 404 ]" ||
    fail "the second reservation made by hand is still there"
sleep 1
[ "$(logged "removing reservation ml/by-hand made outside")" = 1 ] || fail "logged $(logged "removing reservation ml/by-hand made outside") times, want once"
[ "$(logged "removing reservation ml/by-hand-2 made outside")" = 1 ] || fail "the second is not logged once"
ok "a reservation PUT to podresd by hand is removed at once and said once, naming DeviceBindings"

# ---- bindings not mirrored: no Pod, another instance ----
bind ml ghost uid-ghost gpu-0
uid_twin=$(kube_pod ml twin test-node)
bind ml twin not-"$uid_twin" gpu-1
wait_until 5 grep -qF "not mirroring the binding of pod ml/ghost (no_pod): no Pod of that name on node 'test-node' in the API server; waiting for it" "$T/syncer.log" ||
    fail "the binding without a Pod is not logged"
wait_until 5 grep -qF "not mirroring the binding of pod ml/twin (pod_uid_mismatch): podresd has pod uid 'not-$uid_twin', the API server's Pod uid '$uid_twin'" "$T/syncer.log" ||
    fail "the binding of another Pod instance is not logged"
[ "$(metric no_pod)" -ge 1 ] && [ "$(metric pod_uid_mismatch)" -ge 1 ] ||
    fail "not counted: no_pod=$(metric no_pod) pod_uid_mismatch=$(metric pod_uid_mismatch)"
[ "$(metric crd_missing)" = 0 ] && [ "$(metric foreign_label)" = 0 ] || fail "other reasons counted"
bind ml ghost uid-ghost gpu-0 gpu-2 # looked at again: counted again, not logged again
wait_until 5 sh -c "[ \$(curl -s http://127.0.0.1:$SY_PORT/metrics | awk '\$1 == \"podres_syncer_skipped_total{reason=\\\"no_pod\\\"}\" {print \$2}') -ge 2 ]" ||
    fail "the second look is not counted: $(metric no_pod)"
[ "$(logged "binding of pod ml/ghost (no_pod)")" = 1 ] || fail "the skip is logged $(logged "binding of pod ml/ghost (no_pod)") times"
[ "$(dvb_count)" = 0 ] || fail "a DeviceBinding was made"
ok "bindings without their Pod, or of another instance, are logged once with the reason and counted"

# The Pod arrives (podresd learns its uid): mirrored.
uid_ghost=$(kube_pod ml ghost test-node)
bind ml ghost "$uid_ghost" gpu-0 gpu-2
wait_until 5 sh -c "[ \$($KCURL -o /dev/null -w '%{http_code}' '$KUBE_SERVER$DVB/namespaces/ml/devicebindings/ghost') = 200 ]" ||
    fail "ml/ghost not mirrored once its Pod exists"

# ---- the DeviceBinding CRD deleted while the syncer runs, then applied again ----
k delete crd devicebindings.podres.dev --wait=true > /dev/null || fail "cannot delete the CRD"
wait_until 10 grep -qF "the API server does not serve devicebindings (404 for /apis/podres.dev/v1alpha1/devicebindings; is its CustomResourceDefinition installed?)" "$T/syncer.log" ||
    fail "the missing CRD is not logged"
uid_late=$(kube_pod ml late test-node)
bind ml late "$uid_late" gpu-3
wait_until 10 grep -qF "not mirroring the binding of pod ml/late (crd_missing)" "$T/syncer.log" ||
    fail "the binding not mirrored for the missing CRD is not logged"
[ "$(metric crd_missing)" -ge 1 ] || fail "crd_missing not counted"
[ "$(logged "binding of pod ml/late (crd_missing)")" = 1 ] || fail "the crd_missing skip of ml/late is logged more than once"
ok "the CRD deleted: said at info, and each binding not mirrored for it logged once and counted"

# At start, too.
sy_stop
sy_start
wait_until 10 sh -c "[ \$(grep -cF 'the API server does not serve devicebindings' '$T/syncer.log') -ge 2 ]" ||
    fail "a syncer started without the CRD does not say so"

k apply -f "$PODRES_ROOT/schema/crd-devicebinding.yaml" > /dev/null || fail "cannot apply the CRD again"
k wait --for condition=Established --timeout 30s crd/devicebindings.podres.dev > /dev/null || fail "CRD not Established"
wait_until 10 grep -qF "the API server serves devicebindings again" "$T/syncer.log" || fail "the CRD's return is not logged"
wait_until 15 sh -c "[ \$($KCURL -o /dev/null -w '%{http_code}' '$KUBE_SERVER$DVB/namespaces/ml/devicebindings/late') = 200 ]" ||
    fail "ml/late not mirrored after the CRD came back"
wait_until 5 sh -c "[ \$($KCURL -o /dev/null -w '%{http_code}' '$KUBE_SERVER$DVB/namespaces/ml/devicebindings/ghost') = 200 ]" ||
    fail "ml/ghost not mirrored again after the CRD came back"
ok "a syncer started without the CRD says so; the CRD applied again is said, and the bindings mirrored"

sy_stop
pd_stop
