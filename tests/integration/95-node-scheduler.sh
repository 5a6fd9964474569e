#!/usr/bin/env bash
# 95-node-scheduler.sh - deploy/scheduler as users run it, on a real node
# (tests/kube/node with the upstream sample device plugin): the second
# kube-scheduler "podres-scheduler" (the pinned release's kube-scheduler, in
# an image built here on the project's, since no registry is reached) with
# podres-extender as its sidecar and the certificates its init container
# makes (podres-extender-certs). A pod of schedulerName podres-scheduler
# asking for example.com/resource is placed through the extender over HTTPS
# with the scheduler's client certificate: it runs on the node, and its
# DeviceBinding was written by the extender. Inside the pod, a caller
# without that certificate gets 401; outside it, the extender cannot be
# reached at all (loopback of the pod).
. "$(dirname "$0")/lib.sh"

IMG=$PODRES_ROOT/build/image/podres-0.1.0.tar
[ -f "$IMG" ] || fail "no image: run 'make image' first"
kube_up --scheduler --nodes
node_up --device-plugin
node_deploy
ok "DaemonSet pod $DS_POD Ready on the real node"

# podres.test/kube-scheduler:1 - the project's image with build/kube/kube-scheduler (which
# needs only glibc), cached next to the node's other images.
SIMG=$PODRES_ROOT/build/kube/images/kube-scheduler.tar
if [ ! "$SIMG" -nt "$IMG" ] || [ ! "$SIMG" -nt "$PODRES_ROOT/build/kube/kube-scheduler" ]; then
    export BUILDAH_ISOLATION=chroot
    c=$(buildah from --quiet docker-archive:"$IMG") || fail "buildah from the podres image"
    buildah copy --quiet --chmod 0755 "$c" "$PODRES_ROOT/build/kube/kube-scheduler" /usr/local/bin/kube-scheduler \
        > /dev/null || fail "buildah copy"
    buildah commit --quiet --rm "$c" podres.test/kube-scheduler:1 > /dev/null || fail "buildah commit"
    buildah push --quiet podres.test/kube-scheduler:1 "docker-archive:$SIMG.tmp:podres.test/kube-scheduler:1" ||
        fail "buildah push"
    mv "$SIMG.tmp" "$SIMG"
fi
$CTR images import --no-unpack=false "$SIMG" > "$T/import.log" 2>&1 || fail "import: $(cat "$T/import.log")"

# deploy/scheduler as written, but for its kube-scheduler image and a managed resource the
# sample plugin serves.
k kustomize "$PODRES_ROOT/deploy/scheduler" > "$T/scheduler.yaml" || fail "kubectl kustomize deploy/scheduler"
sed -i -e 's|image: registry.k8s.io/kube-scheduler:v1.36.3|image: podres.test/kube-scheduler:1|' \
    -e 's|^\( *\)- name: example.com/gpu$|\1- name: example.com/resource\n\1  ignoredByScheduler: false\n&|' \
    "$T/scheduler.yaml"
grep -q 'podres.test/kube-scheduler:1' "$T/scheduler.yaml" && grep -q 'name: example.com/resource' "$T/scheduler.yaml" ||
    fail "the overrides did not apply: $(cat "$T/scheduler.yaml")"
k apply -f "$T/scheduler.yaml" > "$T/apply.log" 2>&1 || fail "apply deploy/scheduler: $(cat "$T/apply.log")"
k rollout status deploy/podres-scheduler -n podres-system --timeout "$((180 * MULT))s" > "$T/rollout.log" 2>&1 || {
    k describe pods -n podres-system -l app.kubernetes.io/component=scheduler | tail -n 40 >&2
    k logs -n podres-system deploy/podres-scheduler -c podres-extender --tail 20 >&2 || true
    fail "deploy/podres-scheduler did not become Ready"
}
SPOD=$(k get pods -n podres-system -l app.kubernetes.io/component=scheduler -o jsonpath='{.items[0].metadata.name}')
[ -n "$SPOD" ] || fail "no podres-scheduler pod"
ok "deploy/scheduler: kube-scheduler and podres-extender Ready in $SPOD, certificates from its init container"

# A pod for the second scheduler, asking for the sample plugin's device.
node_pod ml sp-0 '{"schedulerName": "podres-scheduler"}'
[ "$(k get pod -n ml sp-0 -o jsonpath='{.spec.nodeName}')" = "$NODE" ] || fail "sp-0 is not on $NODE"
k get events -n ml --field-selector involvedObject.name=sp-0,reason=Scheduled -o json |
    jqe '[.items[] | select(.reportingComponent == "podres-scheduler" or .source.component == "podres-scheduler")] | length > 0' \
    > /dev/null || fail "sp-0 was not scheduled by podres-scheduler: $(k get events -n ml --field-selector involvedObject.name=sp-0 -o wide)"
dvb_get ml sp-0 | jqe '.metadata.annotations["podres.dev/preassigned-by"] == "podres-extender"
    and (.spec.containers[0].devices[0].deviceIds | length) == 1' > /dev/null ||
    fail "the extender wrote no pre-assignment for sp-0: $(dvb_get ml sp-0)"
# exec NAME ARGS... - a command in a container of the scheduler's pod
sx() { local c=$1; shift; k exec -n podres-system "$SPOD" -c "$c" -- "$@"; }
m=$(sx podres-extender curl -s --cacert /run/podres-extender/ca.crt --cert /run/podres-extender/client.crt \
    --key /run/podres-extender/client.key https://127.0.0.1:8888/metrics)
grep -qx 'podres_extender_binds_total 1' <<<"$m" || fail "the extender counted no bind: $(grep binds <<<"$m")"
ok "kube-scheduler placed ml/sp-0 through the extender over HTTPS: DeviceBinding pre-assigned by podres-extender"

code=$(sx kube-scheduler curl -s -o /dev/null -w '%{http_code}' --cacert /run/podres-extender/ca.crt \
    --data-binary '{}' https://127.0.0.1:8888/bind || true)
[ "$code" = 401 ] || fail "a bind without the scheduler's certificate, inside the pod: HTTP $code"
sx podres-extender sh -c 'test ! -e /run/podres-extender/ca.key' || fail "the CA's key was kept"
ip=$(k get pod -n podres-system "$SPOD" -o jsonpath='{.status.podIP}')
[ -n "$ip" ] || fail "no pod IP"
code=$(curl -s -m 5 -o /dev/null -w '%{http_code}' -k "https://$ip:8888/readyz" || true)
[ "$code" = 000 ] || fail "the extender answered outside its pod: HTTP $code"
ok "inside the pod a call without the certificate gets 401; the CA's key is gone; outside the pod the extender is unreachable"
