// lionet/websocket/handshake.h: the opening handshake's pieces that both roles share (RFC 6455
// section 4): the Sec-WebSocket-Key / Sec-WebSocket-Accept pair and subprotocol lists.
//
// Owns: pure functions over strings (SHA-1 and base64 from OpenSSL). Must not do IO or know
// http::Request (server.cc and client.cc apply these to their messages).
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace lionet::websocket {

// The GUID of RFC 6455 1.3, appended to the key before hashing.
inline constexpr std::string_view kHandshakeGuid = "258EAFA5-E914-47DA-95CA-C5AB0DC85B11";

// base64(SHA-1(key + GUID)): the server's Sec-WebSocket-Accept for a client's key.
std::string accept_key(std::string_view client_key);
// A client key: base64 of 16 random bytes (24 characters).
std::string make_client_key();
// True if key is base64 of exactly 16 bytes (24 characters ending in "==").
bool valid_client_key(std::string_view key) noexcept;
// Server: the first of `ours` (preference order) that appears in the client's offer (the
// comma-separated values of every Sec-WebSocket-Protocol field, given one field value per
// element); "" if none.
std::string choose_subprotocol(const std::vector<std::string>& ours, const std::vector<std::string_view>& offered);
}  // namespace lionet::websocket
