// lionet/websocket/utf8.cc: Utf8Validator (see utf8.h). The ranges are RFC 3629 section 4's
// UTF8-2/3/4 rules, written out: each lead byte fixes how many continuation bytes follow and
// the range of the first one (which is what excludes overlong forms, surrogates and code
// points above U+10FFFF); later continuation bytes are 80..BF.
#include "lionet/websocket/utf8.h"

#include <cstring>

namespace lionet::websocket {

bool Utf8Validator::feed(const char* data, size_t n) noexcept {
  if (failed_) return false;
  const auto* p = reinterpret_cast<const uint8_t*>(data);
  size_t i = 0;
  while (i < n) {
    if (need_ == 0) {
      // ASCII fast path: 8 bytes with no high bit.
      while (i + 8 <= n) {
        uint64_t w;
        std::memcpy(&w, p + i, 8);
        if (w & 0x8080808080808080ull) break;
        i += 8;
      }
      if (i == n) break;
      const uint8_t b = p[i++];
      if (b < 0x80) continue;
      lo_ = 0x80;
      hi_ = 0xBF;
      if (b >= 0xC2 && b <= 0xDF) {
        need_ = 1;
      } else if (b == 0xE0) {
        need_ = 2;
        lo_ = 0xA0;
      } else if ((b >= 0xE1 && b <= 0xEC) || b == 0xEE || b == 0xEF) {
        need_ = 2;
      } else if (b == 0xED) {
        need_ = 2;
        hi_ = 0x9F;  // D800..DFFF (surrogates) excluded
      } else if (b == 0xF0) {
        need_ = 3;
        lo_ = 0x90;
      } else if (b >= 0xF1 && b <= 0xF3) {
        need_ = 3;
      } else if (b == 0xF4) {
        need_ = 3;
        hi_ = 0x8F;  // nothing above U+10FFFF
      } else {
        failed_ = true;  // 80..C1 (continuation or overlong lead), F5..FF
        return false;
      }
      continue;
    }
    const uint8_t b = p[i++];
    if (b < lo_ || b > hi_) {
      failed_ = true;
      return false;
    }
    --need_;
    lo_ = 0x80;
    hi_ = 0xBF;
  }
  return true;
}
}  // namespace lionet::websocket
