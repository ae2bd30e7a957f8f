// bench/fiber_bench.cc: LioNet fiber creation and switch costs, measured in the same run as
// their references: raw Boost.Context round trips (fcontext, context::fiber, callcc) and
// Boost.Fiber (round_robin on one thread, work_stealing on several).
//
// Owns: the benchmark shapes of the earlier LioNet report (so tables compare line by line)
// and the machine-readable RESULT line. Must not: test correctness (tests/ does that).
//
// Names: BM_<What>/<N>/threads:<T>. Every benchmark reports real (wall) time per iteration
// and two counters: `ops` (operations per iteration) and `per_op` (seconds per operation,
// printed as e.g. 9.8ns). Wall time is the only meaningful clock here: the timed loop of the
// LioNet benchmarks runs inside a driver fiber that may migrate between worker threads.
//
// Shapes:
//   BM_FiberCreation/N/threads:T   a driver fiber spawns N detached fibers (each decrements
//                                  a counter) and yields until all have run; ns per fiber
//                                  covers spawn, first run, completion and reclaim.
//   BM_FiberSpawnJoin/N/threads:T  the same, but every fiber is joined through its handle.
//   BM_FiberSpawnJoinNoRegistry/1000/1  the same with SchedulerOptions::fiber_registry off: the
//                                  cost of listing fibers for dumps.
//   BM_FiberSwitch/N/threads:T     N fibers each yield 1000 times; ns per switch.
//   BM_FiberDump/100000/stacks:S   dump_fibers() of 100,000 fibers parked in a sleep, with
//                                  their stacks walked and symbolized (S=1) or without (S=0);
//                                  ns per fiber (RESULT: ms per dump).
//   BM_FiberSwitchCanary/1000/1    the same with canary-protected stacks (fiber.stack_protection:
//                                  canary): what the canary check adds per switch.
//   BM_FiberCpuBound/threads:T     1000 fibers x 10 slices of ~2.6 us of arithmetic, a yield
//                                  after each slice; ns per slice (throughput scaling).
//   BM_ThreadsCpuBound/threads:T   the same slices on T plain std::threads: what the shared
//                                  machine allows right now (reference for the row above).
//   BM_Raw{Fcontext,Fiber,Callcc}RoundTrip   ns per round trip (two switches).
//   BM_BoostFiberCreation/N/threads:T  create N boost::fibers::fiber, then join them all.
//   BM_BoostFiberCreationDefaultStack/1000/threads:1  the same with Boost's default
//                                  allocator (fixedsize_stack: malloc per fiber), for context.
//   BM_BoostFiberSwitch/N/threads:T    N Boost fibers each yield 1000 times.
//
// Boost.Fiber setup. threads:1 runs in this process on the default round_robin algorithm.
// threads>1 uses algo::work_stealing(T, suspend=true) in a forked child process, one child
// per thread count: work_stealing keeps its scheduler table and start-up barrier in statics
// that are sized by the first use, so a process can host exactly one work_stealing pool in
// its lifetime. The child follows Boost's own examples: T-1 std::threads call
// use_scheduling_algorithm and then wait on a boost::fibers::condition_variable_any (so their
// dispatchers keep running fibers), the child's main thread joins the pool too and launches
// the fibers. The child times each iteration itself and sends the seconds back through a
// pipe (UseManualTime, hence the "/manual_time" suffix on those rows). suspend=true makes idle
// Boost workers sleep on a condition variable instead of spinning, as LioNet's workers park.
// Stacks: boost::fibers::pooled_fixedsize_stack of 128 KiB (LioNet's default usable size),
// kept for the whole run as LioNet keeps its pool; it is not thread-safe, so with threads>1
// it is guarded by a mutex (LockedPooledStack). Boost's default allocator (fixedsize_stack,
// malloc per fiber) measured ~5 us per fiber here, so it would flatter LioNet; its row
// BM_BoostFiberCreationDefaultStack is printed for context only.
//
// Bounds: every wait on the child has a timeout, the child dies with its parent
// (PR_SET_PDEATHSIG), and a watchdog aborts the whole run after LIONET_BENCH_TIMEOUT seconds
// (default 600), naming the last benchmark that finished.
#include <benchmark/benchmark.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <boost/context/continuation.hpp>
#include <boost/context/detail/fcontext.hpp>
#include <boost/context/fiber.hpp>
#include <boost/context/fixedsize_stack.hpp>
#include <boost/fiber/algo/work_stealing.hpp>
#include <boost/fiber/all.hpp>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "lionet/fiber/detail/context.h"
#include "lionet/sched/cancel.h"
#include "lionet/sched/fiber_dump.h"
#include "lionet/sched/scheduler.h"

namespace {

namespace bctx = boost::context;

constexpr int kYieldsPerFiber = 1000;  // BM_FiberSwitch / BM_BoostFiberSwitch
constexpr int kCpuFibers = 1000;  // BM_FiberCpuBound
constexpr int kCpuSlices = 10;  // yields per CPU-bound fiber
constexpr int kCpuWorkPerSlice = 1000;  // xorshift-multiply rounds per slice (~2.6 us)
constexpr std::size_t kStackSize = 128 * 1024;  // usable stack for every reference fiber

std::atomic<int> g_errors{0};
std::atomic<const char*> g_last_finished{"(none yet)"};  // for the watchdog message

// ops per iteration as a plain counter (read back by the RESULT line and scripts) and as an
// inverted rate: seconds per op, printed by the console reporter as "12.3ns".
void set_op_counters(benchmark::State& state, double ops_per_iteration) {
  state.counters["ops"] = ops_per_iteration;
  state.counters["per_op"] = benchmark::Counter(
      ops_per_iteration, benchmark::Counter::kIsIterationInvariantRate | benchmark::Counter::kInvert);
}

void fail(benchmark::State& state, const std::string& why) {
  g_errors.fetch_add(1, std::memory_order_relaxed);
  state.SkipWithError(why.c_str());
}

// ---------------------------------------------------------------------------------------
// LioNet
// ---------------------------------------------------------------------------------------

// Runs the whole timed loop inside one driver fiber, so that spawns go to a worker's local
// queue (the lock-free path) and no per-iteration thread wake-up is timed. The scheduler is
// built once per benchmark run, outside the timed region.
template <class Body>
void run_in_driver_fiber(benchmark::State& state, int threads, Body&& body,
                         lionet::StackProtection protection = lionet::StackProtection::kAuto, bool registry = true) {
  lionet::SchedulerOptions o{.threads = threads, .stack_protection = protection, .name = "bench"};
  o.fiber_registry = registry;
  lionet::Scheduler sched(std::move(o));
  try {
    sched.spawn([&] { body(sched); }).join();
  } catch (const std::exception& e) {
    fail(state, std::string("fiber threw: ") + e.what());
  }
  sched.stop();
  const lionet::WorkerStats st = sched.total_stats();
  const double per_iter = state.iterations() > 0 ? 1.0 / static_cast<double>(state.iterations()) : 0.0;
  state.counters["steals"] = static_cast<double>(st.steals) * per_iter;
  state.counters["parks"] = static_cast<double>(st.parks) * per_iter;
}

void BM_FiberCreation(benchmark::State& state) {
  const int n = static_cast<int>(state.range(0));
  const int threads = static_cast<int>(state.range(1));
  run_in_driver_fiber(state, threads, [&](lionet::Scheduler& sched) {
    for (auto _ : state) {
      std::atomic<int> remaining{n};
      for (int i = 0; i < n; ++i) {
        // release: pairs with the driver's acquire load below.
        sched.spawn_detached([&remaining] { remaining.fetch_sub(1, std::memory_order_release); });
      }
      while (remaining.load(std::memory_order_acquire) != 0) lionet::this_fiber::yield();
    }
  });
  set_op_counters(state, n);
}

void fiber_spawn_join(benchmark::State& state, bool registry) {
  const int n = static_cast<int>(state.range(0));
  const int threads = static_cast<int>(state.range(1));
  run_in_driver_fiber(
      state, threads,
      [&](lionet::Scheduler& sched) {
        std::vector<lionet::JoinHandle<int>> handles;
        handles.reserve(n);
        int64_t sum = 0;
        for (auto _ : state) {
          for (int i = 0; i < n; ++i) handles.push_back(sched.spawn([i] { return i; }));
          for (auto& h : handles) sum += h.join();
          handles.clear();
        }
        if (sum != static_cast<int64_t>(state.iterations()) * n * (n - 1) / 2) {
          fail(state, "BM_FiberSpawnJoin: wrong sum of results");
        }
      },
      lionet::StackProtection::kAuto, registry);
  set_op_counters(state, n);
}

void BM_FiberSpawnJoin(benchmark::State& state) { fiber_spawn_join(state, true); }
// The same with SchedulerOptions::fiber_registry off: what listing fibers for dumps costs.
void BM_FiberSpawnJoinNoRegistry(benchmark::State& state) { fiber_spawn_join(state, false); }

void fiber_switch(benchmark::State& state, lionet::StackProtection protection) {
  const int n = static_cast<int>(state.range(0));
  const int threads = static_cast<int>(state.range(1));
  run_in_driver_fiber(
      state, threads,
      [&](lionet::Scheduler& sched) {
        std::vector<lionet::JoinHandle<void>> handles;
        handles.reserve(n);
        for (auto _ : state) {
          for (int i = 0; i < n; ++i) {
            handles.push_back(sched.spawn([] {
              for (int k = 0; k < kYieldsPerFiber; ++k) lionet::this_fiber::yield();
            }));
          }
          for (auto& h : handles) h.join();
          handles.clear();
        }
      },
      protection);
  set_op_counters(state, static_cast<double>(n) * kYieldsPerFiber);
}

void BM_FiberSwitch(benchmark::State& state) { fiber_switch(state, lionet::StackProtection::kAuto); }

// A frame the dump's stacks go through (noinline: it stays a frame while its fiber waits).
[[gnu::noinline]] void bench_parked_in_sleep() {
  (void)lionet::this_fiber::sleep_for(std::chrono::hours(1));  // ended by cancel()
  asm volatile("");
}

// N fibers parked in one sleep (a channel would do as well: channel.h's SpinLock clashes with
// Boost.Fiber's cpu_relax macro in this file); each iteration is one dump_fibers() of them, with stacks
// (stacks:1, every fiber's stack walked and the groups symbolized) or without (stacks:0, the
// reference in the same run). ns per fiber; the whole dump is N times that.
void BM_FiberDump(benchmark::State& state) {
  const int n = static_cast<int>(state.range(0));
  const bool stacks = state.range(1) != 0;
  lionet::Scheduler sched({.threads = 2, .name = "bench"});
  std::vector<lionet::JoinHandle<void>> hs;
  hs.reserve(static_cast<std::size_t>(n));
  for (int i = 0; i < n; ++i) hs.push_back(sched.spawn([] { bench_parked_in_sleep(); }));
  const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (sched.stats().fiber_parks < static_cast<uint64_t>(n) && std::chrono::steady_clock::now() < give_up)
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  std::size_t bytes = 0;
  bool grouped = false;
  for (auto _ : state) {
    const std::string text = lionet::dump_fibers(sched, {.stacks = stacks});
    bytes = text.size();
    grouped = text.find(std::to_string(n) + " fibers: parked") != std::string::npos &&
              (!stacks || text.find("bench_parked_in_sleep") != std::string::npos);
  }
  if (!grouped) fail(state, "BM_FiberDump: the dump did not show the fibers as one group (with their frame)");
  state.counters["dump_bytes"] = static_cast<double>(bytes);
  for (auto& h : hs) h.cancel();
  for (auto& h : hs) h.join();
  sched.stop();
  set_op_counters(state, n);
}
// The same with every stack protected by a canary, checked at every switch out (the mode used
// where neither guard regions nor guard pages can be had): the check's cost per switch.
void BM_FiberSwitchCanary(benchmark::State& state) { fiber_switch(state, lionet::StackProtection::kCanary); }

// A dependent chain the compiler cannot fold: ~2.6 ns per round on this machine.
uint64_t cpu_work(uint64_t x, int rounds) {
  for (int i = 0; i < rounds; ++i) {
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    x *= 0x2545F4914F6CDD1DULL;
  }
  return x;
}

void BM_FiberCpuBound(benchmark::State& state) {
  const int threads = static_cast<int>(state.range(0));
  run_in_driver_fiber(state, threads, [&](lionet::Scheduler& sched) {
    std::vector<lionet::JoinHandle<uint64_t>> handles;
    handles.reserve(kCpuFibers);
    for (auto _ : state) {
      for (int i = 0; i < kCpuFibers; ++i) {
        handles.push_back(sched.spawn([i] {
          uint64_t x = 0x9E3779B97F4A7C15ULL + static_cast<uint64_t>(i);
          for (int s = 0; s < kCpuSlices; ++s) {
            x = cpu_work(x, kCpuWorkPerSlice);
            lionet::this_fiber::yield();
          }
          return x;
        }));
      }
      uint64_t acc = 0;
      for (auto& h : handles) acc ^= h.join();
      benchmark::DoNotOptimize(acc);
      handles.clear();
    }
  });
  set_op_counters(state, static_cast<double>(kCpuFibers) * kCpuSlices);
}

// Reference for BM_FiberCpuBound: the same slices split across T plain std::threads (no
// fibers, no yields). Its scaling is what the machine allows at that moment (other load on
// the shared cores included), so LioNet's scaling is read against it. Thread start-up
// (~50 us per thread) is inside the timed region: under 3% of an iteration at 16 threads.
void BM_ThreadsCpuBound(benchmark::State& state) {
  const int threads = static_cast<int>(state.range(0));
  for (auto _ : state) {
    std::atomic<uint64_t> acc{0};
    std::vector<std::thread> workers;
    workers.reserve(threads);
    for (int t = 0; t < threads; ++t) {
      workers.emplace_back([&acc, t, threads] {
        uint64_t mine = 0;
        for (int i = t; i < kCpuFibers; i += threads) {
          uint64_t x = 0x9E3779B97F4A7C15ULL + static_cast<uint64_t>(i);
          for (int s = 0; s < kCpuSlices; ++s) x = cpu_work(x, kCpuWorkPerSlice);
          mine ^= x;
        }
        acc.fetch_xor(mine, std::memory_order_relaxed);
      });
    }
    for (auto& w : workers) w.join();
    benchmark::DoNotOptimize(acc.load(std::memory_order_relaxed));
  }
  set_op_counters(state, static_cast<double>(kCpuFibers) * kCpuSlices);
}

// ---------------------------------------------------------------------------------------
// Raw Boost.Context: one round trip = two switches (there and back).
// ---------------------------------------------------------------------------------------

void fcontext_entry(bctx::detail::transfer_t t) {
  for (;;) t = bctx::detail::jump_fcontext(t.fctx, nullptr);
}

void BM_RawFcontextRoundTrip(benchmark::State& state) {
  bctx::fixedsize_stack alloc(kStackSize);
  bctx::stack_context sc = alloc.allocate();
  bctx::detail::fcontext_t ctx = bctx::detail::make_fcontext(sc.sp, sc.size, fcontext_entry);
  ctx = bctx::detail::jump_fcontext(ctx, nullptr).fctx;  // enter once; it jumps straight back
  for (auto _ : state) ctx = bctx::detail::jump_fcontext(ctx, nullptr).fctx;
  // The context is parked inside its loop and owns nothing on its stack: just free the stack.
  alloc.deallocate(sc);
  set_op_counters(state, 1);
}

// LioNet's own switch primitive (lionet/fiber/detail/context.h; Boost's fcontext where it has
// none), driven exactly like BM_RawFcontextRoundTrip above.
void lionet_raw_entry(lionet::detail::Transfer t) {
  for (;;) t = lionet::detail::raw_switch(t.from_ctx, nullptr);
}

void BM_RawLionetRoundTrip(benchmark::State& state) {
  bctx::fixedsize_stack alloc(kStackSize);
  bctx::stack_context sc = alloc.allocate();
  lionet::detail::ExecutionContext ec;
  lionet::detail::make_context(ec, static_cast<char*>(sc.sp) - sc.size, sc.size, lionet_raw_entry);
  void* ctx = lionet::detail::raw_switch(ec.fctx, nullptr).from_ctx;  // enter once; it comes straight back
  for (auto _ : state) ctx = lionet::detail::raw_switch(ctx, nullptr).from_ctx;
  lionet::detail::destroy_context(ec);
  alloc.deallocate(sc);
  set_op_counters(state, 1);
}

void BM_RawFiberRoundTrip(benchmark::State& state) {
  bctx::fiber f{std::allocator_arg, bctx::fixedsize_stack(kStackSize), [](bctx::fiber&& main) {
                  for (;;) main = std::move(main).resume();
                  return std::move(main);
                }};
  for (auto _ : state) f = std::move(f).resume();
  set_op_counters(state, 1);
  // ~fiber unwinds the suspended fiber (forced_unwind out of its resume()).
}

void BM_RawCallccRoundTrip(benchmark::State& state) {
  bctx::continuation c =
      bctx::callcc(std::allocator_arg, bctx::fixedsize_stack(kStackSize), [](bctx::continuation&& main) {
        for (;;) main = main.resume();
        return std::move(main);
      });
  for (auto _ : state) c = c.resume();
  set_op_counters(state, 1);
}

// ---------------------------------------------------------------------------------------
// Boost.Fiber
// ---------------------------------------------------------------------------------------

enum class BoostOp : int32_t { kCreate = 1, kSwitch = 2, kQuit = 3 };

// Boost's pooled_fixedsize_stack wraps a boost::pool and is not thread-safe; under
// work_stealing a stack is freed on whichever thread ran its fiber last, so with several
// threads the same pool is guarded by a mutex (uncontended most of the time on 2 cores).
class LockedPooledStack {
 public:
  explicit LockedPooledStack(std::size_t size) : shared_(std::make_shared<Shared>(size)) {}
  bctx::stack_context allocate() {
    std::lock_guard<std::mutex> lk(shared_->mtx);
    return shared_->pool.allocate();
  }
  void deallocate(bctx::stack_context& sc) noexcept {
    std::lock_guard<std::mutex> lk(shared_->mtx);
    shared_->pool.deallocate(sc);
  }

 private:
  struct Shared {
    explicit Shared(std::size_t size) : pool(size) {}
    std::mutex mtx;
    boost::fibers::pooled_fixedsize_stack pool;
  };
  std::shared_ptr<Shared> shared_;
};

template <class StackAlloc>
void boost_create_join(int n, StackAlloc alloc) {
  std::vector<boost::fibers::fiber> fibers;
  fibers.reserve(n);
  for (int i = 0; i < n; ++i) fibers.emplace_back(std::allocator_arg, alloc, [] {});
  for (auto& f : fibers) f.join();
}

template <class StackAlloc>
void boost_switch(int n, StackAlloc alloc) {
  std::vector<boost::fibers::fiber> fibers;
  fibers.reserve(n);
  for (int i = 0; i < n; ++i) {
    fibers.emplace_back(std::allocator_arg, alloc, [] {
      for (int k = 0; k < kYieldsPerFiber; ++k) boost::this_fiber::yield();
    });
  }
  for (auto& f : fibers) f.join();
}

// Seconds for one iteration of `op`.
template <class StackAlloc>
double boost_run_once(BoostOp op, int n, StackAlloc alloc) {
  const auto t0 = std::chrono::steady_clock::now();
  if (op == BoostOp::kCreate) {
    boost_create_join(n, alloc);
  } else {
    boost_switch(n, alloc);
  }
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

bool read_full(int fd, void* buf, size_t len, int timeout_ms) {
  auto* p = static_cast<char*>(buf);
  while (len > 0) {
    if (timeout_ms >= 0) {
      pollfd pfd{fd, POLLIN, 0};
      int r = ::poll(&pfd, 1, timeout_ms);
      if (r < 0 && errno == EINTR) continue;
      if (r <= 0) return false;  // timeout or error
    }
    ssize_t got = ::read(fd, p, len);
    if (got < 0 && errno == EINTR) continue;
    if (got <= 0) return false;
    p += got;
    len -= static_cast<size_t>(got);
  }
  return true;
}

bool write_full(int fd, const void* buf, size_t len) {
  const auto* p = static_cast<const char*>(buf);
  while (len > 0) {
    ssize_t put = ::write(fd, p, len);
    if (put < 0 && errno == EINTR) continue;
    if (put <= 0) return false;
    p += put;
    len -= static_cast<size_t>(put);
  }
  return true;
}

struct BoostCommand {
  BoostOp op;
  int32_t n;
};

// The child: a Boost.Fiber work_stealing pool of `threads` threads serving commands.
[[noreturn]] void boost_child_main(int threads, int cmd_fd, int res_fd) {
  ::prctl(PR_SET_PDEATHSIG, SIGKILL);
  std::mutex mtx;
  boost::fibers::condition_variable_any done_cv;
  bool done = false;
  std::vector<std::thread> workers;
  for (int i = 1; i < threads; ++i) {
    workers.emplace_back([&] {
      boost::fibers::use_scheduling_algorithm<boost::fibers::algo::work_stealing>(threads, true);
      std::unique_lock<std::mutex> lk(mtx);
      done_cv.wait(lk, [&] { return done; });  // suspends this thread's main fiber only
    });
  }
  // work_stealing's constructor waits on a barrier of `threads` parties: once this returns,
  // every worker has registered and the pool is complete.
  boost::fibers::use_scheduling_algorithm<boost::fibers::algo::work_stealing>(threads, true);
  LockedPooledStack alloc(kStackSize);  // lives as long as the child, like LioNet's pool
  for (;;) {
    BoostCommand cmd{};
    if (!read_full(cmd_fd, &cmd, sizeof cmd, -1) || cmd.op == BoostOp::kQuit) break;
    double secs = -1.0;
    try {
      secs = boost_run_once(cmd.op, cmd.n, alloc);
    } catch (...) {
      secs = -1.0;
    }
    if (!write_full(res_fd, &secs, sizeof secs)) break;
  }
  {
    std::lock_guard<std::mutex> lk(mtx);
    done = true;
  }
  done_cv.notify_all();
  for (auto& t : workers) t.join();
  ::_exit(0);
}

class BoostWorkStealingChild {
 public:
  explicit BoostWorkStealingChild(int threads) : threads_(threads) {
    int cmd[2], res[2];
    if (::pipe(cmd) != 0 || ::pipe(res) != 0) return;
    std::fflush(nullptr);
    pid_t pid = ::fork();
    if (pid == 0) {
      ::close(cmd[1]);
      ::close(res[0]);
      boost_child_main(threads, cmd[0], res[1]);
    }
    ::close(cmd[0]);
    ::close(res[1]);
    if (pid < 0) {
      ::close(cmd[1]);
      ::close(res[0]);
      return;
    }
    pid_ = pid;
    s_child_pid.store(pid, std::memory_order_relaxed);
    cmd_fd_ = cmd[1];
    res_fd_ = res[0];
  }

  ~BoostWorkStealingChild() {
    if (pid_ <= 0) return;
    BoostCommand quit{BoostOp::kQuit, 0};
    write_full(cmd_fd_, &quit, sizeof quit);
    ::close(cmd_fd_);
    ::close(res_fd_);
    // Give it 5 s to shut its pool down cleanly, then kill it.
    for (int i = 0; i < 500; ++i) {
      if (::waitpid(pid_, nullptr, WNOHANG) == pid_) {
        s_child_pid.store(0, std::memory_order_relaxed);
        return;
      }
      ::usleep(10'000);
    }
    std::fprintf(stderr, "fiber_bench: Boost.Fiber child (threads=%d) did not exit; killed\n", threads_);
    g_errors.fetch_add(1, std::memory_order_relaxed);
    ::kill(pid_, SIGKILL);
    ::waitpid(pid_, nullptr, 0);
    s_child_pid.store(0, std::memory_order_relaxed);
  }

  int threads() const { return threads_; }
  bool ok() const { return pid_ > 0; }

  // Seconds the child measured for one iteration, or nullopt on failure (incl. 120 s timeout).
  std::optional<double> run(BoostOp op, int n) {
    if (pid_ <= 0) return std::nullopt;
    BoostCommand cmd{op, n};
    double secs = -1.0;
    if (!write_full(cmd_fd_, &cmd, sizeof cmd) || !read_full(res_fd_, &secs, sizeof secs, 120'000) || secs < 0) {
      return std::nullopt;
    }
    return secs;
  }

  static std::atomic<pid_t> s_child_pid;

 private:
  int threads_;
  pid_t pid_ = -1;
  int cmd_fd_ = -1;
  int res_fd_ = -1;
};
std::atomic<pid_t> BoostWorkStealingChild::s_child_pid{0};

std::unique_ptr<BoostWorkStealingChild> g_boost_child;  // at most one alive, keyed by threads

BoostWorkStealingChild* boost_child(int threads) {
  if (!g_boost_child || g_boost_child->threads() != threads) {
    g_boost_child.reset();
    g_boost_child = std::make_unique<BoostWorkStealingChild>(threads);
  }
  return g_boost_child->ok() ? g_boost_child.get() : nullptr;
}

void run_boost(benchmark::State& state, BoostOp op, int n, int threads) {
  if (threads == 1) {
    boost::fibers::pooled_fixedsize_stack alloc(kStackSize);
    for (auto _ : state) state.SetIterationTime(boost_run_once(op, n, alloc));
    return;
  }
  BoostWorkStealingChild* child = boost_child(threads);
  if (!child) {
    fail(state, "could not start the Boost.Fiber work_stealing child");
    return;
  }
  for (auto _ : state) {
    std::optional<double> secs = child->run(op, n);
    if (!secs) {
      fail(state, "Boost.Fiber work_stealing child failed or timed out");
      g_boost_child.reset();
      break;
    }
    state.SetIterationTime(*secs);
  }
}

void BM_BoostFiberCreation(benchmark::State& state) {
  const int n = static_cast<int>(state.range(0));
  run_boost(state, BoostOp::kCreate, n, static_cast<int>(state.range(1)));
  set_op_counters(state, n);
}

void BM_BoostFiberCreationDefaultStack(benchmark::State& state) {
  const int n = static_cast<int>(state.range(0));
  boost::fibers::fixedsize_stack alloc(kStackSize);
  for (auto _ : state) state.SetIterationTime(boost_run_once(BoostOp::kCreate, n, alloc));
  set_op_counters(state, n);
}

void BM_BoostFiberSwitch(benchmark::State& state) {
  const int n = static_cast<int>(state.range(0));
  run_boost(state, BoostOp::kSwitch, n, static_cast<int>(state.range(1)));
  set_op_counters(state, static_cast<double>(n) * kYieldsPerFiber);
}

// ---------------------------------------------------------------------------------------
// Registration
// ---------------------------------------------------------------------------------------

void fiber_shapes(benchmark::internal::Benchmark* b) {
  for (int n : {1000, 3000}) {
    for (int t : {1, 2, 4, 8, 16}) b->Args({n, t});
  }
  b->ArgNames({"", "threads"});
}

void thread_counts(benchmark::internal::Benchmark* b) {
  for (int t : {1, 2, 4, 8, 16}) b->Arg(t);
  b->ArgName("threads");
}

BENCHMARK(BM_RawFcontextRoundTrip)->UseRealTime();
BENCHMARK(BM_RawLionetRoundTrip)->UseRealTime();
BENCHMARK(BM_RawFiberRoundTrip)->UseRealTime();
BENCHMARK(BM_RawCallccRoundTrip)->UseRealTime();
BENCHMARK(BM_FiberCreation)->Apply(fiber_shapes)->UseRealTime();
BENCHMARK(BM_FiberSpawnJoin)->Apply(fiber_shapes)->UseRealTime();
BENCHMARK(BM_FiberSpawnJoinNoRegistry)->Args({1000, 1})->ArgNames({"", "threads"})->UseRealTime();
BENCHMARK(BM_FiberSwitch)->Args({10, 1})->Apply(fiber_shapes)->UseRealTime();
BENCHMARK(BM_FiberDump)->Args({100000, 0})->Args({100000, 1})->ArgNames({"", "stacks"})->Iterations(3)->UseRealTime();
BENCHMARK(BM_FiberSwitchCanary)->Args({1000, 1})->ArgNames({"", "threads"})->UseRealTime();
BENCHMARK(BM_FiberCpuBound)->Apply(thread_counts)->UseRealTime();
BENCHMARK(BM_ThreadsCpuBound)->Apply(thread_counts)->UseRealTime();
BENCHMARK(BM_BoostFiberCreation)->Apply(fiber_shapes)->UseManualTime();
BENCHMARK(BM_BoostFiberCreationDefaultStack)->Args({1000, 1})->ArgNames({"", "threads"})->UseManualTime();
BENCHMARK(BM_BoostFiberSwitch)->Args({10, 1})->Apply(fiber_shapes)->UseManualTime();

// ---------------------------------------------------------------------------------------
// Reporting: the console table as usual, plus ns/op per run collected for the RESULT line.
// ---------------------------------------------------------------------------------------

class CollectingReporter : public benchmark::ConsoleReporter {
 public:
  using ConsoleReporter::ConsoleReporter;

  bool ReportContext(const Context& context) override { return ConsoleReporter::ReportContext(context); }

  void ReportRuns(const std::vector<Run>& runs) override {
    for (const Run& r : runs) {
      if (r.run_type != Run::RT_Iteration) continue;
      std::string name = r.benchmark_name();
      if (const auto pos = name.find("/manual_time"); pos != std::string::npos) name.erase(pos);
      if (const auto pos = name.find("/real_time"); pos != std::string::npos) name.erase(pos);
      if (r.error_occurred) {
        g_last_finished.store("(a benchmark that failed)");
        g_errors.fetch_add(1, std::memory_order_relaxed);
        continue;
      }
      const auto ops = r.counters.find("ops");
      if (r.iterations <= 0 || ops == r.counters.end() || ops->second.value <= 0) continue;
      auto [it, inserted] = ns_per_op_.insert_or_assign(
          name, r.real_accumulated_time * 1e9 / static_cast<double>(r.iterations) / ops->second.value);
      g_last_finished.store(it->first.c_str());  // map keys are stable
    }
    ConsoleReporter::ReportRuns(runs);
  }

  std::optional<double> get(const std::string& name) const {
    auto it = ns_per_op_.find(name);
    if (it == ns_per_op_.end()) return std::nullopt;
    return it->second;
  }

 private:
  std::map<std::string, double> ns_per_op_;
};

std::string fmt(std::optional<double> v) {
  if (!v || !std::isfinite(*v)) return "na";
  char buf[64];
  std::snprintf(buf, sizeof buf, *v >= 100 ? "%.0f" : "%.2f", *v);
  return buf;
}

std::optional<double> div(std::optional<double> a, std::optional<double> b) {
  if (!a || !b || *b == 0) return std::nullopt;
  return *a / *b;
}

void print_result_line(const CollectingReporter& rep) {
  const auto switch_ns = rep.get("BM_FiberSwitch/1000/threads:1");
  const auto create_ns = rep.get("BM_FiberCreation/1000/threads:1");
  const auto spawn_join_ns = rep.get("BM_FiberSpawnJoin/1000/threads:1");
  const auto raw_fcontext = rep.get("BM_RawFcontextRoundTrip");
  const auto raw_half = raw_fcontext ? std::optional<double>(*raw_fcontext / 2) : std::nullopt;
  const auto boost_switch_ns = rep.get("BM_BoostFiberSwitch/1000/threads:1");
  const auto boost_create_ns = rep.get("BM_BoostFiberCreation/1000/threads:1");
  const auto boost_create_default_stack_ns = rep.get("BM_BoostFiberCreationDefaultStack/1000/threads:1");
  const auto cpu1 = rep.get("BM_FiberCpuBound/threads:1");
  const auto cpu2 = rep.get("BM_FiberCpuBound/threads:2");
  const auto cpu16 = rep.get("BM_FiberCpuBound/threads:16");
  const auto thr1 = rep.get("BM_ThreadsCpuBound/threads:1");
  const auto thr2 = rep.get("BM_ThreadsCpuBound/threads:2");
  const auto switch10_ns = rep.get("BM_FiberSwitch/10/threads:1");
  const auto spawn_join_noreg_ns = rep.get("BM_FiberSpawnJoinNoRegistry/1000/threads:1");
  // dump_fibers() of 100,000 parked fibers, with and without their stacks: ms per dump.
  auto per_dump_ms = [&](const char* name) -> std::optional<double> {
    const auto ns = rep.get(name);
    return ns ? std::optional<double>(*ns * 100000 / 1e6) : std::nullopt;
  };
  const auto dump_stacks_ms = per_dump_ms("BM_FiberDump/100000/stacks:1/iterations:3");
  const auto dump_plain_ms = per_dump_ms("BM_FiberDump/100000/stacks:0/iterations:3");
  // NaN (printed "na") when either is missing; a plain double: gcc 12 warns falsely on an optional here.
  const double registry_cost_pct = spawn_join_ns && spawn_join_noreg_ns && *spawn_join_noreg_ns > 0
                                       ? (*spawn_join_ns / *spawn_join_noreg_ns - 1) * 100
                                       : std::nan("");

  std::printf(
      "RESULT switch_ns=%s create_ns=%s spawn_join_ns=%s raw_half_roundtrip_ns=%s "
      "boost_fiber_switch_ns=%s boost_fiber_create_ns=%s switch_ratio_vs_raw_half=%s "
      "create_ratio_vs_boost=%s mt2_speedup=%s mt16_vs_mt2=%s "
      "boost_fiber_create_default_stack_ns=%s spawn_join_ratio_vs_boost=%s switch_ratio_vs_boost=%s "
      "raw_fiber_roundtrip_ns=%s raw_callcc_roundtrip_ns=%s threads_ref_mt2_speedup=%s "
      "switch10_ns=%s switch10_ratio_vs_raw_half=%s raw_lionet_roundtrip_ns=%s registry_cost_pct=%s "
      "threads_ref_mt16_vs_mt2=%s dump_100k_stacks_ms=%s dump_100k_ms=%s dump_stacks_ratio=%s errors=%d\n",
      fmt(switch_ns).c_str(), fmt(create_ns).c_str(), fmt(spawn_join_ns).c_str(), fmt(raw_half).c_str(),
      fmt(boost_switch_ns).c_str(), fmt(boost_create_ns).c_str(), fmt(div(switch_ns, raw_half)).c_str(),
      fmt(div(boost_create_ns, create_ns)).c_str(), fmt(div(cpu1, cpu2)).c_str(), fmt(div(cpu2, cpu16)).c_str(),
      fmt(boost_create_default_stack_ns).c_str(), fmt(div(boost_create_ns, spawn_join_ns)).c_str(),
      fmt(div(boost_switch_ns, switch_ns)).c_str(), fmt(rep.get("BM_RawFiberRoundTrip")).c_str(),
      fmt(rep.get("BM_RawCallccRoundTrip")).c_str(), fmt(div(thr1, thr2)).c_str(), fmt(switch10_ns).c_str(),
      fmt(div(switch10_ns, raw_half)).c_str(), fmt(rep.get("BM_RawLionetRoundTrip")).c_str(),
      fmt(registry_cost_pct).c_str(), fmt(div(thr2, rep.get("BM_ThreadsCpuBound/threads:16"))).c_str(),
      fmt(dump_stacks_ms).c_str(), fmt(dump_plain_ms).c_str(), fmt(div(dump_stacks_ms, dump_plain_ms)).c_str(),
      g_errors.load());
  std::fflush(stdout);
}

// Aborts a run that exceeds its time budget, so that a scheduler bug cannot hang `make bench`.
void start_watchdog() {
  int limit_s = 600;
  if (const char* env = std::getenv("LIONET_BENCH_TIMEOUT")) limit_s = std::max(1, std::atoi(env));
  std::thread([limit_s] {
    std::this_thread::sleep_for(std::chrono::seconds(limit_s));
    std::fprintf(stderr, "fiber_bench: watchdog: still running after %d s (last finished: %s); aborting\n", limit_s,
                 g_last_finished.load());
    if (pid_t child = BoostWorkStealingChild::s_child_pid.load()) ::kill(child, SIGKILL);
    std::printf("RESULT errors=1 watchdog_timeout_s=%d\n", limit_s);
    std::fflush(stdout);
    ::_exit(3);
  }).detach();
}

}  // namespace

int main(int argc, char** argv) {
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  start_watchdog();
  CollectingReporter reporter(isatty(STDOUT_FILENO) ? benchmark::ConsoleReporter::OO_ColorTabular
                                                    : benchmark::ConsoleReporter::OO_Tabular);
  benchmark::RunSpecifiedBenchmarks(&reporter);
  g_boost_child.reset();
  benchmark::Shutdown();
  print_result_line(reporter);
  return g_errors.load() == 0 ? 0 : 1;
}
