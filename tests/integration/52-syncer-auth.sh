#!/usr/bin/env bash
# podres-syncer's access to the API server: TLS with CA verification and a
# bearer token from a kubeconfig; in-cluster configuration from the
# environment and the service-account files; a rotated token file is picked
# up; a server certificate from another CA is refused, even when the system's
# CA store trusts it; client certificates, embedded or from files.
. "$(dirname "$0")/lib.sh"

"$PODRES_ROOT/tests/fixtures/make-test-certs" "$T/pki" > /dev/null
pd_start
register example.com/gpu '[{"id":"g0"},{"id":"g1"},{"id":"g2"}]'
mkdir -p "$T/sa"
emu_start --tls-cert "$T/pki/server.crt" --tls-key "$T/pki/server.key" --ca-cert "$T/pki/ca.crt" \
    --client-ca "$T/pki/ca.crt" \
    --token tok-1 --serviceaccount-dir "$T/sa"
case "$EMU_URL" in https://*) ;; *) fail "the emulator is not serving TLS" ;; esac
grep -q "certificate-authority-data" "$EMU_KCFG" || fail "the kubeconfig has no CA data"
uid=$(curl -s --cacert "$T/pki/ca.crt" -H 'Authorization: Bearer tok-1' -X POST -H 'Content-Type: application/json' \
    "$EMU_URL/api/v1/namespaces" -d '{"metadata":{"name":"ml"}}' > /dev/null;
      curl -s --cacert "$T/pki/ca.crt" -H 'Authorization: Bearer tok-1' -X POST -H 'Content-Type: application/json' \
    "$EMU_URL/api/v1/namespaces/ml/pods" \
    -d '{"metadata":{"name":"a"},"spec":{"nodeName":"test-node","containers":[{"name":"main","image":"x"}]}}' | jq -r .metadata.uid)
[ -n "$uid" ] && [ "$uid" != null ] || fail "cannot create the pod over TLS"
auth_dvb() {
    curl -s --cacert "$T/pki/ca.crt" -H "Authorization: Bearer $(cat "$T/sa/token")" \
        "$EMU_URL/apis/podres.dev/v1alpha1/namespaces/ml/devicebindings/$1"
}

# 1. TLS + token through a kubeconfig.
sy_start
bind ml a "$uid" g0
wait_until 5 sh -c "$(declare -f auth_dvb); T='$T' EMU_URL='$EMU_URL' auth_dvb a | jq -e '.status.phase == \"Bound\"'" ||
    fail "no DeviceBinding over TLS + token: $(tail -5 "$T/syncer.log")"
grep -q "tok-1" "$T/syncer.log" && fail "the token appears in the log"
sy_stop
ok "TLS with CA verification and a bearer token from a kubeconfig"

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
sed "s|certificate-authority-data: .*|certificate-authority-data: $(base64 -w0 < "$T/pki2/ca.crt")|" "$EMU_KCFG" > "$T/wrongca"
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
cp "$T/pki/ca.crt" "$T/sysca/podres-test.pem"
cp "$T/pki/ca.crt" "$T/sysca/ca-certificates.crt"
ln -s podres-test.pem "$T/sysca/$(openssl x509 -noout -subject_hash -in "$T/pki/ca.crt").0"
cat > "$T/sysca.sh" <<SH
mount --bind "$T/sysca" /etc/ssl/certs
exec "\$@"
SH
sysca=(unshare -m --propagation private bash "$T/sysca.sh")
once "$T/wrongca" "${sysca[@]}"
[ "$rc" = 1 ] || fail "--once trusted the system CA store over the kubeconfig's CA (exit $rc): $(cat "$T/once.log")"
grep -qi "certificate\|SSL" "$T/once.log" || fail "the refusal does not say why: $(cat "$T/once.log")"
sed "s|certificate-authority-data: .*|certificate-authority-data: $(base64 -w0 < "$T/pki3/ca.crt")|" "$EMU_KCFG" > "$T/wrongca3"
once "$T/wrongca3" "${sysca[@]}"
[ "$rc" = 1 ] || fail "--once trusted the system CA store over the kubeconfig's CA data (exit $rc): $(cat "$T/once.log")"
sed "s|certificate-authority-data: .*|certificate-authority: $T/pki3/ca.crt|" "$EMU_KCFG" > "$T/wrongcafile"
once "$T/wrongcafile" "${sysca[@]}"
[ "$rc" = 1 ] || fail "--once trusted the system CA store over the kubeconfig's CA file (exit $rc): $(cat "$T/once.log")"
sed '/certificate-authority-data/d' "$EMU_KCFG" > "$T/noca"
once "$T/noca" "${sysca[@]}"
[ "$rc" = 0 ] || fail "--once without a CA in the kubeconfig did not use the system's CAs (exit $rc): $(cat "$T/once.log")"
ok "a kubeconfig's CA is trusted alone, the system's CAs only without one"

# 2c. A client certificate and key, embedded (client-certificate-data,
# client-key-data) or as files, authenticate instead of the token.
grep -q "^    token: " "$EMU_KCFG" || fail "the emulator's kubeconfig has no token line"
sed "s|^    token: .*|    client-certificate-data: $(base64 -w0 < "$T/pki/client.crt")\n    client-key-data: $(base64 -w0 < "$T/pki/client.key")|" \
    "$EMU_KCFG" > "$T/certdata"
sed "s|^    token: .*|    client-certificate: $T/pki/client.crt\n    client-key: $T/pki/client.key|" \
    "$EMU_KCFG" > "$T/certfile"
sed "s|^    token: .*|    client-certificate: $T/pki/client.crt\n    client-key: $T/pki/server.key|" \
    "$EMU_KCFG" > "$T/wrongkey"
sed -e '/^    token: /d' -e 's/^  user:$/  user: {}/' "$EMU_KCFG" > "$T/nouser"
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
# mounted where a pod has them (a private mount namespace), and token rotation.
cat > "$T/incluster.sh" <<SH
mount -t tmpfs none /run
mkdir -p /var/run/secrets/kubernetes.io/serviceaccount
mount --bind "$T/sa" /var/run/secrets/kubernetes.io/serviceaccount
export KUBERNETES_SERVICE_HOST=127.0.0.1 KUBERNETES_SERVICE_PORT=$EMU_PORT HOME=$T/nohome
unset KUBECONFIG
exec "$PODRES_BIN/podres-syncer" --node-name test-node --podresd-socket "$PD_SOCK" --metrics-listen 127.0.0.1:\$1
SH
SY_PORT=$(free_port)
unshare -m --propagation private bash "$T/incluster.sh" "$SY_PORT" >> "$T/syncer.log" 2>&1 &
SY_PID=$!; PIDS+=("$SY_PID")
wait_until 10 curl -sf "http://127.0.0.1:$SY_PORT/healthz" || fail "in-cluster syncer did not start: $(tail "$T/syncer.log")"
grep -q "from in-cluster" "$T/syncer.log" || fail "not using the in-cluster configuration: $(tail -3 "$T/syncer.log")"
bind ml a "$uid" g1
wait_until 5 sh -c "$(declare -f auth_dvb); T='$T' EMU_URL='$EMU_URL' auth_dvb a | jq -e '.status.summary == \"example.com/gpu=1\" and .status.containers[0].devices[0].deviceIds[0] == \"g1\"'" ||
    fail "in-cluster syncer did not sync"
ok "in-cluster configuration from the environment and the service-account files"

curl -sk -X POST "$EMU_URL/_emulator/token" -d '{"token":"tok-2"}' > /dev/null
[ "$(cat "$T/sa/token")" = tok-2 ] || fail "the emulator did not rotate the token file"
bind ml a "$uid" g2
wait_until 10 sh -c "$(declare -f auth_dvb); T='$T' EMU_URL='$EMU_URL' auth_dvb a | jq -e '.status.containers[0].devices[0].deviceIds[0] == \"g2\"'" ||
    fail "the rotated token was not picked up: $(tail -5 "$T/syncer.log")"
grep -q "tok-2" "$T/syncer.log" && fail "the token appears in the log"
ok "a rotated token file is picked up"
sy_stop
pd_stop
