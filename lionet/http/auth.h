// lionet/http/auth.h: HTTP authentication for a route: Basic (RFC 7617) against bcrypt
// htpasswd entries, Bearer tokens (RFC 6750) kept as SHA-256 digests, verified TLS client
// certificates matched by subject or subjectAltName, a bounded cache of verified Basic
// credentials and a per-address brute-force brake, behind one handler wrapper.
//
//   auto a = std::make_shared<lionet::http::Authenticator>(
//       lionet::http::AuthOptions{.kind = lionet::http::AuthKind::kBasic, .realm = "ops"});
//   a->set_users(lionet::http::HtpasswdUsers::load("users.htpasswd"));   // throws AuthFileError
//   router.prefix("GET", "/private", a->wrap(files->handler()));
//   ...
//   a->set_users(lionet::http::HtpasswdUsers::load("users.htpasswd"));   // reload: cache emptied
//
// Owns: the parsers (Authorization values, htpasswd and token files: pure functions, fuzzed by
// tests/fuzz/http_auth_fuzz.cc), the credential sets (immutable once built, swapped whole on a
// reload), CredentialCache, AuthBrake, Authenticator. Must not: read a file on a request's path
// (load() is for start-up and reload threads), run bcrypt on a worker (offload(): it takes
// milliseconds by design), keep or log a password or token in the clear (tokens become SHA-256
// digests at load; the cache keeps HMAC-SHA-256 digests of Authorization values under a key
// drawn at random per process; error messages name files and lines, never their content).
//
// The request path (Authenticator::check), numbered:
//   1. The brake: a client address that failed max_failures times within failure_window gets
//      429 with Retry-After until block_for has passed since its last counted failure.
//   2. Basic: the Authorization value's HMAC is looked up in the cache (hit: through, no
//      bcrypt). A miss is decoded, the user's bcrypt hash is checked by crypt_rn (libxcrypt) on
//      the offload pool while the fiber parks, and a success is cached. An unknown user costs a
//      bcrypt too (against another entry, result ignored), so timing does not tell which users
//      exist. Bearer: the token's SHA-256 is looked up and compared in constant time
//      (CRYPTO_memcmp). Client certificate: the stream's verified certificate (none: 403).
//   3. Wrong credentials count one failure for the address (a request without any does not:
//      that is how a browser asks for the dialog); 401 with WWW-Authenticate. A success clears
//      the address's count.
// Statuses: 401 + `WWW-Authenticate: Basic realm="r", charset="UTF-8"` (Basic), `Bearer
// realm="r"` (no token) or `Bearer realm="r", error="invalid_token"` (a wrong one); 403 for a
// missing or unlisted client certificate (the route refuses what TLS let through; nginx's
// `ssl_verify_client on` answers 400 for a missing one); 429 + Retry-After from the brake.
// Bounds: CredentialCache holds `capacity` digests (32 bytes each, plus the index: ~100 bytes an
// entry; 1024 by default); when full the oldest insertion goes (FIFO). AuthBrake tracks
// max_addresses addresses (~120 bytes each; 10000 by default: ~1.2 MiB); when full the least
// recently failed address goes, so a flood of distinct addresses costs memory up to that bound
// and, at worst, lets the evicted addresses start counting again.
// Concurrency: check() from any number of fibers at once; set_users/set_tokens from any thread.
// The cache and the brake each take a SpinLock for a hash lookup, never across a park.
#pragma once

#include <array>
#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <list>
#include <memory>
#include <mutex>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "lionet/base/clock.h"
#include "lionet/base/metrics.h"
#include "lionet/base/spinlock.h"
#include "lionet/http/request.h"
#include "lionet/http/response.h"
#include "lionet/http/server.h"

struct x509_st;

namespace lionet::http {

// A credential file that cannot be read or parsed: what() is "<file>:<line>: <reason>" (or
// "<file>: <reason>"), never a credential.
class AuthFileError : public std::runtime_error {
 public:
  using runtime_error::runtime_error;
};

using Sha256Digest = std::array<unsigned char, 32>;
Sha256Digest sha256(std::string_view data);
// CRYPTO_memcmp: the time depends on n only.
bool constant_time_equal(const void* a, const void* b, std::size_t n) noexcept;

// --- Authorization values -------------------------------------------------------------------
// Longest Authorization value looked at (longer ones are refused as malformed).
inline constexpr std::size_t kMaxAuthorizationBytes = 4096;
struct BasicCredentials {
  std::string user;  // before the first ':' (RFC 7617: a user-id has no ':')
  std::string password;
};
// "Basic <base64 of user:password>" (scheme case-insensitive, 1+ spaces, padded base64 of
// RFC 4648's standard alphabet); nullopt for anything else.
std::optional<BasicCredentials> parse_basic_authorization(std::string_view value);
// "Bearer <b64token>" (RFC 6750 2.1); the token, a view into value; nullopt for anything else.
std::optional<std::string_view> parse_bearer_authorization(std::string_view value);
// value's scheme (before the first space) is `scheme`, case-insensitively.
bool authorization_scheme_is(std::string_view value, std::string_view scheme) noexcept;

// --- Credential files -----------------------------------------------------------------------
// htpasswd: "user:hash" per line; empty lines and lines starting with '#' are skipped, a
// trailing '\r' is dropped. Only bcrypt hashes ($2y$, $2b$, $2a$ with a cost of 04..31, as
// `htpasswd -B` writes them) are accepted: plain text, MD5-crypt ($apr1$, $1$), SHA-1 ({SHA}),
// SHA-crypt ($5$, $6$) and DES crypt entries are refused naming the line. Duplicate users too.
struct HtpasswdEntry {
  std::string user;
  std::string hash;
};
std::vector<HtpasswdEntry> parse_htpasswd(std::string_view text, std::string_view file);
// Token file: one bearer token per line, either the token itself (RFC 6750 b64token characters)
// or "sha256:<64 hex digits>", the SHA-256 of the token (`printf %s "$tok" | sha256sum`), so
// that the file need not hold the tokens. Empty lines and '#' lines are skipped, spaces around
// a line ignored. Returns the digests (duplicates kept once).
std::vector<Sha256Digest> parse_token_file(std::string_view text, std::string_view file);
// The whole regular file (at most 64 MiB); AuthFileError "<file>: <strerror>" when it cannot be
// read, "<file>: not a regular file" for a FIFO, device or directory.
std::string read_credential_file(const std::string& path);

// Users and their bcrypt hashes. Immutable: share it, swap it whole on a reload.
class HtpasswdUsers {
 public:
  static std::shared_ptr<const HtpasswdUsers> load(const std::string& path);  // throws AuthFileError
  static std::shared_ptr<const HtpasswdUsers> from_entries(std::vector<HtpasswdEntry> entries);
  // bcrypt (milliseconds: call it off the workers, see offload()). False for an unknown user,
  // after a bcrypt all the same.
  bool verify(std::string_view user, std::string_view password) const;
  std::size_t size() const noexcept { return users_.size(); }

 private:
  std::unordered_map<std::string, std::string> users_;  // user -> hash
  std::string decoy_;  // a hash checked for unknown users (the first entry's)
};

// Bearer tokens as SHA-256 digests. Immutable.
class BearerTokens {
 public:
  static std::shared_ptr<const BearerTokens> load(const std::string& path);  // throws AuthFileError
  static std::shared_ptr<const BearerTokens> from_digests(std::vector<Sha256Digest> digests);
  // SHA-256 of token, found by its first 8 bytes, then compared whole in constant time.
  bool contains(std::string_view token) const;
  std::size_t size() const noexcept { return by_prefix_.size(); }

 private:
  std::unordered_multimap<uint64_t, Sha256Digest> by_prefix_;
};

// --- Client certificates --------------------------------------------------------------------
// The subject in RFC 2253 form ("CN=ops,O=Example": most specific RDN first, as
// `openssl x509 -noout -subject -nameopt RFC2253` prints it).
std::string certificate_subject(x509_st* cert);
// Its subjectAltNames as "DNS:name", "email:addr", "URI:uri" (other kinds left out).
std::vector<std::string> certificate_sans(x509_st* cert);
struct ClientCertRule {
  std::vector<std::string> subjects{};  // exact RFC 2253 strings
  std::vector<std::string> sans{};  // exact "DNS:..", "email:..", "URI:.." strings
  // No lists: any verified certificate. Else the subject or one SAN must be listed.
  bool allows(x509_st* cert) const;
};

// --- The verified-credential cache ----------------------------------------------------------
class CredentialCache {
 public:
  using Key = Sha256Digest;
  explicit CredentialCache(std::size_t capacity = 1024);
  // HMAC-SHA-256 of value under the process's random key (drawn once, RAND_bytes).
  static Key key_of(std::string_view value);
  bool contains(const Key& k) const;
  // The generation a verification starts in; insert() drops a key verified before a clear().
  uint64_t generation() const noexcept { return generation_.load(std::memory_order_acquire); }
  void insert(const Key& k, uint64_t generation);
  void clear();
  std::size_t size() const;
  std::size_t capacity() const noexcept { return capacity_; }

 private:
  struct KeyHash {
    std::size_t operator()(const Key& k) const noexcept;
  };
  const std::size_t capacity_;
  mutable SpinLock mu_;
  std::unordered_set<Key, KeyHash> set_;  // under mu_
  std::deque<Key> order_;  // insertion order, for eviction; under mu_
  std::atomic<uint64_t> generation_{0};
};

// --- The brute-force brake ------------------------------------------------------------------
struct BrakeOptions {
  uint32_t max_failures = 10;  // 0: no brake
  Duration failure_window = std::chrono::seconds(60);
  Duration block_for = std::chrono::seconds(300);
  std::size_t max_addresses = 10000;
};
class AuthBrake {
 public:
  explicit AuthBrake(BrakeOptions o);
  // How long addr stays blocked (> 0), or nullopt.
  std::optional<Duration> blocked(const Address& addr, TimePoint now);
  // Counts a failure; true if it started a block.
  bool failure(const Address& addr, TimePoint now);
  void success(const Address& addr);
  std::size_t size() const;

 private:
  struct Entry {
    std::string key;
    TimePoint window_start{};
    TimePoint blocked_until{};
    uint32_t failures = 0;
  };
  static std::string key_of(const Address& a);  // the IP bytes, without the port
  const BrakeOptions o_;
  mutable SpinLock mu_;
  std::list<Entry> lru_;  // most recent first; under mu_
  std::unordered_map<std::string_view, std::list<Entry>::iterator> index_;  // keys view into lru_
};

// --- The wrapper ----------------------------------------------------------------------------
enum class AuthKind { kBasic, kBearer, kClientCert };
struct AuthOptions {
  AuthKind kind = AuthKind::kBasic;
  std::string realm = "lionet";  // no '"', '\' or control characters (not escaped)
  ClientCertRule client_cert{};  // kClientCert
  BrakeOptions brake{};  // kBasic, kBearer
  std::size_t cache_entries = 1024;  // kBasic: 0 = no cache (bcrypt on every request)
};
struct AuthStats {
  Counter successes;
  Counter failures;  // wrong or missing credentials (401/403)
  Counter braked;  // refused by the brake (429)
};

class Authenticator : public std::enable_shared_from_this<Authenticator> {
 public:
  explicit Authenticator(AuthOptions o);
  // The credentials in use; each call empties the cache (a reload).
  void set_users(std::shared_ptr<const HtpasswdUsers> users);
  void set_tokens(std::shared_ptr<const BearerTokens> tokens);
  // True: the request may go on. False: res holds the refusal (401/403/429).
  bool check(Request& req, Response& res);
  // inner behind check() (the Authenticator is kept alive by the handler).
  Handler wrap(Handler inner);
  const AuthStats& stats() const noexcept { return stats_; }
  const AuthOptions& options() const noexcept { return o_; }
  const CredentialCache& cache() const noexcept { return cache_; }
  const AuthBrake& brake() const noexcept { return brake_; }

 private:
  bool check_basic(Request& req, Response& res, std::string_view value);
  bool check_bearer(Request& req, Response& res, std::string_view value);
  void refuse(Response& res, bool given, const Address* peer);

  const AuthOptions o_;
  std::string challenge_;  // the WWW-Authenticate value without credentials
  std::string invalid_challenge_;  // Bearer with error="invalid_token"
  mutable SpinLock creds_mu_;  // guards users_/tokens_ (a shared_ptr copy; never across a park)
  std::shared_ptr<const HtpasswdUsers> users_;
  std::shared_ptr<const BearerTokens> tokens_;
  CredentialCache cache_;
  AuthBrake brake_;
  AuthStats stats_;
};

}  // namespace lionet::http
