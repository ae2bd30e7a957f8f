// libFuzzer target for lionet::http::parse_response_head, the HTTP/1 response-head parser that
// the Client, the Proxy and websocket::connect run on whatever an upstream sends. The first
// byte picks the piece size (1..16); the rest is the wire. Heads are parsed one after another,
// as the Client and the Proxy skip interim 1xx answers (each next head from scan_from 0). Each
// head is parsed four ways: whole; in growing pieces, each a fresh exact-size copy of the prefix
// (the Client's buffer may move between reads), with scan_from = the buffer's size at the
// previous kNeedMore as every caller passes it, into one ResponseHead reused throughout (the
// Proxy reuses its connection's); cut to the head alone; and with other bytes appended after it.
// Checks: kNeedMore exactly when there is no CRLF CRLF; all four ways give the same verdict and,
// after kDone, the same size, status, version, reason, fields (each at the same offset),
// keep_alive and valid_fields; after kDone, size ends right after the first CRLF CRLF, the status
// is the three digits (100..999), version_minor is 0 or 1, the reason and every field lie inside
// the input, one field per line in order (name up to the first colon, no whitespace, CR, LF or
// NUL in it; value OWS-trimmed, no CR, LF or NUL), keep_alive follows RFC 9112 9.3 over every
// Connection field, and valid_fields is true exactly when Response::add_header takes every field
// (the Proxy relays them with add_checked_header on that verdict alone).
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <string_view>

#include "lionet/http/headers.h"
#include "lionet/http/response.h"
#include "lionet/http/response_head.h"

namespace {
using lionet::http::HeadParse;
using lionet::http::parse_response_head;
using lionet::http::ResponseHead;

constexpr std::string_view kBlank = "\r\n\r\n";
// Appended after a complete head: another head, a blank line, NUL and obs-text.
constexpr std::string_view kTail("\r\n\r\nHTTP/1.1 200 OK\r\nX: y\r\n\r\n\0\xff garbage", 39);

// An exact-size heap copy (no spare capacity, no terminator): ASan sees a read one byte past it.
class Bytes {
 public:
  explicit Bytes(std::string_view s) : size_(s.size()), data_(new char[s.size()]) {
    if (size_ != 0) std::memcpy(data_.get(), s.data(), size_);
  }
  std::string_view view() const noexcept { return {data_.get(), size_}; }

 private:
  size_t size_;
  std::unique_ptr<char[]> data_;
};

bool is_ows(char c) { return c == ' ' || c == '\t'; }

// v lies inside `within` (the same buffer).
void check_inside(std::string_view v, std::string_view within) {
  if (v.data() < within.data() || v.data() + v.size() > within.data() + within.size()) std::abort();
}

// v is `within` OWS-trimmed: inside it, no OWS at either end, only OWS around it (when v is
// empty, `within` is all OWS).
void check_trimmed(std::string_view v, std::string_view within) {
  if (v.empty()) {
    if (!std::all_of(within.begin(), within.end(), is_ows)) std::abort();
    return;
  }
  check_inside(v, within);
  if (is_ows(v.front()) || is_ows(v.back())) std::abort();
  const size_t before = static_cast<size_t>(v.data() - within.data());
  const std::string_view lead = within.substr(0, before), trail = within.substr(before + v.size());
  if (!std::all_of(lead.begin(), lead.end(), is_ows) || !std::all_of(trail.begin(), trail.end(), is_ows)) std::abort();
}

// The invariants of a kDone result for `buf`, the bytes it was parsed from.
void check_done(const ResponseHead& h, std::string_view buf) {
  const size_t n = h.size;
  if (n < 16 || n > buf.size()) std::abort();  // "HTTP/1.1 200\r\n\r\n" is the shortest head
  if (buf.find(kBlank) != n - kBlank.size()) std::abort();
  const std::string_view head = buf.substr(0, n);
  if (head.substr(0, 7) != "HTTP/1." || (h.version_minor != 0 && h.version_minor != 1) ||
      head[7] != '0' + h.version_minor || head[8] != ' ')
    std::abort();
  if (h.status < 100 || h.status > 999) std::abort();
  for (int i = 9, d = 100; i < 12; ++i, d /= 10)
    if (head[i] < '0' || head[i] > '9' || head[i] - '0' != h.status / d % 10) std::abort();
  const size_t line_end = head.find("\r\n");
  if (line_end < 12 || (line_end > 12 && head[12] != ' ')) std::abort();
  check_trimmed(h.reason, head.substr(12, line_end - 12));
  // No CR, LF or NUL in the status line (a bare one would be a line end to another parser).
  if (head.substr(0, line_end).find_first_of(std::string_view("\r\n\0", 3)) != std::string_view::npos) std::abort();

  // One field per line between the status line and the blank line, in order.
  size_t lines = 0;
  for (size_t p = head.find("\r\n"); p != std::string_view::npos; p = head.find("\r\n", p + 2)) ++lines;
  if (h.headers.size() != lines - 2) std::abort();
  lionet::http::Response builder;
  bool close = false, keep = false, all_taken = true;
  size_t at = line_end + 2;
  for (const auto& f : h.headers) {
    const size_t eol = head.find("\r\n", at);
    const std::string_view line = head.substr(at, eol - at);
    if (f.name.empty() || f.name.data() != line.data() || f.name.size() >= line.size() || line[f.name.size()] != ':')
      std::abort();
    if (f.name.find_first_of(std::string_view(" \t\r\n\0:", 6)) != std::string_view::npos) std::abort();
    check_trimmed(f.value, line.substr(f.name.size() + 1));
    if (f.value.find_first_of(std::string_view("\r\n\0", 3)) != std::string_view::npos) std::abort();
    if (lionet::http::iequals(f.name, "connection")) {
      close |= lionet::http::has_token(f.value, "close");
      keep |= lionet::http::has_token(f.value, "keep-alive");
    }
    // The differential: the parser's verdict against the response builder's own rule.
    all_taken &= builder.add_header(f.name, f.value);
    at = eol + 2;
  }
  if (at != n - 2) std::abort();
  if (h.keep_alive != (!close && (h.version_minor == 1 || keep))) std::abort();
  if (h.valid_fields != all_taken) std::abort();
}

// What must be equal between two parses of the same bytes: offsets, not addresses.
std::string describe(HeadParse st, const ResponseHead& h, std::string_view buf) {
  std::string s(1, static_cast<char>('0' + static_cast<int>(st)));
  if (st != HeadParse::kDone) return s;  // the head is unspecified then
  auto add = [&](std::string_view v) {
    s += v.empty() ? std::string("-") : std::to_string(v.data() - buf.data());
    s += '+' + std::to_string(v.size()) + ' ';
  };
  s += ' ' + std::to_string(h.size) + ' ' + std::to_string(h.status) + ' ' + std::to_string(h.version_minor) + ' ';
  s += h.keep_alive ? 'K' : 'k';
  s += h.valid_fields ? 'V' : 'v';
  add(h.reason);
  s += std::to_string(h.headers.size()) + ':';
  for (const auto& f : h.headers) {
    add(f.name);
    add(f.value);
  }
  return s;
}
}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const size_t step = (data[0] % 16) + 1;
  const std::string_view input(reinterpret_cast<const char*>(data) + 1, size - 1);
  ResponseHead reused;  // the pieces' head, reused from head to head
  size_t pos = 0;
  for (int n = 0; n < 64 && pos < input.size(); ++n) {
    const Bytes rest(input.substr(pos));
    const std::string_view buf = rest.view();
    ResponseHead whole;
    const HeadParse a = parse_response_head(buf, whole);
    const size_t blank = buf.find(kBlank);
    if ((a == HeadParse::kNeedMore) != (blank == std::string_view::npos)) std::abort();
    if (a == HeadParse::kDone) check_done(whole, buf);
    const std::string expected = describe(a, whole, buf);

    // The same bytes in growing pieces, each a new copy, scan_from as the callers pass it.
    std::unique_ptr<Bytes> piece;
    HeadParse b = HeadParse::kNeedMore;
    size_t scan = 0;
    for (size_t have = std::min(step, buf.size());; have = std::min(buf.size(), have + step)) {
      piece = std::make_unique<Bytes>(buf.substr(0, have));
      b = parse_response_head(piece->view(), reused, scan);
      if (b != HeadParse::kNeedMore || have == buf.size()) break;
      scan = have;
    }
    if (b != a) std::abort();
    if (b == HeadParse::kDone) check_done(reused, piece->view());
    if (describe(b, reused, piece->view()) != expected) std::abort();
    if (a == HeadParse::kNeedMore) break;

    // Nothing after the blank line counts: the head alone, and the head followed by other bytes.
    const std::string_view head = buf.substr(0, blank + kBlank.size());
    std::string more(head);
    more += kTail;
    for (const Bytes& c : {Bytes(head), Bytes(more)}) {
      ResponseHead h;
      const HeadParse st = parse_response_head(c.view(), h);
      if (st == HeadParse::kDone) check_done(h, c.view());
      if (describe(st, h, c.view()) != expected) std::abort();
    }
    if (a == HeadParse::kError) break;  // every caller gives up on the connection
    pos += whole.size;
  }
  return 0;
}
