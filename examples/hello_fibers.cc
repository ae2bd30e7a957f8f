// examples/hello_fibers.cc: the fiber API in one page: spawn, join, yield, sleep_for, go, stop.
//
// Build: it is built by default (build/<preset>/examples/hello_fibers). Run it with no
// arguments; it prints what happens and exits 0.
#include <atomic>
#include <chrono>
#include <cstdio>
#include <stdexcept>

#include "lionet/sched/scheduler.h"

using namespace std::chrono_literals;

int main() {
  // A scheduler owns its worker threads. Two workers here: fibers may run on either, and
  // may move between them at any scheduling point (yield, sleep, join, IO).
  lionet::Scheduler sched(lionet::SchedulerOptions{.threads = 2, .name = "hello"});

  // spawn() starts a fiber and returns a JoinHandle<R>; join() waits for the result. From a
  // plain thread (like main) join() blocks the thread; inside a fiber it parks only the fiber.
  lionet::JoinHandle<int> answer = sched.spawn([] { return 6 * 7; });
  std::printf("the answer is %d\n", answer.join());

  // Fibers are cooperative: yield() lets other runnable fibers run (and returns at once if
  // none is waiting). Two fibers that yield to each other interleave.
  auto ping = sched.spawn([] {
    for (int i = 0; i < 3; ++i) {
      std::printf("ping %d (fiber %llu, worker %d)\n", i, static_cast<unsigned long long>(lionet::this_fiber::id()),
                  lionet::this_fiber::worker_index());
      lionet::this_fiber::yield();
    }
  });
  auto pong = sched.spawn([] {
    for (int i = 0; i < 3; ++i) {
      std::printf("pong %d\n", i);
      lionet::this_fiber::yield();
    }
  });
  ping.join();
  pong.join();

  // sleep_for() parks the fiber on a timer; the worker thread runs other fibers meanwhile.
  // go() spawns a detached fiber on the scheduler running the caller (only inside a fiber).
  std::atomic<int> woke{0};
  sched
      .spawn([&woke] {
        for (int i = 0; i < 10; ++i) {
          lionet::go([&woke, i] {
            lionet::this_fiber::sleep_for(std::chrono::milliseconds(10 * (i % 3)));
            woke.fetch_add(1, std::memory_order_relaxed);
          });
        }
      })
      .join();

  // An exception thrown in a fiber reaches whoever joins it.
  auto thrower = sched.spawn([]() -> int { throw std::runtime_error("boom"); });
  try {
    thrower.join();
  } catch (const std::runtime_error& e) {
    std::printf("caught from a fiber: %s\n", e.what());
  }

  // stop() waits for every fiber, detached ones included (the ten sleepers above), then ends
  // the worker threads. The destructor calls it too.
  sched.stop();
  std::printf("%d of 10 sleepers woke up before stop() returned\n", woke.load());
  return woke.load() == 10 ? 0 : 1;
}
