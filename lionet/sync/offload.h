// lionet/sync/offload.h: lionet::offload(f): run a blocking or CPU-heavy call on a bounded
// pool of OS threads while the calling fiber parks, then return its result or rethrow its
// exception in the fiber.
//
// Owns: OffloadOptions, OffloadPool and the process-wide default pool. Must not read
// configuration (ARCHITECTURE decision 10): app/ maps YAML (offload.threads) onto
// OffloadOptions and calls configure_offload() once at start-up, before the first offload().
//
//   auto rows = lionet::offload([&] { return legacy_db.query(sql); });  // fiber parks meanwhile
//
// Where it runs: called from a fiber, f runs on a pool thread and the fiber parks (its worker
// keeps running other fibers). Called from a plain thread, or from a pool thread (nested
// offload), f simply runs inline: the caller may block, and a pool thread waiting for its own
// pool could deadlock it.
// Bounds: `threads` OS threads at most; tasks beyond that queue FIFO (the queue is intrusive,
// one node on each parked fiber's stack: no allocation, and it cannot grow beyond the number of
// parked fibers). f's captures are used in place (by reference): the fiber is parked until f
// has returned, so its stack outlives the call.
// Concurrency: offload() from any number of fibers and threads at once.
#pragma once

#include <condition_variable>
#include <cstddef>
#include <exception>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <type_traits>
#include <utility>
#include <vector>

#include "lionet/fiber/wait_reason.h"
#include "lionet/sched/park.h"

namespace lionet {

struct OffloadOptions {
  // Pool threads (>= 1). Each is an OS thread (8 MiB of virtual stack, memory only as used);
  // it is also the maximum number of offloaded calls running at once. YAML: offload.threads.
  int threads = 4;
  // Thread names are "<name>-<i>" (truncated to 15 bytes by the OS). YAML: offload.name.
  std::string name = "lionet-offload";
};

namespace detail {
// A queued call; lives on the parked fiber's stack.
struct OffloadTask {
  OffloadTask* next = nullptr;
  Parker parker;  // the fiber to unpark once run() returned
  void (*run)(OffloadTask*) = nullptr;  // runs the call, stores result or exception
};
bool on_offload_thread() noexcept;
}  // namespace detail

class OffloadPool {
 public:
  explicit OffloadPool(OffloadOptions options = {});
  // Runs every queued task, then joins the threads. Must not be called from a pool thread.
  ~OffloadPool();
  OffloadPool(const OffloadPool&) = delete;
  OffloadPool& operator=(const OffloadPool&) = delete;

  const OffloadOptions& options() const noexcept { return options_; }

  // Runs f() as described at the top of the file and returns its result (or rethrows).
  template <class F>
  auto run(F&& f) -> std::invoke_result_t<F&> {
    using R = std::invoke_result_t<F&>;
    if (!Parker::current().is_fiber() || detail::on_offload_thread()) return f();
    Task<F, R> task(f);
    submit(&task);
    note_wait(WaitKind::kOffload, this);
    park();  // unparked by the pool thread after task.run() stored the outcome
    if (task.error) std::rethrow_exception(task.error);
    if constexpr (!std::is_void_v<R>) return std::move(*task.result);
  }

 private:
  template <class F, class R>
  struct Task : detail::OffloadTask {
    explicit Task(F& fn) noexcept : f(fn) {
      parker = Parker::current();
      run = &invoke;
    }
    static void invoke(detail::OffloadTask* base) noexcept {
      auto* self = static_cast<Task*>(base);
      try {
        if constexpr (std::is_void_v<R>) {
          self->f();
        } else {
          self->result.emplace(self->f());
        }
      } catch (...) {
        self->error = std::current_exception();
      }
    }
    F& f;
    std::conditional_t<std::is_void_v<R>, bool, std::optional<R>> result{};
    std::exception_ptr error;
  };

  void submit(detail::OffloadTask* t);
  void thread_main(int index);

  const OffloadOptions options_;
  std::mutex mu_;  // protects head_, tail_, stopping_; held briefly, never across a park
  std::condition_variable cv_;
  detail::OffloadTask* head_ = nullptr;
  detail::OffloadTask* tail_ = nullptr;
  bool stopping_ = false;
  std::vector<std::thread> threads_;
};

// Sets the options of the process-wide pool. Returns false (and changes nothing) if that pool
// already exists (first offload() or default_offload_pool() already happened).
bool configure_offload(OffloadOptions options);
// The process-wide pool, created on first use; never destroyed (its threads idle until exit).
OffloadPool& default_offload_pool();

template <class F>
auto offload(F&& f) -> std::invoke_result_t<F&> {
  return default_offload_pool().run(std::forward<F>(f));
}
}  // namespace lionet
