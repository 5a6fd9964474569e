#!/usr/bin/env bash
# 12-api-hostile.sh - malformed and hostile requests against podresd's REST API.
#
# A table of bad requests, each with the HTTP status and Kubernetes Status body
# (kind, code, reason) it must get. After every one: podresd is alive and its
# revision has not moved (bad input never changes state). Then raw hostile
# byte streams (huge request line and headers, slowloris, abandoned bodies,
# broken framing) after which podresd must still answer /healthz.
#
# Requests that do not yet get the answer a Kubernetes user would expect are
# listed with 'known' (the correct expectation, skipped); set
# They are fixed and run strictly by default (PODRES_HOSTILE_KNOWN=0 relaxes them). Where it is safe, a known case
# still runs with a weaker check (any 4xx Status, state unchanged, alive).
. "$(dirname "$0")/lib.sh"

TOKEN=hostile-write-token-0123456789
printf '%s\n' "$TOKEN" > "$T/token"
chmod 600 "$T/token"
pd_config "write_token_file: $T/token"
pd_start

START=$SECONDS
N=0
NSKIP=0
NOBODY=$'\x01none'

# ---- set-up: two resources, one pod holding gpu0 ----
register vendor.com/gpu '[{"id":"gpu0","topology":{"nodes":[{"ID":0}]}},
                          {"id":"gpu1","topology":{"nodes":[{"ID":1}]}}]'
register example.com/nic '[{"id":"nic0"}]'
req PUT /v1/namespaces/ns1/pods/holder \
    '{"uid":"u1","containers":[{"name":"main","devices":[{"resourceName":"vendor.com/gpu","deviceIds":["gpu0"]}]}]}'
expect_code 201 "bind ns1/holder"
R0=$(revision)
[ -n "$R0" ] && [ "$R0" != null ] || fail "no revision from /version"

# ---- helpers ----

# hit VIA METHOD PATH [BODY|$NOBODY [CURL_ARGS...]] - VIA unix|tcp. A body is
# sent with Content-Type $CT (default application/json; CT= sends none);
# "@FILE" sends a file. Answer in $T/out, headers in $T/hdr, status in CODE.
hit() {
    local via=$1 m=$2 p=$3 url
    shift 3
    local args=(-s -o "$T/out" -D "$T/hdr" -w '%{http_code}' -X "$m" --path-as-is --max-time 15)
    if [ $# -ge 1 ]; then
        if [ "$1" != "$NOBODY" ]; then
            args+=(--data-binary "$1")
            if [ -n "${CT-application/json}" ]; then
                args+=(-H "Content-Type: ${CT-application/json}")
            else
                args+=(-H 'Content-Type:')
            fi
        fi
        shift
    fi
    args+=("$@")
    if [ "$via" = tcp ]; then
        url="http://127.0.0.1:$PD_PORT$p"
    else
        args+=(--unix-socket "$PD_SOCK")
        url="http://localhost$p"
    fi
    : > "$T/out"
    CODE=$(curl "${args[@]}" "$url") || true
}

alive() {
    kill -0 "$PD_PID" 2>/dev/null || fail "$1: podresd is gone"
    [ "$(curl -s --max-time 5 --unix-socket "$PD_SOCK" http://localhost/healthz)" = ok ] ||
        fail "$1: /healthz does not answer ok"
}

# The revision from /version, parsed without jq (this runs after every case).
rev_now() {
    local v
    v=$(curl -s --max-time 5 --unix-socket "$PD_SOCK" http://localhost/version) || true
    [[ $v =~ \"revision\":([0-9]+) ]] && echo "${BASH_REMATCH[1]}"
}

unchanged() {
    local rev
    rev=$(rev_now)
    [ "$rev" = "$R0" ] || fail "$1: revision moved from $R0 to ${rev:-nothing (no answer)}"
}

# check CODE REASON LABEL - the Status body (what lib.sh's expect_status
# checks, plus status, apiVersion and message, in one jq run), the Allow
# header ($ALLOW), the message ($MSG, a substring), and that nothing changed.
check() {
    local label=$3 got
    expect_code "$1" "$label"
    got=$(jq -r '[.kind, .apiVersion, .status, (.code|tostring), .reason,
                  (.message // "" | length > 0 | tostring)] | join(" ")' "$T/out" 2>/dev/null) ||
        fail "$label: not a JSON body: $(head -c 300 "$T/out")"
    [ "$got" = "Status v1 Failure $1 $2 true" ] ||
        fail "$label: want 'Status v1 Failure $1 $2 true' (kind apiVersion status code reason has-message), got '$got': $(head -c 300 "$T/out")"
    if [ -n "${MSG:-}" ]; then
        grep -qF -- "$MSG" "$T/out" || fail "$label: message lacks '$MSG': $(out)"
    fi
    if [ -n "${ALLOW:-}" ]; then
        grep -qiE "^Allow: $ALLOW"$'\r?$' "$T/hdr" ||
            fail "$label: want 'Allow: $ALLOW', headers: $(tr -d '\r' < "$T/hdr" | tr '\n' '|')"
    fi
    kill -0 "$PD_PID" 2>/dev/null || fail "$label: podresd is gone"
    unchanged "$label"
    ok "$label -> $1 $2"
}

label_of() { local b=${3:-}; [ "$b" = "$NOBODY" ] && b=; printf '#%d %s %s %s' "$N" "$1" "$2" "${b:0:70}"; }

# t CODE REASON METHOD PATH [BODY [CURL_ARGS...]] - one case over the unix socket.
t() {
    local code=$1 reason=$2
    shift 2
    N=$((N + 1))
    hit unix "$@"
    check "$code" "$reason" "$(label_of "$@")"
}

# tt CODE REASON METHOD PATH [BODY [CURL_ARGS...]] - one case over loopback TCP.
tt() {
    local code=$1 reason=$2
    shift 2
    N=$((N + 1))
    hit tcp "$@"
    check "$code" "$reason" "tcp $(label_of "$@")"
}

# known MODE CODE REASON METHOD PATH [BODY [CURL_ARGS...]] - the expected
# answer of a request podresd gets wrong today ($VIA: unix or tcp).
# MODE weak: still run it and check any 4xx Status + no state change;
# MODE skip: do not run it (it would change state or break the connection).
known() {
    local mode=$1 code=$2 reason=$3 l
    shift 3
    if [ "${PODRES_HOSTILE_KNOWN:-1}" = 1 ]; then
        N=$((N + 1))
        hit "${VIA:-unix}" "$@"
        check "$code" "$reason" "known $(label_of "$@")"
        return
    fi
    NSKIP=$((NSKIP + 1))
    l="known#$NSKIP $1 $2 ${3:+${3:0:60}}"
    if [ "$mode" = weak ]; then
        hit "${VIA:-unix}" "$@"
        case "$CODE" in 4??) ;; *) fail "$l: weak check: HTTP $CODE: $(head -c 300 "$T/out")" ;; esac
        [ "$(jq -r '[.kind, (.code|tostring)] | join(" ")' "$T/out" 2>/dev/null)" = "Status $CODE" ] ||
            fail "$l: weak check: not a Status body: $(head -c 300 "$T/out")"
        kill -0 "$PD_PID" 2>/dev/null || fail "$l: podresd is gone"
        unchanged "$l"
        echo "skip - $l: want $code $reason, got $CODE $(jqo .reason) (known finding; state unchanged)"
    else
        echo "skip - $l: want $code $reason (known finding; not run)"
    fi
}

[ "$(rev_now)" = "$R0" ] || fail "rev_now disagrees with revision"

# ---- bodies too awkward for the command line ----
python3 - "$T" <<'PY'
import json, sys
t = sys.argv[1]
def w(name, data):
    with open(f"{t}/{name}", "wb") as f:
        f.write(data if isinstance(data, bytes) else data.encode())
w("big.json", '{"devices":[' + '{"id":"x"},' * 100000 + '{"id":"y"}]}')   # ~1.1 MB
pad = 1024 * 1024 + 1 - len('{"devices":[]}')
w("limit1.json", '{"devices":[' + ' ' * pad + ']}')                    # 1 MiB + 1 byte
assert len(open(f"{t}/limit1.json", "rb").read()) == 1024 * 1024 + 1
w("deep.json", '[' * 100000 + ']' * 100000)
w("deepfield.json", '{"devices":' + '[' * 100000 + ']' * 100000 + '}')
w("deepobj.json", '{"devices":[{"id":"g","properties":' + '{"a":' * 50000 + '""' + '}' * 50000 + '}]}')
w("many.json", json.dumps({"devices": [{"id": "d%d" % i} for i in range(4097)]}))
w("manyc.json", json.dumps({"uid": "u", "containers": [{"name": "c%d" % i} for i in range(4097)]}))
w("utf8-id.json", b'{"devices":[{"id":"g\xff\xfe"}]}')
w("utf8-prop.json", b'{"devices":[{"id":"g","properties":{"k":"\xc3\x28"}}]}')
w("utf8-key.json", b'{"devices":[],"\xed\xa0\x80":1}')
w("utf8-name.json", b'{"uid":"u","containers":[{"name":"m\xc0\xaf"}]}')
w("nul-body.json", b'{"devices":[{"id":"g\x00"}]}')
w("nul-lead.json", b'\x00{"devices":[]}')
w("nul-patch.json", b'{"health":"Healthy"}\x00')
w("bom.json", b'\xef\xbb\xbf{"devices":[]}')
PY

D=/v1/resources/vendor.com/gpu/devices
P=/v1/namespaces/ns1/pods/p1
A=/v1/namespaces/ns1/pods/p1/allocate
RV=/v1/reservations/ns1/r1
G1='{"resourceName":"vendor.com/gpu","deviceIds":["gpu1"]}'
LONG63=$(printf 'a%.0s' {1..63})
LONG64=${LONG63}a
LONG254=$(printf 'a%.0s' {1..254})
LONG129=$(printf 'u%.0s' {1..129})
pod() { printf '{"uid":"u","containers":[%s]}' "$1"; }
alloc() { printf '{"uid":"u","containers":[{"name":"m","requests":%s}]}' "$1"; }

echo "# bad JSON"
t 400 BadRequest PUT $D '{"devices":['
t 400 BadRequest PUT $D '{"devices":[{"id":"gpu1"'
t 400 BadRequest PUT $D '{"devices":[]} x'
t 400 BadRequest PUT $D '{"devices":[]}{"devices":[]}'
# A top-level JSON array is freed twice (api.c parse_body): ASan aborts.
known skip 400 BadRequest PUT $D '[]'
known skip 400 BadRequest PUT $D '[{"devices":[]}]'
t 400 BadRequest PUT $D '"devices"'
t 400 BadRequest PUT $D '42'
t 400 BadRequest PUT $D 'null'
t 400 BadRequest PUT $D 'true'
t 400 BadRequest PUT $D ''
t 400 BadRequest PUT $D '   '
t 400 BadRequest PUT $D '{"devices":[],"devices":[]}'
t 400 BadRequest PUT $D "{'devices':[]}"
t 400 BadRequest PUT $D '{devices:[]}'
t 400 BadRequest PUT $D '{"devices":[] /* comment */}'
t 400 BadRequest PUT $D '{"devices":[],"ttlSeconds":NaN}'
t 400 BadRequest PUT $D '{"devices":[],}'
t 400 BadRequest PUT $P '{"uid":"u","containers":[{"name":"m"'
known skip 400 BadRequest POST $A '[]'
t 400 BadRequest PATCH $D/gpu1 '"Unhealthy"'
t 400 BadRequest PUT $RV ''
echo "# deep nesting, bad UTF-8, NUL bytes"
t 400 BadRequest PUT $D "@$T/deep.json"
t 400 BadRequest PUT $D "@$T/deepfield.json"
t 400 BadRequest PUT $D "@$T/deepobj.json"
t 400 BadRequest PUT $D "@$T/utf8-id.json"
t 400 BadRequest PUT $D "@$T/utf8-prop.json"
t 400 BadRequest PUT $D "@$T/utf8-key.json"
t 400 BadRequest PUT $P "@$T/utf8-name.json"
t 400 BadRequest PUT $D '{"devices":[{"id":"g","properties":{"k":"\ud800"}}]}'
t 400 BadRequest PUT $D "@$T/nul-body.json"
t 400 BadRequest PUT $D "@$T/nul-lead.json"
t 400 BadRequest PATCH $D/gpu1 "@$T/nul-patch.json"
t 400 BadRequest PUT $D '{"devices":[{"id":"g\u0000x"}]}'
t 400 BadRequest PUT $D "@$T/bom.json"

echo "# bytes that are not UTF-8, or a character cut, in what the message quotes"
# The Status must still come, in UTF-8: each bad byte is U+FFFD (as Go's
# encoding/json writes it). jansson refuses invalid UTF-8, and these used to
# get 500 "out of memory".
FFFD=$'\xef\xbf\xbd'
utf8() {
    python3 -c 'import sys; open(sys.argv[1], "rb").read().decode("utf-8")' "$T/out" ||
        fail "$1: the answer is not UTF-8: $(head -c 300 "$T/out")"
}
MSG="a${FFFD}b" t 422 Invalid PUT '/v1/namespaces/ns1/pods/a%FFb' '{"uid":"u","containers":[]}'
utf8 "name with 0xFF"
MSG="${FFFD}" t 400 BadRequest GET '/v1/pods?namespace=%FF'
utf8 "namespace query 0xFF"
MSG="${FFFD}" t 400 BadRequest GET '/v1/watch?kind=%C3'
utf8 "watch kind cut"
MSG="text/${FFFD}" CT=$'text/\xff' t 415 UnsupportedMediaType PUT $P "$(pod '{"name":"m"}')"
utf8 "Content-Type 0xFF"
# a name of 299 bytes and a 2-byte character: the message cuts it at 300
t 422 Invalid PUT "/v1/namespaces/ns1/pods/$(printf 'a%.0s' {1..299})%C3%A9" "$(pod '{"name":"m"}')"
utf8 "name cut inside a character"
t 422 Invalid PUT $P "$(pod "{\"name\":\"$(printf '\xc3\xa9%.0s' {1..600})\"}")"
utf8 "container name of 600 é"

echo "# PUT $D: wrong types, unknown fields, bad values"
t 400 BadRequest PUT $D '{"devices":{}}'
t 400 BadRequest PUT $D '{"devices":"gpu0"}'
t 400 BadRequest PUT $D '{"devices":null}'
t 400 BadRequest PUT $D '{"devices":[1]}'
t 400 BadRequest PUT $D '{"devices":[["gpu0"]]}'
t 400 BadRequest PUT $D '{"devices":[{"id":5}]}'
t 400 BadRequest PUT $D '{"devices":[{"id":["gpu0"]}]}'
t 400 BadRequest PUT $D '{"devices":[{"id":"g","health":true}]}'
t 400 BadRequest PUT $D '{"devices":[{"id":"g","topology":[]}]}'
t 400 BadRequest PUT $D '{"devices":[{"id":"g","topology":{"nodes":{}}}]}'
t 400 BadRequest PUT $D '{"devices":[{"id":"g","topology":{"nodes":[0]}}]}'
t 400 BadRequest PUT $D '{"devices":[{"id":"g","topology":{"nodes":[{"ID":"0"}]}}]}'
t 400 BadRequest PUT $D '{"devices":[{"id":"g","topology":{"nodes":[{"ID":0.5}]}}]}'
t 400 BadRequest PUT $D '{"devices":[{"id":"g","properties":[]}]}'
t 400 BadRequest PUT $D '{"devices":[{"id":"g","properties":{"a":1}}]}'
t 400 BadRequest PUT $D '{"devices":[{"id":"g","properties":{"a":null}}]}'
# control characters in a property key (a terminal escape, a C1 CSI): refused; in a value: kept
MSG='control character' t 422 Invalid PUT $D '{"devices":[{"id":"g","properties":{"k\u001b]0;x\u0007":"v"}}]}'
MSG='control character' t 422 Invalid PUT $D '{"devices":[{"id":"g","properties":{"k\u009b":"v"}}]}'
t 400 BadRequest PUT $D '{"devices":[],"ttlSeconds":"30"}'
t 400 BadRequest PUT $D '{"devices":[],"ttlSeconds":1.5}'
t 400 BadRequest PUT $D '{"devices":[],"ttlSeconds":true}'
t 400 BadRequest PUT $D '{"devices":[],"ttlSeconds":[30]}'
t 400 BadRequest PUT $D '{"devices":[],"ttlSeconds":99999999999999999999}'
MSG='unknown field' t 400 BadRequest PUT $D '{"devices":[],"extra":1}'
MSG='unknown field' t 400 BadRequest PUT $D '{"devices":[],"Devices":[]}'
MSG='unknown field' t 400 BadRequest PUT $D '{"devices":[{"id":"g","name":"x"}]}'
MSG='unknown field' t 400 BadRequest PUT $D '{"devices":[{"id":"g","topology":{"nodes":[],"x":1}}]}'
MSG='unknown field' t 400 BadRequest PUT $D '{"devices":[{"id":"g","topology":{"nodes":[{"ID":0,"id":0}]}}]}'
t 422 Invalid PUT $D '{"devices":[{"id":"g","health":"Sick"}]}'
t 422 Invalid PUT $D '{"devices":[{"id":"g","health":"healthy"}]}'
t 422 Invalid PUT $D '{"devices":[],"ttlSeconds":0}'
t 422 Invalid PUT $D '{"devices":[],"ttlSeconds":-5}'
t 422 Invalid PUT $D '{"devices":[],"ttlSeconds":86401}'
t 422 Invalid PUT $D '{"devices":[{"id":"g","topology":{"nodes":[{"ID":-1}]}}]}'
t 422 Invalid PUT $D '{"devices":[{"id":"g","topology":{"nodes":[{"ID":4096}]}}]}'
t 422 Invalid PUT $D '{"devices":[{"id":"bad id"}]}'
t 422 Invalid PUT $D '{"devices":[{"id":"-gpu"}]}'
t 422 Invalid PUT $D '{"devices":[{"id":"/gpu0"}]}'
t 422 Invalid PUT $D '{"devices":[{"id":"gpu|0"}]}'
t 422 Invalid PUT $D '{"devices":[{"id":"g","aliases":["a b"]}]}'
t 422 Invalid PUT $D '{"devices":[{"id":"g","physical":""}]}'
t 400 BadRequest PUT $D '{"devices":[{"id":"g","aliases":"a"}]}'
t 422 Invalid PUT /v1/drivers/gpu.example.com/devices '{"devices":[{"id":"gpu-0"}]}'
t 400 BadRequest PUT /v1/drivers/gpu.example.com/devices '{"devices":[{"id":"p/g","health":"Healthy"}]}'
t 422 Invalid PUT /v1/drivers/Gpu_X/devices '{"devices":[]}'
t 422 Invalid PUT $D '{"devices":[{"id":""}]}'
t 422 Invalid PUT $D "{\"devices\":[{\"id\":\"$LONG254\"}]}"
MSG='twice' t 422 Invalid PUT $D '{"devices":[{"id":"gpu0"},{"id":"gpu0"}]}'
t 422 Invalid PUT $D '{"devices":[{"id":"g","properties":{"":"v"}}]}'
t 422 Invalid PUT $D "@$T/many.json"
t 422 Invalid PUT /v1/resources/Vendor.com/gpu/devices '{"devices":[]}'
t 422 Invalid PUT /v1/resources/vendor.com/-gpu/devices '{"devices":[]}'
t 422 Invalid PUT /v1/resources/vendor_com/gpu/devices '{"devices":[]}'
t 422 Invalid PUT "/v1/resources/$LONG254/gpu/devices" '{"devices":[]}'
t 404 NotFound PUT /v1/resources/gpu/devices '{"devices":[]}'
t 404 NotFound PUT /v1/resources/a/b/c/devices '{"devices":[]}'
MSG="Required value" t 422 Invalid PUT $D '{}'
MSG="Required value" t 422 Invalid PUT $D '{"ttlSeconds":30}'
MSG="Required value" t 422 Invalid PUT $D '{"devices":[{"health":"Healthy"}]}'

echo "# PATCH $D/{id}"
t 422 Invalid PATCH $D/gpu1 '{"health":"Sick"}'
t 422 Invalid PATCH $D/gpu1 '{"health":""}'
t 400 BadRequest PATCH $D/gpu1 '{"health":1}'
t 400 BadRequest PATCH $D/gpu1 '{"health":null}'
t 400 BadRequest PATCH $D/gpu1 '{"health":["Unhealthy"]}'
MSG='unknown field' t 400 BadRequest PATCH $D/gpu1 '{"health":"Unhealthy","id":"gpu9"}'
known skip 400 BadRequest PATCH $D/gpu1 '[{"op":"replace","path":"/health","value":"Unhealthy"}]'
t 422 Invalid PATCH "$D/bad%20id" '{"health":"Unhealthy"}'
t 422 Invalid PATCH $D/-gpu1 '{"health":"Unhealthy"}'
t 422 Invalid PATCH "$D/$LONG254" '{"health":"Unhealthy"}'
t 422 Invalid PATCH /v1/resources/Vendor.com/gpu/devices/gpu1 '{"health":"Unhealthy"}'
t 404 NotFound PATCH $D/nosuch '{"health":"Unhealthy"}'
t 404 NotFound PATCH /v1/resources/vendor.com/tpu/devices/gpu1 '{"health":"Unhealthy"}'
MSG="Required value" t 422 Invalid PATCH $D/gpu1 '{}'

echo "# PUT $P"
t 400 BadRequest PUT $P '{"uid":5,"containers":[]}'
t 400 BadRequest PUT $P '{"uid":["u"],"containers":[]}'
t 400 BadRequest PUT $P '{"uid":"u","containers":{}}'
t 400 BadRequest PUT $P '{"uid":"u","containers":"main"}'
t 400 BadRequest PUT $P '{"uid":"u","containers":[5]}'
t 400 BadRequest PUT $P "$(pod '{"name":1}')"
t 400 BadRequest PUT $P "$(pod '{"name":null}')"
t 400 BadRequest PUT $P "$(pod '{"name":"m","devices":{}}')"
t 400 BadRequest PUT $P "$(pod '{"name":"m","devices":[5]}')"
t 400 BadRequest PUT $P "$(pod '{"name":"m","devices":[{"resourceName":5,"deviceIds":["gpu1"]}]}')"
t 400 BadRequest PUT $P "$(pod '{"name":"m","devices":[{"resourceName":"vendor.com/gpu","deviceIds":"gpu1"}]}')"
t 400 BadRequest PUT $P "$(pod '{"name":"m","devices":[{"resourceName":"vendor.com/gpu","deviceIds":[1]}]}')"
t 400 BadRequest PUT $P "$(pod '{"name":"m","cpuIds":"0"}')"
t 400 BadRequest PUT $P "$(pod '{"name":"m","cpuIds":["0"]}')"
t 400 BadRequest PUT $P "$(pod '{"name":"m","cpuIds":[1.5]}')"
t 400 BadRequest PUT $P "$(pod '{"name":"m","memory":{}}')"
t 400 BadRequest PUT $P "$(pod '{"name":"m","memory":[1]}')"
t 400 BadRequest PUT $P "$(pod '{"name":"m","memory":[{"memoryType":1,"size":1}]}')"
t 400 BadRequest PUT $P "$(pod '{"name":"m","memory":[{"memoryType":"memory","size":"1Gi"}]}')"
MSG='unknown field' t 400 BadRequest PUT $P '{"uid":"u","containers":[],"spec":{}}'
MSG='unknown field' t 400 BadRequest PUT $P '{"uid":"u","namespace":"ns1","containers":[]}'
MSG='unknown field' t 400 BadRequest PUT $P "$(pod '{"name":"m","requests":{}}')"
MSG='unknown field' t 400 BadRequest PUT $P "$(pod '{"name":"m","devices":[{"resourceName":"vendor.com/gpu","deviceIds":["gpu1"],"extra":1}]}')"
MSG='topology' t 400 BadRequest PUT $P "$(pod '{"name":"m","devices":[{"resourceName":"vendor.com/gpu","deviceIds":["gpu1"],"topology":"garbage"}]}')"
MSG='topology' t 400 BadRequest PUT $RV '{"containers":[{"name":"m","devices":[{"resourceName":"vendor.com/gpu","deviceIds":["gpu1"],"topology":{"nodes":"0"}}]}]}'
MSG='kubernetes.io/gpu' t 422 Invalid PUT $P "$(pod '{"name":"m","devices":[{"resourceName":"kubernetes.io/gpu","deviceIds":["gpu1"]}]}')"
t 422 Invalid PUT /v1/resources/requests.example.com/gpu/devices '{"devices":[]}'
MSG='unknown field' t 400 BadRequest PUT $P "$(pod '{"name":"m","memory":[{"memoryType":"memory","size":1,"x":1}]}')"
t 422 Invalid PUT $P '{"uid":"bad uid","containers":[]}'
t 422 Invalid PUT $P "{\"uid\":\"$LONG129\",\"containers\":[]}"
t 422 Invalid PUT $P "$(pod '{"name":"Main"}')"
t 422 Invalid PUT $P "$(pod '{"name":"a_b"}')"
t 422 Invalid PUT $P "$(pod '{"name":""}')"
t 422 Invalid PUT $P "$(pod "{\"name\":\"${LONG64}\"}")"
MSG='twice' t 422 Invalid PUT $P "$(pod '{"name":"m"},{"name":"m"}')"
t 422 Invalid PUT $P "$(pod '{"name":"m","devices":[{"resourceName":"gpu","deviceIds":["gpu1"]}]}')"
t 422 Invalid PUT $P "$(pod '{"name":"m","devices":[{"resourceName":"a/b/c","deviceIds":["gpu1"]}]}')"
t 422 Invalid PUT $P "$(pod '{"name":"m","devices":[{"resourceName":"/gpu","deviceIds":["gpu1"]}]}')"
t 422 Invalid PUT $P "$(pod '{"name":"m","devices":[{"resourceName":"vendor.com/gpu","deviceIds":[]}]}')"
t 422 Invalid PUT $P "$(pod '{"name":"m","devices":[{"resourceName":"vendor.com/gpu","deviceIds":["bad/id"]}]}')"
t 422 Invalid PUT $P "$(pod '{"name":"m","devices":[{"resourceName":"vendor.com/gpu","deviceIds":[" gpu1"]}]}')"
MSG='twice' t 422 Invalid PUT $P "$(pod '{"name":"m","devices":[{"resourceName":"vendor.com/gpu","deviceIds":["gpu1","gpu1"]}]}')"
MSG='twice' t 422 Invalid PUT $P "$(pod "{\"name\":\"m\",\"devices\":[$G1]},{\"name\":\"n\",\"devices\":[$G1]}")"
t 422 Invalid PUT $P "$(pod '{"name":"m","cpuIds":[-1]}')"
t 422 Invalid PUT $P "$(pod '{"name":"m","memory":[{"memoryType":"memory","size":-1}]}')"
t 422 Invalid PUT $P "@$T/manyc.json"
t 422 Invalid PUT /v1/namespaces/NS1/pods/p1 '{"uid":"u","containers":[]}'
t 422 Invalid PUT "/v1/namespaces/$LONG64/pods/p1" '{"uid":"u","containers":[]}'
t 422 Invalid PUT /v1/namespaces/ns.1/pods/p1 '{"uid":"u","containers":[]}'
t 422 Invalid PUT /v1/namespaces/ns1/pods/p_1 '{"uid":"u","containers":[]}'
t 422 Invalid PUT /v1/namespaces/ns1/pods/P1 '{"uid":"u","containers":[]}'
t 422 Invalid PUT /v1/namespaces/ns1/pods/p1. '{"uid":"u","containers":[]}'
t 422 Invalid PUT "/v1/namespaces/ns1/pods/$LONG254" '{"uid":"u","containers":[]}'
MSG='gpu0' t 409 Conflict PUT $P "$(pod '{"name":"m","devices":[{"resourceName":"vendor.com/gpu","deviceIds":["gpu0"]}]}')"
MSG='gpu0' t 409 Conflict PUT $P "$(pod '{"name":"m","devices":[{"resourceName":"vendor.com/gpu","deviceIds":["gpu1","gpu0"]}]}')"
MSG='nosuch' t 422 Invalid PUT $P "$(pod '{"name":"m","devices":[{"resourceName":"vendor.com/gpu","deviceIds":["nosuch"]}]}')"
t 422 Invalid PUT $P "$(pod '{"name":"m","devices":[{"resourceName":"example.com/fpga","deviceIds":["nic0"]}]}')"
MSG="Required value" t 422 Invalid PUT $P '{"uid":"u"}'
MSG="Required value" t 422 Invalid PUT $P "$(pod '{"devices":[]}')"
MSG="Required value" t 422 Invalid PUT $P "$(pod '{"name":"m","devices":[{"deviceIds":["gpu1"]}]}')"
MSG="Required value" t 422 Invalid PUT $P "$(pod '{"name":"m","memory":[{"memoryType":"memory"}]}')"

echo "# POST $A"
t 422 Invalid POST $A "$(alloc '{"vendor.com/gpu":-1}')"
t 422 Invalid POST $A "$(alloc '{"vendor.com/gpu":1025}')"
t 422 Invalid POST $A "$(alloc '{"vendor.com/gpu":9223372036854775807}')"
t 422 Invalid POST $A "$(alloc '{"vendor.com/gpu":-9223372036854775808}')"
t 400 BadRequest POST $A "$(alloc '{"vendor.com/gpu":99999999999999999999}')"
t 400 BadRequest POST $A "$(alloc '{"vendor.com/gpu":1e30}')"
t 400 BadRequest POST $A "$(alloc '{"vendor.com/gpu":1.5}')"
t 400 BadRequest POST $A "$(alloc '{"vendor.com/gpu":"2"}')"
t 400 BadRequest POST $A "$(alloc '{"vendor.com/gpu":null}')"
t 400 BadRequest POST $A "$(alloc '[]')"
t 400 BadRequest POST $A "$(alloc '"vendor.com/gpu=1"')"
t 422 Invalid POST $A "$(alloc '{"gpu":1}')"
t 422 Invalid POST $A "$(alloc '{"a/b/c":1}')"
t 400 BadRequest POST $A '{"uid":7,"containers":[]}'
t 400 BadRequest POST $A '{"uid":"u","containers":{"m":{}}}'
MSG='unknown field' t 400 BadRequest POST $A '{"uid":"u","containers":[{"name":"m","requests":{},"devices":[]}]}'
MSG='unknown field' t 400 BadRequest POST $A '{"uid":"u","containers":[],"requests":{}}'
t 422 Invalid POST $A '{"uid":"u","containers":[{"name":"M","requests":{"vendor.com/gpu":1}}]}'
MSG='twice' t 422 Invalid POST $A '{"uid":"u","containers":[{"name":"m","requests":{}},{"name":"m","requests":{}}]}'
t 422 Invalid POST $A '{"uid":"u/x","containers":[]}'
t 422 Invalid POST /v1/namespaces/Ns1/pods/p1/allocate "$(alloc '{"vendor.com/gpu":1}')"
MSG='requested 5' t 409 Conflict POST $A "$(alloc '{"vendor.com/gpu":5}')"
t 409 Conflict POST $A "$(alloc '{"vendor.com/gpu":1,"example.com/nic":2}')"
MSG='is registered on this node (container m requested 1)' t 404 NotFound POST $A "$(alloc '{"vendor.com/tpu":1}')"
MSG="Required value" t 422 Invalid POST $A '{"uid":"u","containers":[{"name":"m"}]}'
MSG="Required value" t 422 Invalid POST $A '{"uid":"u"}'

echo "# DELETE pods"
t 400 BadRequest DELETE '/v1/namespaces/ns1/pods/holder?uid=bad%20uid'
t 400 BadRequest DELETE "/v1/namespaces/ns1/pods/holder?uid=$LONG129"
t 400 BadRequest DELETE '/v1/namespaces/ns1/pods/holder?uid=%C3%A9'
t 400 BadRequest DELETE '/v1/namespaces/ns1/pods/holder?uid=u1%0A'
MSG='u1' t 409 Conflict DELETE '/v1/namespaces/ns1/pods/holder?uid=other'
t 404 NotFound DELETE /v1/namespaces/ns1/pods/nosuch
t 404 NotFound DELETE /v1/namespaces/ns2/pods/holder
t 422 Invalid DELETE /v1/namespaces/NS1/pods/holder
t 422 Invalid DELETE /v1/namespaces/ns1/pods/Holder
# %00 in the path or query cuts the decoded value short (libmicrohttpd unescapes
# in place; http.c sets no MHD_OPTION_UNESCAPE_CALLBACK): this releases holder.
known skip 400 BadRequest DELETE '/v1/namespaces/ns1/pods/holder?uid=u1%00junk'
known skip 422 Invalid DELETE '/v1/namespaces/ns1/pods/holder%00junk'

echo "# PUT/DELETE $RV"
t 400 BadRequest PUT $RV '{"containers":{}}'
t 400 BadRequest PUT $RV '{"containers":[{"name":"m","devices":"gpu1"}]}'
MSG='unknown field' t 400 BadRequest PUT $RV '{"uid":"u","containers":[]}'
MSG='unknown field' t 400 BadRequest PUT $RV '{"containers":[{"name":"m","requests":{}}]}'
MSG='unknown field' t 400 BadRequest PUT $RV '{"containers":[{"name":"m","cpuIds":[0]}]}'
t 422 Invalid PUT $RV '{"containers":[{"name":"M"}]}'
t 422 Invalid PUT $RV '{"containers":[{"name":"m","devices":[{"resourceName":"gpu","deviceIds":["gpu1"]}]}]}'
MSG='twice' t 422 Invalid PUT $RV "{\"containers\":[{\"name\":\"m\",\"devices\":[$G1,$G1]}]}"
MSG='gpu0' t 409 Conflict PUT $RV '{"containers":[{"name":"m","devices":[{"resourceName":"vendor.com/gpu","deviceIds":["gpu0"]}]}]}'
t 422 Invalid PUT /v1/reservations/NS/r1 '{"containers":[]}'
t 422 Invalid PUT /v1/reservations/ns1/r_1 '{"containers":[]}'
t 404 NotFound DELETE $RV
t 404 NotFound GET $RV
t 422 Invalid DELETE /v1/reservations/ns1/R1
MSG="Required value" t 422 Invalid PUT $RV '{}'

echo "# wrong methods (405 + Allow)"
ALLOW='GET' t 405 MethodNotAllowed POST /v1/pods '{}'
ALLOW='GET' t 405 MethodNotAllowed DELETE /v1/devices
ALLOW='GET' t 405 MethodNotAllowed PUT /v1/devices '{"devices":[]}'
ALLOW='GET, PUT, DELETE' t 405 MethodNotAllowed PATCH /v1/namespaces/ns1/pods/holder '{"uid":"u1"}'
ALLOW='GET, PUT, DELETE' t 405 MethodNotAllowed POST /v1/namespaces/ns1/pods/holder '{"uid":"u1"}'
ALLOW='POST' t 405 MethodNotAllowed GET /v1/namespaces/ns1/pods/holder/allocate
ALLOW='POST' t 405 MethodNotAllowed PUT /v1/namespaces/ns1/pods/holder/allocate '{}'
ALLOW='PUT' t 405 MethodNotAllowed GET $D
ALLOW='PUT' t 405 MethodNotAllowed DELETE $D
ALLOW='PATCH' t 405 MethodNotAllowed PUT $D/gpu1 '{"health":"Unhealthy"}'
ALLOW='PATCH' t 405 MethodNotAllowed DELETE $D/gpu0
ALLOW='GET, PUT, DELETE' t 405 MethodNotAllowed POST $RV '{"containers":[]}'
ALLOW='GET' t 405 MethodNotAllowed POST /v1/watch
ALLOW='GET' t 405 MethodNotAllowed DELETE /v1/reservations
ALLOW='GET' t 405 MethodNotAllowed PUT /healthz ok
ALLOW='GET' t 405 MethodNotAllowed POST /version '{}'
ALLOW='GET' t 405 MethodNotAllowed OPTIONS /v1/pods
ALLOW='GET' t 405 MethodNotAllowed TRACE /v1/allocatable
ALLOW='GET' t 405 MethodNotAllowed BREW /v1/pods

echo "# wrong content types (415)"
CT=text/plain t 415 UnsupportedMediaType PATCH $D/gpu1 '{"health":"Unhealthy"}'
CT=application/x-www-form-urlencoded t 415 UnsupportedMediaType PUT $P "$(pod '{"name":"m"}')"
CT=application/x-www-form-urlencoded t 415 UnsupportedMediaType PUT $D 'devices=gpu0'
CT=text/plain t 415 UnsupportedMediaType POST $A "$(alloc '{"vendor.com/gpu":1}')"
CT=application/xml t 415 UnsupportedMediaType PUT $RV '<containers/>'
CT=application/yaml t 415 UnsupportedMediaType PUT $D 'devices: []'
CT=multipart/form-data t 415 UnsupportedMediaType PUT $D '{"devices":[]}'
CT=application/vnd.kubernetes.protobuf t 415 UnsupportedMediaType PUT $P '{"uid":"u","containers":[]}'
CT='json' t 415 UnsupportedMediaType PATCH $D/gpu1 '{"health":"Unhealthy"}'
# check_body compares only a prefix of Content-Type: application/jsonx and
# application/json-patch+json pass as JSON; merge-patch+json passes on PUT/POST.
CT=application/jsonx known weak 415 UnsupportedMediaType PATCH $D/gpu1 '{"health":"Sick"}'
CT=application/json-patch+json known skip 415 UnsupportedMediaType PATCH $D/gpu1 \
    '[{"op":"replace","path":"/health","value":"Unhealthy"}]'
CT=application/merge-patch+json known weak 415 UnsupportedMediaType PUT $P "$(pod '{"name":"M"}')"

echo "# unknown paths (404)"
t 404 NotFound GET /v2/pods
t 404 NotFound GET /v1/namespaces/ns1
t 405 MethodNotAllowed POST /v1/namespaces/ns1/pods '{}'
t 400 BadRequest GET '/v1/namespaces/ns1/pods?namespace=ns2'
t 400 BadRequest GET '/v1/pods?resourse=vendor.com/gpu'
t 400 BadRequest GET '/v1/devices?resource=vendor.com/gpu&resource=vendor.com/gpu'
t 400 BadRequest GET '/healthz?verbose=1'
t 400 BadRequest GET '/v1/watch?since=1&resourceVersion=1'
t 404 NotFound GET /v1/pods/
t 404 NotFound GET /v1/devices/
t 404 NotFound GET //v1/pods
t 404 NotFound GET /v1//pods
t 404 NotFound GET /
t 404 NotFound GET /v1
t 404 NotFound GET /V1/pods
t 404 NotFound GET /healthz/
t 404 NotFound GET /v1/namespaces/ns1/pods/holder/
t 404 NotFound PUT /v1/namespaces/ns1/pods/holder/ '{"uid":"u1","containers":[]}'
t 404 NotFound DELETE /v1/namespaces/ns1/pods//holder
t 404 NotFound GET /v1/namespaces/ns1/pods/a%2Fb
t 404 NotFound DELETE /v1/namespaces/ns1/pods/../pods/holder
t 404 NotFound GET /v1/namespaces/ns1/pods/holder/x/y/z/w/v
t 404 NotFound GET /v1/namespaces/ns1/pods/nosuch
t 404 NotFound GET /v1/namespaces/ns2/pods/holder
known skip 422 Invalid GET '/v1/namespaces/ns1/pods/holder%00junk' # answers 200 with holder

echo "# bad query parameters (400)"
t 400 BadRequest GET '/v1/devices?health=Sick'
t 400 BadRequest GET '/v1/devices?health=healthy'
t 400 BadRequest GET '/v1/devices?free=yes'
t 400 BadRequest GET '/v1/devices?resource=Gpu_x'
t 400 BadRequest GET '/v1/devices?resource=a/b/c'
t 400 BadRequest GET '/v1/pods?namespace=UPPER'
t 400 BadRequest GET '/v1/pods?namespace=a_b'
t 400 BadRequest GET "/v1/pods?namespace=$LONG64"
t 400 BadRequest GET '/v1/pods?resource=a/b/c'
t 400 BadRequest GET '/v1/watch?since=abc'
t 400 BadRequest GET '/v1/watch?since=-1'
t 400 BadRequest GET '/v1/watch?since=1.5'
t 400 BadRequest GET '/v1/watch?since=99999999999999999999999'
t 400 BadRequest GET '/v1/watch?kind=Pod'
t 400 BadRequest GET '/v1/watch?kind=podresources'
t 400 BadRequest GET '/v1/watch?timeoutSeconds=-1'
t 400 BadRequest GET '/v1/watch?timeoutSeconds=abc'
t 400 BadRequest GET '/v1/watch?timeoutSeconds=99999999'
t 400 BadRequest GET '/v1/watch?namespace=A_B'
t 400 BadRequest GET '/v1/watch?since=1&kind=Pod&timeoutSeconds=1'
# libmicrohttpd keeps "%00" in a query as it is (no NUL cuts a value short)
t 400 BadRequest GET '/v1/pods?namespace=ns1%00UPPER'
t 400 BadRequest GET '/v1/watch?since=1%005'
t 400 BadRequest GET '/v1/watch?since=%2B5'
t 400 BadRequest GET '/v1/watch?since=%2060'
t 400 BadRequest GET '/v1/watch?timeoutSeconds=%2B1'

echo "# oversize bodies (413)"
t 413 RequestEntityTooLarge PUT $D "@$T/big.json"
t 413 RequestEntityTooLarge PUT $D "@$T/big.json" -H 'Expect:'
t 413 RequestEntityTooLarge PUT $D "@$T/limit1.json" -H 'Expect:'
t 413 RequestEntityTooLarge PUT $P "@$T/big.json"
t 413 RequestEntityTooLarge POST $A "@$T/big.json" -H 'Expect:'
t 413 RequestEntityTooLarge PUT $RV "@$T/limit1.json"
# A client that sends its oversize body without waiting (no Expect) still gets
# the 413: podresd reads the body to its end first. When it answered at the
# headers and closed, curl saw a reset and no answer in 7 of 200 tries.
codes=$(for i in $(seq 100); do
    curl -s -o /dev/null -w '%{http_code}\n' -X POST --unix-socket "$PD_SOCK" -H 'Expect:' \
        -H 'Content-Type: application/json' --data-binary "@$T/big.json" \
        http://localhost/v1/namespaces/ns1/pods/p1/allocate
done | sort | uniq -c | tr -s ' ' | tr '\n' ',')
[ "$codes" = " 100 413," ] || fail "100 oversize bodies sent without Expect: answers $codes, want 413 each"
ok "100 oversize bodies sent without waiting: 413 each"
# A chunked body has no length to refuse up front: podresd answers 413 on
# the socket as soon as it passes the limit, and closes (http_request.c).
for i in 1 2 3 4 5; do
    t 413 RequestEntityTooLarge PUT $D "@$T/big.json" -H 'Transfer-Encoding: chunked'
done

echo "# loopback TCP: token and Host rules (403; a Host that is not host[:port] 400)"
tt 403 Forbidden PATCH $D/gpu1 '{"health":"Unhealthy"}'
tt 403 Forbidden PATCH $D/gpu1 '{"health":"Unhealthy"}' -H 'Authorization: Bearer wrong-token'
tt 403 Forbidden PATCH $D/gpu1 '{"health":"Unhealthy"}' -H "Authorization: Bearer ${TOKEN%?}"
tt 403 Forbidden PATCH $D/gpu1 '{"health":"Unhealthy"}' -H "Authorization: Bearer ${TOKEN}x"
tt 403 Forbidden PATCH $D/gpu1 '{"health":"Unhealthy"}' -H "Authorization: Basic $(printf '%s' "$TOKEN" | base64)"
tt 403 Forbidden PATCH $D/gpu1 '{"health":"Unhealthy"}' -H "Authorization: $TOKEN"
tt 403 Forbidden PATCH $D/gpu1 '{"health":"Unhealthy"}' -H 'Authorization: Bearer '
tt 403 Forbidden DELETE /v1/namespaces/ns1/pods/holder
tt 403 Forbidden DELETE /v1/namespaces/ns1/pods/holder "$NOBODY" -H 'Authorization: Bearer wrong-token'
tt 403 Forbidden PUT $P "$(pod "{\"name\":\"m\",\"devices\":[$G1]}")"
tt 403 Forbidden POST $A "$(alloc '{"vendor.com/gpu":1}')" -H 'Authorization: Bearer nope'
tt 403 Forbidden PUT $RV '{"containers":[]}'
tt 403 Forbidden PUT $D '{"devices":[]}' -H 'Authorization: Bearer nope'
tt 403 Forbidden GET /v1/pods "$NOBODY" -H 'Host: evil.example.com'
tt 403 Forbidden GET /version "$NOBODY" -H 'Host: evil.example.com:80'
tt 403 Forbidden GET /v1/devices "$NOBODY" -H 'Host: 127.0.0.1.nip.io'
tt 403 Forbidden GET /v1/devices "$NOBODY" -H 'Host: 10.0.0.1'
tt 400 BadRequest GET /v1/devices "$NOBODY" -H 'Host: 127.0.0.1:80@evil' # a port of digits only
tt 400 BadRequest GET /v1/devices "$NOBODY" -H 'Host: localhost:99999'     # a TCP port
tt 403 Forbidden GET /v1/devices "$NOBODY" -H 'Host: [::2]:9444'
tt 400 BadRequest GET /v1/devices "$NOBODY" -H 'Host: [::1'
tt 400 BadRequest GET /v1/pods "$NOBODY" -H 'Host:' # HTTP/1.1 without Host (curl drops it)
tt 400 BadRequest PATCH $D/gpu1 '{"health":"Unhealthy"}' -H 'Host:' -H "Authorization: Bearer $TOKEN"
tt 403 Forbidden DELETE /v1/namespaces/ns1/pods/holder "$NOBODY" -H 'Host: evil.example.com' \
    -H "Authorization: Bearer $TOKEN"
# the token is good: the request is then judged on its own merits, still no change
tt 400 BadRequest PATCH $D/gpu1 '{"health":' -H "Authorization: Bearer $TOKEN"
tt 422 Invalid PATCH $D/gpu1 '{"health":"Sick"}' -H "Authorization: Bearer $TOKEN"
tt 409 Conflict PUT $P "$(pod '{"name":"m","devices":[{"resourceName":"vendor.com/gpu","deviceIds":["gpu0"]}]}')" \
    -H "Authorization: Bearer $TOKEN"
tt 404 NotFound GET /v2/pods
# the auth scheme is case-insensitive (RFC 7235; kube-apiserver accepts "bearer")
VIA=tcp known weak 422 Invalid PATCH $D/gpu1 '{"health":"Sick"}' -H "Authorization: bearer $TOKEN"
ALLOW='GET' tt 405 MethodNotAllowed POST /v1/pods '{}' -H "Authorization: Bearer $TOKEN"

echo "# a burst of bad requests in parallel"
BURST=()
for i in $(seq 1 24); do
    curl -s -o /dev/null -w '%{http_code}\n' --max-time 15 --unix-socket "$PD_SOCK" -X PUT \
        -H 'Content-Type: application/json' --data-binary '{"uid":"u","containers":[{"name":"m_'"$i"'"}]}' \
        "http://localhost/v1/namespaces/ns1/pods/burst-$i" > "$T/burst.$i" &
    BURST+=($!)
done
wait "${BURST[@]}" # not a bare wait: podresd is a child too
for i in $(seq 1 24); do
    [ "$(cat "$T/burst.$i")" = 422 ] || fail "burst $i: HTTP $(cat "$T/burst.$i"), want 422"
done
unchanged "burst"
ok "24 parallel bad writes -> 422 each, no change"

echo "# raw hostile byte streams"
python3 -m podres_test.hostile "$PD_SOCK" || fail "raw hostile byte streams"
alive "raw streams"
unchanged "raw streams"
NRAW=20

# Nothing leaked into the state: the pod is still there, nothing else is.
req GET /v1/pods
expect_code 200 "list pods"
[ "$(jqo '[.podResources[] | .namespace + "/" + .name] | join(",")')" = ns1/holder ] ||
    fail "pods changed: $(out)"
req GET /v1/reservations
[ "$(jqo '.reservations | length')" = 0 ] || fail "reservations appeared: $(out)"
req GET /v1/devices
[ "$(jqo '[.devices[] | .resourceName + "/" + .id + "=" + .health] | sort | join(",")')" = \
  "example.com/nic/nic0=Healthy,vendor.com/gpu/gpu0=Healthy,vendor.com/gpu/gpu1=Healthy" ] ||
    fail "devices changed: $(out)"
unchanged "final state"

pd_stop
echo "12-api-hostile: $N table cases + $NRAW raw streams passed, $NSKIP known findings" \
    "skipped, $((SECONDS - START)) s"
