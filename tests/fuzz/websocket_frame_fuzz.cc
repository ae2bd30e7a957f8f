// libFuzzer target for the WebSocket receive side (lionet::websocket::detail::FrameReader and
// the header parser, masking and UTF-8 under it, and the permessage-deflate inflate path). The
// first byte picks the role (0x80: server, masked frames expected), whether permessage-deflate
// was agreed (0x40: RSV1 marks compressed messages, inflated under the message limit) and the
// piece size (0x3F); the rest is the wire. The same bytes are read three
// ways - whole, in pieces, and in pieces with large payloads read straight into the message
// (the Socket's direct path) - and every way must give the same events (kind, code, text,
// message type and bytes). Every text message delivered must be valid UTF-8, no message may
// exceed the limit, and nothing follows a close or a failure.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "lionet/websocket/detail/frame_reader.h"
#include "lionet/websocket/utf8.h"

namespace {
using lionet::websocket::Message;
using lionet::websocket::detail::FrameReader;
using lionet::websocket::detail::ReadEvent;

constexpr uint64_t kMaxFrame = 1 << 16;
constexpr uint64_t kMaxMessage = 1 << 17;

std::string describe(const ReadEvent& ev, const Message& m) {
  std::string s(1, static_cast<char>('0' + ev.kind));
  s += std::to_string(ev.code) + ":" + std::string(ev.text);
  if (ev.kind == ReadEvent::kMessage) {
    if (m.data.size() > kMaxMessage) std::abort();
    if (m.is_text() && !lionet::websocket::valid_utf8(m.data)) std::abort();
    s += (m.is_text() ? "T" : "B") + m.data;
  }
  return s;
}

std::vector<std::string> read_all(const std::string& in, bool server, bool deflate, size_t step, bool direct) {
  FrameReader r(server, kMaxFrame, kMaxMessage);
  if (deflate && !r.enable_deflate(15, false)) std::abort();
  Message m;
  std::vector<std::string> out;
  size_t pos = 0, avail = std::min(step, in.size());
  for (size_t guard = 0; guard < 4 * in.size() + 64; ++guard) {
    if (direct && pos == avail && avail < in.size()) {
      size_t room = 0;
      if (char* p = r.direct_target(m, &room)) {
        size_t k = std::min({room, step, in.size() - pos});
        std::memcpy(p, in.data() + pos, k);
        r.direct_commit(m, k);
        pos += k;
        avail = pos;
      }
    }
    size_t used = 0;
    ReadEvent ev = r.next(in.data() + pos, avail - pos, &used, m);
    pos += used;
    if (ev.kind != ReadEvent::kNeedMore) {
      out.push_back(describe(ev, m));
      if (ev.kind == ReadEvent::kClose || ev.kind == ReadEvent::kFail) {
        if (!r.finished()) std::abort();
        ReadEvent again = r.next(in.data() + pos, in.size() - pos, &used, m);
        if (again.kind != ev.kind || again.code != ev.code) std::abort();  // the end sticks
        break;
      }
      continue;
    }
    if (avail == in.size()) break;
    avail = std::min(in.size(), avail + step);
  }
  return out;
}
}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  const bool server = (data[0] & 0x80) != 0;
  const bool deflate = (data[0] & 0x40) != 0;
  const size_t step = (data[0] & 0x3F) + 1;
  std::string in(reinterpret_cast<const char*>(data) + 1, size - 1);
  auto whole = read_all(in, server, deflate, in.size() ? in.size() : 1, false);
  auto pieces = read_all(in, server, deflate, step, false);
  auto direct = read_all(in, server, deflate, step, true);
  if (whole != pieces || whole != direct) std::abort();
  return 0;
}
