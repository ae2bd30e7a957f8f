// libFuzzer target for lionet/syslog: parse() and to_json() on the input as one message, and
// StreamFramer over the input as a TCP stream, whole and in pieces (piece size from the first
// byte). Checks: a malformed message keeps the whole input (minus trailing LF/CR/NUL) as its
// msg; every view parse() returns lies inside the input; the JSON value is one line of printable
// ASCII (bytes >= 0x80 only as valid UTF-8) that starts with {"format": and ends with };
// the framer gives the same messages however the stream is cut, none longer than its limit.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>
#include <vector>

#include "lionet/syslog/framing.h"
#include "lionet/syslog/message.h"

namespace {
using namespace lionet::syslog;

void check_inside(std::string_view in, std::string_view v) {
  if (v.empty()) return;
  if (v.data() < in.data() || v.data() + v.size() > in.data() + in.size()) std::abort();
}

std::vector<std::string> frame(std::string_view in, std::size_t step, std::size_t max, bool& bad) {
  StreamFramer f(max);
  std::vector<std::string> out;
  auto on = [&](std::string_view m, bool t) {
    if (m.size() > max) std::abort();
    out.push_back(std::string(m) + (t ? "\x01T" : ""));
  };
  for (std::size_t i = 0; i < in.size(); i += step) f.feed(in.substr(i, step), on);
  f.finish(on);
  bad = f.bad();
  return out;
}
}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view in(reinterpret_cast<const char*>(data), size);
  const Message m = parse(in, 1764104737000);
  for (std::string_view v : {m.host, m.app, m.procid, m.msgid, m.structured_data, m.msg}) check_inside(in, v);
  if (m.malformed) {
    std::string_view trimmed = in;
    while (!trimmed.empty() && (trimmed.back() == '\n' || trimmed.back() == '\r' || trimmed.back() == '\0'))
      trimmed.remove_suffix(1);
    if (m.msg != trimmed || m.format != Format::kRaw) std::abort();
  } else if (m.facility < 0 || m.facility > 23 || m.severity < 0 || m.severity > 7) {
    std::abort();
  }
  std::string json;
  to_json(m, "127.0.0.1", false, json);
  if (json.rfind("{\"format\":", 0) != 0 || json.back() != '}') std::abort();
  for (unsigned char c : json)
    if (c < 0x20) std::abort();  // control bytes escaped: the value is one line

  bool bad_whole = false, bad_cut = false;
  const std::size_t step = size ? 1 + data[0] % 17 : 1;
  const auto whole = frame(in, in.size() ? in.size() : 1, 600, bad_whole);
  const auto cut = frame(in, step, 600, bad_cut);
  if (bad_whole != bad_cut || (!bad_whole && whole != cut)) std::abort();
  return 0;
}
