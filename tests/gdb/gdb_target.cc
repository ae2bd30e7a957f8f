// tests/gdb/gdb_target.cc: the program tests/gdb/gdb_test.cc points gdb at. It parks fibers in
// functions with known names, prints "READY <pid>", then either waits for SIGTERM (gdb attaches
// to it live) or aborts, leaving a core file in its working directory.
//
//   gdb_fiber_target wait | abort
#include <signal.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <thread>
#include <vector>

#include "lionet/sched/fiber_dump.h"
#include "lionet/sched/scheduler.h"
#include "lionet/sync/channel.h"
#include "lionet/sync/event.h"

// Frames gdb must show (noinline, and not tail calls: each stays on its fiber's stack).
[[gnu::noinline]] void gdb_target_waits_in_channel_recv(lionet::Channel<int>& ch) {
  (void)ch.recv();
  asm volatile("");
}
[[gnu::noinline]] void gdb_target_sleeps_in_a_long_nap() {
  (void)lionet::this_fiber::sleep_for(std::chrono::hours(1));
  asm volatile("");
}
[[gnu::noinline]] void gdb_target_waits_for_an_event(lionet::Event& ev) {
  (void)ev.wait();
  asm volatile("");
}

int main(int argc, char** argv) {
  const bool abort_mode = argc > 1 && std::strcmp(argv[1], "abort") == 0;
#ifdef PR_SET_PTRACER
  ::prctl(PR_SET_PTRACER, PR_SET_PTRACER_ANY, 0, 0, 0);  // a sibling gdb may attach (Yama)
#endif
  if (abort_mode) {
    const rlimit unlimited{RLIM_INFINITY, RLIM_INFINITY};
    ::setrlimit(RLIMIT_CORE, &unlimited);
  }
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &set, nullptr);

  lionet::Scheduler sched({.threads = 2, .name = "gdb-target"});
  lionet::Channel<int> ch;
  lionet::Event ev;
  std::vector<lionet::JoinHandle<void>> hs;
  for (int i = 0; i < 5; ++i)
    hs.push_back(sched.spawn([&] { gdb_target_waits_in_channel_recv(ch); }, {.name = "gdb-recv"}));
  hs.push_back(sched.spawn([] { gdb_target_sleeps_in_a_long_nap(); }, {.name = "gdb-sleeper"}));
  hs.push_back(sched.spawn([&] { gdb_target_waits_for_an_event(ev); }, {.name = "gdb-event"}));
  const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  for (;;) {
    int parked = 0;
    for (const auto& f : lionet::snapshot_fibers(sched)) parked += f.state == lionet::FiberState::kParked;
    if (parked == 7) break;
    if (std::chrono::steady_clock::now() > give_up) {
      std::printf("NOT READY: %d of 7 parked\n", parked);
      return 1;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  std::printf("READY %d\n", static_cast<int>(::getpid()));
  std::fflush(stdout);
  if (abort_mode) std::abort();
  int sig = 0;
  sigwait(&set, &sig);
  ev.set();
  ch.close();
  for (auto& h : hs) h.cancel();
  for (auto& h : hs) h.join();
  sched.stop();
  return 0;
}
