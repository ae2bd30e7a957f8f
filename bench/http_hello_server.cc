// bench/http_hello_server.cc: the dynamic "hello" HTTP server of the HTTP benchmarks: a
// lionet::http::Server on 127.0.0.1 with a Router whose GET /hello answers "hello world"
// (text/plain, Content-Length 11) from memory. Everything else is 404.
//
//   http_hello_server PORT [--threads N] [--backend epoll|io_uring|io_uring-poll] [--max-connections N]
//                     [--header-timeout-ms MS] [--accept-batch N] [--http2]
//                     [--access-log PATH] [--access-log-format combined|json] [--basic-auth HTPASSWD]
// --basic-auth: /hello behind lionet/http/auth.h's Basic authentication against the bcrypt
// htpasswd file (its defaults: 1024 cached credentials, the brake on); scripts/bench-http-hello.sh
// measures the cost with one credential, verified once and then taken from the cache.
// --http2: h2c with prior knowledge beside HTTP/1.1 (lionet/http2).
// --access-log: one line per response into PATH (or "stdout"), lionet/http/access_log.h with
// its defaults (1 MiB buffer, 1 s flush interval); off unless given (scripts/bench-http-hello.sh
// measures the cost: "access log on vs off").
//
// Defaults: 1 worker, epoll, ServerOptions' connection limit (none) and header timeout; the
// last two are there for scripts/abuse.sh (flood and slowloris). Runs until SIGINT/SIGTERM, then stops gracefully and prints
// `RESULT requests=N accepted=N threads=T errors=N` as its last line (errors = requests the
// server itself answered 4xx/5xx: malformed input, limits, timeouts).
#include <cstdio>
#include <cstdlib>
#include <string>

#include "bench/common/server_main.h"
#include "lionet/http/access_log.h"
#include "lionet/http/auth.h"
#include "lionet/http/router.h"
#include "lionet/http/server.h"
#include "lionet/http2/server.h"

namespace {
[[noreturn]] void usage(const char* argv0) {
  std::fprintf(stderr,
               "usage: %s PORT [--threads N] [--backend epoll|io_uring|io_uring-poll] [--max-connections N] "
               "[--header-timeout-ms MS] [--accept-batch N] [--http2] [--access-log PATH] "
               "[--access-log-format combined|json] [--basic-auth HTPASSWD]\n",
               argv0);
  std::exit(2);
}
}  // namespace

int main(int argc, char** argv) {
  int port = -1, threads = 1;
  long max_connections = 0, header_timeout_ms = 0;  // 0: ServerOptions' default
  long accept_batch = -1;  // -1: TcpServerOptions' default
  bool http2 = false;
  std::string backend = "epoll";
  std::string access_log, access_log_format = "combined", basic_auth;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--threads" && i + 1 < argc) {
      threads = std::atoi(argv[++i]);
    } else if (a == "--backend" && i + 1 < argc) {
      backend = argv[++i];
    } else if (a == "--max-connections" && i + 1 < argc) {
      max_connections = std::atol(argv[++i]);
    } else if (a == "--header-timeout-ms" && i + 1 < argc) {
      header_timeout_ms = std::atol(argv[++i]);
    } else if (a == "--accept-batch" && i + 1 < argc) {
      accept_batch = std::atol(argv[++i]);
    } else if (a == "--http2") {
      http2 = true;
    } else if (a == "--access-log" && i + 1 < argc) {
      access_log = argv[++i];
    } else if (a == "--basic-auth" && i + 1 < argc) {
      basic_auth = argv[++i];
    } else if (a == "--access-log-format" && i + 1 < argc) {
      access_log_format = argv[++i];
    } else if (!a.empty() && a[0] != '-' && port < 0) {
      port = std::atoi(a.c_str());
    } else {
      usage(argv[0]);
    }
  }
  const bool known = backend == "epoll" || backend == "io_uring" || backend == "io_uring-poll";
  if (threads < 1 || port < 0 || port > 65535 || !known || max_connections < 0 || header_timeout_ms < 0 ||
      !lionet::http::parse_access_log_format(access_log_format))
    usage(argv[0]);

  // The default runtime: the scheduler's own IO driver, on the backend asked for.
  lionet::bench::ServerMain runtime(threads, "hello", backend);
  lionet::http::Router router;
  // Answers from memory: marked nonblocking, so HTTP/2 answers it on the connection's fiber.
  lionet::http::Handler hello = lionet::http::nonblocking([](lionet::http::Request&, lionet::http::Response& res) {
    res.set_header("Content-Type", "text/plain");
    res.set_body_view("hello world");
  });
  if (!basic_auth.empty()) {
    auto auth = std::make_shared<lionet::http::Authenticator>(
        lionet::http::AuthOptions{.kind = lionet::http::AuthKind::kBasic, .realm = "bench"});
    try {
      auth->set_users(lionet::http::HtpasswdUsers::load(basic_auth));
    } catch (const std::exception& e) {
      std::fprintf(stderr, "%s\n", e.what());
      return 1;
    }
    hello = auth->wrap(std::move(hello));
  }
  router.get("/hello", std::move(hello));
  lionet::http::ServerOptions opts;
  opts.runs_inline = router.inline_predicate();
  opts.tcp.reuse_port_per_worker = threads > 1;
  opts.tcp.max_connections = static_cast<std::size_t>(max_connections);
  if (accept_batch >= 0) opts.tcp.accept_batch = static_cast<unsigned>(accept_batch);
  if (header_timeout_ms > 0) opts.header_timeout = std::chrono::milliseconds(header_timeout_ms);
  if (http2) lionet::http2::enable(opts);
  if (!access_log.empty()) {
    try {
      opts.access_log = std::make_shared<lionet::http::AccessLog>(lionet::http::AccessLogOptions{
          .path = access_log, .format = *lionet::http::parse_access_log_format(access_log_format)});
    } catch (const std::exception& e) {
      std::fprintf(stderr, "%s\n", e.what());
      return 1;
    }
  }
  lionet::http::Server server(runtime.scheduler(), router.handler(), opts);
  try {
    server.listen(lionet::Address::ipv4_loopback(static_cast<uint16_t>(port)));
  } catch (const std::exception& e) {
    std::fprintf(stderr, "%s\n", e.what());
    return 1;
  }
  server.start();
  std::fprintf(stderr, "http_hello_server: listening on %s, %d worker(s), backend %s, access log %s, basic auth %s\n",
               server.addresses()[0].to_string().c_str(), threads, runtime.backend(),
               access_log.empty() ? "off" : access_log.c_str(), basic_auth.empty() ? "off" : basic_auth.c_str());
  runtime.wait_for_stop();
  server.stop(std::chrono::seconds(1));
  runtime.stop();
  std::printf("RESULT requests=%llu accepted=%llu threads=%d errors=%llu\n",
              static_cast<unsigned long long>(server.stats().requests.load()),
              static_cast<unsigned long long>(server.tcp().accepted()), threads,
              static_cast<unsigned long long>(server.stats().errors.load()));
  return 0;
}
