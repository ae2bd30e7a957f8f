// lionet/kafka/codec.h: the Kafka protocol's primitive types (big-endian integers, zig-zag
// varints, strings, bytes, arrays) read from one bounded frame and written to a buffer.
//
// Owns: Reader (bounds-checked decoding with a sticky error) and Writer. Must not: know any
// request or response (requests.h, broker.cc), allocate while reading (views into the frame),
// or throw on bad input.
//
// Reader contract: every read checks the bytes left in the frame; the first failure (a length
// or count past the frame, a negative length where null is not allowed, a varint longer than
// its type) records a reason, and from then on every read returns 0/empty. Callers check ok()
// once at the end (and inside loops, to stop early), so a malformed frame costs no more than
// its size. Array counts are checked against the bytes left (every element takes at least
// one byte), so a forged count cannot make a caller reserve memory the frame does not back.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace lionet::kafka {

class Reader {
 public:
  explicit Reader(std::string_view frame) noexcept : p_(frame.data()), end_(frame.data() + frame.size()) {}

  bool ok() const noexcept { return error_ == nullptr; }
  const char* error() const noexcept { return error_ ? error_ : ""; }
  std::size_t remaining() const noexcept { return static_cast<std::size_t>(end_ - p_); }
  bool at_end() const noexcept { return p_ == end_; }
  const char* position() const noexcept { return p_; }
  // Records the first failure; later reads return 0/empty.
  void fail(const char* why) noexcept;

  int8_t i8() noexcept;
  int16_t i16() noexcept;
  int32_t i32() noexcept;
  int64_t i64() noexcept;
  uint32_t u32() noexcept;
  bool boolean() noexcept { return i8() != 0; }
  int32_t varint() noexcept;  // zig-zag, at most 5 bytes
  int64_t varlong() noexcept;  // zig-zag, at most 10 bytes
  // Flexible versions (KIP-482): an unsigned varint (at most 5 bytes), COMPACT_BYTES
  // (uvarint length + 1; 0, null, is an error), and a tagged-field section, skipped.
  uint32_t uvarint32() noexcept { return static_cast<uint32_t>(uvarint(5)); }
  std::string_view compact_bytes() noexcept;
  void skip_tagged_fields() noexcept;

  std::string_view raw(std::size_t n) noexcept;
  // STRING: int16 length (negative: error).
  std::string_view string() noexcept;
  // NULLABLE_STRING: int16 length, -1 = null.
  std::optional<std::string_view> nullable_string() noexcept;
  // NULLABLE_BYTES: int32 length, -1 = null.
  std::optional<std::string_view> nullable_bytes() noexcept;
  // BYTES: int32 length (negative, null included: error).
  std::string_view bytes() noexcept;
  // ARRAY count: int32; -1 (null) only when allow_null (then -1 is returned); checked against
  // remaining() times min_element_bytes.
  int32_t array_count(bool allow_null = false, std::size_t min_element_bytes = 1) noexcept;

 private:
  bool need(std::size_t n) noexcept;
  uint64_t uvarint(int max_bytes) noexcept;
  // The n bytes after a length n, failing with `negative` for a negative n; nullable: -1 is
  // null.
  std::string_view sized(int32_t n, const char* negative) noexcept;
  std::optional<std::string_view> nullable(int32_t n, const char* negative) noexcept;

  const char* p_;
  const char* end_;
  const char* error_ = nullptr;
};

class Writer {
 public:
  explicit Writer(std::string& out) noexcept : out_(out) {}

  void i8(int8_t v) { out_.push_back(static_cast<char>(v)); }
  void i16(int16_t v);
  void i32(int32_t v);
  void i64(int64_t v);
  void u32(uint32_t v);
  void boolean(bool v) { i8(v ? 1 : 0); }
  void varint(int32_t v);
  void varlong(int64_t v);
  // Flexible versions: unsigned varint, COMPACT_NULLABLE_STRING, COMPACT_BYTES, and an empty
  // tagged-field section.
  void uvarint(uint32_t v);
  void compact_nullable_string(std::optional<std::string_view> s);
  void compact_bytes(std::string_view s);
  void no_tagged_fields() { i8(0); }
  void raw(std::string_view s) { out_.append(s); }
  void string(std::string_view s);
  void nullable_string(std::optional<std::string_view> s);
  void nullable_bytes(std::optional<std::string_view> s);
  void bytes(std::string_view s) { nullable_bytes(s); }
  void array_count(int32_t n) { i32(n); }

  // A 4-byte slot filled in later (sizes, CRCs): returns its position in the buffer.
  std::size_t reserve_i32();
  void patch_i32(std::size_t at, int32_t v) noexcept;
  void patch_u32(std::size_t at, uint32_t v) noexcept;
  std::size_t size() const noexcept { return out_.size(); }
  std::string& buffer() noexcept { return out_; }

 private:
  std::string& out_;
};

}  // namespace lionet::kafka
