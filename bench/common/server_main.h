// bench/common/server_main.h: what every benchmark server program (bench_server,
// bench_ssl_server, http_file_server, http_hello_server) does around its server: block SIGINT
// and SIGTERM before any thread exists, run a Scheduler with its own IO driver, and wait in
// main() for one of those signals before stopping gracefully.
//
// Owns: that signal and scheduler set-up. Must not: parse the programs' arguments or print
// their RESULT lines (each program has its own).
#pragma once

#include <signal.h>

#include <string>

#include "lionet/sched/scheduler.h"

namespace lionet::bench {

class ServerMain {
 public:
  // Blocks SIGINT and SIGTERM in the calling thread first (every worker thread started after
  // inherits the mask, so only wait_for_stop() receives them), then starts the Scheduler:
  // `threads` workers named "<name>-w<i>", IO backend "auto", "epoll", "io_uring" or
  // "io_uring-poll" (io_uring for readiness only: IoOptions::uring_socket_ops off), or
  // "io_uring-shared" (several workers share one ring: IoOptions::uring_ring_per_worker off).
  ServerMain(int threads, std::string name, std::string backend = "auto");
  ServerMain(const ServerMain&) = delete;
  ServerMain& operator=(const ServerMain&) = delete;

  Scheduler& scheduler() noexcept { return sched_; }
  // The IO backend actually in use ("epoll" or "io_uring").
  const char* backend() const noexcept;
  // Blocks until SIGINT or SIGTERM arrives; returns the signal.
  int wait_for_stop();
  // Stops the scheduler (after the caller has stopped its servers).
  void stop() { sched_.stop(); }

 private:
  static sigset_t block_stop_signals();

  sigset_t signals_;  // initialised (and blocked) before sched_ exists: keep this order
  Scheduler sched_;
};

}  // namespace lionet::bench
