#!/usr/bin/env bash
# 92-node-helm.sh - podres installed with the Helm chart (real helm, make helm)
# on a real node (tests/kube/node) with the project's image (make image): the
# DaemonSet's pod Ready with its probes, a pod given a device by the real
# kubelet Bound in its DeviceBinding, and `helm uninstall` removing the
# DaemonSet while the CRDs stay. The chart's hostPaths (podresd.hostPaths)
# point into the test's directory: /var/lib/podresd and /run/podresd are
# this machine's own.
. "$(dirname "$0")/lib.sh"

HELM=$PODRES_ROOT/build/helm/helm
[ -x "$HELM" ] || fail "$HELM is missing: make helm"
[ -f "$PODRES_ROOT/build/image/podres-0.1.0.tar" ] || fail "no image: run 'make image' first"
export HELM_CACHE_HOME=$T/helm/cache HELM_CONFIG_HOME=$T/helm/config HELM_DATA_HOME=$T/helm/data
h() { "$HELM" --kubeconfig "$KCFG" "$@"; }

KUBE_BARE=1 kube_up --scheduler --nodes # the chart brings the CRDs and RBAC
node_up --device-plugin
h install podres "$PODRES_ROOT/deploy/helm/podres" -n podres-system --create-namespace \
    --set podresd.hostPaths.data="$NDIR/podresd-db" --set podresd.hostPaths.socket="$NDIR/podresd-run" \
    --wait --timeout "$(( 180 * MULT ))s" > "$T/helm.log" 2>&1 ||
    { cat "$T/helm.log" >&2; k get pods -A -o wide >&2; fail "helm install"; }
ds_ready 60
PD_SOCK=$NDIR/podresd-run/podresd.sock
[ "$(k get pod -n podres-system "$DS_POD" -o jsonpath='{.spec.containers[*].image}')" = \
    "podres:0.1.0 podres:0.1.0" ] || fail "the chart's images: $(k get pod -n podres-system "$DS_POD" -o jsonpath='{.spec.containers[*].image}')"
ok "helm install: DaemonSet pod $DS_POD Ready (2/2) on the real node, image podres:0.1.0"

node_pod ml hp-0
dev=$(pod_devices ml hp-0)
[ -n "$dev" ] || fail "ml/hp-0 sees no device"
wait_until 30 bash -c "$KCURL -f '$KUBE_SERVER$DVB/namespaces/ml/devicebindings/hp-0' |
    jqe '.status.phase == \"Bound\" and .status.containers[0].devices[0].deviceIds == [\"$dev\"]'" ||
    fail "DeviceBinding ml/hp-0: $(dvb_get ml hp-0)"
curl -sf --unix-socket "$PD_SOCK" "http://localhost/v1/history?device=$dev" |
    jqe '[.intervals[] | select(.name == "hp-0" and .to == null)] | length == 1' > /dev/null ||
    fail "history of $dev: $(curl -s --unix-socket "$PD_SOCK" "http://localhost/v1/history?device=$dev")"
ok "ml/hp-0 given $dev by the kubelet: Bound, in the history"

h uninstall podres -n podres-system --wait --timeout "$(( 60 * MULT ))s" > "$T/helm.log" 2>&1 ||
    { cat "$T/helm.log" >&2; fail "helm uninstall"; }
[ "$(k get ds -n podres-system -o name | wc -l)" = 0 ] || fail "the DaemonSet survived helm uninstall"
k get crd devicebindings.podres.dev nodedevices.podres.dev > /dev/null || fail "helm uninstall removed the CRDs"
ok "helm uninstall: the DaemonSet gone, the CRDs kept"
