// lionet/websocket/socket.cc: websocket::Socket (see socket.h).
//
// Who touches the stream when (the reason set_timeouts is safe where it is called):
//   - Writes happen only under send_mu_, and only while no close frame was sent and no send
//     failed (close_sent_, broken_: both written under send_mu_).
//   - Reads happen only under read_mu_ (receive(), or close() when nobody is receiving).
//   - The stream's timeouts are set in the constructor (before anyone else has the socket) and
//     then only by arm_close_deadline(), which runs under send_mu_ after our close frame went
//     out: no write can be in flight or start, and the caller is the only reader.
//   - close() on the stream may come from any fiber (Stream's contract): it wakes a parked
//     read with ECANCELED.
#include "lionet/websocket/socket.h"

#include <openssl/rand.h>
#include <sys/random.h>

#include <algorithm>
#include <cstring>
#include <mutex>
#include <new>

#include "lionet/log/log.h"
#include "lionet/websocket/detail/log.h"
#include "lionet/sched/scheduler.h"
#include "lionet/websocket/utf8.h"

namespace lionet::websocket {
namespace {
using detail::ws_log;
constexpr size_t kStaging = 16 * 1024;  // client: header + masked payload per write
// A server frame with up to this much payload is copied behind its header and sent with one
// send(2); a larger one goes out as header + the caller's bytes (sendmsg, two iovecs). perf of
// the 64 B echo: sendmsg's msghdr copy and iovec import cost ~3% of the server's CPU.
constexpr size_t kSmallFrame = 1024;
constexpr size_t kReadRoom = 4096;  // the input buffer's free tail per read
// Payload still expected above which the next read goes straight into the message.
constexpr size_t kDirectMin = 2048;
constexpr size_t kLingerBytes = 256 * 1024;  // dropped after failing, at most
// A read timeout may return a hair before the clock says the period is over.
constexpr Duration kSlack = std::chrono::milliseconds(5);
}  // namespace

Socket::Socket(Stream& stream, Role role, Options options, std::string_view buffered, std::string subprotocol,
               std::optional<DeflateParams> deflate)
    : Socket(&stream, nullptr, role, std::move(options), buffered, std::move(subprotocol), deflate) {}

Socket::Socket(std::unique_ptr<Stream> stream, Role role, Options options, std::string_view buffered,
               std::string subprotocol, std::optional<DeflateParams> deflate)
    : Socket(nullptr, std::move(stream), role, std::move(options), buffered, std::move(subprotocol), deflate) {}

Socket::Socket(Stream* borrowed, std::unique_ptr<Stream> owned, Role role, Options options, std::string_view buffered,
               std::string subprotocol, std::optional<DeflateParams> deflate)
    : stream_(owned ? owned.get() : borrowed),
      owned_(std::move(owned)),
      role_(role),
      options_(std::move(options)),
      subprotocol_(std::move(subprotocol)),
      deflate_(deflate),
      in_(kReadRoom),
      reader_(role == Role::kServer, options_.max_frame_size, options_.max_message_size),
      sched_(Scheduler::current()) {
  if (deflate_) {
    // Each side compresses with its own window and context rule and inflates with the peer's.
    const bool server = role == Role::kServer;
    const DeflateParams& d = *deflate_;
    deflater_ =
        std::make_unique<Deflater>(server ? d.server_max_window_bits : d.client_max_window_bits, options_.deflate.level,
                                   server ? d.server_no_context_takeover : d.client_no_context_takeover);
    inflate_broken_ = !reader_.enable_deflate(server ? d.client_max_window_bits : d.server_max_window_bits,
                                              server ? d.client_no_context_takeover : d.server_no_context_takeover);
  }
  if (options_.ping_interval) tick_ = std::min(*options_.ping_interval, options_.ping_timeout);
  if (options_.idle_timeout) tick_ = tick_ ? std::min(*tick_, *options_.idle_timeout) : *options_.idle_timeout;
  if (!buffered.empty()) in_.append(buffered);
  stream_->set_timeouts(tick_, options_.write_timeout);  // once (see the top of the file)
  last_rx_ = now();
}

Socket::~Socket() {
  if (!done_.load(std::memory_order_acquire)) stream_->close();
  // A writer fiber may still run (its write fails on the closed stream, or it is about to see
  // an empty queue): it touches *this until its done(). Even in a cancelled fiber.
  CancelShield shield;
  writers_.wait();
}

// ---- sending --------------------------------------------------------------------------------

uint32_t Socket::next_mask_key() noexcept {
  // RFC 6455 5.3: unpredictable keys from a strong source; OpenSSL's DRBG, 16 keys per refill.
  if (key_pos_ + 4 > sizeof key_pool_) {
    if (RAND_bytes(key_pool_, sizeof key_pool_) != 1) {
      if (getrandom(key_pool_, sizeof key_pool_, 0) != static_cast<ssize_t>(sizeof key_pool_)) {
        for (auto& b : key_pool_) b = static_cast<uint8_t>(now().time_since_epoch().count());
      }
    }
    key_pos_ = 0;
  }
  uint32_t k;
  std::memcpy(&k, key_pool_ + key_pos_, 4);
  key_pos_ += 4;
  return k;
}

Result<void> Socket::write_frame(bool fin, Opcode op, std::string_view payload, bool rsv1) noexcept {
  Result<size_t> r = size_t{0};
  if (role_ == Role::kServer) {
    uint8_t hdr[kMaxHeaderSize];
    const size_t h = write_frame_header(hdr, fin, op, payload.size(), false, 0, rsv1);
    if (payload.size() <= kSmallFrame) {  // one buffer, one send(2): cheaper than sendmsg's iovecs
      char one[kMaxHeaderSize + kSmallFrame];
      std::memcpy(one, hdr, h);
      if (!payload.empty()) std::memcpy(one + h, payload.data(), payload.size());
      r = stream_->write(one, h + payload.size());
    } else {
      iovec iov[2] = {{hdr, h}, {const_cast<char*>(payload.data()), payload.size()}};
      r = stream_->writev(iov, 2);  // the payload is sent from the caller's bytes
    }
  } else {
    // A client must mask, which needs a copy: header and masked payload go out in chunks.
    if (!staging_) staging_.reset(new (std::nothrow) char[kStaging]);
    if (!staging_) return errno_error(ENOMEM);
    const uint32_t key = next_mask_key();
    size_t used =
        write_frame_header(reinterpret_cast<uint8_t*>(staging_.get()), fin, op, payload.size(), true, key, rsv1);
    size_t off = 0;
    do {
      const size_t k = std::min(kStaging - used, payload.size() - off);
      copy_masked(staging_.get() + used, payload.data() + off, k, key, off);
      used += k;
      off += k;
      r = stream_->write(staging_.get(), used);
      used = 0;
    } while (r && off < payload.size());
  }
  if (!r) {
    on_send_failure(r.error());
    return r.error();
  }
  return {};
}

void Socket::on_send_failure(std::error_code ec) noexcept {
  broken_.store(true, std::memory_order_release);
  LIONET_LOG_DEBUG(ws_log(), "send failed ({}): the connection is over", ec.message());
  record_end(close_code::kAbnormal, "send failed");
  done_.store(true, std::memory_order_release);
  stream_->close();  // wakes a receiver parked in a read
  finished_.set();
}

Result<void> Socket::send_data(MessageType type, std::string_view payload) {
  std::lock_guard<Mutex> g(send_mu_);
  if (close_sent_.load(std::memory_order_relaxed) || broken_.load(std::memory_order_relaxed) ||
      done_.load(std::memory_order_acquire)) {
    return errno_error(ENOTCONN);
  }
  if (auto r = drain_queue_locked(); !r) return r;  // what try_send queued earlier goes first
  Opcode op = type == MessageType::kText ? Opcode::kText : Opcode::kBinary;
  bool rsv1 = false;  // permessage-deflate: set on the first frame of a compressed message
  if (deflater_) {
    try {
      if (!deflater_->compress(payload, &zout_)) return errno_error(ENOMEM);
    } catch (const std::bad_alloc&) {
      return errno_error(ENOMEM);
    }
    payload = zout_;
    rsv1 = true;
  }
  const size_t step = options_.send_frame_size ? options_.send_frame_size : payload.size();
  size_t off = 0;
  do {
    const size_t k = std::min(step, payload.size() - off);
    const bool fin = off + k == payload.size();
    if (auto r = write_frame(fin, op, payload.substr(off, k), rsv1); !r) return r;
    op = Opcode::kContinuation;
    rsv1 = false;
    off += k;
  } while (off < payload.size());
  // A big message's compressed copy goes back now: a connection keeps at most 64 KiB of it.
  if (zout_.capacity() > 64 * 1024) std::string().swap(zout_);
  return {};
}

// ---- the send queue (try_send, broadcast) ----------------------------------------------------

namespace {
// One message as one frame: unmasked (a server's, shareable) or masked with a fresh key (a
// client's). Queued messages are never compressed (see socket.h).
std::shared_ptr<const std::string> frame_message(MessageType type, std::string_view payload, bool masked) {
  uint32_t key = 0;
  if (masked && RAND_bytes(reinterpret_cast<unsigned char*>(&key), sizeof key) != 1) {
    if (getrandom(&key, sizeof key, 0) != static_cast<ssize_t>(sizeof key)) {
      key = static_cast<uint32_t>(now().time_since_epoch().count());
    }
  }
  uint8_t hdr[kMaxHeaderSize];
  const size_t h = write_frame_header(hdr, true, type == MessageType::kText ? Opcode::kText : Opcode::kBinary,
                                      payload.size(), masked, key);
  auto f = std::make_shared<std::string>();
  f->resize(h + payload.size());
  std::memcpy(f->data(), hdr, h);
  if (masked) {
    copy_masked(f->data() + h, payload.data(), payload.size(), key, 0);
  } else if (!payload.empty()) {
    std::memcpy(f->data() + h, payload.data(), payload.size());
  }
  return f;
}
}  // namespace

SendResult Socket::try_send_data(MessageType type, std::string_view payload) {
  if (!is_open()) return SendResult::kClosed;
  if (payload.size() + kMaxHeaderSize > options_.send_queue_bytes) return SendResult::kFull;
  try {
    return enqueue(frame_message(type, payload, role_ == Role::kClient));
  } catch (const std::bad_alloc&) {
    return SendResult::kFull;
  }
}

SendResult Socket::enqueue(std::shared_ptr<const std::string> frame) {
  if (!sched_) return SendResult::kClosed;  // no scheduler to run a writer on
  bool start = false;
  {
    std::lock_guard<SpinLock> q(q_mu_);
    if (queued_bytes_ + frame->size() > options_.send_queue_bytes) return SendResult::kFull;
    queued_bytes_ += frame->size();
    queue_.push_back(std::move(frame));
    start = !writer_running_;
    writer_running_ = true;
  }
  if (start) {
    writers_.add(1);
    try {
      sched_->spawn_detached([this] { writer_loop(); }, {.name = "ws-writer"});
    } catch (...) {  // the scheduler is stopping (or out of stacks): nothing will be sent
      writers_.done();
      drop_queue();
      std::lock_guard<SpinLock> q(q_mu_);
      writer_running_ = false;
      return SendResult::kClosed;
    }
  }
  return SendResult::kQueued;
}

void Socket::writer_loop() noexcept {
  for (;;) {
    {
      std::lock_guard<Mutex> g(send_mu_);
      if (close_sent_.load(std::memory_order_relaxed) || broken_.load(std::memory_order_relaxed) ||
          done_.load(std::memory_order_acquire)) {
        drop_queue();
      } else {
        (void)drain_queue_locked();
      }
    }
    std::lock_guard<SpinLock> q(q_mu_);
    if (queue_.empty()) {  // more may have come while we wrote: loop, else stop here
      writer_running_ = false;
      break;
    }
  }
  writers_.done();  // the last touch of *this (the destructor waits for it)
}

Result<void> Socket::drain_queue_locked() noexcept {
  for (;;) {
    std::shared_ptr<const std::string> item;
    {
      std::lock_guard<SpinLock> q(q_mu_);
      if (queue_.empty()) return {};
      item = queue_.front();
    }
    auto r = stream_->write(item->data(), item->size());
    {
      std::lock_guard<SpinLock> q(q_mu_);
      if (!queue_.empty() && queue_.front() == item) {
        queue_.pop_front();
        queued_bytes_ -= item->size();
      }
    }
    if (!r) {
      on_send_failure(r.error());
      drop_queue();
      return r.error();
    }
  }
}

void Socket::drop_queue() noexcept {
  std::deque<std::shared_ptr<const std::string>> gone;
  {
    std::lock_guard<SpinLock> q(q_mu_);
    gone.swap(queue_);
    queued_bytes_ = 0;
  }
}  // the frames are freed here, outside the spin lock

size_t Socket::queued_bytes() const noexcept {
  std::lock_guard<SpinLock> q(q_mu_);
  return queued_bytes_;
}

BroadcastResult broadcast(std::span<Socket* const> sockets, const Message& m) {
  BroadcastResult res;
  std::shared_ptr<const std::string> shared;  // the servers' frame, built once
  for (Socket* s : sockets) {
    SendResult r;
    if (s->role() == Role::kClient) {
      r = s->try_send(m);
    } else if (!s->is_open()) {
      r = SendResult::kClosed;
    } else {
      if (!shared) {
        try {
          shared = frame_message(m.type, m.data, false);
        } catch (const std::bad_alloc&) {
          res.full += sockets.size() - (res.queued + res.full + res.closed);
          return res;
        }
      }
      r = s->enqueue(shared);
    }
    (r == SendResult::kQueued ? res.queued : r == SendResult::kFull ? res.full : res.closed)++;
  }
  return res;
}

Result<void> Socket::write_control_locked(Opcode op, std::string_view payload) noexcept {
  if (close_sent_.load(std::memory_order_relaxed) || broken_.load(std::memory_order_relaxed) ||
      done_.load(std::memory_order_acquire)) {
    return errno_error(ENOTCONN);
  }
  return write_frame(true, op, payload);
}

Result<void> Socket::send_control(Opcode op, std::string_view payload) {
  std::lock_guard<Mutex> g(send_mu_);
  return write_control_locked(op, payload);
}

Result<void> Socket::ping(std::string_view payload) {
  if (payload.size() > kMaxControlPayload) return errno_error(EINVAL);
  return send_control(Opcode::kPing, payload);
}

bool Socket::send_close_locked(uint16_t code, std::string_view reason) noexcept {
  if (close_sent_.load(std::memory_order_relaxed) || broken_.load(std::memory_order_relaxed) ||
      done_.load(std::memory_order_acquire)) {
    return false;
  }
  char payload[kMaxControlPayload];
  size_t n = 0;
  if (code != 0) {  // 0: an empty close frame (the answer to one without a code)
    payload[0] = static_cast<char>(code >> 8);
    payload[1] = static_cast<char>(code & 0xFF);
    // A reason cut at 123 bytes might end inside a character: cut it back to a boundary.
    size_t k = std::min(reason.size(), kMaxControlPayload - 2);
    while (k > 0 && !valid_utf8(reason.substr(0, k))) --k;
    if (k) std::memcpy(payload + 2, reason.data(), k);  // an empty view's data() may be null
    n = 2 + k;
  }
  (void)write_frame(true, Opcode::kClose, std::string_view(payload, n));
  close_sent_.store(true, std::memory_order_release);
  return true;
}

Result<void> Socket::close(uint16_t code, std::string_view reason) {
  if (!sendable_close_code(code) || reason.size() > kMaxControlPayload - 2 || !valid_utf8(reason)) {
    return errno_error(EINVAL);
  }
  {
    std::lock_guard<Mutex> g(send_mu_);
    if (!close_sent_.load(std::memory_order_relaxed)) (void)drain_queue_locked();  // queued messages first
    send_close_locked(code, reason);
  }
  if (done_.load(std::memory_order_acquire)) return {};
  if (read_mu_.try_lock()) {
    // Nobody is receiving: this fiber reads (dropping messages) until the peer's close frame.
    std::lock_guard<Mutex> g(read_mu_, std::adopt_lock);
    if (!done_.load(std::memory_order_acquire) && !reader_.finished()) {
      const TimePoint until = now() + options_.close_timeout;
      {
        std::lock_guard<Mutex> s(send_mu_);
        arm_close_deadline(until);
      }
      Message scratch;
      read_loop(scratch, /*discard_messages=*/true, until);
    }
    return {};
  }
  // A receiver is parked in a read: it will see the peer's answer and finish.
  if (!finished_.wait_for(options_.close_timeout)) {
    record_end(close_code::kAbnormal, "no close frame from the peer in time");
    done_.store(true, std::memory_order_release);
    stream_->close();  // the receiver wakes (ECANCELED) and returns
    finished_.set();
  }
  return {};
}

// ---- receiving ------------------------------------------------------------------------------

std::optional<Message> Socket::receive() {
  Message m;
  if (!receive(m)) return std::nullopt;
  return m;
}

bool Socket::receive(Message& out) {
  std::lock_guard<Mutex> g(read_mu_);
  if (done_.load(std::memory_order_acquire) || reader_.finished()) return false;
  if (inflate_broken_) {
    fail(close_code::kInternalError, "no memory for permessage-deflate");
    return false;
  }
  return read_loop(out, /*discard_messages=*/false, std::nullopt);
}

bool Socket::read_loop(Message& out, bool discard_messages, std::optional<TimePoint> until) {
  for (;;) {
    size_t used = 0;
    const detail::ReadEvent ev = reader_.next(in_.data(), in_.size(), &used, out);
    in_.consume(used);
    switch (ev.kind) {
      case detail::ReadEvent::kMessage:
        if (!discard_messages) return true;
        continue;
      case detail::ReadEvent::kPing: {
        // Automatic pong with the ping's payload (none once our close frame is out).
        std::lock_guard<Mutex> s(send_mu_);
        (void)write_control_locked(Opcode::kPong, ev.text);
        continue;
      }
      case detail::ReadEvent::kPong: awaiting_pong_ = false; continue;
      case detail::ReadEvent::kClose: on_peer_close(ev.code, ev.text); return false;
      case detail::ReadEvent::kFail: fail(ev.code, ev.text); return false;
      case detail::ReadEvent::kNeedMore: break;
    }
    if (until && now() >= *until) {
      record_end(close_code::kAbnormal, "no close frame from the peer in time");
      finish(/*drain=*/false, /*half_close=*/false);
      return false;
    }
    const Fill f = fill(out);
    if (f == Fill::kEnd) return false;
    if (f == Fill::kTick && !until && !on_tick()) return false;
  }
}

Socket::Fill Socket::fill(Message& msg) {
  size_t room = 0;
  char* direct = nullptr;
  if (in_.empty() && reader_.payload_left() >= kDirectMin) direct = reader_.direct_target(msg, &room);
  Result<size_t> r = direct ? stream_->read(direct, room) : in_.read_from(*stream_, kReadRoom);
  const bool input_ended = r ? *r == 0 : r.error() != std::errc::timed_out;
  if (input_ended && server_stopping_ && server_stopping_->load(std::memory_order_acquire)) {
    // The server's drain shut our read side (set_server_stopping): going away, said politely.
    {
      std::lock_guard<Mutex> g(send_mu_);
      send_close_locked(close_code::kGoingAway, "server shutting down");
    }
    record_end(close_code::kGoingAway, "server shutting down");
    finish(/*drain=*/true, /*half_close=*/true);
    return Fill::kEnd;
  }
  if (!r) {
    if (r.error() == std::errc::timed_out) return Fill::kTick;
    record_end(close_code::kAbnormal,
               r.error() == std::errc::operation_canceled ? "connection closed" : "connection lost");
    finish(/*drain=*/false, /*half_close=*/false);
    return Fill::kEnd;
  }
  if (*r == 0) {
    record_end(close_code::kAbnormal, "connection closed without a close frame");
    finish(/*drain=*/false, /*half_close=*/false);
    return Fill::kEnd;
  }
  if (direct) reader_.direct_commit(msg, *r);
  if (tick_) {
    last_rx_ = now();
    awaiting_pong_ = false;  // any byte shows the peer is alive
  }
  return Fill::kData;
}

bool Socket::on_tick() {
  const TimePoint t = now() + kSlack;
  if (options_.idle_timeout && t - last_rx_ >= *options_.idle_timeout) {
    fail(close_code::kGoingAway, "idle timeout");
    return false;
  }
  if (awaiting_pong_) {
    if (t < pong_deadline_) return true;
    fail(close_code::kInternalError, "keepalive ping timeout");
    return false;
  }
  if (options_.ping_interval && t - last_rx_ >= *options_.ping_interval) {
    {
      std::lock_guard<Mutex> s(send_mu_);
      (void)write_control_locked(Opcode::kPing, {});
    }
    awaiting_pong_ = true;
    pong_deadline_ = t + options_.ping_timeout;
  }
  return true;
}

void Socket::on_peer_close(uint16_t code, std::string_view reason) {
  record_end(code, reason);
  {
    std::lock_guard<Mutex> s(send_mu_);
    // Echo the code (RFC 6455 5.5.1); an empty close frame gets an empty one.
    send_close_locked(code == close_code::kNoStatus ? 0 : code, {});
    drop_queue();
    arm_close_deadline(now() + options_.close_timeout);
  }
  finish(/*drain=*/true, /*half_close=*/role_ == Role::kServer);
}

void Socket::fail(uint16_t code, std::string_view why) {
  LIONET_LOG_DEBUG(ws_log(), "failing the connection with {}: {}", code, why);
  record_end(code, why);
  {
    std::lock_guard<Mutex> s(send_mu_);
    send_close_locked(code, why);
    drop_queue();
    arm_close_deadline(now() + options_.close_timeout);
  }
  finish(/*drain=*/true, /*half_close=*/true);
}

void Socket::finish(bool drain, bool half_close) {
  if (drain && !broken_.load(std::memory_order_acquire)) {
    // Our close frame is out. Half-close (a server closes TCP first, RFC 6455 7.1.1; so does
    // whoever failed the connection), then read and drop what the peer still sends until it
    // closes too, within close_timeout (the reads' timeouts were armed by the caller) and
    // kLingerBytes: unread input at close() makes the kernel send a reset, which can destroy
    // our close frame before the peer has read it.
    if (half_close) (void)stream_->shutdown_write();
    char buf[2048];
    size_t dropped = 0;
    const TimePoint until = now() + options_.close_timeout;
    while (dropped < kLingerBytes && now() < until) {
      auto r = stream_->read(buf, sizeof buf);
      if (!r || *r == 0) break;
      dropped += *r;
    }
  }
  done_.store(true, std::memory_order_release);
  stream_->close();
  finished_.set();
}

void Socket::arm_close_deadline(TimePoint until) noexcept {
  Duration left = until - now();
  if (left < std::chrono::milliseconds(1)) left = std::chrono::milliseconds(1);
  stream_->set_timeouts(left, left);
}

void Socket::record_end(uint16_t code, std::string_view reason) noexcept {
  std::lock_guard<SpinLock> g(info_mu_);
  if (close_code_.load(std::memory_order_relaxed) != 0) return;
  try {
    close_reason_.assign(reason);
  } catch (...) {
  }
  close_code_.store(code, std::memory_order_release);  // publishes close_reason_
}

uint16_t Socket::close_code() const noexcept { return close_code_.load(std::memory_order_acquire); }

std::string_view Socket::close_reason() const noexcept {
  if (close_code_.load(std::memory_order_acquire) == 0) return {};
  return close_reason_;
}

bool Socket::is_open() const noexcept {
  return !close_sent_.load(std::memory_order_acquire) && !broken_.load(std::memory_order_acquire) &&
         !done_.load(std::memory_order_acquire) && close_code_.load(std::memory_order_acquire) == 0;
}
}  // namespace lionet::websocket
