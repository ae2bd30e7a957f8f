// lionet/hook/hook.cc: the per-thread switch, errno accessors, resolution of the originals and
// the one fd wait shared by every hook file. See hook.h for what is hooked and why.
#include "lionet/hook/hook.h"

#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>
#include <string>

#include <cstdio>
#include <cstdlib>

#include "lionet/fiber/fiber.h"
#include "lionet/hook/detail/common.h"
#include "lionet/hook/detail/real.h"
#include "lionet/io/io_manager.h"
#include "lionet/log/log.h"
#include "lionet/sched/cancel.h"
#include "lionet/sched/scheduler.h"

// Anchors defined by the other hook files: referencing them here makes ensure_linked() pull
// every hook object out of the static library.
extern "C" const int lionet_hook_anchor_io;
extern "C" const int lionet_hook_anchor_ctl;
extern "C" const int lionet_hook_anchor_poll;
extern "C" const int lionet_hook_anchor_sleep;
extern "C" const int lionet_hook_anchor_dns;
extern "C" const int lionet_hook_anchor_lock;

extern "C" __attribute__((visibility("default"), noinline)) void lionet_hook_ensure_linked() noexcept {
  // volatile: the loads (and so the references to every hook object) must stay.
  const volatile int* anchors[] = {&lionet_hook_anchor_io,    &lionet_hook_anchor_ctl, &lionet_hook_anchor_poll,
                                   &lionet_hook_anchor_sleep, &lionet_hook_anchor_dns, &lionet_hook_anchor_lock};
  int sum = 0;
  for (const volatile int* a : anchors) sum += *a;
  (void)sum;
}

namespace lionet::hook {
namespace {
// The switch of this thread. Read after every switch through thread_enabled() (not cached).
thread_local bool t_enabled = true;
}  // namespace

bool is_enabled() noexcept { return t_enabled; }
void set_enabled(bool on) noexcept { t_enabled = on; }
bool is_active() noexcept { return detail::sleep_active(); }
bool is_io_active() noexcept { return detail::io_active() != nullptr; }

namespace detail {

constinit RealFns g_real;

void* resolve_real(const char* name) noexcept {
  void* p = ::dlsym(RTLD_NEXT, name);
  if (!p) {
    std::fprintf(stderr, "lionet hook: dlsym(RTLD_NEXT, \"%s\") failed: %s\n", name, ::dlerror());
    std::abort();
  }
  return p;
}

__attribute__((noinline)) int get_errno() noexcept {
  asm volatile("" ::: "memory");  // keep the call a real call, in program order
  return errno;
}

__attribute__((noinline)) void set_errno(int e) noexcept {
  asm volatile("" ::: "memory");
  errno = e;
}

__attribute__((noinline)) bool thread_enabled() noexcept { return t_enabled; }

bool sleep_active() noexcept { return current_fiber() != nullptr && thread_enabled(); }

IOManager* io_active() noexcept { return sleep_active() ? IOManager::current() : nullptr; }

void warn_io_off(const char* call, int fd) noexcept {
  static std::atomic<bool> warned{false};
  if (warned.load(std::memory_order_relaxed) || !sleep_active()) return;  // plain thread: libc asked for
  if (fd >= 0) {
    struct stat st;
    if (::fstat(fd, &st) != 0 || !(S_ISSOCK(st.st_mode) || S_ISFIFO(st.st_mode) || S_ISCHR(st.st_mode))) return;
    const long fl = ::syscall(SYS_fcntl, fd, F_GETFL);  // raw: the hooked fcntl reports the user's view
    if (fl < 0 || (fl & O_NONBLOCK)) return;
  }
  if (warned.exchange(true)) return;
  const Fiber* f = current_fiber();
  const Scheduler* s = Scheduler::current();
  static const auto lg = log::get("hook");
  LIONET_LOG_WARN(lg,
                  "{}() in fiber {}{}{} runs as plain libc and blocks its worker thread: scheduler '{}' has no IO "
                  "driver (SchedulerOptions::io.backend \"none\"); the worker's other fibers wait meanwhile "
                  "(logged once per process)",
                  call, f ? f->id() : 0, f && !f->name().empty() ? " " : "", f ? f->name() : std::string(),
                  s ? s->options().name : std::string("?"));
}

bool fail_if_interrupted() noexcept {
  const int e = this_fiber::interruption();
  if (e == 0) return false;
  set_errno(e);
  return true;
}

int poll_timeout_ms(std::optional<TimePoint> deadline) noexcept {
  if (!deadline) return -1;
  auto left = *deadline - now();
  if (left <= Duration::zero()) return 0;
  auto ms = std::chrono::ceil<std::chrono::milliseconds>(left).count();
  return ms > 0x7fffffff ? 0x7fffffff : static_cast<int>(ms);
}

int wait_fd(int fd, Dir dir, std::optional<TimePoint> deadline, bool after_eagain) noexcept {
  if (IOManager* iom = io_active()) {
    // Resume on this same worker: the caller's compiled code may hold errno's address (glibc's
    // __errno_location is `const`) from before the call; after a migration it would point at
    // another thread's errno. Pinned for the wait, the fiber cannot be moved.
    PinGuard pin;
    if (after_eagain)
      return dir == Dir::kRead ? iom->wait_readable_after_eagain(fd, deadline)
                               : iom->wait_writable_after_eagain(fd, deadline);
    return dir == Dir::kRead ? iom->wait_readable(fd, deadline) : iom->wait_writable(fd, deadline);
  }
  // Plain thread (or switch off): block the thread in libc poll, as the kernel would block.
  for (;;) {
    pollfd p{fd, static_cast<short>(dir == Dir::kRead ? POLLIN : POLLOUT), 0};
    int r = LIONET_REAL(poll)(&p, 1, poll_timeout_ms(deadline));
    if (r > 0) return 0;  // ready, error or hang-up: the retried call reports it
    if (r == 0) {
      if (deadline && now() < *deadline) continue;  // poll's ms granularity woke us early
      return ETIMEDOUT;
    }
    if (get_errno() != EINTR) return 0;  // let the retried call report the problem
  }
}

}  // namespace detail
}  // namespace lionet::hook
