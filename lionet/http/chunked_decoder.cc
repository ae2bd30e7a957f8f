// lionet/http/chunked_decoder.cc: ChunkedDecoder (the grammar and its strictness are in
// chunked_decoder.h).
#include "lionet/http/chunked_decoder.h"

#include <algorithm>
#include <cstring>

#include "lionet/http/detail/chars.h"

namespace lionet::http {
using detail::hex_value;
using detail::is_field_char;
using detail::is_tchar;

void ChunkedDecoder::reset() noexcept {
  state_ = State::kSizeStart;
  status_ = Status::kNeedMore;
  error_status_ = 0;
  error_reason_ = "";
  chunk_left_ = total_ = 0;
  line_bytes_ = trailer_bytes_ = 0;
  size_digits_ = 0;
}

void ChunkedDecoder::fail(int status, const char* reason) noexcept {
  state_ = State::kError;
  status_ = Status::kError;
  error_status_ = status;
  error_reason_ = reason;
}

bool ChunkedDecoder::framing_byte(char c) noexcept {
  switch (state_) {
    case State::kSizeStart:
    case State::kSize: {
      int h = hex_value(c);
      if (h >= 0) {
        if (++size_digits_ > 16) return fail(400, "chunk size too long"), false;
        chunk_left_ = (chunk_left_ << 4) | static_cast<uint64_t>(h);
        state_ = State::kSize;
        break;
      }
      if (state_ == State::kSizeStart) return fail(400, "chunk size expected"), false;
      if (c == '\r') {
        state_ = State::kSizeLf;
      } else if (c == ';') {
        state_ = State::kExt;
      } else if (c == ' ' || c == '\t') {
        state_ = State::kExtBws;
      } else {
        return fail(400, "bad character after chunk size"), false;
      }
      break;
    }
    case State::kExtBws:  // BWS before the ';' of an extension; nothing else may follow
      if (c == ';') {
        state_ = State::kExt;
      } else if (c != ' ' && c != '\t') {
        return fail(400, "chunk extension without ';'"), false;
      }
      break;
    case State::kExt:  // name, '=', token value, further ';' and BWS: skipped, not interpreted
      if (c == '\r') {
        state_ = State::kSizeLf;
      } else if (c == '"') {
        state_ = State::kExtQuoted;
      } else if (!is_tchar(c) && c != ';' && c != '=' && c != ' ' && c != '\t') {
        return fail(400, "bad character in chunk extension"), false;
      }
      break;
    case State::kExtQuoted:
      if (c == '"') {
        state_ = State::kExt;
      } else if (c == '\\') {
        state_ = State::kExtQuotedEscape;
      } else if (!is_field_char(c)) {
        return fail(400, "bad character in quoted chunk extension"), false;
      }
      break;
    case State::kExtQuotedEscape:
      if (!is_field_char(c)) return fail(400, "bad escape in chunk extension"), false;
      state_ = State::kExtQuoted;
      break;
    case State::kSizeLf:
      if (c != '\n') return fail(400, "chunk size line not ended by CRLF"), false;
      line_bytes_ = 0;
      size_digits_ = 0;
      if (chunk_left_ == 0) {
        state_ = State::kTrailerStart;
      } else {
        if (chunk_left_ > limits_.max_body - total_) return fail(413, "chunked body over the limit"), false;
        total_ += chunk_left_;
        state_ = State::kData;
      }
      return true;  // line_bytes_ already reset
    case State::kDataCr:
      if (c != '\r') return fail(400, "chunk data not followed by CRLF"), false;
      state_ = State::kDataLf;
      break;
    case State::kDataLf:
      if (c != '\n') return fail(400, "chunk data not followed by CRLF"), false;
      state_ = State::kSizeStart;
      chunk_left_ = 0;
      return true;
    case State::kTrailerStart:
      if (c == '\r') {
        state_ = State::kFinalLf;
      } else if (is_tchar(c)) {
        state_ = State::kTrailerName;
      } else {
        return fail(400, "bad trailer field"), false;  // also obs-fold (SP/HTAB first)
      }
      break;
    case State::kTrailerName:
      if (c == ':') {
        state_ = State::kTrailerValue;
      } else if (!is_tchar(c)) {
        return fail(400, "bad trailer field name"), false;
      }
      break;
    case State::kTrailerValue:
      if (c == '\r') {
        state_ = State::kTrailerLf;
      } else if (!is_field_char(c)) {
        return fail(400, "bad character in trailer field"), false;
      }
      break;
    case State::kTrailerLf:
      if (c != '\n') return fail(400, "trailer field not ended by CRLF"), false;
      state_ = State::kTrailerStart;
      break;
    case State::kFinalLf:
      if (c != '\n') return fail(400, "chunked body not ended by CRLF"), false;
      state_ = State::kDone;
      status_ = Status::kDone;
      return true;
    case State::kData:
    case State::kDone:
    case State::kError: return false;  // not framing states; next() never passes bytes here
  }
  if (state_ >= State::kTrailerStart) {
    if (++trailer_bytes_ > limits_.max_trailer_bytes) return fail(400, "trailer section too large"), false;
  } else if (++line_bytes_ > limits_.max_line) {
    return fail(400, "chunk size line too long"), false;
  }
  return true;
}

ChunkedDecoder::Step ChunkedDecoder::next(const char* in, size_t n, size_t max_data) noexcept {
  Step step;
  size_t i = 0;
  while (i < n) {
    if (state_ == State::kData) {
      if (max_data == 0) break;
      size_t take = static_cast<size_t>(std::min<uint64_t>(chunk_left_, std::min(n - i, max_data)));
      step.data = in + i;
      step.data_size = take;
      chunk_left_ -= take;
      i += take;
      if (chunk_left_ == 0) state_ = State::kDataCr;
      break;  // one data span per call
    }
    if (state_ == State::kDone || state_ == State::kError) break;
    if (!framing_byte(in[i])) break;
    ++i;
  }
  step.consumed = i;
  return step;
}

ChunkedDecoder::CopyStep ChunkedDecoder::decode(const char* in, size_t n, char* out, size_t out_cap) noexcept {
  CopyStep cs;
  while (cs.consumed < n && cs.produced < out_cap && !done() && !failed()) {
    Step s = next(in + cs.consumed, n - cs.consumed, out_cap - cs.produced);
    if (s.data_size) std::memcpy(out + cs.produced, s.data, s.data_size);
    cs.produced += s.data_size;
    cs.consumed += s.consumed;
    if (s.consumed == 0) break;
  }
  return cs;
}
}  // namespace lionet::http
