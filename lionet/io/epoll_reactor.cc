// lionet/io/epoll_reactor.cc: EpollReactor. The only file with epoll_* calls.
//
// Arming is EPOLLONESHOT and level-triggered: an arm (ADD or MOD) checks the fd's current
// state, so a waiter registered before arm() cannot miss readiness that came earlier; every
// reported event disables the whole fd (ReactorEvent::disarmed = everything), and the caller
// re-arms the directions that still have waiters. Edge-triggered mode was rejected: it needs a
// "ready" flag per fd that must be cleared exactly when a syscall returns EAGAIN, which the
// hooks cannot observe for every caller (third-party code doing its own poll()).
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

uint32_t epoll_bits(uint32_t dirs) {
  uint32_t e = EPOLLONESHOT;
  if (dirs & kIoReadable) e |= EPOLLIN;
  if (dirs & kIoWritable) e |= EPOLLOUT;
  return e;
}

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
  // One-shot MOD replaces the whole interest set: ask for everything wanted now.
  epoll_event ev{};
  ev.events = epoll_bits(req.want);
  ev.data.u64 = key_of(req.fd, req.tag);
  int op = req.known ? EPOLL_CTL_MOD : EPOLL_CTL_ADD;
  for (int attempt = 0; attempt < 2; ++attempt) {
    if (::epoll_ctl(epfd_, op, req.fd, &ev) == 0) {
      *armed = req.want;
      return 0;
    }
    const int e = errno;
    // The caller's record can be stale: the fd was closed (epoll dropped it) and reused, or
    // it was registered by an earlier life we were not told about. Try the other operation.
    if (op == EPOLL_CTL_MOD && e == ENOENT) {
      op = EPOLL_CTL_ADD;
    } else if (op == EPOLL_CTL_ADD && e == EEXIST) {
      op = EPOLL_CTL_MOD;
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
  constexpr int kBatch = 256;
  epoll_event evs[kBatch];
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
    out[k++] = ReactorEvent{static_cast<int>(static_cast<uint32_t>(key)), ready, kIoReadable | kIoWritable,
                            static_cast<uint32_t>(key >> 32)};
  }
  return k;
}

void EpollReactor::wake() noexcept {
  // seq_cst: pairs with the store in wait(). Seeing true means a write is in the eventfd
  // that the poller has not drained yet, or it is draining now and will return.
  if (wake_pending_.exchange(true, std::memory_order_seq_cst)) return;
  const uint64_t one = 1;
  (void)detail::raw_write(wakefd_, &one, sizeof one);
}
}  // namespace lionet
