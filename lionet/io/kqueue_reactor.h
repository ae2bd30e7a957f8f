// lionet/io/kqueue_reactor.h: the BSD/macOS kqueue backend of Reactor (reactor.h).
//
// UNTESTED: compiled only on macOS and the BSDs (CMake drops files named *kqueue* elsewhere),
// and LioNet's CI machines run Linux, so no test has ever run this code. It is written to the
// same contract as EpollReactor and reviewed by hand; treat it as a starting point.
//
// Owns: one kqueue, and an EVFILT_USER event (or a pipe where EVFILT_USER is missing) for
// wake(). Must not keep per-fd state (IOManager keeps it).
#pragma once

#include <atomic>

#include "lionet/io/reactor.h"

namespace lionet {
class KqueueReactor final : public Reactor {
 public:
  // Throws std::system_error if kqueue() (or the wake pipe) cannot be created.
  KqueueReactor();
  ~KqueueReactor() override;

  const char* name() const noexcept override { return "kqueue"; }
  int arm(const ArmRequest& req, uint32_t* armed) noexcept override;
  void disarm(int fd) noexcept override;
  int wait(ReactorEvent* out, int max, TimePoint deadline) noexcept override;
  void wake() noexcept override;

 private:
  int kq_ = -1;
  int wake_pipe_[2] = {-1, -1};  // used only without EVFILT_USER
  std::atomic<bool> wake_pending_{false};  // as in EpollReactor
};
}  // namespace lionet
