// libFuzzer target for lionet/http/auth.h's parsers: the first byte picks the parser (htpasswd
// file, token file, Basic or Bearer Authorization value), the rest is its input. Checks: a
// parser either returns or throws AuthFileError (nothing else escapes), an error message never
// contains the input past its file name, a parsed htpasswd hash is a well-formed bcrypt hash of
// 60 characters, and a Basic value re-encoded from its parts decodes to the same parts.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>

#include "lionet/base/base64.h"
#include "lionet/http/auth.h"

namespace {
using namespace lionet::http;

std::string base64(const std::string& in) { return lionet::base64_encode(in); }
}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const std::string_view in(reinterpret_cast<const char*>(data) + 1, size - 1);
  switch (data[0] % 4) {
    case 0:
      try {
        for (const auto& e : parse_htpasswd(in, "f")) {
          if (e.user.empty() || e.user.find(':') != std::string::npos || e.hash.size() != 60 ||
              !e.hash.starts_with("$2"))
            std::abort();
        }
      } catch (const AuthFileError& e) {
        if (!std::string_view(e.what()).starts_with("f:")) std::abort();
      }
      break;
    case 1:
      try {
        auto digests = parse_token_file(in, "f");
        auto tokens = BearerTokens::from_digests(digests);
        if (tokens->size() != digests.size()) std::abort();
      } catch (const AuthFileError& e) {
        if (!std::string_view(e.what()).starts_with("f:")) std::abort();
      }
      break;
    case 2:
      if (auto c = parse_basic_authorization(in)) {
        if (c->user.find(':') != std::string::npos) std::abort();
        auto again = parse_basic_authorization("Basic " + base64(c->user + ":" + c->password));
        if (!again || again->user != c->user || again->password != c->password) std::abort();
      }
      break;
    case 3:
      if (auto t = parse_bearer_authorization(in)) {
        if (t->empty() || t->data() < in.data() || t->data() + t->size() > in.data() + in.size()) std::abort();
        if (t->find(' ') != std::string_view::npos) std::abort();
      }
      break;
  }
  return 0;
}
