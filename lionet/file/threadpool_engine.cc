// lionet/file/threadpool_engine.cc: the "threadpool" file engine: plain pread/pwrite/fsync on
// the offload pool (lionet/sync/offload.h) while the calling fiber parks.
//
// Owns: ThreadpoolEngine. Must not: block a worker (every call goes through offload()).
// Serves buffered IO (which libaio cannot do asynchronously), fsync for libaio Files, and
// every file when no kernel-AIO engine is usable. A batch of n requests is split into up to
// min(n, offload threads) chunks run in parallel (helper fibers, one offload each), so a batch
// keeps several requests in flight like the kernel engines do.
#include <algorithm>

#include "lionet/file/file_engine.h"
#include "lionet/sched/scheduler.h"
#include "lionet/sync/offload.h"
#include "lionet/sync/wait_group.h"

namespace lionet::detail {
namespace {

class ThreadpoolEngine final : public FileEngine {
 public:
  const char* name() const noexcept override { return "threadpool"; }
  bool needs_io_manager() const noexcept override { return false; }

  void run(std::span<FileRequest> reqs) noexcept override {
    if (reqs.empty()) return;
    counters_.requests.fetch_add(reqs.size(), std::memory_order_relaxed);
    const std::size_t threads = static_cast<std::size_t>(default_offload_pool().options().threads);
    const std::size_t chunks = std::min(reqs.size(), std::max<std::size_t>(threads, 1));
    counters_.submit_calls.fetch_add(chunks, std::memory_order_relaxed);
    auto run_chunk = [](std::span<FileRequest> part) noexcept {
      offload([part] {
        for (FileRequest& r : part) r.res = run_blocking(r);
      });
    };
    if (chunks == 1 || Scheduler::current() == nullptr) {
      run_chunk(reqs);
    } else {
      const std::size_t per = (reqs.size() + chunks - 1) / chunks;
      WaitGroup wg;
      std::size_t first = per;  // chunk 0 runs in this fiber
      for (; first < reqs.size(); first += per) {
        auto part = reqs.subspan(first, std::min(per, reqs.size() - first));
        wg.add(1);
        // The helper fiber only touches `part` and `wg`, both alive until wg.wait() returns.
        try {
          go([part, &wg, run_chunk] {
            run_chunk(part);
            wg.done();
          });
        } catch (...) {  // no fiber to be had (stack budget): run this part here
          run_chunk(part);
          wg.done();
        }
      }
      run_chunk(reqs.first(per));
      CancelShield shield;  // the pool threads write into the caller's buffers: wait for them
      wg.wait();
    }
    counters_.note_reaped(reqs.size());
  }
};
}  // namespace

std::unique_ptr<FileEngine> make_threadpool_engine(const FileEngineOptions&) {
  return std::make_unique<ThreadpoolEngine>();
}
}  // namespace lionet::detail
