// lionet/http/client.cc: Client (see client.h).
#include "lionet/http/client.h"

#include <algorithm>
#include <charconv>
#include <cstring>

#include "lionet/http/chunked_decoder.h"
#include "lionet/http/connect.h"
#include "lionet/http/headers.h"
#include "lionet/http/response_head.h"
#include "lionet/http/status.h"
#include "lionet/net/address.h"
#include "lionet/net/socket.h"
#include "lionet/net/socket_stream.h"
#include "lionet/sync/mutex.h"

namespace lionet::http {
namespace {
constexpr size_t kReadChunk = 16384;

// Applies what is left of the exchange's deadline to the stream's next calls.
bool arm(Stream& s, TimePoint deadline) {
  Duration left = deadline - now();
  if (left <= Duration::zero()) return false;
  s.set_timeouts(left, left);
  return true;
}

std::string key_of(const Url& u) { return u.scheme + "://" + u.host + ":" + std::to_string(u.port); }

}  // namespace

std::string_view ClientResponse::header(std::string_view name) const noexcept {
  for (const auto& [n, v] : headers)
    if (iequals(n, name)) return v;
  return {};
}

// One host's HTTP/2 connection. `conn` is guarded by Client::mu_; `connecting` (a fiber-aware
// lock, held across the connect) makes the fibers that need a connection meanwhile wait for it.
struct Client::H2Host {
  Mutex connecting;
  std::shared_ptr<MultiplexedConnection> conn;
};

Client::Client(ClientOptions options) : options_(std::move(options)) {}
Client::~Client() = default;

std::shared_ptr<IdlePool> Client::pool(const std::string& key) {
  std::lock_guard<std::mutex> g(mu_);
  auto& p = pools_[key];
  if (!p)
    p = std::make_shared<IdlePool>(
        IdlePoolOptions{.max_idle = options_.max_idle_per_host, .idle_timeout = options_.idle_timeout});
  return p;
}

std::size_t Client::idle_connections() const {
  std::lock_guard<std::mutex> g(mu_);
  std::size_t n = 0;
  for (const auto& [k, p] : pools_) n += p->size();
  return n;
}

void Client::close_idle() {
  std::unordered_map<std::string, std::shared_ptr<IdlePool>> all;
  std::vector<std::shared_ptr<MultiplexedConnection>> unused;  // HTTP/2: no exchange in flight
  {
    std::lock_guard<std::mutex> g(mu_);
    all.swap(pools_);
    // An exchange holds its own reference, taken under mu_: a count of one is ours alone.
    for (auto& [k, h] : h2_)
      if (h->conn && h->conn.use_count() == 1) unused.push_back(std::move(h->conn));
  }
  for (auto& [k, p] : all) p->close_all();
  for (auto& c : unused) c->close();
}

Result<std::unique_ptr<Stream>> Client::connect(const Url& url, TimePoint deadline, int* fd) {
  ConnectOptions co;
  co.tls = url.scheme == "https";
  co.tls_context = options_.tls;
  co.host = url.host;
  co.alpn = options_.http2 ? Alpn::kH2First : Alpn::kContext;
  co.connect_deadline = std::min(deadline, now() + options_.connect_timeout);
  co.deadline = deadline;
  return connect_stream(url.host, url.port, co, fd);
}

Result<std::shared_ptr<MultiplexedConnection>> Client::http2_connection(const Url& url, const std::string& key,
                                                                        TimePoint deadline,
                                                                        std::unique_ptr<PooledConnection>* h1) {
  std::shared_ptr<H2Host> host;
  auto usable = [&]() -> std::shared_ptr<MultiplexedConnection> {
    std::lock_guard<std::mutex> g(mu_);
    auto& h = h2_[key];
    if (!h) h = std::make_shared<H2Host>();
    host = h;
    return h->conn && h->conn->open() ? h->conn : nullptr;
  };
  if (auto c = usable()) return c;
  std::lock_guard<Mutex> connecting(host->connecting);
  if (auto c = usable()) return c;  // made while we waited
  {
    std::lock_guard<std::mutex> g(mu_);
    if (h1_only_.count(key)) return std::shared_ptr<MultiplexedConnection>();
  }
  int fd = -1;
  auto c = connect(url, deadline, &fd);
  if (!c) return c.error();
  if (url.scheme == "https" && (*c)->application_protocol() != "h2") {
    {
      std::lock_guard<std::mutex> g(mu_);
      h1_only_[key] = true;
    }
    *h1 = std::make_unique<PooledConnection>();
    (*h1)->stream = std::move(*c);
    (*h1)->fd = fd;
    return std::shared_ptr<MultiplexedConnection>();
  }
  std::shared_ptr<MultiplexedConnection> m = options_.http2(std::move(*c), options_);
  if (!m) return errno_error(EPROTO);
  std::shared_ptr<MultiplexedConnection> old;  // closed outside the lock
  {
    std::lock_guard<std::mutex> g(mu_);
    old = std::exchange(host->conn, m);
  }
  return m;
}

std::size_t Client::http2_connections() const {
  std::lock_guard<std::mutex> g(mu_);
  std::size_t n = 0;
  for (const auto& [k, h] : h2_) n += h->conn && h->conn->open();
  return n;
}

Result<ClientResponse> Client::request(const ClientRequest& req) {
  auto url = parse_url(req.url);
  if (!url) return errno_error(EINVAL);
  // The request's own timeout (else the client's), and never past the calling fiber's deadline
  // (sched/cancel.h DeadlineScope).
  TimePoint deadline = now() + req.timeout.value_or(options_.request_timeout);
  if (const auto mine = this_fiber::deadline(); mine && *mine < deadline) deadline = *mine;
  std::string key = key_of(*url);
  bool h2 = options_.http2 && (url->scheme == "https" ? options_.tls != nullptr : options_.h2c);
  for (int attempt = 0; h2 && attempt < 2; ++attempt) {
    std::unique_ptr<PooledConnection> h1;
    auto m = http2_connection(*url, key, deadline, &h1);
    if (!m) return m.error();
    if (!*m) return http1_request(*url, key, req, deadline, std::move(h1));  // the server chose HTTP/1.1
    bool unprocessed = false;
    auto r = (*m)->exchange(*url, req, deadline, &unprocessed);
    if (!r && r.error() == std::errc::timed_out) return make_error_code(ClientErrc::kResponseTimeout);
    // Refused by a GOAWAY or REFUSED_STREAM (not processed): once more on a new connection.
    if (r || !unprocessed || req.body_writer) return r;
  }
  if (h2) return errno_error(ECONNRESET);
  return http1_request(*url, key, req, deadline, nullptr);
}

Result<ClientResponse> Client::http1_request(const Url& url, const std::string& key, const ClientRequest& req,
                                             TimePoint deadline, std::unique_ptr<PooledConnection> first) {
  const std::shared_ptr<IdlePool> idle = pool(key);
  for (int attempt = 0; attempt < 2; ++attempt) {
    std::unique_ptr<PooledConnection> c = std::move(first);  // a connection just made (ALPN chose 1.1)
    bool reused = false;
    if (!c && attempt == 0) {
      c = idle->take();
      reused = c != nullptr;
    }
    if (!c) {
      c = std::make_unique<PooledConnection>();
      auto s = connect(url, deadline, &c->fd);
      if (!s) return s.error();
      c->stream = std::move(*s);
    }
    bool keep = false, any_byte = false;
    auto r = exchange(*c->stream, url, req, deadline, &keep, &any_byte);
    if (r) {
      r->reused_connection = reused;
      if (keep) {
        idle->put(std::move(c));
      } else {
        c->stream->close();
      }
      return r;
    }
    c->stream->close();
    // A kept-alive connection the server closed meanwhile: send once more on a new one.
    bool retry = reused && !any_byte && !req.body_writer && r.error() != std::errc::timed_out;
    if (!retry) {
      // Connected, then no (whole) response in time: say so, not "Connection timed out".
      if (r.error() == std::errc::timed_out) return make_error_code(ClientErrc::kResponseTimeout);
      return r.error();
    }
  }
  return errno_error(EIO);
}

namespace {
class ClientCategory final : public std::error_category {
 public:
  const char* name() const noexcept override { return "lionet.http.client"; }
  std::string message(int c) const override {
    switch (static_cast<ClientErrc>(c)) {
      case ClientErrc::kResponseTimeout:
        return "response timed out: the connection was made, the whole response did not arrive before the "
               "request's deadline";
    }
    return "unknown http client error";
  }
  std::error_condition default_error_condition(int c) const noexcept override {
    if (static_cast<ClientErrc>(c) == ClientErrc::kResponseTimeout) return std::errc::timed_out;
    return {c, *this};
  }
};
}  // namespace

std::error_code make_error_code(ClientErrc e) noexcept {
  static const ClientCategory category;
  return {static_cast<int>(e), category};
}

Result<ClientResponse> Client::get(std::string_view url) {
  ClientRequest q;
  q.url = std::string(url);
  return request(q);
}

Result<ClientResponse> Client::head(std::string_view url) {
  ClientRequest q;
  q.method = "HEAD";
  q.url = std::string(url);
  return request(q);
}

Result<ClientResponse> Client::post(std::string_view url, std::string body, std::string_view content_type) {
  ClientRequest q;
  q.method = "POST";
  q.url = std::string(url);
  q.body = std::move(body);
  q.headers.emplace_back("Content-Type", std::string(content_type));
  return request(q);
}

Result<ClientResponse> Client::exchange(Stream& s, const Url& url, const ClientRequest& req, TimePoint deadline,
                                        bool* keep_alive, bool* any_byte) {
  // 1. The request.
  std::string head;
  head.reserve(256);
  head.append(req.method).append(" ").append(url.target).append(" HTTP/1.1\r\nHost: ").append(url.authority);
  head.append("\r\n");
  if (!options_.user_agent.empty()) head.append("User-Agent: ").append(options_.user_agent).append("\r\n");
  for (const auto& [n, v] : req.headers) head.append(n).append(": ").append(v).append("\r\n");
  bool chunked_up = false;
  if (req.body_writer) {
    if (req.body_length) {
      head.append("Content-Length: ").append(std::to_string(*req.body_length)).append("\r\n");
    } else {
      head.append("Transfer-Encoding: chunked\r\n");
      chunked_up = true;
    }
  } else if (!req.body.empty() || detail::method_has_body_by_default(req.method)) {
    head.append("Content-Length: ").append(std::to_string(req.body.size())).append("\r\n");
  }
  head.append("\r\n");
  if (!arm(s, deadline)) return errno_error(ETIMEDOUT);
  if (req.body_writer) {
    BodyWriter w(s, chunked_up, head);
    if (auto r = req.body_writer(w); !r) return r.error();
    if (req.body_length && w.bytes_written() != *req.body_length) return errno_error(EINVAL);
    if (auto r = w.finish(); !r) return r.error();
  } else {
    iovec iov[2] = {{head.data(), head.size()}, {const_cast<char*>(req.body.data()), req.body.size()}};
    if (auto r = s.writev(iov, req.body.empty() ? 1 : 2); !r) return r.error();
  }

  // 2. The response head (interim 1xx responses are skipped).
  std::string buf;
  size_t head_end = 0;
  ClientResponse resp;
  auto read_some = [&]() -> Result<size_t> {
    if (!arm(s, deadline)) return errno_error(ETIMEDOUT);
    size_t old = buf.size();
    buf.resize(old + kReadChunk);
    auto r = s.read(buf.data() + old, kReadChunk);
    buf.resize(old + (r ? *r : 0));
    if (r && *r > 0) *any_byte = true;
    return r;
  };
  for (;;) {
    ResponseHead rh;
    size_t scan = 0;
    HeadParse st;
    while ((st = parse_response_head(buf, rh, scan)) == HeadParse::kNeedMore) {
      if (buf.size() > options_.max_response_head_bytes) return errno_error(EMSGSIZE);
      scan = buf.size();
      auto r = read_some();
      if (!r) return r.error();
      if (*r == 0) return errno_error(buf.empty() ? ECONNRESET : EPROTO);
    }
    if (st == HeadParse::kError || rh.status > 999) return errno_error(EPROTO);
    head_end = rh.size;
    resp.version_minor = rh.version_minor;
    resp.protocol = resp.version_minor == 0 ? "HTTP/1.0" : "HTTP/1.1";
    resp.status = rh.status;
    resp.reason = std::string(rh.reason);
    resp.headers.clear();
    for (const auto& f : rh.headers) resp.headers.emplace_back(std::string(f.name), std::string(f.value));
    *keep_alive = rh.keep_alive;
    if (rh.status >= 100 && rh.status < 200 && rh.status != 101) {
      buf.erase(0, head_end);
      continue;
    }
    break;
  }

  // 3. Framing and keep-alive.
  const bool no_body = req.method == "HEAD" || !status_has_body(resp.status);
  std::string_view te = resp.header("transfer-encoding");
  std::string_view cl = resp.header("content-length");
  std::string rest = buf.substr(head_end);
  if (no_body) {
    if (!rest.empty()) *keep_alive = false;
    return resp;
  }
  if (!te.empty()) {
    if (!has_token(te, "chunked")) return errno_error(EPROTO);
    resp.chunked = true;
    ChunkedDecoder::Limits l;
    l.max_body = options_.max_body_bytes;
    ChunkedDecoder dec(l);
    buf = std::move(rest);
    size_t pos = 0;
    for (;;) {
      while (pos < buf.size() && !dec.done() && !dec.failed()) {
        auto st = dec.next(buf.data() + pos, buf.size() - pos);
        resp.body.append(st.data, st.data_size);
        pos += st.consumed;
        if (st.consumed == 0) break;
      }
      if (dec.failed()) return errno_error(dec.error_status() == 413 ? EMSGSIZE : EPROTO);
      if (dec.done()) break;
      buf.erase(0, pos);
      pos = 0;
      auto r = read_some();
      if (!r) return r.error();
      if (*r == 0) return errno_error(EPROTO);
    }
    if (pos != buf.size()) *keep_alive = false;  // bytes after the body: not ours to reuse
    return resp;
  }
  if (!cl.empty()) {
    uint64_t n = 0;
    auto [p, ec] = std::from_chars(cl.data(), cl.data() + cl.size(), n);
    if (ec != std::errc() || p != cl.data() + cl.size()) return errno_error(EPROTO);
    if (n > options_.max_body_bytes) return errno_error(EMSGSIZE);
    if (rest.size() > n) {
      *keep_alive = false;
      rest.resize(n);
    }
    resp.body = std::move(rest);
    resp.body.resize(n);
    size_t have = std::min<uint64_t>(n, resp.body.size());
    have = std::min<size_t>(have, buf.size() - head_end);
    while (have < n) {
      if (!arm(s, deadline)) return errno_error(ETIMEDOUT);
      auto r = s.read(resp.body.data() + have, n - have);
      if (!r) return r.error();
      if (*r == 0) return errno_error(EPROTO);
      have += *r;
    }
    return resp;
  }
  // Until the server closes.
  *keep_alive = false;
  resp.body = std::move(rest);
  for (;;) {
    if (!arm(s, deadline)) return errno_error(ETIMEDOUT);
    size_t old = resp.body.size();
    if (old > options_.max_body_bytes) return errno_error(EMSGSIZE);
    resp.body.resize(old + kReadChunk);
    auto r = s.read(resp.body.data() + old, kReadChunk);
    resp.body.resize(old + (r ? *r : 0));
    if (!r) return r.error();
    if (*r == 0) break;
  }
  return resp;
}
}  // namespace lionet::http
