// lionet/file/detail/completion_reaper.h: what the two kernel-AIO engines (libaio, io_uring)
// share: the batch waiter a submitting fiber parks on, and the per-worker context skeleton
// with its eventfd and its reaper fiber (private to file/).
//
// Owns: BatchWaiter, ReapedContext (in-flight count, reaper lifecycle, eventfd wait),
// ThreadContexts (one context per engine per worker thread). Must not know libaio or liburing
// (the engines subclass ReapedContext), read configuration, or hold a lock across a park.
//
// COMPLETION PROTOCOL (one context = one io_context_t or ring, created by and for one worker
// thread; its eventfd is signalled by the kernel for every completion):
//  1. A fiber fills a BatchWaiter{parker = itself, remaining = n}, points each request's
//     waiter at it, submits on the context of the worker it runs on NOW, then calls
//     started(k) with the k requests the kernel accepted. Requests the kernel refused at once
//     are completed by the submitter itself (BatchWaiter::complete).
//  2. started() adds k to `inflight` and makes sure a reaper fiber runs (protocol 3).
//  3. The reaper fiber (at most one per context; spawned on demand, so an idle context costs
//     no fiber and Scheduler::stop() never waits for one) loops: reap() everything the kernel
//     has finished (io_getevents(ctx, 0, N) / a CQ sweep), completing each request; read the
//     eventfd; if it said EAGAIN, park in IOManager::wait_readable_after_eagain(eventfd). It
//     exits when `inflight` drops to <= 0 (see started()/reaper_main() for the handshake:
//     Dekker-style, inflight is published before reaper_active is tested, both seq_cst).
//  4. BatchWaiter::complete() decrements `remaining` (n + 1: the submitter holds one until
//     it is ready to park); the decrement that takes it to zero unparks the submitter
//     (lionet::park's exactly-once protocol), so each batch waiter is woken at most once,
//     after all its requests are done, and nobody touches it afterwards.
// MIGRATION: the submitter may resume on another worker; nothing it owns refers to a context,
// and the reaper may run on any worker (the kernel structures are safe for one submitter
// thread + one reaping thread; libaio's io_submit is thread-safe anyway). A context is only
// ever submitted to from its own thread, with no scheduling point between the lookup and the
// submit system call (io_uring's SQ is single-producer).
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "lionet/file/file_engine.h"
#include "lionet/sched/park.h"

namespace lionet {
class IOManager;
}

namespace lionet::detail {

// The submitter holds one extra count while it submits (remaining = n + 1), so only a
// completion that arrives after the submitter let go of it can take the count to zero: that
// completion unparks, and a submitter that finds everything already done does not park. An
// unpark aimed at a fiber that will not park would be kept (NOTIFIED) and end its next,
// unrelated park early.
struct BatchWaiter {
  explicit BatchWaiter(std::size_t n) noexcept : remaining(static_cast<int64_t>(n) + 1) {}
  Parker parker = Parker::current();
  std::atomic<int64_t> remaining;
  // Called once per request, by the reaper. acq_rel: the request's res written before is
  // visible to the waiter after park() returns.
  void complete(FileRequest& r, int64_t res) noexcept {
    r.res = res;
    if (remaining.fetch_sub(1, std::memory_order_acq_rel) == 1) parker.unpark();
  }
  // A request the submitter finished itself (refused at submit): cannot reach zero.
  void complete_by_submitter(FileRequest& r, int64_t res) noexcept {
    r.res = res;
    remaining.fetch_sub(1, std::memory_order_acq_rel);
  }
  // Drops the submitter's count and parks until every request completed (not at all if they
  // already did).
  void wait() noexcept {
    if (remaining.fetch_sub(1, std::memory_order_acq_rel) != 1) park();
  }
};

class ReapedContext {
 public:
  // efd: a non-blocking eventfd the kernel signals per completion (owned: closed here).
  ReapedContext(int efd, IOManager* iom, FileEngine* engine) noexcept : efd_(efd), iom_(iom), engine_(engine) {}
  virtual ~ReapedContext();
  ReapedContext(const ReapedContext&) = delete;
  ReapedContext& operator=(const ReapedContext&) = delete;

  // Protocol step 2. Call from the submitting fiber after k requests were accepted.
  void started(int k) noexcept;
  // Step 2 for contexts where looking for completions costs no system call (io_uring's CQ is
  // shared memory): if no reaper runs, the submitter takes the reaper's role for one sweep
  // first, so completions that arrived during the submit call (the kernel runs completion
  // work when io_uring_enter returns) cost no reaper fiber and no eventfd wake-up; a reaper is
  // spawned only if requests remain in flight. Same handshake as the reaper's exit.
  void started_reap_inline(int k) noexcept;
  int64_t inflight() const noexcept { return inflight_.load(std::memory_order_relaxed); }
  int eventfd() const noexcept { return efd_; }

 protected:
  // Takes up to max finished completions from the kernel without blocking, completes each
  // (BatchWaiter::complete) and returns how many. Only the reaper fiber calls it.
  virtual int reap(int max) noexcept = 0;
  FileEngine* engine() const noexcept { return engine_; }

 private:
  void reaper_main() noexcept;
  void spawn_reaper() noexcept;  // holds the reaper role; reaps inline if no fiber can be had
  void drain() noexcept;  // reaps until nothing is left (reaper role held)
  void release_reaper_role() noexcept;  // the exit handshake; spawns a reaper if needed
  const int efd_;
  IOManager* const iom_;
  FileEngine* const engine_;
  std::atomic<int64_t> inflight_{0};  // writers: submitters (+), the reaper (-)
  std::atomic<bool> reaper_active_{false};
  friend class ReapedEngineBase;
};

// Engine side: per-thread contexts and the counters the reaper updates.
class ReapedEngineBase : public FileEngine {
 public:
  explicit ReapedEngineBase(const FileEngineOptions& o) noexcept : options_(o) {}
  // The calling worker thread's context, created on first use (nullptr if the kernel
  // refused: the caller falls back to a blocking-pool run). Must be called from a fiber of a
  // scheduler with an IOManager.
  ReapedContext* context_here() noexcept;
  // Counter hooks for ReapedContext.
  void note_reaped(uint64_t n) noexcept { counters_.note_reaped(n); }
  void note_eventfd_wait() noexcept { counters_.eventfd_waits.fetch_add(1, std::memory_order_relaxed); }
  const FileEngineOptions& options() const noexcept { return options_; }
  // What every reaped engine does first: count the requests and make the BatchWaiter that the
  // submitting fiber parks on (step 1 above), then submit() them.
  void run(std::span<FileRequest> reqs) noexcept final {
    if (reqs.empty()) return;
    counters_.requests.fetch_add(reqs.size(), std::memory_order_relaxed);
    BatchWaiter waiter(reqs.size());
    submit(reqs, waiter);
  }

 protected:
  // Submits reqs (n >= 1) with waiter as their BatchWaiter and returns once all completed.
  virtual void submit(std::span<FileRequest> reqs, BatchWaiter& waiter) noexcept = 0;
  // Creates a context for the calling thread (nullptr on failure, logged once).
  virtual std::unique_ptr<ReapedContext> make_context(IOManager* iom) noexcept = 0;
  const FileEngineOptions options_;
};

// A fresh non-blocking, close-on-exec eventfd, or -1 (errno set).
int make_nonblocking_eventfd() noexcept;

}  // namespace lionet::detail
