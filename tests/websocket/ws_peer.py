#!/usr/bin/env python3
"""The third-party peer of tests/websocket/interop_test.cc: Python `websockets` (sync API).

  ws_peer.py client URL SCENARIO [CA_FILE]   run SCENARIO against a LioNet server; exit 0 if
                                              every check held, else print FAIL and exit 1
  ws_peer.py server [CERT KEY]               serve on 127.0.0.1 (port printed as "PORT n");
                                              what each path does is below; one line
                                              "ENDED <path> <code> <reason>" per connection

Every wait is bounded (timeouts below); the server is killed by the test that started it.
"""
import os
import ssl
import sys

from websockets.exceptions import ConnectionClosed
from websockets.sync.client import connect
from websockets.sync.server import serve

TIMEOUT = 60


def check(cond, what):
    if not cond:
        print("FAIL " + what, flush=True)
        sys.exit(1)
    print("OK " + what, flush=True)


def tls_client(ca):
    if not ca:
        return None
    ctx = ssl.create_default_context(cafile=ca)
    return ctx


def open_client(url, ca):
    kw = dict(max_size=None, open_timeout=TIMEOUT, close_timeout=10)
    ctx = tls_client(ca)
    if ctx is None:
        return connect(url, **kw)
    try:
        return connect(url, ssl=ctx, **kw)
    except TypeError:  # websockets < 14 names it ssl_context
        return connect(url, ssl_context=ctx, **kw)


def scenario_echo(ws):
    ws.send("héllo wörld")
    m = ws.recv(TIMEOUT)
    check(m == "héllo wörld" and isinstance(m, str), "text echo")
    ws.send(b"\x00\x01\xfe\xff")
    m = ws.recv(TIMEOUT)
    check(m == b"\x00\x01\xfe\xff" and isinstance(m, bytes), "binary echo")
    ws.send("")
    check(ws.recv(TIMEOUT) == "", "empty text echo")
    ws.send(b"")
    check(ws.recv(TIMEOUT) == b"", "empty binary echo")
    ws.send(["frag", "mented ", "täxt"])  # three frames: text, continuation, continuation
    check(ws.recv(TIMEOUT) == "fragmented täxt", "fragmented text echo")
    ws.send([b"\x01" * 1000, b"\x02" * 3000])
    check(ws.recv(TIMEOUT) == b"\x01" * 1000 + b"\x02" * 3000, "fragmented binary echo")
    big = os.urandom(16 << 20)
    ws.send(big)
    check(ws.recv(TIMEOUT) == big, "16 MiB binary echo")
    pong = ws.ping(b"are you there")
    check(pong.wait(TIMEOUT), "ping answered by a pong")
    ws.close(4001, "client bye")
    p = ws.protocol
    print("CLOSED", p.close_rcvd.code if p.close_rcvd else 0, "state", p.state, "sent", p.close_sent,
          "rcvd_then_sent", p.close_rcvd_then_sent, "exc", repr(getattr(p, "close_exc", None)), flush=True)


def scenario_server_close(ws):
    ws.send("close please")
    try:
        ws.recv(TIMEOUT)
        check(False, "server closed the connection")
    except ConnectionClosed as e:
        check(e.rcvd is not None, "server sent a close frame")
        print("CLOSED %d %s" % (e.rcvd.code, e.rcvd.reason), flush=True)


def client(url, scenario, ca):
    with open_client(url, ca) as ws:
        {"echo": scenario_echo, "server-close": scenario_server_close}[scenario](ws)
    return 0


def handler(ws):
    path = ws.request.path
    code, reason = 0, ""
    try:
        if path == "/frag":
            ws.send(["frag", "mented ", "text"])
            ws.send([b"\x01\x02", b"\x03"])
        elif path == "/ping":
            pong = ws.ping(b"hello")
            ws.send("pong ok" if pong.wait(TIMEOUT) else "pong missing")
        elif path == "/close":
            ws.recv(TIMEOUT)
            ws.close(4002, "server bye")
        while True:
            ws.send(ws.recv(TIMEOUT))
    except ConnectionClosed as e:
        if e.rcvd is not None:
            code, reason = e.rcvd.code, e.rcvd.reason
    except TimeoutError:
        reason = "timeout"
    print("ENDED %s %d %s" % (path, code, reason), flush=True)


def server(cert, key):
    kw = dict(max_size=None)
    ctx = None
    if cert:
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        ctx.load_cert_chain(cert, key)
    try:
        srv = serve(handler, "127.0.0.1", 0, ssl=ctx, **kw)
    except TypeError:  # websockets < 14 names it ssl_context
        srv = serve(handler, "127.0.0.1", 0, ssl_context=ctx, **kw)
    with srv:
        print("PORT %d" % srv.socket.getsockname()[1], flush=True)
        srv.serve_forever()


if __name__ == "__main__":
    if sys.argv[1] == "client":
        sys.exit(client(sys.argv[2], sys.argv[3], sys.argv[4] if len(sys.argv) > 4 else None))
    server(sys.argv[2] if len(sys.argv) > 2 else None, sys.argv[3] if len(sys.argv) > 3 else None)
