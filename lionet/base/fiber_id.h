// lionet/base/fiber_id.h: lets layers below fiber/ (log/) name the running fiber without
// depending on fiber/. fiber/ registers the provider once at start-up; until then, and on
// plain threads, the id is 0.
#pragma once

#include <cstdint>

namespace lionet::base {
using FiberIdProvider = uint64_t (*)() noexcept;
void set_fiber_id_provider(FiberIdProvider provider) noexcept;
// Id of the fiber running on this thread, or 0 outside fibers.
uint64_t current_fiber_id() noexcept;
}  // namespace lionet::base
