// lionet/sched/os_locks.cc: see os_locks.h.
#include "lionet/sched/os_locks.h"

#include <atomic>
#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include <spdlog/spdlog.h>

#include "lionet/base/spinlock.h"
#include "lionet/fiber/fiber.h"
#include "lionet/fiber/stack_trace.h"

namespace lionet {
namespace detail {
uint8_t g_os_lock_check = static_cast<uint8_t>(OsLockCheck::kLog);
constinit thread_local uint32_t t_os_locks_held = 0;
constinit thread_local uintptr_t t_os_lock_held_at[kOsLockSlots] = {};

namespace {
std::atomic<uint64_t> g_violations{0};

// Call sites already reported: an open-addressing set of stack hashes, bounded (past it every
// site counts, none is logged again). Guarded by a SpinLock: the report may run while the
// caller holds a channel's SpinLock (park_and_unlock), where a pthread mutex would be reported
// itself.
constexpr std::size_t kSites = 4096;
SpinLock g_sites_mu;
uint64_t g_sites[kSites];
std::size_t g_sites_used = 0;

bool first_report_of(uint64_t h) noexcept {
  if (h == 0) h = 1;
  std::lock_guard<SpinLock> lk(g_sites_mu);
  for (std::size_t i = h % kSites, n = 0; n < kSites; i = (i + 1) % kSites, ++n) {
    if (g_sites[i] == h) return false;
    if (g_sites[i] == 0) {
      if (g_sites_used >= kSites / 2) return false;  // full enough: stop logging new sites
      g_sites[i] = h;
      ++g_sites_used;
      return true;
    }
  }
  return false;
}
}  // namespace

void os_lock_held_at_switch(Fiber* self) noexcept {
  const uint32_t held = t_os_locks_held;
  std::string locks;
  for (uint32_t i = 0; i < held && i < kOsLockSlots; ++i) {
    char a[24];
    std::snprintf(a, sizeof a, "%s0x%" PRIxPTR, i ? ", " : "", t_os_lock_held_at[i]);
    locks += a;
  }
  if (held > kOsLockSlots) locks += ", ...";
  t_os_locks_held = 0;  // the locks are the fiber's now: this thread's next fiber holds none
  const auto mode = static_cast<OsLockCheck>(__atomic_load_n(&g_os_lock_check, __ATOMIC_RELAXED));
  if (mode == OsLockCheck::kOff) return;  // turned off while held: forget them
  self->os_locks_carried_ += held;
  g_violations.fetch_add(1, std::memory_order_relaxed);
  uintptr_t pcs[32];
  const std::size_t n = unwind_current(pcs, 32);
  uint64_t h = 1469598103934665603ULL;
  for (std::size_t i = 0; i < n; ++i) h = (h ^ pcs[i]) * 1099511628211ULL;
  if (mode != OsLockCheck::kAbort && !first_report_of(h)) return;
  char head[512];
  std::snprintf(head, sizeof head,
                "fiber %" PRIu64
                " \"%s\" reached a scheduling point holding %u pthread mutex%s (%s): while it is "
                "parked, any fiber taking one blocks its whole worker thread (fiber.check_os_locks; reported once "
                "per call site)",
                self->id(), self->name().c_str(), held, held == 1 ? "" : "es", locks.c_str());
  // We are inside a switch (the fiber is half parked, maybe under a channel's SpinLock): the
  // frames are named and logged by a thread of their own, never by a hooked call from here.
  auto report = [text = std::string(head), frames = std::vector<uintptr_t>(pcs, pcs + n), mode] {
    Symbolizer sym;  // on this plain thread: libdw's file reads are plain blocking reads here
    const std::string stack = format_stack(sym, frames.data(), frames.size(), "    ");
    if (mode == OsLockCheck::kAbort) {
      std::fprintf(stderr, "lionet: %s\n%s", text.c_str(), stack.c_str());
      std::abort();
    }
    spdlog::warn("{}\n{}", text, stack);
  };
  try {
    std::thread t(std::move(report));
    if (mode == OsLockCheck::kAbort) {
      t.join();  // it aborts
    } else {
      t.detach();
    }
  } catch (...) {
    if (mode == OsLockCheck::kAbort) std::abort();
  }
}

void os_lock_released_by_fiber() noexcept {
  if (Fiber* f = t_current_fiber; f && f->os_locks_carried_ > 0) --f->os_locks_carried_;
}
}  // namespace detail

void set_os_lock_check(OsLockCheck mode) noexcept {
  __atomic_store_n(&detail::g_os_lock_check, static_cast<uint8_t>(mode), __ATOMIC_RELAXED);
}

OsLockCheck os_lock_check() noexcept {
  return static_cast<OsLockCheck>(__atomic_load_n(&detail::g_os_lock_check, __ATOMIC_RELAXED));
}

uint64_t os_lock_violations() noexcept { return detail::g_violations.load(std::memory_order_relaxed); }

bool parse_os_lock_check(const char* text, OsLockCheck& out) noexcept {
  if (std::strcmp(text, "off") == 0) {
    out = OsLockCheck::kOff;
  } else if (std::strcmp(text, "log") == 0) {
    out = OsLockCheck::kLog;
  } else if (std::strcmp(text, "abort") == 0) {
    out = OsLockCheck::kAbort;
  } else {
    return false;
  }
  return true;
}
}  // namespace lionet
