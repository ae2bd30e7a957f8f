// lionet/websocket/deflate.h: permessage-deflate (RFC 7692): the offer/response negotiation of
// its four parameters, and the per-connection compressor and decompressor (zlib, raw deflate).
//
// Owns: the Sec-WebSocket-Extensions grammar for permessage-deflate (both roles), and two zlib
// streams behind small classes (zlib.h stays in deflate.cc). Must not: do IO or know frames;
// the RSV1 bit and which frames carry it are frame_reader's and socket's.
//
// Negotiation rules (RFC 7692 section 7), with what this code does where the RFC leaves a
// choice:
//   - Server: the first acceptable permessage-deflate offer wins; an offer with an unknown or
//     repeated parameter, or a bad value, is skipped (not a failed handshake). The response has
//     server_no_context_takeover if the client asked or we want it, client_no_context_takeover
//     if we want it, server_max_window_bits = min(the client's value, ours) when either is below
//     15, client_max_window_bits = ours when below 15 and the client offered the parameter (a
//     client that did not offer it cannot honour it: the offer is taken with 15).
//   - 8 bits is refused for any window we compress with: zlib cannot deflate with a 256-byte
//     window (it silently uses 512, which a peer inflating with 256 cannot read). So a server
//     skips an offer demanding server_max_window_bits=8, never asks a client for 8 (ours is
//     raised to 9), and a client fails the handshake when the server demands 8 of it.
//   - Client: the response must be one permessage-deflate with parameters from RFC 7692 only,
//     no window above the one offered, client_max_window_bits only if offered.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace lionet::websocket {

// What one side wants (Options::deflate). Window sizes are log2 of bytes, 8..15 (9..15 for the
// windows we compress with, see the top of the file).
struct DeflateOptions {
  // Offer (client) or accept (server) permessage-deflate. Cost when agreed: a zlib stream each
  // way per connection (deflate ~ 2^(window+2) + 2^(9+mem_level) bytes, about 256 KiB at the
  // defaults; inflate ~ 2^window + 7 KiB), allocated at the handshake; CPU per message.
  bool enabled = false;
  // Ask that the server resets its compressor after every message (less memory kept warm on
  // the peer, worse ratio for similar messages).
  bool server_no_context_takeover = false;
  // Ask that the client resets its compressor after every message.
  bool client_no_context_takeover = false;
  // The server's compression window (server: at most this; client: ask for at most this).
  int server_max_window_bits = 15;
  // The client's compression window (server: ask the client for at most this; client: offer
  // it, so a server may lower it).
  int client_max_window_bits = 15;
  // zlib level for what we send (1 fastest .. 9 smallest).
  int level = 6;
};

// What was agreed for one connection.
struct DeflateParams {
  bool server_no_context_takeover = false;
  bool client_no_context_takeover = false;
  int server_max_window_bits = 15;
  int client_max_window_bits = 15;
};

// Server: picks from the client's Sec-WebSocket-Extensions field values (one element per
// field). nullopt: permessage-deflate is not used (not offered, or no offer acceptable); else
// the agreed parameters, and *response the value of our Sec-WebSocket-Extensions field.
std::optional<DeflateParams> negotiate_deflate(const std::vector<std::string_view>& offers, const DeflateOptions& ours,
                                               std::string* response);
// Client: the value of our Sec-WebSocket-Extensions field for `ours`.
std::string deflate_offer(const DeflateOptions& ours);
// Client: the server's Sec-WebSocket-Extensions field values (one element per field), checked
// against our offer. nullopt and *why on a response that breaks the rules; an empty list gives
// params with `accepted` false.
struct DeflateAnswer {
  bool accepted = false;
  DeflateParams params;
};
std::optional<DeflateAnswer> accept_deflate_response(const std::vector<std::string_view>& fields,
                                                     const DeflateOptions& ours, const char** why);

// Compresses whole messages: deflate with Z_SYNC_FLUSH, the trailing 00 00 FF FF removed
// (RFC 7692 7.2.1). One per connection and direction; not thread-safe (the Socket's send mutex).
class Deflater {
 public:
  // window_bits 9..15 (8 is raised to 9, see the top); level 1..9.
  Deflater(int window_bits, int level, bool no_context_takeover);
  ~Deflater();
  Deflater(const Deflater&) = delete;
  Deflater& operator=(const Deflater&) = delete;
  // false: zlib could not allocate its state (the connection cannot compress).
  bool ok() const noexcept { return impl_ != nullptr; }
  // Replaces *out with the compressed form of in. false on a zlib failure (out of memory).
  bool compress(std::string_view in, std::string* out);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
  bool no_context_takeover_;
};

// Decompresses messages piece by piece with a cap on the output (the deflate-bomb guard).
class Inflater {
 public:
  enum class Status : uint8_t { kOk, kTooBig, kBadData };
  // window_bits 8..15: the peer's agreed compression window.
  Inflater(int window_bits, bool no_context_takeover);
  ~Inflater();
  Inflater(const Inflater&) = delete;
  Inflater& operator=(const Inflater&) = delete;
  bool ok() const noexcept { return impl_ != nullptr; }
  // Inflates in[0..n) onto out[*filled..), growing out (its capacity never beyond `limit`
  // bytes) and advancing *filled. kTooBig as soon as the output would pass `limit`: a bomb
  // costs at most `limit` bytes of memory, whatever it expands to. kBadData: not a valid
  // deflate stream.
  Status feed(const char* in, size_t n, std::string& out, size_t* filled, uint64_t limit);
  // The end of a message: feeds the removed 00 00 FF FF, and resets the stream if the peer
  // does not keep its context.
  Status finish(std::string& out, size_t* filled, uint64_t limit);
  // Forget the stream's context (a message failed midway).
  void reset() noexcept;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
  bool no_context_takeover_;
};
}  // namespace lionet::websocket
