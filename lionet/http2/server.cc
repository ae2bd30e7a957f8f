// lionet/http2/server.cc: the HTTP/2 server connection over libnghttp2 (see server.h): the
// session's set-up, the connection loop, the nghttp2 callbacks and each request's start.
// Bodies and flow control are server_body.cc; responding and the access log are
// server_respond.cc; the types the three share are detail/server_session.h.
//
// Locking: mu_ guards the nghttp2 session and every H2Stream field the session's callbacks
// touch. The connection fiber holds it while it feeds input (mem_recv) and writes output;
// a handler fiber holds it to submit its response, to take request body bytes and to queue
// writer bytes. flush() runs under mu_ and writes everything the session has to send, so
// output is written in the order the session produced it. Waits (body bytes, writer room)
// are on per-stream CondVars under mu_.
//
// Access log (ServerOptions::access_log): one line per stream that carried a request head, when
// the stream ends (on_stream_close, or end() for the streams a dying connection leaves): the
// status of the response submitted (or 499, nginx's "client closed request", for a stream
// reset before its response; 400 for one refused as malformed), the DATA payload bytes framed
// for it, and the time from its HEADERS frame. The fields the line reads are written under mu_
// (status_sent, body_sent) or before the handler starts (the head), never the handler's Response.
//
// Lifetime: an H2Stream is shared by the streams_ map (until nghttp2 closes the stream) and
// its handler fiber (until the handler's response is submitted and its writer is done). The
// session dies after every handler fiber has finished (handlers_ WaitGroup); before that,
// end() marks every stream reset and wakes its waiters, so no fiber waits on a dead peer.
#include "lionet/http2/server.h"

#include "lionet/http/handler_limits.h"
#include "lionet/sched/cancel.h"

#include <nghttp2/nghttp2.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <charconv>
#include <cstdio>
#include <cstring>
#include <memory>
#include <mutex>
#include <string>

#include "lionet/base/object_cache.h"
#include "lionet/base/strings.h"
#include "lionet/http/status.h"
#include "lionet/http2/detail/server_session.h"
#include "lionet/http2/detail/thread_stack.h"
#include "lionet/log/log.h"
#include "lionet/sched/scheduler.h"

namespace lionet::http2::detail {
namespace {

constexpr size_t kReadBuffer = 16 * 1024;  // while data flows

// A fiber body's reference to its stream, dropped by the body itself before it signals the
// session (a fiber body is called as const; its captures die only with the fiber).
struct StreamBox {
  mutable std::shared_ptr<H2Stream> st;
};
constexpr size_t kIdleReadBuffer = 512;  // until a read fills it (see Session::run)

std::atomic<uint64_t> g_connections{0};

}  // namespace

// ---- session set-up and the connection loop ---------------------------------------------

bool Session::setup() {
  const auto cbs = detail::new_callbacks();
  const auto opt = detail::new_option();
  if (!cbs || !opt) return false;
  nghttp2_session_callbacks* c = cbs.get();
  nghttp2_session_callbacks_set_on_begin_headers_callback(c, on_begin_headers);
  nghttp2_session_callbacks_set_on_header_callback(c, on_header);
  nghttp2_session_callbacks_set_on_frame_recv_callback(c, on_frame_recv);
  nghttp2_session_callbacks_set_on_data_chunk_recv_callback(c, on_data_chunk);
  nghttp2_session_callbacks_set_on_stream_close_callback(c, on_stream_close);
  nghttp2_session_callbacks_set_on_begin_frame_callback(c, on_begin_frame);
  nghttp2_session_callbacks_set_on_frame_send_callback(c, on_frame_send);
  nghttp2_session_callbacks_set_on_invalid_frame_recv_callback(c, on_invalid_frame);
  nghttp2_session_callbacks_set_send_data_callback(c, send_data);
  // Window updates are ours: given back as handlers read (back-pressure).
  nghttp2_option_set_no_auto_window_update(opt.get(), 1);
  nghttp2_option_set_max_outbound_ack(opt.get(), o_.max_outbound_ack);
  // nghttp2 would keep up to max_concurrent_streams closed streams per connection in its
  // stream map and priority tree, each stream's close then evicting the oldest: at h2load
  // -c 100 -m 10 that churned ~3 MiB and cost ~14 more L2 misses per request (callgrind, a
  // 2 MiB L2). Forgotten at once instead; recv() and on_begin_frame tell their frames apart.
  nghttp2_option_set_no_closed_streams(opt.get(), 1);
  const int rv = nghttp2_session_server_new3(&s_, c, this, opt.get(), mem_pool_.mem());
  if (rv != 0) return false;
  nghttp2_settings_entry iv[] = {
      {NGHTTP2_SETTINGS_MAX_CONCURRENT_STREAMS, o_.max_concurrent_streams},
      {NGHTTP2_SETTINGS_INITIAL_WINDOW_SIZE, o_.initial_window_size},
      {NGHTTP2_SETTINGS_MAX_FRAME_SIZE, std::clamp<uint32_t>(o_.max_frame_size, 16384, 16777215)},
      {NGHTTP2_SETTINGS_MAX_HEADER_LIST_SIZE, o_.max_header_list_size},
  };
  return nghttp2_submit_settings(s_, NGHTTP2_FLAG_NONE, iv, sizeof iv / sizeof iv[0]) == 0;
}

void Session::run() {
  conn_id_ = g_connections.fetch_add(1, std::memory_order_relaxed) + 1;
  if (o_.stats) o_.stats->connections.fetch_add(1, std::memory_order_relaxed);
  reset_tokens_ = o_.reset_burst;
  reset_refill_ = now();
  last_write_ = now();
  const Duration idle = c_.options.keepalive_timeout;
  const Duration write_limit = c_.options.write_timeout;
  // Reads wake at least every `tick` to check the idle and stall limits. Set before any
  // handler fiber exists: set_timeouts needs the stream to itself.
  const Duration tick = std::max<Duration>(std::min(idle, write_limit) / 4, std::chrono::milliseconds(10));
  c_.stream.set_timeouts(tick, write_limit);
  {
    std::unique_lock lk(mu_);
    if (!setup()) {
      LIONET_LOG_ERROR(h2_log(), "HTTP/2 session set-up failed");
      return;
    }
    ssize_t rv = 0;
    if (!c_.prefix.empty()) {
      rv = recv(reinterpret_cast<const uint8_t*>(c_.prefix.data()), c_.prefix.size());
    }
    if (rv < 0) fail(rv);  // a connection error in the first bytes
    else run_inline(lk);
    if (!flush()) end();
  }
  // Reads go into a small buffer until one fills it; then into kReadBuffer bytes of heap,
  // given back when the connection has had no stream for a read timeout. An idle
  // connection (the common case with browsers' pools) keeps no read buffer (and no
  // fields_memo_).
  uint8_t small[kIdleReadBuffer];
  std::unique_ptr<uint8_t[]> big;
  uint8_t* buf = small;
  size_t cap = kIdleReadBuffer;
  TimePoint last_read = now();
  for (;;) {
    {
      std::lock_guard lk(mu_);
      if (dead_) break;
      if (!goaway_sent_ && c_.stopping && c_.stopping->load(std::memory_order_acquire)) {
        // Graceful stop: no new streams; the open ones finish.
        goaway(nghttp2_session_get_last_proc_stream_id(s_));
        if (!flush()) break;
      }
      if (goaway_sent_ && streams_.empty()) break;
      if (!nghttp2_session_want_read(s_) && !nghttp2_session_want_write(s_)) break;
    }
    auto r = c_.stream.read(buf, cap);
    std::unique_lock lk(mu_);
    if (dead_) break;
    if (!r) {
      if (r.error().value() != ETIMEDOUT) break;
      TimePoint t = now();
      if (streams_.empty()) {
        if (big) {
          big.reset();
          buf = small;
          cap = kIdleReadBuffer;
        }
        fields_memo_.release();  // nor the last response's fields
        if (t - last_read < idle) continue;
        // Idle: a polite GOAWAY, then close.
        goaway(nghttp2_session_get_last_proc_stream_id(s_));
        flush();
        break;
      }
      // A response the peer's flow-control window holds at zero, with nothing written for
      // the write timeout: the peer keeps the stream open without reading (a held zero window).
      if (t - last_write_ >= write_limit) {
        bool stuck = nghttp2_session_get_remote_window_size(s_) <= 0;
        for (auto& st : streams_)
          stuck |= st->sending && nghttp2_session_get_stream_remote_window_size(s_, st->id) <= 0;
        if (stuck) {
          if (o_.stats) o_.stats->stalled.fetch_add(1, std::memory_order_relaxed);
          LIONET_LOG_DEBUG(h2_log(), "HTTP/2 connection {}: a response held at a zero window for {} ms: closing",
                           conn_id_, std::chrono::duration_cast<std::chrono::milliseconds>(t - last_write_).count());
          break;
        }
      }
      continue;
    }
    last_read = now();
    if (*r == 0) {
      // End of input: the peer closed its side, or the server is stopping (TcpServer shuts
      // the read side of every connection). Streams in flight still get their responses:
      // GOAWAY, then wait for them (bounded by the write timeout without progress).
      peer_eof_ = true;
      for (auto& st : streams_) st->cv.notify_all();  // body readers: nothing more comes
      if (running_ > 0) {
        if (!goaway_sent_) {
          goaway(nghttp2_session_get_last_proc_stream_id(s_));
          flush();
        }
        // Not past a cancel of this fiber (its waits would return at once): end() cancels them.
        while (running_ > 0 && !dead_ && now() - last_write_ < write_limit && this_fiber::interruption() == 0)
          drained_.wait_for(lk, tick);
      }
      break;
    }
    auto rv = recv(buf, *r);
    if (*r == cap && !big) {  // data is flowing
      big.reset(new uint8_t[kReadBuffer]);
      buf = big.get();
      cap = kReadBuffer;
    }
    if (rv < 0) {
      fail(rv);
      break;
    }
    run_inline(lk);  // the answers of this input's nonblocking handlers go out in the same write
    if (!flush()) break;
  }
  // Lingering close: input the peer sent after our last read (a PING after its GOAWAY, the
  // rest of a flood) would make close() send a reset, which can destroy our GOAWAY before the
  // peer reads it. Unless the peer is gone, end our side and discard input for a moment.
  bool linger = false;
  {
    std::lock_guard lk(mu_);
    linger = !write_failed_ && !peer_eof_;
    end();  // from here no fiber writes (flush() returns at once): the stream is ours alone
  }
  if (linger) http::lingering_close(c_.stream, buf, cap, write_limit, write_shut_);
  CancelShield shield;  // even in a cancelled connection fiber: handlers use the session
  handlers_.wait();  // no fiber uses the session past this point
}

bool Session::flush() {
  if (dead_) return false;
  bool wrote = false;
  int write_errno = 0;
  // DATA of memory and file bodies comes through send_data().
  detail::Sent sent = detail::send_all(s_, out_, c_.stream, &wrote, &write_errno);
  if (wrote) last_write_ = now();
  if (sent != detail::Sent::kAll) {
    dead_ = true;
    write_failed_ = sent == detail::Sent::kWriteError;
    return false;
  }
  if (goaway_sent_ && streams_.empty() && !write_shut_) {
    // Every stream the GOAWAY let finish is done: end our side now, so the client sees the
    // close at once (the connection fiber's read then ends too).
    write_shut_ = true;
    (void)c_.stream.shutdown_write();
  }
  return true;
}

// Streams are recycled here while HEADERS frames of theirs may still be queued in nghttp2 with
// fields it does not own (NO_COPY, submit()): safe because nothing is sent once dead_ is set, and
// nghttp2_session_del frees the queued frames without reading their fields.
void Session::end() {
  dead_ = true;
  inline_ready_.clear();
  for (auto& st : streams_) {
    nghttp2_session_set_stream_user_data(s_, st->id, nullptr);
    log_stream(*st);
    st->reset = true;
    cancel_handler(*st);
    st->cv.notify_all();
  }
  found_id_ = 0;
  found_ = nullptr;
  streams_.clear();
}

void Session::cancel_handler(H2Stream& st) {
  // Under mu_: the handler fiber clears handler_fiber under it before it can end, so the fiber
  // is alive here.
  if (!st.handler_fiber || !c_.options.cancel_on_disconnect) return;
  ::lionet::detail::cancel_fiber(std::exchange(st.handler_fiber, nullptr));
  http::handler_counters().cancelled.fetch_add(1, std::memory_order_relaxed);
}

// ---- nghttp2 callbacks (all run inside mem_recv / mem_send, mu_ held) ---------------------

int Session::on_begin_headers(nghttp2_session*, const nghttp2_frame* frame, void* user) {
  auto* self = static_cast<Session*>(user);
  if (frame->hd.type != NGHTTP2_HEADERS || frame->headers.cat != NGHTTP2_HCAT_REQUEST) return 0;
  if (self->goaway_sent_ && frame->hd.stream_id > self->goaway_last_) {
    // After our GOAWAY (even before it is on the wire): refused, the client retries elsewhere.
    nghttp2_submit_rst_stream(self->s_, NGHTTP2_FLAG_NONE, frame->hd.stream_id, NGHTTP2_REFUSED_STREAM);
    return 0;
  }
  auto st = self->new_stream();
  st->session = self;
  st->id = frame->hd.stream_id;
  if (self->alog_) st->started = now();
  st->slot = self->streams_.size();
  H2Stream* raw = st.get();
  self->streams_.push_back(std::move(st));  // owned before nghttp2 points at it
  if (nghttp2_session_set_stream_user_data(self->s_, raw->id, raw) != 0) {  // no such stream
    self->streams_.pop_back();
    return 0;
  }
  if (self->o_.stats) self->o_.stats->streams.fetch_add(1, std::memory_order_relaxed);
  if (++self->streams_opened_ == self->o_.max_requests && !self->goaway_sent_) {
    // The connection's last stream: GOAWAY names it, later ones are refused; the client
    // reconnects for more.
    self->goaway(frame->hd.stream_id);
  }
  return 0;
}

int Session::on_header(nghttp2_session*, const nghttp2_frame* frame, const uint8_t* name, size_t namelen,
                       const uint8_t* value, size_t valuelen, uint8_t, void* user) {
  auto* self = static_cast<Session*>(user);
  if (frame->hd.type != NGHTTP2_HEADERS) return 0;
  auto st = self->find(frame->hd.stream_id);
  if (!st) return 0;
  if (st->head_built) return 0;  // trailers (HEADERS after the body): not part of the request head
  // RFC 9113 6.5.2: the size of a field is its name, its value and 32 bytes.
  st->header_bytes += namelen + valuelen + 32;
  if (st->header_bytes > self->o_.max_header_list_size) {
    nghttp2_submit_rst_stream(self->s_, NGHTTP2_FLAG_NONE, st->id, NGHTTP2_ENHANCE_YOUR_CALM);
    return NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE;
  }
  const auto off = static_cast<uint32_t>(st->store.size());
  st->store.append(reinterpret_cast<const char*>(name), namelen).append(reinterpret_cast<const char*>(value), valuelen);
  if (namelen > 0 && name[0] == ':') {  // only pseudo-header names start with ":"
    const std::string_view n(reinterpret_cast<const char*>(name), namelen);
    const int index = static_cast<int>(st->fields.size());
    if (equals_literal(n, ":method")) st->method = index;
    else if (equals_literal(n, ":path")) st->path = index;
    else if (equals_literal(n, ":authority")) st->authority = index;
  }
  st->fields.push_back(
      {off, static_cast<uint32_t>(namelen), off + static_cast<uint32_t>(namelen), static_cast<uint32_t>(valuelen)});
  return 0;
}

int Session::on_frame_recv(nghttp2_session*, const nghttp2_frame* frame, void* user) {
  auto* self = static_cast<Session*>(user);
  switch (frame->hd.type) {
    case NGHTTP2_HEADERS: {
      H2Stream* st = self->find(frame->hd.stream_id);
      if (!st) return 0;
      if (frame->hd.flags & NGHTTP2_FLAG_END_STREAM) st->body_eof = true;
      if (frame->headers.cat == NGHTTP2_HCAT_REQUEST) {
        int refused = self->build_head(*st);
        if (refused == 400) {  // malformed request (RFC 9113 8.1.1): a stream error
          st->refused = 400;
          nghttp2_submit_rst_stream(self->s_, NGHTTP2_FLAG_NONE, st->id, NGHTTP2_PROTOCOL_ERROR);
          return 0;
        }
        if (refused != 0) {  // answered here, the handler never runs; its DATA is dropped
          st->handler_done = true;
          st->response.reset();
          st->response.reply(refused, http::error_text(refused, "Content-Length over the limit"));
          self->submit(*st);
          return 0;
        }
        self->start_handler(self->streams_[st->slot]);
      } else {
        st->cv.notify_all();  // trailers ended the body
      }
      return 0;
    }
    case NGHTTP2_DATA: {
      if (!(frame->hd.flags & NGHTTP2_FLAG_END_STREAM)) return 0;
      auto st = self->find(frame->hd.stream_id);
      if (!st) return 0;
      st->body_eof = true;
      st->cv.notify_all();
      return 0;
    }
    case NGHTTP2_RST_STREAM: {
      if (self->o_.stats) self->o_.stats->resets_by_peer.fetch_add(1, std::memory_order_relaxed);
      TimePoint t = now();
      double refill = std::chrono::duration<double>(t - self->reset_refill_).count() * self->o_.resets_per_second;
      self->reset_refill_ = t;
      self->reset_tokens_ = std::min<double>(self->o_.reset_burst, self->reset_tokens_ + refill);
      if (self->reset_tokens_ < 1) return self->terminate(NGHTTP2_ENHANCE_YOUR_CALM);  // rapid reset
      self->reset_tokens_ -= 1;
      return 0;
    }
    default: return 0;
  }
}

int Session::on_stream_close(nghttp2_session*, int32_t id, uint32_t, void* user) {
  auto* self = static_cast<Session*>(user);
  H2Stream* st = self->find(id);
  if (!st) return 0;
  self->log_stream(*st);
  st->reset = true;
  self->cancel_handler(*st);  // a RST_STREAM while its handler runs
  st->cv.notify_all();
  self->forget(*st);  // may drop the last reference
  return 0;
}

// Frames on streams nghttp2 has forgotten (it keeps no closed stream, see setup()), which it
// would ignore. RFC 9113 5.1.1: a HEADERS frame opening a stream with an id lower than one
// already used is a connection error (PROTOCOL_ERROR); 5.1: DATA on a stream the peer closed
// is one too (STREAM_CLOSED). Both are told from frames that crossed our own RST_STREAM (to
// be ignored) by the ids we reset (reset_sent_).
bool Session::closed_by_peer(int32_t id) {
  if (id <= 0 || (id & 1) == 0 || id > max_peer_stream_) return false;  // not a client stream seen
  if (goaway_sent_ && id > goaway_last_) return false;  // refused after our GOAWAY
  if (id == ignored_ || nghttp2_session_find_stream(s_, id) != nullptr) return false;  // open: nghttp2's to judge
  if (std::find(reset_sent_.begin(), reset_sent_.end(), id) == reset_sent_.end()) return true;
  ignored_ = id;
  return false;
}

void Session::remember_reset(int32_t id) {
  if (id <= 0 || id == ignored_) return;
  if (std::find(reset_sent_.begin(), reset_sent_.end(), id) != reset_sent_.end()) return;  // queued, now sent
  if (reset_sent_.size() >= reset_memory()) reset_sent_.erase(reset_sent_.begin());
  reset_sent_.push_back(id);
}

// nghttp2 queued an RST_STREAM for a frame it refused (a stream over the limit, which it
// never opens, or a malformed one): noted now, as DATA for it may follow in the same input.
int Session::on_invalid_frame(nghttp2_session*, const nghttp2_frame* frame, int, void* user) {
  static_cast<Session*>(user)->remember_reset(frame->hd.stream_id);
  return 0;
}

ssize_t Session::recv(const uint8_t* in, size_t n) {
  size_t fed = 0, i = 0;
  while (i < n) {
    if (scan_.skip > 0) {
      const size_t k = std::min(scan_.skip, n - i);
      scan_.skip -= k;
      i += k;
      continue;
    }
    const size_t start = i;  // where this input's part of the header begins
    const uint8_t* h = in + i;
    if (scan_.have == 0 && n - i >= 9) {
      i += 9;
    } else {  // a header split over two inputs
      const size_t k = std::min<size_t>(9 - scan_.have, n - i);
      std::memcpy(scan_.hd + scan_.have, in + i, k);
      scan_.have = static_cast<uint8_t>(scan_.have + k);
      i += k;
      if (scan_.have < 9) break;
      scan_.have = 0;
      h = scan_.hd;
    }
    scan_.skip = (size_t{h[0]} << 16) | (size_t{h[1]} << 8) | h[2];
    if (h[3] != NGHTTP2_DATA) continue;
    const auto id =
        static_cast<int32_t>(((uint32_t{h[5]} & 0x7f) << 24) | (uint32_t{h[6]} << 16) | (uint32_t{h[7]} << 8) | h[8]);
    if (start > fed) {  // the frames before it first
      const ssize_t rv = nghttp2_session_mem_recv(s_, in + fed, start - fed);
      if (rv < 0) return rv;
      fed = start;
    }
    // An empty DATA frame that does not end its stream carries nothing: a flood of them is
    // refused here, where DATA nghttp2 ignores (on a stream it reset) is counted too.
    if (scan_.skip == 0 && !(h[4] & NGHTTP2_FLAG_END_STREAM) && ++empty_frames_ > o_.max_empty_frames) {
      return terminate(NGHTTP2_ENHANCE_YOUR_CALM);
    }
    if (closed_by_peer(id)) {
      return terminate(NGHTTP2_STREAM_CLOSED);
    }
  }
  if (fed == n) return static_cast<ssize_t>(n);
  const ssize_t rv = nghttp2_session_mem_recv(s_, in + fed, n - fed);
  return rv < 0 ? rv : static_cast<ssize_t>(n);
}

int Session::on_begin_frame(nghttp2_session*, const nghttp2_frame_hd* hd, void* user) {
  auto* self = static_cast<Session*>(user);
  const uint64_t block_cap = 2ull * self->o_.max_header_list_size;
  switch (hd->type) {
    case NGHTTP2_CONTINUATION:
      self->block_bytes_ += hd->length;
      if (++self->continuations_ > self->o_.max_continuations || self->block_bytes_ > block_cap) {
        return self->terminate(NGHTTP2_ENHANCE_YOUR_CALM);  // CONTINUATION flood
      }
      return 0;
    case NGHTTP2_DATA: return 0;  // the empty-frame flood and forgotten streams: see recv()
    case NGHTTP2_HEADERS:
      self->continuations_ = 0;
      self->block_bytes_ = hd->length;
      if (self->block_bytes_ > block_cap) return self->terminate(NGHTTP2_ENHANCE_YOUR_CALM);
      break;
    default: return 0;
  }
  if (hd->stream_id <= 0 || (hd->stream_id & 1) == 0) return 0;
  if (hd->stream_id > self->max_peer_stream_) {
    self->max_peer_stream_ = hd->stream_id;
    return 0;
  }
  return self->closed_by_peer(hd->stream_id) ? self->terminate(NGHTTP2_PROTOCOL_ERROR) : 0;
}

int Session::terminate(uint32_t code) {
  nghttp2_session_terminate_session(s_, code);
  terminated_ = true;
  return NGHTTP2_ERR_CALLBACK_FAILURE;  // mem_recv stops; run() sends the GOAWAY and ends
}

void Session::fail(ssize_t rv) {
  // mem_recv failed: a GOAWAY is queued by nghttp2 for protocol errors, by terminate() for our
  // limits; nghttp2's own flood checks queue none, so one is added with the matching code.
  LIONET_LOG_DEBUG(h2_log(), "HTTP/2 connection {}: {}", conn_id_, nghttp2_strerror(static_cast<int>(rv)));
  if (!terminated_) {
    uint32_t code = rv == NGHTTP2_ERR_FLOODED || rv == NGHTTP2_ERR_TOO_MANY_CONTINUATIONS ? NGHTTP2_ENHANCE_YOUR_CALM
                                                                                          : NGHTTP2_PROTOCOL_ERROR;
    nghttp2_session_terminate_session(s_, code);
    terminated_ = true;
  }
  flush();
  dead_ = true;
}

int Session::on_frame_send(nghttp2_session*, const nghttp2_frame* frame, void* user) {
  auto* self = static_cast<Session*>(user);
  if (frame->hd.type == NGHTTP2_GOAWAY && self->o_.stats) {
    Stats& st = *self->o_.stats;
    switch (frame->goaway.error_code) {
      case NGHTTP2_NO_ERROR: st.goaway_no_error.fetch_add(1, std::memory_order_relaxed); break;
      case NGHTTP2_PROTOCOL_ERROR: st.goaway_protocol_error.fetch_add(1, std::memory_order_relaxed); break;
      case NGHTTP2_ENHANCE_YOUR_CALM: st.goaway_enhance_your_calm.fetch_add(1, std::memory_order_relaxed); break;
      default: st.goaway_other.fetch_add(1, std::memory_order_relaxed); break;
    }
  }
  if (frame->hd.type == NGHTTP2_DATA && self->alog_) {
    if (auto st = self->find(frame->hd.stream_id)) st->body_sent += frame->hd.length - frame->data.padlen;
  }
  if (frame->hd.type == NGHTTP2_RST_STREAM) self->remember_reset(frame->hd.stream_id);
  return 0;
}

// ---- requests -----------------------------------------------------------------------------

int Session::build_head(H2Stream& st) {
  if (st.method < 0 || st.path < 0) return 400;  // CONNECT without :path is not served
  http::RequestHead& h = st.head;
  st.head_built = true;
  h.method = st.field_value(st.fields[static_cast<size_t>(st.method)]);
  h.target = st.field_value(st.fields[static_cast<size_t>(st.path)]);
  size_t q = h.target.find('?');
  h.path = h.target.substr(0, q);
  h.query = q == std::string_view::npos ? std::string_view() : h.target.substr(q + 1);
  h.version_minor = 1;
  h.keep_alive = true;
  h.headers.reserve(st.fields.size());
  std::string_view content_length;
  for (const auto& f : st.fields) {
    std::string_view n = st.field_name(f);
    if (n.starts_with(':')) continue;
    std::string_view v = st.field_value(f);
    h.headers.add(n, v);
    if (n == "host" && h.host.empty()) h.host = v;
    if (n == "content-length") content_length = v;
  }
  if (st.authority >= 0) h.host = st.field_value(st.fields[static_cast<size_t>(st.authority)]);
  if (st.body_eof) {
    h.body_kind = http::BodyKind::kNone;
  } else if (!content_length.empty()) {
    uint64_t v = 0;
    const char* end = content_length.data() + content_length.size();
    if (auto [p, ec] = std::from_chars(content_length.data(), end, v); ec != std::errc() || p != end) return 400;
    h.body_kind = http::BodyKind::kContentLength;
    h.content_length = v;
    if (v > c_.options.limits.max_body_bytes) return 413;
  } else {
    h.body_kind = http::BodyKind::kChunked;  // length unknown: DATA frames until END_STREAM
  }
  return 0;
}

namespace {
// Streams done with, for reuse by any connection on this worker, last released first taken: the
// next stream gets an object still in cache, whichever connection it is for (a pool per
// connection left 100 connections' streams cold in turn). The last reference to a stream may
// drop on any worker; the stream joins that worker's cache.
using StreamCache = detail::ThreadStack<H2Stream, 256>;

// A stream's shared_ptr control block (one per request) from this thread's free list instead of
// malloc; ObjectCache bypasses the list in sanitizer builds.
template <class T>
struct ControlBlockAlloc {
  using value_type = T;
  using Cache = base::ObjectCache<64, 256>;
  ControlBlockAlloc() = default;
  template <class U>
  ControlBlockAlloc(const ControlBlockAlloc<U>&) noexcept {}
  T* allocate(size_t n) { return static_cast<T*>(Cache::allocate(n * sizeof(T))); }
  void deallocate(T* p, size_t) noexcept { Cache::deallocate(p); }
  template <class U>
  bool operator==(const ControlBlockAlloc<U>&) const noexcept {
    return true;
  }
};
}  // namespace

std::shared_ptr<H2Stream> Session::new_stream() {
  std::unique_ptr<H2Stream> st = StreamCache::take();
  if (!st) st.reset(new H2Stream);
  // If no control block can be had, the constructor releases the stream, then throws.
  return std::shared_ptr<H2Stream>(
      st.release(), [](H2Stream* p) { release(p); }, ControlBlockAlloc<H2Stream>());
}

void Session::release(H2Stream* st) noexcept {
  st->recycle();
  StreamCache::give(std::unique_ptr<H2Stream>(st));
}

void Session::start_handler(const std::shared_ptr<H2Stream>& st) {
  H2Stream& s = *st;
  s.request.reset(&s.head, &s);
  s.request.set_connection_info(c_.info);
  s.response.reset();
  if (s.body_eof && c_.options.runs_inline && c_.options.runs_inline(s.request)) {
    inline_ready_.push_back(st);  // no body to wait for, a handler that never waits
    return;
  }
  // The fiber dump names the stream: "h2 <connection>/<stream id>".
  char name[48] = "h2 ";
  char* p = std::to_chars(name + 3, name + 24, conn_id_).ptr;
  *p++ = '/';
  p = std::to_chars(p, name + sizeof name, st->id).ptr;
  // No stack for a fiber: the stream is refused, the connection kept.
  spawn_for(st, std::string_view(name, static_cast<size_t>(p - name)), NGHTTP2_REFUSED_STREAM,
            [this](const std::shared_ptr<H2Stream>& sp) {
              H2Stream& s = *sp;
              {
                std::lock_guard lk(mu_);
                if (!s.reset) s.handler_fiber = current_fiber();
              }
              call_handler(s);
              {
                std::lock_guard lk(mu_);
                s.handler_fiber = nullptr;
              }
              if (c_.stats) c_.stats->requests.fetch_add(1, std::memory_order_relaxed);
              respond(sp);
            });
}

template <class Work>
void Session::spawn_for(const std::shared_ptr<H2Stream>& st, std::string_view name, uint32_t refuse_code, Work work) {
  handlers_.add(1);
  ++running_;
  auto body = [this, box = StreamBox{st}, work = std::move(work)]() {
    work(box.st);
    {
      std::lock_guard lk(mu_);
      --running_;
      drained_.notify_all();
    }
    box.st.reset();  // before done(): past it the session (its stream pool) may be gone
    handlers_.done();
  };
  try {
    Scheduler::current()->spawn(std::move(body), {.name = name}).detach();
  } catch (const std::exception& e) {
    --running_;
    handlers_.done();
    nghttp2_submit_rst_stream(s_, NGHTTP2_FLAG_NONE, st->id, refuse_code);
  }
}

void Session::call_handler(H2Stream& s) {
  try {
    (void)http::run_bounded(c_.handler, s.request, s.response, c_.options.handler_timeout);
  } catch (const std::exception& e) {
    LIONET_LOG_ERROR(h2_log(), "handler threw on stream {}: {}", s.id, e.what());
    s.response.reset();
    s.response.reply(500, "internal server error\n");
  } catch (...) {
    s.response.reset();
    s.response.reply(500, "internal server error\n");
  }
}

void Session::run_inline(std::unique_lock<Mutex>& lk) {
  while (!inline_ready_.empty() && !dead_) {
    inline_batch_.swap(inline_ready_);
    // Unlocked while they run: a handler may still read its (empty) body or use the session.
    lk.unlock();
    for (const auto& st : inline_batch_) call_handler(*st);
    lk.lock();
    for (const auto& st : inline_batch_) {
      if (c_.stats) c_.stats->requests.fetch_add(1, std::memory_order_relaxed);
      if (submit_answer(*st) && st->src == H2Stream::Src::kWriter) spawn_writer(st);
    }
    inline_batch_.clear();
  }
  inline_ready_.clear();
}

void Session::spawn_writer(const std::shared_ptr<H2Stream>& st) {
  spawn_for(st, "h2 body writer", NGHTTP2_INTERNAL_ERROR, [this](const std::shared_ptr<H2Stream>& sp) {
    std::unique_lock lk(mu_);
    if (!dead_ && !sp->reset) write_body(sp, lk);
  });
}

}  // namespace lionet::http2::detail

namespace lionet::http2 {

void serve_connection(const http::ProtocolHandoff& conn, const Options& h2) {
  detail::Session session(conn, h2);
  session.run();
}

void enable(http::ServerOptions& options, Options h2) {
  options.http2 = [h2](const http::ProtocolHandoff& conn) { serve_connection(conn, h2); };
}

}  // namespace lionet::http2
