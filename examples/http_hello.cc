// examples/http_hello.cc: an HTTP/1.1 server with a router. Every handler is plain blocking
// code running in its connection's fiber: a handler that sleeps or waits parks only that fiber.
//
//   ./http_hello [port] [threads]       (defaults 8090 and 2: not 8080, which `make run` holds; port 0 = any free port, printed)
//   curl http://127.0.0.1:8090/hello
//
// Routes:
//   GET  /hello           "hello world"
//   GET  /hello/{name}    "hello, <name>" ({name} is a path parameter, percent-decoded here)
//   POST /echo            the request body back; X-Body-Bytes says how long it was
//   GET  /slow?ms=N       waits N ms (at most 5000) and says so: 100 of these at once on ONE
//                         thread take about N ms in all, not 100 x N
//   GET  /stats           requests handled so far by the handlers above
// Anything else is 404; a known path with another method is 405 with an Allow header (the
// router does both). An `after` middleware stamps every response with X-Example: http_hello.
// SIGINT/SIGTERM: stop accepting, let requests in flight finish (up to 5 s), exit 0.
#include <signal.h>

#include <algorithm>
#include <atomic>
#include <charconv>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>

#include "lionet/http/router.h"
#include "lionet/http/server.h"
#include "lionet/http/url.h"
#include "lionet/sched/scheduler.h"

using lionet::http::Request;
using lionet::http::Response;

namespace {
std::atomic<uint64_t> handled{0};  // any handler may run on any worker thread: atomic

void hello(Request&, Response& res) {
  ++handled;
  res.reply(200, "hello world\n");
}

void hello_name(Request& req, Response& res) {
  ++handled;
  auto name = lionet::http::percent_decode(req.param("name"));
  if (!name) return res.reply(400, "bad percent-encoding in the name\n");
  res.reply(200, "hello, " + *name + "\n");
}

void echo(Request& req, Response& res) {
  ++handled;
  std::string body;
  if (!req.read_body(body)) return;  // the server answers the error (413, 400, 408) itself
  res.set_header("X-Body-Bytes", std::to_string(body.size()));
  res.set_content_type(req.header("Content-Type").empty() ? "application/octet-stream" : req.header("Content-Type"));
  res.set_body(std::move(body));
}

void slow(Request& req, Response& res) {
  ++handled;
  const std::string ms_param = req.query_param("ms").value_or("");
  std::string_view ms_text = ms_param;
  int ms = 0;
  auto [end, ec] = std::from_chars(ms_text.data(), ms_text.data() + ms_text.size(), ms);
  if (ec != std::errc() || end != ms_text.data() + ms_text.size() || ms < 0 || ms > 5000) {
    return res.reply(400, "use /slow?ms=N with N in 0..5000\n");
  }
  // Looks blocking; parks this fiber on a timer while the worker serves other connections.
  lionet::this_fiber::sleep_for(std::chrono::milliseconds(ms));
  res.reply(200, "waited " + std::to_string(ms) + " ms\n");
}

void stats(Request&, Response& res) { res.reply(200, "handled " + std::to_string(handled.load()) + " requests\n"); }
}  // namespace

int main(int argc, char** argv) {
  const int port = argc > 1 ? std::atoi(argv[1]) : 8090;
  const int threads = argc > 2 ? std::atoi(argv[2]) : 2;
  if (port < 0 || port > 65535 || threads < 1 || threads > 64) {
    std::fprintf(stderr, "usage: %s [port] [threads]\n", argv[0]);
    return 2;
  }

  // Block SIGINT/SIGTERM in every thread; main waits for them below.
  sigset_t sigs;
  sigemptyset(&sigs);
  sigaddset(&sigs, SIGINT);
  sigaddset(&sigs, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &sigs, nullptr);

  lionet::Scheduler sched({.threads = threads, .name = "http"});  // comes with its IO driver

  // The route table. It must not change once the server runs, and must outlive it.
  lionet::http::Router router;
  router.get("/hello", hello);
  router.get("/hello/{name}", hello_name);
  router.post("/echo", echo);
  router.get("/slow", slow);
  router.get("/stats", stats);
  router.after([](Request&, Response& res) { res.set_header("X-Example", "http_hello"); });

  // ServerOptions holds the limits and timeouts; the defaults suit this example.
  lionet::http::Server server(sched, router.handler());
  try {
    server.listen(lionet::Address::ipv4_loopback(static_cast<uint16_t>(port)));
  } catch (const std::exception& e) {  // port taken: one clear line, exit 1
    std::fprintf(stderr, "http_hello: %s\n", e.what());
    return 1;
  }
  server.start();
  std::printf("http_hello on http://%s/hello, Ctrl-C to stop\n", server.addresses()[0].to_string().c_str());
  std::fflush(stdout);

  int sig = 0;
  sigwait(&sigs, &sig);
  const bool drained = server.stop(std::chrono::seconds(5));
  sched.stop();
  std::printf("stopped (%s): %llu requests\n", drained ? "all requests finished" : "some cut off at 5 s",
              static_cast<unsigned long long>(server.stats().requests.load()));
  return 0;
}
