// lionet/base/fiber_id.cc: the fiber-id provider that fiber/ registers (see fiber_id.h).
#include "lionet/base/fiber_id.h"

#include <atomic>

namespace lionet::base {
namespace {
// Written once at start-up by fiber/; relaxed is enough: a reader that sees the old null
// pointer reports 0, which is what a thread that has run no fiber would report anyway.
std::atomic<FiberIdProvider> g_provider{nullptr};
}  // namespace

void set_fiber_id_provider(FiberIdProvider provider) noexcept { g_provider.store(provider, std::memory_order_relaxed); }

uint64_t current_fiber_id() noexcept {
  FiberIdProvider p = g_provider.load(std::memory_order_relaxed);
  return p ? p() : 0;
}
}  // namespace lionet::base
