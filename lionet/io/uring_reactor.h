// lionet/io/uring_reactor.h: the io_uring backend of Reactor (reactor.h), over liburing.
// Compiled only when CMake finds liburing (LIONET_HAVE_URING); picked with io.backend: io_uring.
//
// Owns: one ring, an eventfd for wake(). uring_reactor.cc is the only file with io_uring_*
// calls for readiness and for completion-based socket operations. Must not keep per-fd state
// (IOManager keeps it). With several workers IOManager makes one single-issuer UringReactor
// per worker (io_manager.cc protocol 10): each is entered by its worker only, and the other
// threads' requests to it are queued for that worker as below.
#pragma once

#include <atomic>
#include <memory>
#include <mutex>
#include <vector>

#include <sys/types.h>

#include "lionet/io/reactor.h"

struct io_uring;
struct io_uring_sqe;

namespace lionet {
class UringReactor final : public Reactor {
 public:
  // Throws std::system_error if the kernel has no usable io_uring (older than 5.19, disabled
  // by sysctl or seccomp) or the ring cannot be created.
  // single_issuer: for a ring that one worker thread uses (a one-worker scheduler, or one ring
  // of a ring per worker). The ring is entered only by the thread of the first wait() (IORING_SETUP_SINGLE_ISSUER | DEFER_TASKRUN: completions are
  // run when that thread waits, in one batch, not interrupting its other system calls); other
  // threads' arm()/disarm()/submit() are queued for it and wake it. wait() from any other
  // thread then returns 0 at once. Falls back to a shared ring on kernels without it.
  explicit UringReactor(unsigned entries = 256, bool single_issuer = false);
  ~UringReactor() override;

  const char* name() const noexcept override { return "io_uring"; }
  int arm(const ArmRequest& req, uint32_t* armed) noexcept override;
  void disarm(int fd) noexcept override;
  void disarm_life(int fd, uint32_t tag, bool ops) noexcept override;
  void cancel_op(ReactorOp& op) noexcept override;
  int wait(ReactorEvent* out, int max, TimePoint deadline) noexcept override;
  void wake() noexcept override;
  bool supports_ops() const noexcept override { return ops_supported_; }
  int submit(ReactorOp& op) noexcept override;
  bool single_issuer() const noexcept override { return single_issuer_; }

 private:
  // A request to queue: a readiness poll, a cancel of everything on fd, or an operation.
  struct Pending {
    enum Kind : uint8_t { kPoll, kCancelFd, kOp, kCancelOp, kCancelPoll } kind;
    int fd;
    uint32_t dir;
    uint32_t tag;
    ReactorOp* op;
  };
  void probe_ops() noexcept;  // sets ops_supported_
  bool owns_ring() const noexcept;  // may this thread enter the ring?
  io_uring_sqe* next_sqe() noexcept;  // caller holds sq_mu_
  int prep_locked(const Pending& w) noexcept;  // caller holds sq_mu_ and owns_ring()
  int queue_locked(const Pending& w) noexcept;  // caller holds sq_mu_
  void arm_wake_poll() noexcept;  // caller holds sq_mu_
  int submit_locked() noexcept;  // caller holds sq_mu_; returns 0 or an errno
  unsigned flush_locked() noexcept;  // caller holds sq_mu_; publishes queued SQEs

  std::unique_ptr<io_uring> ring_;
  bool single_issuer_;  // set at construction (false if the kernel refused)
  bool ops_supported_ = false;  // probe_ops(): the kernel has every opcode ops use
  std::atomic<pid_t> owner_{0};  // single issuer: the thread that enabled the ring
  std::vector<Pending> foreign_;  // single issuer: other threads' requests; under sq_mu_
  // Guards the submission queue: arm()/disarm() come from any thread. The completion queue
  // has one reader at a time (the poller), so it needs no lock.
  std::mutex sq_mu_;
  int wakefd_ = -1;
  std::atomic<bool> wake_pending_{false};  // as in EpollReactor
  bool wake_armed_ = false;  // the wake poll was queued (first wait()); under sq_mu_
  // True while the poller is blocked in io_uring_enter: arm() then submits its SQEs itself
  // instead of leaving them for the poller's next wait/poll. Written under sq_mu_ (true) and
  // by the poller after its wait (false; a stale true only costs arm() one submit).
  std::atomic<bool> poller_blocked_{false};
};
}  // namespace lionet
