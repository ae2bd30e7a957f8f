// lionet/file/aio_engine.cc: the "libaio" file engine: Linux native AIO (io_setup/io_submit/
// io_getevents) with one io_context per worker thread and an eventfd attached to every iocb
// (io_set_eventfd) that the IOManager watches. Completion protocol: detail/completion_reaper.h.
//
// Owns: AioEngine, AioContext. Must not: take buffered (non-O_DIRECT) IO (File routes it to the
// threadpool engine: buffered io_submit blocks in the kernel), or call io_* on another
// context than the current thread's, except the reaper's io_getevents.
//
// Queue full: io_submit returns EAGAIN when the context holds queue_depth requests; the
// submitter sleeps 50 us (letting the reaper drain) and retries, counted in queue_full.
// Kernel refusal of one iocb at submit (e.g. EBADF, EINVAL) comes back as io_submit's result
// for the first unsubmitted iocb: that request completes with the error, the rest go on.
#include <libaio.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <vector>

#include "lionet/file/detail/completion_reaper.h"
#include "lionet/io/io_manager.h"
#include "lionet/log/log.h"
#include "lionet/sched/scheduler.h"
#include "lionet/sync/offload.h"

namespace lionet::detail {
namespace {

class AioContext final : public ReapedContext {
 public:
  AioContext(io_context_t ctx, int efd, IOManager* iom, FileEngine* eng) noexcept
      : ReapedContext(efd, iom, eng), ctx_(ctx) {}
  ~AioContext() override { io_destroy(ctx_); }
  io_context_t ctx() const noexcept { return ctx_; }

 protected:
  int reap(int max) noexcept override {
    io_event events[128];
    if (max > 128) max = 128;
    timespec zero{0, 0};
    int n;
    do {
      n = io_getevents(ctx_, 0, max, events, &zero);
    } while (n == -EINTR);
    if (n <= 0) return 0;
    for (int i = 0; i < n; ++i) {
      auto* r = static_cast<FileRequest*>(events[i].data);
      // res is the byte count or -errno; res2 is unused by the kernel for files.
      int64_t res = static_cast<int64_t>(static_cast<long>(events[i].res));
      static_cast<BatchWaiter*>(r->engine_data)->complete(*r, res);  // r may be gone after this
    }
    return n;
  }

 private:
  io_context_t ctx_;
};

class AioEngine final : public ReapedEngineBase {
 public:
  using ReapedEngineBase::ReapedEngineBase;
  const char* name() const noexcept override { return "libaio"; }

  void run(std::span<FileRequest> reqs) noexcept override {
    const std::size_t n = reqs.size();
    if (n == 0) return;
    counters_.requests.fetch_add(n, std::memory_order_relaxed);
    BatchWaiter waiter(n);
    // iocbs live on this fiber's stack (or heap for big batches) until wait() returns.
    constexpr std::size_t kInline = 8;
    iocb inline_cbs[kInline];
    iocb* inline_ptrs[kInline];
    std::vector<iocb> heap_cbs;
    std::vector<iocb*> heap_ptrs;
    iocb* cbs = inline_cbs;
    iocb** ptrs = inline_ptrs;
    if (n > kInline) {
      heap_cbs.resize(n);
      heap_ptrs.resize(n);
      cbs = heap_cbs.data();
      ptrs = heap_ptrs.data();
    }
    for (std::size_t i = 0; i < n; ++i) prep(cbs[i], reqs[i], &waiter), ptrs[i] = &cbs[i];

    std::size_t done = 0;
    AioContext* last = nullptr;
    while (done < n) {
      // Looked up again after every possible switch: the fiber may have moved.
      auto* ctx = static_cast<AioContext*>(context_here());
      if (!ctx) {  // the kernel refused io_setup on this thread: finish on the offload pool
        for (; done < n; ++done) {
          FileRequest& r = reqs[done];
          waiter.complete_by_submitter(r, offload([&r] { return run_blocking(r); }));
        }
        break;
      }
      if (ctx != last) {  // completions must signal the eventfd of the context they go to
        for (std::size_t i = done; i < n; ++i) io_set_eventfd(ptrs[i], ctx->eventfd());
        last = ctx;
      }
      counters_.submit_calls.fetch_add(1, std::memory_order_relaxed);
      int r = io_submit(ctx->ctx(), static_cast<long>(n - done), ptrs + done);
      if (r > 0) {
        ctx->started(r);
        done += static_cast<std::size_t>(r);
      } else if (r == -EAGAIN || r == 0) {
        counters_.queue_full.fetch_add(1, std::memory_order_relaxed);
        this_fiber::sleep_for(std::chrono::microseconds(50));
      } else if (r != -EINTR) {
        waiter.complete_by_submitter(reqs[done], r);  // the first unsubmitted iocb was refused
        ++done;
      }
    }
    waiter.wait();
  }

 protected:
  std::unique_ptr<ReapedContext> make_context(IOManager* iom) noexcept override {
    static const auto lg = log::get("file");
    io_context_t ctx{};
    int r = io_setup(static_cast<int>(options_.queue_depth ? options_.queue_depth : 128), &ctx);
    if (r < 0) {
      LIONET_LOG_WARN(lg, "libaio: io_setup({}) failed: errno {} (see /proc/sys/fs/aio-max-nr)",
                      options_.queue_depth, -r);
      return nullptr;
    }
    int efd = make_nonblocking_eventfd();
    if (efd < 0) {
      io_destroy(ctx);
      return nullptr;
    }
    return std::make_unique<AioContext>(ctx, efd, iom, this);
  }

 private:
  void prep(iocb& cb, FileRequest& r, BatchWaiter* w) noexcept {
    r.engine_data = w;
    switch (r.op) {
      case FileOp::kRead:
        if (r.iov) io_prep_preadv(&cb, r.fd, r.iov, r.iovcnt, r.offset);
        else io_prep_pread(&cb, r.fd, r.buf, r.len, r.offset);
        break;
      case FileOp::kWrite:
        if (r.iov) io_prep_pwritev(&cb, r.fd, r.iov, r.iovcnt, r.offset);
        else io_prep_pwrite(&cb, r.fd, r.buf, r.len, r.offset);
        break;
      case FileOp::kFsync:
        io_prep_fsync(&cb, r.fd);
        break;
      case FileOp::kFdatasync:
        io_prep_fdsync(&cb, r.fd);
        break;
    }
    cb.data = &r;  // io_set_eventfd() comes at submit time, when the context is known
  }
};
}  // namespace

std::unique_ptr<FileEngine> make_aio_engine(const FileEngineOptions& o) {
  // Probe once: a kernel without AIO (or aio-max-nr exhausted) refuses io_setup.
  io_context_t ctx{};
  if (io_setup(1, &ctx) < 0) return nullptr;
  io_destroy(ctx);
  return std::make_unique<AioEngine>(o);
}
}  // namespace lionet::detail
