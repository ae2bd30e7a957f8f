// examples/channel_pipeline.cc: producer -> N workers -> collector, connected by channels.
//
//   ./channel_pipeline [items] [workers] [work_us] [threads]
//       items    how many numbers (1..items) go through the pipeline   (default 100000, max 2000000)
//       workers  worker fibers squaring them                           (default 8)
//       work_us  pretend work per item: the worker fiber sleeps this   (default 0)
//       threads  scheduler worker threads                              (default 2)
//
// The producer sends 1..items on `jobs`; every worker squares what it receives and sends the
// square on `results`; the collector adds the squares up. The last line can be checked:
//
//   result: processed=K sum_of_squares=S expected=E status=ok
//
// where E = K(K+1)(2K+1)/6. Ctrl-C / SIGTERM stops the producer early: the numbers it already
// sent still go through, so the checksum still holds for the smaller K and status=stopped.
// Exit status 0 when the sum is right, 1 when it is not, 2 on bad arguments.
//
// What it shows: Channel<T> (buffered, close, range-for), select() over a send and a receive,
// a deadline case for progress reports, WaitGroup, and channels used from a plain thread.
#include <pthread.h>
#include <signal.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <optional>
#include <thread>
#include <vector>

#include "lionet/sched/scheduler.h"
#include "lionet/sync/channel.h"  // also brings lionet::select (select.h)
#include "lionet/sync/wait_group.h"

using namespace std::chrono_literals;

namespace {
// Positional argument i as a number, or `fallback` when absent.
long long arg(int argc, char** argv, int i, long long fallback) { return argc > i ? std::atoll(argv[i]) : fallback; }
}  // namespace

int main(int argc, char** argv) {
  const long long items = arg(argc, argv, 1, 100000);
  const long long workers = arg(argc, argv, 2, 8);
  const long long work_us = arg(argc, argv, 3, 0);
  const long long threads = arg(argc, argv, 4, 2);
  if (items < 0 || items > 2000000 || workers < 1 || workers > 10000 || work_us < 0 || threads < 1 || threads > 64) {
    std::fprintf(stderr, "usage: %s [items<=2000000] [workers>=1] [work_us>=0] [threads>=1]\n", argv[0]);
    return 2;
  }
  std::setvbuf(stdout, nullptr, _IOLBF, 0);  // one line at a time, also into a pipe

  // Block SIGINT/SIGTERM in every thread (threads inherit the mask); one thread waits for them.
  sigset_t sigs;
  sigemptyset(&sigs);
  sigaddset(&sigs, SIGINT);
  sigaddset(&sigs, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &sigs, nullptr);

  lionet::Scheduler sched({.threads = static_cast<int>(threads), .name = "pipeline"});

  // The three channels. A buffered channel lets the sender run a little ahead of the receiver;
  // send() parks the sending fiber only while the buffer is full, recv() only while it is empty.
  lionet::Channel<uint64_t> jobs(64);  // producer -> workers
  lionet::Channel<uint64_t> results(64);  // workers -> collector
  lionet::Channel<int> stop(0);  // never carries a value: closing it is the broadcast

  // Signals: a plain thread (not a fiber) waits for SIGINT/SIGTERM and closes `stop`. Channels
  // work from plain threads too. At the end main wakes it with a SIGTERM of its own.
  std::atomic<bool> finished{false};
  std::thread signal_thread([&] {
    int sig = 0;
    sigwait(&sigs, &sig);
    if (!finished.load()) std::printf("signal %d: stopping the producer\n", sig);
    stop.close();
  });

  const auto t0 = std::chrono::steady_clock::now();

  // 1. The producer. select() waits for whichever comes first: a worker (or buffer space)
  //    taking i, or `stop` being closed (a receive on a closed channel completes at once).
  auto producer = sched.spawn([&]() -> uint64_t {
    uint64_t sent = 0;
    for (uint64_t i = 1; i <= static_cast<uint64_t>(items); ++i) {
      std::optional<int> unused;
      bool delivered = false;
      int which = lionet::select(lionet::send_case(jobs, i, &delivered),  // case 0
                                 lionet::recv_case(stop, unused));  // case 1
      if (which == 1 || !delivered) break;
      ++sent;
    }
    jobs.close();  // the workers drain what was sent, then their loops end
    return sent;
  });

  // 2. The workers. `for (x : jobs)` receives until `jobs` is closed and empty. Each worker
  //    counts what it handled, to show how the work spread over them.
  lionet::WaitGroup running(workers);
  std::vector<uint64_t> handled(workers, 0);  // handled[w] is written only by worker w
  std::vector<lionet::JoinHandle<void>> worker_fibers;
  for (long long w = 0; w < workers; ++w) {
    worker_fibers.push_back(sched.spawn([&, w] {
      for (uint64_t x : jobs) {
        if (work_us > 0) lionet::this_fiber::sleep_for(std::chrono::microseconds(work_us));
        results.send(x * x);  // parks while the collector is behind
        ++handled[w];
      }
      running.done();
    }));
  }

  // 3. When the last worker is done nothing more can arrive on `results`: close it, so the
  //    collector's receive reports "closed and drained" instead of waiting forever.
  auto closer = sched.spawn([&] {
    running.wait();
    results.close();
  });

  // 4. The collector adds up the squares and, once a second, reports progress: select()
  //    between a receive and a deadline.
  struct Totals {
    uint64_t count = 0;
    unsigned __int128 sum = 0;
  };
  auto collector = sched.spawn([&] {
    Totals t;
    auto next_report = lionet::now() + 1s;
    for (;;) {
      std::optional<uint64_t> square;
      int which = lionet::select(lionet::recv_case(results, square),  // case 0
                                 lionet::deadline_case(next_report));  // case 1
      if (which == 1) {
        std::printf("progress: %llu of %lld\n", static_cast<unsigned long long>(t.count), items);
        next_report += 1s;
        continue;
      }
      if (!square) break;  // closed and drained: every worker has finished
      t.sum += *square;
      ++t.count;
    }
    return t;
  });

  // main is a plain thread: join() blocks it (inside a fiber it would park only the fiber).
  const uint64_t sent = producer.join();
  for (auto& f : worker_fibers) f.join();
  closer.join();
  const Totals totals = collector.join();
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();

  finished.store(true);
  pthread_kill(signal_thread.native_handle(), SIGTERM);  // wake its sigwait (SIGTERM is blocked)
  signal_thread.join();
  sched.stop();

  std::printf("%lld workers on %lld threads, %.3f s; items per worker:", workers, threads, secs);
  for (uint64_t h : handled) std::printf(" %llu", static_cast<unsigned long long>(h));
  std::printf("\n");

  // The checksum: the squares of 1..K add up to K(K+1)(2K+1)/6 (K = what the producer sent).
  const unsigned __int128 k = totals.count;
  const unsigned __int128 expected = k * (k + 1) * (2 * k + 1) / 6;
  const bool ok = totals.count == sent && totals.sum == expected;
  std::printf("result: processed=%llu sum_of_squares=%llu expected=%llu status=%s\n",
              static_cast<unsigned long long>(totals.count), static_cast<unsigned long long>(totals.sum),
              static_cast<unsigned long long>(expected),
              !ok ? "wrong" : (sent < static_cast<uint64_t>(items) ? "stopped" : "ok"));
  return ok ? 0 : 1;
}
