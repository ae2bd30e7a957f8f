// lionet/websocket/utf8.h: lionet::websocket::Utf8Validator, an incremental UTF-8 checker: feed
// a text message in any pieces (fragments, partial reads) and it says "invalid" at the first
// byte that cannot be part of well-formed UTF-8 (RFC 3629: no overlong forms, no surrogates,
// nothing above U+10FFFF), and whether the text ends on a character boundary.
//
// Owns: a few bytes of state. Must not allocate or look at more than it is given. An ASCII run
// is skipped 8 bytes at a time; other bytes go through RFC 3629's table one at a time.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>

namespace lionet::websocket {

class Utf8Validator {
 public:
  // False once any byte so far is invalid (and from then on).
  bool feed(const char* p, size_t n) noexcept;
  bool feed(std::string_view s) noexcept { return feed(s.data(), s.size()); }
  // The bytes so far are valid and end on a character boundary.
  bool complete() const noexcept { return !failed_ && need_ == 0; }
  bool failed() const noexcept { return failed_; }
  void reset() noexcept { *this = Utf8Validator(); }

 private:
  uint8_t need_ = 0;  // continuation bytes still expected for the current character
  uint8_t lo_ = 0x80, hi_ = 0xBF;  // the range of the next continuation byte
  bool failed_ = false;
};

// Whole-string check.
inline bool valid_utf8(std::string_view s) noexcept {
  Utf8Validator v;
  return v.feed(s) && v.complete();
}
}  // namespace lionet::websocket
