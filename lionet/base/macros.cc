#include "lionet/base/macros.h"

#include <cstdio>
#include <cstdlib>

namespace lionet::detail {
void check_failed(const char* file, int line, const char* expr, const char* msg) noexcept {
  std::fprintf(stderr, "lionet: check failed at %s:%d: %s: %s\n", file, line, expr, msg);
  std::fflush(stderr);
  std::abort();
}
}  // namespace lionet::detail
