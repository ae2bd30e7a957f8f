// lionet/io/epoll_reactor.cc: EpollReactor. The only reactor over epoll_* (see epoll_reactor.h).
//
// Registration is persistent and edge-triggered (EPOLLIN | EPOLLOUT | EPOLLRDHUP | EPOLLET),
// added once, on the first wait for the fd, and removed by disarm(): after that a wait costs no
// epoll_ctl at all, which is what lets one worker keep up with a hand-written epoll loop. Both
// directions are registered at once so that a first write-wait needs no MOD either.
//
// Edge-triggered races and why they are harmless here: an edge that arrives while nobody
// waits (between the caller's EAGAIN and its wait, or while it is busy) is reported once and
// never again; IOManager remembers it per direction (io_manager.cc, protocol 3) and the next
// waiter returns at once. The ADD itself checks the current state, so readiness from before the
// first wait is reported too. The price is at most one spurious wake-up (one extra EAGAIN) when
// an edge came before the caller's successful read.
//
// (EPOLLONESHOT level-triggered, the earlier choice, needs an epoll_ctl(MOD) per wait; it
// measured ~10-25% fewer round trips in a 100-socketpair ping-pong on one worker.)
#include "lionet/io/epoll_reactor.h"

#include "lionet/io/detail/raw_syscall.h"

#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <climits>
#include <system_error>

namespace lionet {
namespace {
constexpr uint64_t kWakeKey = ~uint64_t{0};

uint64_t key_of(int fd, uint32_t tag) { return (uint64_t{tag & 0xffffff} << 32) | static_cast<uint32_t>(fd); }

constexpr uint32_t kAllDirs = kIoReadable | kIoWritable;
constexpr uint32_t kEpollBits = EPOLLIN | EPOLLOUT | EPOLLRDHUP | EPOLLET;

// Milliseconds to wait, rounded up so a timer is never woken early (the scheduler would only
// come back to wait again): -1 = forever, 0 = poll.
int timeout_ms(TimePoint deadline) {
  if (deadline == TimePoint::max()) return -1;
  const TimePoint t = now();
  if (deadline <= t) return 0;  // compare first: TimePoint::min() - t would overflow
  const auto left = deadline - t;
  const auto ms = std::chrono::ceil<std::chrono::milliseconds>(left).count();
  return static_cast<int>(std::min<long long>(ms, INT_MAX));
}
}  // namespace

EpollReactor::EpollReactor() {
  epfd_ = ::epoll_create1(EPOLL_CLOEXEC);
  if (epfd_ < 0) throw std::system_error(errno, std::generic_category(), "epoll_create1");
  wakefd_ = ::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  if (wakefd_ < 0) {
    const int e = errno;
    detail::raw_close(epfd_);
    throw std::system_error(e, std::generic_category(), "eventfd");
  }
  epoll_event ev{};
  ev.events = EPOLLIN;  // level-triggered, persistent: stays readable until drained
  ev.data.u64 = kWakeKey;
  if (::epoll_ctl(epfd_, EPOLL_CTL_ADD, wakefd_, &ev) != 0) {
    const int e = errno;
    detail::raw_close(wakefd_);
    detail::raw_close(epfd_);
    throw std::system_error(e, std::generic_category(), "epoll_ctl(eventfd)");
  }
}

EpollReactor::~EpollReactor() {
  detail::raw_close(wakefd_);
  detail::raw_close(epfd_);
}

int EpollReactor::arm(const ArmRequest& req, uint32_t* armed) noexcept {
  if (req.known && !(req.want & ~req.armed)) {  // registered (persistent): nothing to do
    *armed = req.armed;
    return 0;
  }
  epoll_event ev{};
  ev.events = kEpollBits;
  ev.data.u64 = key_of(req.fd, req.tag);
  int op = req.known ? EPOLL_CTL_MOD : EPOLL_CTL_ADD;
  for (int attempt = 0; attempt < 2; ++attempt) {
    if (::epoll_ctl(epfd_, op, req.fd, &ev) == 0) {
      *armed = kAllDirs;
      return 0;
    }
    const int e = errno;
    // The caller's record can be stale: the fd was closed (epoll dropped it) and reused, or
    // registered in an earlier life we were not told about. Try the other operation.
    if (op == EPOLL_CTL_MOD && e == ENOENT) {
      op = EPOLL_CTL_ADD;
    } else if (op == EPOLL_CTL_ADD && e == EEXIST) {
      op = EPOLL_CTL_MOD;  // also refreshes the tag
    } else {
      return e;
    }
  }
  return EEXIST;  // ADD said EEXIST and MOD said ENOENT: the fd changed under us twice
}

void EpollReactor::disarm(int fd) noexcept {
  // ENOENT / EBADF: nothing registered (already closed, or never armed). Both are fine.
  epoll_event ev{};
  (void)::epoll_ctl(epfd_, EPOLL_CTL_DEL, fd, &ev);
}

int EpollReactor::wait(ReactorEvent* out, int max, TimePoint deadline) noexcept {
  // Not on the stack: wait() often runs on a parking fiber's stack (a worker polls inside
  // its switch), and 3 KiB there would make every fiber that once polled keep a second page.
  constexpr int kBatch = 256;
  static thread_local epoll_event evs[kBatch];
  const int n = ::epoll_wait(epfd_, evs, std::min(max, kBatch), timeout_ms(deadline));
  if (n <= 0) return 0;  // timeout or EINTR
  int k = 0;
  for (int i = 0; i < n; ++i) {
    const uint64_t key = evs[i].data.u64;
    if (key == kWakeKey) {
      // Drain, then clear the flag. A wake() before the clear skips its write and is
      // satisfied by this wait returning; one after it writes again, so the next wait returns.
      // (Clearing first would let a wake's write be drained here and leave the flag set with
      // an empty eventfd: every later wake would be lost.)
      uint64_t v;
      (void)detail::raw_read(wakefd_, &v, sizeof v);
      wake_pending_.store(false, std::memory_order_seq_cst);
      continue;
    }
    const uint32_t e = evs[i].events;
    uint32_t ready = 0;
    if (e & (EPOLLIN | EPOLLRDHUP | EPOLLPRI)) ready |= kIoReadable;
    if (e & EPOLLOUT) ready |= kIoWritable;
    if (e & (EPOLLERR | EPOLLHUP)) ready |= kIoReadable | kIoWritable;
    if (e & (EPOLLRDHUP | EPOLLERR | EPOLLHUP)) ready |= kIoHangup;
    out[k++] = ReactorEvent{static_cast<int>(static_cast<uint32_t>(key)), ready, /*disarmed=*/0,
                            static_cast<uint32_t>(key >> 32)};
  }
  return k;
}

void EpollReactor::wake() noexcept { detail::wake_once(wake_pending_, wakefd_); }
}  // namespace lionet
