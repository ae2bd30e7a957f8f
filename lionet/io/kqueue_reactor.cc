// lionet/io/kqueue_reactor.cc: KqueueReactor. UNTESTED (see kqueue_reactor.h): compiled only
// on macOS/BSD, which LioNet's test machines are not.
//
// kqueue filters are per direction: EVFILT_READ and EVFILT_WRITE are armed separately with
// EV_ONESHOT, so an event disarms only its own direction (ReactorEvent::disarmed = that
// direction) and the other stays armed. EV_ADD on a filter that exists modifies it, so re-arming
// is idempotent. Like epoll, a one-shot filter is level-checked when added.
#include "lionet/io/kqueue_reactor.h"

#include <fcntl.h>
#include <sys/event.h>
#include <sys/time.h>
#include <sys/types.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdint>
#include <system_error>

#include "lionet/io/detail/raw_syscall.h"

namespace lionet {
namespace {
constexpr uintptr_t kWakeIdent = 0;

void* pack(int fd, uint32_t tag) {
  return reinterpret_cast<void*>(static_cast<uintptr_t>((uint64_t{tag & 0xffffff} << 32) | static_cast<uint32_t>(fd)));
}
uint32_t tag_of(void* udata) { return static_cast<uint32_t>(reinterpret_cast<uintptr_t>(udata) >> 32); }
}  // namespace

KqueueReactor::KqueueReactor() {
  kq_ = ::kqueue();
  if (kq_ < 0) throw std::system_error(errno, std::generic_category(), "kqueue");
  struct kevent kev;
#if defined(EVFILT_USER)
  EV_SET(&kev, kWakeIdent, EVFILT_USER, EV_ADD | EV_CLEAR, 0, 0, nullptr);
#else
  if (::pipe(wake_pipe_) != 0) {
    const int e = errno;
    detail::raw_close(kq_);
    throw std::system_error(e, std::generic_category(), "pipe");
  }
  for (int fd : wake_pipe_) {
    ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) | O_NONBLOCK);
    ::fcntl(fd, F_SETFD, FD_CLOEXEC);
  }
  EV_SET(&kev, wake_pipe_[0], EVFILT_READ, EV_ADD, 0, 0, nullptr);  // level, persistent
#endif
  if (::kevent(kq_, &kev, 1, nullptr, 0, nullptr) != 0) {
    const int e = errno;
    detail::raw_close(kq_);
    for (int fd : wake_pipe_)
      if (fd >= 0) detail::raw_close(fd);
    throw std::system_error(e, std::generic_category(), "kevent(wake)");
  }
}

KqueueReactor::~KqueueReactor() {
  detail::raw_close(kq_);
  for (int fd : wake_pipe_)
    if (fd >= 0) detail::raw_close(fd);
}

int KqueueReactor::arm(const ArmRequest& req, uint32_t* armed) noexcept {
  struct kevent changes[2];
  int n = 0;
  if (req.want & kIoReadable)
    EV_SET(&changes[n++], static_cast<uintptr_t>(req.fd), EVFILT_READ, EV_ADD | EV_ONESHOT, 0, 0,
           pack(req.fd, req.tag));
  if (req.want & kIoWritable)
    EV_SET(&changes[n++], static_cast<uintptr_t>(req.fd), EVFILT_WRITE, EV_ADD | EV_ONESHOT, 0, 0,
           pack(req.fd, req.tag));
  if (::kevent(kq_, changes, n, nullptr, 0, nullptr) != 0) return errno;
  *armed = req.armed | req.want;
  return 0;
}

void KqueueReactor::disarm(int fd) noexcept {
  // One change per call: with both in one list, ENOENT on the first would skip the second.
  for (short filter : {static_cast<short>(EVFILT_READ), static_cast<short>(EVFILT_WRITE)}) {
    struct kevent kev;
    EV_SET(&kev, static_cast<uintptr_t>(fd), filter, EV_DELETE, 0, 0, nullptr);
    (void)::kevent(kq_, &kev, 1, nullptr, 0, nullptr);  // ENOENT/EBADF: nothing armed
  }
}

int KqueueReactor::wait(ReactorEvent* out, int max, TimePoint deadline) noexcept {
  constexpr int kBatch = 256;
  struct kevent evs[kBatch];
  timespec ts{};
  timespec* tsp = nullptr;
  if (deadline != TimePoint::max()) {
    const TimePoint t = now();
    const auto left = deadline > t ? std::chrono::duration_cast<std::chrono::nanoseconds>(deadline - t).count() : 0;
    ts.tv_sec = static_cast<time_t>(left / 1000000000);
    ts.tv_nsec = static_cast<long>(left % 1000000000);
    tsp = &ts;
  }
  const int n = ::kevent(kq_, nullptr, 0, evs, std::min(max, kBatch), tsp);
  if (n <= 0) return 0;  // timeout or EINTR
  int k = 0;
  for (int i = 0; i < n; ++i) {
    const struct kevent& ev = evs[i];
#if defined(EVFILT_USER)
    if (ev.filter == EVFILT_USER) {
      wake_pending_.store(false, std::memory_order_seq_cst);  // EV_CLEAR: already reset
      continue;
    }
#else
    if (static_cast<int>(ev.ident) == wake_pipe_[0]) {
      char buf[64];
      while (detail::raw_read(wake_pipe_[0], buf, sizeof buf) > 0) {
      }
      wake_pending_.store(false, std::memory_order_seq_cst);
      continue;
    }
#endif
    const uint32_t dir = ev.filter == EVFILT_READ ? kIoReadable : kIoWritable;
    // EV_EOF / EV_ERROR count as ready: the waiter's own syscall reports what happened.
    out[k++] = ReactorEvent{static_cast<int>(ev.ident), dir, dir, tag_of(ev.udata)};
  }
  return k;
}

void KqueueReactor::wake() noexcept {
  if (wake_pending_.exchange(true, std::memory_order_seq_cst)) return;
#if defined(EVFILT_USER)
  struct kevent kev;
  EV_SET(&kev, kWakeIdent, EVFILT_USER, 0, NOTE_TRIGGER, 0, nullptr);
  (void)::kevent(kq_, &kev, 1, nullptr, 0, nullptr);
#else
  const char c = 1;
  (void)detail::raw_write(wake_pipe_[1], &c, 1);
#endif
}
}  // namespace lionet
