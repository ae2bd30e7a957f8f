#!/usr/bin/env python3
"""Headless Chromium opens the live-tail page, then records are appended with curl, and the
page's DOM must show them (the DevTools protocol reads it). Used by tests/app/app_tail_test.cc.

  tail_page_check.py PAGE_URL APPEND_URL COUNT SCREENSHOT.png

PAGE_URL   e.g. https://127.0.0.1:8443/tail.html?topic=t&partition=0&offset=0
APPEND_URL e.g. http://127.0.0.1:8080/topics/t/partitions/0/records (POSTed COUNT times by curl)

Prints one JSON line: {"ok": bool, "status": <the page's status line>, "records": [<texts>],
"appended_ms": <ms the appends took>, "seen_ms": <ms from the first append until the DOM
showed COUNT records, or -1>, "error": <text>} and saves a screenshot of the page for a person
to look at. Exit status 0 when the script ran (whatever it saw), 2 on usage errors.
Needs: chromium (Debian), curl, and the Python `websockets` module (scripts/install-deps.sh).
"""
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
import urllib.request

from websockets.sync.client import connect


def main():
    if len(sys.argv) != 5:
        print(__doc__, file=sys.stderr)
        return 2
    page_url, append_url, count, png = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
    out = {"ok": False, "status": "", "records": [], "appended_ms": -1, "seen_ms": -1, "error": ""}
    profile = tempfile.mkdtemp(prefix="lionet-chromium-")
    browser = subprocess.Popen(
        ["chromium", "--headless=new", "--no-sandbox", "--disable-gpu", "--no-first-run",
         "--ignore-certificate-errors", "--remote-debugging-port=0", "--remote-debugging-address=127.0.0.1",
         "--user-data-dir=" + profile, "--window-size=1000,700", "about:blank"],
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        port = None
        deadline = time.time() + 30
        while time.time() < deadline and port is None:  # "DevTools listening on ws://127.0.0.1:PORT/..."
            line = browser.stderr.readline()
            if not line:
                break
            m = re.search(r"DevTools listening on ws://127\.0\.0\.1:(\d+)/", line)
            if m:
                port = int(m.group(1))
        if port is None:
            out["error"] = "chromium did not open its DevTools port"
            return finish(out)
        targets = json.load(urllib.request.urlopen("http://127.0.0.1:%d/json/list" % port, timeout=10))
        page = next(t for t in targets if t.get("type") == "page")
        with connect(page["webSocketDebuggerUrl"], max_size=64 << 20, open_timeout=10) as cdp:
            ids = iter(range(1, 1 << 30))

            def call(method, **params):
                i = next(ids)
                cdp.send(json.dumps({"id": i, "method": method, "params": params}))
                while True:
                    msg = json.loads(cdp.recv(timeout=30))
                    if msg.get("id") == i:
                        if "error" in msg:
                            raise RuntimeError("%s: %s" % (method, msg["error"]))
                        return msg.get("result", {})

            def evaluate(expr):
                r = call("Runtime.evaluate", expression=expr, returnByValue=True)
                return r.get("result", {}).get("value")

            call("Page.enable")
            call("Page.navigate", url=page_url)
            # Wait until the page's WebSocket is open ("tailing ..." in #status).
            deadline = time.time() + 20
            while time.time() < deadline:
                status = evaluate("document.getElementById('status') ? document.getElementById('status').textContent : ''")
                out["status"] = status or ""
                if out["status"].startswith("tailing"):
                    break
                time.sleep(0.05)
            if not out["status"].startswith("tailing"):
                out["error"] = "the page never connected"
                return finish(out, call, png)
            t0 = time.time()
            for i in range(count):
                subprocess.run(["curl", "-sS", "--max-time", "10", "-o", "/dev/null", "-d", "record %d" % i, append_url],
                               check=True)
            out["appended_ms"] = round((time.time() - t0) * 1000)
            deadline = time.time() + 10
            while time.time() < deadline:
                n = evaluate("document.querySelectorAll('#records li.record').length")
                if n is not None and n >= count:
                    out["seen_ms"] = round((time.time() - t0) * 1000)
                    break
                time.sleep(0.01)
            out["records"] = evaluate(
                "Array.from(document.querySelectorAll('#records li.record')).map(li => li.textContent)") or []
            out["status"] = evaluate("document.getElementById('status').textContent") or ""
            out["ok"] = out["seen_ms"] >= 0
            return finish(out, call, png)
    except Exception as e:  # reported to the test as data, not as a crash
        out["error"] = "%s: %s" % (type(e).__name__, e)
        return finish(out)
    finally:
        browser.kill()
        browser.wait()
        shutil.rmtree(profile, ignore_errors=True)


def finish(out, call=None, png=None):
    if call and png:
        try:
            import base64
            shot = call("Page.captureScreenshot", format="png")
            with open(png, "wb") as f:
                f.write(base64.b64decode(shot["data"]))
        except Exception as e:
            out["error"] = (out["error"] + "; " if out["error"] else "") + "screenshot: %s" % e
    print(json.dumps(out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
