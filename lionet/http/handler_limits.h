// lionet/http/handler_limits.h: what bounds a running handler, for HTTP/1.1 and HTTP/2 alike
// (sched/cancel.h underneath): a deadline (route key `timeout`, server key `handler_timeout`:
// 504 past it) and the client's disconnect (server key `cancel_on_disconnect`: the handler is
// cancelled, the request logged 499).
//
//   router.get("/report", http::with_timeout(report, std::chrono::seconds(2)));
//
// Owns: run_bounded(), with_timeout(), DisconnectWatch and the process-wide counters /metrics
// shows. Must not: know HTTP/1 or HTTP/2 framing (the connection code calls in here).
#pragma once

#include <atomic>
#include <cstdint>

#include "lionet/base/clock.h"
#include "lionet/http/request.h"
#include "lionet/http/response.h"
#include "lionet/http/server.h"
#include "lionet/sched/scheduler.h"
#include "lionet/sched/timer.h"

namespace lionet {
class Fiber;
class Socket;
}  // namespace lionet

namespace lionet::http {

// Process-wide (every server, both protocols). /metrics: lionet_http_handler_timeouts_total,
// lionet_http_handlers_cancelled_total.
struct HandlerCounters {
  std::atomic<uint64_t> timeouts{0};  // handlers answered 504 because their deadline passed
  std::atomic<uint64_t> cancelled{0};  // handlers cancelled because their client went away
};
HandlerCounters& handler_counters() noexcept;

// Runs h(req, res) with every blocking call in it bounded by `timeout` from now (a
// DeadlineScope; zero or negative: no bound). If the deadline passed before h returned (it
// ran on, or threw), res becomes 504 with the server's wording, the counter moves and true is
// returned. Otherwise h's exceptions propagate as if called directly.
bool run_bounded(const Handler& h, Request& req, Response& res, Duration timeout);

// h under its own timeout (as run_bounded), for a route: the route key `timeout`.
Handler with_timeout(Handler h, Duration timeout);

// Cancels a handler's fiber when its client goes away (the peer closes or resets the TCP
// connection) while the handler runs. The connection's socket is looked at only if the handler
// runs longer than kWatchAfter (a timer from the coarse clock, so up to a tick sooner; a
// watcher fiber then waits for the socket to become readable): a quick handler costs one
// timer, armed and cancelled, and no read of the precise clock. Bytes from the client (a
// pipelined request, body bytes, a TLS alert) end the watch without a cancel: only a hang-up
// (EOF, ECONNRESET) with nothing left to read counts.
class DisconnectWatch {
 public:
  static constexpr Duration kWatchAfter = std::chrono::milliseconds(20);

  DisconnectWatch() = default;
  ~DisconnectWatch() { (void)end(); }
  DisconnectWatch(const DisconnectWatch&) = delete;
  DisconnectWatch& operator=(const DisconnectWatch&) = delete;

  // From the handler's fiber, before it runs: watch `socket` on its behalf. `stopping` (may be
  // null) is the server's flag: once it is set, an end of input is the server's own shutdown of
  // the read side (TcpServer's drain), not the client's, and cancels nothing.
  void begin(Socket* socket, const std::atomic<bool>* stopping = nullptr);
  // After the handler returned: stops watching. True if the client went away and the handler
  // was cancelled (the caller logs 499 and closes the connection).
  bool end() noexcept;

 private:
  void watch() noexcept;  // the watcher fiber's body

  Socket* socket_ = nullptr;
  const std::atomic<bool>* stopping_ = nullptr;
  Fiber* handler_ = nullptr;
  Scheduler* sched_ = nullptr;
  Timer timer_;
  JoinHandle<void> watcher_;
  std::atomic<bool> gone_{false};
  bool armed_ = false;
};

}  // namespace lionet::http
