// lionet/kafka/sasl.h: SASL for the Kafka listener: the users file, SCRAM credentials, the
// PLAIN (RFC 4616) and SCRAM-SHA-256 / SCRAM-SHA-512 (RFC 5802, RFC 7677) server exchanges, and
// their message parsers.
//
//   std::string err;
//   auto users = SaslUsers::load("kafka-users.txt", err);   // mode 0600 or stricter
//   SaslExchange x(*users, SaslMechanism::kScramSha256);
//   std::string out;
//   x.step(client_first, out);     // kContinue, out = server-first
//   x.step(client_final, out);     // kDone, out = server-final; x.principal() = "alice"
//
// Owns: SaslUsers (name -> credentials derived at load: the passwords are dropped once they
// are derived, and never logged), SaslExchange (one connection's exchange), the parsers.
// Must not: know Kafka's framing (broker.cc carries the tokens in SaslHandshake /
// SaslAuthenticate or as bare frames after SaslHandshake v0), or do IO beyond reading the file.
//
// Credentials, as Kafka stores them (kafka-configs --add-config 'SCRAM-SHA-256=[...]'): per
// user and SCRAM mechanism a random 16-byte salt, 4096 iterations, StoredKey = H(ClientKey),
// ServerKey = HMAC(SaltedPassword, "Server Key"). PLAIN is checked against the SCRAM-SHA-256
// credential (the password is salted and iterated again, then its StoredKey compared), so no
// password is kept in memory. Every comparison of secrets is CRYPTO_memcmp. An unknown user
// goes through the same steps against a made-up credential (the same salt for a name every
// time), so the answers do not say which names exist.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "lionet/kafka/acl.h"

namespace lionet::kafka {

enum class SaslMechanism : uint8_t { kPlain = 0, kScramSha256 = 1, kScramSha512 = 2 };
inline constexpr int kSaslMechanismCount = 3;
std::string_view mechanism_name(SaslMechanism m) noexcept;
std::optional<SaslMechanism> parse_mechanism(std::string_view name) noexcept;

struct ScramCredential {
  std::string salt;
  int iterations = 4096;
  std::string stored_key;  // H(HMAC(SaltedPassword, "Client Key"))
  std::string server_key;  // HMAC(SaltedPassword, "Server Key")
};
// The credential of `password` (SCRAM mechanisms only).
ScramCredential scram_credential(SaslMechanism m, std::string_view password, std::string_view salt, int iterations);

class SaslUsers {
 public:
  struct User {
    ScramCredential sha256, sha512;
  };
  static constexpr int kDefaultIterations = 4096;  // Kafka's default for SCRAM

  // `name:password` per line; '#' comment lines and blank lines skipped; a '\r' before the
  // newline dropped. The name is everything before the first ':' (non-empty, no control
  // characters), the password everything after it (non-empty). nullptr and `error` ("line 3:
  // ...", never quoting a password) on a bad line or a name given twice.
  static std::unique_ptr<SaslUsers> parse(std::string_view text, std::string& error,
                                          int iterations = kDefaultIterations);
  // Reads and parses `path`, which must be a regular file of mode 0600 or stricter (no group
  // or other bits). Errors name the file.
  static std::unique_ptr<SaslUsers> load(const std::string& path, std::string& error,
                                         int iterations = kDefaultIterations);
  // What load() checks (mode, readable, every line), without deriving credentials: for
  // `lionet --check`. "" when fine.
  static std::string check_file(const std::string& path);

  const User* find(std::string_view name) const noexcept;
  // Adds or replaces a user with its credentials (tests: RFC 7677's vector has a fixed salt).
  void set(std::string name, User user) { users_[std::move(name)] = std::move(user); }
  std::size_t size() const noexcept { return users_.size(); }
  // The made-up credential an unknown name is checked against.
  const ScramCredential& decoy(SaslMechanism m, std::string_view name, ScramCredential& scratch) const;

 private:
  std::map<std::string, User, std::less<>> users_;
  std::string decoy_secret_;  // random: salts of unknown names
  int iterations_ = kDefaultIterations;
};

// ---- Parsers (no allocation but the unescaped user name; views into the message)

struct ScramClientFirst {
  std::string_view gs2_header;  // "n,," or "y,," (with an authzid: "n,a=alice,")
  std::string_view bare;  // client-first-message-bare
  std::string user;  // saslname unescaped (=2C -> ',', =3D -> '=')
  std::string_view nonce;
  std::string_view authzid;  // "" when none (escaped form)
};
// nullptr when well formed, else why not. Channel binding ("p=") and mandatory extensions
// ("m=") are refused.
const char* parse_scram_client_first(std::string_view msg, ScramClientFirst& out);

struct ScramClientFinal {
  std::string_view channel_binding;  // base64, the c= value
  std::string_view nonce;
  std::string_view without_proof;  // everything before ",p="
  std::string_view proof;  // base64, the p= value
};
const char* parse_scram_client_final(std::string_view msg, ScramClientFinal& out);

struct PlainToken {
  std::string_view authzid, user, password;
};
// [authzid] NUL authcid NUL passwd (RFC 4616); authzid empty or equal to the user.
const char* parse_plain(std::string_view msg, PlainToken& out);

// One connection's exchange with one mechanism.
class SaslExchange {
 public:
  enum class Step { kContinue, kDone, kFailed };
  // `server_nonce` "" = 24 random characters (tests give RFC 7677's).
  SaslExchange(const SaslUsers& users, SaslMechanism m, std::string server_nonce = "");
  // One client token in, the server's token out (empty for PLAIN). kFailed: error() says why
  // (for the log and the client; never a password).
  Step step(std::string_view in, std::string& out);
  SaslMechanism mechanism() const noexcept { return mech_; }
  const std::string& principal() const noexcept { return principal_; }  // after kDone
  const std::string& error() const noexcept { return error_; }

 private:
  Step fail(std::string why);
  const SaslUsers& users_;
  SaslMechanism mech_;
  int state_ = 0;  // SCRAM: 0 expects client-first, 1 client-final, 2 finished
  std::string server_nonce_;
  std::string user_, client_first_bare_, server_first_, nonce_;
  ScramCredential cred_;
  bool known_ = false;
  std::string principal_, error_;
};

// A listener's SASL settings (BrokerOptions::sasl).
struct SaslConfig {
  std::vector<SaslMechanism> mechanisms{};  // enabled, in the order SaslHandshake lists them
  std::shared_ptr<const SaslUsers> users{};
  Acl acl{};  // empty: every authenticated user may do everything
  bool enabled(SaslMechanism m) const noexcept {
    for (SaslMechanism e : mechanisms)
      if (e == m) return true;
    return false;
  }
};

}  // namespace lionet::kafka
