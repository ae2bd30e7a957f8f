// lionet/file/uring_file_engine.cc: the "io_uring" file engine: one ring per worker thread
// (not shared with the io_uring reactor: separate rings keep this engine independent of
// io.backend and of the reactor's submission batching), an eventfd registered on the ring
// (io_uring_register_eventfd) and watched through the IOManager, one io_uring_submit per
// run() call, i.e. per batch. Completion protocol: detail/completion_reaper.h.
//
// Owns: UringEngine, UringContext. Must not: touch a ring's SQ from another thread than its
// owner (run() looks the ring up and submits with no scheduling point in between; when it
// must wait for room it pins itself, see below), or use SQPOLL (it would burn one of two cores).
//
// Ring flags: none. DEFER_TASKRUN/SINGLE_ISSUER would oblige the owner thread to reap, but the
// reaper fiber may run on any worker; COOP_TASKRUN would delay completions while the owner
// thread runs fibers in user space. Registered buffers/files are not used (see README.md).
// Room: at most cq_entries requests in flight per ring (so the CQ never overflows); beyond that,
// and on EBUSY/EAGAIN from io_uring_enter, the submitter sleeps 50 us and retries.
#include <liburing.h>

#include <cerrno>
#include <chrono>
#include <optional>

#include "lionet/base/tsan.h"
#include "lionet/file/detail/completion_reaper.h"
#include "lionet/io/io_manager.h"
#include "lionet/log/log.h"
#include "lionet/sched/scheduler.h"
#include "lionet/sync/offload.h"

namespace lionet::detail {
namespace {

class UringContext final : public ReapedContext {
 public:
  UringContext(int efd, IOManager* iom, FileEngine* eng) noexcept : ReapedContext(efd, iom, eng) {}
  ~UringContext() override {
    if (ready_) io_uring_queue_exit(&ring_);
  }
  // Creates the ring and registers the eventfd; false on failure (errno-style code in *err).
  bool init(unsigned entries, int* err) noexcept {
    int r = io_uring_queue_init(entries, &ring_, 0);
    if (r < 0) {
      *err = -r;
      return false;
    }
    ready_ = true;
    r = io_uring_register_eventfd(&ring_, eventfd());
    if (r < 0) {
      *err = -r;
      return false;
    }
    return true;
  }
  io_uring* ring() noexcept { return &ring_; }
  unsigned capacity() const noexcept { return ring_.cq.ring_entries; }

 protected:
  int reap(int max) noexcept override {
    io_uring_cqe* cqe;
    unsigned head;
    int n = 0;
    io_uring_for_each_cqe(&ring_, head, cqe) {
      auto* r = static_cast<FileRequest*>(io_uring_cqe_get_data(cqe));
      tsan_acquire(r);  // pairs with tsan_release in prep(): the kernel ordered them
      static_cast<BatchWaiter*>(r->engine_data)->complete(*r, cqe->res);  // r may be gone now
      if (++n == max) break;
    }
    if (n > 0) io_uring_cq_advance(&ring_, static_cast<unsigned>(n));
    return n;
  }

 private:
  io_uring ring_{};
  bool ready_ = false;
};

class UringEngine final : public ReapedEngineBase {
 public:
  using ReapedEngineBase::ReapedEngineBase;
  const char* name() const noexcept override { return "io_uring"; }

  void submit(std::span<FileRequest> reqs, BatchWaiter& waiter) noexcept override {
    const std::size_t n = reqs.size();
    std::size_t done = 0;
    while (done < n) {
      auto* ctx = static_cast<UringContext*>(context_here());
      if (!ctx) {  // no ring on this thread: finish on the offload pool
        for (; done < n; ++done) {
          FileRequest& r = reqs[done];
          waiter.complete_by_submitter(r, offload([&r] { return run_blocking(r); }));
        }
        break;
      }
      // Prepare as many as the CQ has room for; no scheduling point until io_uring_submit.
      const int64_t room = static_cast<int64_t>(ctx->capacity()) - ctx->inflight();
      std::size_t prepared = 0;
      while (done + prepared < n && static_cast<int64_t>(prepared) < room) {
        io_uring_sqe* sqe = io_uring_get_sqe(ctx->ring());
        if (!sqe) break;  // SQ full: submit these first
        prep(sqe, reqs[done + prepared], &waiter);
        ++prepared;
      }
      if (prepared == 0) {
        counters_.queue_full.fetch_add(1, std::memory_order_relaxed);
        this_fiber::sleep_for(std::chrono::microseconds(50));
        continue;
      }
      submit_all(ctx, static_cast<int>(prepared));
      done += prepared;
    }
    CancelShield shield;  // the kernel writes into the caller's buffers: wait for it
    waiter.wait();
  }

 protected:
  std::unique_ptr<ReapedContext> make_context(IOManager* iom) noexcept override {
    static const auto lg = log::get("file");
    int efd = make_nonblocking_eventfd();
    if (efd < 0) return nullptr;
    auto ctx = std::make_unique<UringContext>(efd, iom, this);
    int err = 0;
    if (!ctx->init(options_.queue_depth ? options_.queue_depth : 128, &err)) {
      LIONET_LOG_WARN(lg, "io_uring file engine: ring setup failed: errno {}", err);
      return nullptr;
    }
    return ctx;
  }

 private:
  static void prep(io_uring_sqe* sqe, FileRequest& r, BatchWaiter* w) noexcept {
    r.engine_data = w;
    tsan_release(&r);  // the reaper on another thread reads r: ordered by the kernel
    switch (r.op) {
      case FileOp::kRead:
        if (r.iov) io_uring_prep_readv(sqe, r.fd, r.iov, static_cast<unsigned>(r.iovcnt), r.offset);
        else io_uring_prep_read(sqe, r.fd, r.buf, static_cast<unsigned>(r.len), r.offset);
        break;
      case FileOp::kWrite:
        if (r.iov) io_uring_prep_writev(sqe, r.fd, r.iov, static_cast<unsigned>(r.iovcnt), r.offset);
        else io_uring_prep_write(sqe, r.fd, r.buf, static_cast<unsigned>(r.len), r.offset);
        break;
      case FileOp::kFsync: io_uring_prep_fsync(sqe, r.fd, 0); break;
      case FileOp::kFdatasync: io_uring_prep_fsync(sqe, r.fd, IORING_FSYNC_DATASYNC); break;
    }
    io_uring_sqe_set_data(sqe, &r);
  }

  // Submits the `prepared` SQEs just queued on ctx's ring. Normally one io_uring_enter takes
  // them all. If the kernel takes fewer (or says EBUSY/EAGAIN), the rest are still in this
  // ring's SQ, which only this thread may touch: the fiber pins itself to this worker while it
  // waits and retries, so the retry submits from the owner thread.
  void submit_all(UringContext* ctx, int prepared) noexcept {
    (void)prepared;
    std::optional<PinGuard> pin;
    for (;;) {
      counters_.submit_calls.fetch_add(1, std::memory_order_relaxed);
      int r = io_uring_submit(ctx->ring());
      // Whoever submits accounts for what the kernel took (a fiber that ran on this thread
      // while we slept may have flushed our SQEs with its own).
      if (r > 0) ctx->started_reap_inline(r);
      if (io_uring_sq_ready(ctx->ring()) == 0) return;
      if (r == -EINTR || r > 0) continue;
      counters_.queue_full.fetch_add(1, std::memory_order_relaxed);
      if (!pin) pin.emplace();
      this_fiber::sleep_for(std::chrono::microseconds(50));
    }
  }
};
}  // namespace

std::unique_ptr<FileEngine> make_uring_engine(const FileEngineOptions& o) {
  // Probe once: io_uring may be compiled in but disabled (kernel.io_uring_disabled, seccomp).
  io_uring ring;
  if (io_uring_queue_init(2, &ring, 0) < 0) return nullptr;
  io_uring_queue_exit(&ring);
  return std::make_unique<UringEngine>(o);
}
}  // namespace lionet::detail
