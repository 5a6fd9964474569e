#!/usr/bin/env bash
# 94-node-kubelet-edges.sh - podresd (source kubelet, this tree's binary) and
# the real kubelet of tests/kube/node at its edges: a pod whose container has
# ended (restartPolicy Never) is no longer in the kubelet's List, so podresd
# releases its device while the Pod object is still there (docs/API.md,
# Kubelet source); podresd's polling at its default interval never meets the
# kubelet's rate limit (100 requests/s, burst 10, shared by its clients), and
# when another client spends it podresd is refused with RESOURCE_EXHAUSTED,
# logs it, backs off and carries on, its bindings unchanged and no settling
# window opened (a refusal is not a restart).
. "$(dirname "$0")/lib.sh"

kube_up --scheduler --nodes
node_up --device-plugin
pd_config "source: kubelet
kubelet_socket: $KUBELET_PODRES_SOCKET
kubelet_interval: 2s"
pd_start
pd() { curl -sf --max-time 5 --unix-socket "$PD_SOCK" "http://localhost$1"; }
metric() { pd /metrics | awk -v m="$1" '$1 == m {print $2}'; }
wait_until 30 bash -c "curl -sf --unix-socket '$PD_SOCK' http://localhost/readyz" || fail "podresd not ready"

# ---- a pod that has ended ---------------------------------------------------------
node_pod ml run-0
node_pod ml done-0 '{"restartPolicy": "Never", "containers": [{"name": "main", "image": "podres.test/busybox:1",
    "command": ["sh", "-c", "sleep 6"], "resources": {"limits": {"example.com/resource": "1"}}}]}'
wait_until 10 bash -c "curl -sf --unix-socket '$PD_SOCK' http://localhost/v1/namespaces/ml/pods/done-0 |
    jqe '[.podResources.containers[].devices[].deviceIds[]] | length == 1'" ||
    fail "ml/done-0 not bound while it runs: $(pd /v1/namespaces/ml/pods/done-0)"
dev=$(pd /v1/namespaces/ml/pods/done-0 | jq -r '.podResources.containers[0].devices[0].deviceIds[0]')
wait_until 30 bash -c "[ \"\$('$KUBECTL' --kubeconfig '$KCFG' get pod -n ml done-0 -o jsonpath='{.status.phase}')\" = Succeeded ]" ||
    fail "ml/done-0 did not end: $(k get pod -n ml done-0 -o jsonpath='{.status.phase}')"
wait_until 10 bash -c "[ \$(curl -s -o /dev/null -w '%{http_code}' --unix-socket '$PD_SOCK' http://localhost/v1/namespaces/ml/pods/done-0) = 404 ]" ||
    fail "an ended pod is still bound: $(pd /v1/namespaces/ml/pods/done-0)"
pd "/v1/history?device=$dev" | jqe '[.intervals[] | select(.name == "done-0")] | length == 1 and .[0].to != null' \
    > /dev/null || fail "history of $dev: $(pd "/v1/history?device=$dev")"
k get pod -n ml done-0 > /dev/null || fail "the Pod object is gone"
ok "ml/done-0 ended (Succeeded): the kubelet lists it no more, podresd released $dev, the Pod object stays"

# ---- the kubelet's rate limit --------------------------------------------------------
before=$(pd /v1/namespaces/ml/pods/run-0 | jq -c .podResources.containers)
settles0=$(metric podresd_kubelet_settles_total)
grep -q RESOURCE_EXHAUSTED "$T/podresd.log" && fail "RESOURCE_EXHAUSTED in normal polling: $(grep RESOURCE_EXHAUSTED "$T/podresd.log")"
ok "polling every 2 s never met the kubelet's rate limit"
# Spent for 7 s: three of podresd's polls (every 2 s) fall inside.
/usr/bin/python3 -m podres_test.kubelet_flood "$KUBELET_PODRES_SOCKET" 7 > "$T/flood.out" 2>&1 ||
    fail "could not spend the kubelet's rate limit: $(cat "$T/flood.out")"
grep -q 'kubelet answered RESOURCE_EXHAUSTED' "$T/podresd.log" ||
    fail "podresd was never refused while the limit was spent ($(cat "$T/flood.out"))"
wait_until 20 bash -c "grep -q 'kubelet sync recovered' '$T/podresd.log' && curl -sf --unix-socket '$PD_SOCK' http://localhost/readyz" ||
    fail "podresd did not recover: $(tail -5 "$T/podresd.log")"
[ "$(pd /v1/namespaces/ml/pods/run-0 | jq -c .podResources.containers)" = "$before" ] ||
    fail "the refusal changed ml/run-0's binding: $(pd /v1/namespaces/ml/pods/run-0)"
[ "$(metric podresd_kubelet_settles_total)" = "$settles0" ] ||
    fail "a refusal opened a settling window: $(metric podresd_kubelet_settles_total)"
[ "$(grep -c 'kubelet answered RESOURCE_EXHAUSTED' "$T/podresd.log")" = 1 ] ||
    fail "the refusal logged more than once a streak: $(grep -c RESOURCE_EXHAUSTED "$T/podresd.log")"
ok "the limit spent by another client: podresd refused, logged once, recovered, binding unchanged, no settling ($(cat "$T/flood.out"))"
pd_stop
