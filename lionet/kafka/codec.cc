// lionet/kafka/codec.cc: Reader and Writer (see codec.h).
#include "lionet/kafka/codec.h"

#include <cstring>

namespace lionet::kafka {

void Reader::fail(const char* why) noexcept {
  if (!error_) error_ = why;
  p_ = end_;
}

bool Reader::need(std::size_t n) noexcept {
  if (error_) return false;
  if (remaining() < n) {
    fail("a field runs past the end of the frame");
    return false;
  }
  return true;
}

namespace {
uint64_t load_be(const char* p, int n) noexcept {
  uint64_t v = 0;
  for (int i = 0; i < n; ++i) v = (v << 8) | static_cast<unsigned char>(p[i]);
  return v;
}
}  // namespace

int8_t Reader::i8() noexcept {
  if (!need(1)) return 0;
  return static_cast<int8_t>(*p_++);
}
int16_t Reader::i16() noexcept {
  if (!need(2)) return 0;
  const auto v = static_cast<int16_t>(static_cast<uint16_t>(load_be(p_, 2)));
  p_ += 2;
  return v;
}
int32_t Reader::i32() noexcept { return static_cast<int32_t>(u32()); }
uint32_t Reader::u32() noexcept {
  if (!need(4)) return 0;
  const auto v = static_cast<uint32_t>(load_be(p_, 4));
  p_ += 4;
  return v;
}
int64_t Reader::i64() noexcept {
  if (!need(8)) return 0;
  const auto v = static_cast<int64_t>(load_be(p_, 8));
  p_ += 8;
  return v;
}

uint64_t Reader::uvarint(int max_bytes) noexcept {
  uint64_t v = 0;
  for (int i = 0; i < max_bytes; ++i) {
    if (!need(1)) return 0;
    const auto b = static_cast<unsigned char>(*p_++);
    v |= static_cast<uint64_t>(b & 0x7f) << (7 * i);
    if (!(b & 0x80)) return v;
  }
  fail("a varint longer than its type");
  return 0;
}
int32_t Reader::varint() noexcept {
  const auto u = static_cast<uint32_t>(uvarint(5));
  return static_cast<int32_t>((u >> 1) ^ (~(u & 1) + 1));
}
int64_t Reader::varlong() noexcept {
  const uint64_t u = uvarint(10);
  return static_cast<int64_t>((u >> 1) ^ (~(u & 1) + 1));
}

std::string_view Reader::compact_bytes() noexcept {
  const uint32_t n = uvarint32();
  if (!ok()) return {};
  if (n == 0) {
    fail("a null where bytes are required");
    return {};
  }
  return raw(n - 1);
}
void Reader::skip_tagged_fields() noexcept {
  const uint32_t count = uvarint32();
  for (uint32_t i = 0; i < count && ok(); ++i) {
    uvarint32();  // tag
    raw(uvarint32());
  }
}

std::string_view Reader::raw(std::size_t n) noexcept {
  if (!need(n)) return {};
  std::string_view s(p_, n);
  p_ += n;
  return s;
}
std::string_view Reader::sized(int32_t n, const char* negative) noexcept {
  if (n < 0) {
    fail(negative);
    return {};
  }
  return raw(static_cast<std::size_t>(n));
}
std::string_view Reader::string() noexcept { return sized(i16(), "a negative string length"); }
std::optional<std::string_view> Reader::nullable(int32_t n, const char* negative) noexcept {
  if (n == -1 || !ok()) return std::nullopt;
  const std::string_view s = sized(n, negative);
  if (!ok()) return std::nullopt;
  return s;
}
std::optional<std::string_view> Reader::nullable_string() noexcept {
  return nullable(i16(), "a negative string length");
}
std::optional<std::string_view> Reader::nullable_bytes() noexcept { return nullable(i32(), "a negative bytes length"); }
std::string_view Reader::bytes() noexcept { return sized(i32(), "a negative bytes length"); }
int32_t Reader::array_count(bool allow_null, std::size_t min_element_bytes) noexcept {
  const int32_t n = i32();
  if (!ok()) return 0;
  if (n == -1 && allow_null) return -1;
  if (n < 0) {
    fail("a negative array count");
    return 0;
  }
  if (static_cast<uint64_t>(n) * min_element_bytes > remaining()) {
    fail("an array count larger than the frame can hold");
    return 0;
  }
  return n;
}

namespace {
void store_be(std::string& out, uint64_t v, int n) {
  char b[8];
  for (int i = n - 1; i >= 0; --i, v >>= 8) b[i] = static_cast<char>(v & 0xff);
  out.append(b, static_cast<std::size_t>(n));
}
void put_uvarint(std::string& out, uint64_t u) {
  while (u >= 0x80) {
    out.push_back(static_cast<char>((u & 0x7f) | 0x80));
    u >>= 7;
  }
  out.push_back(static_cast<char>(u));
}
}  // namespace

void Writer::i16(int16_t v) { store_be(out_, static_cast<uint16_t>(v), 2); }
void Writer::i32(int32_t v) { store_be(out_, static_cast<uint32_t>(v), 4); }
void Writer::u32(uint32_t v) { store_be(out_, v, 4); }
void Writer::i64(int64_t v) { store_be(out_, static_cast<uint64_t>(v), 8); }
void Writer::varint(int32_t v) {
  put_uvarint(out_, static_cast<uint32_t>((static_cast<uint32_t>(v) << 1) ^ static_cast<uint32_t>(v >> 31)));
}
void Writer::varlong(int64_t v) { put_uvarint(out_, (static_cast<uint64_t>(v) << 1) ^ static_cast<uint64_t>(v >> 63)); }
void Writer::uvarint(uint32_t v) { put_uvarint(out_, v); }
void Writer::compact_nullable_string(std::optional<std::string_view> s) {
  if (!s) return uvarint(0);
  uvarint(static_cast<uint32_t>(s->size() + 1));
  out_.append(*s);
}
void Writer::compact_bytes(std::string_view s) {
  uvarint(static_cast<uint32_t>(s.size() + 1));
  out_.append(s);
}
void Writer::string(std::string_view s) {
  i16(static_cast<int16_t>(s.size()));
  out_.append(s);
}
void Writer::nullable_string(std::optional<std::string_view> s) {
  if (!s) return i16(-1);
  string(*s);
}
void Writer::nullable_bytes(std::optional<std::string_view> s) {
  if (!s) return i32(-1);
  i32(static_cast<int32_t>(s->size()));
  out_.append(*s);
}
std::size_t Writer::reserve_i32() {
  const std::size_t at = out_.size();
  out_.append(4, '\0');
  return at;
}
void Writer::patch_u32(std::size_t at, uint32_t v) noexcept {
  for (int i = 3; i >= 0; --i, v >>= 8) out_[at + static_cast<std::size_t>(i)] = static_cast<char>(v & 0xff);
}
void Writer::patch_i32(std::size_t at, int32_t v) noexcept { patch_u32(at, static_cast<uint32_t>(v)); }

}  // namespace lionet::kafka
