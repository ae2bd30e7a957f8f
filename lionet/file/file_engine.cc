// lionet/file/file_engine.cc: the engine registry, the counters, and the plain blocking
// system call for one request (see file_engine.h).
#include "lionet/file/file_engine.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <map>
#include <mutex>
#include <tuple>

#include "lionet/log/log.h"

namespace lionet {

std::size_t FileRequest::bytes() const noexcept {
  if (!iov) return len;
  std::size_t n = 0;
  for (int i = 0; i < iovcnt; ++i) n += iov[i].iov_len;
  return n;
}

void FileEngine::Counters::note_reaped(uint64_t n) noexcept {
  reap_passes.fetch_add(1, std::memory_order_relaxed);
  completions.fetch_add(n, std::memory_order_relaxed);
  uint64_t m = max_reaped.load(std::memory_order_relaxed);
  while (n > m && !max_reaped.compare_exchange_weak(m, n, std::memory_order_relaxed)) {
  }
}

FileEngineStats FileEngine::stats() const noexcept {
  const auto& c = counters_;
  auto ld = [](const std::atomic<uint64_t>& a) { return a.load(std::memory_order_relaxed); };
  return {ld(c.requests),    ld(c.submit_calls), ld(c.queue_full), ld(c.eventfd_waits),
          ld(c.reap_passes), ld(c.completions),  ld(c.max_reaped), ld(c.contexts)};
}

bool file_engine_compiled(std::string_view kind) noexcept {
#if defined(LIONET_HAVE_URING)
  if (kind == "io_uring") return true;
#endif
#if defined(LIONET_HAVE_AIO)
  if (kind == "libaio") return true;
#endif
  return kind == "threadpool";
}

FileEngine* file_engine(std::string_view kind, const FileEngineOptions& options) {
  // Engines are never destroyed: Files, reaper fibers and worker threads may refer to one
  // until the process ends (the registry is heap-allocated and leaked on purpose).
  static std::mutex mu;
  static auto* registry = new std::map<std::tuple<std::string, unsigned, unsigned, bool>, std::unique_ptr<FileEngine>>;
  std::lock_guard lk(mu);
  auto key = std::make_tuple(std::string(kind), options.queue_depth, options.reap_batch, options.coalesce_submits);
  auto it = registry->find(key);
  if (it != registry->end()) return it->second.get();
  std::unique_ptr<FileEngine> e;
  if (kind == "threadpool") {
    e = detail::make_threadpool_engine(options);
  } else if (kind == "libaio") {
#if defined(LIONET_HAVE_AIO)
    e = detail::make_aio_engine(options);
#endif
  } else if (kind == "io_uring") {
#if defined(LIONET_HAVE_URING)
    e = detail::make_uring_engine(options);
#endif
  }
  if (!e) {
    static const auto lg = log::get("file");
    LIONET_LOG_WARN(lg, "file engine '{}' is not available ({})", kind,
                    file_engine_compiled(kind) ? "the kernel refused it" : "not compiled in");
  }
  FileEngine* raw = e.get();
  registry->emplace(std::move(key), std::move(e));  // nullptr too: asked once
  return raw;
}

namespace detail {
int64_t run_blocking(FileRequest& r) noexcept {
  for (;;) {
    ssize_t n = -1;
    switch (r.op) {
      case FileOp::kRead:
        n = r.iov ? ::preadv(r.fd, r.iov, r.iovcnt, r.offset) : ::pread(r.fd, r.buf, r.len, r.offset);
        break;
      case FileOp::kWrite:
        n = r.iov ? ::pwritev(r.fd, r.iov, r.iovcnt, r.offset) : ::pwrite(r.fd, r.buf, r.len, r.offset);
        break;
      case FileOp::kFsync: n = ::fsync(r.fd); break;
      case FileOp::kFdatasync: n = ::fdatasync(r.fd); break;
    }
    if (n >= 0) return n;
    if (errno != EINTR) return -errno;
  }
}
}  // namespace detail
}  // namespace lionet
