// libFuzzer target for the HTTP/2 server's input path: the input is what a client sends after
// the connection preface, and it goes through the real session (lionet::http2::serve_connection:
// nghttp2's frames and HPACK, this project's callbacks, limits, handler fibers and responses)
// over an in-memory Stream that then reports end of input (the whole input handed over with the
// preface, or read in pieces of 1-16 bytes). Handlers read bodies, answer from
// memory and through a body writer. Checks: no crash, no sanitizer report, no hang (every
// connection ends), and the server always writes its SETTINGS first.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string>

#include "lionet/http/server.h"
#include "lionet/http2/server.h"
#include "lionet/sched/scheduler.h"

namespace {
using namespace std::chrono_literals;

// Reads hand over `in` in pieces of 1, 2, ... 16 bytes in turn (so frame headers split over
// reads), then end; writes are kept.
class MemoryStream final : public lionet::Stream {
 public:
  lionet::Result<size_t> read(void* buf, size_t n) override {
    const size_t k = std::min({n, in.size() - pos, size_t{1} + reads++ % 16});
    if (k > 0) std::memcpy(buf, in.data() + pos, k);
    pos += k;
    return k;
  }
  lionet::Result<size_t> readv(const iovec* iov, int iovcnt) override {
    return iovcnt > 0 ? read(iov[0].iov_base, iov[0].iov_len) : size_t{0};
  }
  lionet::Result<size_t> write(const void* buf, size_t n) override {
    out.append(static_cast<const char*>(buf), n);
    return n;
  }
  lionet::Result<size_t> writev(const iovec* iov, int iovcnt) override {
    size_t total = 0;
    for (int i = 0; i < iovcnt; ++i) total += *write(iov[i].iov_base, iov[i].iov_len);
    return total;
  }
  lionet::Result<void> shutdown_write() override { return {}; }
  void close() noexcept override {}
  void set_timeouts(std::optional<lionet::Duration>, std::optional<lionet::Duration>) override {}
  std::string out;
  std::string_view in;
  size_t pos = 0, reads = 0;
};

void handle(lionet::http::Request& q, lionet::http::Response& s) {
  if (q.path() == "/w") {
    s.set_body_writer([](lionet::http::BodyWriter& w) -> lionet::Result<void> {
      for (int i = 0; i < 3; ++i)
        if (auto r = w.write(std::string(5000, 'w')); !r) return r;
      return {};
    });
    return;
  }
  std::string body;
  if (!q.read_body(body)) {
    s.reply(400, "body failed\n");
    return;
  }
  s.reply(200, body.empty() ? std::string("ok\n") : body);
}

lionet::Scheduler& sched() {
  static lionet::Scheduler s({.threads = 1, .name = "h2fuzz"});
  return s;
}
}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string input(lionet::http::kHttp2Preface);
  const std::string_view client(reinterpret_cast<const char*>(data), size);
  // An odd-sized input arrives whole with the preface, an even-sized one read by read.
  if (size % 2 == 1) input.append(client);
  sched()
      .spawn([&] {
        MemoryStream stream;
        if (size % 2 == 0) stream.in = client;
        lionet::http::ServerOptions options;
        options.limits.max_body_bytes = 1 << 20;
        options.body_timeout = 100ms;
        options.write_timeout = 100ms;
        options.keepalive_timeout = 100ms;
        lionet::http2::Options h2;
        h2.max_requests = 50;
        const lionet::http::Handler handler = handle;
        lionet::http::ProtocolHandoff conn{stream, input, handler, options, nullptr, nullptr, nullptr};
        lionet::http2::serve_connection(conn, h2);
        // The server's first frame is its SETTINGS (RFC 9113 3.4).
        if (stream.out.size() < 9 || stream.out[3] != 0x4) std::abort();
      })
      .join();
  return 0;
}
