// lionet/base/clock.cc: coarse_resolution() (clock.h).
#include "lionet/base/clock.h"

namespace lionet {
Duration coarse_resolution() noexcept {
  static const Duration res = [] {
#ifdef CLOCK_MONOTONIC_COARSE
    timespec ts{};
    if (clock_getres(CLOCK_MONOTONIC_COARSE, &ts) == 0 && (ts.tv_sec > 0 || ts.tv_nsec > 0))
      return std::chrono::duration_cast<Duration>(std::chrono::seconds(ts.tv_sec) +
                                                  std::chrono::nanoseconds(ts.tv_nsec));
    return std::chrono::duration_cast<Duration>(std::chrono::milliseconds(10));  // HZ=100's jiffy: the widest
#else
    return Duration::zero();  // coarse_now() is now() here
#endif
  }();
  return res;
}
}  // namespace lionet
