// lionet/websocket/frame.h: the RFC 6455 section 5 frame format: opcodes, the header parser
// with every rule a header alone can break, the header writer, and masking.
//
// Owns: bytes in, FrameHeader out (and back). Must not: do IO, allocate, or know about
// messages (fragment assembly and UTF-8 are detail/frame_reader.h's).
//
//    0                   1                   2                   3
//   |F|R|R|R| opcode|M| Payload len |    Extended payload length    |
//   |I|S|S|S|  (4)  |A|     (7)     |             (16/64)           |
//   |N|V|V|V|       |S|             |   (if payload len==126/127)   |
//   | |1|2|3|       |K|             |                               |
//   +-+-+-+-+-------+-+-------------+ - - - - - - - - - - - - - - - +
//   |     Extended payload length continued, if payload len == 127  |
//   + - - - - - - - - - - - - - - - +-------------------------------+
//   |                               |Masking-key, if MASK set to 1  |
//   +-------------------------------+-------------------------------+
//
// Header rules enforced by parse_frame_header (each failure names its close code):
//   RSV2/RSV3 set, or RSV1 without permessage-deflate      1002
//     (RSV1 on a frame where it makes no sense: frame_reader)
//   opcode 3-7 or 11-15                                    1002
//   control frame (close/ping/pong) without FIN, or > 125  1002
//   mask bit wrong for the role (a server needs it set,    1002
//     a client needs it clear)
//   64-bit length with the top bit set (RFC 6455 5.2)      1002
//   payload over the frame limit                           1009
// The length need not be in its minimal encoding (RFC 6455 says MUST, but rejecting the
// longer form protects nothing; Python websockets and wslay accept it too).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>

namespace lionet::websocket {

enum class Opcode : uint8_t {
  kContinuation = 0x0,
  kText = 0x1,
  kBinary = 0x2,
  kClose = 0x8,
  kPing = 0x9,
  kPong = 0xA,
};
inline constexpr bool is_control(Opcode op) noexcept { return (static_cast<uint8_t>(op) & 0x8) != 0; }

// The longest header: 2 + 8 (length) + 4 (mask key).
inline constexpr size_t kMaxHeaderSize = 14;
// Control frame payloads (ping, pong, close) are at most this long (RFC 6455 5.5).
inline constexpr size_t kMaxControlPayload = 125;

struct FrameHeader {
  bool fin = false;
  Opcode opcode = Opcode::kContinuation;
  bool masked = false;
  bool rsv1 = false;  // permessage-deflate: the message is compressed (first frame only)
  uint32_t mask_key = 0;  // the 4 key bytes as they are on the wire, in memory order
  uint64_t payload_size = 0;
  size_t header_size = 0;  // bytes the header took (2..14)
};

struct HeaderRules {
  // Server side: every frame from the client must be masked; client side: none may be.
  bool expect_masked = true;
  // A data frame whose payload is over this fails with 1009.
  uint64_t max_payload = UINT64_MAX;
  // permessage-deflate was agreed: RSV1 may be set.
  bool allow_rsv1 = false;
};

struct ParseOutcome {
  enum Status : uint8_t { kNeedMore, kOk, kError } status = kNeedMore;
  uint16_t close_code = 0;  // kError: the code to close with (1002 or 1009)
  const char* reason = "";  // kError: why, for the close frame and the log (a literal)
};

// Parses the header at p[0..n). kNeedMore: the header is not complete yet (nothing consumed);
// kOk: *out is filled and out->header_size bytes make the header; kError: see the table above.
ParseOutcome parse_frame_header(const uint8_t* p, size_t n, const HeaderRules& rules, FrameHeader* out) noexcept;

// Writes a header into out[0..kMaxHeaderSize) and returns its size. mask_key is written (and
// the mask bit set) only when `masked`; rsv1 marks a compressed message's first frame.
size_t write_frame_header(uint8_t* out, bool fin, Opcode opcode, uint64_t payload_size, bool masked, uint32_t mask_key,
                          bool rsv1 = false) noexcept;

// XORs p[0..n) with the key, as if p started `offset` bytes into the payload (so a payload may
// be unmasked in pieces). Masking and unmasking are the same operation. Word-at-a-time.
void apply_mask(char* p, size_t n, uint32_t mask_key, uint64_t offset) noexcept;
// The same, from `in` into `out` (a client's send path masks into a staging buffer).
void copy_masked(char* out, const char* in, size_t n, uint32_t mask_key, uint64_t offset) noexcept;
}  // namespace lionet::websocket
