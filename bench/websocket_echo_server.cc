// bench/websocket_echo_server.cc: the LioNet server of the WebSocket benchmark
// (scripts/bench-websocket.sh): a lionet::http::Server on 127.0.0.1 whose routes are
// lionet::websocket::accept() handlers, beside bench/reference/websocket (gorilla/websocket).
//
//   websocket_echo_server PORT [--threads N] [--backend epoll|io_uring] [--broadcast helper|send]
//                         [--ping-interval S]
//
// GET /echo: every message is sent back (same type, same bytes) until the peer closes.
// GET /broadcast: the socket joins one room for its life; every message received on any socket
//   of the room is sent to every socket of the room (the sender's included):
//   --broadcast helper (the default): websocket::broadcast(), which frames the message once for
//     all the sockets and queues it on each (never parks; each socket's writer fiber writes it);
//   --broadcast send: one Socket::send per socket in a loop (the frame built and written per
//     socket, the loop parking when a socket buffer is full).
// Both with websocket::Options' defaults (permessage-deflate off; keepalive pings after 30 s of
// silence, which no benchmark phase reaches; a 1 MiB send queue per socket for the helper),
// except --ping-interval S: keepalive after S seconds, 0 = none (gorilla's default: its server
// sends no pings; ours then reads without a timeout, which is what the flag lets one measure).
//
// Defaults: 1 worker, epoll. RLIMIT_NOFILE is raised to its hard limit (10,000 connections).
// Runs until SIGINT/SIGTERM, stops gracefully and prints
// `RESULT conns=N messages=N broadcasts=N threads=T backend=B errors=N` as its last line
// (errors: failed sends, broadcast() results that were full or closed, and requests the HTTP
// server itself answered 4xx/5xx).
#include <sys/resource.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <string>
#include <vector>

#include "bench/common/server_main.h"
#include "lionet/http/router.h"
#include "lionet/http/server.h"
#include "lionet/sync/mutex.h"
#include "lionet/websocket/server.h"
#include "lionet/websocket/socket.h"

namespace {
namespace ws = lionet::websocket;

[[noreturn]] void usage(const char* argv0) {
  std::fprintf(stderr,
               "usage: %s PORT [--threads N] [--backend epoll|io_uring] [--broadcast helper|send] "
               "[--ping-interval S]\n",
               argv0);
  std::exit(2);
}

// Statistics only (relaxed): read after the server stopped.
struct Counters {
  std::atomic<uint64_t> conns{0}, messages{0}, broadcasts{0}, errors{0};
};

// The sockets of /broadcast. mu_ is a fiber Mutex held across the whole broadcast (the send
// loop may park on a full socket buffer): a socket leaves the room (and its handler returns,
// which destroys it) only between broadcasts, so no broadcast touches a destroyed socket.
class Room {
 public:
  explicit Room(bool helper) : helper_(helper) {}
  void join(ws::Socket* s) {
    std::lock_guard lock(mu_);
    sockets_.push_back(s);
  }
  void leave(ws::Socket* s) {
    std::lock_guard lock(mu_);
    for (auto& p : sockets_) {
      if (p == s) {
        p = sockets_.back();
        sockets_.pop_back();
        break;
      }
    }
  }
  // Sends m to every socket of the room; returns how many did not take it.
  uint64_t send_all(const ws::Message& m) {
    std::lock_guard lock(mu_);
    if (helper_) {
      ws::BroadcastResult r = ws::broadcast(sockets_, m);
      return r.full + r.closed;
    }
    uint64_t failed = 0;
    for (ws::Socket* s : sockets_) {
      if (!s->send(m)) ++failed;
    }
    return failed;
  }

 private:
  const bool helper_;
  lionet::Mutex mu_;
  std::vector<ws::Socket*> sockets_;  // guarded by mu_
};

void raise_nofile() {
  rlimit r{};
  if (getrlimit(RLIMIT_NOFILE, &r) == 0 && r.rlim_cur < r.rlim_max) {
    r.rlim_cur = r.rlim_max;
    setrlimit(RLIMIT_NOFILE, &r);
  }
}
}  // namespace

int main(int argc, char** argv) {
  int port = -1, threads = 1;
  std::string backend = "epoll", bcast = "helper";
  long ping_s = -1;  // -1: Options' default
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--threads" && i + 1 < argc) {
      threads = std::atoi(argv[++i]);
    } else if (a == "--backend" && i + 1 < argc) {
      backend = argv[++i];
    } else if (a == "--broadcast" && i + 1 < argc) {
      bcast = argv[++i];
    } else if (a == "--ping-interval" && i + 1 < argc) {
      ping_s = std::atol(argv[++i]);
    } else if (!a.empty() && a[0] != '-' && port < 0) {
      port = std::atoi(a.c_str());
    } else {
      usage(argv[0]);
    }
  }
  if (threads < 1 || port < 0 || port > 65535 || (backend != "epoll" && backend != "io_uring") ||
      (bcast != "helper" && bcast != "send") || ping_s < -1)
    usage(argv[0]);
  raise_nofile();

  lionet::bench::ServerMain runtime(threads, "ws", backend);
  Counters counters;
  Room room(bcast == "helper");
  ws::Options wso;
  if (ping_s == 0) wso.ping_interval = std::nullopt;
  if (ping_s > 0) wso.ping_interval = std::chrono::seconds(ping_s);
  lionet::http::Router router;
  router.get("/echo", ws::accept(
                          [&counters](ws::Socket& s) {
                            counters.conns.fetch_add(1, std::memory_order_relaxed);
                            ws::Message m;  // one buffer for the connection's life: receive(Message&) reuses it
                            while (s.receive(m)) {
                              counters.messages.fetch_add(1, std::memory_order_relaxed);
                              if (!s.send(m)) {
                                counters.errors.fetch_add(1, std::memory_order_relaxed);
                                return;
                              }
                            }
                          },
                          wso));
  router.get("/broadcast", ws::accept(
                               [&counters, &room](ws::Socket& s) {
                                 counters.conns.fetch_add(1, std::memory_order_relaxed);
                                 room.join(&s);
                                 ws::Message m;
                                 while (s.receive(m)) {
                                   counters.messages.fetch_add(1, std::memory_order_relaxed);
                                   counters.broadcasts.fetch_add(1, std::memory_order_relaxed);
                                   counters.errors.fetch_add(room.send_all(m), std::memory_order_relaxed);
                                 }
                                 room.leave(&s);
                               },
                               wso));

  lionet::http::ServerOptions opts;
  opts.tcp.reuse_port_per_worker = threads > 1;
  lionet::http::Server server(runtime.scheduler(), router.handler(), opts);
  try {
    server.listen(lionet::Address::ipv4_loopback(static_cast<uint16_t>(port)));
  } catch (const std::exception& e) {
    std::fprintf(stderr, "%s\n", e.what());
    return 1;
  }
  server.start();
  std::fprintf(stderr, "websocket_echo_server: listening on %s, %d worker(s), backend %s, broadcast by %s\n",
               server.addresses()[0].to_string().c_str(), threads, runtime.backend(), bcast.c_str());
  runtime.wait_for_stop();
  server.stop(std::chrono::seconds(1));
  runtime.stop();
  std::printf("RESULT conns=%llu messages=%llu broadcasts=%llu threads=%d backend=%s errors=%llu\n",
              static_cast<unsigned long long>(counters.conns.load()),
              static_cast<unsigned long long>(counters.messages.load()),
              static_cast<unsigned long long>(counters.broadcasts.load()), threads, runtime.backend(),
              static_cast<unsigned long long>(counters.errors.load() + server.stats().errors.load()));
  return 0;
}
