// lionet/http/handler_limits.cc: see handler_limits.h.
#include "lionet/http/handler_limits.h"

#include <fcntl.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <string>

#include "lionet/http/detail/log.h"
#include "lionet/http/status.h"
#include "lionet/io/io_manager.h"
#include "lionet/net/socket.h"
#include "lionet/sched/cancel.h"

namespace lionet::http {

HandlerCounters& handler_counters() noexcept {
  static HandlerCounters c;
  return c;
}

bool run_bounded(const Handler& h, Request& req, Response& res, Duration timeout) {
  if (timeout <= Duration::zero()) {
    h(req, res);
    return false;
  }
  const TimePoint deadline = now() + timeout;
  bool threw = false;
  {
    DeadlineScope scope(deadline);
    try {
      h(req, res);
    } catch (...) {
      if (now() < deadline) throw;
      threw = true;
    }
  }
  if (now() < deadline) return false;
  const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(timeout).count();
  LIONET_LOG_WARN(detail::http_log(), "handler for {} {} ran past its {} ms timeout{}: answered 504", req.method(),
                  req.target(), ms, threw ? " (and threw)" : "");
  handler_counters().timeouts.fetch_add(1, std::memory_order_relaxed);
  res.reset();
  res.reply(504, error_text(504, "the handler did not answer within " + std::to_string(ms) + " ms"));
  return true;
}

Handler with_timeout(Handler h, Duration timeout) {
  return [h = std::move(h), timeout](Request& req, Response& res) { (void)run_bounded(h, req, res, timeout); };
}

void DisconnectWatch::begin(Socket* socket, const std::atomic<bool>* stopping) {
  if (!socket || socket->fd() < 0) return;
  Scheduler* sched = Scheduler::current();
  Fiber* self = current_fiber();
  if (!sched || !self) return;
  socket_ = socket;
  stopping_ = stopping;
  handler_ = self;
  sched_ = sched;
  gone_.store(false, std::memory_order_relaxed);
  armed_ = true;
  try {
    // From the coarse clock: the watch starts up to a tick early, and the request's clock
    // read is saved.
    timer_ = add_timer(coarse_now() + kWatchAfter, [this] {
      try {
        watcher_ = sched_->spawn([this] { watch(); }, {.name = "http disconnect watch"});
      } catch (...) {
        // No fiber to be had: this request goes unwatched.
      }
    });
  } catch (...) {
    armed_ = false;
  }
}

bool DisconnectWatch::end() noexcept {
  if (!armed_) return false;
  armed_ = false;
  timer_.cancel();  // waits if its callback runs: watcher_ is settled after this
  timer_ = Timer();
  if (watcher_.valid()) {
    watcher_.cancel();
    CancelShield shield;  // the handler's fiber may be cancelled itself: still wait
    try {
      watcher_.join();
    } catch (...) {
    }
    watcher_ = JoinHandle<void>();
  }
  return gone_.load(std::memory_order_acquire);
}

void DisconnectWatch::watch() noexcept {
  IOManager* io = IOManager::current();
  if (!io) return;
  // The watch waits on a duplicate of the connection's fd: its own IOManager entry and its own
  // registration in the reactor (epoll and io_uring keep one per fd number), so it never takes
  // a readiness edge the connection's own waits count on (IOManager protocols 3, 7 and 8: a
  // wait after a short read expects the next bytes to make a new edge, and an edge the watcher
  // took on the shared fd would leave that read waiting until its timeout). Raw syscalls: the
  // duplicate is this watcher's alone, so hook/'s fd table must not learn of it.
  const int fd = static_cast<int>(::syscall(SYS_fcntl, socket_->fd(), F_DUPFD_CLOEXEC, 0));
  if (fd < 0) return;  // no fd to be had (EMFILE): this request goes unwatched
  io->cancel(fd);  // a fresh number: forget whatever an earlier file under it left (io_manager.h)
  for (;;) {
    if (io->wait_readable(fd, std::nullopt) != 0) break;  // end() cancelled us, or the fd closed
    char c;
    const ssize_t n = ::syscall(SYS_recvfrom, fd, &c, 1, MSG_PEEK | MSG_DONTWAIT, nullptr, nullptr);
    if (n > 0) break;  // the client sent something: not a hang-up
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) continue;
    // Server::stop shuts the read side of every connection (TcpServer's drain): that end of
    // input is ours, and the handler is let finish.
    if (n == 0 && stopping_ && stopping_->load(std::memory_order_acquire)) break;
    // EOF or a reset: the client is gone. Cancel the handler (it is alive: end() joins us first).
    gone_.store(true, std::memory_order_release);
    handler_counters().cancelled.fetch_add(1, std::memory_order_relaxed);
    ::lionet::detail::cancel_fiber(handler_);
    break;
  }
  io->cancel(fd);  // protocol 5: forget the entry before the number can name another file
  (void)::syscall(SYS_close, fd);
}

}  // namespace lionet::http
