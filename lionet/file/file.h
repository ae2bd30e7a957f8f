// lionet/file/file.h: lionet::File, a file whose reads and writes park the calling fiber (not
// its worker thread) while the kernel works, through one of three engines (file_engine.h):
// libaio (O_DIRECT), io_uring, or the offload thread pool.
//
// Owns: FileOptions, File. Must not: read configuration (app/ maps file.* YAML onto
// FileOptions), throw on the request path (every call returns lionet::Result), or block a
// worker thread on disk IO.
//
//   auto f = lionet::File::open("/var/tmp/data", O_RDWR | O_CREAT | O_DIRECT).value();
//   lionet::AlignedBuffer buf(4096);
//   auto n = f.pread(buf.span(), 0);              // this fiber parks; the worker runs others
//   std::array reqs{FileRequest::read(a, 4096, 0), FileRequest::read(b, 4096, 8192)};
//   f.submit(reqs);                               // both in flight at once; waits for both
//
// WHERE A CALL RUNS
//  - In a fiber of a Scheduler with an IOManager: on the File's engine; the fiber parks.
//  - In a fiber without an IOManager: on the threadpool engine (offload), the fiber parks.
//  - On a plain thread (or an offload pool thread): the plain system call, blocking.
//  - libaio serves only O_DIRECT reads and writes (buffered io_submit blocks in the kernel);
//    a libaio File sends buffered requests and fsync to the threadpool engine.
// ENGINE CHOICE (FileOptions::engine): "auto" = io_uring if compiled in and the kernel allows
// it, else libaio for O_DIRECT files, else threadpool; or name one ("libaio", "io_uring",
// "threadpool"). A named engine that is unavailable makes open() fail with ENOTSUP.
// ERRORS are errno values in Result: EBADF (closed File or bad fd), EINVAL (O_DIRECT request
// whose buffer address, length or offset is not aligned to the file's direct-IO alignment:
// logged once per File with the numbers; use AlignedBuffer), EFBIG (write past RLIMIT_FSIZE;
// the kernel also raises SIGXFSZ, which kills the process unless it is ignored or handled:
// servers should ignore it), ENOSPC, EIO, ... A read at or past EOF returns fewer bytes (0 at
// EOF); pread/pwrite make one request and may transfer less than asked (like pread(2)); use
// read_exact/write_all for "all or error".
// CONCURRENCY: any number of fibers and threads may use one File at once (each call is an
// independent request at an explicit offset); close() and the destructor must not race them.
#pragma once

#include <fcntl.h>
#include <sys/types.h>
#include <sys/uio.h>

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>

#include "lionet/base/result.h"
#include "lionet/file/aligned_buffer.h"
#include "lionet/file/file_engine.h"

namespace lionet {

struct FileOptions {
  // "auto", "libaio", "io_uring" or "threadpool" (see ENGINE CHOICE above). The lionet binary
  // does not use File, so these have no YAML key there (README "Options").
  std::string engine = "auto";
  // Per-worker queue depth and reap batch of the kernel engines.
  FileEngineOptions engine_options{};
};

class File {
 public:
  File() noexcept = default;
  // Opens path with open(2) flags (O_DIRECT allowed) and mode. Errors: open(2)'s errno,
  // ENOTSUP for an engine that is named but unavailable.
  static Result<File> open(const std::string& path, int flags, mode_t mode = 0644, FileOptions options = {});
  // Takes ownership of an open fd (its O_DIRECT flag is read with fcntl). fd < 0 gives a File
  // whose calls fail with EBADF.
  static Result<File> adopt(int fd, FileOptions options = {});
  ~File();
  File(File&& o) noexcept;
  File& operator=(File&& o) noexcept;
  File(const File&) = delete;
  File& operator=(const File&) = delete;

  // One request each; the result is the byte count (fewer at EOF) or the errno.
  Result<std::size_t> pread(void* buf, std::size_t n, off_t offset);
  Result<std::size_t> pread(std::span<std::byte> buf, off_t offset) { return pread(buf.data(), buf.size(), offset); }
  Result<std::size_t> pwrite(const void* buf, std::size_t n, off_t offset);
  Result<std::size_t> pwrite(std::span<const std::byte> buf, off_t offset) {
    return pwrite(buf.data(), buf.size(), offset);
  }
  // Vectored, at an offset (preadv/pwritev). iov must stay valid until the call returns.
  Result<std::size_t> readv(std::span<const iovec> iov, off_t offset);
  Result<std::size_t> writev(std::span<const iovec> iov, off_t offset);
  // Loop until n bytes are transferred: read_exact returns n, or fewer only when EOF came
  // first; write_all returns n or the first error.
  Result<std::size_t> read_exact(void* buf, std::size_t n, off_t offset);
  Result<std::size_t> write_all(const void* buf, std::size_t n, off_t offset);

  // Submit many, wait all: every request (fd is filled in) is in flight at once on the engine
  // (up to its queue depth), and the call returns when all have completed; read each one's
  // outcome with req.result(). Misaligned O_DIRECT requests fail alone with EINVAL.
  void submit(std::span<FileRequest> reqs);

  Result<void> fsync();
  Result<void> fdatasync();
  // fallocate(2) (mode 0 = allocate and extend). Runs on the offload pool in a fiber.
  Result<void> fallocate(off_t offset, off_t len, int mode = 0);
  Result<void> truncate(off_t len);
  // st_size from fstat.
  Result<uint64_t> size() const;
  // Closes the fd (idempotent). close(2)'s error is returned (e.g. a delayed EIO on NFS).
  Result<void> close();

  bool is_open() const noexcept { return fd_ >= 0; }
  int fd() const noexcept { return fd_; }
  bool direct() const noexcept { return direct_; }
  // The O_DIRECT alignment enforced for buffer address (mem) and offset/length (offset).
  std::size_t direct_mem_alignment() const noexcept { return mem_align_; }
  std::size_t direct_offset_alignment() const noexcept { return off_align_; }
  // The engine requests go to in a fiber with an IOManager (buffered libaio requests aside).
  FileEngine* engine() const noexcept { return engine_; }
  const char* engine_name() const noexcept { return engine_ ? engine_->name() : "none"; }

 private:
  File(int fd, bool direct, FileEngine* engine, FileEngine* fallback) noexcept;
  bool aligned(const FileRequest& r) const noexcept;
  void log_misaligned(const FileRequest& r) noexcept;
  FileEngine* route(const FileRequest& r) const noexcept;
  Result<std::size_t> one(FileRequest r);

  int fd_ = -1;
  bool direct_ = false;
  bool warned_misaligned_ = false;
  std::size_t mem_align_ = 512;
  std::size_t off_align_ = 512;
  FileEngine* engine_ = nullptr;  // the chosen engine (process-wide, never destroyed)
  FileEngine* fallback_ = nullptr;  // threadpool: buffered/fsync on libaio, no IOManager
};
}  // namespace lionet
