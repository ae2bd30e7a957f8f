// lionet/base/base64.h: base64 (RFC 4648 section 4, the standard alphabet, padded), over
// OpenSSL's EVP_EncodeBlock / EVP_DecodeBlock, for every protocol that carries it (HTTP Basic
// credentials, Kafka's SCRAM messages).
//
// Owns: the strictness of decoding. Must not: accept what another decoder would read
// differently: decode() refuses characters outside the alphabet, '=' anywhere but the last
// one or two places, a length that is not a multiple of 4, and non-zero bits in the last
// group ("AB==" is not "AA=="), so that one string has one meaning.
#pragma once

#include <optional>
#include <string>
#include <string_view>

namespace lionet {

std::string base64_encode(std::string_view in);
// nullopt when `in` is not canonical base64 (above); "" decodes to "".
std::optional<std::string> base64_decode(std::string_view in);

}  // namespace lionet
