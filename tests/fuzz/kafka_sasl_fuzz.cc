// libFuzzer target for lionet/kafka/sasl.h's parsers and exchanges: the first byte picks what
// the rest is: a SCRAM client-first message, a client-final message, a PLAIN token, a users
// file, or a whole SCRAM exchange (client-first, then client-final after a NUL). Any input is
// refused or parsed with every view inside it; an exchange never succeeds without the
// password (the users file here has one user whose password the fuzzer would have to forge a
// proof for).
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>

#include "lionet/base/base64.h"
#include "lionet/kafka/sasl.h"

namespace {
bool inside(std::string_view part, std::string_view whole) {
  return part.empty() || (part.data() >= whole.data() && part.data() + part.size() <= whole.data() + whole.size());
}

const lionet::kafka::SaslUsers& users() {
  static const auto u = [] {
    std::string err;
    return lionet::kafka::SaslUsers::parse("alice:alice-secret\n", err, 2);
  }();
  return *u;
}
}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace lionet::kafka;
  if (size == 0) return 0;
  const std::string_view in(reinterpret_cast<const char*>(data + 1), size - 1);
  switch (data[0] % 5) {
    case 0: {
      ScramClientFirst f;
      if (parse_scram_client_first(in, f) == nullptr) {
        if (!inside(f.bare, in) || !inside(f.nonce, in) || !inside(f.gs2_header, in) || f.nonce.empty()) std::abort();
        if (f.user.empty() || f.user.size() > in.size()) std::abort();
      }
      break;
    }
    case 1: {
      ScramClientFinal f;
      if (parse_scram_client_final(in, f) == nullptr) {
        if (!inside(f.without_proof, in) || !inside(f.proof, in) || !inside(f.nonce, in) || f.proof.empty())
          std::abort();
        (void)lionet::base64_decode(f.proof);
      }
      break;
    }
    case 2: {
      PlainToken t;
      if (parse_plain(in, t) == nullptr && (!inside(t.user, in) || !inside(t.password, in) || t.user.empty()))
        std::abort();
      SaslExchange x(users(), SaslMechanism::kPlain);
      std::string out;
      if (x.step(in, out) == SaslExchange::Step::kDone && in.find("alice-secret") == std::string_view::npos)
        std::abort();
      break;
    }
    case 3: {
      std::string err;
      auto u = SaslUsers::parse(in, err, 1);
      if (!u == err.empty()) std::abort();
      break;
    }
    case 4: {
      const std::size_t nul = in.find('\0');
      SaslExchange x(users(), (size & 1) ? SaslMechanism::kScramSha256 : SaslMechanism::kScramSha512, "srv");
      std::string out;
      if (x.step(in.substr(0, nul), out) != SaslExchange::Step::kContinue || nul == std::string_view::npos) break;
      if (x.step(in.substr(nul + 1), out) == SaslExchange::Step::kDone) std::abort();  // no proof without the password
      break;
    }
  }
  return 0;
}
