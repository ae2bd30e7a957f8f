// libFuzzer target for lionet::http::RequestParser: the input is fed in pieces whose sizes come
// from the input itself (first byte), each call seeing a freshly copied buffer (the server may
// move its buffer between reads), then pipelined requests are parsed one after another. Checks
// the parser's own invariants: kDone only with head_size within the input, views inside the
// input (after kDone, and after a kError that kept the whole head), identical results whatever
// the split.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "lionet/http/request_parser.h"

namespace {
using lionet::http::ParserLimits;
using lionet::http::RequestParser;

void check_inside(std::string_view v, const std::string& buf) {
  if (v.empty()) return;
  // "/" of an absolute-form target without a path is a static string: allowed outside.
  if (v == "/") return;
  if (v.data() < buf.data() || v.data() + v.size() > buf.data() + buf.size()) std::abort();
}

void check_head_inside(const lionet::http::RequestHead& h, const std::string& buf) {
  check_inside(h.method, buf);
  check_inside(h.target, buf);
  check_inside(h.path, buf);
  check_inside(h.query, buf);
  check_inside(h.host, buf);
  for (const auto& f : h.headers) {
    check_inside(f.name, buf);
    check_inside(f.value, buf);
  }
}
}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  size_t step = (data[0] % 16) + 1;
  std::string input(reinterpret_cast<const char*>(data) + 1, size - 1);
  ParserLimits limits;
  limits.max_request_line = 256;
  limits.max_header_bytes = 1024;
  limits.max_headers = 16;
  limits.max_body_bytes = 1 << 20;

  size_t pos = 0;
  RequestParser whole(limits), pieces(limits);
  for (int n = 0; n < 64 && pos < input.size(); ++n) {
    std::string rest = input.substr(pos);
    whole.reset();
    RequestParser::State a = whole.parse(rest.data(), rest.size());
    // Same bytes fed in growing pieces, each time from a new copy.
    pieces.reset();
    RequestParser::State b = RequestParser::State::kNeedMore;
    for (size_t have = std::min(step, rest.size());; have = std::min(rest.size(), have + step)) {
      std::string copy = rest.substr(0, have);
      b = pieces.parse(copy.data(), copy.size());
      if (b != RequestParser::State::kNeedMore || have == rest.size()) break;
    }
    if (b == RequestParser::State::kDone || pieces.head_complete()) pieces.rebind(rest.data());
    if (a != b) std::abort();
    if (a == RequestParser::State::kError) {
      if (whole.error_status() != pieces.error_status()) std::abort();
      if (whole.error_status() < 400 || whole.error_status() > 505) std::abort();
      // A head refused whole (Content-Length over the limit) stays readable, as after kDone.
      if (whole.head_complete() != pieces.head_complete()) std::abort();
      if (whole.head_complete()) {
        if (whole.error_status() != 413 || whole.head_size() > rest.size()) std::abort();
        if (whole.head().content_length <= limits.max_body_bytes) std::abort();
        check_head_inside(whole.head(), rest);
        check_head_inside(pieces.head(), rest);
      }
      break;
    }
    if (a == RequestParser::State::kNeedMore) break;
    if (whole.head_size() != pieces.head_size() || whole.head_size() > rest.size()) std::abort();
    const auto& h = whole.head();
    check_head_inside(h, rest);
    if (h.headers.size() != pieces.head().headers.size()) std::abort();
    if (h.body_kind != pieces.head().body_kind || h.content_length != pieces.head().content_length) std::abort();
    if (h.content_length > limits.max_body_bytes) std::abort();
    size_t advance = whole.head_size();
    if (h.body_kind == lionet::http::BodyKind::kContentLength)
      advance += static_cast<size_t>(std::min<uint64_t>(h.content_length, rest.size()));
    pos += advance;
  }
  return 0;
}
