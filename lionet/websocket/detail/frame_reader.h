// lionet/websocket/detail/frame_reader.h: FrameReader, the receive side of RFC 6455 without
// IO: bytes in, events out (a whole message, a ping, a pong, the peer's close, or a failure
// with the close code to send). The Socket feeds it from its stream; the fuzz target and the
// tests feed it from memory.
//
// Owns: the frame state (header, payload left, mask offset), fragment assembly into the
// caller's Message, incremental UTF-8 validation of text across fragments and reads, control
// frame payloads (a 125-byte array), and every rule that spans frames:
//   continuation frame with no message started                 1002
//   text/binary frame while a fragmented message is open       1002
//   message over max_message (checked at each header)          1009
//   text that is not UTF-8 (at the first bad byte)             1007
//   close payload of 1 byte, or a code no one may send         1002
//   close reason that is not UTF-8                             1007
//   RSV1 on a control or continuation frame (permessage-deflate
//     marks a message's first frame only)                      1002
//   compressed message over max_message once inflated          1009
//     (inflated piece by piece as it arrives: a deflate bomb
//     costs at most max_message bytes before it is refused)
//   compressed data that does not inflate                      1007
// (header-level rules: frame.h). Must not: allocate except by growing the Message, or return
// a view that outlives the next call.
//
// Payload may arrive two ways: from the caller's bytes (next(), which copies into the message)
// or read by the caller straight into the message (direct_target() + direct_commit(): no
// intermediate buffer for large payloads).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "lionet/websocket/deflate.h"
#include "lionet/websocket/frame.h"
#include "lionet/websocket/message.h"
#include "lionet/websocket/utf8.h"

namespace lionet::websocket::detail {

struct ReadEvent {
  enum Kind : uint8_t { kNeedMore, kMessage, kPing, kPong, kClose, kFail } kind = kNeedMore;
  // kClose: the peer's code (1005 when its close frame had none); kFail: the code to close with.
  uint16_t code = 0;
  // kPing/kPong: the payload; kClose: the reason; kFail: why (a literal). Valid until the
  // next call on the reader.
  std::string_view text;
};

class FrameReader {
 public:
  // server: frames must be masked (a client's); otherwise they must not be.
  FrameReader(bool server, uint64_t max_frame, uint64_t max_message) noexcept
      : rules_{server, max_frame}, max_message_(max_message) {}

  // permessage-deflate was agreed: RSV1 marks compressed messages, inflated with the peer's
  // window. false: zlib could not allocate its stream.
  bool enable_deflate(int peer_window_bits, bool peer_no_context_takeover);

  // Consumes from data[0..n) (*consumed says how much) until an event. The message being
  // assembled lives in `msg`: pass the same object until kMessage (or kFail) comes back;
  // kMessage leaves the whole message in it. After kClose or kFail every call returns it again.
  ReadEvent next(const char* data, size_t n, size_t* consumed, Message& msg);

  // While a data frame's payload is outstanding: where up to *room bytes of it may be read
  // straight into (msg's storage, grown geometrically, never more than 64 KiB or the message
  // so far ahead of the bytes received), or null (no payload expected now).
  char* direct_target(Message& msg, size_t* room);
  // k bytes were written at direct_target(): unmask and check them. Call next() after it.
  void direct_commit(Message& msg, size_t k);

  // The payload bytes still expected for the current frame (0 between frames).
  uint64_t payload_left() const noexcept { return remaining_; }
  bool finished() const noexcept { return end_.kind != ReadEvent::kNeedMore; }

 private:
  enum class State : uint8_t { kHeader, kData, kControl };
  ReadEvent fail(uint16_t code, const char* why) noexcept;
  ReadEvent start_frame(Message& msg);
  ReadEvent end_data_frame(Message& msg);
  ReadEvent end_control_frame();
  // Unmasks and validates msg.data[filled_, filled_ + k).
  void take(Message& msg, size_t k) noexcept;
  // A compressed message: unmasks p[0..k) (compressed payload) and inflates it onto msg.
  void take_compressed(Message& msg, char* p, size_t k);

  HeaderRules rules_;
  uint64_t max_message_;
  State state_ = State::kHeader;
  FrameHeader hdr_;
  uint64_t remaining_ = 0;  // payload bytes of the current frame not yet received
  uint64_t offset_ = 0;  // payload bytes of the current frame received (the mask's phase)
  bool in_message_ = false;
  size_t filled_ = 0;  // bytes of the open message received (msg.data may be longer: room)
  // permessage-deflate: the inflater (null unless agreed), whether the open message is
  // compressed, its compressed bytes so far (the message limit applies to them too) and the
  // current piece of compressed payload (unmasked here, then inflated onto msg.data).
  std::unique_ptr<Inflater> inflater_;
  bool compressed_ = false;
  uint64_t wire_ = 0;
  std::string zin_;
  Utf8Validator utf8_;
  ReadEvent end_;  // kClose or kFail once the stream of frames has ended
  uint8_t control_len_ = 0;
  char control_[kMaxControlPayload];
};
}  // namespace lionet::websocket::detail
