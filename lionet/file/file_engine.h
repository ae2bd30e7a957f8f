// lionet/file/file_engine.h: the one small interface behind which the file IO engines sit
// (libaio, io_uring, threadpool; one .cc file each), the request type they execute, their
// counters, and the process-wide engine registry.
//
// Owns: FileOp, FileRequest, FileEngineStats, FileEngine, FileEngineOptions, file_engine().
// Must not: read configuration (app/ maps file.* YAML onto FileOptions), block a worker thread
// (engines park the calling fiber), or know File (file.h builds on this, not the reverse).
//
// Contract of FileEngine::run(reqs): called from a fiber of a Scheduler that has an IOManager
// (File routes every other caller elsewhere, see file.h). It starts every request, parks the
// calling fiber until all of them have completed, and fills each request's `res`. Nothing is
// left in flight when it returns, so requests and buffers may live on the fiber's stack.
// Any number of fibers may call run() at once, on any workers; a fiber may resume on another
// worker than it submitted from.
#pragma once

#include <sys/types.h>
#include <sys/uio.h>

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>

#include "lionet/base/result.h"

namespace lionet {

enum class FileOp : uint8_t { kRead, kWrite, kFsync, kFdatasync };

// One request. Inputs: op, buf/len (or iov/iovcnt when iov != nullptr), offset; fd is filled
// by File::submit. Output: res (bytes transferred, or -errno). A read at or past EOF
// transfers fewer bytes (0 at EOF); that is not an error.
struct FileRequest {
  FileOp op = FileOp::kRead;
  void* buf = nullptr;
  std::size_t len = 0;
  const iovec* iov = nullptr;  // vectored when non-null (buf/len ignored)
  int iovcnt = 0;
  off_t offset = 0;
  int fd = -1;
  int64_t res = 0;
  void* engine_data = nullptr;  // the engine's (its batch waiter); not for users

  static FileRequest read(void* b, std::size_t n, off_t off) noexcept { return {FileOp::kRead, b, n, nullptr, 0, off}; }
  static FileRequest write(const void* b, std::size_t n, off_t off) noexcept {
    return {FileOp::kWrite, const_cast<void*>(b), n, nullptr, 0, off};
  }
  // The outcome as a Result: bytes, or the errno.
  Result<std::size_t> result() const noexcept {
    if (res < 0) return Result<std::size_t>::failure(static_cast<int>(-res));
    return static_cast<std::size_t>(res);
  }
  // Total bytes asked for.
  std::size_t bytes() const noexcept;
};

// Counters of one engine (all its per-worker contexts), relaxed: exact once quiescent.
struct FileEngineStats {
  uint64_t requests = 0;  // requests started
  uint64_t submit_calls = 0;  // io_submit / io_uring_submit system calls (or offloads)
  uint64_t queue_full = 0;  // submissions refused for a full queue (EAGAIN/EBUSY), retried
  uint64_t eventfd_waits = 0;  // times a reaper parked in IOManager::wait_readable(eventfd)
  uint64_t reap_passes = 0;  // io_getevents / CQ sweeps that returned >= 1 completion
  uint64_t completions = 0;  // completions delivered
  uint64_t max_reaped = 0;  // most completions taken in one pass
  uint64_t contexts = 0;  // per-worker contexts (io_setup / rings) created so far
};

struct FileEngineOptions {
  // Requests in flight per worker context: io_setup(nr) for libaio, ring entries for io_uring
  // (rounded up to a power of two). More requests than this simply wait for room.
  unsigned queue_depth = 128;
  // Most completions taken per io_getevents / CQ sweep.
  unsigned reap_batch = 64;
  // libaio: a submitting fiber yields once before io_submit so that requests of the fibers
  // that run meanwhile on its worker go to the kernel in the same call (fewer system calls and
  // device notifications at queue depth > 1; one extra fiber switch per call).
  // YAML: file.coalesce_submits.
  bool coalesce_submits = true;
};

class FileEngine {
 public:
  virtual ~FileEngine() = default;
  // "libaio", "io_uring" or "threadpool".
  virtual const char* name() const noexcept = 0;
  // Executes reqs as described at the top of the file.
  virtual void run(std::span<FileRequest> reqs) noexcept = 0;
  // Whether the engine needs the IOManager (the kernel-AIO engines watch an eventfd).
  virtual bool needs_io_manager() const noexcept { return true; }
  FileEngineStats stats() const noexcept;

 protected:
  // Written by the engines (relaxed adds), read by stats().
  struct Counters {
    std::atomic<uint64_t> requests{0}, submit_calls{0}, queue_full{0}, eventfd_waits{0}, reap_passes{0}, completions{0},
        max_reaped{0}, contexts{0};
    void note_reaped(uint64_t n) noexcept;
  };
  Counters counters_;
};

// The process-wide engine of that kind and options, created on first use and never destroyed
// (like the offload pool): "libaio", "io_uring", "threadpool". nullptr when the kind is not
// compiled in or the kernel refuses it (e.g. io_uring disabled by sysctl); one log line says
// why. Thread-safe.
FileEngine* file_engine(std::string_view kind, const FileEngineOptions& options = {});

// Which engines this build contains, in "auto" preference order.
bool file_engine_compiled(std::string_view kind) noexcept;

namespace detail {
// Engine factories, one per engine file. Return nullptr when unavailable.
std::unique_ptr<FileEngine> make_aio_engine(const FileEngineOptions& o);
std::unique_ptr<FileEngine> make_uring_engine(const FileEngineOptions& o);
std::unique_ptr<FileEngine> make_threadpool_engine(const FileEngineOptions& o);
// The plain blocking system call for one request (-errno on failure). Used on plain threads,
// by the threadpool engine, and for requests an engine cannot take.
int64_t run_blocking(FileRequest& r) noexcept;
}  // namespace detail
}  // namespace lionet
