// bench/sync_bench.cc: costs of lionet/sync/ measured beside their references in the same run:
// Boost.Fiber's unbuffered_channel, buffered_channel and fibers::mutex (and std::mutex).
//
// Owns: the sync benchmark shapes and the machine-readable RESULT line (last line of output).
// Must not: test correctness (tests/sync does), though every shape checks its values and
// counts mismatches into errors=N.
//
// Repetitions: scripts/bench-sync.sh runs 5 repetitions with random interleaving (so a burst
// of load from other processes hits LioNet and its reference alike) and the RESULT line takes
// each benchmark's fastest repetition.
// Clock: real (wall) time. The LioNet loops run inside a driver fiber on a worker thread (the
// Google Benchmark thread only waits in join()), so per-thread CPU time would be meaningless.
// Shapes (ns per operation):
//   BM_ChanPingPong / BM_BoostChanPingPong      round trip: A sends on `ping`, B receives and
//       sends on `pong`, A receives. Two fibers on ONE worker (Boost: one thread, round_robin),
//       rendezvous channels (Boost: unbuffered_channel). Two switches per round trip.
//   BM_ChanBufferedThroughput / BM_BoostChanBufferedThroughput   one producer fiber, one
//       consumer fiber (the timed one) on one worker, capacity 64 (Boost: buffered_channel 64,
//       which holds 63): ns per value received.
//   BM_ChanTrySendRecvNoSwitch / BM_BoostChanTryPushPopNoSwitch   try_send + try_recv by one
//       fiber, no switch: the channel's own cost (two lock round trips), apart from scheduling.
//   BM_MutexUncontended / BM_BoostMutexUncontended / BM_StdMutexUncontended   lock+unlock on
//       one thread with nobody else around.
//   BM_MutexContended1W / BM_BoostMutexContended1W   4 fibers on one worker each do 2,000 x
//       {lock; ++n; every 8th iteration yield while holding; unlock}: the yield forces the
//       others into the park/wake slow path. ns per lock+unlock.
//   BM_MutexContended2W / BM_StdMutexContended2T   the same 8,000 lock+unlock (no yield) from
//       4 fibers on 2 workers / 2 std::threads with std::mutex: cross-core contention.
//   BM_CancelLatency / BM_WakeLatency   a fiber pinned to worker 1 parks (sleep_for(1h) /
//       Event::wait); a fiber on worker 0 cancels it (JoinHandle::cancel) / sets the Event. The
//       latency from that call to the parked fiber running, p50 and p99 over the iterations
//       (counters p50_ns, p99_ns): what a cancel costs beyond the plain wake-up it reduces to
//       (its membarrier(2) and the wait's withdrawal).
// LioNet headers come first: Boost.Fiber defines a function-like macro cpu_relax() that
// would otherwise mangle lionet/base/spinlock.h.
#include "lionet/sched/os_locks.h"
#include "lionet/sched/scheduler.h"
#include "lionet/sync/channel.h"
#include "lionet/sync/event.h"
#include "lionet/sync/mutex.h"
#include "lionet/sync/wait_group.h"

#include <benchmark/benchmark.h>

#include <algorithm>
#include <atomic>
#include <boost/fiber/all.hpp>
#include <chrono>
#include <cstdio>
#include <map>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include <dlfcn.h>
#include <pthread.h>
#include <unistd.h>

namespace {
std::atomic<long> g_errors{0};

// Runs `body` in a fiber of a one-use scheduler with `threads` workers and waits for it.
template <class F>
void in_fiber(int threads, F&& body) {
  lionet::Scheduler s({.threads = threads, .name = "sbench"});
  s.spawn(std::forward<F>(body)).join();
}

void BM_ChanPingPong(benchmark::State& state) {
  in_fiber(1, [&] {
    lionet::Channel<int> ping(0), pong(0);
    lionet::go([&] {
      while (auto v = ping.recv()) pong.send(*v + 1);
    });
    int i = 0;
    for (auto _ : state) {
      ping.send(i);
      auto r = pong.recv();
      if (!r || *r != i + 1) g_errors.fetch_add(1);
      ++i;
    }
    ping.close();
  });
}
BENCHMARK(BM_ChanPingPong)->UseRealTime();

void BM_BoostChanPingPong(benchmark::State& state) {
  boost::fibers::unbuffered_channel<int> ping, pong;
  boost::fibers::fiber echo([&] {
    int v;
    while (ping.pop(v) == boost::fibers::channel_op_status::success) pong.push(v + 1);
  });
  int i = 0;
  for (auto _ : state) {
    ping.push(i);
    int r = -1;
    if (pong.pop(r) != boost::fibers::channel_op_status::success || r != i + 1) g_errors.fetch_add(1);
    ++i;
  }
  ping.close();
  echo.join();
}
BENCHMARK(BM_BoostChanPingPong)->UseRealTime();

void BM_ChanBufferedThroughput(benchmark::State& state) {
  in_fiber(1, [&] {
    lionet::Channel<int> ch(64);
    lionet::WaitGroup producer_done(1);
    lionet::go([&] {
      for (int i = 0; ch.send(i); ++i) {
      }
      producer_done.done();
    });
    int expect = 0;
    for (auto _ : state) {
      auto v = ch.recv();
      if (!v || *v != expect) g_errors.fetch_add(1);
      ++expect;
    }
    ch.close();
    producer_done.wait();
  });
}
BENCHMARK(BM_ChanBufferedThroughput)->UseRealTime();

void BM_BoostChanBufferedThroughput(benchmark::State& state) {
  boost::fibers::buffered_channel<int> ch(64);
  boost::fibers::fiber producer([&] {
    for (int i = 0; ch.push(i) == boost::fibers::channel_op_status::success; ++i) {
    }
  });
  int expect = 0;
  for (auto _ : state) {
    int v = -1;
    if (ch.pop(v) != boost::fibers::channel_op_status::success || v != expect) g_errors.fetch_add(1);
    ++expect;
  }
  ch.close();
  producer.join();
}
BENCHMARK(BM_BoostChanBufferedThroughput)->UseRealTime();

// The channel's own cost without any switch: try_send + try_recv on a buffered channel by one
// fiber (Boost: try_push + try_pop). Separates channel cost from scheduler cost in ping-pong.
void BM_ChanTrySendRecvNoSwitch(benchmark::State& state) {
  in_fiber(1, [&] {
    lionet::Channel<int> ch(64);
    int i = 0;
    for (auto _ : state) {
      ch.try_send(i);
      auto v = ch.try_recv();
      if (!v || *v != i) g_errors.fetch_add(1);
      ++i;
    }
  });
}
BENCHMARK(BM_ChanTrySendRecvNoSwitch)->UseRealTime();

void BM_BoostChanTryPushPopNoSwitch(benchmark::State& state) {
  boost::fibers::buffered_channel<int> ch(64);
  int i = 0;
  for (auto _ : state) {
    ch.try_push(i);
    int v = -1;
    if (ch.try_pop(v) != boost::fibers::channel_op_status::success || v != i) g_errors.fetch_add(1);
    ++i;
  }
}
BENCHMARK(BM_BoostChanTryPushPopNoSwitch)->UseRealTime();

void BM_MutexUncontended(benchmark::State& state) {
  lionet::Mutex mu;
  for (auto _ : state) {
    mu.lock();
    benchmark::ClobberMemory();
    mu.unlock();
  }
}
BENCHMARK(BM_MutexUncontended)->UseRealTime();

void BM_BoostMutexUncontended(benchmark::State& state) {
  boost::fibers::mutex mu;
  for (auto _ : state) {
    mu.lock();
    benchmark::ClobberMemory();
    mu.unlock();
  }
}
BENCHMARK(BM_BoostMutexUncontended)->UseRealTime();

void BM_StdMutexUncontended(benchmark::State& state) {
  std::mutex mu;
  for (auto _ : state) {
    mu.lock();
    benchmark::ClobberMemory();
    mu.unlock();
  }
}
BENCHMARK(BM_StdMutexUncontended)->UseRealTime();

// A std::mutex lock/unlock pair in a fiber: through hook/'s interposed pthread functions with
// fiber.check_os_locks on (log) and off, and libc's own functions called directly (dlsym
// RTLD_NEXT: no hook at all), the reference for what the check and the interposition cost.
void std_mutex_in_fiber(benchmark::State& state, int how) {
  const lionet::OsLockCheck before = lionet::os_lock_check();
  lionet::set_os_lock_check(how == 1 ? lionet::OsLockCheck::kLog : lionet::OsLockCheck::kOff);
  using LockFn = int (*)(pthread_mutex_t*);
  static const auto real_lock = reinterpret_cast<LockFn>(::dlsym(RTLD_NEXT, "pthread_mutex_lock"));
  static const auto real_unlock = reinterpret_cast<LockFn>(::dlsym(RTLD_NEXT, "pthread_mutex_unlock"));
  in_fiber(1, [&] {
    std::mutex mu;
    for (auto _ : state) {
      if (how == 2) {
        real_lock(mu.native_handle());
        benchmark::ClobberMemory();
        real_unlock(mu.native_handle());
      } else {
        mu.lock();
        benchmark::ClobberMemory();
        mu.unlock();
      }
    }
  });
  lionet::set_os_lock_check(before);
}
void BM_StdMutexInFiberChecked(benchmark::State& state) { std_mutex_in_fiber(state, 1); }
void BM_StdMutexInFiberUnchecked(benchmark::State& state) { std_mutex_in_fiber(state, 0); }
void BM_StdMutexInFiberLibc(benchmark::State& state) { std_mutex_in_fiber(state, 2); }
BENCHMARK(BM_StdMutexInFiberChecked)->UseRealTime();
BENCHMARK(BM_StdMutexInFiberUnchecked)->UseRealTime();
BENCHMARK(BM_StdMutexInFiberLibc)->UseRealTime();

constexpr int kContenders = 4;
constexpr int kContendedIters = 2000;
constexpr int kContendedOps = kContenders * kContendedIters;

template <class Mutex, class Yield>
void contended_body(Mutex& mu, long& n, bool yield_inside, Yield yield) {
  for (int i = 0; i < kContendedIters; ++i) {
    mu.lock();
    ++n;
    if (yield_inside && (i & 7) == 0) yield();
    mu.unlock();
  }
}

void lionet_contended(benchmark::State& state, int workers, bool yield_inside) {
  in_fiber(workers, [&] {
    lionet::Mutex mu;
    long n = 0;
    for (auto _ : state) {
      n = 0;
      lionet::WaitGroup wg(kContenders);
      for (int f = 0; f < kContenders; ++f) {
        lionet::go([&] {
          contended_body(mu, n, yield_inside, [] { lionet::this_fiber::yield(); });
          wg.done();
        });
      }
      wg.wait();
      std::lock_guard<lionet::Mutex> g(mu);
      if (n != kContendedOps) g_errors.fetch_add(1);
    }
  });
  state.SetItemsProcessed(state.iterations() * kContendedOps);
}

void BM_MutexContended1W(benchmark::State& state) { lionet_contended(state, 1, true); }
BENCHMARK(BM_MutexContended1W)->UseRealTime();
void BM_MutexContended2W(benchmark::State& state) { lionet_contended(state, 2, false); }
BENCHMARK(BM_MutexContended2W)->UseRealTime();

void BM_BoostMutexContended1W(benchmark::State& state) {
  boost::fibers::mutex mu;
  long n = 0;
  for (auto _ : state) {
    n = 0;
    std::vector<boost::fibers::fiber> fs;
    for (int f = 0; f < kContenders; ++f) {
      fs.emplace_back([&] { contended_body(mu, n, true, [] { boost::this_fiber::yield(); }); });
    }
    for (auto& f : fs) f.join();
    if (n != kContendedOps) g_errors.fetch_add(1);
  }
  state.SetItemsProcessed(state.iterations() * kContendedOps);
}
BENCHMARK(BM_BoostMutexContended1W)->UseRealTime();

void BM_StdMutexContended2T(benchmark::State& state) {
  std::mutex mu;
  long n = 0;
  for (auto _ : state) {
    n = 0;
    std::vector<std::thread> ts;
    // 2 threads x (2 contenders' worth of iterations) = the same 8,000 lock+unlock.
    for (int t = 0; t < 2; ++t) {
      ts.emplace_back([&] {
        for (int k = 0; k < kContenders / 2; ++k) contended_body(mu, n, false, [] {});
      });
    }
    for (auto& t : ts) t.join();
    if (n != kContendedOps) g_errors.fetch_add(1);
  }
  state.SetItemsProcessed(state.iterations() * kContendedOps);
}
BENCHMARK(BM_StdMutexContended2T)->UseRealTime();

// ---- Cancel latency (sched/cancel.h) beside the plain cross-worker wake-up it reduces to.
std::map<std::string, std::pair<double, double>> g_latency;  // name -> (p50, p99) ns

int64_t steady_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

void wake_latency(benchmark::State& state, bool cancel) {
  lionet::Scheduler s({.threads = 2, .io = {.backend = "none"}});
  std::vector<double> lat;
  for (auto _ : state) {
    lionet::Event ev;
    std::atomic<int64_t> woke{0};
    std::atomic<bool> waiting{false};
    auto victim = s.spawn(
        [&] {
          waiting = true;
          if (cancel) {
            lionet::this_fiber::sleep_for(std::chrono::hours(1));
          } else {
            ev.wait();
          }
          woke = steady_ns();
        },
        {.pin_worker = 1});
    const int64_t t0 = s.spawn(
                            [&] {
                              while (!waiting) lionet::this_fiber::yield();
                              // Let it switch out and its worker go idle, as a parked handler's would.
                              lionet::this_fiber::sleep_for(std::chrono::microseconds(200));
                              const int64_t t = steady_ns();
                              if (cancel) {
                                victim.cancel();
                              } else {
                                ev.set();
                              }
                              return t;
                            },
                            {.pin_worker = 0})
                           .join();
    victim.join();
    lat.push_back(static_cast<double>(woke.load() - t0));
  }
  std::sort(lat.begin(), lat.end());
  const double p50 = lat[lat.size() / 2], p99 = lat[std::min(lat.size() - 1, lat.size() * 99 / 100)];
  state.counters["p50_ns"] = p50;
  state.counters["p99_ns"] = p99;
  g_latency[cancel ? "cancel" : "wake"] = {p50, p99};
}
void BM_CancelLatency(benchmark::State& state) { wake_latency(state, true); }
void BM_WakeLatency(benchmark::State& state) { wake_latency(state, false); }
BENCHMARK(BM_CancelLatency)->Iterations(2000)->UseRealTime();
BENCHMARK(BM_WakeLatency)->Iterations(2000)->UseRealTime();

// Console output as usual, plus ns per operation of every run, keyed by benchmark name.
class CapturingReporter : public benchmark::ConsoleReporter {
 public:
  // Colors only on a terminal (a custom reporter does not see --benchmark_color), so that
  // scripts reading the RESULT line get plain text.
  CapturingReporter() : ConsoleReporter(isatty(STDOUT_FILENO) ? OO_Defaults : OO_Tabular) {}
  void ReportRuns(const std::vector<Run>& runs) override {
    for (const Run& r : runs) {
      if (r.error_occurred) {
        g_errors.fetch_add(1);
        continue;
      }
      if (r.run_type == Run::RT_Aggregate) continue;
      double ns = r.real_accumulated_time / static_cast<double>(r.iterations) * 1e9;  // per iteration
      std::string name = r.benchmark_name();
      name = name.substr(0, name.find('/'));
      if (name.find("Contended") != std::string::npos) ns /= kContendedOps;  // per lock+unlock
      // With --benchmark_repetitions, keep the fastest repetition: on a shared machine the
      // minimum is the figure least disturbed by other load, for LioNet and references alike.
      auto it = ns_.find(name);
      if (it == ns_.end() || ns < it->second) ns_[name] = ns;
    }
    ConsoleReporter::ReportRuns(runs);
  }
  double ns(const std::string& name) const {
    auto it = ns_.find(name);
    return it == ns_.end() ? -1.0 : it->second;
  }

 private:
  std::map<std::string, double> ns_;
};
}  // namespace

int main(int argc, char** argv) {
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  CapturingReporter rep;
  benchmark::RunSpecifiedBenchmarks(&rep);
  benchmark::Shutdown();
  auto ratio = [](double ref, double ours) { return ours > 0 && ref > 0 ? ref / ours : 0.0; };
  auto lat = [](const char* k) {
    auto it = g_latency.find(k);
    return it == g_latency.end() ? std::pair<double, double>{-1, -1} : it->second;
  };
  const double pp = rep.ns("BM_ChanPingPong"), bpp = rep.ns("BM_BoostChanPingPong");
  const double bt = rep.ns("BM_ChanBufferedThroughput"), bbt = rep.ns("BM_BoostChanBufferedThroughput");
  const double ns_ = rep.ns("BM_ChanTrySendRecvNoSwitch"), bns = rep.ns("BM_BoostChanTryPushPopNoSwitch");
  const double mu = rep.ns("BM_MutexUncontended"), bmu = rep.ns("BM_BoostMutexUncontended");
  const double smu = rep.ns("BM_StdMutexUncontended");
  const double fchk = rep.ns("BM_StdMutexInFiberChecked"), foff = rep.ns("BM_StdMutexInFiberUnchecked");
  const double flibc = rep.ns("BM_StdMutexInFiberLibc");
  const double mc1 = rep.ns("BM_MutexContended1W"), bmc1 = rep.ns("BM_BoostMutexContended1W");
  const double mc2 = rep.ns("BM_MutexContended2W"), smc2 = rep.ns("BM_StdMutexContended2T");
  std::printf(
      "RESULT chan_pingpong_ns=%.1f boost_chan_pingpong_ns=%.1f ratio_vs_boost=%.2f "
      "chan_buffered_ns=%.1f boost_chan_buffered_ns=%.1f buffered_ratio_vs_boost=%.2f "
      "chan_noswitch_ns=%.1f boost_chan_noswitch_ns=%.1f "
      "mutex_uncontended_ns=%.2f boost_mutex_uncontended_ns=%.2f std_mutex_uncontended_ns=%.2f "
      "mutex_contended_1w_ns=%.1f boost_mutex_contended_1w_ns=%.1f contended_1w_ratio_vs_boost=%.2f "
      "mutex_contended_2w_ns=%.1f std_mutex_contended_2t_ns=%.1f "
      "cancel_p50_ns=%.0f cancel_p99_ns=%.0f wake_p50_ns=%.0f wake_p99_ns=%.0f cancel_p50_ratio_vs_wake=%.2f "
      "std_mutex_fiber_checked_ns=%.2f std_mutex_fiber_unchecked_ns=%.2f std_mutex_fiber_libc_ns=%.2f "
      "os_lock_check_ratio_vs_libc=%.2f errors=%ld\n",
      pp, bpp, ratio(bpp, pp), bt, bbt, ratio(bbt, bt), ns_, bns, mu, bmu, smu, mc1, bmc1, ratio(bmc1, mc1), mc2, smc2,
      lat("cancel").first, lat("cancel").second, lat("wake").first, lat("wake").second,
      lat("wake").first > 0 ? lat("cancel").first / lat("wake").first : 0.0, fchk, foff, flibc,
      flibc > 0 ? fchk / flibc : 0.0, g_errors.load());
  return g_errors.load() == 0 ? 0 : 1;
}
