// lionet/storage/file_system.h: the file layer under the log: the seam where tests put a
// fault-injecting file system (tests/storage/fault_injection_fs.h) to simulate power loss.
//
// Owns: the File and FileSystem interfaces and the real (POSIX) implementation. Must not:
// cache, buffer or reorder anything: every call is one or a few plain syscalls, so what
// the log acknowledges is exactly what the kernel was told.
//
// The real implementation uses pread/pwrite/fdatasync on plain fds. Inside a fiber those calls
// go through LioNet's syscall hooks (lionet/hook/), which decide how regular-file IO runs
// (in place, or on the offload pool; fdatasync on the pool: README, "File IO"); storage/ does
// not depend on lionet/file/ (see README).
//
// Thread-safety: File methods may run concurrently (pread/pwrite at distinct ranges, as POSIX
// allows); FileSystem methods may run concurrently.
#pragma once

#include <cerrno>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "lionet/base/result.h"

namespace lionet::storage {

class File {
 public:
  virtual ~File() = default;
  // Reads up to n bytes at off; fewer only at end of file. Retries EINTR and short reads.
  virtual Result<std::size_t> pread(void* buf, std::size_t n, uint64_t off) = 0;
  // Writes all n bytes at off (retries short writes and EINTR).
  virtual Result<void> pwrite(const void* buf, std::size_t n, uint64_t off) = 0;
  // fdatasync: once it returns ok, every byte written before the call survives power loss.
  virtual Result<void> datasync() = 0;
  virtual Result<void> truncate(uint64_t size) = 0;
  virtual Result<uint64_t> size() = 0;
  // Makes the file `size` bytes long (when shorter) with its blocks allocated, the new bytes
  // reading as zeros (fallocate mode 0). A Log preallocates its active segment so that an
  // fdatasync after an append need not commit a size change. EOPNOTSUPP (the default, and
  // file systems without fallocate) turns preallocation off for that file.
  virtual Result<void> allocate(uint64_t /*size*/) { return Result<void>::failure(EOPNOTSUPP); }
  // The file descriptor, for sendfile(2) of stored bytes; -1 (the default) where there is none
  // (then callers pread).
  virtual int native_handle() const { return -1; }
};

class FileSystem {
 public:
  virtual ~FileSystem() = default;
  // Opens path read-write; creates it (mode 0644) when create is true and it does not exist.
  virtual Result<std::unique_ptr<File>> open(const std::string& path, bool create) = 0;
  // Names (not paths) of the entries of dir, without "." and "..".
  virtual Result<std::vector<std::string>> list(const std::string& dir) = 0;
  // mkdir -p.
  virtual Result<void> create_dirs(const std::string& dir) = 0;
  virtual Result<void> remove(const std::string& path) = 0;
  // fsync of the directory: makes entries created or removed in it survive power loss.
  virtual Result<void> sync_dir(const std::string& dir) = 0;
};

// The POSIX file system (a process-wide instance; never destroyed).
FileSystem& default_file_system();

}  // namespace lionet::storage
