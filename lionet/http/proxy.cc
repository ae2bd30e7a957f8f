// lionet/http/proxy.cc: the reverse proxy's exchange (proxy.h): a request sent to an upstream
// picked for it, tried again elsewhere by the retry rules, the response head relayed and its
// body or upgraded stream pumped back. The upstreams themselves (balancing, failures, health
// checks, statistics) are proxy_upstream.cc; keep-alive pooling is idle_pool.h.
#include "lionet/http/proxy.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <algorithm>
#include <array>
#include <charconv>
#include <cstring>
#include <functional>
#include <iterator>
#include <mutex>
#include <stdexcept>
#include <thread>

#include "lionet/base/log_limiter.h"
#include "lionet/http/chunked_decoder.h"
#include "lionet/http/connect.h"
#include "lionet/http/detail/chars.h"
#include "lionet/http/detail/proxy_upstream.h"
#include "lionet/http/headers.h"
#include "lionet/http/response_head.h"
#include "lionet/http/status.h"
#include "lionet/log/log.h"
#include "lionet/net/address.h"
#include "lionet/net/socket.h"
#include "lionet/net/socket_stream.h"
#include "lionet/sched/scheduler.h"
#include "lionet/sync/cond_var.h"
#include "lionet/sync/mutex.h"

namespace lionet::http {
namespace {

bool idempotent(std::string_view m) {
  return m == "GET" || m == "HEAD" || m == "PUT" || m == "DELETE" || m == "OPTIONS" || m == "TRACE";
}

// Not forwarded either way: the connection-specific fields (RFC 9110 7.6.1), and the framing
// this proxy writes itself for each side (Content-Length, Trailer: bodies are relayed as they
// come, re-framed).
bool hop_by_hop(std::string_view n) {
  return is_hop_by_hop(n) || iequals(n, "content-length") || iequals(n, "trailer");
}

// Whether `connection` (a Connection field's value) names n.
bool named_by(std::string_view connection, std::string_view n) {
  return !connection.empty() && has_token(connection, n);
}

// The Connection fields of a message, joined (they are a list across repeated fields).
std::string_view connection_of(const HeaderList& h, std::string& joined) {
  size_t count = h.count("connection");
  if (count <= 1) return h.get("connection");
  joined.clear();
  for (const auto& f : h)
    if (iequals(f.name, "connection")) joined.append(joined.empty() ? "" : ",").append(f.value);
  return joined;
}

// A strict Content-Length (digits only; repeated fields must agree). nullopt: absent;
// UINT64_MAX: malformed.
std::optional<uint64_t> content_length(const HeaderList& h) {
  std::optional<uint64_t> v;
  for (const auto& f : h) {
    if (!iequals(f.name, "content-length")) continue;
    uint64_t n = 0;
    auto [p, ec] = std::from_chars(f.value.data(), f.value.data() + f.value.size(), n);
    if (f.value.empty() || ec != std::errc() || p != f.value.data() + f.value.size() || n == UINT64_MAX ||
        (v && *v != n))
      return UINT64_MAX;
    v = n;
  }
  return v;
}

}  // namespace

namespace {

// What one try ended with.
enum class TryEnd : uint8_t {
  kDone,  // the response is set (or handed to a writer / takeover)
  kConnectFailed,  // nothing was sent
  kNoResponse,  // sent (at least partly), then reset / end of stream / error before any response byte
  kTimeout,  // read_timeout before the response head
  kBadResponse,  // not HTTP, or a head over the buffer
  kClientGone,  // reading the client's body failed: the server answers for it
  kBodyCut,  // the upstream stopped taking the body (closed, reset): it may have answered
};

}  // namespace

// One exchange's state once the response head is known: shared by the handler and the body
// writer or takeover function that outlive it. Gives the connection back to the pool (or
// closes it) when done.
struct Proxy::Exchange {
  Proxy* proxy = nullptr;
  Upstream* up = nullptr;
  std::unique_ptr<UpConn> conn;
  std::size_t off = 0, end = 0;  // unconsumed bytes of conn->buf
  bool keep = false;  // the upstream lets the connection be reused
  bool cut = false;  // the request body was not sent whole: never reused

  Exchange(Proxy* p, Upstream* u) : proxy(p), up(u) { u->active.fetch_add(1, std::memory_order_relaxed); }
  ~Exchange() {
    up->active.fetch_sub(1, std::memory_order_relaxed);
    if (conn) conn->stream->close();
  }
  // The body ended cleanly: back to the pool if allowed.
  void release() {
    if (!conn) return;
    const ProxyOptions& o = proxy->options_;
    if (!keep || cut || off != end ||
        (o.max_requests_per_connection && conn->requests >= o.max_requests_per_connection)) {
      conn->stream->close();
      conn.reset();
      return;
    }
    conn->response.headers.trim(64);  // idle: keep room for a usual head, not an odd one's peak
    up->pool.put(std::move(conn));
  }
  // Reads more of the response into the buffer (compacting it first); the count or an error,
  // 0 at end of stream.
  Result<size_t> fill() {
    if (off == end) off = end = 0;
    if (end == conn->cap && off > 0) {
      std::memmove(conn->buf.get(), conn->buf.get() + off, end - off);
      end -= off;
      off = 0;
    }
    auto r = conn->stream->read(conn->buf.get() + end, conn->cap - end);
    if (r) end += *r;
    return r;
  }
  std::string_view pending() const { return {conn->buf.get() + off, end - off}; }
  // The upstream failed after its head was relayed (mid-body): counted against its health.
  void failed();
};

void Proxy::Exchange::failed() { mark_failure(*up, proxy->options_, proxy->upstreams_.size()); }

namespace {

void error_reply(Response& res, const ProxyOptions& o, int status, std::string_view why) {
  res.reset();
  if (o.json_errors) {
    std::string body = "{\"error\":\"";
    body.append(why).append("\"}\n");
    res.reply(status, body, "application/json");
  } else {
    res.reply(status, error_text(status, why));
  }
}

// The request head sent upstream, built into c.head. Pieces go in a line at a time
// (detail::append_all: one size change per line, literals without strlen).
void build_request_head(std::string& h, const Request& req, const ProxyOptions& o, const Proxy::Upstream& u,
                        bool upgrade) {
  using namespace std::string_view_literals;
  using detail::append_all;
  h.clear();
  std::string_view path = req.path();
  if (!o.strip_prefix.empty() && path.starts_with(o.strip_prefix) &&
      (path.size() == o.strip_prefix.size() || path[o.strip_prefix.size()] == '/' || o.strip_prefix.back() == '/'))
    path.remove_prefix(o.strip_prefix.size() - (o.strip_prefix.back() == '/' ? 1 : 0));
  const std::string_view slash = path.empty() || path.front() != '/' ? "/"sv : ""sv;
  const std::string_view query = req.query();
  std::string_view host = o.host ? std::string_view(*o.host) : req.host();
  if (host.empty()) host = u.host;
  append_all(h, req.method(), " "sv, o.add_prefix, slash, path, query.empty() ? ""sv : "?"sv, query,
             " HTTP/1.1\r\nHost: "sv, host, "\r\n"sv);

  std::string joined;
  const std::string_view connection = connection_of(req.headers(), joined);
  std::string xff, fwd, via;
  auto add_to = [](std::string& list, std::string_view v) { append_all(list, list.empty() ? ""sv : ", "sv, v); };
  for (const auto& f : req.headers()) {
    const std::string_view n = f.name;
    if (hop_by_hop(n) || iequals(n, "host") || iequals(n, "expect") || named_by(connection, n)) continue;
    if (iequals(n, "x-forwarded-for")) {
      add_to(xff, f.value);
      continue;
    }
    if (iequals(n, "forwarded")) {
      add_to(fwd, f.value);
      continue;
    }
    if (o.via && iequals(n, "via")) {
      add_to(via, f.value);
      continue;
    }
    if (iequals(n, "x-forwarded-proto") || iequals(n, "x-forwarded-host")) continue;  // set below
    append_all(h, n, ": "sv, f.value, "\r\n"sv);
  }
  auto peer = req.peer_address();
  append_all(h, "X-Forwarded-For: "sv, xff, xff.empty() ? ""sv : ", "sv);
  if (peer) append_ip(h, *peer, false);
  else h.append("unknown"sv);
  const std::string_view proto = req.is_tls() ? "https"sv : "http"sv;
  append_all(h, "\r\nX-Forwarded-Proto: "sv, proto, "\r\n"sv);
  if (!req.host().empty()) append_all(h, "X-Forwarded-Host: "sv, req.host(), "\r\n"sv);
  append_all(h, "Forwarded: "sv, fwd, fwd.empty() ? "for="sv : ", for="sv);
  if (peer) append_ip(h, *peer, true);
  else h.append("unknown"sv);
  // host= is a token or a quoted string: a Host has no '"' or '\\' (the parser checked).
  if (!req.host().empty()) append_all(h, ";host=\""sv, req.host(), "\""sv);
  append_all(h, ";proto="sv, proto, "\r\n"sv);
  if (o.via) {
    append_all(h, "Via: "sv, via, via.empty() ? ""sv : ", "sv, req.version_minor() == 0 ? "1.0 "sv : "1.1 "sv,
               o.via_name, "\r\n"sv);
  }
  if (upgrade) append_all(h, "Connection: upgrade\r\nUpgrade: "sv, req.header("upgrade"), "\r\n"sv);
  if (req.chunked()) {
    h.append("Transfer-Encoding: chunked\r\n"sv);
  } else if (req.has_body() || req.headers().has("content-length") || req.method() == "POST" || req.method() == "PUT" ||
             req.method() == "PATCH") {
    char d[24];
    auto [p, ec] = std::to_chars(d, d + sizeof d, req.content_length().value_or(0));
    append_all(h, "Content-Length: "sv, std::string_view(d, static_cast<std::size_t>(p - d)), "\r\n"sv);
  }
  h.append("\r\n"sv);
}

// The body read ahead of the first try (handle()): a chunked body's first byte, so that its
// first chunk-size line has been parsed before anything goes upstream.
struct ReadAhead {
  enum : uint8_t { kNone, kEmpty, kByte } state = kNone;
  char byte = 0;
};

// How a failed write of the body ends the try: kBodyCut when the upstream closed or reset (one
// that refuses an upload by its head, e.g. 413, answers and stops reading: its answer is still
// to be read), kNoResponse otherwise (a timeout: no answer to wait for).
TryEnd body_write_failed(std::error_code e) {
  return e == std::errc::broken_pipe || e == std::errc::connection_reset ? TryEnd::kBodyCut : TryEnd::kNoResponse;
}

// Copies the client's body upstream (re-framed), the byte read ahead first. kDone,
// kClientGone, or body_write_failed's.
TryEnd send_body(Request& req, UpConn& c, bool* touched, ReadAhead ahead) {
  const bool chunked = req.chunked();
  for (bool ended = ahead.state == ReadAhead::kEmpty; !ended;) {
    size_t n = 0;
    if (ahead.state == ReadAhead::kByte) {
      c.buf[0] = ahead.byte;
      n = 1;
      ahead.state = ReadAhead::kNone;
    }
    *touched = true;
    auto r = req.read_body(c.buf.get() + n, c.cap - n);
    if (!r) return TryEnd::kClientGone;
    ended = *r == 0;
    n += *r;
    if (n == 0) break;
    if (chunked) {
      std::string size;
      detail::append_hex(size, n);
      size.append("\r\n");
      iovec iov[3] = {{size.data(), size.size()}, {c.buf.get(), n}, {const_cast<char*>("\r\n"), 2}};
      if (auto w = c.stream->writev(iov, 3); !w) return body_write_failed(w.error());
    } else if (auto w = c.stream->write(c.buf.get(), n); !w) {
      return body_write_failed(w.error());
    }
  }
  if (chunked) {
    if (auto w = c.stream->write(std::string_view("0\r\n\r\n")); !w) return body_write_failed(w.error());
  }
  return TryEnd::kDone;
}

// Copies one direction of a tunnel until end of stream, an error, or both directions silent
// for the idle timeout. Half-closes the destination at end of stream.
void pump(Stream& from, Stream& to, char* buf, size_t cap, std::atomic<int64_t>& last, Duration idle) {
  for (;;) {
    auto r = from.read(buf, cap);
    if (!r) {
      if (r.error() == std::errc::timed_out &&
          ticks(now()) - last.load(std::memory_order_relaxed) < std::chrono::duration_cast<Duration>(idle).count())
        continue;  // the other direction is busy
      break;
    }
    if (*r == 0) {
      (void)to.shutdown_write();
      return;
    }
    last.store(ticks(now()), std::memory_order_relaxed);
    if (!to.write(buf, *r)) break;
  }
  from.close();
  to.close();
}

}  // namespace

void Proxy::handle(Request& req, Response& res) {
  const ProxyOptions& o = options_;
  const bool upgrade = req.can_take_over() && !req.header("upgrade").empty() && [&] {
    std::string joined;
    return has_token(connection_of(req.headers(), joined), "upgrade");
  }();
  const bool may_retry_sent = idempotent(req.method());
  const unsigned max_tries = o.max_tries ? o.max_tries : static_cast<unsigned>(upstreams_.size());
  const TimePoint deadline = o.try_timeout > Duration::zero() ? now() + o.try_timeout : TimePoint::max();
  uint64_t tried = 0;
  bool body_touched = false;
  int status = 502;
  const char* why = "no upstream answered";
  // A chunked body's framing is checked from its first chunk-size line before anything goes
  // upstream: one byte is read ahead (and replayed by every try), so a body malformed from its
  // start ("zz" for a size, an overflowing size) is refused by the server and the upstream
  // never sees the request's head. (Framing errors further in can only cut the upstream's copy
  // short: the body streams, it is never buffered whole.)
  ReadAhead ahead;
  if (req.chunked()) {
    auto r = req.read_body(&ahead.byte, 1);
    if (!r) return;  // the server answers the framing error and closes
    ahead.state = *r ? ReadAhead::kByte : ReadAhead::kEmpty;
  }

  for (unsigned tries = 0; tries < max_tries && (deadline == TimePoint::max() || now() < deadline);) {
    Upstream* u = pick(req, tried);
    if (!u) {
      if (tried == 0) why = "no live upstream";
      break;
    }
    tried |= uint64_t{1} << u->index;
    ++tries;
    // A reused connection the upstream closed meanwhile gets one more go on a new connection
    // to the same upstream (same rules as a retry), without counting a failure.
    for (int fresh = 0; fresh < 2; ++fresh) {
      auto ex = std::make_shared<Exchange>(this, u);
      u->requests.add();
      const TimePoint t0 = now();
      if (fresh == 0) ex->conn = take_idle(*u);
      if (!ex->conn) {
        auto c = connect_upstream(*u, o, deadline);
        if (!c) {
          mark_failure(*u, o, upstreams_.size());
          if (uint64_t held = 0; u->log_limit.admit(held))
            LIONET_LOG_WARN(proxy_log(), "connect to {} failed: {} ({} more failures since the last line)", u->address,
                            c.error().message(), held);
          why = "connecting to the upstream failed";
          goto next_upstream;  // nothing was sent: any method may go elsewhere
        }
        ex->conn = std::move(*c);
      }
      {
        UpConn& c = *ex->conn;
        const bool reused = c.reused;
        if (deadline == TimePoint::max()) {
          c.stream->set_timeouts(o.read_timeout, o.send_timeout);
        } else {  // try_timeout: no single call of this try may outlast what is left of it
          const Duration left = std::max<Duration>(deadline - now(), std::chrono::milliseconds(1));
          c.stream->set_timeouts(std::min(o.read_timeout, left), std::min(o.send_timeout, left));
        }
        build_request_head(c.head, req, o, *u, upgrade);
        ++c.requests;
        TryEnd end = TryEnd::kDone;
        if (!c.stream->write(c.head.data(), c.head.size())) end = TryEnd::kNoResponse;
        if (end == TryEnd::kDone && req.has_body()) end = send_body(req, c, &body_touched, ahead);
        if (end == TryEnd::kClientGone) return;  // the server answers the body error and closes
        if (end == TryEnd::kBodyCut) {  // read what the upstream said before it stopped reading
          ex->cut = true;
          end = TryEnd::kDone;
        }
        // The response head.
        ResponseHead& rh = c.response;
        size_t scan = 0;
        while (end == TryEnd::kDone) {
          auto st = parse_response_head(ex->pending(), rh, scan);
          if (st == HeadParse::kError || (st == HeadParse::kDone && rh.status > 599)) {
            end = TryEnd::kBadResponse;
            break;
          }
          if (st == HeadParse::kDone) {
            if (rh.status == 101 && !upgrade) {
              end = TryEnd::kBadResponse;  // switching protocols nobody asked for
            } else if (rh.status < 200 && rh.status != 101) {
              ex->off += rh.size;  // interim (100 Continue, 103): not passed on
              scan = 0;
              continue;
            }
            break;
          }
          if (ex->end - ex->off == c.cap) {
            end = TryEnd::kBadResponse;  // a head over buffer_size
            break;
          }
          scan = ex->end - ex->off;
          const bool nothing_yet = ex->end == 0;  // no response byte at all so far
          auto r = ex->fill();
          if (!r && r.error() == std::errc::timed_out) {
            end = TryEnd::kTimeout;
          } else if (!r || *r == 0) {
            end = nothing_yet ? TryEnd::kNoResponse : TryEnd::kBadResponse;
          }
        }
        if (end == TryEnd::kDone) {
          u->latency.observe_ns(
              static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(now() - t0).count()));
          if (relay(req, res, ex, rh, upgrade)) return;
          end = TryEnd::kBadResponse;
        }
        // This try failed.
        ex->conn->stream->close();
        ex->conn.reset();
        if (end == TryEnd::kNoResponse && reused && fresh == 0 && !body_touched && may_retry_sent) {
          continue;  // a stale pooled connection: once more on a new one, no failure counted
        }
        mark_failure(*u, o, upstreams_.size());
        if (end == TryEnd::kTimeout) {
          status = 504;
          why = "the upstream did not answer in time";
        } else if (end == TryEnd::kBadResponse) {
          status = 502;
          why = "the upstream's answer was not valid HTTP";
          if (uint64_t held = 0; u->log_limit.admit(held))
            LIONET_LOG_WARN(proxy_log(), "{} {}: invalid answer from {} ({} more failures since the last line)",
                            req.method(), req.path(), u->address, held);
          error_reply(res, o, status, why);
          return;  // it did answer: not retried
        } else {
          status = 502;
          why = "the upstream closed the connection without answering";
        }
        if (!may_retry_sent || body_touched) {
          error_reply(res, o, status, why);
          return;
        }
        break;
      }
    }
  next_upstream:;
  }
  error_reply(res, o, status, why);
}

bool Proxy::relay(Request& req, Response& res, const std::shared_ptr<Exchange>& ex, const ResponseHead& rh,
                  bool upgrade) {
  const ProxyOptions& o = options_;
  UpConn& c = *ex->conn;
  res.reset();
  res.set_status(rh.status);
  std::string joined;
  const std::string_view connection = connection_of(rh.headers, joined);
  for (const auto& f : rh.headers) {
    const std::string_view n = f.name;
    if (hop_by_hop(n) || named_by(connection, n) || iequals(n, "date") || iequals(n, "server")) continue;
    if (rh.valid_fields) res.add_checked_header(n, f.value);
    else if (!res.add_header(n, f.value)) return false;
  }
  if (o.via) {
    std::string v(rh.headers.get("via"));
    v.append(v.empty() ? "" : ", ").append(rh.version_minor == 0 ? "1.0 " : "1.1 ").append(o.via_name);
    res.set_header("Via", v);
  }
  ex->off += rh.size;
  ex->keep = rh.keep_alive;

  if (rh.status == 101) {  // an upgrade (handle() lets a 101 through only for one)
    res.add_header("Connection", "Upgrade");
    res.add_header("Upgrade", rh.headers.get("upgrade"));
    ex->keep = false;
    const Duration idle = o.tunnel_idle_timeout;
    res.take_over([ex, idle](Takeover& t) {
      UpConn& c = *ex->conn;
      Stream& up = *c.stream;
      up.set_timeouts(idle, idle);
      t.stream.set_timeouts(idle, idle);
      if (!ex->pending().empty() && !t.stream.write(ex->pending())) return;
      if (!t.buffered.empty() && !up.write(t.buffered)) return;
      t.release_input();
      std::atomic<int64_t> last{ticks(now())};
      Scheduler* sched = Scheduler::current();
      auto other = sched->spawn([&] { pump(up, t.stream, c.buf.get(), c.cap, last, idle); });
      std::vector<char> buf(c.cap);
      pump(t.stream, up, buf.data(), buf.size(), last, idle);
      CancelShield shield;  // `other` uses this frame
      other.join();
    });
    return true;
  }

  const bool no_body = req.is_head() || !status_has_body(rh.status);
  std::string_view te = rh.headers.get("transfer-encoding");
  if (rh.headers.count("transfer-encoding") > 1) te = "chunked, x";  // not a single chunked coding: read to close
  const auto cl = content_length(rh.headers);
  if (no_body) {
    if (!ex->pending().empty()) ex->keep = false;
    if (req.is_head() && status_has_body(rh.status)) {
      // The GET's framing without its bytes: the upstream's length, or none when its GET body
      // would come chunked or until close (the server then says chunked, as for the GET; a
      // memory body here would claim Content-Length: 0).
      std::optional<uint64_t> len;
      if (te.empty() && cl && *cl != UINT64_MAX) len = *cl;
      res.set_body_writer([](BodyWriter&) -> Result<void> { return {}; }, len);
    }
    ex->release();
    return true;
  }
  if (!te.empty()) {
    // Chunked when it is the only coding; anything else is read until the upstream closes.
    if (iequals(trim_ows(te), "chunked")) {
      // The whole body in the buffer already: decode it here and send it with a length.
      ChunkedDecoder dec;
      std::string& body = res.body();
      body.clear();
      size_t pos = ex->off;
      while (pos < ex->end && !dec.done() && !dec.failed()) {
        auto s = dec.next(c.buf.get() + pos, ex->end - pos);
        body.append(s.data, s.data_size);
        pos += s.consumed;
        if (s.consumed == 0) break;
      }
      if (dec.failed()) return false;
      if (dec.done()) {
        ex->off = pos;
        ex->release();
        return true;
      }
      body.clear();
      res.set_body_writer([ex](BodyWriter& w) -> Result<void> {
        ChunkedDecoder d;
        for (;;) {
          while (ex->off < ex->end && !d.done() && !d.failed()) {
            auto s = d.next(ex->conn->buf.get() + ex->off, ex->end - ex->off);
            ex->off += s.consumed;
            if (s.data_size)
              if (auto r = w.write(std::string_view(s.data, s.data_size)); !r) return r;
            if (s.consumed == 0) break;
          }
          if (d.failed()) {
            ex->failed();
            return errno_error(EPROTO);
          }
          if (d.done()) {
            ex->release();
            return {};
          }
          auto r = ex->fill();
          if (!r || *r == 0) {
            ex->failed();
            return r ? errno_error(EPIPE) : r.error();
          }
        }
      });
      return true;
    }
    ex->keep = false;
  } else if (cl) {
    if (*cl == UINT64_MAX) return false;
    const uint64_t n = *cl;
    if (ex->end - ex->off >= n) {  // all here
      res.set_body(std::string_view(c.buf.get() + ex->off, n));
      ex->off += n;
      ex->release();
      return true;
    }
    res.set_body_writer(
        [ex, n](BodyWriter& w) -> Result<void> {
          uint64_t left = n;
          for (;;) {
            size_t have = std::min<uint64_t>(left, ex->end - ex->off);
            if (have) {
              if (auto r = w.write(std::string_view(ex->conn->buf.get() + ex->off, have)); !r) return r;
              ex->off += have;
              left -= have;
            }
            if (left == 0) {
              ex->release();
              return {};
            }
            ex->off = ex->end = 0;
            auto r = ex->conn->stream->read(ex->conn->buf.get(), std::min<uint64_t>(left, ex->conn->cap));
            if (!r || *r == 0) {
              ex->failed();
              return r ? errno_error(EPIPE) : r.error();
            }
            ex->end = *r;
          }
        },
        n);
    return true;
  } else {
    ex->keep = false;  // delimited by the upstream's close
  }
  res.set_body_writer([ex](BodyWriter& w) -> Result<void> {
    for (;;) {
      if (ex->off < ex->end) {
        if (auto r = w.write(ex->pending()); !r) return r;
      }
      ex->off = ex->end = 0;
      auto r = ex->fill();
      if (!r) {
        ex->failed();
        return r.error();
      }
      if (*r == 0) return {};  // closed: the body's end (the connection is not reused)
    }
  });
  return true;
}

}  // namespace lionet::http
