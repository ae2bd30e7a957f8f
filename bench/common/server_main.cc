// bench/common/server_main.cc: see server_main.h.
#include "bench/common/server_main.h"

#include <pthread.h>

#include <utility>

#include "lionet/io/io_manager.h"

namespace lionet::bench {

sigset_t ServerMain::block_stop_signals() {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGINT);
  sigaddset(&set, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &set, nullptr);
  return set;
}

namespace {
// "io_uring-poll": the io_uring backend for readiness only (io.uring_socket_ops: false).
// "io_uring-shared": several workers share one io_uring ring (io.uring_ring_per_worker: false).
IoOptions io_options(const std::string& backend) {
  if (backend == "io_uring-poll") return {.backend = "io_uring", .uring_socket_ops = false};
  if (backend == "io_uring-shared") return {.backend = "io_uring", .uring_ring_per_worker = false};
  return {.backend = backend};
}
}  // namespace

ServerMain::ServerMain(int threads, std::string name, std::string backend)
    : signals_(block_stop_signals()),
      sched_({.threads = threads, .name = std::move(name), .io = io_options(backend)}) {}

const char* ServerMain::backend() const noexcept {
  const IOManager* io = IOManager::of(sched_);
  return io ? io->backend() : "none";
}

int ServerMain::wait_for_stop() {
  int sig = 0;
  sigwait(&signals_, &sig);
  return sig;
}

}  // namespace lionet::bench
