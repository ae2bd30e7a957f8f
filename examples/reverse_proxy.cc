// examples/reverse_proxy.cc: a reverse proxy in front of two application servers, with the
// library API (lionet::http::Proxy), plus a route of its own. The two "applications" run in the
// same process here so that the example needs nothing else; point `upstreams` at real ones.
//
//   ./reverse_proxy [port]        (default 8092; port 0 = any free port, printed)
//   curl http://127.0.0.1:8092/app/whoami      -> "app A" or "app B" (round robin, B weighted 2)
//   curl http://127.0.0.1:8092/app/slow        -> 504 after 1 s (read_timeout), the proxy keeps serving
//   curl http://127.0.0.1:8092/local           -> answered by the proxy itself
//
// Each request runs in its connection's fiber: the proxy's handler connects (or takes a pooled
// connection), writes, reads and relays in plain blocking style; the fiber parks on every wait.
// SIGINT/SIGTERM: stop accepting, finish requests in flight (up to 5 s), exit 0.
#include <signal.h>

#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>

#include "lionet/http/proxy.h"
#include "lionet/http/router.h"
#include "lionet/http/server.h"
#include "lionet/sched/scheduler.h"

using lionet::http::Request;
using lionet::http::Response;

namespace {
// An application server on an ephemeral 127.0.0.1 port: /whoami names it, /slow takes 3 s.
std::unique_ptr<lionet::http::Server> start_app(lionet::Scheduler& sched, lionet::http::Router& r, std::string name) {
  r.get("/whoami", [name](Request& q, Response& s) {
    s.reply(200, name + " (X-Forwarded-For: " + std::string(q.header("X-Forwarded-For")) + ")\n");
  });
  r.get("/slow", [](Request&, Response& s) {
    lionet::this_fiber::sleep_for(std::chrono::seconds(3));
    s.reply(200, "finally\n");
  });
  auto server = std::make_unique<lionet::http::Server>(sched, r.handler());
  server->listen(lionet::Address::ipv4_loopback(0));
  server->start();
  return server;
}
}  // namespace

int main(int argc, char** argv) {
  const int port = argc > 1 ? std::atoi(argv[1]) : 8092;
  if (port < 0 || port > 65535) {
    std::fprintf(stderr, "usage: %s [port]\n", argv[0]);
    return 2;
  }
  sigset_t sigs;
  sigemptyset(&sigs);
  sigaddset(&sigs, SIGINT);
  sigaddset(&sigs, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &sigs, nullptr);

  lionet::Scheduler sched({.threads = 2, .name = "proxy"});
  lionet::http::Router app_a, app_b;
  auto a = start_app(sched, app_a, "app A");
  auto b = start_app(sched, app_b, "app B");

  lionet::http::ProxyOptions o;
  o.upstreams = {{a->addresses()[0].to_string()}, {b->addresses()[0].to_string(), /*weight=*/2}};
  o.strip_prefix = "/app";  // /app/whoami reaches the upstream as /whoami
  o.read_timeout = std::chrono::seconds(1);  // no answer within 1 s: 504 ...
  o.max_tries = 1;  // ... without trying the other upstream too
  auto proxy = std::make_shared<lionet::http::Proxy>(o);

  lionet::http::Router router;
  router.prefix("*", "/app", proxy->handler());
  router.get("/local", [](Request&, Response& s) { s.reply(200, "served by the proxy itself\n"); });
  lionet::http::Server server(sched, router.handler());
  try {
    server.listen(lionet::Address::ipv4_loopback(static_cast<uint16_t>(port)));
  } catch (const std::exception& e) {  // port taken: one clear line, exit 1
    std::fprintf(stderr, "reverse_proxy: %s\n", e.what());
    return 1;
  }
  server.start();
  std::printf("reverse_proxy on http://%s/app/whoami, Ctrl-C to stop\n", server.addresses()[0].to_string().c_str());
  std::fflush(stdout);

  int sig = 0;
  sigwait(&sigs, &sig);
  const bool drained = server.stop(std::chrono::seconds(5));
  a->stop(std::chrono::seconds(1));
  b->stop(std::chrono::seconds(1));
  proxy->stop();
  sched.stop();
  for (const auto& st : proxy->stats())
    std::printf("upstream %s: %llu requests, %llu failures, %llu connections opened\n", st.address.c_str(),
                static_cast<unsigned long long>(st.requests), static_cast<unsigned long long>(st.failures),
                static_cast<unsigned long long>(st.connects));
  std::printf("stopped (%s)\n", drained ? "all requests finished" : "some cut off at 5 s");
  return 0;
}
