#!/usr/bin/env bash
# 82-ui-page.sh - the device timeline page (GET /ui) in a real browser:
# headless Chromium (Debian's chromium, driven over the DevTools protocol by
# cdp.py) loads it from the read-only loopback TCP listener of a podresd with
# history (binds, releases, a health flap). The DOM shows a row per device,
# a bar per holder with the pod's name, the Unhealthy spells and the current
# holders; a bind, a release and a health change over the unix socket show up
# without a reload; a window button reads the history again; after a restart
# the page follows the feed again (since=), and after a restart on a fresh
# database (410) it reads everything again.
# Headers: HTML, a CSP of hashes, nosniff; no query parameters. A screenshot
# is taken ($T/ui.png; UI_SCREENSHOT=FILE keeps a copy).
. "$(dirname "$0")/lib.sh"

CHROMIUM=$(command -v chromium || command -v chromium-browser || true)
[ -n "$CHROMIUM" ] ||
    fail "chromium is not installed: 'make deps' (as root) installs Debian's chromium package"
/usr/bin/python3 -c 'import websocket' 2>/dev/null ||
    fail "python3-websocket is not installed: 'make deps' (as root) installs it"
CDP=$PODRES_ROOT/tests/integration/cdp.py
GPU=example.com/gpu

release() { req DELETE "/v1/namespaces/$1/pods/$2"; expect_code 200 "release $1/$2"; }
health() {
    req PATCH "/v1/resources/$GPU/devices/$1" "{\"health\":\"$2\"}"
    expect_code 200 "health $1 $2"
}
tick() { sleep 0.05; } # distinct milliseconds between writes

# page JS - evaluate JS in the page; prints its value as JSON.
page() { "$CDP" "$CH_PORT" eval "$1"; }
# page_wait SECONDS WHAT JS - until JS is truthy in the page.
page_wait() {
    "$CDP" "$CH_PORT" wait $(($1 * MULT)) "$3" > "$T/page.out" 2> "$T/page.err" ||
        fail "$2: $(cat "$T/page.err")"
}
# The page's state as JSON: rows (device -> bars' pods, open bars' pods,
# Unhealthy marks, open marks, badge), the holders table, live status, errors.
STATE='(() => {
  const rows = {};
  for (const r of document.querySelectorAll("#timeline .row")) {
    const bars = [...r.querySelectorAll(".bar")];
    const marks = [...r.querySelectorAll(".unhealthy")];
    rows[r.dataset.resource + " " + r.dataset.device] = {
      pods: bars.map(b => b.dataset.pod),
      open: bars.filter(b => b.dataset.to === "").map(b => b.dataset.pod),
      labelled: bars.every(b => b.getAttribute("aria-label").includes("container " + b.dataset.container)),
      visible: bars.every(b => !b.hidden && b.getBoundingClientRect().width >= 2),
      marks: marks.length,
      openMarks: marks.filter(m => m.dataset.to === "").length,
      marksLabelled: marks.every(m => /Unhealthy/.test(m.getAttribute("aria-label"))),
      badge: !!r.querySelector(".badge:not(.resv)")
    };
  }
  const holders = [...document.querySelectorAll("#holders tbody tr[data-pod]")].map(tr =>
    [...tr.cells].slice(0, 5).map(c => c.textContent).join("|"));
  return { rows, holders, live: document.getElementById("live").textContent,
           errors: window.__errors, marker: window.__marker || null,
           headers: [...document.querySelectorAll("#holders th[scope=col]")].length };
})()'
state() { page "$STATE" > "$T/state.json"; }
st() { jq -c "$1" "$T/state.json"; }

pd_config
pd_start
register $GPU '[{"id":"gpu-0"},{"id":"gpu-1"},{"id":"gpu-2"},{"id":"gpu-3"}]'
register example.com/nic '[{"id":"nic-0"}]'
bind ml train uid-t gpu-0; tick
release ml train; tick
bind ml infer uid-i gpu-0 gpu-1; tick
bind team eval uid-e gpu-2; tick
release team eval; tick
health gpu-2 Unhealthy; tick
health gpu-2 Healthy; tick
health gpu-3 Unhealthy

# ---- the answer itself ----
for via in unix tcp; do
    if [ $via = unix ]; then
        curl -s -D "$T/head" -o "$T/out" --unix-socket "$PD_SOCK" http://localhost/ui
    else
        curl -s -D "$T/head" -o "$T/out" "http://127.0.0.1:$PD_PORT/ui"
    fi
    grep -q '^HTTP/1.1 200' "$T/head" || fail "GET /ui over $via: $(head -1 "$T/head")"
    grep -qi '^Content-Type: text/html; charset=utf-8' "$T/head" || fail "/ui type: $(cat "$T/head")"
    grep -qi '^X-Content-Type-Options: nosniff' "$T/head" || fail "/ui nosniff: $(cat "$T/head")"
    csp=$(sed -n 's/^Content-Security-Policy: //Ip' "$T/head" | tr -d '\r')
    [[ "$csp" == "default-src 'none'; script-src 'sha256-"*"'; style-src 'sha256-"* ]] ||
        fail "/ui CSP: $csp"
    [[ "$csp" != *unsafe* ]] || fail "/ui CSP allows unsafe-*: $csp"
    grep -q '<title>podres: device timeline</title>' "$T/out" || fail "/ui body: $(head -c 300 "$T/out")"
done
# Every URL the page reads is relative (kubectl port-forward, proxy paths) and a GET.
! grep -nE "fetch\(\"/|https?://|method:" "$PODRES_ROOT/server/ui/index.html" ||
    fail "the page must fetch relative URLs with GET only"
tcp GET "/ui?span=1h"
expect_status 400 BadRequest "/ui with a query"
tcp POST /ui '{}'
expect_status 405 MethodNotAllowed "POST /ui"
ok "GET /ui: HTML on both listeners, a CSP of hashes, nosniff, no query"

# ---- the browser ----
# --no-sandbox: Chromium's sandbox refuses to run as root (make deps, CI
# containers) and needs user namespaces a container may not give.
mkdir -p "$T/chromium"
"$CHROMIUM" --headless --no-sandbox --disable-gpu --disable-dev-shm-usage --no-first-run \
    --no-default-browser-check --user-data-dir="$T/chromium" --remote-debugging-port=0 \
    --window-size=1200,900 about:blank > "$T/chromium.log" 2>&1 &
CH_PID=$!
PIDS+=("$CH_PID")
wait_until 30 test -s "$T/chromium/DevToolsActivePort" ||
    { tail -20 "$T/chromium.log" >&2; fail "chromium did not start"; }
CH_PORT=$(head -1 "$T/chromium/DevToolsActivePort")

"$CDP" "$CH_PORT" open "http://127.0.0.1:$PD_PORT/ui" || fail "the page did not load"
page_wait 20 "the timeline" \
    'document.querySelectorAll("#timeline .row").length === 5 && document.getElementById("live").textContent === "live"'
state
[ "$(st '.rows | keys')" = \
    "[\"$GPU gpu-0\",\"$GPU gpu-1\",\"$GPU gpu-2\",\"$GPU gpu-3\",\"example.com/nic nic-0\"]" ] ||
    fail "device rows: $(st .rows)"
[ "$(st ".rows[\"$GPU gpu-0\"].pods")" = '["ml/train","ml/infer"]' ] &&
    [ "$(st ".rows[\"$GPU gpu-0\"].open")" = '["ml/infer"]' ] ||
    fail "gpu-0's bars: $(st ".rows[\"$GPU gpu-0\"]")"
[ "$(st ".rows[\"$GPU gpu-1\"].pods")" = '["ml/infer"]' ] || fail "gpu-1: $(st .rows)"
[ "$(st ".rows[\"$GPU gpu-2\"] | [.pods, .open, .marks, .openMarks, .badge]")" = \
    '[["team/eval"],[],1,0,false]' ] || fail "gpu-2: one closed bar, one closed Unhealthy spell: $(st .rows)"
[ "$(st ".rows[\"$GPU gpu-3\"] | [.pods, .marks, .openMarks, .badge]")" = '[[],1,1,true]' ] ||
    fail "gpu-3: Unhealthy now: $(st .rows)"
[ "$(st '.rows["example.com/nic nic-0"] | [.pods, .marks]')" = '[[],0]' ] || fail "nic-0: $(st .rows)"
[ "$(st '[.rows[] | .labelled and .visible and .marksLabelled] | all')" = true ] ||
    fail "every bar has its aria-label and is drawn: $(st .rows)"
[ "$(st .holders)" = '["ml|infer|main|example.com/gpu|gpu-0, gpu-1"]' ] &&
    [ "$(st .headers)" = 6 ] || fail "holders table: $(st '[.holders, .headers]')"
[ "$(st .errors)" = '[]' ] || fail "page errors: $(st .errors)"
ok "rows per device, bars per holder (pod names), Unhealthy spells, the holders table"

# ---- live: no reload ----
page 'window.__marker = "same page"' > /dev/null
bind team live uid-l gpu-2
page_wait 5 "a bind shows up live" \
    "(() => { const r = document.querySelector('#timeline .row[data-device=\"gpu-2\"]');
       return [...r.querySelectorAll('.bar')].some(b => b.dataset.pod === 'team/live' && b.dataset.to === '') &&
         [...document.querySelectorAll('#holders tbody tr')].some(t => t.dataset.pod === 'team/live'); })()"
release ml infer
health gpu-1 Unhealthy
page_wait 5 "a release and a health change show up live" \
    "(() => { const r = document.querySelector('#timeline .row[data-device=\"gpu-1\"]');
       return r.querySelector('.bar').dataset.to !== '' && r.querySelectorAll('.unhealthy').length === 1 &&
         !document.querySelector('#holders tbody tr[data-pod=\"ml/infer\"]'); })()"
state
[ "$(st .marker)" = '"same page"' ] || fail "the page was reloaded"
[ "$(st ".rows[\"$GPU gpu-2\"].pods")" = '["team/eval","team/live"]' ] &&
    [ "$(st ".rows[\"$GPU gpu-0\"].open")" = '[]' ] && [ "$(st ".rows[\"$GPU gpu-1\"].badge")" = true ] ||
    fail "live state: $(st .rows)"
[ "$(st .holders)" = '["team|live|main|example.com/gpu|gpu-2"]' ] || fail "holders: $(st .holders)"
ok "a bind, a release and a health change appear without a reload"

bind ml infer uid-i2 gpu-0 gpu-1
page_wait 5 "the holders table" '[...document.querySelectorAll("#holders tbody tr[data-pod]")].length === 2'
"$CDP" "$CH_PORT" shot "$T/ui.png" 1200 600 || fail "no screenshot"
[ "$(python3 -c 'import struct,sys; d=open(sys.argv[1],"rb").read(24); print(d[:8]==b"\x89PNG\r\n\x1a\n", *struct.unpack(">II", d[16:24]))' "$T/ui.png")" = \
    "True 1200 600" ] || fail "the screenshot is not a 1200x600 PNG"
[ -z "${UI_SCREENSHOT:-}" ] || cp "$T/ui.png" "$UI_SCREENSHOT"
ok "screenshot $T/ui.png"

# ---- another window: read again, the same bars ----
page 'document.querySelector("button[data-span=\"7d\"]").click()' > /dev/null
page_wait 10 "the 7d window" \
    '(() => { const b = document.querySelector("button[data-span=\"7d\"]");
       const r = document.querySelector("#timeline .row[data-device=\"gpu-0\"]");
       return b.getAttribute("aria-pressed") === "true" && location.hash === "#7d" &&
         r.querySelectorAll(".bar").length === 3 && document.getElementById("live").textContent === "live"; })()'
ok "the window buttons read the history again"

# ---- a restart: the page follows the feed again from where it was ----
pd_stop
pd_start
bind ml after uid-a gpu-3
page_wait 20 "a bind after a restart" \
    '[...document.querySelectorAll("#holders tbody tr")].some(t => t.dataset.pod === "ml/after") &&
     document.getElementById("live").textContent === "live"'
[ "$(page 'window.__marker')" = '"same page"' ] || fail "the page was reloaded after the restart"
ok "after a restart the page reconnects with since= and shows new binds"

# ---- a fresh database: since= is past its revision, 410, everything read again ----
pd_stop
rm -f "$T/podresd.yaml"
PD_DB=$T/db2/podresd.db pd_config
pd_start
register $GPU '[{"id":"gpu-9"}]'
page_wait 20 "a reload after 410" \
    '(() => { const rows = [...document.querySelectorAll("#timeline .row")].map(r => r.dataset.device);
       return rows.length === 1 && rows[0] === "gpu-9" && !document.querySelector("#holders tbody tr[data-pod]") &&
         document.getElementById("live").textContent === "live"; })()'
state
[ "$(st .marker)" = '"same page"' ] || fail "a 410 reloads the data, not the page"
[ "$(st .errors)" = '[]' ] || fail "page errors: $(st .errors)"
ok "after a 410 the page reads everything again"

kill -TERM "$CH_PID" 2>/dev/null || true
wait "$CH_PID" 2>/dev/null || true
pd_stop
