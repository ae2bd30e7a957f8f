// lionet/http/chunked_decoder.h: lionet::http::ChunkedDecoder, an incremental decoder of the
// chunked transfer coding (RFC 9112 section 7.1), usable on its own (the server's request
// bodies, the client's response bodies, the libFuzzer target tests/fuzz/chunked_fuzz.cc).
//
// Owns: the framing state between calls. Must not: allocate, copy data it does not have to
// (next() returns the data bytes in place), or accept anything ambiguous.
//
// Strictness (the point of writing our own; see README.md "Why not http-parser"):
//   - every line ends in CRLF; a bare LF or bare CR is an error;
//   - chunk-size is 1*HEXDIG (no sign, no 0x, no whitespace before it), at most 16 digits, and
//     the running body total may not pass Limits::max_body (then the status is 413);
//   - chunk extensions (`;name=value`, also quoted) are accepted and skipped, but only after
//     optional whitespace and a ';', and the whole size line is bounded by max_line;
//   - trailer fields are checked (token name, ':' , field characters, no obs-fold), bounded by
//     max_trailer_bytes, and discarded (RFC 9112 7.1.2 lets a recipient drop them).
// Any violation is final: status() == kError and error_status() is the HTTP status to answer
// with (400, or 413 for a body over the limit). The connection must then be closed, since the
// position of the next message is unknown.
#pragma once

#include <cstddef>
#include <cstdint>

namespace lionet::http {

class ChunkedDecoder {
 public:
  struct Limits {
    uint64_t max_body = UINT64_MAX;  // sum of chunk sizes
    size_t max_line = 4096;  // one chunk-size line with its extensions
    size_t max_trailer_bytes = 16384;  // the whole trailer section
  };
  enum class Status : uint8_t { kNeedMore, kDone, kError };
  struct Step {
    size_t consumed = 0;  // input bytes used (framing and data)
    const char* data = nullptr;  // body bytes, in place inside the input (may be none)
    size_t data_size = 0;
  };

  ChunkedDecoder() = default;
  explicit ChunkedDecoder(Limits limits) noexcept : limits_(limits) {}
  void reset() noexcept;
  void set_limits(Limits limits) noexcept { limits_ = limits; }

  // Consumes framing from in[0..n) until it reaches data, the end of the body, or the end of
  // the input; returns the data span it reached (at most up to the end of the current chunk)
  // and how much input it used. Call again with the unconsumed rest. After kDone, the bytes
  // after `consumed` belong to the next message.
  // max_data caps the data span returned (framing is consumed regardless).
  Step next(const char* in, size_t n, size_t max_data = SIZE_MAX) noexcept;
  // Convenience: decodes from in and copies data into out (up to out_cap bytes).
  // Returns {consumed, produced}.
  struct CopyStep {
    size_t consumed = 0;
    size_t produced = 0;
  };
  CopyStep decode(const char* in, size_t n, char* out, size_t out_cap) noexcept;

  Status status() const noexcept { return status_; }
  bool done() const noexcept { return status_ == Status::kDone; }
  bool failed() const noexcept { return status_ == Status::kError; }
  int error_status() const noexcept { return error_status_; }
  const char* error_reason() const noexcept { return error_reason_; }
  uint64_t body_size() const noexcept { return total_; }

 private:
  enum class State : uint8_t {
    kSizeStart,
    kSize,
    kExtBws,
    kExt,
    kExtQuoted,
    kExtQuotedEscape,
    kSizeLf,
    kData,
    kDataCr,
    kDataLf,
    kTrailerStart,
    kTrailerName,
    kTrailerValue,
    kTrailerLf,
    kFinalLf,
    kDone,
    kError,
  };
  void fail(int status, const char* reason) noexcept;
  // One framing byte; false on error.
  bool framing_byte(char c) noexcept;

  Limits limits_;
  State state_ = State::kSizeStart;
  Status status_ = Status::kNeedMore;
  int error_status_ = 0;
  const char* error_reason_ = "";
  uint64_t chunk_left_ = 0;  // data bytes left in the current chunk (also the size being read)
  uint64_t total_ = 0;
  size_t line_bytes_ = 0;  // bytes of the current size line
  size_t trailer_bytes_ = 0;  // bytes of the trailer section so far
  int size_digits_ = 0;
};
}  // namespace lionet::http
