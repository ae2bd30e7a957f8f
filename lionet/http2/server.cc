// lionet/http2/server.cc: the HTTP/2 server connection over libnghttp2 (see server.h).
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

#include <nghttp2/nghttp2.h>
#include <unistd.h>

#include <algorithm>
#include <charconv>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "lionet/http/access_log.h"
#include "lionet/http/date.h"
#include "lionet/http/field_block.h"
#include "lionet/http/headers.h"
#include "lionet/http2/detail/output.h"
#include "lionet/http2/detail/sink_stream.h"
#include "lionet/log/log.h"
#include "lionet/sched/scheduler.h"
#include "lionet/sync/cond_var.h"
#include "lionet/sync/mutex.h"
#include "lionet/sync/wait_group.h"

namespace lionet::http2 {
namespace {

const std::shared_ptr<spdlog::logger>& h2_log() {
  static const auto lg = log::get("http2");
  return lg;
}

constexpr size_t kReadBuffer = 16 * 1024;  // while data flows
constexpr size_t kIdleReadBuffer = 512;    // until a read fills it (see Session::run)
constexpr std::string_view kBodyOverLimit = "request body over the limit\n";  // the 413's body

class Session;
void header_fields(std::string_view block, std::vector<std::string>& names, std::vector<nghttp2_nv>& nva);

// One request/response exchange.
struct H2Stream final : http::detail::BodySource {
  Session* session = nullptr;
  int32_t id = 0;

  // Request head: names and values copied into `store`, then viewed by `head`.
  std::string store;
  struct Field {
    uint32_t name_off, name_len, value_off, value_len;
  };
  std::vector<Field> fields;
  int method = -1, path = -1, authority = -1;  // indices into fields (pseudo-headers)
  size_t header_bytes = 0;
  bool head_built = false;  // head's views point into store: nothing is appended after
  http::RequestHead head;
  http::Request request;
  http::Response response;

  // Request body (guarded by Session::mu_).
  std::string body;
  size_t body_read = 0;
  bool body_eof = false;
  bool reset = false;         // closed by the peer or the connection: no more IO
  bool handler_done = false;  // the handler returned: DATA is consumed and dropped
  uint64_t body_total = 0;    // DATA bytes received
  bool body_too_large = false;  // over max_body_bytes: the rest is dropped, reads fail EMSGSIZE
  CondVar cv;                 // body bytes, writer room, reset

  // Response body source, read by the session (data provider).
  enum class Src : uint8_t { kNone, kMemory, kFile, kWriter } src = Src::kNone;
  std::string_view memory;
  int fd = -1;
  off_t file_offset = 0;
  uint64_t file_left = 0;
  std::string pipe;  // writer bytes not yet framed
  size_t pipe_read = 0;
  bool pipe_eof = false;
  bool deferred = false;  // the session was told NGHTTP2_ERR_DEFERRED
  bool sending = false;   // a response body is submitted and its end not yet framed

  // Access log (guarded by Session::mu_).
  TimePoint started{};     // the request's HEADERS frame began
  uint64_t body_sent = 0;  // DATA payload bytes framed
  int status_sent = 0;     // the status of the response submitted (0: none)
  int refused = 0;         // 400: refused as malformed, the handler never ran
  bool logged = false;
  std::vector<std::string> resp_names;  // lowercased header names for the nv array

  std::string_view field_name(const Field& f) const { return {store.data() + f.name_off, f.name_len}; }
  std::string_view field_value(const Field& f) const { return {store.data() + f.value_off, f.value_len}; }

  Result<size_t> read_body(void* buf, size_t n) override;
  bool body_complete() const noexcept override { return body_eof && body_read == body.size(); }
};

// A Stream the response body writer writes into (http::BodyWriter needs one).
class WriterPipe final : public detail::SinkStream {
 public:
  explicit WriterPipe(std::shared_ptr<H2Stream> st) : st_(std::move(st)) {}
  using SinkStream::write;
  Result<size_t> write(const void* buf, size_t n) override;

 private:
  std::shared_ptr<H2Stream> st_;
};

class Session {
 public:
  Session(const http::ProtocolHandoff& c, const Options& o) : c_(c), o_(o) {}
  ~Session() {
    if (s_) nghttp2_session_del(s_);
  }

  void run();

  // For handler fibers and pipes (each takes mu_ itself).
  void respond(const std::shared_ptr<H2Stream>& st);
  Result<size_t> read_body(H2Stream& st, void* buf, size_t n);
  Result<size_t> write_pipe(H2Stream& st, const void* buf, size_t n);

 private:
  bool setup();
  // The stream's access log line, once (mu_ held; see the top of the file).
  void log_stream(H2Stream& st);
  // Writes what the session has to send (mu_ held). False once the connection is dead.
  bool flush();
  void end();  // mu_ held: every stream reset, waiters woken
  void start_handler(const std::shared_ptr<H2Stream>& st);
  // 0, or the status that refuses the request (400 malformed, 413 body over the limit).
  int build_head(H2Stream& st);
  void submit(H2Stream& st);

  static int on_begin_headers(nghttp2_session*, const nghttp2_frame* frame, void* user);
  static int on_header(nghttp2_session*, const nghttp2_frame* frame, const uint8_t* name, size_t namelen,
                       const uint8_t* value, size_t valuelen, uint8_t flags, void* user);
  static int on_frame_recv(nghttp2_session*, const nghttp2_frame* frame, void* user);
  static int on_data_chunk(nghttp2_session*, uint8_t flags, int32_t id, const uint8_t* data, size_t len, void* user);
  static int on_stream_close(nghttp2_session*, int32_t id, uint32_t error_code, void* user);
  static int on_begin_frame(nghttp2_session*, const nghttp2_frame_hd* hd, void* user);
  static int on_frame_send(nghttp2_session*, const nghttp2_frame* frame, void* user);
  static ssize_t read_source(nghttp2_session*, int32_t id, uint8_t* buf, size_t length, uint32_t* flags,
                             nghttp2_data_source* source, void* user);
  static ssize_t read_body_source(H2Stream* st, uint8_t* buf, size_t length, uint32_t* flags);
  static int send_data(nghttp2_session*, nghttp2_frame* frame, const uint8_t* framehd, size_t length,
                       nghttp2_data_source* source, void* user);

  std::shared_ptr<H2Stream> find(int32_t id) {
    auto it = streams_.find(id);
    return it == streams_.end() ? nullptr : it->second;
  }

  const http::ProtocolHandoff& c_;
  const Options& o_;
  nghttp2_session* s_ = nullptr;
  Mutex mu_;
  bool dead_ = false;  // the stream failed or ended: nothing more is written
  std::unordered_map<int32_t, std::shared_ptr<H2Stream>> streams_;
  WaitGroup handlers_;
  detail::OutBuf out_;  // output gathered by flush()
  int32_t max_peer_stream_ = 0;     // highest stream id a client HEADERS frame has used
  std::vector<int32_t> reset_sent_;  // the last streams we reset (their trailers may still come)
  // Limits (see Options).
  int terminate(uint32_t code);      // GOAWAY code, then the connection ends
  // Writer bytes (or their end) for a stream the session was told to defer: frame them again.
  void resume(H2Stream& st) {
    if (!st.deferred) return;
    st.deferred = false;
    nghttp2_session_resume_data(s_, st.id);
  }
  // GOAWAY NO_ERROR naming `last`: streams above it are refused, the open ones finish.
  void goaway(int32_t last) {
    goaway_last_ = last;
    nghttp2_submit_goaway(s_, NGHTTP2_FLAG_NONE, last, NGHTTP2_NO_ERROR, nullptr, 0);
    goaway_sent_ = true;
  }
  void fail(ssize_t rv);             // mem_recv failed: GOAWAY (if none is queued), then end
  bool terminated_ = false;
  bool write_shut_ = false;
  bool write_failed_ = false;  // a write to the peer failed: no lingering close
  bool peer_eof_ = false;  // no more input will come
  CondVar drained_;        // a handler finished (run() waits for the last ones at end of input)
  int running_ = 0;        // handler fibers that have not yet submitted their response
  uint64_t streams_opened_ = 0;
  bool goaway_sent_ = false;
  int32_t goaway_last_ = INT32_MAX;  // streams above it are refused once goaway_sent_
  double reset_tokens_ = 0;
  TimePoint reset_refill_{};
  uint32_t continuations_ = 0;       // CONTINUATION frames of the header block being received
  uint64_t block_bytes_ = 0;         // its size as sent
  uint32_t empty_frames_ = 0;
  TimePoint last_write_{};           // the last time flush() wrote bytes
  uint64_t conn_id_ = 0;             // for fiber names
  http::AccessLog* const alog_ = c_.options.access_log.get();  // null: no access log
  http::RemoteAddr peer_;            // the client, for the access log (looked up once)
  bool peer_known_ = false;
};

std::atomic<uint64_t> g_connections{0};

// ---- session set-up and the connection loop ---------------------------------------------

bool Session::setup() {
  nghttp2_session_callbacks* cbs = nullptr;
  if (nghttp2_session_callbacks_new(&cbs) != 0) return false;
  nghttp2_session_callbacks_set_on_begin_headers_callback(cbs, on_begin_headers);
  nghttp2_session_callbacks_set_on_header_callback(cbs, on_header);
  nghttp2_session_callbacks_set_on_frame_recv_callback(cbs, on_frame_recv);
  nghttp2_session_callbacks_set_on_data_chunk_recv_callback(cbs, on_data_chunk);
  nghttp2_session_callbacks_set_on_stream_close_callback(cbs, on_stream_close);
  nghttp2_session_callbacks_set_on_begin_frame_callback(cbs, on_begin_frame);
  nghttp2_session_callbacks_set_on_frame_send_callback(cbs, on_frame_send);
  nghttp2_session_callbacks_set_send_data_callback(cbs, send_data);
  nghttp2_option* opt = nullptr;
  if (nghttp2_option_new(&opt) != 0) {
    nghttp2_session_callbacks_del(cbs);
    return false;
  }
  // Window updates are ours: given back as handlers read (back-pressure).
  nghttp2_option_set_no_auto_window_update(opt, 1);
  nghttp2_option_set_max_outbound_ack(opt, o_.max_outbound_ack);
  int rv = nghttp2_session_server_new2(&s_, cbs, this, opt);
  nghttp2_option_del(opt);
  nghttp2_session_callbacks_del(cbs);
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
    std::lock_guard lk(mu_);
    if (!setup()) {
      LIONET_LOG_ERROR(h2_log(), "HTTP/2 session set-up failed");
      return;
    }
    ssize_t rv = 0;
    if (!c_.prefix.empty()) {
      rv = nghttp2_session_mem_recv(s_, reinterpret_cast<const uint8_t*>(c_.prefix.data()), c_.prefix.size());
    }
    if (rv < 0) fail(rv);  // a connection error in the first bytes
    if (!flush()) end();
  }
  // Reads go into a small buffer until one fills it; then into kReadBuffer bytes of heap,
  // given back when the connection has had no stream for a read timeout. An idle
  // connection (the common case with browsers' pools) keeps no read buffer.
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
        for (auto& [id, st] : streams_)
          stuck |= st->sending && nghttp2_session_get_stream_remote_window_size(s_, id) <= 0;
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
      for (auto& [id, st] : streams_) st->cv.notify_all();  // body readers: nothing more comes
      if (running_ > 0) {
        if (!goaway_sent_) {
          goaway(nghttp2_session_get_last_proc_stream_id(s_));
          flush();
        }
        while (running_ > 0 && !dead_ && now() - last_write_ < write_limit) drained_.wait_for(lk, tick);
      }
      break;
    }
    auto rv = nghttp2_session_mem_recv(s_, buf, *r);
    if (*r == cap && !big) {  // data is flowing
      big.reset(new uint8_t[kReadBuffer]);
      buf = big.get();
      cap = kReadBuffer;
    }
    if (rv < 0) {
      fail(rv);
      break;
    }
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

void Session::end() {
  dead_ = true;
  for (auto& [id, st] : streams_) {
    log_stream(*st);
    st->reset = true;
    st->cv.notify_all();
  }
  streams_.clear();
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
  auto st = std::make_shared<H2Stream>();
  st->session = self;
  st->id = frame->hd.stream_id;
  if (self->alog_) st->started = now();
  self->streams_[st->id] = std::move(st);
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
  H2Stream::Field f{static_cast<uint32_t>(st->store.size()), static_cast<uint32_t>(namelen), 0,
                    static_cast<uint32_t>(valuelen)};
  st->store.append(reinterpret_cast<const char*>(name), namelen);
  f.value_off = static_cast<uint32_t>(st->store.size());
  st->store.append(reinterpret_cast<const char*>(value), valuelen);
  std::string_view n(reinterpret_cast<const char*>(name), namelen);
  int index = static_cast<int>(st->fields.size());
  if (n == ":method") st->method = index;
  else if (n == ":path") st->path = index;
  else if (n == ":authority") st->authority = index;
  st->fields.push_back(f);
  return 0;
}

int Session::on_frame_recv(nghttp2_session*, const nghttp2_frame* frame, void* user) {
  auto* self = static_cast<Session*>(user);
  switch (frame->hd.type) {
    case NGHTTP2_HEADERS: {
      auto st = self->find(frame->hd.stream_id);
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
          st->response.reply(refused, kBodyOverLimit);
          self->submit(*st);
          return 0;
        }
        self->start_handler(st);
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
    default:
      return 0;
  }
}

int Session::on_data_chunk(nghttp2_session*, uint8_t, int32_t id, const uint8_t* data, size_t len, void* user) {
  auto* self = static_cast<Session*>(user);
  auto st = self->find(id);
  if (st && !st->handler_done) {
    st->body_total += len;
    if (st->body_total > self->c_.options.limits.max_body_bytes && !st->body_too_large) {
      st->body_too_large = true;  // the handler's next read fails with EMSGSIZE
      st->cv.notify_all();
    }
  }
  if (!st || st->handler_done || st->body_too_large) {
    // Nobody will read it: give the window back at once.
    if (st) nghttp2_session_consume(self->s_, id, len);
    else nghttp2_session_consume_connection(self->s_, len);
    return 0;
  }
  st->body.append(reinterpret_cast<const char*>(data), len);
  st->cv.notify_all();
  return 0;
}

int Session::on_stream_close(nghttp2_session*, int32_t id, uint32_t, void* user) {
  auto* self = static_cast<Session*>(user);
  auto it = self->streams_.find(id);
  if (it == self->streams_.end()) return 0;
  self->log_stream(*it->second);
  it->second->reset = true;
  it->second->cv.notify_all();
  self->streams_.erase(it);
  return 0;
}

// RFC 9113 5.1.1: a HEADERS frame opening a stream with an id lower than one already used
// is a connection error. nghttp2 cannot tell such a frame from trailers sent to a stream it
// has already forgotten, and ignores it; we can: an id below the highest seen that is neither
// an open stream nor one we reset ourselves (whose trailers may cross our RST_STREAM).
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
    case NGHTTP2_DATA:
      if (hd->length == 0 && !(hd->flags & NGHTTP2_FLAG_END_STREAM) && ++self->empty_frames_ > self->o_.max_empty_frames) {
        return self->terminate(NGHTTP2_ENHANCE_YOUR_CALM);  // empty-frame flood
      }
      return 0;
    case NGHTTP2_HEADERS:
      self->continuations_ = 0;
      self->block_bytes_ = hd->length;
      if (self->block_bytes_ > block_cap) return self->terminate(NGHTTP2_ENHANCE_YOUR_CALM);
      break;
    default:
      return 0;
  }
  if (hd->stream_id <= 0 || (hd->stream_id & 1) == 0) return 0;
  if (hd->stream_id > self->max_peer_stream_) {
    self->max_peer_stream_ = hd->stream_id;
    return 0;
  }
  if (nghttp2_session_find_stream(self->s_, hd->stream_id) != nullptr) return 0;  // trailers
  if (std::find(self->reset_sent_.begin(), self->reset_sent_.end(), hd->stream_id) != self->reset_sent_.end()) {
    return 0;
  }
  return self->terminate(NGHTTP2_PROTOCOL_ERROR);
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
  if (frame->hd.type == NGHTTP2_RST_STREAM) {
    if (self->reset_sent_.size() >= 64) self->reset_sent_.erase(self->reset_sent_.begin());
    self->reset_sent_.push_back(frame->hd.stream_id);
  }
  return 0;
}

ssize_t Session::read_source(nghttp2_session* session, int32_t id, uint8_t* buf, size_t length, uint32_t* flags,
                             nghttp2_data_source* source, void*) {
  auto* st = static_cast<H2Stream*>(source->ptr);
  ssize_t n = read_body_source(st, buf, length, flags);
  if (*flags & NGHTTP2_DATA_FLAG_EOF) {
    st->sending = false;
    const std::string& trailers = st->response.trailer_block();
    if (!trailers.empty()) {
      // The stream ends with a HEADERS frame of trailers instead of END_STREAM on this DATA.
      std::vector<std::string> names;
      std::vector<nghttp2_nv> nva;
      header_fields(trailers, names, nva);
      if (nghttp2_submit_trailer(session, id, nva.data(), nva.size()) == 0) *flags |= NGHTTP2_DATA_FLAG_NO_END_STREAM;
    }
  }
  return n;
}

ssize_t Session::read_body_source(H2Stream* st, uint8_t* buf, size_t length, uint32_t* flags) {
  switch (st->src) {
    case H2Stream::Src::kMemory: {
      // NO_COPY: send_data() puts the bytes straight into the output (no copy into nghttp2).
      size_t n = std::min(length, st->memory.size());
      if (n > 0) *flags |= NGHTTP2_DATA_FLAG_NO_COPY;
      if (n == st->memory.size()) *flags |= NGHTTP2_DATA_FLAG_EOF;
      return static_cast<ssize_t>(n);
    }
    case H2Stream::Src::kFile: {
      size_t n = static_cast<size_t>(std::min<uint64_t>(length, st->file_left));
      if (n > 0) *flags |= NGHTTP2_DATA_FLAG_NO_COPY;
      if (n == st->file_left) *flags |= NGHTTP2_DATA_FLAG_EOF;
      return static_cast<ssize_t>(n);
    }
    case H2Stream::Src::kWriter: {
      size_t avail = st->pipe.size() - st->pipe_read;
      if (avail == 0) {
        if (st->pipe_eof) {
          *flags |= NGHTTP2_DATA_FLAG_EOF;
          return 0;
        }
        st->deferred = true;
        return NGHTTP2_ERR_DEFERRED;
      }
      size_t n = std::min(length, avail);
      std::memcpy(buf, st->pipe.data() + st->pipe_read, n);
      st->pipe_read += n;
      if (st->pipe_read == st->pipe.size()) {
        st->pipe.clear();
        st->pipe_read = 0;
        if (st->pipe_eof) *flags |= NGHTTP2_DATA_FLAG_EOF;
      }
      st->cv.notify_all();  // room for the writer
      return static_cast<ssize_t>(n);
    }
    case H2Stream::Src::kNone:
      break;
  }
  *flags |= NGHTTP2_DATA_FLAG_EOF;
  return 0;
}

// A DATA frame of a memory or file body (NGHTTP2_DATA_FLAG_NO_COPY), called inside
// mem_send: its header, then its payload, appended in order to what flush() has gathered.
// Memory is copied once, into the output; a file's payload is pread straight into the output
// (no copy through nghttp2's frame buffer). Decision, measured (h2load -c 16, 1 MiB file, one
// worker): pread into the output 1929 req/s h2 / 4257 h2c; the old copy through nghttp2 1747 /
// 3829; sendfile per DATA frame (header written, then sendfile of the payload: two system
// calls per 16 KiB frame) 1356 / 1669, and no better when the client allows 1 MiB frames
// (nghttp2 caps DATA at 16 KiB unless the session's frame buffer grows to the frame's size).
int Session::send_data(nghttp2_session*, nghttp2_frame* frame, const uint8_t* framehd, size_t length,
                       nghttp2_data_source* source, void* user) {
  auto* self = static_cast<Session*>(user);
  auto* st = static_cast<H2Stream*>(source->ptr);
  detail::OutBuf& out = self->out_;
  const size_t frame_start = out.size();
  out.append(framehd, 9);
  size_t padlen = frame->data.padlen;  // 0: we never ask for padding
  if (padlen > 0) *out.grow(1) = static_cast<char>(padlen - 1);
  if (st->src == H2Stream::Src::kMemory) {
    out.append(st->memory.data(), length);
    st->memory.remove_prefix(length);
  } else {
    char* at = out.grow(length);
    size_t done = 0;
    while (done < length) {
      ssize_t n = ::pread(st->fd, at + done, length - done, st->file_offset + static_cast<off_t>(done));
      if (n <= 0) {
        out.resize_down(frame_start);  // the file shrank: this frame is dropped, the stream reset
        return NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE;
      }
      done += static_cast<size_t>(n);
    }
    st->file_offset += static_cast<off_t>(length);
    st->file_left -= length;
  }
  if (padlen > 1) std::memset(out.grow(padlen - 1), 0, padlen - 1);
  return 0;
}

// Appends the fields of an HTTP/1-style block ("Name: value\r\n" lines, as Response keeps
// them) to nva, names lowercased into `names` (reserved here, so it does not move while nva
// points into it; it must outlive nva), without the connection-specific fields that have no
// meaning in HTTP/2 (RFC 9113 8.2.2) and without Content-Length (the caller adds its own).
void header_fields(std::string_view block, std::vector<std::string>& names, std::vector<nghttp2_nv>& nva) {
  size_t lines = 0;
  for (size_t p = block.find("\r\n"); p != std::string_view::npos; p = block.find("\r\n", p + 2)) ++lines;
  names.reserve(names.size() + lines);
  http::for_each_line(block, [&](size_t, size_t, std::string_view n, std::string_view value) {
    while (!value.empty() && (value.front() == ' ' || value.front() == '\t')) value.remove_prefix(1);
    std::string name(n);
    for (char& ch : name) ch = http::ascii_lower(ch);
    if (http::is_hop_by_hop(name) || name == "content-length") return true;  // RFC 9113 8.2.2
    names.push_back(std::move(name));
    nva.push_back(detail::nv(names.back(), value));
    return true;
  });
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

void Session::start_handler(const std::shared_ptr<H2Stream>& st) {
  handlers_.add(1);
  ++running_;
  Scheduler* sched = Scheduler::current();
  auto body = [this, st] {
    H2Stream& s = *st;
    s.request.reset(&s.head, &s);
    s.request.set_connection_info(c_.info);
    s.response.reset();
    try {
      c_.handler(s.request, s.response);
    } catch (const std::exception& e) {
      LIONET_LOG_ERROR(h2_log(), "handler threw on stream {}: {}", s.id, e.what());
      s.response.reset();
      s.response.reply(500, "internal server error\n");
    } catch (...) {
      s.response.reset();
      s.response.reply(500, "internal server error\n");
    }
    if (c_.stats) c_.stats->requests.fetch_add(1, std::memory_order_relaxed);
    respond(st);
    {
      std::lock_guard lk(mu_);
      --running_;
      drained_.notify_all();
    }
    handlers_.done();
  };
  try {
    char name[32];  // the fiber dump names the stream: "h2 <connection>/<stream id>"
    int k = std::snprintf(name, sizeof name, "h2 %llu/%d", static_cast<unsigned long long>(conn_id_), st->id);
    sched->spawn(std::move(body), {.name = std::string_view(name, static_cast<size_t>(std::max(k, 0)))}).detach();
  } catch (const std::exception& e) {
    // No stack for a fiber: refuse the stream, keep the connection.
    --running_;
    handlers_.done();
    nghttp2_submit_rst_stream(s_, NGHTTP2_FLAG_NONE, st->id, NGHTTP2_REFUSED_STREAM);
  }
}

Result<size_t> H2Stream::read_body(void* buf, size_t n) { return session->read_body(*this, buf, n); }

Result<size_t> Session::read_body(H2Stream& st, void* buf, size_t n) {
  std::unique_lock lk(mu_);
  TimePoint deadline = now() + c_.options.body_timeout;
  auto ready = [&] {
    return st.body_read < st.body.size() || st.body_eof || st.reset || st.body_too_large || peer_eof_;
  };
  if (!st.cv.wait_until(lk, deadline, ready)) return errno_error(ETIMEDOUT);
  if (st.body_too_large) return errno_error(EMSGSIZE);
  size_t k = std::min(n, st.body.size() - st.body_read);
  if (k == 0) {
    if ((st.reset || peer_eof_) && !st.body_eof) return errno_error(ECONNABORTED);
    return size_t{0};
  }
  std::memcpy(buf, st.body.data() + st.body_read, k);
  st.body_read += k;
  if (st.body_read == st.body.size()) {
    st.body.clear();
    st.body_read = 0;
  }
  if (!dead_ && !st.reset) {
    nghttp2_session_consume(s_, st.id, k);  // WINDOW_UPDATE: the client may send k more
    flush();
  }
  return k;
}

// ---- responses ----------------------------------------------------------------------------

void Session::respond(const std::shared_ptr<H2Stream>& sp) {
  H2Stream& st = *sp;
  http::Response& res = st.response;
  std::unique_lock lk(mu_);
  st.handler_done = true;
  if (!dead_ && !st.reset && st.body.size() > st.body_read) {
    nghttp2_session_consume(s_, st.id, st.body.size() - st.body_read);  // unread body: window back
  }
  st.body.clear();
  st.body_read = 0;
  if (dead_ || st.reset) return;
  if (st.body_too_large && res.status() < 400) {
    // As over HTTP/1.1: a body over max_body_bytes is answered 413 unless the handler chose
    // an error itself.
    res.reset();
    res.reply(413, kBodyOverLimit);
  }
  if (res.has_takeover() || res.status() == 101) [[unlikely]] {
    // A connection takeover (http/takeover.h) is HTTP/1.1's: HTTP/2 has no 101, and RFC
    // 8441's extended CONNECT (WebSocket over a stream) is not supported.
    res.reset();
    res.reply(501, "Not Implemented: this resource switches protocols (101), which needs HTTP/1.1; "
                   "RFC 8441 (WebSocket over HTTP/2) is not supported\n");
  }
  submit(st);
  bool writer = st.src == H2Stream::Src::kWriter;
  if (running_ > 1) {
    // Other handlers of this connection are still running (a client with many streams in
    // flight): let the ones that are ready submit first, so one write carries several
    // responses (one system call and one TLS record instead of one each). A slow handler
    // holds nobody back: this waits for one turn of the scheduler, not for the others.
    lk.unlock();
    this_fiber::yield();
    lk.lock();
    if (dead_ || st.reset) return;
  }
  flush();
  if (!writer) return;
  lk.unlock();
  // The body writer runs in this fiber, after the response head was submitted.
  WriterPipe pipe(sp);
  http::BodyWriter bw(pipe, /*chunked=*/false, {});
  bool ok = false;
  try {
    ok = static_cast<bool>(res.writer()(bw));
  } catch (const std::exception& e) {
    LIONET_LOG_ERROR(h2_log(), "body writer threw on stream {}: {}", st.id, e.what());
  }
  lk.lock();
  if (dead_ || st.reset) return;
  if (!ok) {
    nghttp2_submit_rst_stream(s_, NGHTTP2_FLAG_NONE, st.id, NGHTTP2_INTERNAL_ERROR);
  } else {
    st.pipe_eof = true;
    resume(st);
  }
  flush();
}

void Session::submit(H2Stream& st) {
  http::Response& res = st.response;
  const bool head_only = st.head.method == "HEAD";
  const int status = res.status();
  const bool no_body = head_only || status == 204 || status == 304 || (status >= 100 && status < 200);
  char status_buf[4];
  std::snprintf(status_buf, sizeof status_buf, "%03d", status >= 100 && status <= 999 ? status : 500);

  std::vector<nghttp2_nv> nva;
  st.resp_names.clear();
  auto add = [&](std::string_view n, std::string_view v) { nva.push_back(detail::nv(n, v)); };
  add(":status", std::string_view(status_buf, 3));
  std::string_view date = http::date_line();  // "Date: <IMF-fixdate>\r\n"
  if (date.size() > 8) add("date", date.substr(6, date.size() - 8));
  if (!c_.options.server_name.empty()) add("server", c_.options.server_name);
  header_fields(res.header_block(), st.resp_names, nva);

  std::optional<uint64_t> size = res.body_size();
  char len_buf[24];
  if (size && status >= 200 && status != 204) {
    int k = std::snprintf(len_buf, sizeof len_buf, "%llu", static_cast<unsigned long long>(*size));
    add("content-length", std::string_view(len_buf, static_cast<size_t>(k)));
  }

  const bool has_trailers = !res.trailer_block().empty();  // sent after the body, so a body it is
  nghttp2_data_provider prd{};
  prd.source.ptr = &st;
  prd.read_callback = read_source;
  const nghttp2_data_provider* use = nullptr;
  if (!no_body) {
    switch (res.body_type()) {
      case http::Response::BodyType::kMemory:
      case http::Response::BodyType::kView:
        st.src = H2Stream::Src::kMemory;
        st.memory = res.body_view();
        if (!st.memory.empty() || has_trailers) use = &prd;
        break;
      case http::Response::BodyType::kFile:
        st.src = H2Stream::Src::kFile;
        st.fd = res.file_fd();
        st.file_offset = res.file_offset();
        st.file_left = res.file_length();
        if (st.file_left > 0 || has_trailers) use = &prd;
        break;
      case http::Response::BodyType::kWriter:
        st.src = H2Stream::Src::kWriter;
        use = &prd;
        break;
    }
  }
  st.sending = use != nullptr;
  int rv = nghttp2_submit_response(s_, st.id, nva.data(), nva.size(), use);
  if (rv == 0) st.status_sent = status >= 100 && status <= 999 ? status : 500;
  if (rv != 0) {
    LIONET_LOG_DEBUG(h2_log(), "submit_response on stream {}: {}", st.id, nghttp2_strerror(rv));
    st.src = H2Stream::Src::kNone;
    st.sending = false;
  }
}

Result<size_t> Session::write_pipe(H2Stream& st, const void* buf, size_t n) {
  std::unique_lock lk(mu_);
  const auto* p = static_cast<const char*>(buf);
  size_t done = 0;
  while (done < n) {
    TimePoint deadline = now() + c_.options.write_timeout;
    if (!st.cv.wait_until(lk, deadline, [&] {
          return dead_ || st.reset || st.pipe.size() - st.pipe_read < o_.writer_buffer;
        })) {
      return errno_error(ETIMEDOUT);
    }
    if (dead_ || st.reset) return errno_error(ECONNRESET);
    size_t room = o_.writer_buffer - (st.pipe.size() - st.pipe_read);
    size_t k = std::min(room, n - done);
    st.pipe.append(p + done, k);
    done += k;
    resume(st);
    if (!flush()) return errno_error(ECONNRESET);
  }
  return n;
}

Result<size_t> WriterPipe::write(const void* buf, size_t n) { return st_->session->write_pipe(*st_, buf, n); }

void Session::log_stream(H2Stream& st) {
  if (!alog_ || st.logged) return;
  st.logged = true;
  if (!st.head_built && !st.refused) return;  // no request: refused after GOAWAY, over a header limit
  if (!peer_known_) {
    peer_known_ = true;
    if (c_.info && c_.info->socket)
      if (auto a = c_.info->socket->peer_address()) peer_.set(*a);
  }
  auto field = [&](int i) {
    return i < 0 ? std::string_view() : st.field_value(st.fields[static_cast<size_t>(i)]);
  };
  http::AccessLogEntry e;
  e.remote_addr = peer_.view();
  e.method = field(st.method);
  e.target = field(st.path);
  e.protocol = "HTTP/2.0";  // as nginx writes it
  e.status = st.status_sent ? st.status_sent : st.refused ? st.refused : 499;
  e.body_bytes_sent = st.body_sent;
  e.request_time = now() - st.started;
  if (st.head_built) {
    e.referer = st.head.headers.get("referer");
    e.user_agent = st.head.headers.get("user-agent");
  }
  if (c_.options.tcp.name != "tcp") e.server = c_.options.tcp.name;
  alog_->log(e);
}

}  // namespace

void serve_connection(const http::ProtocolHandoff& conn, const Options& h2) {
  Session session(conn, h2);
  session.run();
}

void enable(http::ServerOptions& options, Options h2) {
  options.http2 = [h2](const http::ProtocolHandoff& conn) { serve_connection(conn, h2); };
}

}  // namespace lionet::http2
