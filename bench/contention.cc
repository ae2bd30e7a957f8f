// bench/contention.cc: sync primitives under contention across workers, the three patterns of
// issue 43, each timed once per run. Its twin is bench/reference/go/contention (the same
// patterns with goroutines, GOMAXPROCS = workers); scripts/bench-contention.sh runs both in
// interleaved rounds and prints the medians, Go's, their ratios and each side's spread.
//
//   fanin   1,000 fibers x 1,000 sends into one buffered Channel<int> (capacity 1,024), one
//           receiving fiber takes all 1,000,000
//   m2m     100 sending and 100 receiving fibers on one unbuffered Channel<int>, 10,000 each
//   mutex   1,000 fibers x 1,000 lock/unlock of one lionet::Mutex around a counter
//
// One operation is one value through the channel, or one lock+unlock. The time runs from the
// first spawn to the last join, on a scheduler of --threads workers (default 2).
//
// Usage: contention [--threads T] [--patterns fanin,m2m,mutex] [--scale K]
//   --scale divides every count by K (a quick look; figures are comparable only at 1).
// Last line: RESULT workers=T fanin_ns=... m2m_ns=... mutex_ns=... errors=N
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "lionet/sched/scheduler.h"
#include "lionet/sync/channel.h"
#include "lionet/sync/mutex.h"
#include "lionet/sync/wait_group.h"

namespace {
using Clock = std::chrono::steady_clock;

long g_scale = 1;
long g_errors = 0;

double ns_per_op(Clock::time_point t0, long ops) {
  return std::chrono::duration<double, std::nano>(Clock::now() - t0).count() / static_cast<double>(ops);
}

double fanin() {
  const long senders = 1000, each = 1000 / g_scale, total = senders * each;
  lionet::Channel<int> ch(1024);
  lionet::WaitGroup wg;
  long got = 0, sum = 0;
  const auto t0 = Clock::now();
  wg.add(senders + 1);
  for (long s = 0; s < senders; ++s) {
    lionet::go([&] {
      for (long i = 0; i < each; ++i) ch.send(1);
      wg.done();
    });
  }
  lionet::go([&] {
    for (long i = 0; i < total; ++i) {
      auto v = ch.recv();
      if (!v) break;
      ++got;
      sum += *v;
    }
    wg.done();
  });
  wg.wait();
  const double ns = ns_per_op(t0, total);
  if (got != total || sum != total) {
    std::fprintf(stderr, "contention: fanin received %ld values (sum %ld) of %ld\n", got, sum, total);
    ++g_errors;
  }
  return ns;
}

double m2m() {
  const long pairs = 100, each = 10000 / g_scale, total = pairs * each;
  lionet::Channel<int> ch(0);
  lionet::WaitGroup wg;
  std::atomic<long> got{0};
  const auto t0 = Clock::now();
  wg.add(2 * pairs);
  for (long s = 0; s < pairs; ++s) {
    lionet::go([&] {
      for (long i = 0; i < each; ++i) ch.send(1);
      wg.done();
    });
    lionet::go([&] {
      long mine = 0;
      for (long i = 0; i < each; ++i) {
        if (!ch.recv()) break;
        ++mine;
      }
      got.fetch_add(mine, std::memory_order_relaxed);
      wg.done();
    });
  }
  wg.wait();
  const double ns = ns_per_op(t0, total);
  if (got.load() != total) {
    std::fprintf(stderr, "contention: m2m received %ld values of %ld\n", got.load(), total);
    ++g_errors;
  }
  return ns;
}

double mutex() {
  const long fibers = 1000, each = 1000 / g_scale, total = fibers * each;
  lionet::Mutex mu;
  lionet::WaitGroup wg;
  long counter = 0;
  const auto t0 = Clock::now();
  wg.add(fibers);
  for (long f = 0; f < fibers; ++f) {
    lionet::go([&] {
      for (long i = 0; i < each; ++i) {
        mu.lock();
        ++counter;
        mu.unlock();
      }
      wg.done();
    });
  }
  wg.wait();
  const double ns = ns_per_op(t0, total);
  if (counter != total) {
    std::fprintf(stderr, "contention: mutex counted %ld of %ld\n", counter, total);
    ++g_errors;
  }
  return ns;
}

// Is `name` one of the comma-separated entries of `list`?
bool listed(const std::string& list, const std::string& name) {
  std::size_t pos = 0;
  while (pos <= list.size()) {
    const std::size_t end = std::min(list.find(',', pos), list.size());
    if (list.compare(pos, end - pos, name) == 0) return true;
    pos = end + 1;
  }
  return false;
}

[[noreturn]] void usage(const char* why) {
  std::fprintf(stderr, "contention: %s\nusage: contention [--threads T] [--patterns fanin,m2m,mutex] [--scale K]\n",
               why);
  std::printf("RESULT errors=1\n");
  std::exit(2);
}
}  // namespace

int main(int argc, char** argv) {
  lionet::SchedulerOptions so{.threads = 2, .name = "contention"};
  std::string patterns = "fanin,m2m,mutex";
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (i + 1 >= argc) usage(("missing value after " + a).c_str());
    const char* v = argv[++i];
    if (a == "--threads") {
      so.threads = std::atoi(v);
      if (so.threads <= 0) usage("--threads must be positive");
    } else if (a == "--patterns") {
      patterns = v;
    } else if (a == "--scale") {
      g_scale = std::atol(v);
      if (g_scale <= 0 || g_scale > 1000) usage("--scale must be 1..1000");
    } else {
      usage(("unknown argument " + a).c_str());
    }
  }
  struct Pattern {
    const char* name;
    double (*run)();
    double ns = -1;
  };
  std::vector<Pattern> all = {{"fanin", fanin}, {"m2m", m2m}, {"mutex", mutex}};
  lionet::Scheduler sched(so);
  sched.spawn([] { return 0; }).join();  // warm-up: the workers' first fibers and stacks
  for (auto& p : all) {
    if (!listed(patterns, p.name)) continue;
    p.ns = sched.spawn([&] { return p.run(); }).join();
    std::printf("%-6s %8.1f ns/op  (%d workers)\n", p.name, p.ns, so.threads);
    std::fflush(stdout);
  }
  sched.stop();
  std::printf("RESULT workers=%d", so.threads);
  for (const auto& p : all)
    if (p.ns >= 0) std::printf(" %s_ns=%.1f", p.name, p.ns);
  std::printf(" errors=%ld\n", g_errors);
  return g_errors ? 1 : 0;
}
