// lionet/websocket/options.h: lionet::websocket::Options, the limits and timers of one
// WebSocket connection (both roles), each with its default and what it costs.
//
// Owns: plain data (ARCHITECTURE decision 10: no configuration is read here; app/ will map
// YAML onto it). Must not grow fields that only one role reads without saying so.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "lionet/base/clock.h"
#include "lionet/websocket/deflate.h"

namespace lionet::websocket {

struct Options {
  // Receive: a data frame with a larger payload fails the connection with 1009 before any of
  // its payload is read.
  uint64_t max_frame_size = 16u << 20;
  // Receive: a message (all its fragments) larger than this fails the connection with 1009 as
  // soon as a frame header announces it. Memory per connection grows up to this (the message
  // buffer grows as payload arrives, never ahead of it by more than 64 KiB).
  uint64_t max_message_size = 16u << 20;
  // Send: messages larger than this go out in fragments of this size (0 = one frame per
  // message). Smaller frames let a peer with a frame limit accept big messages; each costs a
  // header (2-14 bytes) and, on TLS, nothing more (frames are coalesced into records).
  std::size_t send_frame_size = 0;
  // Keepalive, run by the fiber inside receive(): after this long without a byte from the peer
  // a ping is sent; nullopt = no pings.
  std::optional<Duration> ping_interval = std::chrono::seconds(30);
  // No byte (a pong or anything else) within this long after a keepalive ping: the connection
  // is failed with 1011 "keepalive ping timeout".
  Duration ping_timeout = std::chrono::seconds(30);
  // No byte from the peer for this long fails the connection with 1001 "idle timeout";
  // nullopt = none (the keepalive above already finds dead peers).
  std::optional<Duration> idle_timeout{};
  // How long close() waits for the peer's close frame, and how long either side then (or
  // after failing the connection) reads until the peer ends the stream, before closing it.
  Duration close_timeout = std::chrono::seconds(5);
  // try_send() and broadcast(): the most bytes (framed messages) queued for this socket's
  // writer fiber and not yet written to the stream. A message that would take the queue past
  // it is refused with SendResult::kFull (never parks), so a slow peer costs its senders at
  // most this much memory and no time; a message larger than this is always kFull (send() it).
  // send() is not bounded by it (it parks instead). Cost: the queued bytes themselves.
  std::size_t send_queue_bytes = 1u << 20;
  // Each send (one frame, or one staging chunk of a client's masked frame) as a whole; expiry
  // fails the connection (a frame cannot be left half-written).
  Duration write_timeout = std::chrono::seconds(30);
  // Handshake: the client's whole opening handshake (connect, TLS, 101) is bounded by this.
  Duration handshake_timeout = std::chrono::seconds(10);
  // Subprotocols. Server: those it speaks, in preference order; the first that the client
  // also offers is chosen (none in common: no Sec-WebSocket-Protocol, the connection goes on).
  // Client: those it offers; the server's choice must be one of them.
  std::vector<std::string> subprotocols{};
  // permessage-deflate (RFC 7692): off by default (its memory cost per connection is in
  // deflate.h). Server: accepted when a client offers it; client: offered. When agreed, every
  // data message we send is compressed, and a received message is inflated piece by piece
  // under max_message_size (a deflate bomb is refused with 1009 after at most that many bytes).
  DeflateOptions deflate{};
};
}  // namespace lionet::websocket
