#!/usr/bin/env bash
# 64-robust-secrets.sh - no token or Authorization header ever reaches a log.
# podresd (write token on TCP) and podres-syncer (a ServiceAccount token to
# the real API server) run at log level debug through authenticated traffic,
# rejected tokens included; then every log is grepped for the tokens and for
# "Authorization". The socket, directory and database modes, the symlink
# refusal, the token and the Host check are tested in 10-podresd-api.sh,
# 15-podresd-startup.sh and 52-syncer-auth.sh.
. "$(dirname "$0")/lib.sh"

TOKEN=pd-secret-$(od -An -N8 -tx1 /dev/urandom | tr -d ' \n')
WRONG=pd-wrong-$(od -An -N8 -tx1 /dev/urandom | tr -d ' \n')
printf '%s\n' "$TOKEN" > "$T/token"
chmod 600 "$T/token"
PD_LOG_LEVEL=debug pd_config "write_token_file: $T/token"
pd_start
tcp PUT /v1/resources/example.com/gpu/devices '{"devices":[{"id":"g0"},{"id":"g1"}]}' "$TOKEN"
expect_code 200 "write with the token"
tcp PUT /v1/resources/example.com/gpu/devices '{"devices":[{"id":"g0"}]}' "$WRONG"
case "$CODE" in 401|403) ;; *) fail "wrong token: HTTP $CODE" ;; esac
tcp PUT /v1/resources/example.com/gpu/devices '{"devices":[{"id":"g0"}]}'
case "$CODE" in 401|403) ;; *) fail "no token: HTTP $CODE" ;; esac
curl -s -o /dev/null -H "Authorization: Basic $(printf 'u:%s' "$TOKEN" | base64)" \
    -X PUT --data-binary '{}' "http://127.0.0.1:$PD_PORT/v1/resources/example.com/gpu/devices"
tcp GET /v1/devices "" "$TOKEN"
expect_code 200 "read with the token"
ok "podresd: accepted and rejected tokens at log level debug"

kube_up
KUBE_TOKEN=$(sed -n 's/^    token: //p' "$SY_KCFG")
[ -n "$KUBE_TOKEN" ] || fail "the syncer's kubeconfig has no token"
uid=$(kube_pod ns1 p1 test-node)
sy_start --log-level debug
bind ns1 p1 "$uid" g0
wait_until 15 sh -c "curl -s --cacert '$KUBE_CA' -H 'Authorization: Bearer $KUBE_TOKEN' '$KUBE_SERVER/apis/podres.dev/v1alpha1/namespaces/ns1/devicebindings/p1' | grep -q g0" ||
    fail "the syncer did not write the DeviceBinding"
ok "podres-syncer synced with a bearer token at log level debug"
sy_stop
pd_stop

for f in "$T/podresd.log" "$T/syncer.log"; do
    for secret in "$TOKEN" "$WRONG" "$KUBE_TOKEN"; do
        [ -n "$secret" ] || continue
        ! grep -qF -- "$secret" "$f" || fail "$(basename "$f") holds a token: $(grep -F -- "$secret" "$f" | head -2)"
    done
    ! grep -qi 'authorization' "$f" || fail "$(basename "$f") mentions Authorization: $(grep -i authorization "$f" | head -2)"
    ! grep -qi 'bearer' "$f" || fail "$(basename "$f") mentions a bearer: $(grep -i bearer "$f" | head -2)"
done
[ "$(grep -c 'level=debug' "$T/podresd.log")" -gt 0 ] || fail "podresd logged nothing at debug"
[ -s "$T/syncer.log" ] || fail "the syncer logged nothing"
ok "no token, Authorization or bearer in $(cat "$T/podresd.log" "$T/syncer.log" | wc -l) log lines"
