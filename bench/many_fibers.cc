// bench/many_fibers.cc: how many parked fibers one process holds, and what each costs.
//
// The shape of a server holding N idle keep-alive connections, one fiber each: a fiber on a
// 2-worker scheduler spawns N fibers; each parks on one shared Event. Measured once all N have
// parked: RSS above the start (per fiber), kernel mappings (/proc/self/maps lines) and the time
// to spawn them; then the Event is set and every fiber runs to its end (a WaitGroup joins them).
// With --wait channel each fiber parks in recv() on one unbuffered Channel<int> instead (closed
// to release them), as the goroutines do. Its peer is bench/go/many_goroutines.go
// (scripts/bench-many-fibers.sh runs both in one go).
//
// Usage: many_fibers [N=1000000] [--threads 2] [--stack-size BYTES] [--protection auto|...]
//                    [--wait event|channel]
// Last line: RESULT fibers=N completed=N rss_bytes_per_fiber=... maps=... spawn_seconds=...
//            parked_seconds=... release_seconds=... stack_guard=... errors=N
#include <sys/resource.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string>
#include <thread>

#include "lionet/sched/scheduler.h"
#include "lionet/sync/channel.h"
#include "lionet/sync/event.h"
#include "lionet/sync/wait_group.h"

namespace {
long status_kib(const char* key) {
  std::ifstream in("/proc/self/status");
  std::string line;
  const std::size_t n = std::strlen(key);
  while (std::getline(in, line))
    if (line.compare(0, n, key) == 0) return std::atol(line.c_str() + n + 1);
  return -1;
}

long map_count() {
  std::ifstream in("/proc/self/maps");
  std::string line;
  long n = 0;
  while (std::getline(in, line)) ++n;
  return n;
}

double since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

[[noreturn]] void usage(const char* why) {
  std::fprintf(stderr,
               "many_fibers: %s\nusage: many_fibers [N] [--threads T] [--stack-size BYTES] "
               "[--protection auto|guard_region|guard_page|canary] [--wait event|channel]\n",
               why);
  std::printf("RESULT errors=1\n");
  std::exit(2);
}
}  // namespace

int main(int argc, char** argv) {
  long n = 1000000;
  lionet::SchedulerOptions so{.threads = 2, .name = "many"};
  bool on_channel = false;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto value = [&]() -> const char* {
      if (i + 1 >= argc) usage(("missing value after " + a).c_str());
      return argv[++i];
    };
    if (a == "--threads") {
      so.threads = std::atoi(value());
    } else if (a == "--stack-size") {
      so.stack_size = std::strtoull(value(), nullptr, 10);
    } else if (a == "--protection") {
      std::string p = value();
      if (p == "auto") so.stack_protection = lionet::StackProtection::kAuto;
      else if (p == "guard_region") so.stack_protection = lionet::StackProtection::kGuardRegion;
      else if (p == "guard_page") so.stack_protection = lionet::StackProtection::kGuardPage;
      else if (p == "canary") so.stack_protection = lionet::StackProtection::kCanary;
      else usage(("unknown protection " + p).c_str());
    } else if (a == "--wait") {
      std::string w = value();
      if (w == "event") on_channel = false;
      else if (w == "channel") on_channel = true;
      else usage(("unknown wait " + w).c_str());
    } else if (!a.empty() && a[0] != '-') {
      n = std::atol(a.c_str());
      if (n <= 0) usage("N must be positive");
    } else {
      usage(("unknown argument " + a).c_str());
    }
  }

  lionet::Scheduler sched(so);
  // Warm-up: the workers' first fibers, the log, the allocator's first arenas are not per-fiber.
  sched.spawn([] { return 0; }).join();
  const long rss0 = status_kib("VmRSS:");
  const long maps0 = map_count();

  lionet::Event release;
  lionet::Channel<int> release_ch(0);
  lionet::WaitGroup done;
  std::atomic<long> started{0}, completed{0}, failed{0};
  const uint64_t parks0 = sched.stats().fiber_parks;
  const auto t0 = std::chrono::steady_clock::now();
  double spawn_s = 0;
  done.add(static_cast<int64_t>(n));
  sched
      .spawn([&] {
        for (long i = 0; i < n; ++i) {
          try {
            lionet::go([&] {
              started.fetch_add(1, std::memory_order_relaxed);
              if (on_channel) {
                (void)release_ch.recv();  // nullopt once closed
              } else {
                release.wait();
              }
              completed.fetch_add(1, std::memory_order_relaxed);
              done.done();
            });
          } catch (const std::exception& e) {
            if (failed.fetch_add(1) == 0) std::fprintf(stderr, "many_fibers: spawn %ld failed: %s\n", i, e.what());
            done.done();
          }
        }
        spawn_s = since(t0);
      })
      .join();
  // Parked = switched out in Event::wait (the scheduler's count of parks), not merely started.
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(300);
  const long want = n - failed.load();
  while (static_cast<long>(sched.stats().fiber_parks - parks0) < want && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  const double parked_s = since(t0);
  const long rss1 = status_kib("VmRSS:");
  const long pte = status_kib("VmPTE:");
  const long maps1 = map_count();
  const lionet::StackPoolStats st = sched.stack_stats();
  const char* guard = st.canaries ? (st.guard_pages ? "guard_page+canary" : "canary")
                                  : (st.guard_pages ? "guard_page" : "guard_region");

  const auto t1 = std::chrono::steady_clock::now();
  if (on_channel) {
    release_ch.close();
  } else {
    release.set();
  }
  done.wait();
  const double release_s = since(t1);
  sched.stop();

  const double per_fiber = n ? (static_cast<double>(rss1 - rss0) * 1024.0) / static_cast<double>(n) : 0;
  std::printf("fibers          %ld on %d workers, %zu-byte stacks (%s), parked on one %s\n", n, so.threads,
              so.stack_size, guard, on_channel ? "Channel" : "Event");
  std::printf("spawn           %.3f s (spawn calls), %.3f s until all parked\n", spawn_s, parked_s);
  std::printf("rss             +%.1f MiB, %.0f bytes per parked fiber (page tables besides: %ld KiB)\n",
              static_cast<double>(rss1 - rss0) / 1024.0, per_fiber, pte);
  std::printf("maps            %ld (%ld before); stacks mapped %zu, slabs %zu, reserved %.1f GiB virtual\n", maps1,
              maps0, st.mapped, st.slabs, static_cast<double>(st.reserved_bytes) / (1u << 30));
  std::printf("release + join  %.3f s\n", release_s);
  const long errors = failed.load() + (n - completed.load());
  std::printf(
      "RESULT fibers=%ld completed=%ld rss_bytes_per_fiber=%.0f maps=%ld spawn_seconds=%.3f "
      "parked_seconds=%.3f release_seconds=%.3f stack_guard=%s wait=%s errors=%ld\n",
      n, completed.load(), per_fiber, maps1, spawn_s, parked_s, release_s, guard, on_channel ? "channel" : "event",
      errors);
  return errors ? 1 : 0;
}
