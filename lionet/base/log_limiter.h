// lionet/base/log_limiter.h: at most one log line per interval for a recurring event (accept
// errors, connections closed for want of a fiber, rejected HTTP requests), the events held back
// counted into the next line. Used by net/ and http/.
// Must not: log itself, or allocate. Any thread; lock-free.
#pragma once

#include <atomic>
#include <cstdint>

#include "lionet/base/clock.h"

namespace lionet {

class LogLimiter {
 public:
  explicit LogLimiter(int64_t interval_ns = 1'000'000'000) noexcept : interval_ns_(interval_ns) {}

  // True: log now; `held` is set to the events held back since the last line. False: this
  // event is held back (counted).
  bool admit(uint64_t& held) noexcept {
    const int64_t t = monotonic_ns();
    int64_t last = last_ns_.load(std::memory_order_relaxed);
    // relaxed: only which thread logs is decided here; the count is an approximation.
    if (t - last < interval_ns_ || !last_ns_.compare_exchange_strong(last, t)) {
      held_.fetch_add(1, std::memory_order_relaxed);
      return false;
    }
    held = held_.exchange(0, std::memory_order_relaxed);
    return true;
  }

 private:
  const int64_t interval_ns_;
  std::atomic<int64_t> last_ns_{0};
  std::atomic<uint64_t> held_{0};
};
}  // namespace lionet
