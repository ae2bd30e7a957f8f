// lionet/websocket/message.h: lionet::websocket::Message, one whole WebSocket message (text or
// binary) as received or to be sent, and the close codes of RFC 6455 section 7.4.
//
// Owns: the message's bytes (a std::string, so receive(Message&) can reuse its capacity).
// Must not: know frames; a message's fragmentation on the wire is the Socket's business.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>

namespace lionet::websocket {

enum class MessageType : uint8_t { kText, kBinary };

struct Message {
  MessageType type = MessageType::kText;
  std::string data{};  // text: valid UTF-8 (checked on receive; the sender's promise on send)

  static Message text(std::string s) { return {MessageType::kText, std::move(s)}; }
  static Message binary(std::string s) { return {MessageType::kBinary, std::move(s)}; }
  bool is_text() const noexcept { return type == MessageType::kText; }
  bool is_binary() const noexcept { return type == MessageType::kBinary; }
  std::string_view view() const noexcept { return data; }
};

// Close codes (RFC 6455 7.4.1, IANA registry).
namespace close_code {
inline constexpr uint16_t kNormal = 1000;
inline constexpr uint16_t kGoingAway = 1001;
inline constexpr uint16_t kProtocolError = 1002;
inline constexpr uint16_t kUnsupportedData = 1003;
inline constexpr uint16_t kNoStatus = 1005;  // never sent: a close frame without a code
inline constexpr uint16_t kAbnormal = 1006;  // never sent: the connection ended without one
inline constexpr uint16_t kInvalidPayload = 1007;  // e.g. text that is not UTF-8
inline constexpr uint16_t kPolicyViolation = 1008;
inline constexpr uint16_t kTooBig = 1009;
inline constexpr uint16_t kMandatoryExtension = 1010;
inline constexpr uint16_t kInternalError = 1011;
}  // namespace close_code

// A code an endpoint may put in a close frame: 1000-1003, 1007-1014, 3000-4999.
inline constexpr bool sendable_close_code(uint16_t c) noexcept {
  return (c >= 1000 && c <= 1003) || (c >= 1007 && c <= 1014) || (c >= 3000 && c <= 4999);
}
}  // namespace lionet::websocket
