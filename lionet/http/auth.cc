// lionet/http/auth.cc: the parsers, credential sets, cache, brake and Authenticator of auth.h.
#include "lionet/http/auth.h"

#include <crypt.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/rand.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstring>
#include <system_error>

#include "lionet/base/base64.h"
#include "lionet/base/read_file.h"
#include "lionet/http/headers.h"
#include "lionet/http/status.h"
#include "lionet/sync/offload.h"

namespace lionet::http {
namespace {

std::string at_line(std::string_view file, std::size_t line) {
  return std::string(file) + ":" + std::to_string(line) + ": ";
}

bool is_b64token_char(unsigned char c) noexcept {
  return std::isalnum(c) || c == '-' || c == '.' || c == '_' || c == '~' || c == '+' || c == '/';
}

// The credentials part after "<scheme> " (1+ spaces), or nullopt.
std::optional<std::string_view> after_scheme(std::string_view value, std::string_view scheme) {
  if (value.size() > kMaxAuthorizationBytes) return std::nullopt;
  if (!authorization_scheme_is(value, scheme)) return std::nullopt;
  std::string_view rest = value.substr(scheme.size());
  if (rest.empty() || rest[0] != ' ') return std::nullopt;
  while (!rest.empty() && rest[0] == ' ') rest.remove_prefix(1);
  while (!rest.empty() && (rest.back() == ' ' || rest.back() == '\t')) rest.remove_suffix(1);
  if (rest.empty()) return std::nullopt;
  return rest;
}

bool is_bcrypt_char(unsigned char c) noexcept { return std::isalnum(c) || c == '.' || c == '/'; }

// Why `hash` is not a bcrypt hash htpasswd -B would write, or "" when it is one.
std::string bcrypt_problem(std::string_view h) {
  auto refuse = [](std::string_view what) {
    return std::string(what) + " entries are refused: only bcrypt is accepted (make them with htpasswd -B)";
  };
  if (h.starts_with("$apr1$")) return refuse("MD5-crypt ($apr1$)");
  if (h.starts_with("$1$")) return refuse("MD5-crypt ($1$)");
  if (h.starts_with("{SHA}")) return refuse("SHA-1 ({SHA})");
  if (h.starts_with("$5$") || h.starts_with("$6$")) return refuse("SHA-crypt ($5$/$6$)");
  if (!h.starts_with("$2")) return refuse("plain-text or DES crypt");
  if (h.size() != 60 || (h[2] != 'y' && h[2] != 'b' && h[2] != 'a') || h[3] != '$' || h[6] != '$' ||
      !std::isdigit(static_cast<unsigned char>(h[4])) || !std::isdigit(static_cast<unsigned char>(h[5])))
    return "not a well-formed bcrypt hash ($2y$NN$ and 53 characters)";
  const int cost = (h[4] - '0') * 10 + (h[5] - '0');
  if (cost < 4 || cost > 31) return "bcrypt cost " + std::to_string(cost) + " is outside 04..31";
  for (std::size_t i = 7; i < h.size(); ++i)
    if (!is_bcrypt_char(static_cast<unsigned char>(h[i]))) return "not a well-formed bcrypt hash (bad character)";
  return {};
}

template <class F>
void for_each_text_line(std::string_view text, F&& f) {
  std::size_t line = 0;
  while (!text.empty()) {
    ++line;
    const std::size_t nl = text.find('\n');
    std::string_view l = text.substr(0, nl);
    text = nl == std::string_view::npos ? std::string_view() : text.substr(nl + 1);
    if (!l.empty() && l.back() == '\r') l.remove_suffix(1);
    f(line, l);
  }
}

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

int hex_value(unsigned char c) noexcept {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

uint64_t prefix64(const Sha256Digest& d) noexcept {
  uint64_t v;
  std::memcpy(&v, d.data(), sizeof v);
  return v;
}

// HMAC-SHA-256's inner and outer states after the key blocks (RFC 2104), computed once: a key
// then costs two state copies and two short hashes.
struct HmacKey {
  EVP_MD_CTX* inner = nullptr;
  EVP_MD_CTX* outer = nullptr;
  HmacKey() {
    unsigned char key[32];
    if (RAND_bytes(key, sizeof key) != 1) throw std::runtime_error("auth: RAND_bytes failed");
    unsigned char ipad[64], opad[64];
    for (int i = 0; i < 64; ++i) {
      const unsigned char k = i < 32 ? key[i] : 0;
      ipad[i] = k ^ 0x36;
      opad[i] = k ^ 0x5c;
    }
    OPENSSL_cleanse(key, sizeof key);
    inner = EVP_MD_CTX_new();
    outer = EVP_MD_CTX_new();
    if (!inner || !outer || EVP_DigestInit_ex(inner, EVP_sha256(), nullptr) != 1 ||
        EVP_DigestUpdate(inner, ipad, 64) != 1 || EVP_DigestInit_ex(outer, EVP_sha256(), nullptr) != 1 ||
        EVP_DigestUpdate(outer, opad, 64) != 1)
      throw std::runtime_error("auth: SHA-256 unavailable");
    OPENSSL_cleanse(ipad, sizeof ipad);
    OPENSSL_cleanse(opad, sizeof opad);
  }
};
const HmacKey& hmac_key() {
  static const HmacKey k;  // leaked on purpose: used until exit
  return k;
}

struct MdCtx {
  EVP_MD_CTX* c = EVP_MD_CTX_new();
  ~MdCtx() { EVP_MD_CTX_free(c); }
};
}  // namespace

Sha256Digest sha256(std::string_view data) {
  Sha256Digest d{};
  unsigned int n = 0;
  EVP_Digest(data.data(), data.size(), d.data(), &n, EVP_sha256(), nullptr);
  return d;
}

bool constant_time_equal(const void* a, const void* b, std::size_t n) noexcept { return CRYPTO_memcmp(a, b, n) == 0; }

bool authorization_scheme_is(std::string_view value, std::string_view scheme) noexcept {
  return value.size() >= scheme.size() && iequals(value.substr(0, scheme.size()), scheme) &&
         (value.size() == scheme.size() || value[scheme.size()] == ' ');
}

std::optional<BasicCredentials> parse_basic_authorization(std::string_view value) {
  auto token = after_scheme(value, "Basic");
  if (!token) return std::nullopt;
  auto decoded = base64_decode(*token);
  if (!decoded) return std::nullopt;
  const std::size_t colon = decoded->find(':');
  if (colon == std::string::npos) return std::nullopt;
  BasicCredentials c{decoded->substr(0, colon), decoded->substr(colon + 1)};
  OPENSSL_cleanse(decoded->data(), decoded->size());
  return c;
}

std::optional<std::string_view> parse_bearer_authorization(std::string_view value) {
  auto token = after_scheme(value, "Bearer");
  if (!token) return std::nullopt;
  std::size_t i = 0;
  while (i < token->size() && is_b64token_char(static_cast<unsigned char>((*token)[i]))) ++i;
  if (i == 0) return std::nullopt;
  while (i < token->size() && (*token)[i] == '=') ++i;
  if (i != token->size()) return std::nullopt;
  return token;
}

std::vector<HtpasswdEntry> parse_htpasswd(std::string_view text, std::string_view file) {
  std::vector<HtpasswdEntry> out;
  std::unordered_map<std::string, std::size_t> seen;
  for_each_text_line(text, [&](std::size_t line, std::string_view l) {
    if (l.empty() || l[0] == '#') return;
    const std::size_t colon = l.find(':');
    if (colon == std::string_view::npos) throw AuthFileError(at_line(file, line) + "not user:hash (no ':')");
    if (colon == 0) throw AuthFileError(at_line(file, line) + "empty user name");
    std::string_view user = l.substr(0, colon), hash = l.substr(colon + 1);
    for (unsigned char c : user)
      if (c < 0x20 || c == 0x7f) throw AuthFileError(at_line(file, line) + "control character in the user name");
    // htpasswd may append ":comment" fields after the hash: not bcrypt's, so refused below.
    if (std::string why = bcrypt_problem(hash); !why.empty()) throw AuthFileError(at_line(file, line) + why);
    auto [it, fresh] = seen.emplace(std::string(user), line);
    if (!fresh)
      throw AuthFileError(at_line(file, line) + "user '" + it->first + "' is also on line " +
                          std::to_string(it->second));
    out.push_back({std::string(user), std::string(hash)});
  });
  return out;
}

std::vector<Sha256Digest> parse_token_file(std::string_view text, std::string_view file) {
  std::vector<Sha256Digest> out;
  for_each_text_line(text, [&](std::size_t line, std::string_view l) {
    l = trim(l);
    if (l.empty() || l[0] == '#') return;
    Sha256Digest d{};
    if (l.starts_with("sha256:")) {
      const std::string_view hex = l.substr(7);
      if (hex.size() != 64) throw AuthFileError(at_line(file, line) + "sha256: needs 64 hex digits");
      for (std::size_t i = 0; i < 32; ++i) {
        const int hi = hex_value(static_cast<unsigned char>(hex[2 * i]));
        const int lo = hex_value(static_cast<unsigned char>(hex[2 * i + 1]));
        if (hi < 0 || lo < 0) throw AuthFileError(at_line(file, line) + "sha256: needs 64 hex digits");
        d[i] = static_cast<unsigned char>(hi * 16 + lo);
      }
    } else {
      if (!parse_bearer_authorization("Bearer " + std::string(l)))
        throw AuthFileError(at_line(file, line) +
                            "not a bearer token (RFC 6750 b64token: letters, digits, -._~+/ then '='s) nor "
                            "sha256:<hex>");
      d = sha256(l);
    }
    if (std::find(out.begin(), out.end(), d) == out.end()) out.push_back(d);
  });
  return out;
}

std::string read_credential_file(const std::string& path) {
  std::string out;
  const ReadFileResult r = read_regular_file(path, std::size_t{64} << 20, out);
  if (!r.ok()) {
    OPENSSL_cleanse(out.data(), out.size());
    throw AuthFileError(path + ": " + r.reason());
  }
  return out;
}

std::shared_ptr<const HtpasswdUsers> HtpasswdUsers::load(const std::string& path) {
  std::string text = read_credential_file(path);
  auto users = from_entries(parse_htpasswd(text, path));
  OPENSSL_cleanse(text.data(), text.size());
  return users;
}

std::shared_ptr<const HtpasswdUsers> HtpasswdUsers::from_entries(std::vector<HtpasswdEntry> entries) {
  auto u = std::make_shared<HtpasswdUsers>();
  for (auto& e : entries) {
    if (u->decoy_.empty()) u->decoy_ = e.hash;
    u->users_.insert_or_assign(std::move(e.user), std::move(e.hash));
  }
  return u;
}

bool HtpasswdUsers::verify(std::string_view user, std::string_view password) const {
  const auto it = users_.find(std::string(user));
  const bool known = it != users_.end();
  const std::string& hash = known ? it->second : decoy_;
  if (hash.empty()) return false;  // no users at all
  // crypt_rn's work area is ~32 KiB: one per thread (a pool thread's stack need not hold it).
  thread_local std::unique_ptr<crypt_data> data = std::make_unique<crypt_data>();
  std::memset(data.get(), 0, sizeof(crypt_data));
  const std::string phrase(password);
  const char* out = crypt_rn(phrase.c_str(), hash.c_str(), data.get(), sizeof(crypt_data));
  bool ok = out != nullptr && out[0] != '*' && std::strlen(out) == hash.size() &&
            constant_time_equal(out, hash.data(), hash.size());
  OPENSSL_cleanse(data.get(), sizeof(crypt_data));
  return ok && known;
}

std::shared_ptr<const BearerTokens> BearerTokens::load(const std::string& path) {
  std::string text = read_credential_file(path);
  auto t = from_digests(parse_token_file(text, path));
  OPENSSL_cleanse(text.data(), text.size());
  return t;
}

std::shared_ptr<const BearerTokens> BearerTokens::from_digests(std::vector<Sha256Digest> digests) {
  auto t = std::make_shared<BearerTokens>();
  for (const auto& d : digests) t->by_prefix_.emplace(prefix64(d), d);
  return t;
}

bool BearerTokens::contains(std::string_view token) const {
  const Sha256Digest d = sha256(token);
  bool found = false;
  auto [b, e] = by_prefix_.equal_range(prefix64(d));
  for (auto it = b; it != e; ++it) found |= constant_time_equal(it->second.data(), d.data(), d.size());
  return found;
}

std::string certificate_subject(x509_st* cert) {
  if (!cert) return {};
  BIO* bio = BIO_new(BIO_s_mem());
  if (!bio) return {};
  X509_NAME_print_ex(bio, X509_get_subject_name(cert), 0, XN_FLAG_RFC2253);
  char* data = nullptr;
  const long n = BIO_get_mem_data(bio, &data);
  std::string out(data, n > 0 ? static_cast<std::size_t>(n) : 0);
  BIO_free(bio);
  return out;
}

std::vector<std::string> certificate_sans(x509_st* cert) {
  std::vector<std::string> out;
  if (!cert) return out;
  auto* names = static_cast<GENERAL_NAMES*>(X509_get_ext_d2i(cert, NID_subject_alt_name, nullptr, nullptr));
  if (!names) return out;
  for (int i = 0; i < sk_GENERAL_NAME_num(names); ++i) {
    const GENERAL_NAME* g = sk_GENERAL_NAME_value(names, i);
    const char* kind = g->type == GEN_DNS     ? "DNS:"
                       : g->type == GEN_EMAIL ? "email:"
                       : g->type == GEN_URI   ? "URI:"
                                              : nullptr;
    if (!kind) continue;
    const ASN1_IA5STRING* s = g->d.ia5;
    out.push_back(kind + std::string(reinterpret_cast<const char*>(ASN1_STRING_get0_data(s)),
                                     static_cast<std::size_t>(ASN1_STRING_length(s))));
  }
  GENERAL_NAMES_free(names);
  return out;
}

bool ClientCertRule::allows(x509_st* cert) const {
  if (!cert) return false;
  if (subjects.empty() && sans.empty()) return true;
  if (!subjects.empty()) {
    const std::string subject = certificate_subject(cert);
    if (std::find(subjects.begin(), subjects.end(), subject) != subjects.end()) return true;
  }
  if (!sans.empty()) {
    for (const auto& s : certificate_sans(cert))
      if (std::find(sans.begin(), sans.end(), s) != sans.end()) return true;
  }
  return false;
}

// --- CredentialCache ---------------------------------------------------------------------------

std::size_t CredentialCache::KeyHash::operator()(const Key& k) const noexcept { return prefix64(k); }

CredentialCache::CredentialCache(std::size_t capacity) : capacity_(capacity) {
  hmac_key();  // draw the key now, not on a request
}

CredentialCache::Key CredentialCache::key_of(std::string_view value) {
  const HmacKey& hk = hmac_key();
  thread_local MdCtx ctx;
  Key inner{}, out{};
  unsigned int n = 0;
  EVP_MD_CTX_copy_ex(ctx.c, hk.inner);
  EVP_DigestUpdate(ctx.c, value.data(), value.size());
  EVP_DigestFinal_ex(ctx.c, inner.data(), &n);
  EVP_MD_CTX_copy_ex(ctx.c, hk.outer);
  EVP_DigestUpdate(ctx.c, inner.data(), inner.size());
  EVP_DigestFinal_ex(ctx.c, out.data(), &n);
  return out;
}

bool CredentialCache::contains(const Key& k) const {
  if (capacity_ == 0) return false;
  std::lock_guard<SpinLock> lk(mu_);
  return set_.contains(k);
}

void CredentialCache::insert(const Key& k, uint64_t generation) {
  if (capacity_ == 0) return;
  std::lock_guard<SpinLock> lk(mu_);
  if (generation_.load(std::memory_order_relaxed) != generation) return;  // verified before a reload
  if (!set_.insert(k).second) return;
  order_.push_back(k);
  while (order_.size() > capacity_) {
    set_.erase(order_.front());
    order_.pop_front();
  }
}

void CredentialCache::clear() {
  std::lock_guard<SpinLock> lk(mu_);
  generation_.fetch_add(1, std::memory_order_acq_rel);
  set_.clear();
  order_.clear();
}

std::size_t CredentialCache::size() const {
  std::lock_guard<SpinLock> lk(mu_);
  return set_.size();
}

// --- AuthBrake ---------------------------------------------------------------------------------

AuthBrake::AuthBrake(BrakeOptions o) : o_(o) {}

std::string AuthBrake::key_of(const Address& a) {
  const sockaddr* sa = a.sockaddr_ptr();
  if (a.family() == AF_INET) {
    const auto* in = reinterpret_cast<const sockaddr_in*>(sa);
    return std::string(reinterpret_cast<const char*>(&in->sin_addr), 4);
  }
  if (a.family() == AF_INET6) {
    const auto* in6 = reinterpret_cast<const sockaddr_in6*>(sa);
    return std::string(reinterpret_cast<const char*>(&in6->sin6_addr), 16);
  }
  return "unix";
}

std::optional<Duration> AuthBrake::blocked(const Address& addr, TimePoint now) {
  if (o_.max_failures == 0) return std::nullopt;
  const std::string k = key_of(addr);
  std::lock_guard<SpinLock> lk(mu_);
  auto it = index_.find(k);
  if (it == index_.end() || it->second->blocked_until <= now) return std::nullopt;
  return it->second->blocked_until - now;
}

bool AuthBrake::failure(const Address& addr, TimePoint now) {
  if (o_.max_failures == 0 || o_.max_addresses == 0) return false;
  std::string k = key_of(addr);
  std::lock_guard<SpinLock> lk(mu_);
  auto it = index_.find(k);
  if (it == index_.end()) {
    if (lru_.size() >= o_.max_addresses) {  // full: the least recently failed address goes
      index_.erase(lru_.back().key);
      lru_.pop_back();
    }
    lru_.push_front(Entry{std::move(k), now, {}, 0});
    it = index_.emplace(lru_.front().key, lru_.begin()).first;
  } else {
    lru_.splice(lru_.begin(), lru_, it->second);  // most recent first; the iterator stays valid
  }
  Entry& e = *it->second;
  if (now - e.window_start > o_.failure_window) {  // a new window
    e.window_start = now;
    e.failures = 0;
  }
  if (++e.failures >= o_.max_failures) {
    e.blocked_until = now + o_.block_for;
    e.failures = 0;
    e.window_start = now;
    return true;
  }
  return false;
}

void AuthBrake::success(const Address& addr) {
  if (o_.max_failures == 0) return;
  const std::string k = key_of(addr);
  std::lock_guard<SpinLock> lk(mu_);
  auto it = index_.find(k);
  if (it == index_.end() || it->second->blocked_until > now()) return;
  auto node = it->second;
  index_.erase(it);
  lru_.erase(node);
}

std::size_t AuthBrake::size() const {
  std::lock_guard<SpinLock> lk(mu_);
  return lru_.size();
}

// --- Authenticator -----------------------------------------------------------------------------

Authenticator::Authenticator(AuthOptions o) : o_(std::move(o)), cache_(o_.cache_entries), brake_(o_.brake) {
  if (o_.kind == AuthKind::kBasic) {
    challenge_ = "Basic realm=\"" + o_.realm + "\", charset=\"UTF-8\"";
  } else if (o_.kind == AuthKind::kBearer) {
    challenge_ = "Bearer realm=\"" + o_.realm + "\"";
    invalid_challenge_ = challenge_ + ", error=\"invalid_token\"";
  }
}

void Authenticator::set_users(std::shared_ptr<const HtpasswdUsers> users) {
  {
    std::lock_guard<SpinLock> lk(creds_mu_);
    users_ = std::move(users);
  }
  cache_.clear();
}

void Authenticator::set_tokens(std::shared_ptr<const BearerTokens> tokens) {
  {
    std::lock_guard<SpinLock> lk(creds_mu_);
    tokens_ = std::move(tokens);
  }
  cache_.clear();
}

void Authenticator::refuse(Response& res, bool given, const Address* peer) {
  stats_.failures.add();
  if (given && peer) brake_.failure(*peer, now());
  res.reply(401, error_text(401, "credentials required"));
  res.set_header("WWW-Authenticate", given && !invalid_challenge_.empty() ? invalid_challenge_ : challenge_);
}

bool Authenticator::check(Request& req, Response& res) {
  if (o_.kind == AuthKind::kClientCert) {
    if (o_.client_cert.allows(req.peer_certificate())) {
      stats_.successes.add();
      return true;
    }
    stats_.failures.add();
    res.reply(403, error_text(403, req.peer_certificate() ? "client certificate not allowed here"
                                                          : "a verified client certificate is required"));
    return false;
  }
  std::optional<Address> peer;
  if (auto p = req.peer_address(); p.ok()) peer = p.value();
  if (peer) {
    if (auto left = brake_.blocked(*peer, now())) {
      stats_.braked.add();
      const auto secs = std::chrono::ceil<std::chrono::seconds>(*left).count();
      res.reply(429, error_text(429, "too many failed authentication attempts"));
      res.set_header("Retry-After", std::to_string(std::max<long long>(1, secs)));
      return false;
    }
  }
  const std::string_view value = req.header("Authorization");
  const bool ok = o_.kind == AuthKind::kBasic ? check_basic(req, res, value) : check_bearer(req, res, value);
  if (ok) {
    stats_.successes.add();
    if (peer) brake_.success(*peer);
  } else {
    refuse(res, !value.empty(), peer ? &*peer : nullptr);
  }
  return ok;
}

bool Authenticator::check_basic(Request&, Response&, std::string_view value) {
  if (value.empty()) return false;
  CredentialCache::Key key{};
  if (cache_.capacity() > 0) {
    key = CredentialCache::key_of(value);
    if (cache_.contains(key)) return true;
  }
  auto creds = parse_basic_authorization(value);
  if (!creds) return false;
  const uint64_t generation = cache_.generation();
  std::shared_ptr<const HtpasswdUsers> users;
  {
    std::lock_guard<SpinLock> lk(creds_mu_);
    users = users_;
  }
  bool ok = users && offload([&] { return users->verify(creds->user, creds->password); });
  OPENSSL_cleanse(creds->password.data(), creds->password.size());
  if (ok && cache_.capacity() > 0) cache_.insert(key, generation);
  return ok;
}

bool Authenticator::check_bearer(Request&, Response&, std::string_view value) {
  if (value.empty()) return false;
  auto token = parse_bearer_authorization(value);
  if (!token) return false;
  std::shared_ptr<const BearerTokens> tokens;
  {
    std::lock_guard<SpinLock> lk(creds_mu_);
    tokens = tokens_;
  }
  return tokens && tokens->contains(*token);
}

Handler Authenticator::wrap(Handler inner) {
  return [self = shared_from_this(), inner = std::move(inner)](Request& q, Response& s) {
    if (self->check(q, s)) inner(q, s);
  };
}

}  // namespace lionet::http
