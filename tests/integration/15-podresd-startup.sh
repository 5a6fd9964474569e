#!/usr/bin/env bash
# Start-up: config errors name the key and the file, flags win, the socket
# path is never a symlink or a regular file, --help/--version.
. "$(dirname "$0")/lib.sh"

"$PODRES_BIN/podresd" --version | grep -q '^podresd ' || fail "--version"
"$PODRES_BIN/podresd" --help | grep -q -- '--write-token-file' || fail "--help"
# --help shows each value flag's default, for the three daemons (common/opts.c)
help=$(NODE_NAME=n-help "$PODRES_BIN/podresd" --help)
for want in '--db  *\/var\/lib\/podresd\/podresd.db$' '--kubelet-interval  *2s$' '--history  *10000$' \
    '--history-retention  *90d$' '--node-name  *n-help$' '--listen  *(none)$' '--log-level  *info$'; do
    grep -q -- "^  $want" <<<"$help" || fail "podresd --help lacks the default /$want/: $help"
done
"$PODRES_BIN/podres-syncer" --help | grep -q -- '^  --resync-interval  *5m$' || fail "podres-syncer --help: no default"
"$PODRES_BIN/podres-extender" --help | grep -q -- '^  --listen  *127.0.0.1:8888$' || fail "podres-extender --help: no default"
ok "--help shows each flag's default (podresd, podres-syncer, podres-extender)"

expect_start_fail() { # LABEL PATTERN ARGS...
    local label=$1 pat=$2 rc=0
    shift 2
    timeout 10 "$PODRES_BIN/podresd" "$@" > "$T/start.log" 2>&1 || rc=$?
    [ "$rc" -ne 0 ] || fail "$label: podresd started"
    [ "$rc" -ne 124 ] || fail "$label: podresd did not exit"
    grep -q -- "$pat" "$T/start.log" || fail "$label: message lacks '$pat': $(cat "$T/start.log")"
    ok "$label"
}
printf 'db: %s/x.db\nsoket: /tmp/x\n' "$T" > "$T/bad1.yaml"
expect_start_fail "unknown key" "unknown key \"soket\"" --config "$T/bad1.yaml"
grep -q "$T/bad1.yaml" "$T/start.log" || fail "the message does not name the file"
printf 'history: lots\n' > "$T/bad2.yaml"
expect_start_fail "bad value" 'key "history"' --config "$T/bad2.yaml"
printf 'source: magic\n' > "$T/bad3.yaml"
expect_start_fail "bad enum" 'key "source"' --config "$T/bad3.yaml"
printf 'devices:\n  - resourceName: gpu\n    devices: [{id: a}]\n' > "$T/bad4.yaml"
expect_start_fail "bad static device" 'devices\[0\]' --config "$T/bad4.yaml"
printf 'db: [unclosed\n' > "$T/bad5.yaml"
expect_start_fail "YAML syntax" "line" --config "$T/bad5.yaml"
expect_start_fail "unknown flag" "unknown flag '--bogus'; see --help" --bogus
expect_start_fail "a mistyped flag names the closest" "unknown flag '--node-nmae'; did you mean --node-name?" --node-nmae n1
expect_start_fail "a flag without its value" "flag '--db' needs a value" --db
expect_start_fail "a bad enum flag lists the allowed values" \
    'key "log_level": bad value "verbose"; allowed: err, warn, info, debug' --log-level verbose
printf 'log_level: verbose\n' > "$T/bad11.yaml"
expect_start_fail "a bad enum key lists the allowed values" \
    "bad11.yaml': key \"log_level\": bad value \"verbose\"; allowed: err, warn, info, debug" --config "$T/bad11.yaml"
printf 'node_nmae: n1\n' > "$T/bad12.yaml"
expect_start_fail "a mistyped key names the closest" 'unknown key "node_nmae"; did you mean "node_name"?' --config "$T/bad12.yaml"
expect_start_fail "non-loopback listen" 'key "listen"' --db "$T/l.db" --socket "$T/l.sock" --listen 0.0.0.0:9444
# A port that is not one stops start-up too (it used to mean "any port"),
# before anything is created; in the file, the file is named.
for l in 127.0.0.1:abc 127.0.0.1: 127.0.0.1:9444x 127.0.0.1:65536 '[::1]:-1'; do
    expect_start_fail "listen $l" 'key "listen"' --db "$T/l.db" --socket "$T/l.sock" --listen "$l"
done
printf 'listen: "127.0.0.1:abc"\n' > "$T/bad6.yaml"
expect_start_fail "listen in the file" "bad6.yaml': key \"listen\"" --config "$T/bad6.yaml" --db "$T/l.db" --socket "$T/l.sock"
printf 'write_token_file: %s/no-such-token\n' "$T" > "$T/bad7.yaml"
expect_start_fail "unreadable token file" "bad7.yaml': key \"write_token_file\"" --config "$T/bad7.yaml" --db "$T/l.db" --socket "$T/l.sock"
expect_start_fail "socket path too long" 'key "socket"' --db "$T/l.db" --socket "$T/$(printf 's%.0s' {1..120})"
expect_start_fail "kubelet socket path too long" 'key "kubelet_socket"' --db "$T/l.db" --socket "$T/l.sock" \
    --source kubelet --kubelet-socket "$T/$(printf 'k%.0s' {1..120})"
for content in '' '\n' 'one\ntwo\n'; do
    f=$T/token-$RANDOM
    printf "$content" > "$f"
    chmod 600 "$f"
done
for f in "$T"/token-*; do
    printf 'write_token_file: %s\n' "$f" > "$T/bad8.yaml"
    expect_start_fail "a token file without one non-empty line" "bad8.yaml': key \"write_token_file\": .*one non-empty line" \
        --config "$T/bad8.yaml" --db "$T/l.db" --socket "$T/l.sock"
done
# A token file that group or others may read or write stops start-up, naming
# the file and its mode (as ssh does with a private key); 0600 and 0400 start.
printf 'open-token\n' > "$T/open-token"
for m in 644 640 604 660 620; do
    chmod "$m" "$T/open-token"
    expect_start_fail "a token file of mode 0$m" \
        "key \"write_token_file\": \"$T/open-token\": permissions 0$m are too open" \
        --write-token-file "$T/open-token" --db "$T/l.db" --socket "$T/l.sock"
done
# ... and one another user owns (who could rewrite it), even at 0600.
chmod 600 "$T/open-token"
chown 65534 "$T/open-token"
expect_start_fail "a token file owned by another user" \
    "key \"write_token_file\": \"$T/open-token\": owned by uid 65534" \
    --write-token-file "$T/open-token" --db "$T/l.db" --socket "$T/l.sock"
# A node name with control characters or upper case, for podresd and podres-syncer.
for n in $'node\e]0;PWNED\a' 'Node-A' 'a_b' "$(printf 'n%.0s' {1..254})"; do
    expect_start_fail "node name $(printf %q "$n")" 'key "node_name".*must be a node name' \
        --node-name "$n" --db "$T/l.db" --socket "$T/l.sock"
    rc=0
    timeout 10 "$PODRES_BIN/podres-syncer" --node-name "$n" --kubeconfig /nonexistent > "$T/start.log" 2>&1 || rc=$?
    [ "$rc" = 1 ] && grep -q 'must be a node name' "$T/start.log" ||
        fail "podres-syncer --node-name $(printf %q "$n"): rc $rc $(cat "$T/start.log")"
done
ok "podres-syncer refuses the same node names"
[ ! -e "$T/l.db" ] || fail "a refused token file still created the database"
printf 'node_name: under\nnode-name: dash\n' > "$T/bad9.yaml"
expect_start_fail "a key spelled both ways" "bad9.yaml': duplicate key" --config "$T/bad9.yaml" --db "$T/l.db" --socket "$T/l.sock"
printf 'devices:\n  - resourceName: example.com/gpu\n    devices: [{id: a}]\n  - resourceName: example.com/gpu\n    devices: [{id: b}]\n' > "$T/bad10.yaml"
expect_start_fail "a resource listed twice" 'devices\[1\]" (example.com/gpu): the resource is listed already' \
    --config "$T/bad10.yaml" --db "$T/l.db" --socket "$T/l.sock"
[ ! -e "$T/l.db" ] && [ ! -e "$T/l.sock" ] || fail "a bad setting left a database or a socket behind"
# A file that is not a database is refused, named, and left as it was.
head -c 8192 /dev/urandom > "$T/notdb.db"
cp "$T/notdb.db" "$T/notdb.orig"
expect_start_fail "not a database" "file is not a database" --db "$T/notdb.db" --socket "$T/n.sock"
cmp -s "$T/notdb.db" "$T/notdb.orig" || fail "podresd changed a file that is not a database"
[ ! -e "$T/notdb.db-wal" ] && [ ! -e "$T/n.sock" ] || fail "podresd left a WAL or socket behind"

mkdir -p "$T/s"
touch "$T/s/file.sock"
expect_start_fail "regular file at the socket path" "not a socket" --db "$T/a.db" --socket "$T/s/file.sock"
ln -s "$T/s/elsewhere" "$T/s/link.sock"
expect_start_fail "symlink at the socket path" "symlink" --db "$T/b.db" --socket "$T/s/link.sock"
[ ! -e "$T/s/elsewhere" ] || fail "podresd followed the symlink"

# Flags win over the file; static devices load; a stale socket is replaced.
pd_config 'devices:
  - resourceName: example.com/gpu
    devices: [{id: a, topology: {nodes: [{ID: 1}]}}, {id: b}]'
python3 -c "import socket,sys; s=socket.socket(socket.AF_UNIX); s.bind(sys.argv[1])" "$PD_SOCK" 2>/dev/null ||
    { mkdir -p "$(dirname "$PD_SOCK")"; python3 -c "import socket,sys; s=socket.socket(socket.AF_UNIX); s.bind(sys.argv[1])" "$PD_SOCK"; }
pd_start --node-name from-flag
curl -s --unix-socket "$PD_SOCK" http://localhost/version | jqe '.nodeName == "from-flag"' >/dev/null ||
    fail "the flag did not win over the file"
req GET /v1/devices
[ "$(jqo '[.devices[].id] | join(",")')" = a,b ] || fail "static devices: $(out)"
ok "flags win; static devices; a stale socket is replaced"
grep -q "writable by everyone" "$T/podresd.log" && fail "a warning about podresd's own 0750 directory"
# A socket directory found writable by everyone: a warning (anyone can replace the socket).
mkdir -p "$T/open" && chmod 1777 "$T/open"
timeout 1 "$PODRES_BIN/podresd" --db "$T/open.db" --socket "$T/open/p.sock" > "$T/open.log" 2>&1 || true
grep -q "socket directory '$T/open' is writable by everyone (mode 1777)" "$T/open.log" ||
    fail "no warning for a world-writable socket directory: $(cat "$T/open.log")"
# A second podresd on the same socket refuses to start.
expect_start_fail "socket in use" "another process" --config "$T/podresd.yaml" --db "$T/other.db"
# A second podresd on the same database refuses to start, at once, and
# changes nothing: one writing beside the first would stamp its writes from
# its own revision. The first keeps serving and writing.
req PUT /v1/namespaces/a/pods/p1 '{"uid":"u1","containers":[{"name":"c","devices":[{"resourceName":"example.com/gpu","deviceIds":["a"]}]}]}'
[ "$CODE" = 201 ] || fail "bind before the second start: $CODE $(out)"
rev=$(curl -s --unix-socket "$PD_SOCK" http://localhost/v1/pods | jq -r .revision)
t0=$(date +%s%N)
grep -v '^listen:' "$T/podresd.yaml" > "$T/second.yaml" # its own socket, no TCP
expect_start_fail "database in use" "database '$PD_DB' is in use by another process" \
    --config "$T/second.yaml" --socket "$T/s/second.sock"
[ $(( ($(date +%s%N) - t0) / 1000000 )) -lt 3000 ] || fail "the second start waited for the lock"
[ ! -e "$T/s/second.sock" ] || fail "the second podresd left its socket"
req PUT /v1/namespaces/a/pods/p2 '{"uid":"u2","containers":[{"name":"c","devices":[{"resourceName":"example.com/gpu","deviceIds":["b"]}]}]}'
[ "$CODE" = 201 ] || fail "bind after the second start: $CODE $(out)"
[ "$(jqo .revision)" -gt "$rev" ] || fail "revision $(jqo .revision) after $rev"
pd_stop
pd_start
req GET /v1/pods
[ "$(jqo '[.podResources[].name] | join(",")')" = p1,p2 ] || fail "after restart: $(out)"
[ "$(pd_sql 'SELECT count(*) FROM changes')" = "$(jqo .revision)" ] || fail "change log rows"
ok "the database's own process: a second podresd on it refuses to start; the first writes on"
# A static set whose names clash with a device registered since is left as
# stored, and said in the log; podresd starts.
req PUT /v1/resources/example.com/nic/devices '{"devices":[{"id":"nic-0","aliases":["nvidia7"]}]}'
[ "$CODE" = 200 ] || fail "nic registration: $CODE $(out)"
pd_stop
pd_config 'devices:
  - resourceName: example.com/gpu
    devices: [{id: a, aliases: [nvidia7]}, {id: b}]'
pd_start
grep -q "static devices of 'example.com/gpu' not loaded (the stored set stays): alias nvidia7 of device example.com/gpu a is an alias of device example.com/nic nic-0" "$T/podresd.log" ||
    fail "no error for the clashing static set: $(tail -3 "$T/podresd.log")"
req GET /v1/devices/nvidia7
[ "$(jqo .device.id)" = nic-0 ] || fail "nvidia7: $(out)"
req GET /v1/devices/a
[ "$(jqo '.device.aliases | length')" = 0 ] || fail "a took the clashing alias: $(out)"
ok "a static set clashing with the registered devices is not loaded; podresd starts"
pd_stop
