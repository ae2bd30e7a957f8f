// A program built against the installed LioNet: one fiber on a two-worker scheduler.
#include <cstdio>

#include "lionet/sched/scheduler.h"

int main() {
  lionet::Scheduler sched(lionet::SchedulerOptions{.threads = 2});
  auto handle = sched.spawn([] {
    lionet::this_fiber::yield();  // a scheduling point: the fiber may resume on either worker
    return lionet::this_fiber::id() != 0 ? 42 : -1;
  });
  const int result = handle.join();
  sched.stop();
  if (result != 42) {
    std::fprintf(stderr, "lionet consumer FAILED: got %d\n", result);
    return 1;
  }
  std::printf("lionet consumer OK: %d\n", result);
  return 0;
}
