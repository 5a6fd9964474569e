#!/usr/bin/env bash
# `make demo` runs the whole path and exits 0, in both of its forms, and
# leaves nothing running: PODRES_DEMO=api (podresd beside a control plane)
# prints the DeviceBindings table with three pods allocated through podresd;
# as root on a real node (PODRES_DEMO=node: the kubelet, containerd, the
# sample device plugin, podres from deploy/ with its image) two pods get the
# plugin's two devices, the third gets one when the first ends, and the
# device's history shows both holders. Its commands are pasteable lines.
# lane: node
. "$(dirname "$0")/lib.sh"

flavor=()
case "$PODRES_BIN" in */build/san/bin) flavor=(SANITIZE=address,undefined) ;; esac
# demo FORM - make demo PODRES_DEMO=FORM into $T/demo.out.
demo() {
    local rc=0
    timeout $((240 * MULT)) make -s -C "$PODRES_ROOT" demo PODRES_DEMO="$1" "${flavor[@]}" \
        > "$T/demo.out" 2>&1 || rc=$?
    [ "$rc" = 0 ] || { tail -n 60 "$T/demo.out" >&2; fail "make demo PODRES_DEMO=$1 exited $rc"; }
}
# pasteable MIN - the "$ " lines come after the line that sets KUBECONFIG and PATH, each a whole
# bash command line, at least MIN of them.
pasteable() {
    local n=0 line
    grep -qE '^\$ cd /[^;]+; export KUBECONFIG=/[^ ]+/kubeconfig PATH=/[^ ]+:\$PATH$' "$T/demo.out" ||
        fail "no KUBECONFIG/PATH line to paste first: $(cat "$T/demo.out")"
    while IFS= read -r line; do
        bash -n <<<"${line#\$ }" 2>/dev/null || fail "not a bash command line: $line"
        n=$((n + 1))
    done < <(grep '^\$ ' "$T/demo.out")
    [ "$n" -ge "$1" ] || fail "only $n command lines"
}
left_running() {
    sleep 0.5
    ! pgrep -f 'podres-demo\.' > /dev/null || fail "make demo left processes running: $(pgrep -af 'podres-demo\.')"
}

# ---- podresd beside a control plane -------------------------------------------------
demo api
grep -qE '^NAMESPACE +NAME +NODE +PHASE +DEVICES +AGE' "$T/demo.out" || fail "no DeviceBindings table: $(cat "$T/demo.out")"
for p in train-0 train-1 infer-0; do
    grep -qE "^ml +$p +demo-node +Bound +example.com/" "$T/demo.out" || fail "no Bound row for $p"
done
grep -qE '^demo-node +example.com/fpga=2,example.com/gpu=[0-9]+,example.com/nic=[0-9]+ +0 ' "$T/demo.out" ||
    fail "no NodeDevices row: $(cat "$T/demo.out")"
grep -q '/v1/pods' "$T/demo.out" && grep -q '/v1/devices' "$T/demo.out" || fail "the curl output is missing"
grep -qx '\$ kubectl get devicebindings -A' "$T/demo.out" || fail "no '\$ kubectl get devicebindings -A' line"
grep -qx '\$ kubectl get nodedevices' "$T/demo.out" || fail "no '\$ kubectl get nodedevices' line"
grep -qE "^\\$ curl -s --unix-socket /[^ ]+/podresd\.sock -X POST -H 'Content-Type: application/json' http://localhost/v1/namespaces/ml/pods/train-0/allocate -d '\{\"uid\":\"[0-9a-f-]{36}\"" "$T/demo.out" ||
    fail "no allocate curl line with its real socket path and pod uid"
grep -qE '^\$ curl -s --unix-socket /[^ ]+/podresd\.sock http://localhost/v1/pods \| jq' "$T/demo.out" || fail "no /v1/pods curl line"
pasteable 12
left_running
ok "make demo PODRES_DEMO=api: three Bound pods, the node's NodeDevices, pasteable commands; nothing left running"

# ---- on a real node ------------------------------------------------------------------
[ "$(id -u)" = 0 ] || fail "make demo on a real node needs root"
demo node
grep -qE '^demo-node +True +2 +containerd://' "$T/demo.out" || fail "no Ready node with 2 devices: $(cat "$T/demo.out")"
grep -qE '^podres-[a-z0-9]+ +2/2 +Running ' "$T/demo.out" || fail "the DaemonSet's pod not 2/2 Running: $(cat "$T/demo.out")"
grep -qE '^infer-0 +0/1 +Pending ' "$T/demo.out" || fail "infer-0 did not wait for a device: $(cat "$T/demo.out")"
# The table before train-0 ends: train-0 and train-1 Bound; after: train-1 and infer-0.
awk '/^\$ kubectl get devicebindings -A$/ {n++} n == 1 && /^ml / {print $2, $4}' "$T/demo.out" | sort |
    paste -sd, - | grep -qx 'train-0 Bound,train-1 Bound' || fail "first DeviceBindings table: $(cat "$T/demo.out")"
awk '/^\$ kubectl get devicebindings -A$/ {n++} n == 2 && /^ml / {print $2, $4}' "$T/demo.out" | sort |
    paste -sd, - | grep -qx 'infer-0 Bound,train-1 Bound' || fail "second DeviceBindings table: $(cat "$T/demo.out")"
grep -qE '^demo-node +example.com/resource=2 +0 ' "$T/demo.out" || fail "no NodeDevices row: $(cat "$T/demo.out")"
dev=$(sed -n 's/^\$ kubectl podres who \(Dev-[12]\)$/\1/p' "$T/demo.out")
[ -n "$dev" ] || fail "no kubectl podres who line: $(cat "$T/demo.out")"
grep -qE "^demo-node +example.com/resource +$dev +Healthy +held +ml/train-0/main " "$T/demo.out" ||
    fail "kubectl podres who $dev does not name ml/train-0: $(cat "$T/demo.out")"
# The history: train-0 then infer-0, the first closed, the second open.
grep -A3 "history?device=$dev" "$T/demo.out" | grep -E '^ml/' | awk '{print $1, ($3 == "now")}' |
    paste -sd, - | grep -qx 'ml/train-0 0,ml/infer-0 1' || fail "history of $dev: $(cat "$T/demo.out")"
pasteable 14
left_running
[ ! -e /var/lib/kubelet ] || fail "make demo left /var/lib/kubelet behind"
ok "make demo as root, on a real node: two pods get the plugin's devices, the third one when the first ends; the history shows both; nothing left"
