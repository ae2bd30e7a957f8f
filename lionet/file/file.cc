// lionet/file/file.cc: File (see file.h): engine choice, request routing, O_DIRECT alignment
// checks, and the calls that are not plain reads/writes.
#include "lionet/file/file.h"

#include <fcntl.h>
#include <linux/stat.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <utility>

#include "lionet/io/io_manager.h"
#include "lionet/log/log.h"
#include "lionet/sched/cancel.h"
#include "lionet/sched/park.h"
#include "lionet/sync/offload.h"

namespace lionet {
namespace {

const std::shared_ptr<spdlog::logger>& file_log() {
  static const auto lg = log::get("file");
  return lg;
}

bool in_fiber() noexcept { return Parker::current().is_fiber(); }

// Runs f on the offload pool from a fiber, inline elsewhere (offload() decides).
template <class F>
auto off(F&& f) {
  return offload(std::forward<F>(f));
}

Result<void> void_result(int64_t r) noexcept {
  if (r < 0) return Result<void>::failure(static_cast<int>(-r));
  return {};
}

// The direct-IO alignment of fd (statx STATX_DIOALIGN, Linux >= 6.1), else 512.
void dio_alignment(int fd, std::size_t* mem, std::size_t* off) noexcept {
  *mem = 512;
  *off = 512;
#if defined(STATX_DIOALIGN)
  struct statx sx {};
  if (::statx(fd, "", AT_EMPTY_PATH, STATX_DIOALIGN, &sx) == 0 && (sx.stx_mask & STATX_DIOALIGN) &&
      sx.stx_dio_offset_align != 0) {
    *mem = sx.stx_dio_mem_align ? sx.stx_dio_mem_align : 1;
    *off = sx.stx_dio_offset_align;
  }
#endif
}

FileEngine* choose_engine(const FileOptions& o, bool direct, int* err) noexcept {
  const std::string& e = o.engine;
  if (e == "auto") {
    if (FileEngine* u = file_engine_compiled("io_uring") ? file_engine("io_uring", o.engine_options) : nullptr)
      return u;
    if (direct && file_engine_compiled("libaio")) {
      if (FileEngine* a = file_engine("libaio", o.engine_options)) return a;
    }
    return file_engine("threadpool", o.engine_options);
  }
  if (e != "libaio" && e != "io_uring" && e != "threadpool") {
    *err = EINVAL;
    return nullptr;
  }
  FileEngine* eng = file_engine_compiled(e) ? file_engine(e, o.engine_options) : nullptr;
  if (!eng) *err = ENOTSUP;
  return eng;
}
}  // namespace

File::File(int fd, bool direct, FileEngine* engine, FileEngine* fallback) noexcept
    : fd_(fd), direct_(direct), engine_(engine), fallback_(fallback) {
  if (direct_) dio_alignment(fd_, &mem_align_, &off_align_);
}

Result<File> File::open(const std::string& path, int flags, mode_t mode, FileOptions options) {
  int err = 0;
  FileEngine* eng = choose_engine(options, (flags & O_DIRECT) != 0, &err);
  if (!eng) return Result<File>::failure(err);
  int fd = ::open(path.c_str(), flags | O_CLOEXEC, mode);
  if (fd < 0) return Result<File>::failure(errno);
  return File(fd, (flags & O_DIRECT) != 0, eng, file_engine("threadpool", options.engine_options));
}

Result<File> File::adopt(int fd, FileOptions options) {
  int fl = fd >= 0 ? ::fcntl(fd, F_GETFL) : -1;
  const bool direct = fl >= 0 && (fl & O_DIRECT);
  int err = 0;
  FileEngine* eng = choose_engine(options, direct, &err);
  if (!eng) return Result<File>::failure(err);
  return File(fd, direct, eng, file_engine("threadpool", options.engine_options));
}

File::~File() { (void)close(); }

File::File(File&& o) noexcept
    : fd_(std::exchange(o.fd_, -1)),
      direct_(o.direct_),
      warned_misaligned_(o.warned_misaligned_),
      mem_align_(o.mem_align_),
      off_align_(o.off_align_),
      engine_(o.engine_),
      fallback_(o.fallback_) {}

File& File::operator=(File&& o) noexcept {
  if (this != &o) {
    (void)close();
    fd_ = std::exchange(o.fd_, -1);
    direct_ = o.direct_;
    warned_misaligned_ = o.warned_misaligned_;
    mem_align_ = o.mem_align_;
    off_align_ = o.off_align_;
    engine_ = o.engine_;
    fallback_ = o.fallback_;
  }
  return *this;
}

bool File::aligned(const FileRequest& r) const noexcept {
  if (!direct_ || (r.op != FileOp::kRead && r.op != FileOp::kWrite)) return true;
  if (!is_aligned(static_cast<uint64_t>(r.offset), off_align_)) return false;
  if (!r.iov) return is_aligned(r.buf, mem_align_) && is_aligned(static_cast<uint64_t>(r.len), off_align_);
  for (int i = 0; i < r.iovcnt; ++i) {
    if (!is_aligned(r.iov[i].iov_base, mem_align_) || !is_aligned(static_cast<uint64_t>(r.iov[i].iov_len), off_align_))
      return false;
  }
  return true;
}

void File::log_misaligned(const FileRequest& r) noexcept {
  if (warned_misaligned_) return;  // once per File: a bug repeats, the log should not
  warned_misaligned_ = true;
  LIONET_LOG_WARN(file_log(),
                  "File fd {}: O_DIRECT request refused with EINVAL: buffer {} (must be a multiple of {}), "
                  "length {} and offset {} (must be multiples of {}); use lionet::AlignedBuffer",
                  fd_, r.iov ? r.iov[0].iov_base : r.buf, mem_align_, r.iov ? r.bytes() : r.len,
                  static_cast<long long>(r.offset), off_align_);
}

FileEngine* File::route(const FileRequest& r) const noexcept {
  if (engine_->needs_io_manager() && IOManager::current() == nullptr) return fallback_;
  if (std::string_view(engine_->name()) == "libaio") {
    // libaio is asynchronous only for O_DIRECT reads and writes.
    if (!direct_ || (r.op != FileOp::kRead && r.op != FileOp::kWrite)) return fallback_;
  }
  return engine_;
}

void File::submit(std::span<FileRequest> reqs) {
  for (FileRequest& r : reqs) {
    r.fd = fd_;
    r.res = 0;
  }
  if (fd_ < 0) {
    for (FileRequest& r : reqs) r.res = -EBADF;
    return;
  }
  // A cancelled fiber, or one past its DeadlineScope, starts no file IO: ECANCELED / ETIMEDOUT
  // (sched/cancel.h). IO already submitted is waited for: the kernel writes into its buffers.
  if (const int e = this_fiber::interruption()) {
    for (FileRequest& r : reqs) r.res = -e;
    return;
  }
  const bool fiber = in_fiber();
  // Runs of consecutive requests with the same route go to their engine together.
  std::size_t i = 0;
  while (i < reqs.size()) {
    if (!aligned(reqs[i])) {
      log_misaligned(reqs[i]);
      reqs[i].res = -EINVAL;
      ++i;
      continue;
    }
    if (!fiber) {
      reqs[i].res = detail::run_blocking(reqs[i]);
      ++i;
      continue;
    }
    FileEngine* eng = route(reqs[i]);
    std::size_t j = i + 1;
    while (j < reqs.size() && aligned(reqs[j]) && route(reqs[j]) == eng) ++j;
    eng->run(reqs.subspan(i, j - i));
    i = j;
  }
}

Result<std::size_t> File::one(FileRequest r) {
  submit(std::span<FileRequest>(&r, 1));
  return r.result();
}

Result<std::size_t> File::pread(void* buf, std::size_t n, off_t offset) {
  return one(FileRequest::read(buf, n, offset));
}

Result<std::size_t> File::pwrite(const void* buf, std::size_t n, off_t offset) {
  return one(FileRequest::write(buf, n, offset));
}

namespace {
FileRequest vector_request(FileOp op, std::span<const iovec> iov, off_t offset) noexcept {
  FileRequest r;
  r.op = op;
  r.iov = iov.data();
  r.iovcnt = static_cast<int>(iov.size());
  r.offset = offset;
  return r;
}
}  // namespace

Result<std::size_t> File::readv(std::span<const iovec> iov, off_t offset) {
  FileRequest r = vector_request(FileOp::kRead, iov, offset);
  return one(r);
}

Result<std::size_t> File::writev(std::span<const iovec> iov, off_t offset) {
  FileRequest r = vector_request(FileOp::kWrite, iov, offset);
  return one(r);
}

Result<std::size_t> File::read_exact(void* buf, std::size_t n, off_t offset) {
  std::size_t got = 0;
  while (got < n) {
    auto r = pread(static_cast<char*>(buf) + got, n - got, offset + static_cast<off_t>(got));
    if (!r) return r;
    if (*r == 0) break;  // EOF
    got += *r;
    // A short O_DIRECT read means EOF inside the last block; the rest would be misaligned.
    if (direct_ && got < n) break;
  }
  return got;
}

Result<std::size_t> File::write_all(const void* buf, std::size_t n, off_t offset) {
  std::size_t put = 0;
  while (put < n) {
    auto r = pwrite(static_cast<const char*>(buf) + put, n - put, offset + static_cast<off_t>(put));
    if (!r) return r;
    if (*r == 0) return Result<std::size_t>::failure(EIO);  // no progress: do not spin
    put += *r;
  }
  return put;
}

Result<void> File::fsync() {
  FileRequest r;
  r.op = FileOp::kFsync;
  submit(std::span<FileRequest>(&r, 1));
  return void_result(r.res);
}

Result<void> File::fdatasync() {
  FileRequest r;
  r.op = FileOp::kFdatasync;
  submit(std::span<FileRequest>(&r, 1));
  return void_result(r.res);
}

Result<void> File::fallocate(off_t offset, off_t len, int mode) {
  if (fd_ < 0) return Result<void>::failure(EBADF);
  const int fd = fd_;
  int64_t r = off([=]() -> int64_t { return ::fallocate(fd, mode, offset, len) == 0 ? 0 : -errno; });
  return void_result(r);
}

Result<void> File::truncate(off_t len) {
  if (fd_ < 0) return Result<void>::failure(EBADF);
  const int fd = fd_;
  int64_t r = off([=]() -> int64_t { return ::ftruncate(fd, len) == 0 ? 0 : -errno; });
  return void_result(r);
}

Result<uint64_t> File::size() const {
  struct stat st;
  if (::fstat(fd_, &st) != 0) return Result<uint64_t>::failure(errno);
  return static_cast<uint64_t>(st.st_size);
}

Result<void> File::close() {
  if (fd_ < 0) return {};
  int fd = std::exchange(fd_, -1);
  if (::close(fd) != 0 && errno != EINTR) return Result<void>::failure(errno);
  return {};
}
}  // namespace lionet
