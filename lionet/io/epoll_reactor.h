// lionet/io/epoll_reactor.h: the Linux epoll backend of Reactor (reactor.h). The default.
//
// Owns: one epoll instance and one eventfd for wake(). epoll_reactor.cc is LioNet's only reactor
// over epoll_*; the other epoll sets (hook/poll_hooks.cc, file/file_watcher.cc) only gather fds
// into one that the IOManager waits on (ARCHITECTURE decision 19). Must not keep per-fd state
// (IOManager keeps it).
#pragma once

#include <atomic>

#include "lionet/io/reactor.h"

namespace lionet {
class EpollReactor final : public Reactor {
 public:
  // Throws std::system_error if epoll_create1 or eventfd fails.
  EpollReactor();
  ~EpollReactor() override;

  const char* name() const noexcept override { return "epoll"; }
  bool reports_changes_only() const noexcept override { return true; }
  int arm(const ArmRequest& req, uint32_t* armed) noexcept override;
  void disarm(int fd) noexcept override;
  int wait(ReactorEvent* out, int max, TimePoint deadline) noexcept override;
  void wake() noexcept override;

 private:
  int epfd_ = -1;
  int wakefd_ = -1;  // eventfd, level-triggered in the epoll set; drained by wait()
  // true from the first wake() until wait() drains the eventfd: repeated wakes cost no
  // syscall. Writer: wake() (true, any thread), wait() (false, the poller).
  std::atomic<bool> wake_pending_{false};
};
}  // namespace lionet
