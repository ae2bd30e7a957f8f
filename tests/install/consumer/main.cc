// A program built against the installed LioNet, as a user's project builds it (its own
// -Wall -Wextra -Werror, Debug, Release or no build type): fibers on a two-worker scheduler,
// lionet::Mutex and lionet::Channel between fibers, an http::Server on 127.0.0.1 (port 0) with
// a plain route and a WebSocket route, one request through http::Client and one echo through
// websocket::connect. Prints "lionet consumer OK: 42 ..." and exits 0, or says what failed.
#include <chrono>
#include <cstdio>
#include <optional>
#include <string>
#include <vector>

#include "lionet/http/client.h"
#include "lionet/http/router.h"
#include "lionet/http/server.h"
#include "lionet/net/address.h"
#include "lionet/sched/scheduler.h"
#include "lionet/sync/channel.h"
#include "lionet/sync/mutex.h"
#include "lionet/websocket/client.h"
#include "lionet/websocket/server.h"

int designated_initializer_structs();  // options.cc

namespace {

int failed(const std::string& what) {
  std::fprintf(stderr, "lionet consumer FAILED: %s\n", what.c_str());
  return 1;
}

}  // namespace

int main() {
  lionet::Scheduler sched({.threads = 2, .name = "consumer"});

  // A fiber that may resume on either worker.
  const int answer = sched
                         .spawn([] {
                           lionet::this_fiber::yield();
                           return lionet::this_fiber::id() != 0 ? 42 : -1;
                         })
                         .join();
  if (answer != 42) return failed("fiber returned " + std::to_string(answer));

  // lionet::Mutex: 8 fibers x 500 read-yield-write increments, each under lock()/unlock().
  constexpr int kFibers = 8, kRounds = 500;
  lionet::Mutex mu;
  long counter = 0;
  std::vector<lionet::JoinHandle<void>> workers;
  for (int f = 0; f < kFibers; ++f) {
    workers.push_back(sched.spawn([&] {
      for (int i = 0; i < kRounds; ++i) {
        mu.lock();
        const long seen = counter;
        if (i % 50 == 0) lionet::this_fiber::yield();  // the others park on mu meanwhile
        counter = seen + 1;
        mu.unlock();
      }
    }));
  }
  for (auto& w : workers) w.join();
  if (counter != kFibers * kRounds) return failed("mutex counter " + std::to_string(counter));

  // lionet::Channel: a producer fiber sends 1..100 and closes; this fiber sums until nullopt.
  const int sum = sched
                      .spawn([] {
                        lionet::Channel<int> ch(4);
                        auto producer = lionet::Scheduler::current()->spawn([&] {
                          for (int i = 1; i <= 100; ++i) ch.send(i);
                          ch.close();
                        });
                        int total = 0;
                        while (std::optional<int> v = ch.recv()) total += *v;
                        producer.join();
                        return total;
                      })
                      .join();
  if (sum != 5050) return failed("channel sum " + std::to_string(sum));

  // http::Server with a plain route and a WebSocket echo route, on a free loopback port.
  lionet::http::Router router;  // outlives the server
  router.get("/hello", [](lionet::http::Request&, lionet::http::Response& res) { res.reply(200, "hello\n"); });
  router.get("/ws", lionet::websocket::accept([](lionet::websocket::Socket& ws) {
               while (auto m = ws.receive()) {
                 if (!ws.send(*m)) return;
               }
             }));
  lionet::http::Server server(sched, router.handler(), {.server_name = "consumer"});
  server.listen(lionet::Address::ipv4_loopback(0));
  server.start();
  const std::string base = "127.0.0.1:" + std::to_string(server.addresses()[0].port());

  const std::string web = sched
                              .spawn([&]() -> std::string {
                                lionet::http::Client client({.user_agent = "lionet-consumer"});
                                auto r = client.get("http://" + base + "/hello");
                                if (!r) return "http request: " + r.error().message();
                                if (r->status != 200 || r->body != "hello\n") {
                                  return "http answer " + std::to_string(r->status) + " '" + r->body + "'";
                                }
                                lionet::websocket::ClientOptions wo;
                                wo.max_message_size = 1 << 16;
                                lionet::websocket::ConnectInfo info;
                                auto ws = lionet::websocket::connect("ws://" + base + "/ws", wo, &info);
                                if (!ws) return "websocket connect: " + ws.error().message() + " " + info.failure;
                                if (!(*ws)->send_text("ping")) return "websocket send failed";
                                auto echo = (*ws)->receive();
                                if (!echo || !echo->is_text() || echo->data != "ping") return "websocket echo wrong";
                                if (!(*ws)->close()) return "websocket close failed";
                                return "";
                              })
                              .join();
  server.stop(std::chrono::seconds(2));
  sched.stop();
  if (!web.empty()) return failed(web);

  const int structs = designated_initializer_structs();
  std::printf("lionet consumer OK: %d (mutex %ld, channel %d, http 200, websocket echo, %d option structs)\n", answer,
              counter, sum, structs);
  return 0;
}
