// lionet/hook/lock_hooks.cc: pthread_mutex_lock / trylock / timedlock / unlock, counted for
// sched/os_locks.h: a fiber that reaches a scheduling point holding one is reported.
//
// The mutex is always locked and unlocked by the original function (dlsym(RTLD_NEXT): libc's,
// or a sanitizer's interceptor, which then sees it as before); these wrappers only count, and
// only while the check is on (fiber.check_os_locks) and the caller is a fiber. std::mutex goes
// through here (libstdc++ calls pthread_mutex_lock); glibc's own internal locks do not (they
// are not called through the symbol). A pthread_cond_wait's release and re-acquisition happen
// inside libc and keep the count as it was, which is right: the thread blocks, no fiber
// switches meanwhile.
#include <pthread.h>

#include "lionet/fiber/fiber.h"
#include "lionet/hook/detail/real.h"
#include "lionet/sched/os_locks.h"

#define LIONET_HOOK_API extern "C" __attribute__((visibility("default")))

extern "C" const int lionet_hook_anchor_lock = 0;

namespace {
inline bool counting() noexcept {
  return __atomic_load_n(&lionet::detail::g_os_lock_check, __ATOMIC_RELAXED) != 0 &&
         lionet::detail::t_current_fiber != nullptr;
}

inline void note_locked(pthread_mutex_t* m) noexcept {
  if (counting()) lionet::detail::os_lock_taken(reinterpret_cast<uintptr_t>(m));
}
}  // namespace

LIONET_HOOK_API int pthread_mutex_lock(pthread_mutex_t* m) {
  const int r = LIONET_REAL(pthread_mutex_lock)(m);
  if (r == 0) note_locked(m);
  return r;
}

LIONET_HOOK_API int pthread_mutex_trylock(pthread_mutex_t* m) {
  const int r = LIONET_REAL(pthread_mutex_trylock)(m);
  if (r == 0) note_locked(m);
  return r;
}

LIONET_HOOK_API int pthread_mutex_timedlock(pthread_mutex_t* m, const timespec* abstime) {
  const int r = LIONET_REAL(pthread_mutex_timedlock)(m, abstime);
  if (r == 0) note_locked(m);
  return r;
}

LIONET_HOOK_API int pthread_mutex_unlock(pthread_mutex_t* m) {
  if (counting()) {
    if (lionet::detail::t_os_locks_held > 0) {
      lionet::detail::os_lock_given_back(reinterpret_cast<uintptr_t>(m));
    } else {
      lionet::detail::os_lock_released_by_fiber();  // taken before a switch, on another thread
    }
  }
  return LIONET_REAL(pthread_mutex_unlock)(m);
}
