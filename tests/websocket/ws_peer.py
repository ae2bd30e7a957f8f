#!/usr/bin/env python3
"""The third-party peer of tests/websocket/interop_test.cc: Python `websockets` (sync API).

  ws_peer.py client URL SCENARIO [CA_FILE]   run SCENARIO against a LioNet server; exit 0 if
                                              every check held, else print FAIL and exit 1;
                                              prints "EXT <names>" (the extensions agreed)
  ws_peer.py server [CERT KEY]               serve on 127.0.0.1 (port printed as "PORT n");
                                              each connection's agreed extensions printed as
                                              "EXT <path> <names>";
                                              what each path does is below; one line
                                              "ENDED <path> <code> <reason>" per connection

  ws_peer.py client URL many:N [CA_FILE]     N connections one after the other: each echoes one
                                              message and closes; FAIL unless every one got the
                                              server's close frame

  ws_peer.py client URL hold:N [CA_FILE]     N connections held open ("OPEN N" once they are)
                                              until the server closes them: one line
                                              "CLOSED <code> <reason> <monotonic ns>" each

--no-compression anywhere: do not offer (client) or accept (server) permessage-deflate, which
websockets otherwise does by default. Every wait is bounded (timeouts below); the server is killed by the test that started it.

TLS: websockets' threading implementation reads the socket in one thread (recv_events) while
the caller's thread writes it, and Python's ssl module lets the two enter one OpenSSL SSL object
at once, which OpenSSL does not allow. With TLS 1.3 that loses connections: when the server's
session tickets arrive (post-handshake messages the reading thread processes), about 2% of
connections here stalled in the opening handshake or ended without a close frame (0 of 600
with TLS 1.2 or without tickets, 0 of 1000 with Node's single-threaded ws; CPython gh-137583
is the upstream discussion). SerializedSSLSocket below, which every TLS socket of this peer
is, gives the SSL object to one thread at a time and never holds it across a wait.
"""
import os
import select
import socket
import ssl
import sys
import threading
import time

from websockets.exceptions import ConnectionClosed
from websockets.sync.client import connect
from websockets.sync.server import serve

TIMEOUT = 60


def check(cond, what):
    if not cond:
        print("FAIL " + what, flush=True)
        sys.exit(1)
    print("OK " + what, flush=True)


class SerializedSSLSocket(ssl.SSLSocket):
    """An SSLSocket whose SSL object one thread at a time may use (see the top of the file).

    After the handshake the socket is non-blocking underneath: recv() and sendall() make one
    non-blocking SSL call at a time under a lock and wait for the fd with select() outside it,
    honouring the timeout set with settimeout() (kept here, not on the socket)."""

    _serialized = False

    def do_handshake(self, *args, **kwargs):
        super().do_handshake(*args, **kwargs)
        self._lock = threading.Lock()
        self._timeout = super().gettimeout()
        super().settimeout(0.0)
        self._serialized = True

    def settimeout(self, t):
        if self._serialized:
            self._timeout = t
        else:
            super().settimeout(t)

    def gettimeout(self):
        return self._timeout if self._serialized else super().gettimeout()

    def _deadline(self):
        return None if self._timeout is None else time.monotonic() + self._timeout

    def _wait(self, deadline, writable):
        left = 1.0 if deadline is None else min(1.0, deadline - time.monotonic())
        if left <= 0:
            raise TimeoutError("timed out")
        if writable:
            select.select([], [self], [], left)
        else:
            select.select([self], [], [], left)

    def recv(self, n=1024, flags=0):
        if not self._serialized:
            return super().recv(n, flags)
        deadline = self._deadline()
        while True:
            with self._lock:
                try:
                    return super().recv(n, flags)
                except (ssl.SSLWantReadError, ssl.SSLWantWriteError, BlockingIOError):
                    pass
            self._wait(deadline, writable=False)

    def sendall(self, data, flags=0):
        if not self._serialized:
            return super().sendall(data, flags)
        deadline = self._deadline()
        view = memoryview(data).cast("B")
        while len(view):
            with self._lock:
                try:
                    # Retried with the same bytes after WANT_WRITE, as OpenSSL requires.
                    view = view[super().send(view, flags):]
                    continue
                except (ssl.SSLWantReadError, ssl.SSLWantWriteError, BlockingIOError):
                    pass
            self._wait(deadline, writable=True)

    def shutdown(self, how):
        if not self._serialized:
            return super().shutdown(how)
        with self._lock:
            return super().shutdown(how)

    def close(self):
        if not self._serialized:
            return super().close()
        with self._lock:
            return super().close()


def serialized(ctx):
    ctx.sslsocket_class = SerializedSSLSocket
    return ctx


def tls_client(ca):
    if not ca:
        return None
    return serialized(ssl.create_default_context(cafile=ca))


COMPRESSION = "deflate"


def extension_names(ws):
    return ",".join(e.name for e in ws.protocol.extensions) or "none"


def open_client(url, ca):
    kw = dict(max_size=None, open_timeout=TIMEOUT, close_timeout=10, compression=COMPRESSION)
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


def scenario_many(url, ca, n):
    for i in range(n):
        with open_client(url, ca) as ws:
            ws.send("message %d" % i)
            if ws.recv(TIMEOUT) != "message %d" % i:
                check(False, "echo on connection %d" % i)
            ws.close(4001, "client bye")
            p = ws.protocol
            if p.close_rcvd is None or p.close_rcvd.code != 4001:
                check(False, "the server's close frame on connection %d (state %s, rcvd %s)" % (i, p.state, p.close_rcvd))
    check(True, "%d connections each got the server's close frame" % n)


def scenario_hold(url, ca, n):
    """N connections held open until the server closes them (the test stops the server): one
    line per connection, "CLOSED <code> <reason> <time.monotonic_ns() when its close frame was
    seen>", each connection read by a thread of its own so that no close waits for another."""
    conns = [open_client(url, ca) for _ in range(n)]
    print("OPEN %d" % n, flush=True)
    lock = threading.Lock()

    def hold(ws):
        try:
            ws.recv(TIMEOUT)
            line = "FAIL a message instead of the server's close"
        except ConnectionClosed as e:
            at = time.monotonic_ns()
            line = "CLOSED %d %s %d" % (e.rcvd.code, e.rcvd.reason.replace(" ", "_"), at) if e.rcvd else \
                "FAIL no close frame from the server"
        except TimeoutError:
            line = "FAIL the server never closed the connection"
        with lock:
            print(line, flush=True)

    threads = [threading.Thread(target=hold, args=(ws,)) for ws in conns]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for ws in conns:
        ws.close()


def client(url, scenario, ca):
    if scenario.startswith("many"):
        scenario_many(url, ca, int(scenario.split(":")[1]))
        return 0
    if scenario.startswith("hold"):
        scenario_hold(url, ca, int(scenario.split(":")[1]))
        return 0
    with open_client(url, ca) as ws:
        print("EXT", extension_names(ws), flush=True)
        {"echo": scenario_echo, "server-close": scenario_server_close}[scenario](ws)
    return 0


def handler(ws):
    path = ws.request.path
    print("EXT %s %s" % (path, extension_names(ws)), flush=True)
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
    kw = dict(max_size=None, compression=COMPRESSION)
    ctx = None
    if cert:
        ctx = serialized(ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER))
        ctx.load_cert_chain(cert, key)
    try:
        srv = serve(handler, "127.0.0.1", 0, ssl=ctx, **kw)
    except TypeError:  # websockets < 14 names it ssl_context
        srv = serve(handler, "127.0.0.1", 0, ssl_context=ctx, **kw)
    with srv:
        print("PORT %d" % srv.socket.getsockname()[1], flush=True)
        srv.serve_forever()


if __name__ == "__main__":
    if "--no-compression" in sys.argv:
        sys.argv.remove("--no-compression")
        COMPRESSION = None
    if os.environ.get("WS_PEER_DEBUG"):  # every frame and state change on stderr (diagnosis)
        import logging
        logging.basicConfig(level=logging.DEBUG, format="%(asctime)s %(threadName)s %(name)s %(message)s")
    if sys.argv[1] == "client":
        sys.exit(client(sys.argv[2], sys.argv[3], sys.argv[4] if len(sys.argv) > 4 else None))
    server(sys.argv[2] if len(sys.argv) > 2 else None, sys.argv[3] if len(sys.argv) > 3 else None)
