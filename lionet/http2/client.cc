// lionet/http2/client.cc: the HTTP/2 client connection over libnghttp2 (see client.h).
//
// Locking: mu_ guards the nghttp2 session, ex_ and every Exchange field the callbacks touch.
// An exchange submits its request and writes what the session has to send under mu_ (so the
// connection's writes stay ordered), then waits for its stream to close. The waiters take
// turns as the reader: one at a time (reading_) reads the stream outside mu_, feeds the bytes
// to the session under mu_, writes what that produced (acks, window updates) and wakes the
// others (cv_); when its own exchange is done it leaves and another waiter reads.
// Lifetime: an Exchange lives on its caller's stack; ex_ points at it until its stream closes
// or the caller gives up (timeout: RST_STREAM, then the entry goes). Callbacks, the request
// body's data source included, find their exchange through ex_ by stream id, never through a
// pointer nghttp2 keeps: a stream nghttp2 still knows may have no exchange any more.
#include "lionet/http2/client.h"

#include <nghttp2/nghttp2.h>

#include <algorithm>
#include <atomic>
#include <charconv>
#include <cstring>
#include <string>
#include <unordered_map>
#include <vector>

#include "lionet/http/headers.h"
#include "lionet/http2/detail/output.h"
#include "lionet/http2/detail/sink_stream.h"
#include "lionet/sync/cond_var.h"
#include "lionet/sync/mutex.h"

namespace lionet::http2 {
namespace {

constexpr size_t kReadBuffer = 16 * 1024;
constexpr int32_t kStreamWindow = 1 << 20;  // per response, before a WINDOW_UPDATE is needed
constexpr int32_t kConnectionWindow = 16 << 20;  // all responses of the connection together
constexpr uint32_t kMaxHeaderList = 64 * 1024;  // the response header list we accept

struct Exchange {
  int32_t id = 0;
  http::ClientResponse resp;
  std::string_view body;  // request body still to frame
  uint64_t max_body = 0;
  size_t header_bytes = 0;
  bool final_head = false;  // a final (non-1xx) status arrived
  bool done = false;
  bool unprocessed = false;  // refused (REFUSED_STREAM, or above the GOAWAY's last stream)
  int err = 0;  // errno of a failed exchange
};

// A Stream that gathers a request body writer's output (http::BodyWriter needs a Stream).
class StringSink final : public detail::SinkStream {
 public:
  StringSink(std::string& out, uint64_t max) : out_(out), max_(max) {}
  using SinkStream::write;
  Result<size_t> write(const void* buf, size_t n) override {
    if (out_.size() + n > max_) return errno_error(EMSGSIZE);
    out_.append(static_cast<const char*>(buf), n);
    return n;
  }

 private:
  std::string& out_;
  uint64_t max_;
};

// Fields the client does not pass on: the connection-specific ones (TE among them), Host
// (:authority carries it) and Content-Length (set from the body).
bool not_forwarded(std::string_view lower) {
  return http::is_hop_by_hop(lower) || lower == "host" || lower == "content-length";
}

class Connection final : public http::MultiplexedConnection {
 public:
  Connection(std::unique_ptr<Stream> stream, const http::ClientOptions& o)
      : stream_(std::move(stream)),
        max_body_(o.max_body_bytes),
        user_agent_(o.user_agent),
        buf_(new uint8_t[kReadBuffer]) {
    // Reads wake at least every `tick` so the reader notices its own deadline.
    Duration tick =
        std::clamp<Duration>(o.request_timeout / 4, std::chrono::milliseconds(10), std::chrono::milliseconds(250));
    stream_->set_timeouts(tick, o.request_timeout);
  }
  ~Connection() override {
    stream_->close();
    if (s_) nghttp2_session_del(s_);
  }

  bool setup();
  Result<http::ClientResponse> exchange(const http::Url& url, const http::ClientRequest& req, TimePoint deadline,
                                        bool* unprocessed) override;
  bool open() const noexcept override { return open_.load(std::memory_order_acquire); }
  void close() noexcept override {
    open_.store(false, std::memory_order_release);
    stream_->close();  // a reader in read() fails at once
  }

 private:
  bool flush();  // mu_ held: writes what the session has to send; false once dead
  void fail(int err);  // mu_ held: the connection is dead, every exchange fails with err
  void read_once();  // mu_ held on entry and exit (released while reading)
  void forget(Exchange& ex) { ex_.erase(ex.id); }
  Exchange* find(int32_t id) {
    auto it = ex_.find(id);
    return it == ex_.end() ? nullptr : it->second;
  }

  static int on_header(nghttp2_session*, const nghttp2_frame* frame, const uint8_t* name, size_t namelen,
                       const uint8_t* value, size_t valuelen, uint8_t flags, void* user);
  static int on_data_chunk(nghttp2_session*, uint8_t flags, int32_t id, const uint8_t* data, size_t len, void* user);
  static int on_frame_recv(nghttp2_session*, const nghttp2_frame* frame, void* user);
  static int on_stream_close(nghttp2_session*, int32_t id, uint32_t error_code, void* user);
  static ssize_t read_body(nghttp2_session*, int32_t id, uint8_t* buf, size_t length, uint32_t* flags,
                           nghttp2_data_source* source, void* user);

  std::unique_ptr<Stream> stream_;
  const uint64_t max_body_;
  const std::string user_agent_;
  std::unique_ptr<uint8_t[]> buf_;  // the reader's (one at a time)
  Mutex mu_;
  CondVar cv_;  // a read was processed, or the reader left
  nghttp2_session* s_ = nullptr;
  std::unordered_map<int32_t, Exchange*> ex_;
  bool reading_ = false;
  bool dead_ = false;
  int dead_err_ = ECONNRESET;
  uint64_t exchanges_ = 0;
  int32_t goaway_last_ = INT32_MAX;  // streams above it were not processed (GOAWAY received)
  std::atomic<bool> open_{true};
};

bool Connection::setup() {
  const auto cbs = detail::new_callbacks();
  const auto opt = detail::new_option();
  if (!cbs || !opt) return false;
  nghttp2_session_callbacks_set_on_header_callback(cbs.get(), on_header);
  nghttp2_session_callbacks_set_on_data_chunk_recv_callback(cbs.get(), on_data_chunk);
  nghttp2_session_callbacks_set_on_frame_recv_callback(cbs.get(), on_frame_recv);
  nghttp2_session_callbacks_set_on_stream_close_callback(cbs.get(), on_stream_close);
  const int rv = nghttp2_session_client_new2(&s_, cbs.get(), this, opt.get());
  if (rv != 0) return false;
  nghttp2_settings_entry iv[] = {
      {NGHTTP2_SETTINGS_ENABLE_PUSH, 0},
      {NGHTTP2_SETTINGS_INITIAL_WINDOW_SIZE, static_cast<uint32_t>(kStreamWindow)},
      {NGHTTP2_SETTINGS_MAX_HEADER_LIST_SIZE, kMaxHeaderList},
  };
  if (nghttp2_submit_settings(s_, NGHTTP2_FLAG_NONE, iv, sizeof iv / sizeof iv[0]) != 0) return false;
  return nghttp2_session_set_local_window_size(s_, NGHTTP2_FLAG_NONE, 0, kConnectionWindow) == 0;
}

Result<http::ClientResponse> Connection::exchange(const http::Url& url, const http::ClientRequest& req,
                                                  TimePoint deadline, bool* unprocessed) {
  *unprocessed = false;
  std::string gathered;  // a body writer's output
  std::string_view body = req.body;
  if (req.body_writer) {
    StringSink sink(gathered, max_body_);
    http::BodyWriter w(sink, /*chunked=*/false, {});
    if (auto r = req.body_writer(w); !r) return r.error();
    if (auto r = w.finish(); !r) return r.error();
    if (req.body_length && gathered.size() != *req.body_length) return errno_error(EINVAL);
    body = gathered;
  }

  // The request's header list. Names are lowercased into `names` first: nva points into it.
  std::vector<std::string> names;
  names.reserve(req.headers.size());
  for (const auto& [n, v] : req.headers) {
    std::string lower(n);
    for (char& ch : lower) ch = http::ascii_lower(ch);
    names.push_back(std::move(lower));
  }
  std::vector<nghttp2_nv> nva;
  nva.reserve(req.headers.size() + 6);
  auto add = [&](std::string_view n, std::string_view v) { nva.push_back(detail::nv(n, v)); };
  add(":method", req.method);
  add(":scheme", url.scheme);
  add(":authority", url.authority);
  add(":path", url.target.empty() ? std::string_view("/") : std::string_view(url.target));
  if (!user_agent_.empty()) add("user-agent", user_agent_);
  for (size_t i = 0; i < names.size(); ++i)
    if (!not_forwarded(names[i])) add(names[i], req.headers[i].second);
  char len_buf[24];
  bool has_body = !body.empty() || http::detail::method_has_body_by_default(req.method);
  if (has_body) {
    auto [p, ec] = std::to_chars(len_buf, len_buf + sizeof len_buf, body.size());
    add("content-length", std::string_view(len_buf, static_cast<size_t>(p - len_buf)));
  }

  Exchange ex;
  ex.body = body;
  ex.max_body = max_body_;
  ex.resp.protocol = "HTTP/2";
  std::unique_lock lk(mu_);
  if (dead_ || !open()) {
    *unprocessed = true;  // never sent
    return errno_error(dead_ ? dead_err_ : ECONNRESET);
  }
  ex.resp.reused_connection = exchanges_++ > 0;
  nghttp2_data_provider prd{};
  prd.read_callback = read_body;
  int32_t id = nghttp2_submit_request(s_, nullptr, nva.data(), nva.size(), body.empty() ? nullptr : &prd, nullptr);
  if (id < 0) {
    if (id == NGHTTP2_ERR_STREAM_ID_NOT_AVAILABLE) open_.store(false, std::memory_order_release);
    *unprocessed = true;
    return errno_error(id == NGHTTP2_ERR_STREAM_ID_NOT_AVAILABLE ? ECONNRESET : ENOMEM);
  }
  ex.id = id;
  ex_[id] = &ex;
  flush();
  while (!ex.done) {
    // The request's own deadline, the fiber's (DeadlineScope) and a cancel of the fiber
    // (sched/cancel.h) all end the exchange the same way: RST_STREAM(CANCEL), the
    // connection kept for the others.
    const int interrupted = this_fiber::interruption();
    if (interrupted != 0 || now() >= deadline) {
      nghttp2_submit_rst_stream(s_, NGHTTP2_FLAG_NONE, id, NGHTTP2_CANCEL);
      forget(ex);
      {
        CancelShield shield;  // the RST_STREAM goes out even from a cancelled fiber
        flush();
      }
      cv_.notify_all();  // if we were the reader, another waiter takes over
      return errno_error(interrupted != 0 ? interrupted : ETIMEDOUT);
    }
    if (!reading_) {
      read_once();
    } else {
      cv_.wait_until(lk, deadline);
    }
  }
  cv_.notify_all();  // if we were the reader, another waiter takes over
  if (ex.err != 0) {
    *unprocessed = ex.unprocessed;
    return errno_error(ex.err);
  }
  if (!ex.final_head) return errno_error(EPROTO);
  return std::move(ex.resp);
}

void Connection::read_once() {
  reading_ = true;
  mu_.unlock();
  auto r = stream_->read(buf_.get(), kReadBuffer);
  mu_.lock();
  reading_ = false;
  if (dead_) {
  } else if (!r) {
    // A timeout, or a cancel of the reading fiber (sched/cancel.h), ends this read only: the
    // connection stays up and another waiter becomes the reader.
    if (r.error() != std::errc::timed_out && !(r.error().value() == ECANCELED && this_fiber::cancelled()))
      fail(r.error().value());
  } else if (*r == 0) {
    fail(ECONNRESET);
  } else if (nghttp2_session_mem_recv(s_, buf_.get(), *r) < 0) {
    flush();  // the GOAWAY nghttp2 queued for a protocol error
    fail(EPROTO);
  } else {
    flush();
  }
  cv_.notify_all();
}

bool Connection::flush() {
  if (dead_) return false;
  bool wrote = false;
  int write_errno = 0;
  detail::OutBuf* out = nullptr;  // no callback of ours appends to it: send_all's own use only
  switch (detail::send_all(s_, out, *stream_, &wrote, &write_errno)) {
    case detail::Sent::kAll: return true;
    case detail::Sent::kSessionError: fail(EPROTO); return false;
    case detail::Sent::kWriteError: fail(write_errno); return false;
  }
  return false;
}

void Connection::fail(int err) {
  if (dead_) return;
  dead_ = true;
  dead_err_ = err;
  open_.store(false, std::memory_order_release);
  for (auto& [id, ex] : ex_) {
    ex->done = true;
    ex->err = err;
    ex->unprocessed = id > goaway_last_;
  }
  ex_.clear();
  stream_->close();
  cv_.notify_all();
}

// ---- nghttp2 callbacks (inside mem_recv / mem_send, mu_ held) ----------------------------

int Connection::on_header(nghttp2_session*, const nghttp2_frame* frame, const uint8_t* name, size_t namelen,
                          const uint8_t* value, size_t valuelen, uint8_t, void* user) {
  auto* self = static_cast<Connection*>(user);
  if (frame->hd.type != NGHTTP2_HEADERS) return 0;
  Exchange* ex = self->find(frame->hd.stream_id);
  if (!ex) return 0;
  // RFC 9113 6.5.2: a field costs its name, its value and 32 bytes. Over the SETTINGS we sent
  // (an HPACK bomb): the exchange fails, the stream is reset.
  ex->header_bytes += namelen + valuelen + 32;
  if (ex->header_bytes > kMaxHeaderList) {
    ex->err = EMSGSIZE;
    return NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE;
  }
  std::string_view n(reinterpret_cast<const char*>(name), namelen);
  std::string_view v(reinterpret_cast<const char*>(value), valuelen);
  if (n == ":status") {
    int code = 0;
    auto [p, ec] = std::from_chars(v.data(), v.data() + v.size(), code);
    if (ec != std::errc() || p != v.data() + v.size() || code < 100 || code > 999) {
      return NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE;  // RST_STREAM PROTOCOL_ERROR; the exchange fails
    }
    ex->resp.headers.clear();  // an interim (1xx) response's fields are not the final ones
    ex->resp.status = code;
    ex->final_head = code >= 200;
    return 0;
  }
  if (n.starts_with(':')) return 0;
  // A HEADERS frame after the final response's is the trailer section.
  bool trailer = ex->final_head && frame->headers.cat == NGHTTP2_HCAT_HEADERS;
  (trailer ? ex->resp.trailers : ex->resp.headers).emplace_back(std::string(n), std::string(v));
  return 0;
}

int Connection::on_data_chunk(nghttp2_session* s, uint8_t, int32_t id, const uint8_t* data, size_t len, void* user) {
  auto* self = static_cast<Connection*>(user);
  Exchange* ex = self->find(id);
  if (!ex || ex->err != 0) return 0;
  if (ex->resp.body.size() + len > ex->max_body) {
    ex->err = EMSGSIZE;
    nghttp2_submit_rst_stream(s, NGHTTP2_FLAG_NONE, id, NGHTTP2_CANCEL);
    return 0;
  }
  ex->resp.body.append(reinterpret_cast<const char*>(data), len);
  return 0;
}

int Connection::on_frame_recv(nghttp2_session*, const nghttp2_frame* frame, void* user) {
  auto* self = static_cast<Connection*>(user);
  if (frame->hd.type == NGHTTP2_GOAWAY) {
    // No new streams here; nghttp2 closes ours above last_stream_id (REFUSED_STREAM).
    self->goaway_last_ = frame->goaway.last_stream_id;
    self->open_.store(false, std::memory_order_release);
  }
  return 0;
}

int Connection::on_stream_close(nghttp2_session*, int32_t id, uint32_t error_code, void* user) {
  auto* self = static_cast<Connection*>(user);
  Exchange* ex = self->find(id);
  if (!ex) return 0;
  self->ex_.erase(id);
  ex->done = true;
  if (ex->err == 0 && error_code != NGHTTP2_NO_ERROR) {
    ex->unprocessed = error_code == NGHTTP2_REFUSED_STREAM;
    ex->err = ex->unprocessed ? ECONNREFUSED : ECONNRESET;
  }
  return 0;
}

ssize_t Connection::read_body(nghttp2_session*, int32_t id, uint8_t* buf, size_t length, uint32_t* flags,
                              nghttp2_data_source*, void* user) {
  Exchange* ex = static_cast<Connection*>(user)->find(id);
  if (!ex) return NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE;  // given up: the stream is reset
  size_t n = std::min(length, ex->body.size());
  std::memcpy(buf, ex->body.data(), n);
  ex->body.remove_prefix(n);
  if (ex->body.empty()) *flags |= NGHTTP2_DATA_FLAG_EOF;
  return static_cast<ssize_t>(n);
}

}  // namespace

std::unique_ptr<http::MultiplexedConnection> client_connection(std::unique_ptr<Stream> stream,
                                                               const http::ClientOptions& options) {
  auto c = std::make_unique<Connection>(std::move(stream), options);
  if (!c->setup()) return nullptr;
  return c;
}

void enable(http::ClientOptions& options) { options.http2 = client_connection; }

}  // namespace lionet::http2
