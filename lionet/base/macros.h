// lionet/base/macros.h: branch hints, cache-line size and checks that never vanish.
// Owns: LIONET_CHECK (always on, release builds too: sylar's asserts vanished and hid bugs),
// LIONET_DCHECK (for hot paths: on where the library itself was built without NDEBUG, see
// build_config.h, whatever the includer defines). Must not depend on any other layer.
#pragma once

#include <cstddef>

#include "lionet/base/build_config.h"

#define LIONET_LIKELY(x) __builtin_expect(!!(x), 1)
#define LIONET_UNLIKELY(x) __builtin_expect(!!(x), 0)

namespace lionet {
// Destructive-interference size on x86-64 and most ARM64 parts; a constant (not
// std::hardware_destructive_interference_size) so the ABI does not vary with compiler flags.
inline constexpr std::size_t kCacheLine = 64;

namespace detail {
[[noreturn]] void check_failed(const char* file, int line, const char* expr, const char* msg) noexcept;
}  // namespace detail
}  // namespace lionet

// Always-on invariant check: prints file:line, the expression and a message, then aborts.
#define LIONET_CHECK(cond, msg)                                                                   \
  do {                                                                                            \
    if (LIONET_UNLIKELY(!(cond))) ::lionet::detail::check_failed(__FILE__, __LINE__, #cond, msg); \
  } while (0)

#if !LIONET_DEBUG_CHECKS
#define LIONET_DCHECK(cond, msg) \
  do {                           \
  } while (0)
#else
#define LIONET_DCHECK(cond, msg) LIONET_CHECK(cond, msg)
#endif
