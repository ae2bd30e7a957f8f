// lionet/base/base64.cc: base64_encode, base64_decode (see base64.h).
#include "lionet/base/base64.h"

#include <openssl/evp.h>

#include <cctype>

namespace lionet {

std::string base64_encode(std::string_view in) {
  std::string out(4 * ((in.size() + 2) / 3), '\0');
  const int n = EVP_EncodeBlock(reinterpret_cast<unsigned char*>(out.data()),
                                reinterpret_cast<const unsigned char*>(in.data()), static_cast<int>(in.size()));
  out.resize(static_cast<std::size_t>(n));
  return out;
}

std::optional<std::string> base64_decode(std::string_view in) {
  if (in.size() % 4 != 0) return std::nullopt;
  for (std::size_t i = 0; i < in.size(); ++i) {
    const char c = in[i];
    const bool pad_ok = c == '=' && i + 2 >= in.size() && (i + 1 == in.size() || in[i + 1] == '=');
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '+' && c != '/' && !pad_ok) return std::nullopt;
  }
  std::string out(3 * (in.size() / 4), '\0');
  if (in.empty()) return out;
  const int n = EVP_DecodeBlock(reinterpret_cast<unsigned char*>(out.data()),
                                reinterpret_cast<const unsigned char*>(in.data()), static_cast<int>(in.size()));
  if (n < 0) return std::nullopt;
  std::size_t pad = 0;
  if (in.back() == '=') ++pad;
  if (in.size() >= 2 && in[in.size() - 2] == '=') ++pad;
  out.resize(static_cast<std::size_t>(n) - pad);
  if (base64_encode(out) != in) return std::nullopt;  // non-canonical bits in the last group
  return out;
}

}  // namespace lionet
