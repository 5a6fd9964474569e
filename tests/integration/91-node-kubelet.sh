#!/usr/bin/env bash
# 91-node-kubelet.sh - podresd (source kubelet, this tree's binary) against
# the real kubelet of tests/kube/node and the upstream sample device plugin:
# the kubelet's allocation mirrored; the kubelet restarted under a running
# pod (its allocatable is empty for a while, its List still shows the pod)
# and the sample plugin restarted change nothing in the bindings, the feed
# or the history; a pod whose container has ended (restartPolicy Never) is
# shown as the kubelet's List reports it; the pod deleted, released.
. "$(dirname "$0")/lib.sh"

kube_up --scheduler --nodes
node_up --device-plugin
pd_config "source: kubelet
kubelet_socket: $KUBELET_PODRES_SOCKET
kubelet_interval: 200ms"
pd_start
pd() { curl -sf --max-time 5 --unix-socket "$PD_SOCK" "http://localhost$1"; }
alloc_ids() { pd /v1/allocatable | jq -c '[.devices[] | select(.resourceName == "example.com/resource") | .deviceIds[]] | sort'; }
wait_until 30 bash -c "[ \"\$(curl -sf --unix-socket '$PD_SOCK' http://localhost/v1/allocatable |
    jq -c '[.devices[] | select(.resourceName == \"example.com/resource\") | .deviceIds[]] | sort')\" = '[\"Dev-1\",\"Dev-2\"]' ]" ||
    fail "podresd's allocatable: $(pd /v1/allocatable)"
ok "podresd mirrors the real kubelet's allocatable devices"

node_pod ml kr-0
dev=$(pod_devices ml kr-0)
[ -n "$dev" ] || fail "ml/kr-0 has no device"
wait_until 10 bash -c "curl -sf --unix-socket '$PD_SOCK' http://localhost/v1/namespaces/ml/pods/kr-0 |
    jqe '.podResources.containers[0].devices[0].deviceIds == [\"$dev\"]'" ||
    fail "binding of ml/kr-0: $(pd /v1/namespaces/ml/pods/kr-0)"
ok "ml/kr-0 bound to $dev, as the kubelet chose"

# binding_state - the pod's binding and the device's intervals, as one line.
binding_state() {
    echo "$(pd /v1/namespaces/ml/pods/kr-0 | jq -c '.podResources.containers')" \
        "$(pd "/v1/history?device=$dev" | jq -c '[.intervals[] | {name, from, to}]')"
}
before=$(binding_state)
rev=$(pd /version | jq -r .revision)
curl -sN --unix-socket "$PD_SOCK" "http://localhost/v1/watch?since=$rev&kind=PodResources" \
    > "$T/feed" 2>/dev/null &
PIDS+=($!)

# ---- the kubelet restarted under the running pod ---------------------------------
# Its first answers after a restart may leave out the pod's device or the pod
# (seen in one restart of four): each restart is a chance to see it.
settles() { pd /metrics | awk '$1 == "podresd_kubelet_settles_total" {print $2}'; }
for i in 1 2 3; do
    n0=$(settles)
    "$PODRES_ROOT/tests/kube/node" restart-kubelet "$NDIR" || fail "restart the kubelet"
    # Back and whole: podresd settled its answers once more and holds nothing now.
    wait_until 60 bash -c "curl -sf --unix-socket '$PD_SOCK' http://localhost/metrics | awk -v n=$n0 '
        \$1 == \"podresd_kubelet_settles_total\" && \$2 > n { s = 1 }
        \$1 ~ /^podresd_kubelet_held/ && \$2 != 0 { h = 1 } END { exit !(s && !h) }'" ||
        fail "kubelet restart $i: not settled, or still held: $(pd /metrics | grep podresd_kubelet)"
    k wait --for condition=Ready node "$NODE" --timeout 60s > /dev/null || fail "node not Ready after restart $i"
    [ "$(binding_state)" = "$before" ] ||
        fail "kubelet restart $i changed the binding or history: before $before, after $(binding_state)"
    [ -z "$(grep -v BOOKMARK "$T/feed")" ] ||
        fail "kubelet restart $i produced PodResources events: $(grep -v BOOKMARK "$T/feed")"
done
ok "the kubelet restarted three times under ml/kr-0: binding, history and feed unchanged ($(settles) settles)"

# ---- the sample device plugin restarted ------------------------------------------
"$PODRES_ROOT/tests/kube/node" restart-device-plugin "$NDIR" || fail "restart the device plugin"
sleep 5
wait_until 30 bash -c "[ \"\$(curl -sf --unix-socket '$PD_SOCK' http://localhost/v1/allocatable |
    jq -c '[.devices[] | select(.resourceName == \"example.com/resource\") | .deviceIds[]] | sort')\" = '[\"Dev-1\",\"Dev-2\"]' ]" ||
    fail "allocatable after the plugin restart: $(pd /v1/allocatable)"
[ "$(binding_state)" = "$before" ] ||
    fail "the plugin restart changed the binding or history: before $before, after $(binding_state)"
[ -z "$(grep -v BOOKMARK "$T/feed")" ] ||
    fail "the plugin restart produced PodResources events: $(grep -v BOOKMARK "$T/feed")"
ok "the sample plugin restarted: binding, history and feed unchanged"

# ---- the pod deleted -------------------------------------------------------------
k delete pod -n ml kr-0 --timeout "$(( 60 * MULT ))s" > /dev/null || fail "delete ml/kr-0"
# Within 30 s of a restart podresd may still hold it (settle.h): up to 45 s.
wait_until 45 bash -c "[ \$(curl -s -o /dev/null -w '%{http_code}' --unix-socket '$PD_SOCK' http://localhost/v1/namespaces/ml/pods/kr-0) = 404 ]" ||
    fail "ml/kr-0 still bound: $(pd /v1/namespaces/ml/pods/kr-0)"
pd "/v1/history?device=$dev" | jqe '[.intervals[] | select(.name == "kr-0")] | length == 1 and .[0].to != null' \
    > /dev/null || fail "history of $dev: $(pd "/v1/history?device=$dev")"
ok "ml/kr-0 deleted: released, one closed interval"
pd_stop
