// lionet/hook/detail/fd_table.h: what the hooks know about each fd (private to hook/).
//
// Owns: FdEntry, FdTable. Must not wait, park or call anything that may switch fibers.
//
// One entry per fd number, in chunks allocated on first use and never freed, so a pointer to
// an entry stays valid for the life of the process and lookups take no lock. Every field is an
// atomic written with relaxed order: an entry describes one fd, and the fd's own syscalls
// (socket/close/fcntl) order the writers; concurrent users of one fd (two fibers reading it)
// tolerate a momentarily stale flag exactly as they tolerate a racing fcntl in the kernel.
//
// Lifecycle of an entry: kUnknown (never seen, or closed through a hook) -> classified by the
// creating hook (socket, accept, pipe, ...) or lazily by fstat() the first time a fiber uses
// the fd -> kSocket / kPipe (managed), kRegular (regular-file path) or kOther (passed through)
// -> reset to kUnknown by the
// hooked close/dup2/dup3. A fd closed behind the hooks' back (glibc-internal closes such as
// fclose) keeps a stale entry until the number is reused by a hooked creator; a stale kOther
// only means "not hooked", a stale kSocket on a regular file is harmless (files never EAGAIN).
#pragma once

#include <atomic>
#include <cstdint>

#include "lionet/base/clock.h"

namespace lionet::hook::detail {

// kRegular: a regular file; its reads and writes in fibers take the regular-file path of
// io_hooks.cc (RWF_NOWAIT first, else the offload pool). Not "managed" (never made non-blocking).
enum class FdKind : uint8_t { kUnknown = 0, kOther = 1, kSocket = 2, kPipe = 3, kRegular = 4 };

struct FdEntry {
  std::atomic<FdKind> kind{FdKind::kUnknown};
  // O_NONBLOCK as the user set it (and as F_GETFL/FIONBIO report it).
  std::atomic<bool> user_nonblock{false};
  // O_NONBLOCK as it is in the kernel. kernel_nonblock && !user_nonblock: the hooks emulate
  // blocking (park in a fiber, libc poll on a plain thread).
  std::atomic<bool> kernel_nonblock{false};
  // SO_RCVTIMEO / SO_SNDTIMEO in nanoseconds; 0 = none (block forever).
  std::atomic<int64_t> rcv_timeout_ns{0};
  std::atomic<int64_t> snd_timeout_ns{0};
  // kRegular only: opened with O_DIRECT (as seen at classification; a later fcntl(F_SETFL,
  // O_DIRECT) is not seen): such reads never take the RWF_NOWAIT fast path (a NOWAIT direct
  // read still waits for the device).
  std::atomic<bool> direct{false};
  // kRegular only: the filesystem answered EOPNOTSUPP to an RWF_NOWAIT write; skip the try.
  std::atomic<bool> nowait_write_unsupported{false};

  bool managed() const noexcept {
    FdKind k = kind.load(std::memory_order_relaxed);
    return k == FdKind::kSocket || k == FdKind::kPipe;
  }
  // The hooks must emulate a blocking fd: the user wants blocking, the kernel is non-blocking.
  bool emulates_blocking() const noexcept {
    return managed() && kernel_nonblock.load(std::memory_order_relaxed) &&
           !user_nonblock.load(std::memory_order_relaxed);
  }
  void reset() noexcept;
  void init(FdKind k, bool user_nb, bool kernel_nb) noexcept;
  void copy_from(const FdEntry& o) noexcept;
};

class FdTable {
 public:
  static constexpr int kChunkBits = 10;
  static constexpr int kChunkSize = 1 << kChunkBits;  // entries per chunk
  static constexpr int kMaxChunks = 1 << 11;  // fds up to 2M are tracked

  // The entry of fd, allocating its chunk if needed; nullptr if fd < 0 or beyond the limit
  // (such fds are passed through).
  FdEntry* get(int fd) noexcept;
  // The entry of fd if its chunk exists; never allocates.
  FdEntry* find(int fd) noexcept;

  // The entry of fd, classified (fstat, F_GETFL, timeouts) if still kUnknown. If make_nonblock
  // and fd is a socket or pipe that is blocking in the kernel, sets O_NONBLOCK in the kernel.
  // nullptr if fd is not a socket or pipe, is invalid, or is out of range.
  FdEntry* managed(int fd, bool make_nonblock) noexcept;
  // The entry of fd if it is a regular file (classifying it if still kUnknown), else nullptr.
  FdEntry* regular(int fd) noexcept;

 private:
  std::atomic<FdEntry*> chunks_[kMaxChunks] = {};
};

FdTable& fd_table() noexcept;

// SO_RCVTIMEO-style timeval -> ns (0 = none), as the kernel interprets it.
int64_t timeval_to_ns(long sec, long usec) noexcept;

// Deadline for a timeout in ns (0 = none).
inline bool has_timeout(int64_t ns) noexcept { return ns != 0; }
inline TimePoint deadline_after(int64_t ns) noexcept { return now() + std::chrono::nanoseconds(ns); }

}  // namespace lionet::hook::detail
