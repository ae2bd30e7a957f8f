// examples/deadlines.cc: a handler calling a slow PostgreSQL query through unmodified libpq,
// bounded by its route's timeout, with the query cancelled on the server when the deadline
// passes (or the client hangs up), and a lionet::Pool of libpq connections.
//
//   ./deadlines <port> "<libpq conninfo>"      (port 0: any free port)
//   curl 'http://127.0.0.1:PORT/sleep?seconds=0.1'   -> 200 "slept 0.1 s"
//   curl 'http://127.0.0.1:PORT/sleep?seconds=10'    -> 504 after 1 s; the query is gone from
//                                                       pg_stat_activity at once
//   curl --max-time 0.2 '.../sleep?seconds=10'      -> curl gives up; its hang-up cancels the
//                                                       handler and the query (cancel_on_disconnect)
//
// What it shows (lionet/sched/cancel.h):
//  - http::with_timeout(handler, 1s): the handler runs in a DeadlineScope. libpq's blocking
//    reads are hooked, so PQexec fails with ETIMEDOUT at the deadline and the client gets 504;
//  - this_fiber::on_cancel(PQcancel): closing libpq's socket alone leaves pg_sleep running on
//    the server; PQcancel (wired to the fiber's deadline and cancel) makes PostgreSQL stop it;
//  - lionet::Pool<PGconn>: at most 4 connections, acquire() waits within the same deadline, a
//    connection whose query was interrupted is discarded, not reused.
// Prints "deadlines on http://127.0.0.1:PORT" when ready; SIGINT/SIGTERM stop it (exit 0).
#include <libpq-fe.h>
#include <pthread.h>
#include <signal.h>

#include <atomic>
#include <charconv>
#include <cstdio>
#include <cstdlib>
#include <stdexcept>
#include <string>

#include "lionet/http/handler_limits.h"
#include "lionet/http/router.h"
#include "lionet/http/server.h"
#include "lionet/sched/cancel.h"
#include "lionet/sched/scheduler.h"
#include "lionet/sync/pool.h"

using lionet::http::Request;
using lionet::http::Response;

namespace {
std::atomic<uint64_t> completed{0}, failed{0};

// GET /sleep?seconds=S: SELECT pg_sleep(S) on a pooled connection.
void sleep_handler(lionet::Pool<PGconn>& pool, Request& req, Response& res) {
  const std::string text = req.query_param("seconds").value_or("");
  double seconds = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), seconds);
  if (ec != std::errc() || end != text.data() + text.size() || seconds < 0 || seconds > 60)
    return res.reply(400, "use /sleep?seconds=S with S in 0..60\n");
  auto conn = pool.acquire();  // throws FiberInterrupted past the deadline: the server answers
  // Wire libpq's own cancel to this fiber: at the deadline (or a cancel) PQcancel runs in a
  // fiber of its own and asks the server to stop the query.
  auto reg = lionet::this_fiber::on_cancel([c = conn.get()] {
    PGcancel* cancel = PQgetCancel(c);
    char err[256];
    if (cancel) PQcancel(cancel, err, sizeof err);
    PQfreeCancel(cancel);
  });
  const std::string sql = "SELECT pg_sleep(" + std::to_string(seconds) + ")";
  PGresult* r = PQexec(conn.get(), sql.c_str());  // hooked: parks this fiber, not the worker
  const bool ok = PQresultStatus(r) == PGRES_TUPLES_OK;
  PQclear(r);
  reg.reset();  // waits for a running PQcancel before the connection goes back or away
  if (!ok) {
    ++failed;
    const std::string why = PQerrorMessage(conn.get());
    conn.discard();  // interrupted mid-query: its state is unknown, never reuse it
    return res.reply(503, "query failed: " + why);  // past the deadline with_timeout makes it 504
  }
  ++completed;
  res.reply(200, "slept " + text + " s\n");
}
}  // namespace

int main(int argc, char** argv) {
  if (argc < 3) {
    std::fprintf(stderr, "usage: %s <port> \"<libpq conninfo>\"\n", argv[0]);
    return 2;
  }
  const int port = std::atoi(argv[1]);
  const std::string conninfo = argv[2];
  // SIGINT/SIGTERM are taken by sigwait below, on this thread: block them before any worker
  // thread exists (threads inherit the mask), so none of them is killed by one.
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGINT);
  sigaddset(&set, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &set, nullptr);

  lionet::Scheduler sched({.threads = 2});
  lionet::Pool<PGconn> pool(
      {.max_size = 4},
      [&conninfo] {
        PGconn* c = PQconnectdb(conninfo.c_str());  // called in a fiber: the hooks make it non-blocking
        if (PQstatus(c) != CONNECTION_OK) {
          const std::string why = PQerrorMessage(c);
          PQfinish(c);
          throw std::runtime_error("PQconnectdb: " + why);
        }
        return lionet::Pool<PGconn>::Handle(c, PQfinish);
      },
      [](PGconn& c) { return PQstatus(&c) == CONNECTION_OK && PQtransactionStatus(&c) == PQTRANS_IDLE; });

  lionet::http::Router router;
  router.get("/sleep", lionet::http::with_timeout([&](Request& q, Response& s) { sleep_handler(pool, q, s); },
                                                  std::chrono::seconds(1)));
  router.get("/stats", [](Request&, Response& s) {
    s.reply(200, "completed " + std::to_string(completed.load()) + " failed " + std::to_string(failed.load()) + "\n");
  });
  lionet::http::Server server(sched, router.handler());
  server.listen(lionet::Address::ipv4_loopback(static_cast<uint16_t>(port)));
  server.start();
  std::printf("deadlines on http://127.0.0.1:%u\n", server.addresses()[0].port());
  std::fflush(stdout);

  int sig = 0;
  sigwait(&set, &sig);
  server.stop(std::chrono::seconds(5));
  sched.stop();
  std::printf("completed %llu failed %llu\n", static_cast<unsigned long long>(completed.load()),
              static_cast<unsigned long long>(failed.load()));
  return 0;
}
