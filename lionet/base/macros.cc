// lionet/base/macros.cc: check_failed() (LIONET_CHECK/LIONET_DCHECK) and the NDEBUG guard.
#include "lionet/base/macros.h"

#include <cstdio>
#include <cstdlib>

// build_config.h is generated from the flags CMake knows of (lionet/CMakeLists.txt looks for
// -DNDEBUG in them); this file is compiled with the flags the compiler really got, so an NDEBUG
// that the regex missed stops the build here instead of giving the headers checks or a layout
// the library does not have.
#if defined(NDEBUG) == LIONET_DEBUG_CHECKS
#error "lionet/base/build_config.h disagrees with this compilation's NDEBUG: reconfigure (lionet/CMakeLists.txt)"
#endif

namespace lionet::detail {
void check_failed(const char* file, int line, const char* expr, const char* msg) noexcept {
  std::fprintf(stderr, "lionet: check failed at %s:%d: %s: %s\n", file, line, expr, msg);
  std::fflush(stderr);
  std::abort();
}
}  // namespace lionet::detail
