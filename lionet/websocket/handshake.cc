// lionet/websocket/handshake.cc: accept keys, client keys, subprotocol choice (handshake.h).
#include "lionet/websocket/handshake.h"

#include <openssl/evp.h>
#include <openssl/rand.h>
#include <openssl/sha.h>
#include <sys/random.h>

#include "lionet/http/headers.h"

namespace lionet::websocket {
namespace {
std::string base64(const unsigned char* p, size_t n) {
  std::string out(4 * ((n + 2) / 3), '\0');
  const int k = EVP_EncodeBlock(reinterpret_cast<unsigned char*>(out.data()), p, static_cast<int>(n));
  out.resize(static_cast<size_t>(k));
  return out;
}
bool base64_char(char c) noexcept {
  return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '+' || c == '/';
}
}  // namespace

std::string accept_key(std::string_view client_key) {
  std::string s;
  s.reserve(client_key.size() + kHandshakeGuid.size());
  s.append(client_key).append(kHandshakeGuid);
  unsigned char digest[SHA_DIGEST_LENGTH];
  SHA1(reinterpret_cast<const unsigned char*>(s.data()), s.size(), digest);
  return base64(digest, sizeof digest);
}

std::string make_client_key() {
  unsigned char raw[16];
  if (RAND_bytes(raw, sizeof raw) != 1) (void)!getrandom(raw, sizeof raw, 0);
  return base64(raw, sizeof raw);
}

bool valid_client_key(std::string_view key) noexcept {
  // 16 bytes = 5 groups of 3 + 1 byte: 22 characters, then "==". The 22nd carries 2 bits of
  // the last byte and 4 zero bits.
  if (key.size() != 24 || key[22] != '=' || key[23] != '=') return false;
  for (size_t i = 0; i < 22; ++i)
    if (!base64_char(key[i])) return false;
  static constexpr std::string_view kAlphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  return (kAlphabet.find(key[21]) & 0x0F) == 0;
}

std::string choose_subprotocol(const std::vector<std::string>& ours, const std::vector<std::string_view>& offered) {
  for (const std::string& p : ours) {
    for (std::string_view field : offered) {
      while (!field.empty()) {
        size_t comma = field.find(',');
        std::string_view item = http::trim_ows(field.substr(0, comma));
        if (item == p) return p;  // subprotocol names are case-sensitive tokens
        if (comma == std::string_view::npos) break;
        field.remove_prefix(comma + 1);
      }
    }
  }
  return {};
}
}  // namespace lionet::websocket
