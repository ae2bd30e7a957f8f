// lionet/hook/poll_hooks.cc: poll and select, the calls third-party clients (libcurl, hiredis,
// database drivers) block in.
//
// Algorithm: a non-blocking libc poll first (most calls end there); then the fiber parks until
// something may be ready, and a second non-blocking poll computes revents exactly as the
// kernel would. With one fd and one direction the fiber waits on that fd through the
// IOManager. Otherwise it builds a private epoll set holding every fd of the call and waits on
// that set's fd as one readable fd (an epoll fd is readable while any member is ready).
// This epoll use outside io/'s backend (like file/file_watcher.cc's) is on purpose: it is not a
// reactor, it aggregates a caller's fd list into the single fd the IOManager contract can wait
// on, and it lives only for the duration of one call.
#include <errno.h>
#include <poll.h>
#include <sys/epoll.h>
#include <sys/select.h>

#include <algorithm>
#include <chrono>
#include <optional>
#include <vector>

#include "lionet/fiber/fiber.h"
#include "lionet/hook/detail/common.h"
#include "lionet/hook/detail/real.h"
#include "lionet/io/io_manager.h"
#include "lionet/sched/scheduler.h"

#define LIONET_HOOK_API extern "C" __attribute__((visibility("default")))

extern "C" const int lionet_hook_anchor_poll = 0;

namespace lionet::hook::detail {
namespace {

constexpr short kInEvents = POLLIN | POLLPRI | POLLRDNORM | POLLRDBAND | POLLRDHUP;
constexpr short kOutEvents = POLLOUT | POLLWRNORM | POLLWRBAND;
// poll and epoll share these bit values on Linux.
constexpr uint32_t kEpollMask =
    EPOLLIN | EPOLLPRI | EPOLLOUT | EPOLLRDNORM | EPOLLRDBAND | EPOLLWRNORM | EPOLLWRBAND | EPOLLMSG | EPOLLRDHUP;

// Sleeps until deadline (forever if none), or until the fiber is cancelled; returns ETIMEDOUT.
int sleep_until_deadline(std::optional<TimePoint> deadline) noexcept {
  if (deadline) {
    this_fiber::sleep_until(*deadline);
  } else {
    while (this_fiber::sleep_for(std::chrono::hours(24))) {  // poll(NULL, 0, -1): forever (or a cancel)
    }
  }
  return ETIMEDOUT;
}

void forget_private_fd(int fd) noexcept {
  if (current_fiber() != nullptr) {
    if (IOManager* iom = IOManager::current()) iom->cancel(fd);
  }
  LIONET_REAL(close)(fd);
}

// Parks until one of fds may be ready: 0 (maybe ready), ETIMEDOUT or ECANCELED.
int wait_set(pollfd* fds, nfds_t n, std::optional<TimePoint> deadline) noexcept {
  int ep = ::epoll_create1(EPOLL_CLOEXEC);
  if (ep < 0) {
    this_fiber::sleep_for(std::chrono::milliseconds(1));  // no memory for a set: re-poll soon
    return 0;
  }
  for (nfds_t i = 0; i < n; ++i) {
    if (fds[i].fd < 0) continue;
    epoll_event ev{};
    ev.data.fd = fds[i].fd;
    ev.events = static_cast<uint32_t>(fds[i].events) & kEpollMask;
    int op = EPOLL_CTL_ADD;
    for (nfds_t j = 0; j < i; ++j) {  // the same fd listed twice: merge its events
      if (fds[j].fd == fds[i].fd) {
        ev.events |= static_cast<uint32_t>(fds[j].events) & kEpollMask;
        op = EPOLL_CTL_MOD;
      }
    }
    if (::epoll_ctl(ep, op, fds[i].fd, &ev) != 0) {
      // EPERM: a regular file, always ready; EBADF: poll reports POLLNVAL. Either way the
      // re-poll answers at once.
      LIONET_REAL(close)(ep);
      return 0;
    }
  }
  int w = wait_fd(ep, Dir::kRead, deadline);
  forget_private_fd(ep);
  return w;
}

int wait_any(pollfd* fds, nfds_t n, std::optional<TimePoint> deadline) noexcept {
  pollfd* only = nullptr;
  int valid = 0;
  for (nfds_t i = 0; i < n; ++i) {
    if (fds[i].fd >= 0) {
      ++valid;
      only = &fds[i];
    }
  }
  if (valid == 0) return sleep_until_deadline(deadline);
  if (valid == 1) {
    const bool in = (only->events & kInEvents) != 0;
    const bool out = (only->events & kOutEvents) != 0;
    if (!(in && out)) return wait_fd(only->fd, out ? Dir::kWrite : Dir::kRead, deadline);
  }
  return wait_set(fds, n, deadline);
}

}  // namespace

int poll_impl(pollfd* fds, nfds_t n, int timeout_ms) noexcept {
  if (timeout_ms == 0) return LIONET_REAL(poll)(fds, n, timeout_ms);
  if (io_active() == nullptr) {
    warn_io_off("poll", -1);
    return LIONET_REAL(poll)(fds, n, timeout_ms);
  }
  int r = LIONET_REAL(poll)(fds, n, 0);
  if (r != 0) return r;  // ready, or an error with errno from this very call
  std::optional<TimePoint> deadline;
  if (timeout_ms > 0) deadline = now() + std::chrono::milliseconds(timeout_ms);
  for (int spurious = 0;; ++spurious) {
    int w = wait_any(fds, n, deadline);
    r = LIONET_REAL(poll)(fds, n, 0);
    if (r != 0) return r;
    if (fail_if_interrupted()) return -1;  // ECANCELED / ETIMEDOUT (sched/cancel.h)
    if (w == ETIMEDOUT || (deadline && now() >= *deadline)) return 0;
    if (io_active() == nullptr) {  // now on a worker with the switch off: finish as libc
      return LIONET_REAL(poll)(fds, n, poll_timeout_ms(deadline));
    }
    // Woken but nothing ready (a spurious event, or an fd kind the reactor reports as always
    // ready): back off so a misbehaving fd cannot make this loop spin a core.
    if (spurious >= 2) this_fiber::sleep_for(std::chrono::milliseconds(std::min(1 << std::min(spurious - 2, 6), 50)));
  }
}

}  // namespace lionet::hook::detail

using namespace lionet::hook::detail;

LIONET_HOOK_API int poll(pollfd* fds, nfds_t n, int timeout_ms) { return poll_impl(fds, n, timeout_ms); }

extern "C" [[noreturn]] void __chk_fail(void);
LIONET_HOOK_API int __poll_chk(pollfd* fds, nfds_t n, int timeout_ms, size_t fdslen) {
  if (fdslen / sizeof(*fds) < n) __chk_fail();
  return poll_impl(fds, n, timeout_ms);
}

LIONET_HOOK_API int select(int nfds, fd_set* rd, fd_set* wr, fd_set* ex, timeval* tv) {
  const bool zero = tv && tv->tv_sec == 0 && tv->tv_usec == 0;
  if (!zero && io_active() == nullptr) warn_io_off("select", -1);
  if (zero || io_active() == nullptr || nfds < 0 || nfds > FD_SETSIZE ||
      (tv && (tv->tv_sec < 0 || tv->tv_usec < 0 || tv->tv_usec >= 1000000))) {
    return LIONET_REAL(select)(nfds, rd, wr, ex, tv);  // plain, or the kernel's own EINVAL
  }
  std::vector<pollfd> p;
  for (int fd = 0; fd < nfds; ++fd) {
    short ev = 0;
    if (rd && FD_ISSET(fd, rd)) ev |= POLLIN;
    if (wr && FD_ISSET(fd, wr)) ev |= POLLOUT;
    if (ex && FD_ISSET(fd, ex)) ev |= POLLPRI;
    if (ev) p.push_back(pollfd{fd, ev, 0});
  }
  int timeout_ms = -1;
  lionet::TimePoint deadline{};
  if (tv) {
    auto d = std::chrono::seconds(tv->tv_sec) + std::chrono::microseconds(tv->tv_usec);
    deadline = lionet::now() + d;
    auto ms = std::chrono::ceil<std::chrono::milliseconds>(d).count();
    timeout_ms = ms > 0x7fffffff ? 0x7fffffff : static_cast<int>(ms);
  }
  int r = poll_impl(p.data(), p.size(), timeout_ms);
  if (r < 0) return r;
  for (const pollfd& q : p) {
    if (q.revents & POLLNVAL) {
      set_errno(EBADF);
      return -1;
    }
  }
  int count = 0;
  if (rd) FD_ZERO(rd);
  if (wr) FD_ZERO(wr);
  if (ex) FD_ZERO(ex);
  for (const pollfd& q : p) {
    if ((q.events & POLLIN) && (q.revents & (POLLIN | POLLRDNORM | POLLRDBAND | POLLHUP | POLLERR))) {
      FD_SET(q.fd, rd);
      ++count;
    }
    if ((q.events & POLLOUT) && (q.revents & (POLLOUT | POLLWRNORM | POLLWRBAND | POLLERR))) {
      FD_SET(q.fd, wr);
      ++count;
    }
    if ((q.events & POLLPRI) && (q.revents & POLLPRI)) {
      FD_SET(q.fd, ex);
      ++count;
    }
  }
  if (tv) {  // Linux reports the time not slept
    auto left = std::max(deadline - lionet::now(), lionet::Duration::zero());
    auto us = std::chrono::duration_cast<std::chrono::microseconds>(left).count();
    tv->tv_sec = static_cast<time_t>(us / 1000000);
    tv->tv_usec = static_cast<suseconds_t>(us % 1000000);
  }
  return count;
}
