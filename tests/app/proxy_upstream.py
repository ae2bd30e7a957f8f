"""tests/app/proxy_upstream.py: the third-party peers of tests/app/app_proxy_test.cc, on 127.0.0.1.

  proxy_upstream.py stdlib PORT      Python's http.server (ThreadingHTTPServer, HTTP/1.1)
  proxy_upstream.py aiohttp PORT     an aiohttp application (streaming bodies, chunked, WebSocket)
  proxy_upstream.py ws-client URL    Python websockets' client: echo a text and a binary message

A server prints "READY <port>" once it listens (and "SENT <path>" once a stalling answer has
sent its first MiB). Bodies the tests stream carry the pattern
byte[i] = i % 256 (offset i from the body's start), checked here without keeping the body.
/stats answers the counters as JSON: what each server saw (request heads, complete requests,
uploads cut short; /stats itself is not counted), so a test can tell what did or did not reach the upstream.
"""
import json
import sys
import threading
import time

BLOCK = bytes(i % 256 for i in range(65536))
TWO_BLOCKS = BLOCK + BLOCK


def pattern_ok(offset, data):
    """Whether data is the pattern at offset (len(data) <= 65536)."""
    start = offset % 256
    return TWO_BLOCKS[start:start + len(data)] == data


# ---------------------------------------------------------------- http.server (stdlib)
def run_stdlib(port):
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    stats = {"heads": 0, "complete": 0, "incomplete_uploads": 0, "paths": []}
    lock = threading.Lock()

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *args):
            pass

        def count(self, key, n=1):
            with lock:
                stats[key] += n

        def read_body(self):
            """(length, body): the body is kept up to 1 MiB, only counted past that."""
            n = int(self.headers.get("Content-Length") or 0)
            got, parts = 0, []
            while got < n:
                piece = self.rfile.read(min(65536, n - got))
                if not piece:
                    self.count("incomplete_uploads")
                    self.close_connection = True
                    return None, None
                got += len(piece)
                if n <= (1 << 20):
                    parts.append(piece)
            return got, b"".join(parts)

        def reply(self, status, body, ctype="text/plain", extra=()):
            self.send_response(status)
            for k, v in extra:
                self.send_header(k, v)
            self.send_header("Content-Type", ctype)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            if self.command != "HEAD":
                self.wfile.write(body)

        def handle_any(self):
            if self.path != "/stats":
                self.count("heads")
                with lock:
                    stats["paths"].append(self.path)
            length, body = self.read_body()
            if body is None:
                return
            path = self.path.split("?")[0]
            self.count("complete")
            if path == "/stats":
                with lock:
                    self.reply(200, json.dumps(stats).encode(), "application/json")
            elif path.startswith("/status/"):
                code = int(path[len("/status/"):])
                self.send_response(code)
                if code == 304:
                    self.send_header("ETag", '"v1"')
                self.end_headers()  # 204 and 304 never have a body (nor a Content-Length here)
            elif path == "/early":
                # 103 Early Hints, then the answer (the proxy passes on only the final one).
                self.send_response_only(103)
                self.send_header("Link", "</style.css>; rel=preload")
                self.end_headers()
                self.reply(200, b"after 103")
            elif path == "/cookies":
                self.reply(200, b"cookies", extra=[("Set-Cookie", "a=1; Path=/"), ("Set-Cookie", "b=2; HttpOnly"),
                                                   ("Set-Cookie", "c=3"), ("X-Multi", "one"), ("X-Multi", "two")])
            elif path == "/trailers":
                # A chunked body with a trailer field (announced in Trailer).
                self.send_response(200)
                self.send_header("Transfer-Encoding", "chunked")
                self.send_header("Trailer", "X-Checksum")
                self.end_headers()
                for piece in (b"chunk-one;", b"chunk-two;", b"end"):
                    self.wfile.write(b"%x\r\n%s\r\n" % (len(piece), piece))
                self.wfile.write(b"0\r\nX-Checksum: abc123\r\n\r\n")
            elif path in ("/slowbig", "/slowchunked"):
                # 1 MiB of a 64 MiB body, then nothing: the test kills this process meanwhile.
                self.send_response(200)
                if path == "/slowbig":
                    self.send_header("Content-Length", str(64 << 20))
                else:
                    self.send_header("Transfer-Encoding", "chunked")
                self.end_headers()
                for _ in range(16):
                    if path == "/slowbig":
                        self.wfile.write(BLOCK)
                    else:
                        self.wfile.write(b"10000\r\n" + BLOCK + b"\r\n")
                self.wfile.flush()
                print("SENT " + path, flush=True)
                time.sleep(120)
            else:
                info = {"method": self.command, "path": self.path, "len": length,
                        "body": body.decode("latin-1"),
                        "headers": [[k, v] for k, v in self.headers.items()]}
                self.reply(200, json.dumps(info).encode(), "application/json")

        do_GET = do_POST = do_PUT = do_DELETE = do_HEAD = do_PATCH = do_OPTIONS = handle_any

    server = ThreadingHTTPServer(("127.0.0.1", port), Handler)
    server.daemon_threads = True
    print("READY %d" % port, flush=True)
    server.serve_forever()


# ---------------------------------------------------------------- aiohttp
def run_aiohttp(port):
    from aiohttp import web, WSMsgType

    stats = {"heads": 0, "complete": 0, "incomplete_uploads": 0, "paths": []}

    @web.middleware
    async def counting(request, handler):
        if request.path != "/stats":
            stats["heads"] += 1
            stats["paths"].append(request.path_qs)
        return await handler(request)

    async def echo(request):
        # Streams the body (never held whole) and checks the pattern when asked.
        n = 0
        ok = True
        check = request.headers.get("X-Pattern") == "1"
        body = b""
        try:
            async for piece in request.content.iter_chunked(65536):
                if check and not pattern_ok(n, piece):
                    ok = False
                if n < 4096:
                    body += piece[:4096 - n]
                n += len(piece)
        except Exception:
            stats["incomplete_uploads"] += 1
            raise
        stats["complete"] += 1
        return web.json_response({
            "method": request.method, "path": request.path_qs, "len": n, "pattern_ok": ok,
            "body": body.decode("latin-1") if n <= 4096 else "",
            "transfer_encoding": request.headers.get("Transfer-Encoding", ""),
            "content_length": request.headers.get("Content-Length", ""),
        })

    async def download(request):
        # n bytes of the pattern, chunked (chunked=1) or with a Content-Length.
        n = int(request.query["n"])
        stats["complete"] += 1
        resp = web.StreamResponse()
        if request.query.get("chunked") == "1":
            resp.enable_chunked_encoding()
        else:
            resp.content_length = n
        await resp.prepare(request)
        sent = 0
        while sent < n:
            piece = BLOCK[: min(len(BLOCK), n - sent)]
            await resp.write(piece)
            sent += len(piece)
        await resp.write_eof()
        return resp

    async def get_stats(request):
        return web.json_response(stats)

    async def ws_echo(request):
        ws = web.WebSocketResponse(max_msg_size=1 << 20)
        await ws.prepare(request)
        async for msg in ws:
            if msg.type == WSMsgType.TEXT:
                await ws.send_str(msg.data)
            elif msg.type == WSMsgType.BINARY:
                await ws.send_bytes(msg.data)
        return ws

    app = web.Application(middlewares=[counting], client_max_size=1 << 30)
    app.router.add_get("/stats", get_stats)
    app.router.add_get("/download", download)
    app.router.add_get("/ws", ws_echo)
    app.router.add_route("*", "/echo", echo)
    app.router.add_route("*", "/{tail:.*}", echo)

    async def on_startup(_):
        print("READY %d" % port, flush=True)

    app.on_startup.append(on_startup)
    web.run_app(app, host="127.0.0.1", port=port, print=None, access_log=None, handle_signals=True)


# ---------------------------------------------------------------- websockets client
def run_ws_client(url):
    from websockets.sync.client import connect

    binary = bytes(BLOCK) * 2  # 128 KiB
    with connect(url, max_size=1 << 20, open_timeout=10, close_timeout=5) as ws:
        ws.send("hello through the proxy")
        text = ws.recv(timeout=10)
        ws.send(binary)
        data = ws.recv(timeout=10)
    print(json.dumps({"text": text, "binary_ok": data == binary, "binary_len": len(data)}), flush=True)


if __name__ == "__main__":
    mode = sys.argv[1]
    if mode == "stdlib":
        run_stdlib(int(sys.argv[2]))
    elif mode == "aiohttp":
        run_aiohttp(int(sys.argv[2]))
    elif mode == "ws-client":
        run_ws_client(sys.argv[2])
    else:
        sys.exit("unknown mode " + mode)
