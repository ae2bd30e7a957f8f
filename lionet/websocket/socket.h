// lionet/websocket/socket.h: lionet::websocket::Socket, one WebSocket connection (RFC 6455) over
// a lionet::Stream (TCP or TLS alike), in blocking style for fibers:
//
//   while (auto m = ws.receive()) ws.send(*m);            // echo until the peer closes
//   ws.close_code();                                       // why it ended (1000, 1001, 1006...)
//
// Made by websocket::accept() (server, server.h) and websocket::connect() (client, client.h).
//
// Owns: the receive state (detail::FrameReader over an input Buffer, which also inflates), the
// send path (frame headers, permessage-deflate compression under the send mutex, fragmentation
// by Options::send_frame_size, the client's masking with a fresh random key per frame), automatic pongs, keepalive pings, the close handshake both ways, and the
// stream if it was given one to own. Must not: throw on the data path (errors are Results or
// the end of receive()), or send anything after its close frame.
//
// Concurrency (the rule a user relies on):
//   - receive(): one fiber at a time (a second one waits for the first: read_mu_).
//   - send*/ping/close: any fibers, at once with a receive(). Sends are serialized by a fiber
//     Mutex (send_mu_), held for a whole message (all its fragments), so messages never
//     interleave; a pong the receiver owes, and the close frame, wait for the message in
//     progress. A sender parks (never blocks its worker) while the socket buffer is full; a
//     slow peer therefore slows its send() callers.
//   - try_send*/broadcast(): any fibers or threads, never park. The message is framed at once
//     and queued (bounded by Options::send_queue_bytes: kFull beyond it) for a writer fiber the
//     socket spawns on its scheduler when the queue becomes non-empty; it writes under the same
//     send mutex, so queued and sent messages never interleave. Order: a send() first writes
//     everything queued before it; close() too, then its close frame; a failure (ours or the
//     peer's close) drops the queue. Queued messages go uncompressed (RSV1 is per message and
//     optional in RFC 7692), so one frame can be shared by every socket of a broadcast.
//   - close() may be called while another fiber is parked in receive(): it sends the close
//     frame and waits (close_timeout) for that receive() to see the peer's answer.
//   - Destroy the Socket only after every call on it has returned.
//
// Ending: receive() returns nullopt (or false) once the connection is over: the peer's close
// frame (answered with the same code), a failure on our side (the close frame we sent: 1002,
// 1007, 1009, 1011, 1001), or a stream that ended or failed (1006). close_code() and
// close_reason() then say which. Failing a connection sends the close frame, half-closes, and
// drops what the peer still sends for a moment (so our close frame is read, not reset away).
//
// Timers: keepalive pings, their timeout and the idle timeout are checked by the fiber inside
// receive(), whose reads carry a fixed timeout (the shortest of those durations), so each is
// noticed at most that much late; a socket that nobody is receiving on sends no pings.
#pragma once

#include <atomic>
#include <cstdint>
#include <deque>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>

#include "lionet/base/result.h"
#include "lionet/base/spinlock.h"
#include "lionet/net/buffer.h"
#include "lionet/net/stream.h"
#include "lionet/sync/event.h"
#include "lionet/sync/mutex.h"
#include "lionet/sync/wait_group.h"
#include "lionet/websocket/deflate.h"
#include "lionet/websocket/detail/frame_reader.h"
#include "lionet/websocket/message.h"
#include "lionet/websocket/options.h"

namespace lionet {
class Scheduler;
}

namespace lionet::websocket {

enum class Role : uint8_t { kServer, kClient };

// What try_send() did with a message.
enum class SendResult : uint8_t {
  kQueued,  // framed and queued; the socket's writer fiber sends it
  kFull,  // the queue would pass Options::send_queue_bytes: nothing was queued
  kClosed,  // the close frame was sent or the connection is over (or the socket has no
  // scheduler to run a writer: made outside one)
};

class Socket;
struct BroadcastResult {
  size_t queued = 0, full = 0, closed = 0;
};
// Sends m to every socket without parking: server sockets share one frame built once (no
// masking, no compression), client sockets each frame their own (masked). Each socket queues
// it as try_send() does; the counts say how many queued, were full, or were closed.
BroadcastResult broadcast(std::span<Socket* const> sockets, const Message& m);

class Socket {
 public:
  // Over a stream the caller keeps alive (a server's taken-over connection). `buffered`: bytes
  // already read from the stream that belong to the WebSocket (read before the stream).
  // `deflate`: the permessage-deflate parameters agreed in the handshake, if any.
  Socket(Stream& stream, Role role, Options options, std::string_view buffered = {}, std::string subprotocol = {},
         std::optional<DeflateParams> deflate = std::nullopt);
  // Over a stream it owns (a client's connection).
  Socket(std::unique_ptr<Stream> stream, Role role, Options options, std::string_view buffered = {},
         std::string subprotocol = {}, std::optional<DeflateParams> deflate = std::nullopt);
  // Closes the stream without a close handshake if the connection is still open: call close()
  // first for a polite end.
  ~Socket();
  Socket(const Socket&) = delete;
  Socket& operator=(const Socket&) = delete;

  // The next whole message, or nullopt once the connection is over (see the top of the file).
  // Pings are answered, pongs noted, keepalive run, while it waits.
  std::optional<Message> receive();
  // The same into `out`, reusing its capacity; false once the connection is over.
  bool receive(Message& out);

  // One message (fragmented by Options::send_frame_size). ENOTCONN after the close frame was
  // sent or the connection ended; the stream's error (ETIMEDOUT after write_timeout, EPIPE,
  // ECONNRESET) if it failed, which also ends the connection (close_code 1006): a frame cannot
  // be left half-written.
  Result<void> send(const Message& m) { return send_data(m.type, m.data); }
  Result<void> send_text(std::string_view text) { return send_data(MessageType::kText, text); }
  Result<void> send_binary(std::string_view bytes) { return send_data(MessageType::kBinary, bytes); }
  // Never parks: frames the message and queues it for the socket's writer fiber (see the top
  // of the file); kFull when the queue is at its bound (Options::send_queue_bytes).
  SendResult try_send(const Message& m) { return try_send_data(m.type, m.data); }
  SendResult try_send_text(std::string_view text) { return try_send_data(MessageType::kText, text); }
  SendResult try_send_binary(std::string_view bytes) { return try_send_data(MessageType::kBinary, bytes); }
  // Bytes queued by try_send/broadcast and not yet written (a snapshot).
  size_t queued_bytes() const noexcept;

  // EINVAL for a payload over 125 bytes. The pong is not waited for (receive() notes it).
  Result<void> ping(std::string_view payload = {});
  // Starts (or joins) the close handshake: sends a close frame with code and reason (EINVAL for
  // a code that may not be sent, or a reason over 123 bytes or not UTF-8), then waits up to
  // close_timeout for the peer's close frame (reading and dropping messages unless another
  // fiber is in receive(), which then gets them) and ends the stream. Returns at once if the
  // connection is already over.
  Result<void> close(uint16_t code = close_code::kNormal, std::string_view reason = {});

  // While open: 0. After the end: the code of the peer's close frame (1005: it had none), the
  // code we failed the connection with, or 1006 (ended without a close frame).
  uint16_t close_code() const noexcept;
  // The matching reason ("" if none); stable once close_code() is non-zero.
  std::string_view close_reason() const noexcept;
  // Neither side has sent a close frame and the stream has not failed.
  bool is_open() const noexcept;

  Role role() const noexcept { return role_; }
  // The subprotocol agreed in the handshake ("" if none).
  std::string_view subprotocol() const noexcept { return subprotocol_; }
  // The permessage-deflate parameters agreed in the handshake (nullopt: messages go
  // uncompressed).
  const std::optional<DeflateParams>& deflate() const noexcept { return deflate_; }
  const Options& options() const noexcept { return options_; }

  // Server side: the server's stopping flag (http::Takeover::stopping; may be null). Once it
  // is set, the end of input its drain makes (TcpServer shuts every connection's read side at
  // the start of a stop) is answered with a close frame 1001 "server shutting down", and
  // receive() ends with close_code() 1001, instead of a dropped connection at the drain's end.
  void set_server_stopping(const std::atomic<bool>* stopping) noexcept { server_stopping_ = stopping; }

 private:
  // Exactly one of borrowed and owned is set.
  Socket(Stream* borrowed, std::unique_ptr<Stream> owned, Role role, Options options, std::string_view buffered,
         std::string subprotocol, std::optional<DeflateParams> deflate);
  friend BroadcastResult broadcast(std::span<Socket* const> sockets, const Message& m);
  Result<void> send_data(MessageType type, std::string_view payload);
  SendResult try_send_data(MessageType type, std::string_view payload);
  // Queues a framed message (bounded); starts the writer fiber if none runs.
  SendResult enqueue(std::shared_ptr<const std::string> frame);
  // The writer fiber: drains the queue under send_mu_ until it is empty.
  void writer_loop() noexcept;
  // With send_mu_ held: writes everything queued, in order (a write failure ends the
  // connection and drops the rest).
  Result<void> drain_queue_locked() noexcept;
  void drop_queue() noexcept;
  // With send_mu_ held: one frame.
  Result<void> write_frame(bool fin, Opcode op, std::string_view payload, bool rsv1 = false) noexcept;
  // With send_mu_ held: a control frame, unless a close frame was sent or the stream failed.
  Result<void> write_control_locked(Opcode op, std::string_view payload) noexcept;
  Result<void> send_control(Opcode op, std::string_view payload);
  // With send_mu_ held: sends our close frame if none was sent yet (true if sent now).
  bool send_close_locked(uint16_t code, std::string_view reason) noexcept;
  uint32_t next_mask_key() noexcept;
  // The stream failed under a send: nothing more can go out.
  void on_send_failure(std::error_code ec) noexcept;

  // Reader side (read_mu_ held).
  bool read_loop(Message& out, bool discard_messages, std::optional<TimePoint> until);
  enum class Fill : uint8_t { kData, kTick, kEnd };
  Fill fill(Message& msg);
  // A read timed out: keepalive and idle checks. False: the connection was failed.
  bool on_tick();
  void on_peer_close(uint16_t code, std::string_view reason);
  void fail(uint16_t code, std::string_view why);
  // The handshake is over (or abandoned). drain: our close frame went out and the stream
  // works: optionally half-close, then read until the peer's end of stream (bounded). Then the
  // stream is closed and done_ set.
  void finish(bool drain, bool half_close);
  // Sets close_code_/reason_ unless already set (first cause wins).
  void record_end(uint16_t code, std::string_view reason) noexcept;
  // With no writer possible any more (close frame sent): bound the reads that remain.
  void arm_close_deadline(TimePoint until) noexcept;

  Stream* stream_;
  std::unique_ptr<Stream> owned_;
  const Role role_;
  const Options options_;
  const std::string subprotocol_;
  const std::optional<DeflateParams> deflate_;
  bool inflate_broken_ = false;  // zlib could not allocate the receive side's stream
  std::optional<Duration> tick_;  // the fixed read timeout (keepalive / idle), if any

  // Receive side, guarded by read_mu_ (held across parks by the receiving fiber).
  Mutex read_mu_;
  Buffer in_;
  detail::FrameReader reader_;
  TimePoint last_rx_{};  // when a byte last arrived (only kept with tick_)
  bool awaiting_pong_ = false;  // a keepalive ping is out
  TimePoint pong_deadline_{};

  // Send side, guarded by send_mu_ (held across parks by the sending fiber).
  Mutex send_mu_;
  std::unique_ptr<char[]> staging_;  // client: header + masked payload chunks
  std::unique_ptr<Deflater> deflater_;  // permessage-deflate agreed: compresses what we send
  std::string zout_;  // the compressed message being sent (kept if <= 64 KiB)
  uint8_t key_pool_[64];
  size_t key_pos_ = sizeof key_pool_;
  // Written under send_mu_; atomic so is_open() and the reader may look without it.
  std::atomic<bool> close_sent_{false};
  std::atomic<bool> broken_{false};  // a send failed: the stream is unusable
  const std::atomic<bool>* server_stopping_ = nullptr;  // set_server_stopping()

  // The send queue (try_send, broadcast). q_mu_ (a spin lock: nothing parks under it) guards
  // queue_, queued_bytes_ and writer_running_; the front item is written and popped only with
  // send_mu_ held as well, so one drainer at a time. writers_ counts writer fibers alive (the
  // destructor waits for them); sched_ is where they run (the creator's scheduler, or null).
  Scheduler* const sched_;
  mutable SpinLock q_mu_;
  std::deque<std::shared_ptr<const std::string>> queue_;
  size_t queued_bytes_ = 0;
  bool writer_running_ = false;
  WaitGroup writers_;

  // The end. info_mu_ guards the pair; close_code_ != 0 publishes close_reason_ (release /
  // acquire), which never changes after.
  SpinLock info_mu_;
  std::atomic<uint16_t> close_code_{0};
  std::string close_reason_;
  std::atomic<bool> done_{false};  // the stream was closed by this socket
  Event finished_;  // set with done_: close() from a non-receiving fiber waits on it
};
}  // namespace lionet::websocket
