// lionet/hook/fd_table.cc: FdTable (see detail/fd_table.h).
#include "lionet/hook/detail/fd_table.h"

#include <fcntl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/time.h>

#include <new>

#include "lionet/hook/detail/real.h"

namespace lionet::hook::detail {

void FdEntry::reset() noexcept {
  kind.store(FdKind::kUnknown, std::memory_order_relaxed);
  user_nonblock.store(false, std::memory_order_relaxed);
  kernel_nonblock.store(false, std::memory_order_relaxed);
  rcv_timeout_ns.store(0, std::memory_order_relaxed);
  snd_timeout_ns.store(0, std::memory_order_relaxed);
  direct.store(false, std::memory_order_relaxed);
  nowait_write_unsupported.store(false, std::memory_order_relaxed);
}

void FdEntry::init(FdKind k, bool user_nb, bool kernel_nb) noexcept {
  user_nonblock.store(user_nb, std::memory_order_relaxed);
  kernel_nonblock.store(kernel_nb, std::memory_order_relaxed);
  rcv_timeout_ns.store(0, std::memory_order_relaxed);
  snd_timeout_ns.store(0, std::memory_order_relaxed);
  kind.store(k, std::memory_order_relaxed);
}

void FdEntry::copy_from(const FdEntry& o) noexcept {
  user_nonblock.store(o.user_nonblock.load(std::memory_order_relaxed), std::memory_order_relaxed);
  kernel_nonblock.store(o.kernel_nonblock.load(std::memory_order_relaxed), std::memory_order_relaxed);
  rcv_timeout_ns.store(o.rcv_timeout_ns.load(std::memory_order_relaxed), std::memory_order_relaxed);
  snd_timeout_ns.store(o.snd_timeout_ns.load(std::memory_order_relaxed), std::memory_order_relaxed);
  direct.store(o.direct.load(std::memory_order_relaxed), std::memory_order_relaxed);
  nowait_write_unsupported.store(o.nowait_write_unsupported.load(std::memory_order_relaxed), std::memory_order_relaxed);
  kind.store(o.kind.load(std::memory_order_relaxed), std::memory_order_relaxed);
}

FdEntry* FdTable::find(int fd) noexcept {
  if (fd < 0) return nullptr;
  unsigned c = static_cast<unsigned>(fd) >> kChunkBits;
  if (c >= static_cast<unsigned>(kMaxChunks)) return nullptr;
  // acquire pairs with the release CAS in get(): the chunk's entries are constructed.
  FdEntry* chunk = chunks_[c].load(std::memory_order_acquire);
  return chunk ? &chunk[fd & (kChunkSize - 1)] : nullptr;
}

FdEntry* FdTable::get(int fd) noexcept {
  if (FdEntry* e = find(fd)) return e;
  if (fd < 0) return nullptr;
  unsigned c = static_cast<unsigned>(fd) >> kChunkBits;
  if (c >= static_cast<unsigned>(kMaxChunks)) return nullptr;
  auto* fresh = new (std::nothrow) FdEntry[kChunkSize];
  if (!fresh) return nullptr;  // out of memory: pass the fd through
  FdEntry* expected = nullptr;
  // release: publishes the constructed entries (pairs with find()'s acquire).
  if (!chunks_[c].compare_exchange_strong(expected, fresh, std::memory_order_acq_rel)) {
    delete[] fresh;  // another thread installed the chunk first
    return &expected[fd & (kChunkSize - 1)];
  }
  return &fresh[fd & (kChunkSize - 1)];
}

int64_t timeval_to_ns(long sec, long usec) noexcept {
  if (sec < 0) return 1;  // the kernel treats a negative timeout as "expire at once"
  int64_t ns = static_cast<int64_t>(sec) * 1000000000 + static_cast<int64_t>(usec) * 1000;
  return ns;  // 0/0 means "no timeout", as in the kernel
}

namespace {
int64_t read_timeout(int fd, int opt) noexcept {
  timeval tv{};
  socklen_t len = sizeof(tv);
  if (LIONET_REAL(getsockopt)(fd, SOL_SOCKET, opt, &tv, &len) != 0) return 0;
  return timeval_to_ns(tv.tv_sec, tv.tv_usec);
}
}  // namespace

FdEntry* FdTable::managed(int fd, bool make_nonblock) noexcept {
  FdEntry* e = get(fd);
  if (!e) return nullptr;
  FdKind k = e->kind.load(std::memory_order_relaxed);
  if (k == FdKind::kUnknown) {
    // First sight of an fd the hooks did not create: classify it once.
    struct stat st;
    if (::fstat(fd, &st) != 0) return nullptr;  // EBADF etc.: let the real call report it
    if (S_ISSOCK(st.st_mode)) {
      k = FdKind::kSocket;
    } else if (S_ISFIFO(st.st_mode)) {
      k = FdKind::kPipe;
    } else if (S_ISREG(st.st_mode)) {
      int fl = LIONET_REAL(fcntl)(fd, F_GETFL);
      e->direct.store(fl >= 0 && (fl & O_DIRECT), std::memory_order_relaxed);
      e->nowait_write_unsupported.store(false, std::memory_order_relaxed);
      e->kind.store(FdKind::kRegular, std::memory_order_relaxed);
      return nullptr;
    } else {
      e->kind.store(FdKind::kOther, std::memory_order_relaxed);
      return nullptr;
    }
    int fl = LIONET_REAL(fcntl)(fd, F_GETFL);
    if (fl < 0) return nullptr;
    e->init(k, (fl & O_NONBLOCK) != 0, (fl & O_NONBLOCK) != 0);
    if (k == FdKind::kSocket) {
      e->rcv_timeout_ns.store(read_timeout(fd, SO_RCVTIMEO), std::memory_order_relaxed);
      e->snd_timeout_ns.store(read_timeout(fd, SO_SNDTIMEO), std::memory_order_relaxed);
    }
  } else if (k == FdKind::kOther || k == FdKind::kRegular) {
    return nullptr;
  }
  if (make_nonblock && !e->kernel_nonblock.load(std::memory_order_relaxed)) {
    int fl = LIONET_REAL(fcntl)(fd, F_GETFL);
    if (fl < 0 || LIONET_REAL(fcntl)(fd, F_SETFL, fl | O_NONBLOCK) != 0) return nullptr;
    e->kernel_nonblock.store(true, std::memory_order_relaxed);
  }
  return e;
}

FdEntry* FdTable::regular(int fd) noexcept {
  FdEntry* e = get(fd);
  if (!e) return nullptr;
  if (e->kind.load(std::memory_order_relaxed) == FdKind::kUnknown) (void)managed(fd, false);  // classifies
  return e->kind.load(std::memory_order_relaxed) == FdKind::kRegular ? e : nullptr;
}

namespace {
constinit FdTable g_table;  // constant-initialised (all chunks null): usable before main()
}  // namespace

FdTable& fd_table() noexcept { return g_table; }

}  // namespace lionet::hook::detail
