// lionet/http2/server.h: HTTP/2 (RFC 9113) for lionet::http servers, over any lionet::Stream
// (h2 over TLS chosen by ALPN, h2c with prior knowledge over plain TCP), serving the same
// http::Handler (Router, routes, static files) as HTTP/1.1: a handler does not know which
// version it runs on.
//
//   lionet::http::ServerOptions opts;
//   lionet::http2::enable(opts);                  // HTTP/2 beside HTTP/1.1
//   lionet::http::Server server(sched, router.handler(), opts);
//   // TLS: offer "h2" first in the context's ALPN list, e.g. {"h2", "http/1.1"}.
//
// Frames, HPACK and the stream state machine are libnghttp2's (Debian libnghttp2-dev, the
// engine inside curl, Apache httpd and Node.js). This file's code owns what sits around it:
//   - The connection's fiber reads the stream and feeds the session; every session call is
//     made under one lionet::Mutex per connection, and whoever calls it writes what the
//     session has to send before letting go: the connection's writes stay ordered.
//   - Each request runs its handler in a fiber of its own (so one slow handler never stalls
//     the connection's other streams); they may run on different workers.
//   - Request bodies are streamed: DATA is buffered per stream and the flow-control window
//     is given back (WINDOW_UPDATE) only as the handler reads, so a slow reader back-pressures
//     its client: at most initial_window_size bytes wait per stream.
//   - Responses: memory and file bodies are read by the session as the peer's windows allow;
//     a body writer (Response::set_body_writer) writes into a bounded per-stream buffer and
//     waits while it is full.
// Not supported: server push (never sent; SETTINGS_ENABLE_PUSH is irrelevant to a server),
// `Upgrade: h2c` (deprecated by RFC 9113; only prior knowledge), priorities (nghttp2's
// default scheduling).
#pragma once

#include <atomic>
#include <cstdint>

#include "lionet/base/clock.h"
#include "lionet/http/server.h"

namespace lionet::http2 {

// Counters of the HTTP/2 connections of one server (relaxed atomics: statistics only).
struct Stats {
  std::atomic<uint64_t> connections{0};  // connections served as HTTP/2
  std::atomic<uint64_t> streams{0};  // requests (streams) opened by clients
  std::atomic<uint64_t> resets_by_peer{0};  // RST_STREAM frames received
  std::atomic<uint64_t> goaway_no_error{0};  // GOAWAYs sent: stop, idle, max_requests
  std::atomic<uint64_t> goaway_protocol_error{0};  // ... a peer that broke the protocol
  std::atomic<uint64_t> goaway_enhance_your_calm{0};  // ... a peer over a flood limit
  std::atomic<uint64_t> goaway_other{0};  // ... any other error code
  std::atomic<uint64_t> stalled{0};  // connections closed: a response stuck at a zero window
};

struct Options {
  // SETTINGS_MAX_CONCURRENT_STREAMS: streams one client may have open at once; more are
  // refused with RST_STREAM REFUSED_STREAM until the client acknowledges our SETTINGS, then
  // are a connection error (GOAWAY PROTOCOL_ERROR, nghttp2's rule). YAML
  // http2_max_concurrent_streams (nginx: 128).
  uint32_t max_concurrent_streams = 128;
  // SETTINGS_INITIAL_WINDOW_SIZE: request body bytes a stream may send ahead of its handler's
  // reads (the most that waits in memory per stream). YAML http2_initial_window_size.
  uint32_t initial_window_size = 65536;
  // SETTINGS_MAX_FRAME_SIZE the server accepts (16384..16777215). YAML http2_max_frame_size.
  uint32_t max_frame_size = 16384;
  // SETTINGS_MAX_HEADER_LIST_SIZE, and the cap on a decoded header block however many
  // CONTINUATION frames carry it. YAML http2_max_header_list_size.
  uint32_t max_header_list_size = 32768;
  // Bytes a body writer may have queued for one stream before its write() waits.
  uint32_t writer_buffer = 65536;

  // Limits against the known HTTP/2 attacks. Past each, the connection gets GOAWAY
  // ENHANCE_YOUR_CALM and is closed; other connections are not affected.
  // Streams one connection may open over its life; then GOAWAY NO_ERROR and the open streams
  // finish (the client reconnects). YAML http2_max_requests.
  uint32_t max_requests = 100000;
  // Rapid reset (CVE-2023-44487): RST_STREAM frames from the client, as a token bucket of
  // reset_burst tokens refilled at resets_per_second. YAML http2_reset_burst / http2_resets_per_second.
  uint32_t reset_burst = 1000;
  uint32_t resets_per_second = 33;
  // CONTINUATION flood (2024): CONTINUATION frames after one HEADERS frame; the header block
  // as sent is also capped at twice max_header_list_size. YAML http2_max_continuations.
  uint32_t max_continuations = 8;
  // Empty DATA frames (no payload, no END_STREAM) one connection may send. YAML
  // http2_max_empty_frames.
  uint32_t max_empty_frames = 1000;
  // SETTINGS and PING acknowledgements queued unsent (a client that floods them faster than
  // it reads); over it the connection is closed. YAML http2_max_outbound_ack.
  uint32_t max_outbound_ack = 1000;

  Stats* stats = nullptr;  // optional counters (the binary's /metrics)
};

// Installs HTTP/2 into `options` (ServerOptions::http2): connections whose TLS ALPN chose "h2"
// or that start with the HTTP/2 preface are served by serve_connection() with `h2`.
void enable(http::ServerOptions& options, Options h2 = {});

// Serves one HTTP/2 connection until it ends (peer closed, GOAWAY, error, or the server
// stopping with no stream left), in the calling fiber.
void serve_connection(const http::ProtocolHandoff& conn, const Options& h2);

}  // namespace lionet::http2
