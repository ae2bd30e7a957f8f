// lionet/file/detail/completion_reaper.cc: the reaper fiber and the per-thread context table
// shared by the libaio and io_uring engines. The protocol is at the top of completion_reaper.h.
#include "lionet/file/detail/completion_reaper.h"

#include <sys/eventfd.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <utility>

#include "lionet/io/io_manager.h"
#include "lionet/sched/scheduler.h"

namespace lionet::detail {
namespace {

// The contexts created on this thread, one per engine. Destroyed when the worker thread ends,
// which happens inside Scheduler::stop() after every fiber (reapers included) finished, so no
// request is in flight then. The eventfd is closed without IOManager::cancel(): the IOManager
// may already be gone, and no fiber of a stopped scheduler waits on it any more.
struct ThreadContexts {
  std::vector<std::pair<const ReapedEngineBase*, std::unique_ptr<ReapedContext>>> list;
};
thread_local ThreadContexts t_contexts;

// Not inlined: the thread_local's address must be computed on the thread running now (a fiber
// may have migrated since its caller last looked).
[[gnu::noinline]] ThreadContexts& thread_contexts() noexcept { return t_contexts; }

}  // namespace

int make_nonblocking_eventfd() noexcept { return ::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC); }

ReapedContext::~ReapedContext() {
  if (efd_ >= 0) ::syscall(SYS_close, efd_);  // raw: not through the hooked close()
}

void ReapedContext::spawn_reaper() noexcept {
  try {
    Scheduler::current()->spawn_detached([this] { reaper_main(); }, {.name = "file-reaper"});
  } catch (...) {
    // No fiber to be had (the stack budget is exhausted): this fiber, which holds the reaper
    // role, reaps until nothing is in flight. Slower for it, but no completion is lost.
    reaper_main();
  }
}

void ReapedContext::started(int k) noexcept {
  if (k <= 0) return;
  // seq_cst pair (1): the add is ordered before the exchange below, and the reaper's
  // store(false) before its load of inflight_ (2): at least one side sees the other.
  inflight_.fetch_add(k, std::memory_order_seq_cst);
  if (!reaper_active_.exchange(true, std::memory_order_seq_cst)) spawn_reaper();
}

void ReapedContext::started_reap_inline(int k) noexcept {
  if (k <= 0) return;
  inflight_.fetch_add(k, std::memory_order_seq_cst);  // (1), as in started()
  if (reaper_active_.exchange(true, std::memory_order_seq_cst)) return;  // a reaper will see them
  drain();
  release_reaper_role();
}

void ReapedContext::release_reaper_role() noexcept {
  reaper_active_.store(false, std::memory_order_seq_cst);  // (2), pairs with (1)
  if (inflight_.load(std::memory_order_seq_cst) <= 0) return;
  if (!reaper_active_.exchange(true, std::memory_order_seq_cst)) spawn_reaper();
}

void ReapedContext::drain() noexcept {
  auto* eng = static_cast<ReapedEngineBase*>(engine_);
  const int batch = static_cast<int>(eng->options().reap_batch ? eng->options().reap_batch : 64);
  for (;;) {
    int n = reap(batch);
    if (n <= 0) return;
    eng->note_reaped(static_cast<uint64_t>(n));
    inflight_.fetch_sub(n, std::memory_order_seq_cst);
    if (n < batch) return;
  }
}

void ReapedContext::reaper_main() noexcept {
  auto* eng = static_cast<ReapedEngineBase*>(engine_);
  // Completions must be reaped whatever happens (the kernel writes into callers' buffers): a
  // cancel (Scheduler::stop cancels what is left) must not end this loop's waits.
  CancelShield shield;
  for (;;) {
    drain();
    if (inflight_.load(std::memory_order_seq_cst) <= 0) {
      reaper_active_.store(false, std::memory_order_seq_cst);  // (2), pairs with (1)
      if (inflight_.load(std::memory_order_seq_cst) <= 0) return;
      if (reaper_active_.exchange(true, std::memory_order_seq_cst)) return;  // a new reaper took over
      continue;
    }
    // Reset the eventfd. A value means completions were signalled since the last read: reap
    // again before sleeping (the kernel posts the completion before it signals, so a
    // completion that lands after the sweep above signals again and the read below sees it).
    uint64_t v;
    if (::syscall(SYS_read, efd_, &v, sizeof v) == static_cast<long>(sizeof v)) continue;
    eng->note_eventfd_wait();
    int w = iom_->wait_readable_after_eagain(efd_);
    if (w != 0 && w != ECANCELED) {
      // The reactor refused the eventfd (ENOMEM/ENOSPC): fall back to polling it.
      this_fiber::sleep_for(std::chrono::microseconds(100));
    }
  }
}

ReapedContext* ReapedEngineBase::context_here() noexcept {
  ThreadContexts& tc = thread_contexts();
  for (auto& [eng, ctx] : tc.list) {
    if (eng == this) return ctx.get();
  }
  IOManager* iom = IOManager::current();
  if (!iom) return nullptr;
  std::unique_ptr<ReapedContext> ctx = make_context(iom);
  ReapedContext* raw = ctx.get();
  if (raw) counters_.contexts.fetch_add(1, std::memory_order_relaxed);
  // A failure is remembered too (nullptr), so a refusing kernel is asked once per thread.
  tc.list.emplace_back(this, std::move(ctx));
  return raw;
}

}  // namespace lionet::detail
