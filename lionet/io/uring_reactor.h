// lionet/io/uring_reactor.h: the io_uring backend of Reactor (reactor.h), over liburing.
// Compiled only when CMake finds liburing (LIONET_HAVE_URING); picked with io.backend: io_uring.
//
// Owns: one ring, an eventfd for wake(). uring_reactor.cc is the only file with io_uring_*
// calls for readiness and for completion-based socket operations. Must not keep per-fd state (IOManager keeps it).
#pragma once

#include <atomic>
#include <memory>
#include <mutex>

#include "lionet/io/reactor.h"

struct io_uring;

namespace lionet {
class UringReactor final : public Reactor {
 public:
  // Throws std::system_error if the kernel has no usable io_uring (older than 5.19, disabled
  // by sysctl or seccomp) or the ring cannot be created.
  explicit UringReactor(unsigned entries = 256);
  ~UringReactor() override;

  const char* name() const noexcept override { return "io_uring"; }
  int arm(const ArmRequest& req, uint32_t* armed) noexcept override;
  void disarm(int fd) noexcept override;
  int wait(ReactorEvent* out, int max, TimePoint deadline) noexcept override;
  void wake() noexcept override;
  bool supports_ops() const noexcept override { return true; }
  int submit(ReactorOp& op) noexcept override;

 private:
  void arm_wake_poll() noexcept;  // caller holds sq_mu_
  int submit_locked() noexcept;   // caller holds sq_mu_; returns 0 or an errno
  unsigned flush_locked() noexcept;  // caller holds sq_mu_; publishes queued SQEs

  std::unique_ptr<io_uring> ring_;
  // Guards the submission queue: arm()/disarm() come from any thread. The completion queue
  // has one reader at a time (the poller), so it needs no lock.
  std::mutex sq_mu_;
  int wakefd_ = -1;
  std::atomic<bool> wake_pending_{false};  // as in EpollReactor
  bool wake_armed_ = false;  // the wake poll was queued (by the first wait(), see the constructor); under sq_mu_
  // True while the poller is blocked in io_uring_enter: arm() then submits its SQEs itself
  // instead of leaving them for the poller's next wait/poll. Written under sq_mu_ (true) and
  // by the poller after its wait (false; a stale true only costs arm() one submit).
  std::atomic<bool> poller_blocked_{false};
};
}  // namespace lionet
