#!/usr/bin/env python3
"""Headless Chromium opens the status page (a `debug` route), a load runs against a route of the
same server, and the page's DOM must show its numbers move and its charts drawn (the DevTools
protocol reads them). Used by tests/app/app_status_page_test.cc.

  status_page_check.py PAGE_URL LOAD_URL LOAD_SECONDS SCREENSHOT.png [SERVER]

PAGE_URL   e.g. http://127.0.0.1:8080/debug/
LOAD_URL   e.g. http://127.0.0.1:8080/hello (GET over one kept-alive connection, as fast as
           one Python thread can, for LOAD_SECONDS)
SERVER     the server whose row and charts are read (default: web)

Reads the server's row (requests, requests/s, p50, p99) before the load, 2 s into it and 1.5 s
after it, counts the points each chart says it drew and the pixels of its lines' colours, and
saves a screenshot of the page near the end of the load for a person to look at. Prints one
JSON line with those figures and "ok" (the script ran to the end), "error" (text). Exit status
0 when the script ran (whatever it saw), 2 on usage errors. Every wait is bounded.
Needs: chromium (Debian) and the Python `websockets` module (scripts/install-deps.sh).
"""
import base64
import http.client
import json
import re
import shutil
import subprocess
import sys
import tempfile
import threading
import time
import urllib.parse
import urllib.request

from websockets.sync.client import connect

# Pixels of a chart's line colours (the page's COLORS): blue (requests/s), red (p99).
COUNT_PIXELS = """(() => {
  const c = document.querySelector('canvas[data-chart="%s"]');
  if (!c) return -1;
  const d = c.getContext('2d').getImageData(0, 0, c.width, c.height).data;
  let n = 0;
  for (let i = 0; i < d.length; i += 4) {
    const r = d[i], g = d[i + 1], b = d[i + 2];
    if (%s) n++;
  }
  return n;
})()"""
BLUE = "b > 150 && r < 120 && g < 160"
RED = "r > 150 && g < 110 && b < 110"


def load(url, seconds, counter):
    u = urllib.parse.urlsplit(url)
    deadline = time.time() + seconds
    conn = http.client.HTTPConnection(u.hostname, u.port, timeout=5)
    try:
        while time.time() < deadline:
            conn.request("GET", u.path)
            r = conn.getresponse()
            r.read()
            if r.status == 200:
                counter[0] += 1
    except Exception as e:  # reported, not raised: the page's figures are what is checked
        counter[1] = "%s: %s" % (type(e).__name__, e)
    finally:
        conn.close()


def main():
    if len(sys.argv) not in (5, 6):
        print(__doc__, file=sys.stderr)
        return 2
    page_url, load_url, seconds, png = sys.argv[1], sys.argv[2], float(sys.argv[3]), sys.argv[4]
    server = sys.argv[5] if len(sys.argv) == 6 else "web"
    out = {"ok": False, "error": "", "load_requests": 0}
    profile = tempfile.mkdtemp(prefix="lionet-chromium-")
    browser = subprocess.Popen(
        ["chromium", "--headless=new", "--no-sandbox", "--disable-gpu", "--no-first-run",
         "--remote-debugging-port=0", "--remote-debugging-address=127.0.0.1",
         "--user-data-dir=" + profile, "--window-size=1200,1000", "about:blank"],
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

            def cell(k):
                text = evaluate("(() => { const td = document.querySelector("
                                "'#servers tr[data-id=\"%s\"] td[data-k=\"%s\"]'); "
                                "return td ? td.textContent : null; })()" % (server, k))
                if text is None:
                    return None
                try:
                    return float(text.replace(",", ""))
                except ValueError:
                    return None  # "–": nothing measured in that second

            def row(prefix):
                for k in ("requests", "requests_per_s", "p50_ms", "p99_ms"):
                    out[prefix + "_" + k] = cell(k)
                out[prefix + "_updates"] = int(evaluate("document.body.dataset.updates") or 0)

            call("Page.enable")
            call("Page.navigate", url=page_url)
            # The page has fetched status.json twice: its rows and charts exist.
            deadline = time.time() + 20
            while time.time() < deadline and int(evaluate("document.body.dataset.updates || 0") or 0) < 2:
                time.sleep(0.1)
            row("before")
            if out["before_updates"] < 2:
                out["error"] = "the page did not refresh twice in 20 s: " + str(
                    evaluate("document.getElementById('state').textContent"))
                return finish(out, call, png)
            counter = [0, ""]
            loader = threading.Thread(target=load, args=(load_url, seconds, counter), daemon=True)
            t0 = time.time()
            loader.start()
            time.sleep(min(2.0, seconds / 2))
            row("during")
            # The screenshot near the end of the load: the table shows its rate, the charts its rise.
            time.sleep(max(0.0, seconds - 0.5 - (time.time() - t0)))
            shoot(call, png, out)
            loader.join(timeout=seconds + 10)
            out["load_requests"] = counter[0]
            if counter[1]:
                out["error"] = "load: " + counter[1]
            time.sleep(1.5)
            row("after")
            for name, chart, colour in (("rps", server + "/rps", BLUE), ("latency", server + "/latency", RED)):
                pts = evaluate("(() => { const c = document.querySelector('canvas[data-chart=\"%s\"]'); "
                               "return c ? Number(c.dataset.points || 0) : -1; })()" % chart)
                out[name + "_points"] = pts
                out[name + "_pixels"] = evaluate(COUNT_PIXELS % (chart, colour))
            out["fiber_groups"] = evaluate("document.querySelectorAll('#fibers details').length")
            out["state"] = evaluate("document.getElementById('state').textContent")
            out["ok"] = True
            return finish(out)
    except Exception as e:  # reported to the test as data, not as a crash
        out["error"] = (out["error"] + "; " if out["error"] else "") + "%s: %s" % (type(e).__name__, e)
        return finish(out)
    finally:
        browser.kill()
        browser.wait()
        shutil.rmtree(profile, ignore_errors=True)


def shoot(call, png, out):
    try:
        shot = call("Page.captureScreenshot", format="png")
        with open(png, "wb") as f:
            f.write(base64.b64decode(shot["data"]))
    except Exception as e:
        out["error"] = (out["error"] + "; " if out["error"] else "") + "screenshot: %s" % e


def finish(out, call=None, png=None):
    if call and png:
        shoot(call, png, out)
    print(json.dumps(out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
