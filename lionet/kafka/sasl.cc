// lionet/kafka/sasl.cc: the users file, SCRAM and PLAIN (see sasl.h).
#include "lionet/kafka/sasl.h"

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/rand.h>

#include <cstdio>
#include <cstring>

#include "lionet/base/base64.h"
#include "lionet/base/read_file.h"

namespace lionet::kafka {
namespace {

const EVP_MD* digest(SaslMechanism m) { return m == SaslMechanism::kScramSha512 ? EVP_sha512() : EVP_sha256(); }

std::string hmac(const EVP_MD* md, std::string_view key, std::string_view data) {
  unsigned char out[EVP_MAX_MD_SIZE];
  unsigned int n = 0;
  HMAC(md, key.data(), static_cast<int>(key.size()), reinterpret_cast<const unsigned char*>(data.data()), data.size(),
       out, &n);
  return std::string(reinterpret_cast<char*>(out), n);
}

std::string hash(const EVP_MD* md, std::string_view data) {
  unsigned char out[EVP_MAX_MD_SIZE];
  unsigned int n = 0;
  EVP_Digest(data.data(), data.size(), out, &n, md, nullptr);
  return std::string(reinterpret_cast<char*>(out), n);
}

std::string random_bytes(std::size_t n) {
  std::string s(n, '\0');
  if (RAND_bytes(reinterpret_cast<unsigned char*>(s.data()), static_cast<int>(n)) != 1)
    throw std::runtime_error("RAND_bytes failed");
  return s;
}

bool equal_secret(std::string_view a, std::string_view b) {
  return a.size() == b.size() && CRYPTO_memcmp(a.data(), b.data(), a.size()) == 0;
}

// The value of "k=" at the front of `part`, or nullopt.
std::optional<std::string_view> attr(std::string_view part, char k) {
  if (part.size() < 2 || part[0] != k || part[1] != '=') return std::nullopt;
  return part.substr(2);
}

// Splits at the first ','; `rest` is what follows (npos: nothing).
std::string_view next_part(std::string_view& s, bool& more) {
  const std::size_t c = s.find(',');
  std::string_view part = s.substr(0, c);
  more = c != std::string_view::npos;
  s = more ? s.substr(c + 1) : std::string_view();
  return part;
}

// saslname (RFC 5802 5.1): "=2C" is ',', "=3D" is '=', any other '=' is malformed.
bool unescape_saslname(std::string_view in, std::string& out) {
  out.clear();
  for (std::size_t i = 0; i < in.size(); ++i) {
    if (in[i] == '=') {
      if (in.substr(i, 3) == "=2C") out.push_back(',');
      else if (in.substr(i, 3) == "=3D") out.push_back('=');
      else return false;
      i += 2;
    } else {
      out.push_back(in[i]);
    }
  }
  return true;
}

bool printable_nonce(std::string_view n) {
  if (n.empty()) return false;
  for (char c : n)
    if (c < 0x21 || c > 0x7e || c == ',') return false;
  return true;
}

std::string xor_bytes(std::string_view a, std::string_view b) {
  std::string r(a.size(), '\0');
  for (std::size_t i = 0; i < a.size(); ++i) r[i] = static_cast<char>(a[i] ^ b[i]);
  return r;
}

}  // namespace

std::string_view mechanism_name(SaslMechanism m) noexcept {
  switch (m) {
    case SaslMechanism::kPlain: return "PLAIN";
    case SaslMechanism::kScramSha256: return "SCRAM-SHA-256";
    case SaslMechanism::kScramSha512: return "SCRAM-SHA-512";
  }
  return "?";
}

std::optional<SaslMechanism> parse_mechanism(std::string_view name) noexcept {
  for (int i = 0; i < kSaslMechanismCount; ++i)
    if (mechanism_name(static_cast<SaslMechanism>(i)) == name) return static_cast<SaslMechanism>(i);
  return std::nullopt;
}

ScramCredential scram_credential(SaslMechanism m, std::string_view password, std::string_view salt, int iterations) {
  const EVP_MD* md = digest(m);
  std::string salted(static_cast<std::size_t>(EVP_MD_get_size(md)), '\0');
  PKCS5_PBKDF2_HMAC(password.data(), static_cast<int>(password.size()),
                    reinterpret_cast<const unsigned char*>(salt.data()), static_cast<int>(salt.size()), iterations, md,
                    static_cast<int>(salted.size()), reinterpret_cast<unsigned char*>(salted.data()));
  ScramCredential c;
  c.salt = std::string(salt);
  c.iterations = iterations;
  c.stored_key = hash(md, hmac(md, salted, "Client Key"));
  c.server_key = hmac(md, salted, "Server Key");
  OPENSSL_cleanse(salted.data(), salted.size());
  return c;
}

// ---------------------------------------------------------------- SaslUsers

namespace {
// Calls `entry(line_no, name, password)` per user line; returns "" or the first error.
template <typename F>
std::string scan_users(std::string_view text, F&& entry) {
  std::size_t line_no = 0;
  while (!text.empty()) {
    const std::size_t nl = text.find('\n');
    std::string_view line = text.substr(0, nl);
    text = nl == std::string_view::npos ? std::string_view() : text.substr(nl + 1);
    ++line_no;
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    std::size_t first = 0;
    while (first < line.size() && (line[first] == ' ' || line[first] == '\t')) ++first;
    if (first == line.size() || line[first] == '#') continue;
    const std::string at = "line " + std::to_string(line_no) + ": ";
    const std::size_t colon = line.find(':');
    if (colon == std::string_view::npos) return at + "expected name:password (no ':' found)";
    const std::string_view name = line.substr(0, colon), password = line.substr(colon + 1);
    if (name.empty()) return at + "empty user name before ':'";
    for (char c : name)
      if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) return at + "a control character in the user name";
    if (password.empty()) return at + "empty password for user '" + std::string(name) + "'";
    for (char c : password)
      if (c == '\0') return at + "a NUL byte in the password of user '" + std::string(name) + "'";
    if (std::string e = entry(name, password); !e.empty()) return at + e;
  }
  return {};
}
}  // namespace

std::unique_ptr<SaslUsers> SaslUsers::parse(std::string_view text, std::string& error, int iterations) {
  auto u = std::make_unique<SaslUsers>();
  u->iterations_ = iterations;
  u->decoy_secret_ = random_bytes(32);
  error = scan_users(text, [&](std::string_view name, std::string_view password) -> std::string {
    if (u->users_.find(name) != u->users_.end()) return "user '" + std::string(name) + "' is given twice";
    User& user = u->users_[std::string(name)];
    user.sha256 = scram_credential(SaslMechanism::kScramSha256, password, random_bytes(16), iterations);
    user.sha512 = scram_credential(SaslMechanism::kScramSha512, password, random_bytes(16), iterations);
    return {};
  });
  if (!error.empty()) return nullptr;
  return u;
}

namespace {
// The users file whole into `text`, or why not ("SASL users file <path>: ..."): it must be a
// regular file of at most 64 MiB, readable by its owner only.
std::string read_users_file(const std::string& path, std::string& text) {
  const ReadFileResult r = read_regular_file(path, 64u << 20, text);
  const std::string what = "SASL users file " + path;
  if (r.error == ReadFileResult::kOpen) return what + ": cannot open: " + r.reason();
  if (r.error == ReadFileResult::kNotRegular) return what + ": " + r.reason();
  std::string error;
  if ((r.st.st_mode & 077) != 0) {
    char mode[8];
    std::snprintf(mode, sizeof mode, "%04o", static_cast<unsigned>(r.st.st_mode & 07777));
    error = what + " is mode " + mode + ": it holds passwords and must be readable by its owner only (chmod 600 " +
            path + ")";
  } else if (r.error == ReadFileResult::kRead) {
    error = what + ": cannot read: " + r.reason();
  } else if (!r.ok()) {
    error = what + ": " + r.reason();
  }
  if (!error.empty()) OPENSSL_cleanse(text.data(), text.size());
  return error;
}
}  // namespace

std::unique_ptr<SaslUsers> SaslUsers::load(const std::string& path, std::string& error, int iterations) {
  std::string text;
  error = read_users_file(path, text);
  if (!error.empty()) return nullptr;
  auto u = parse(text, error, iterations);
  OPENSSL_cleanse(text.data(), text.size());
  if (!u) error = "SASL users file " + path + ": " + error;
  return u;
}

std::string SaslUsers::check_file(const std::string& path) {
  std::string text;
  if (std::string e = read_users_file(path, text); !e.empty()) return e;
  std::map<std::string, int, std::less<>> seen;
  std::string error = scan_users(text, [&](std::string_view name, std::string_view) -> std::string {
    if (!seen.emplace(std::string(name), 0).second) return "user '" + std::string(name) + "' is given twice";
    return {};
  });
  OPENSSL_cleanse(text.data(), text.size());
  return error.empty() ? error : "SASL users file " + path + ": " + error;
}

const SaslUsers::User* SaslUsers::find(std::string_view name) const noexcept {
  auto it = users_.find(name);
  return it == users_.end() ? nullptr : &it->second;
}

const ScramCredential& SaslUsers::decoy(SaslMechanism m, std::string_view name, ScramCredential& scratch) const {
  const EVP_MD* md = digest(m);
  scratch.salt =
      hmac(EVP_sha256(), decoy_secret_, std::string(mechanism_name(m)) + ":" + std::string(name)).substr(0, 16);
  scratch.iterations = iterations_;
  scratch.stored_key = hash(md, decoy_secret_ + "stored");
  scratch.server_key = hash(md, decoy_secret_ + "server");
  return scratch;
}

// ---------------------------------------------------------------- parsers

const char* parse_scram_client_first(std::string_view msg, ScramClientFirst& out) {
  out = ScramClientFirst{};
  std::string_view s = msg;
  bool more = false;
  const std::string_view cbind = next_part(s, more);
  if (!more) return "client-first: no gs2 header";
  if (cbind.substr(0, 2) == "p=") return "client-first: channel binding is not supported";
  if (cbind != "n" && cbind != "y") return "client-first: bad gs2 channel-binding flag";
  const std::string_view authz = next_part(s, more);
  if (!more) return "client-first: no gs2 header";
  if (!authz.empty()) {
    auto a = attr(authz, 'a');
    if (!a || a->empty()) return "client-first: bad authzid";
    out.authzid = *a;
  }
  out.gs2_header = msg.substr(0, msg.size() - s.size());
  out.bare = s;
  std::string_view part = next_part(s, more);
  if (part.substr(0, 2) == "m=") return "client-first: mandatory extensions are not supported";
  auto n = attr(part, 'n');
  if (!n || n->empty() || !more) return "client-first: no user name";
  if (!unescape_saslname(*n, out.user)) return "client-first: bad '=' escape in the user name";
  part = next_part(s, more);
  auto r = attr(part, 'r');
  if (!r || !printable_nonce(*r)) return "client-first: no nonce";
  out.nonce = *r;
  // Extensions after the nonce (Kafka's tokenauth=true, ...) are ignored; each must be k=v.
  while (more) {
    part = next_part(s, more);
    if (part.size() < 2 || part.find('=') == std::string_view::npos) return "client-first: bad extension";
  }
  if (!out.authzid.empty()) {
    std::string az;
    if (!unescape_saslname(out.authzid, az) || az != out.user) return "client-first: authzid is not the user name";
  }
  return nullptr;
}

const char* parse_scram_client_final(std::string_view msg, ScramClientFinal& out) {
  out = ScramClientFinal{};
  const std::size_t p = msg.rfind(",p=");
  if (p == std::string_view::npos) return "client-final: no proof";
  out.without_proof = msg.substr(0, p);
  out.proof = msg.substr(p + 3);
  if (out.proof.empty() || out.proof.find(',') != std::string_view::npos) return "client-final: bad proof";
  std::string_view s = out.without_proof;
  bool more = false;
  auto c = attr(next_part(s, more), 'c');
  if (!c || !more) return "client-final: no channel binding";
  out.channel_binding = *c;
  auto r = attr(next_part(s, more), 'r');
  if (!r || !printable_nonce(*r)) return "client-final: no nonce";
  out.nonce = *r;
  while (more) {
    const std::string_view part = next_part(s, more);
    if (part.size() < 2 || part.find('=') == std::string_view::npos) return "client-final: bad extension";
  }
  return nullptr;
}

const char* parse_plain(std::string_view msg, PlainToken& out) {
  out = PlainToken{};
  const std::size_t a = msg.find('\0');
  if (a == std::string_view::npos) return "PLAIN: no NUL after the authzid";
  const std::size_t b = msg.find('\0', a + 1);
  if (b == std::string_view::npos) return "PLAIN: no NUL after the user name";
  out.authzid = msg.substr(0, a);
  out.user = msg.substr(a + 1, b - a - 1);
  out.password = msg.substr(b + 1);
  if (out.user.empty()) return "PLAIN: empty user name";
  if (out.password.empty()) return "PLAIN: empty password";
  if (out.password.find('\0') != std::string_view::npos) return "PLAIN: a NUL in the password";
  if (!out.authzid.empty() && out.authzid != out.user) return "PLAIN: authzid is not the user name";
  return nullptr;
}

// ---------------------------------------------------------------- SaslExchange

SaslExchange::SaslExchange(const SaslUsers& users, SaslMechanism m, std::string server_nonce)
    : users_(users), mech_(m), server_nonce_(std::move(server_nonce)) {
  if (server_nonce_.empty() && m != SaslMechanism::kPlain) server_nonce_ = base64_encode(random_bytes(18));
}

SaslExchange::Step SaslExchange::fail(std::string why) {
  state_ = 2;
  error_ = std::move(why);
  return Step::kFailed;
}

SaslExchange::Step SaslExchange::step(std::string_view in, std::string& out) {
  out.clear();
  if (state_ == 2) return fail("the exchange is over");
  const std::string failed =
      "Authentication failed during authentication due to invalid credentials with SASL mechanism " +
      std::string(mechanism_name(mech_));
  if (mech_ == SaslMechanism::kPlain) {
    PlainToken t;
    if (const char* why = parse_plain(in, t)) return fail(why);
    const SaslUsers::User* u = users_.find(t.user);
    ScramCredential scratch;
    const ScramCredential& c = u ? u->sha256 : users_.decoy(SaslMechanism::kScramSha256, t.user, scratch);
    const ScramCredential got = scram_credential(SaslMechanism::kScramSha256, t.password, c.salt, c.iterations);
    const bool ok = equal_secret(got.stored_key, c.stored_key) && u != nullptr;
    state_ = 2;
    if (!ok) return fail(failed);
    principal_ = std::string(t.user);
    return Step::kDone;
  }
  const EVP_MD* md = digest(mech_);
  if (state_ == 0) {
    ScramClientFirst f;
    if (const char* why = parse_scram_client_first(in, f)) return fail(why);
    user_ = f.user;
    client_first_bare_ = std::string(f.bare);
    const SaslUsers::User* u = users_.find(user_);
    known_ = u != nullptr;
    if (u) cred_ = mech_ == SaslMechanism::kScramSha512 ? u->sha512 : u->sha256;
    else users_.decoy(mech_, user_, cred_);
    nonce_ = std::string(f.nonce) + server_nonce_;
    server_first_ = "r=" + nonce_ + ",s=" + base64_encode(cred_.salt) + ",i=" + std::to_string(cred_.iterations);
    // The gs2 header, as c= must carry it back.
    nonce_ += '\n' + base64_encode(f.gs2_header);
    state_ = 1;
    out = server_first_;
    return Step::kContinue;
  }
  ScramClientFinal f;
  if (const char* why = parse_scram_client_final(in, f)) return fail(why);
  const std::size_t nl = nonce_.find('\n');
  const std::string_view nonce = std::string_view(nonce_).substr(0, nl);
  const std::string_view cbind = std::string_view(nonce_).substr(nl + 1);
  // RFC 5802 wants r= to be the server-first's nonce; librdkafka (up to 2.x at least) sends its own
  // nonce before it again. Kafka accepts any r= that ends with its nonce, and so does this.
  if (f.nonce.size() < nonce.size() || f.nonce.substr(f.nonce.size() - nonce.size()) != nonce)
    return fail("client-final: the nonce is not the one of this exchange");
  if (f.channel_binding != cbind) return fail("client-final: the channel binding is not the gs2 header sent first");
  auto proof = base64_decode(f.proof);
  if (!proof || proof->size() != cred_.stored_key.size()) return fail("client-final: bad proof");
  const std::string auth_message = client_first_bare_ + "," + server_first_ + "," + std::string(f.without_proof);
  const std::string client_signature = hmac(md, cred_.stored_key, auth_message);
  const std::string client_key = xor_bytes(*proof, client_signature);
  const bool ok = equal_secret(hash(md, client_key), cred_.stored_key) && known_;
  state_ = 2;
  if (!ok) return fail(failed);
  principal_ = user_;
  out = "v=" + base64_encode(hmac(md, cred_.server_key, auth_message));
  return Step::kDone;
}

}  // namespace lionet::kafka
