// lionet/http/takeover.h: lionet::http::Takeover, what a handler gets when it takes an HTTP/1.1
// connection over after answering 101 Switching Protocols (Response::take_over()): the
// connection's Stream and the bytes the server had already read past the request.
//
// Owns: nothing. It is the one generic seam through which another protocol continues on an
// HTTP/1.1 connection: websocket/ builds on it, and so will the proxy's Upgrade tunnel (bytes
// both ways). Must not know any of those protocols: http/ never includes them.
//
// Sequence (detail/connection.h, Connection::take_over):
//   1. The handler (and the `after` middleware) leave the response at status 101 with the
//      protocol's headers (Upgrade, Connection: Upgrade, ...) and a TakeoverFn.
//   2. The server reads and drops whatever is left of the request body (within drain_body_max;
//      otherwise it closes), then writes the 101 head: status line, Date, Server and the
//      handler's headers; no Content-Length, Transfer-Encoding or Connection of its own.
//   3. It writes the access log line (status 101), resets the stream's timeouts to none and
//      calls the TakeoverFn in the connection's fiber.
//   4. When the function returns, the keep-alive loop ends without another read or write; the
//      stream is closed by whoever owns it (Server closes the connection).
// A response that is not 101 when it is sent goes out as usual and the function is dropped; a
// 101 without a function is replaced by 500 (the client would otherwise switch protocols alone).
// Over HTTP/2 there is no takeover (RFC 8441's extended CONNECT is not supported):
// Request::can_take_over() is false there and http2/ answers a response that asks for one with
// 501, naming why.
#pragma once

#include <atomic>
#include <functional>
#include <string_view>

namespace lionet {
class Stream;
}

namespace lionet::http {

class Request;

struct Takeover {
  // The connection, for the rest of its life (no timeouts set). TLS or plain: a Stream.
  Stream& stream;
  // Bytes the server read past the request (and its body): the new protocol's first bytes,
  // to be consumed before reading the stream. Valid until the function returns.
  std::string_view buffered;
  // The request that asked for the switch. Valid (views included) until the function returns.
  const Request& request;
  // May be null; becomes true once the server is stopping (a long-lived protocol may poll it
  // to end politely; the server closes the stream at the end of its drain time regardless).
  const std::atomic<bool>* stopping;

  // For a protocol that has copied what it needs of `buffered` and `request`: gives the
  // connection's HTTP input buffer back now (http.input_buffer, 4 KiB by default), not when the
  // function returns, so a long-lived idle connection does not keep it. After the call
  // `buffered` and every view of `request` are invalid. Idempotent; the fiber's own call only.
  void release_input() {
    if (release_fn) release_fn(release_ctx);
    release_fn = nullptr;
    buffered = {};
  }
  void (*release_fn)(void*) = nullptr;  // set by the server
  void* release_ctx = nullptr;
};

// Runs in the connection's fiber after the 101 has been sent; may block for as long as the
// protocol lasts. Exceptions are caught and logged by the server (the connection then closes).
using TakeoverFn = std::function<void(Takeover&)>;
}  // namespace lionet::http
