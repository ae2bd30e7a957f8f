// lionet/hook/detail/common.h: what every hook file shares (private to hook/): the errno
// accessors, the "is this hook active here" checks and the one fd wait.
#pragma once

#include <optional>

#include "lionet/base/clock.h"

namespace lionet {
class IOManager;
}

namespace lionet::hook::detail {

// errno of the thread running the caller NOW. Defined out of line in hook.cc and marked
// noinline: glibc declares __errno_location() `const`, so an inlined `errno` may reuse the
// address computed before a fiber switch, i.e. another thread's errno after a migration.
// Every hook reads and writes errno only through these, after its last possible switch.
int get_errno() noexcept;
void set_errno(int e) noexcept;

bool thread_enabled() noexcept;
// In a fiber, switch on: sleeps park, resolver calls offload.
bool sleep_active() noexcept;
// sleep_active() and the scheduler has an IOManager: fd calls park. Re-evaluate after every
// switch (the fiber may now run on a worker whose switch is off).
IOManager* io_active() noexcept;
// Called where a hooked call that may block falls through to libc because io_active() is
// null. In a fiber with the switch on (its scheduler has no IO driver: io.backend "none"),
// the first such call of the process logs one warning naming the call and the fiber: the
// worker thread blocks in it. fd >= 0: only if fd is a socket, pipe or terminal without
// O_NONBLOCK (a call that can block); -1: always (poll/select with a timeout).
void warn_io_off(const char* call, int fd) noexcept;

enum class Dir { kRead, kWrite };

// Waits until fd is ready for dir, the deadline passes, or fd is cancelled (closed).
// Returns 0, ETIMEDOUT or ECANCELED. In an active fiber it parks through the IOManager; anywhere
// else it blocks in libc poll(2). Never touches the caller's errno contract (callers set errno
// afterwards).
// after_eagain: the caller just saw EAGAIN/EINPROGRESS on fd (lets epoll skip a level check).
int wait_fd(int fd, Dir dir, std::optional<TimePoint> deadline, bool after_eagain = false) noexcept;

// A hooked call's wait ended because the fiber was cancelled or passed its DeadlineScope
// (sched/cancel.h): sets errno to ECANCELED or ETIMEDOUT and returns true (the hook then
// returns -1; never EINTR, which libpq, hiredis and libcurl retry). False otherwise.
bool fail_if_interrupted() noexcept;

// Milliseconds until deadline for poll(2), rounded up; -1 for none.
int poll_timeout_ms(std::optional<TimePoint> deadline) noexcept;

}  // namespace lionet::hook::detail
