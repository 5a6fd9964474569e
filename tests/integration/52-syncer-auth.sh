#!/usr/bin/env bash
# podres-syncer's access to the real API server: TLS with CA verification
# and a ServiceAccount token (TokenRequest API) from a kubeconfig, under the
# least privilege of deploy/rbac.yaml, which the real authorizer enforces;
# in-cluster configuration from the environment and the service-account
# files; a rotated token file is picked up when the old token is revoked; a
# server certificate from another CA is refused, even when the system's CA
# store trusts it; client certificates, embedded or from files.
. "$(dirname "$0")/lib.sh"

pd_start
register example.com/gpu '[{"id":"g0"},{"id":"g1"},{"id":"g2"}]'
kube_up
uid=$(kube_pod ml a test-node)
auth_dvb() {
    curl -s --cacert "$KUBE_CA" -H "Authorization: Bearer $(cat "$T/sa/token")" \
        "$KUBE_SERVER/apis/podres.dev/v1alpha1/namespaces/ml/devicebindings/$1"
}
SA_TOKEN=$(sed -n 's/^    token: //p' "$SY_KCFG")

# 0. Least privilege, proven by the real authorizer: the syncer's
# ServiceAccount may write DeviceBindings and read pods, and nothing else.
sa_curl() { # METHOD PATH [BODY] - as the syncer's ServiceAccount; prints the HTTP status
    curl -s -o "$T/out" -w '%{http_code}' --cacert "$KUBE_CA" -H "Authorization: Bearer $SA_TOKEN" \
        -H 'Content-Type: application/json' -X "$1" ${3:+--data-binary "$3"} "$KUBE_SERVER$2"
}
[ "$(sa_curl GET /api/v1/namespaces/ml/pods)" = 200 ] || fail "the syncer cannot list pods: $(out)"
code=$(sa_curl POST /api/v1/namespaces/ml/pods \
    '{"apiVersion":"v1","kind":"Pod","metadata":{"name":"x"},"spec":{"containers":[{"name":"c","image":"x"}]}}')
[ "$code" = 403 ] || fail "the syncer could create a pod: HTTP $code"
grep -q 'cannot create resource \\"pods\\"' "$T/out" || fail "403 without the RBAC message: $(out)"
[ "$(sa_curl GET /api/v1/namespaces/kube-system/secrets)" = 403 ] || fail "the syncer could list secrets"
[ "$(sa_curl DELETE /api/v1/namespaces/ml/pods/a)" = 403 ] || fail "the syncer could delete a pod"
[ "$(sa_curl GET /api/v1/nodes)" = 403 ] || fail "the syncer could list nodes"
k auth can-i create devicebindings.podres.dev --as=system:serviceaccount:podres-system:podres-syncer -n ml |
    grep -qx yes || fail "kubectl auth can-i: the syncer cannot create DeviceBindings"
[ "$(k auth can-i create pods --as=system:serviceaccount:podres-system:podres-syncer -n ml || true)" = no ] ||
    fail "kubectl auth can-i: the syncer can create pods"
ok "deploy/rbac.yaml: DeviceBindings and reading pods allowed, other writes refused with 403"

# 1. TLS + token through a kubeconfig.
mkdir -p "$T/sa"
printf '%s' "$SA_TOKEN" > "$T/sa/token"
sy_start
bind ml a "$uid" g0
wait_until 5 bash -c "$(declare -f auth_dvb); T='$T' KUBE_CA='$KUBE_CA' KUBE_SERVER='$KUBE_SERVER' auth_dvb a | jqe '.status.phase == \"Bound\"'" ||
    fail "no DeviceBinding over TLS + token: $(tail -5 "$T/syncer.log")"
grep -qF "$SA_TOKEN" "$T/syncer.log" && fail "the token appears in the log"
sy_stop
ok "TLS with CA verification and a ServiceAccount token from a kubeconfig"

# once KUBECONFIG [WRAPPER...] - podres-syncer --once (run by WRAPPER): exit
# status in $rc, output in $T/once.log.
once() {
    local kc=$1
    shift
    rc=0
    "$@" timeout 20 "$PODRES_BIN/podres-syncer" --once --node-name test-node \
        --podresd-socket "$PD_SOCK" --kubeconfig "$kc" > "$T/once.log" 2>&1 || rc=$?
}

# 2. A server certificate signed by another CA is refused.
"$PODRES_ROOT/tests/fixtures/make-test-certs" "$T/pki2" > /dev/null
sed "s|certificate-authority-data: .*|certificate-authority-data: $(base64 -w0 < "$T/pki2/ca.crt")|" "$SY_KCFG" > "$T/wrongca"
once "$T/wrongca"
[ "$rc" = 1 ] || fail "--once against an untrusted server exited $rc: $(cat "$T/once.log")"
grep -qi "certificate\|SSL" "$T/once.log" || fail "the refusal does not say why: $(cat "$T/once.log")"
ok "a server certificate from another CA is refused"

# 2b. ... even when the system's CA store trusts it: a kubeconfig that names a
# CA trusts that CA alone, as kubectl does. The server's CA goes into
# /etc/ssl/certs (a private mount namespace), as a hashed file and in the bundle.
mkdir -p "$T/sysca" "$T/pki3"
openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -days 2 -subj "/CN=another-ca" \
    -keyout "$T/pki3/ca.key" -out "$T/pki3/ca.crt" 2> /dev/null
cp "$KUBE_CA" "$T/sysca/podres-test.pem"
cp "$KUBE_CA" "$T/sysca/ca-certificates.crt"
ln -s podres-test.pem "$T/sysca/$(openssl x509 -noout -subject_hash -in "$KUBE_CA").0"
cat > "$T/sysca.sh" <<SH
mount --bind "$T/sysca" /etc/ssl/certs
exec "\$@"
SH
sysca=(unshare -m --propagation private bash "$T/sysca.sh")
once "$T/wrongca" "${sysca[@]}"
[ "$rc" = 1 ] || fail "--once trusted the system CA store over the kubeconfig's CA (exit $rc): $(cat "$T/once.log")"
grep -qi "certificate\|SSL" "$T/once.log" || fail "the refusal does not say why: $(cat "$T/once.log")"
sed "s|certificate-authority-data: .*|certificate-authority-data: $(base64 -w0 < "$T/pki3/ca.crt")|" "$SY_KCFG" > "$T/wrongca3"
once "$T/wrongca3" "${sysca[@]}"
[ "$rc" = 1 ] || fail "--once trusted the system CA store over the kubeconfig's CA data (exit $rc): $(cat "$T/once.log")"
sed "s|certificate-authority-data: .*|certificate-authority: $T/pki3/ca.crt|" "$SY_KCFG" > "$T/wrongcafile"
once "$T/wrongcafile" "${sysca[@]}"
[ "$rc" = 1 ] || fail "--once trusted the system CA store over the kubeconfig's CA file (exit $rc): $(cat "$T/once.log")"
sed '/certificate-authority-data/d' "$SY_KCFG" > "$T/noca"
once "$T/noca" "${sysca[@]}"
[ "$rc" = 0 ] || fail "--once without a CA in the kubeconfig did not use the system's CAs (exit $rc): $(cat "$T/once.log")"
ok "a kubeconfig's CA is trusted alone, the system's CAs only without one"

# 2c. A client certificate and key, embedded (client-certificate-data,
# client-key-data) or as files, authenticate instead of the token.
# A user of a client certificate the cluster's CA signed, bound to the
# syncer's ClusterRole; and a key that does not match it.
user_cert podres-syncer-cert "$T/cc"
mv "$T/cc/podres-syncer-cert.crt" "$T/cc/client.crt"
mv "$T/cc/podres-syncer-cert.key" "$T/cc/client.key"
openssl ecparam -name prime256v1 -genkey -noout -out "$T/cc/other.key" 2> /dev/null
k create clusterrolebinding podres-syncer-cert --clusterrole podres-syncer --user podres-syncer-cert > /dev/null
grep -q "^    token: " "$SY_KCFG" || fail "the syncer's kubeconfig has no token line"
sed "s|^    token: .*|    client-certificate-data: $(base64 -w0 < "$T/cc/client.crt")\n    client-key-data: $(base64 -w0 < "$T/cc/client.key")|" \
    "$SY_KCFG" > "$T/certdata"
sed "s|^    token: .*|    client-certificate: $T/cc/client.crt\n    client-key: $T/cc/client.key|" \
    "$SY_KCFG" > "$T/certfile"
sed "s|^    token: .*|    client-certificate: $T/cc/client.crt\n    client-key: $T/cc/other.key|" \
    "$SY_KCFG" > "$T/wrongkey"
sed -e '/^    token: /d' -e 's/^  user:$/  user: {}/' "$SY_KCFG" > "$T/nouser"
once "$T/nouser"
[ "$rc" = 1 ] || fail "--once with neither a token nor a certificate exited $rc: $(cat "$T/once.log")"
for kc in certdata certfile; do
    once "$T/$kc"
    [ "$rc" = 0 ] || fail "--once with a client certificate ($kc) exited $rc: $(cat "$T/once.log")"
done
once "$T/wrongkey"
[ "$rc" = 1 ] || fail "--once with a key that does not match the certificate exited $rc: $(cat "$T/once.log")"
ok "a client certificate, embedded or from files, authenticates; a mismatched key is refused"

# 3. In-cluster: KUBERNETES_SERVICE_HOST/PORT and the service-account files,
# mounted where a pod has them (a private mount namespace), and token
# rotation. The tokens are bound to Secrets, as the kubelet's projected
# tokens are bound to their pod: deleting the Secret revokes the token.
# tok NAME - a token of the syncer's ServiceAccount bound to a new Secret NAME.
tok() {
    k -n podres-system create secret generic "$1" > /dev/null || fail "create secret $1"
    k -n podres-system create token podres-syncer --bound-object-kind Secret --bound-object-name "$1" ||
        fail "no token bound to $1"
}
tok tok-1 > "$T/sa/token"
cp "$KUBE_CA" "$T/sa/ca.crt"
printf podres-system > "$T/sa/namespace"
cat > "$T/incluster.sh" <<SH
mount -t tmpfs none /run
mkdir -p /var/run/secrets/kubernetes.io/serviceaccount
mount --bind "$T/sa" /var/run/secrets/kubernetes.io/serviceaccount
export KUBERNETES_SERVICE_HOST=127.0.0.1 KUBERNETES_SERVICE_PORT=${KUBE_SERVER##*:} HOME=$T/nohome
unset KUBECONFIG
exec "$PODRES_BIN/podres-syncer" --node-name test-node --podresd-socket "$PD_SOCK" --metrics-listen 127.0.0.1:\$1
SH
SY_PORT=$(free_port)
unshare -m --propagation private bash "$T/incluster.sh" "$SY_PORT" >> "$T/syncer.log" 2>&1 &
SY_PID=$!; PIDS+=("$SY_PID")
wait_until 10 curl -sf "http://127.0.0.1:$SY_PORT/healthz" || fail "in-cluster syncer did not start: $(tail "$T/syncer.log")"
grep -q "from in-cluster" "$T/syncer.log" || fail "not using the in-cluster configuration: $(tail -3 "$T/syncer.log")"
bind ml a "$uid" g1
wait_until 5 bash -c "$(declare -f auth_dvb); T='$T' KUBE_CA='$KUBE_CA' KUBE_SERVER='$KUBE_SERVER' auth_dvb a | jqe '.status.summary == \"example.com/gpu=1\" and .status.containers[0].devices[0].deviceIds[0] == \"g1\"'" ||
    fail "in-cluster syncer did not sync"
ok "in-cluster configuration from the environment and the service-account files"

# Rotation: the new token is written as the kubelet does (a new file moved
# into place), then the old one is revoked.
old=$(cat "$T/sa/token")
tok tok-2 > "$T/sa/token.new"
mv "$T/sa/token.new" "$T/sa/token"
k -n podres-system delete secret tok-1 > /dev/null
wait_until 10 sh -c "[ \$(curl -s -o /dev/null -w '%{http_code}' --cacert '$KUBE_CA' -H 'Authorization: Bearer $old' '$KUBE_SERVER/api/v1/namespaces/ml/pods') = 401 ]" ||
    fail "the old token was not revoked"
bind ml a "$uid" g2
wait_until 10 bash -c "$(declare -f auth_dvb); T='$T' KUBE_CA='$KUBE_CA' KUBE_SERVER='$KUBE_SERVER' auth_dvb a | jqe '.status.containers[0].devices[0].deviceIds[0] == \"g2\"'" ||
    fail "the rotated token was not picked up: $(tail -5 "$T/syncer.log")"
grep -qF "$(cat "$T/sa/token")" "$T/syncer.log" && fail "the token appears in the log"
ok "a rotated token file is picked up once the old token is revoked"
sy_stop
pd_stop
