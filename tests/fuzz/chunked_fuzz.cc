// libFuzzer target for lionet::http::ChunkedDecoder: decodes the input whole and in pieces
// (piece size from the first byte, output buffer size from the second) with both next() and
// the copying decode(), and checks that every way gives the same body, status and end position,
// and that the body never exceeds the limit.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>

#include "lionet/http/chunked_decoder.h"

namespace {
using lionet::http::ChunkedDecoder;

struct Outcome {
  ChunkedDecoder::Status status;
  std::string body;
  size_t consumed;
  int error;
};

Outcome by_next(const std::string& in, size_t step, const ChunkedDecoder::Limits& l) {
  ChunkedDecoder d(l);
  Outcome o{};
  size_t avail = std::min(step, in.size()), pos = 0;
  for (size_t guard = 0; guard < 4 * in.size() + 16; ++guard) {
    auto s = d.next(in.data() + pos, avail - pos);
    if (s.data_size && (s.data < in.data() + pos || s.data + s.data_size > in.data() + avail)) std::abort();
    o.body.append(s.data, s.data_size);
    pos += s.consumed;
    if (d.done() || d.failed()) break;
    if (s.consumed == 0) {
      if (avail == in.size()) break;
      avail = std::min(in.size(), avail + step);
    }
  }
  o.status = d.status();
  o.consumed = pos;
  o.error = d.error_status();
  if (d.body_size() > l.max_body) std::abort();
  return o;
}

Outcome by_copy(const std::string& in, size_t out_cap, const ChunkedDecoder::Limits& l) {
  ChunkedDecoder d(l);
  Outcome o{};
  std::string out(out_cap, '\0');
  size_t pos = 0;
  for (size_t guard = 0; guard < 4 * in.size() + 16; ++guard) {
    auto cs = d.decode(in.data() + pos, in.size() - pos, out.data(), out_cap);
    if (cs.produced > out_cap) std::abort();
    o.body.append(out.data(), cs.produced);
    pos += cs.consumed;
    if (d.done() || d.failed() || (cs.consumed == 0 && cs.produced == 0)) break;
  }
  o.status = d.status();
  o.consumed = pos;
  o.error = d.error_status();
  return o;
}
}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 2) return 0;
  size_t step = (data[0] % 32) + 1;
  size_t out_cap = (data[1] % 64) + 1;
  std::string in(reinterpret_cast<const char*>(data) + 2, size - 2);
  ChunkedDecoder::Limits l;
  l.max_body = 4096;
  l.max_line = 64;
  l.max_trailer_bytes = 256;
  Outcome a = by_next(in, in.size() ? in.size() : 1, l);
  Outcome b = by_next(in, step, l);
  Outcome c = by_copy(in, out_cap, l);
  if (a.status != b.status || a.body != b.body || a.error != b.error) std::abort();
  if (a.status != c.status || a.body != c.body || a.error != c.error) std::abort();
  if (a.status != ChunkedDecoder::Status::kNeedMore && (a.consumed != b.consumed || a.consumed != c.consumed))
    std::abort();
  if (a.status == ChunkedDecoder::Status::kError && a.error != 400 && a.error != 413) std::abort();
  return 0;
}
