#!/usr/bin/env bash
# `make demo` runs the whole path and exits 0; its output has the
# DeviceBindings table with the three pods, and it leaves nothing running.
. "$(dirname "$0")/lib.sh"

flavor=()
case "$PODRES_BIN" in */build/san/bin) flavor=(SANITIZE=address,undefined) ;; esac
rc=0
timeout $((120 * MULT)) make -s -C "$PODRES_ROOT" demo "${flavor[@]}" > "$T/demo.out" 2>&1 || rc=$?
[ "$rc" = 0 ] || { cat "$T/demo.out" >&2; fail "make demo exited $rc"; }
grep -qE '^NAMESPACE +NAME +NODE +PHASE +DEVICES +AGE' "$T/demo.out" || fail "no DeviceBindings table: $(cat "$T/demo.out")"
for p in train-0 train-1 infer-0; do
    grep -qE "^ml +$p +demo-node +Bound +example.com/" "$T/demo.out" || fail "no Bound row for $p"
done
grep -qE '^demo-node +example.com/fpga=2,example.com/gpu=[0-9]+,example.com/nic=[0-9]+ +0 ' "$T/demo.out" ||
    fail "no NodeDevices row: $(cat "$T/demo.out")"
grep -q '/v1/pods' "$T/demo.out" && grep -q '/v1/devices' "$T/demo.out" || fail "the curl output is missing"
# The commands it runs are printed as run, to be pasted: "$ " lines with the real paths, after
# the line that sets KUBECONFIG and PATH; each is a whole bash command line.
grep -qE '^\$ cd /[^;]+; export KUBECONFIG=/[^ ]+/kubeconfig PATH=/[^ ]+:\$PATH$' "$T/demo.out" ||
    fail "no KUBECONFIG/PATH line to paste first: $(cat "$T/demo.out")"
grep -qx '\$ kubectl get devicebindings -A' "$T/demo.out" || fail "no '\$ kubectl get devicebindings -A' line"
grep -qx '\$ kubectl get nodedevices' "$T/demo.out" || fail "no '\$ kubectl get nodedevices' line"
grep -qE "^\\$ curl -s --unix-socket /[^ ]+/podresd\.sock -X POST -H 'Content-Type: application/json' http://localhost/v1/namespaces/ml/pods/train-0/allocate -d '\{\"uid\":\"[0-9a-f-]{36}\"" "$T/demo.out" ||
    fail "no allocate curl line with its real socket path and pod uid"
grep -qE '^\$ curl -s --unix-socket /[^ ]+/podresd\.sock http://localhost/v1/pods \| jq' "$T/demo.out" || fail "no /v1/pods curl line"
n=0
while IFS= read -r line; do
    bash -n <<<"${line#\$ }" 2>/dev/null || fail "not a bash command line: $line"
    n=$((n + 1))
done < <(grep '^\$ ' "$T/demo.out")
[ "$n" -ge 12 ] || fail "only $n command lines"
ok "make demo prints the $n commands it runs as pasteable '\$ ' lines with real paths"
sleep 0.5
! pgrep -f 'podres-demo\.' > /dev/null || fail "make demo left processes running: $(pgrep -af 'podres-demo\.')"
ok "make demo: the DeviceBindings table with three Bound pods, the node's NodeDevices; nothing left running"
