// libFuzzer target for what a WebSocket handshake reads from the peer (lionet/websocket/
// deflate.h, handshake.h): the client's Sec-WebSocket-Extensions offers (negotiate_deflate, the
// server side), the server's answer to our offer (accept_deflate_response, the client side),
// Sec-WebSocket-Key (valid_client_key) and Sec-WebSocket-Protocol (choose_subprotocol). The
// first input byte picks our options; the rest is split at '\n' into field values. Checks:
//   - negotiate_deflate: agreed windows within 9..15 (ours, which we compress with) and 8..15
//     (the client's); the response we would send is accepted by our own client as the answer to
//     its default offer, with the same parameters (unless it names an 8-bit client window, which
//     our client refuses by design), and it is one well-formed permessage-deflate element.
//   - accept_deflate_response: an accepted answer keeps every window within 9..15 and at most
//     what was offered or asked.
//   - valid_client_key: true only for 24 characters ending in "==".
//   - choose_subprotocol: "" or one of ours.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>
#include <vector>

#include "lionet/websocket/deflate.h"
#include "lionet/websocket/handshake.h"

namespace {
using lionet::websocket::DeflateOptions;
using lionet::websocket::DeflateParams;

bool same(const DeflateParams& a, const DeflateParams& b) {
  return a.server_no_context_takeover == b.server_no_context_takeover &&
         a.client_no_context_takeover == b.client_no_context_takeover &&
         a.server_max_window_bits == b.server_max_window_bits && a.client_max_window_bits == b.client_max_window_bits;
}
}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  const uint8_t bits = data[0];
  std::vector<std::string_view> fields;
  std::string_view rest(reinterpret_cast<const char*>(data) + 1, size - 1);
  while (!rest.empty() && fields.size() < 16) {
    const size_t nl = rest.find('\n');
    fields.push_back(rest.substr(0, nl));
    rest = nl == std::string_view::npos ? std::string_view() : rest.substr(nl + 1);
  }

  DeflateOptions ours;
  ours.enabled = true;
  ours.server_no_context_takeover = bits & 1;
  ours.client_no_context_takeover = bits & 2;
  ours.server_max_window_bits = 8 + ((bits >> 2) & 7) + ((bits >> 5) & 1);  // 8..16: clamped inside
  ours.client_max_window_bits = 8 + ((bits >> 5) & 7);

  // Server side: the client's offers.
  std::string response;
  if (auto agreed = lionet::websocket::negotiate_deflate(fields, ours, &response)) {
    if (agreed->server_max_window_bits < 9 || agreed->server_max_window_bits > 15) std::abort();
    if (agreed->client_max_window_bits < 8 || agreed->client_max_window_bits > 15) std::abort();
    if (response.find(',') != std::string::npos || response.find("permessage-deflate") != 0) std::abort();
    DeflateOptions client;  // our client's default offer: windows of 15, client_max_window_bits
    client.enabled = true;
    const char* why = nullptr;
    auto answer = lionet::websocket::accept_deflate_response({response}, client, &why);
    if (agreed->client_max_window_bits == 8) {
      if (answer) std::abort();  // refused by design (deflate.h)
    } else {
      if (!answer || !answer->accepted || !same(answer->params, *agreed)) std::abort();
    }
  } else if (!response.empty()) {
    std::abort();  // no agreement, no response
  }

  // Client side: the server's answer to our offer.
  const char* why = nullptr;
  if (auto answer = lionet::websocket::accept_deflate_response(fields, ours, &why)) {
    if (answer->accepted) {
      const DeflateParams& p = answer->params;
      if (p.server_max_window_bits < 8 || p.server_max_window_bits > 15) std::abort();
      if (p.server_max_window_bits > std::max(ours.server_max_window_bits, 8)) std::abort();
      if (p.client_max_window_bits < 9 || p.client_max_window_bits > 15) std::abort();
      if (p.client_max_window_bits > std::max(ours.client_max_window_bits, 9)) std::abort();
      if (ours.server_no_context_takeover && !p.server_no_context_takeover) std::abort();
    }
  } else if (why == nullptr) {
    std::abort();  // a refusal says why
  }

  for (std::string_view f : fields) {
    if (lionet::websocket::valid_client_key(f) && (f.size() != 24 || f.substr(22) != "==")) std::abort();
  }
  const std::vector<std::string> protocols = {"chat", "superchat", "mqtt"};
  const std::string chosen = lionet::websocket::choose_subprotocol(protocols, fields);
  if (!chosen.empty() && chosen != "chat" && chosen != "superchat" && chosen != "mqtt") std::abort();
  return 0;
}
