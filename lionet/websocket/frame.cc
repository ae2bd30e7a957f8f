// lionet/websocket/frame.cc: the frame header parser and writer, and masking (see frame.h).
#include "lionet/websocket/frame.h"

#include <cstring>

namespace lionet::websocket {
namespace {
inline bool known_opcode(uint8_t op) noexcept { return op <= 0x2 || (op >= 0x8 && op <= 0xA); }

inline ParseOutcome fail(uint16_t code, const char* reason) noexcept { return {ParseOutcome::kError, code, reason}; }

// The key repeated over 8 bytes, starting at key byte offset % 4.
inline uint64_t key_word(uint32_t mask_key, uint64_t offset, uint8_t r[8]) noexcept {
  uint8_t k[4];
  std::memcpy(k, &mask_key, 4);
  const unsigned s = static_cast<unsigned>(offset & 3);
  for (unsigned i = 0; i < 8; ++i) r[i] = k[(s + i) & 3];
  uint64_t w;
  std::memcpy(&w, r, 8);
  return w;
}
}  // namespace

ParseOutcome parse_frame_header(const uint8_t* p, size_t n, const HeaderRules& rules, FrameHeader* out) noexcept {
  if (n < 2) return {};
  // Every rule that the first two bytes decide is checked before waiting for more: a peer
  // that breaks one hears about it at once.
  const uint8_t b0 = p[0], b1 = p[1];
  if (b0 & (rules.allow_rsv1 ? 0x30 : 0x70)) return fail(1002, "reserved bits set without a negotiated extension");
  const uint8_t op = b0 & 0x0F;
  if (!known_opcode(op)) return fail(1002, "unknown opcode");
  const bool fin = (b0 & 0x80) != 0;
  const bool masked = (b1 & 0x80) != 0;
  const uint8_t len7 = b1 & 0x7F;
  const bool control = (op & 0x8) != 0;
  if (control && !fin) return fail(1002, "fragmented control frame");
  if (control && len7 > kMaxControlPayload) return fail(1002, "control frame payload over 125 bytes");
  if (masked != rules.expect_masked) {
    return fail(1002, rules.expect_masked ? "client frame not masked" : "server frame masked");
  }
  size_t size = 2;
  uint64_t len = len7;
  if (len7 == 126) {
    if (n < 4) return {};
    len = (uint64_t{p[2]} << 8) | p[3];
    size = 4;
  } else if (len7 == 127) {
    if (n < 10) return {};
    len = 0;
    for (int i = 2; i < 10; ++i) len = (len << 8) | p[i];
    if (len >> 63) return fail(1002, "64-bit payload length with the most significant bit set");
    size = 10;
  }
  if (!control && len > rules.max_payload) return fail(1009, "frame larger than the limit");
  uint32_t key = 0;
  if (masked) {
    if (n < size + 4) return {};
    std::memcpy(&key, p + size, 4);
    size += 4;
  }
  out->fin = fin;
  out->opcode = static_cast<Opcode>(op);
  out->masked = masked;
  out->rsv1 = (b0 & 0x40) != 0;
  out->mask_key = key;
  out->payload_size = len;
  out->header_size = size;
  return {ParseOutcome::kOk, 0, ""};
}

size_t write_frame_header(uint8_t* out, bool fin, Opcode opcode, uint64_t payload_size, bool masked, uint32_t mask_key,
                          bool rsv1) noexcept {
  out[0] = static_cast<uint8_t>((fin ? 0x80 : 0) | (rsv1 ? 0x40 : 0) | static_cast<uint8_t>(opcode));
  const uint8_t m = masked ? 0x80 : 0;
  size_t size;
  if (payload_size <= 125) {
    out[1] = static_cast<uint8_t>(m | payload_size);
    size = 2;
  } else if (payload_size <= 0xFFFF) {
    out[1] = m | 126;
    out[2] = static_cast<uint8_t>(payload_size >> 8);
    out[3] = static_cast<uint8_t>(payload_size);
    size = 4;
  } else {
    out[1] = m | 127;
    for (int i = 0; i < 8; ++i) out[2 + i] = static_cast<uint8_t>(payload_size >> (56 - 8 * i));
    size = 10;
  }
  if (masked) {
    std::memcpy(out + size, &mask_key, 4);
    size += 4;
  }
  return size;
}

void apply_mask(char* p, size_t n, uint32_t mask_key, uint64_t offset) noexcept {
  uint8_t r[8];
  const uint64_t w = key_word(mask_key, offset, r);
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {  // memcpy: unaligned-safe loads and stores the compiler vectorises
    uint64_t v;
    std::memcpy(&v, p + i, 8);
    v ^= w;
    std::memcpy(p + i, &v, 8);
  }
  for (; i < n; ++i) p[i] = static_cast<char>(p[i] ^ r[i & 7]);  // r has period 4
}

void copy_masked(char* out, const char* in, size_t n, uint32_t mask_key, uint64_t offset) noexcept {
  uint8_t r[8];
  const uint64_t w = key_word(mask_key, offset, r);
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    uint64_t v;
    std::memcpy(&v, in + i, 8);
    v ^= w;
    std::memcpy(out + i, &v, 8);
  }
  for (; i < n; ++i) out[i] = static_cast<char>(in[i] ^ r[i & 7]);
}
}  // namespace lionet::websocket
