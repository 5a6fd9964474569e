#!/usr/bin/python3
"""cdp.py - drive a headless Chromium over the DevTools protocol, for the
browser tests (82-ui-page.sh). Each call attaches to the browser's first page
target, does one thing and detaches; the page keeps running in between.

  cdp.py PORT open URL              record JS errors and CSP violations in
                                     window.__errors, load URL
  cdp.py PORT wait SECONDS EXPR      evaluate EXPR until it is truthy; print its
                                     value as JSON (exit 1 on timeout, with the
                                     last value and window.__errors)
  cdp.py PORT eval EXPR              print EXPR's value as JSON
  cdp.py PORT shot FILE W H          a PNG of the page's top left W x H pixels

PORT is Chromium's --remote-debugging-port. python3-websocket (Debian) is the
only dependency.
"""
import base64
import json
import sys
import time
import urllib.request

import websocket

# Installed before the page's own script runs: DevTools scripts are not
# subject to the page's Content-Security-Policy.
RECORDER = """
window.__errors = [];
window.addEventListener('error', function (e) {
  window.__errors.push('error: ' + (e.message || e.type));
});
window.addEventListener('unhandledrejection', function (e) {
  window.__errors.push('unhandled rejection: ' + String(e.reason));
});
document.addEventListener('securitypolicyviolation', function (e) {
  window.__errors.push('CSP: ' + e.violatedDirective + ' blocked ' + (e.blockedURI || 'inline'));
});
"""


class Page:
    def __init__(self, port):
        with urllib.request.urlopen("http://127.0.0.1:%d/json/list" % port, timeout=10) as r:
            targets = json.load(r)
        pages = [t for t in targets if t.get("type") == "page"]
        if not pages:
            sys.exit("cdp.py: no page target in the browser")
        self.ws = websocket.create_connection(pages[0]["webSocketDebuggerUrl"], timeout=30)
        self.next_id = 0

    def call(self, method, **params):
        self.next_id += 1
        self.ws.send(json.dumps({"id": self.next_id, "method": method, "params": params}))
        while True:
            msg = json.loads(self.ws.recv())
            if msg.get("id") != self.next_id:
                continue  # an event
            if "error" in msg:
                raise RuntimeError("%s: %s" % (method, msg["error"]))
            return msg["result"]

    def eval(self, expr):
        r = self.call("Runtime.evaluate", expression=expr, returnByValue=True, awaitPromise=True)
        if "exceptionDetails" in r:
            d = r["exceptionDetails"]
            raise RuntimeError("evaluate: %s" % d.get("exception", {}).get("description", d))
        return r["result"].get("value")


def main(argv):
    if len(argv) < 3:
        sys.exit(__doc__)
    page, cmd, args = Page(int(argv[1])), argv[2], argv[3:]
    if cmd == "open":
        url = args[0]
        page.call("Page.enable")
        page.call("Page.addScriptToEvaluateOnNewDocument", source=RECORDER)
        page.call("Page.navigate", url=url)
        deadline = time.time() + 20
        while page.eval("document.readyState") != "complete":
            if time.time() > deadline:
                sys.exit("cdp.py: %s did not load" % url)
            time.sleep(0.1)
    elif cmd == "wait":
        deadline, value = time.time() + float(args[0]), None
        while time.time() < deadline:
            value = page.eval(args[1])
            if value:
                print(json.dumps(value))
                return 0
            time.sleep(0.2)
        print("cdp.py: timed out; last value %s; page errors %s"
              % (json.dumps(value), json.dumps(page.eval("window.__errors"))), file=sys.stderr)
        return 1
    elif cmd == "eval":
        print(json.dumps(page.eval(args[0])))
    elif cmd == "shot":
        width, height = int(args[1]), int(args[2])
        r = page.call("Page.captureScreenshot", format="png", captureBeyondViewport=True,
                      clip={"x": 0, "y": 0, "width": width, "height": height, "scale": 1})
        with open(args[0], "wb") as f:
            f.write(base64.b64decode(r["data"]))
    else:
        sys.exit(__doc__)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
