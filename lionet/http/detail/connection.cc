// lionet/http/detail/connection.cc: detail::Connection, the per-connection request loop described in
// server.h (buffer layout and the no-move invariant in detail/connection.h).
#include "lionet/http/detail/connection.h"

#include "lionet/http/handler_limits.h"

#include <algorithm>
#include <charconv>
#include <cstring>

#include "lionet/base/log_limiter.h"
#include "lionet/http/date.h"
#include "lionet/http/detail/log.h"
#include "lionet/http/status.h"

namespace lionet::http::detail {
namespace {
void append_status_line(std::string& out, int status, std::string_view reason) {
  std::string_view line = reason.empty() ? status_line(status) : std::string_view();
  if (!line.empty()) {
    out.append(line);
    return;
  }
  char code[16];
  auto [p, ec] = std::to_chars(code, code + sizeof code, status);
  out.append("HTTP/1.1 ").append(code, p).append(" ");
  out.append(reason.empty() ? reason_phrase(status) : reason).append("\r\n");
}

void append_content_length(std::string& out, uint64_t n) {
  char digits[24];
  auto [p, ec] = std::to_chars(digits, digits + sizeof digits, n);
  out.append("Content-Length: ").append(digits, p).append("\r\n");
}
// One info line per rejected request (400, 408, 413, 431, ...), at most one a second for the
// whole process: a flood of bad requests cannot flood the log. The lines held back are counted
// into the next one.
LogLimiter g_reject_log;

void log_rejected(const ConnectionInfo* info, int status, std::string_view reason) noexcept {
  uint64_t more = 0;
  if (!g_reject_log.admit(more)) return;
  std::string peer = "?";
  if (info && info->socket)
    if (auto a = info->socket->peer_address()) peer = a->to_string();
  LIONET_LOG_INFO(http_log(), "rejected a request from {}: {} {}: {} ({} more rejected since the last line)", peer,
                  status, reason_phrase(status), reason, more);
}
}  // namespace

Connection::Connection(Stream& stream, const Handler& handler, const ServerOptions& options,
                       const std::atomic<bool>* stopping, ServerStats* stats, const ConnectionInfo* info)
    : stream_(stream),
      handler_(handler),
      options_(options),
      stopping_(stopping),
      stats_(stats),
      info_(info),
      cap_(std::max<size_t>(options.input_buffer, 1024)),
      parser_(options.limits),
      write_timeout_(options.write_timeout),
      access_log_(options.access_log.get()) {
  buf_.reset(new char[cap_]);
  ChunkedDecoder::Limits cl;
  cl.max_body = options.limits.max_body_bytes;
  chunked_.set_limits(cl);
  out_.reserve(512);
}

void Connection::set_read_deadline(TimePoint deadline) {
  Duration left = deadline - now();
  if (left <= Duration::zero()) left = Duration(1);
  stream_.set_timeouts(left, write_timeout_);
}

void Connection::ensure_room(size_t n) {
  if (cap_ - w_ >= n) return;
  const size_t live = w_ - r_;
  move_live_to_front(cap_ - live >= n && r_ > 0 ? cap_ : std::max(cap_ * 2, live + n));
}

// The unread bytes [r_, w_) moved to the start of the buffer, which becomes `cap` bytes (the
// same buffer when it is that large already; else a new one).
void Connection::move_live_to_front(size_t cap) {
  const size_t live = w_ - r_;
  if (cap <= cap_) {
    std::memmove(buf_.get(), buf_.get() + r_, live);
  } else {
    std::unique_ptr<char[]> nb(new char[cap]);
    std::memcpy(nb.get(), buf_.get() + r_, live);
    buf_ = std::move(nb);
    cap_ = cap;
  }
  r_ = 0;
  w_ = live;
}

Connection::ReadOutcome Connection::read_tail(TimePoint deadline, size_t* got) {
  Duration left = deadline - now();  // one clock read per read call
  if (left <= Duration::zero()) return ReadOutcome::kTimeout;
  return read_tail_within(left, got);
}

Connection::ReadOutcome Connection::read_tail_within(Duration timeout, size_t* got) {
  stream_.set_timeouts(timeout, write_timeout_);
  auto r = stream_.read(buf_.get() + w_, cap_ - w_);
  if (!r) return r.error() == std::errc::timed_out ? ReadOutcome::kTimeout : ReadOutcome::kError;
  if (*r == 0) return ReadOutcome::kEof;
  w_ += *r;
  if (got) *got = *r;
  return ReadOutcome::kData;
}

Connection::ReadOutcome Connection::read_more(TimePoint deadline) {
  const Duration left = deadline - now();
  if (left <= Duration::zero()) return ReadOutcome::kTimeout;
  return read_more_within(left);
}

Connection::ReadOutcome Connection::read_more_within(Duration timeout) {
  if (r_ == w_) r_ = w_ = 0;
  ensure_room(1024);
  return read_tail_within(timeout, nullptr);
}

bool Connection::read_head(bool first_request, TimePoint accepted) {
  parser_.reset();
  TimePoint deadline;
  if (r_ == w_) {
    // Idle: wait for the first byte of the next request (between requests, keepalive_timeout
    // from when the read has to wait).
    ReadOutcome o =
        first_request ? read_more(accepted + options_.header_timeout) : read_more_within(options_.keepalive_timeout);
    if (o != ReadOutcome::kData) {
      if (o == ReadOutcome::kTimeout && stats_) stats_->timeouts.fetch_add(1, std::memory_order_relaxed);
      return false;  // idle timeout, end of stream or error: close without a word
    }
  }
  if (access_log_) request_start_ = now();  // the request's first byte is here
  if (first_request && options_.http2 && looks_like_http2_preface()) {
    // h2c with prior knowledge: take the whole preface (within header_timeout), then the
    // connection belongs to HTTP/2 (run() hands it over with the bytes read so far).
    while (w_ - r_ < kHttp2Preface.size() && looks_like_http2_preface()) {
      if (read_more(accepted + options_.header_timeout) != ReadOutcome::kData) return false;
    }
    if (std::string_view(buf_.get() + r_, w_ - r_).starts_with(kHttp2Preface)) {
      handoff_ = true;
      return false;
    }
  }
  // The header deadline runs from the first byte; it is only computed if one read did not
  // bring the whole head (the common case needs no clock read here).
  bool have_deadline = first_request;
  deadline = accepted + options_.header_timeout;
  for (;;) {
    RequestParser::State st = parser_.parse(buf_.get() + r_, w_ - r_);
    if (st == RequestParser::State::kDone) break;
    if (st == RequestParser::State::kError) {
      if (first_request && options_.http2 && !first_line_names_http1()) {
        // Not HTTP/1.x at all on a port that also speaks h2c (e.g. a wrong HTTP/2 preface):
        // an HTTP/1.1 error answer would only confuse the peer; close (RFC 9113 3.4).
        return false;
      }
      if (parser_.head_complete() && options_.refusal) {
        refuse(parser_.error_status(), parser_.error_reason());
      } else {
        send_error(parser_.error_status(), parser_.error_reason());
      }
      return false;
    }
    if (!have_deadline) {
      deadline = now() + options_.header_timeout;
      have_deadline = true;
    }
    ReadOutcome o = read_more(deadline);
    if (o == ReadOutcome::kTimeout) {
      if (stats_) stats_->timeouts.fetch_add(1, std::memory_order_relaxed);
      send_error(408, "request head not received in time");
      return false;
    }
    if (o != ReadOutcome::kData) return false;
  }
  size_t head_size = parser_.head_size();
  if (parser_.head().body_kind != BodyKind::kNone) {
    // Room for body reads at the tail, made now: after rebind() nothing may move.
    size_t need = head_size + std::max(kBodyRoom, w_ - r_ - head_size);
    if (cap_ - r_ < need) move_live_to_front(std::max(cap_, need));
  }
  parser_.rebind(buf_.get() + r_);
  head_end_ = r_ + head_size;
  return true;
}

void Connection::start_body() {
  const RequestHead& h = parser_.head();
  body_pos_ = head_end_;
  body_done_ = h.body_kind == BodyKind::kNone;
  body_left_ = h.body_kind == BodyKind::kContentLength ? h.content_length : 0;
  continue_sent_ = false;
  body_error_status_ = 0;
  stream_failed_ = false;
  if (h.body_kind == BodyKind::kChunked) chunked_.reset();
  if (!body_done_) body_deadline_ = now() + options_.body_timeout;
}

Result<size_t> Connection::read_body(void* out, size_t n) {
  if (body_done_) return size_t{0};
  if (stream_failed_) return errno_error(ECONNABORTED);
  if (body_error_status_) {
    return errno_error(body_error_status_ == 413 ? EMSGSIZE : body_error_status_ == 408 ? ETIMEDOUT : EBADMSG);
  }
  if (n == 0) return size_t{0};
  const RequestHead& h = parser_.head();
  if (h.expect_continue && !continue_sent_) {
    continue_sent_ = true;
    static constexpr std::string_view k100 = "HTTP/1.1 100 Continue\r\n\r\n";
    if (auto r = stream_.write(k100.data(), k100.size()); !r) {
      stream_failed_ = true;
      return r.error();
    }
  }
  auto fail_read = [&](ReadOutcome o, std::error_code ec) -> Result<size_t> {
    if (o == ReadOutcome::kTimeout) {
      body_error_status_ = 408;
      if (stats_) stats_->timeouts.fetch_add(1, std::memory_order_relaxed);
      return errno_error(ETIMEDOUT);
    }
    stream_failed_ = true;
    return ec ? ec : errno_error(ECONNABORTED);
  };
  if (h.body_kind == BodyKind::kContentLength) {
    size_t leftover = w_ - body_pos_;
    if (leftover > 0) {
      size_t k = static_cast<size_t>(std::min<uint64_t>({n, leftover, body_left_}));
      std::memcpy(out, buf_.get() + body_pos_, k);
      body_pos_ += k;
      body_left_ -= k;
      if (body_pos_ == w_) body_pos_ = w_ = head_end_;
      body_done_ = body_left_ == 0;
      return k;
    }
    // Nothing buffered: read straight into the caller's buffer, never past the body.
    if (now() >= body_deadline_) return fail_read(ReadOutcome::kTimeout, {});
    set_read_deadline(body_deadline_);
    auto r = stream_.read(out, static_cast<size_t>(std::min<uint64_t>(n, body_left_)));
    if (!r)
      return fail_read(r.error() == std::errc::timed_out ? ReadOutcome::kTimeout : ReadOutcome::kError, r.error());
    if (*r == 0) return fail_read(ReadOutcome::kEof, {});
    body_left_ -= *r;
    body_done_ = body_left_ == 0;
    return *r;
  }
  // Chunked: decode from the buffered bytes, refilling the tail after the head.
  for (;;) {
    if (body_pos_ < w_) {
      auto cs = chunked_.decode(buf_.get() + body_pos_, w_ - body_pos_, static_cast<char*>(out), n);
      body_pos_ += cs.consumed;
      if (chunked_.failed()) {
        body_error_status_ = chunked_.error_status();
        return errno_error(body_error_status_ == 413 ? EMSGSIZE : EBADMSG);
      }
      body_done_ = chunked_.done();
      if (body_pos_ == w_) body_pos_ = w_ = head_end_;
      if (cs.produced > 0) return cs.produced;
      if (body_done_) return size_t{0};
      continue;
    }
    body_pos_ = w_ = head_end_;
    ReadOutcome o = read_tail(body_deadline_, nullptr);
    if (o != ReadOutcome::kData) return fail_read(o, {});
  }
}

bool Connection::drain_body() {
  char tmp[4096];
  size_t drained = 0;
  while (!body_done_) {
    auto r = read_body(tmp, sizeof tmp);
    if (!r) return false;
    if (*r == 0) break;
    drained += *r;
    if (drained > options_.drain_body_max) return false;
  }
  return true;
}

void Connection::build_head(bool keep_alive, bool chunked) {
  out_.clear();
  append_status_line(out_, response_.status(), response_.reason());
  out_.append(date_line());
  if (!options_.server_name.empty()) out_.append("Server: ").append(options_.server_name).append("\r\n");
  out_.append(response_.header_block());
  if (status_has_body(response_.status())) {
    if (chunked) {
      out_.append("Transfer-Encoding: chunked\r\n");
    } else if (auto size = response_.body_size()) {
      append_content_length(out_, *size);
    }
  }
  if (!keep_alive) {
    out_.append("Connection: close\r\n");
  } else if (parser_.head().version_minor == 0) {
    out_.append("Connection: keep-alive\r\n");
  }
  out_.append("\r\n");
}

Result<void> Connection::send_response(bool& keep_alive, uint64_t& body_sent) {
  body_sent = 0;
  bool has_body = status_has_body(response_.status());
  bool send_body = has_body && !request_.is_head();
  bool chunked = false;
  const bool http11 = parser_.head().version_minor >= 1;
  if (response_.body_type() == Response::BodyType::kWriter && !response_.body_size()) {
    if (http11) {
      chunked = true;
    } else {
      keep_alive = false;  // HTTP/1.0: the body ends when the connection does
    }
  }
  // Trailers need a chunked body (RFC 9112 7.1.2): whatever the body, it goes chunked.
  if (has_body && http11 && !response_.trailer_block().empty()) chunked = true;
  build_head(keep_alive, chunked);
  if (!send_body) {
    if (auto r = stream_.write(out_.data(), out_.size()); !r) return r.error();
    return {};
  }
  switch (response_.body_type()) {
    case Response::BodyType::kMemory:
    case Response::BodyType::kView: {
      std::string_view body = response_.body_view();
      if (chunked) {  // for its trailers
        BodyWriter w(stream_, true, out_);
        w.set_trailers(&response_.trailer_block());
        auto r = w.write(body);
        body_sent = w.bytes_written();
        if (!r) return r;
        return w.finish();
      }
      // A small body goes behind the head in one buffer and one send(2): sendmsg's msghdr copy
      // and iovec import cost more than copying 1 KiB (as websocket/ does for small frames).
      constexpr size_t kCopyBody = 1024;  // bounds what out_ keeps per connection too
      if (body.size() <= kCopyBody) {
        out_.append(body);
        if (auto r = stream_.write(out_.data(), out_.size()); !r) return r.error();
      } else {
        iovec iov[2] = {{out_.data(), out_.size()}, {const_cast<char*>(body.data()), body.size()}};
        if (auto r = stream_.writev(iov, 2); !r) return r.error();
      }
      body_sent = body.size();
      return {};
    }
    case Response::BodyType::kFile: {
      BodyWriter w(stream_, chunked, out_);
      w.set_trailers(&response_.trailer_block());
      auto r = w.sendfile(response_.file_fd(), response_.file_offset(), response_.file_length());
      body_sent = w.bytes_written();
      if (!r) return r;
      return w.finish();
    }
    case Response::BodyType::kWriter: {
      BodyWriter w(stream_, chunked, out_);
      w.set_trailers(&response_.trailer_block());
      if (response_.writer()) {
        auto r = response_.writer()(w);
        body_sent = w.bytes_written();
        if (!r) return r;
      }
      if (auto len = response_.body_size(); len && w.bytes_written() != *len) return errno_error(EIO);
      return w.finish();
    }
  }
  return {};
}

void Connection::send_error(int status, const char* reason) noexcept {
  try {
    if (stats_) stats_->errors.fetch_add(1, std::memory_order_relaxed);
    log_rejected(info_, status, reason);
    // The reason goes to the client too: "Bad Request: line not ended by CRLF" says what to fix.
    const std::string body = error_text(status, reason);
    out_.clear();
    append_status_line(out_, status, {});
    out_.append(date_line());
    if (!options_.server_name.empty()) out_.append("Server: ").append(options_.server_name).append("\r\n");
    out_.append("Content-Type: text/plain; charset=utf-8\r\n");
    append_content_length(out_, body.size());
    out_.append("Connection: close\r\n\r\n").append(body);
    stream_.set_timeouts(std::chrono::seconds(1), write_timeout_);
    const bool sent = stream_.write(out_.data(), out_.size()).ok();
    if (access_log_) log_refused(status, sent ? body.size() : 0);
    if (sent) lingering_close();
  } catch (...) {
  }
}

void Connection::refuse(int status, const char* reason) {
  // The head's views point at buf_ + r_ (nothing moves from here on); the body stays unread:
  // read_body() reports the refusal.
  const RequestHead& h = parser_.head();
  head_end_ = r_ + parser_.head_size();
  start_body();
  body_error_status_ = status;
  request_.reset(&h, this);
  request_.set_connection_info(info_);
  response_.reset();
  try {
    options_.refusal(request_, response_, status, reason);
  } catch (const std::exception& e) {
    LIONET_LOG_ERROR(http_log(), "refusal handler for {} {} threw: {}", h.method, h.target, e.what());
    response_.reset();
  } catch (...) {
    LIONET_LOG_ERROR(http_log(), "refusal handler for {} {} threw a non-std exception", h.method, h.target);
    response_.reset();
  }
  if (response_.status() != status) {
    response_.reset();
    send_error(status, reason);
    return;
  }
  if (stats_) stats_->errors.fetch_add(1, std::memory_order_relaxed);
  log_rejected(info_, status, reason);
  bool keep = false;
  uint64_t body_sent = 0;
  const bool sent = send_response(keep, body_sent).ok();
  if (access_log_) log_access(status, body_sent);
  response_.reset();
  if (sent) lingering_close();
}

void Connection::lingering_close() noexcept { http::lingering_close(stream_, buf_.get(), cap_, write_timeout_); }

void Connection::fill_log_entry(AccessLogEntry& e, int status, uint64_t body_sent) noexcept {
  e.remote_addr = peer_.of(info_);  // one getpeername per connection, at its first line
  e.status = status;
  e.body_bytes_sent = body_sent;
  e.request_time = now() - request_start_;
  e.server = log_server_name(options_.tcp.name);
}

void Connection::log_access(int status, uint64_t body_sent) noexcept {
  const RequestHead& h = parser_.head();
  AccessLogEntry e;
  fill_log_entry(e, status, body_sent);
  e.method = h.method;
  e.target = h.target;
  e.protocol = h.version_minor == 0 ? "HTTP/1.0" : "HTTP/1.1";
  e.referer = h.headers.get("Referer");
  e.user_agent = h.headers.get("User-Agent");
  access_log_->log(e);
}

// A head refused before it was parsed whole: its request line is the first line of the input
// as received (up to its LF, CR dropped; the empty lines the parser skips are skipped), or "-"
// if no line ended (a request line over max_request_line, a timeout in the middle of it).
void Connection::log_refused(int status, uint64_t body_sent) noexcept {
  std::string_view in = buf_ ? std::string_view(buf_.get() + r_, w_ - r_) : std::string_view();
  while (in.starts_with("\r\n")) in.remove_prefix(2);
  std::string_view line;
  if (std::size_t eol = in.find('\n'); eol != std::string_view::npos) {
    line = in.substr(0, eol);
    if (line.ends_with('\r')) line.remove_suffix(1);
  }
  AccessLogEntry e;
  fill_log_entry(e, status, body_sent);
  e.request_line = line;
  access_log_->log(e);
}

bool Connection::handle_request() {
  ++served_;
  if (stats_) stats_->requests.fetch_add(1, std::memory_order_relaxed);
  start_body();
  const RequestHead& h = parser_.head();
  request_.reset(&h, this);
  request_.set_connection_info(info_);
  response_.reset();
  DisconnectWatch watch;
  if (options_.cancel_on_disconnect && info_) watch.begin(info_->socket, stopping_);
  try {
    (void)run_bounded(handler_, request_, response_, options_.handler_timeout);
  } catch (const std::exception& e) {
    LIONET_LOG_ERROR(http_log(), "handler for {} {} threw: {}", h.method, h.target, e.what());
    response_.reset();
    response_.reply(500, "Internal Server Error\n");
    response_.set_close();
  } catch (...) {
    LIONET_LOG_ERROR(http_log(), "handler for {} {} threw a non-std exception", h.method, h.target);
    response_.reset();
    response_.reply(500, "Internal Server Error\n");
    response_.set_close();
  }
  const bool client_gone = watch.end();
  if (stream_failed_ || client_gone) {  // the client went away: no answer (nginx logs these 499)
    if (access_log_) log_access(499, 0);
    return false;
  }
  if (body_error_status_) {
    // A handler that answered the body error with that very status keeps its own body (e.g. a
    // JSON error); anything else it set is replaced: the request was not read whole.
    const char* why = body_error_status_ == 413   ? "request body larger than max_body_bytes"
                      : body_error_status_ == 408 ? "request body not received in time"
                                                  : "malformed request body";
    log_rejected(info_, body_error_status_, why);
    overrule_for_body_error(response_, body_error_status_, why);
    response_.set_close();
    if (stats_) stats_->errors.fetch_add(1, std::memory_order_relaxed);
  }
  if (response_.status() == 101) [[unlikely]]
    return take_over();
  bool keep = h.keep_alive && !response_.close() && !(stopping_ && stopping_->load(std::memory_order_acquire)) &&
              !(options_.max_keepalive_requests && served_ >= options_.max_keepalive_requests);
  if (!body_done_) {
    if (h.expect_continue && !continue_sent_) {
      keep = false;  // the client waits for our word before sending: do not wait for its body
    } else if (h.body_kind == BodyKind::kContentLength && body_left_ > options_.drain_body_max) {
      keep = false;
    }
  }
  uint64_t body_sent = 0;
  bool send_ok = send_response(keep, body_sent).ok();
  if (access_log_) log_access(response_.status(), body_sent);
  response_.reset();  // drop file / cache references now, not at the next request
  if (!send_ok) return false;
  if (!keep) {
    if (!body_done_ || body_pos_ < w_) lingering_close();
    return false;
  }
  if (!body_done_ && !drain_body()) return false;
  r_ = body_pos_;
  if (r_ == w_) r_ = w_ = 0;
  return true;
}

// takeover.h's sequence, steps 2-4. The input buffer is kept while the function runs: the
// Request's views and Takeover::buffered point into it.
bool Connection::take_over() noexcept {
  const RequestHead& h = parser_.head();
  if (!response_.has_takeover() || h.version_minor == 0) {
    LIONET_LOG_ERROR(http_log(), "handler for {} {} answered 101 {}: answered 500 instead", h.method, h.target,
                     h.version_minor == 0 ? "to HTTP/1.0" : "without a connection takeover (Response::take_over)");
    response_.reset();
    response_.reply(500, "Internal Server Error\n");
    response_.set_close();
    bool keep = false;
    uint64_t body_sent = 0;
    const bool sent = send_response(keep, body_sent).ok();
    if (access_log_) log_access(500, body_sent);
    response_.reset();
    if (sent) lingering_close();
    return false;
  }
  // The new protocol's bytes start after the request's body: read what is left of it first.
  if (!body_done_ && !drain_body()) {
    response_.reset();
    return false;
  }
  try {
    out_.clear();
    append_status_line(out_, 101, response_.reason());
    out_.append(date_line());
    if (!options_.server_name.empty()) out_.append("Server: ").append(options_.server_name).append("\r\n");
    out_.append(response_.header_block());
    out_.append("\r\n");
  } catch (...) {
    response_.reset();
    return false;
  }
  stream_.set_timeouts(std::nullopt, write_timeout_);
  const bool sent = stream_.write(out_.data(), out_.size()).ok();
  if (access_log_) log_access(101, 0);
  TakeoverFn fn = std::move(response_.takeover());
  response_.reset();
  std::string().swap(out_);  // the connection may live long: the head's buffer goes back now
  if (!sent) return false;
  stream_.set_timeouts(std::nullopt, std::nullopt);
  Takeover t{stream_,   std::string_view(buf_.get() + body_pos_, w_ - body_pos_),        request_,
             stopping_, [](void* c) { static_cast<Connection*>(c)->release_buffers(); }, this};
  try {
    fn(t);
  } catch (const std::exception& e) {
    LIONET_LOG_ERROR(http_log(), "connection takeover for {} {} threw: {}", h.method, h.target, e.what());
  } catch (...) {
    LIONET_LOG_ERROR(http_log(), "connection takeover for {} {} threw a non-std exception", h.method, h.target);
  }
  return false;
}

// The connection becomes another protocol's for the rest of its life (a 101 takeover, which
// runs below this object): HTTP/1.1's input and output buffers go back first (an idle
// WebSocket would otherwise keep them: 4 KiB of touched memory each).
void Connection::release_buffers() noexcept {
  buf_.reset();
  cap_ = r_ = w_ = 0;
  std::string().swap(out_);
}

bool Connection::run(std::string& prefix) noexcept {
  try {
    TimePoint accepted = now();
    stream_.set_timeouts(std::nullopt, write_timeout_);
    bool first = true;
    while (read_head(first, accepted)) {
      first = false;
      if (!handle_request()) break;
    }
    if (handoff_) {
      prefix.assign(buf_.get() + r_, w_ - r_);  // the preface and what came with it
      return true;
    }
  } catch (const std::exception& e) {
    LIONET_LOG_ERROR(http_log(), "connection ended by exception: {}", e.what());
  }
  return false;
}
}  // namespace lionet::http::detail

namespace lionet::http {
void lingering_close(Stream& stream, void* buf, std::size_t cap, std::optional<Duration> write_timeout,
                     bool write_shut) noexcept {
  constexpr std::size_t kLingerBytes = 256 * 1024;
  constexpr auto kLingerTime = std::chrono::seconds(1);
  if (!write_shut) (void)stream.shutdown_write();
  const TimePoint deadline = now() + kLingerTime;
  std::size_t dropped = 0;
  while (dropped < kLingerBytes) {
    const Duration left = deadline - now();
    if (left <= Duration::zero()) return;
    stream.set_timeouts(left, write_timeout);
    auto r = stream.read(buf, cap);
    if (!r || *r == 0) return;
    dropped += *r;
  }
}
}  // namespace lionet::http
