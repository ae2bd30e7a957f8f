// lionet/ssl/ssl_context.cc: SslContext (see ssl_context.h for the defaults and why).
#include "lionet/ssl/ssl_context.h"

#include <openssl/err.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>
#include <unistd.h>

#include <sys/stat.h>
#include <cerrno>
#include <cstring>
#include <fstream>

#include "lionet/ssl/detail/ssl_errors.h"

namespace lionet {
namespace {

// TLS <= 1.2: ECDHE key exchange and AEAD ciphers only (Mozilla "intermediate" minus DHE,
// which needs DH parameters). TLS 1.3 suites are all AEAD already.
constexpr const char* kDefaultCiphers =
    "ECDHE-ECDSA-AES128-GCM-SHA256:ECDHE-RSA-AES128-GCM-SHA256:"
    "ECDHE-ECDSA-AES256-GCM-SHA384:ECDHE-RSA-AES256-GCM-SHA384:"
    "ECDHE-ECDSA-CHACHA20-POLY1305:ECDHE-RSA-CHACHA20-POLY1305";

int ex_index() {
  static const int idx = SSL_CTX_get_ex_new_index(0, nullptr, nullptr, nullptr, nullptr);
  return idx;
}

[[noreturn]] void fail(const std::string& what) {
  std::string msg = "lionet: TLS " + what;
  std::string ossl = ssl_detail::drain_errors();
  if (!ossl.empty()) msg += " (" + ossl + ")";
  throw SslError(msg);
}

// A readable regular file, else SslError naming it (OpenSSL's own messages do not).
void check_readable(const std::string& role, const std::string& path) {
  if (path.empty()) fail(role + ": no file given");
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) fail(role + " " + path + ": " + std::strerror(errno));
  if (!S_ISREG(st.st_mode)) fail(role + " " + path + ": not a regular file");
  std::ifstream f(path, std::ios::binary);
  if (!f) fail(role + " " + path + ": cannot be read: " + std::strerror(errno ? errno : EACCES));
}

int parse_version(const std::string& v, const char* field) {
  if (v == "TLS1.2") return TLS1_2_VERSION;
  if (v == "TLS1.3") return TLS1_3_VERSION;
  fail(std::string(field) + " \"" + v + "\" is not TLS1.2 or TLS1.3");
}

std::string alpn_wire(const std::vector<std::string>& protos) {
  std::string w;
  for (const auto& p : protos) {
    if (p.empty() || p.size() > 255) fail("ALPN protocol \"" + p + "\" must be 1-255 bytes");
    w += static_cast<char>(p.size());
    w += p;
  }
  return w;
}
}  // namespace

bool SslContext::kernel_offers_ktls() noexcept {
  static const bool offers = [] {
    std::ifstream f("/proc/sys/net/ipv4/tcp_available_ulp");
    std::string word;
    while (f >> word) {
      if (word == "tls") return true;
    }
    return false;
  }();
  return offers;
}

std::shared_ptr<SslContext> SslContext::server(const SslOptions& options) {
  auto c = std::make_shared<SslContext>(Private{}, options, true);
  c->build_server();
  return c;
}

std::shared_ptr<SslContext> SslContext::client(const SslOptions& options) {
  auto c = std::make_shared<SslContext>(Private{}, options, false);
  c->build_client();
  return c;
}

SslContext::SslContext(Private, const SslOptions& options, bool server) : options_(options), server_(server) {
  ssl_detail::clear_errors();  // setup runs on one thread: start from an empty queue
}

SslContext::~SslContext() {
  for (auto& [name, s] : sessions_) SSL_SESSION_free(s);
  for (SSL_CTX* c : ctxs_) SSL_CTX_free(c);
}

SSL_CTX* SslContext::new_ctx() {
  SSL_CTX* ctx = SSL_CTX_new(server_ ? TLS_server_method() : TLS_client_method());
  if (!ctx) fail("cannot create an SSL_CTX");
  // Owned from here: a throw below must not leak it.
  ctxs_.push_back(ctx);
  SSL_CTX_set_ex_data(ctx, ex_index(), this);
  if (SSL_CTX_set_min_proto_version(ctx, parse_version(options_.min_version, "min_version")) != 1)
    fail("cannot set min_version " + options_.min_version);
  if (!options_.max_version.empty() &&
      SSL_CTX_set_max_proto_version(ctx, parse_version(options_.max_version, "max_version")) != 1)
    fail("cannot set max_version " + options_.max_version);
  const std::string& ciphers = options_.ciphers.empty() ? std::string(kDefaultCiphers) : options_.ciphers;
  if (SSL_CTX_set_cipher_list(ctx, ciphers.c_str()) != 1) fail("cipher list \"" + ciphers + "\" is invalid");
  if (!options_.ciphersuites.empty() && SSL_CTX_set_ciphersuites(ctx, options_.ciphersuites.c_str()) != 1)
    fail("TLS 1.3 ciphersuites \"" + options_.ciphersuites + "\" are invalid");

  uint64_t ops = SSL_OP_NO_RENEGOTIATION | SSL_OP_NO_COMPRESSION | SSL_OP_CIPHER_SERVER_PREFERENCE |
                 // A peer that closes without close_notify reads as end of stream (HTTP framing
                 // detects truncated bodies itself); see README.
                 SSL_OP_IGNORE_UNEXPECTED_EOF;
  if (!options_.session_tickets) ops |= SSL_OP_NO_TICKET;
  if (ktls_) ops |= SSL_OP_ENABLE_KTLS;
  SSL_CTX_set_options(ctx, ops);
  // The stream's writer retries SSL_write with the same bytes but possibly another address
  // (writev's coalescing buffer); a whole-record write is never split into partial returns.
  // AUTO_RETRY (OpenSSL's default) lets SSL_read go on past a post-handshake message.
  long mode = SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER | SSL_MODE_AUTO_RETRY;
  if (options_.release_buffers) mode |= SSL_MODE_RELEASE_BUFFERS;
  SSL_CTX_set_mode(ctx, mode);
  SSL_CTX_clear_mode(ctx, SSL_MODE_ENABLE_PARTIAL_WRITE);
  return ctx;
}

void SslContext::load_certificate(SSL_CTX* ctx, const SslCertificate& c) const {
  check_readable("certificate", c.cert_chain_file);
  check_readable("private key", c.key_file);
  if (SSL_CTX_use_certificate_chain_file(ctx, c.cert_chain_file.c_str()) != 1)
    fail("certificate " + c.cert_chain_file + " is not a valid PEM certificate chain");
  if (SSL_CTX_use_PrivateKey_file(ctx, c.key_file.c_str(), SSL_FILETYPE_PEM) != 1) {
    // OpenSSL compares the key with the certificate already here.
    unsigned long e = ERR_peek_last_error();
    if (ERR_GET_LIB(e) == ERR_LIB_X509 &&
        (ERR_GET_REASON(e) == X509_R_KEY_VALUES_MISMATCH || ERR_GET_REASON(e) == X509_R_KEY_TYPE_MISMATCH))
      fail("private key " + c.key_file + " does not match certificate " + c.cert_chain_file);
    fail("private key " + c.key_file + " is not a valid PEM private key");
  }
  if (SSL_CTX_check_private_key(ctx) != 1)
    fail("private key " + c.key_file + " does not match certificate " + c.cert_chain_file);
}

void SslContext::build_server() {
  if (options_.certificates.empty()) fail("server: no certificate configured");
  ktls_ = options_.ktls && kernel_offers_ktls();
  alpn_wire_ = alpn_wire(options_.alpn);
  for (const auto& cert : options_.certificates) {
    SSL_CTX* ctx = new_ctx();
    load_certificate(ctx, cert);
    leaf_certs_.push_back(SSL_CTX_get0_certificate(ctx));
    // Resumption by stateless tickets only: no server-side cache (its lock would be shared by
    // every worker's handshakes, and its memory grows with clients).
    SSL_CTX_set_session_cache_mode(ctx, SSL_SESS_CACHE_OFF);
    if (options_.session_tickets) SSL_CTX_set_num_tickets(ctx, static_cast<size_t>(std::max(0, options_.tickets)));
    else SSL_CTX_set_num_tickets(ctx, 0);
    if (!alpn_wire_.empty()) SSL_CTX_set_alpn_select_cb(ctx, &SslContext::on_alpn_select, this);
    if (options_.verify_peer) {
      check_readable("CA file", options_.ca_file);
      if (SSL_CTX_load_verify_locations(ctx, options_.ca_file.c_str(), nullptr) != 1)
        fail("CA file " + options_.ca_file + " cannot be loaded");
      STACK_OF(X509_NAME)* names = SSL_load_client_CA_file(options_.ca_file.c_str());
      if (names) SSL_CTX_set_client_CA_list(ctx, names);
      SSL_CTX_set_verify(
          ctx, SSL_VERIFY_PEER | (options_.peer_certificate_optional ? 0 : SSL_VERIFY_FAIL_IF_NO_PEER_CERT), nullptr);
    }
  }
  // SNI: the default context (the one the SSL objects start with) picks among all of them.
  if (ctxs_.size() > 1) {
    SSL_CTX_set_tlsext_servername_callback(ctxs_.front(), &SslContext::on_servername);
    SSL_CTX_set_tlsext_servername_arg(ctxs_.front(), this);
  }
  // A fixed session id context: required for resumption when client certificates are used.
  static const unsigned char kSidCtx[] = "lionet";
  SSL_CTX_set_session_id_context(ctxs_.front(), kSidCtx, sizeof kSidCtx - 1);
}

void SslContext::build_client() {
  ktls_ = options_.ktls && kernel_offers_ktls();
  SSL_CTX* ctx = new_ctx();
  if (!options_.certificates.empty()) load_certificate(ctx, options_.certificates.front());
  bool verify = options_.verify_peer || !options_.ca_file.empty();
  if (verify) {
    if (!options_.ca_file.empty()) {
      check_readable("CA file", options_.ca_file);
      if (SSL_CTX_load_verify_locations(ctx, options_.ca_file.c_str(), nullptr) != 1)
        fail("CA file " + options_.ca_file + " cannot be loaded");
    } else if (SSL_CTX_set_default_verify_paths(ctx) != 1) {
      fail("cannot load the system trust store");
    }
    SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER, nullptr);
  } else {
    SSL_CTX_set_verify(ctx, SSL_VERIFY_NONE, nullptr);
  }
  alpn_wire_ = alpn_wire(options_.alpn);
  if (!alpn_wire_.empty() && SSL_CTX_set_alpn_protos(ctx, reinterpret_cast<const unsigned char*>(alpn_wire_.data()),
                                                     static_cast<unsigned>(alpn_wire_.size())) != 0)
    fail("cannot set the ALPN list");
  if (options_.session_tickets) {
    // Our own store (by server name): OpenSSL's internal client cache is never consulted by
    // OpenSSL itself, the new-session callback is how TLS 1.3 tickets reach us.
    SSL_CTX_set_session_cache_mode(ctx, SSL_SESS_CACHE_CLIENT | SSL_SESS_CACHE_NO_INTERNAL_STORE);
    SSL_CTX_sess_set_new_cb(ctx, &SslContext::on_new_session);
  } else {
    SSL_CTX_set_session_cache_mode(ctx, SSL_SESS_CACHE_OFF);
  }
}

int SslContext::on_servername(SSL* ssl, int* /*alert*/, void* arg) {
  auto* self = static_cast<SslContext*>(arg);
  const char* name = SSL_get_servername(ssl, TLSEXT_NAMETYPE_host_name);
  if (!name || !*name) return SSL_TLSEXT_ERR_OK;  // no SNI: the default certificate
  size_t len = std::strlen(name);
  if (X509_check_host(self->leaf_certs_[0], name, len, 0, nullptr) == 1) return SSL_TLSEXT_ERR_OK;
  for (size_t i = 1; i < self->ctxs_.size(); ++i) {
    if (X509_check_host(self->leaf_certs_[i], name, len, 0, nullptr) == 1) {
      SSL_set_SSL_CTX(ssl, self->ctxs_[i]);
      return SSL_TLSEXT_ERR_OK;
    }
  }
  return SSL_TLSEXT_ERR_OK;  // unknown name: the default certificate, as nginx does
}

int SslContext::on_alpn_select(SSL*, const unsigned char** out, unsigned char* outlen, const unsigned char* in,
                               unsigned int inlen, void* arg) {
  auto* self = static_cast<SslContext*>(arg);
  unsigned char* sel = nullptr;
  unsigned char sel_len = 0;
  // Server preference: the first of our protocols that the client offers.
  if (SSL_select_next_proto(&sel, &sel_len, reinterpret_cast<const unsigned char*>(self->alpn_wire_.data()),
                            static_cast<unsigned>(self->alpn_wire_.size()), in, inlen) != OPENSSL_NPN_NEGOTIATED)
    return SSL_TLSEXT_ERR_NOACK;
  *out = sel;
  *outlen = sel_len;
  return SSL_TLSEXT_ERR_OK;
}

int SslContext::on_new_session(SSL* ssl, SSL_SESSION* session) {
  auto* self = static_cast<SslContext*>(SSL_CTX_get_ex_data(SSL_get_SSL_CTX(ssl), ex_index()));
  if (!self || !SSL_SESSION_is_resumable(session)) return 0;
  const char* name = SSL_get_servername(ssl, TLSEXT_NAMETYPE_host_name);
  std::string key = name ? name : "";
  std::lock_guard lk(self->sessions_mu_);
  auto [it, inserted] = self->sessions_.try_emplace(std::move(key), session);
  if (!inserted) {
    SSL_SESSION_free(it->second);
    it->second = session;
  }
  return 1;  // we keep the reference
}

SSL_SESSION* SslContext::take_session(std::string_view server_name) const {
  std::lock_guard lk(sessions_mu_);
  auto it = sessions_.find(server_name);
  if (it == sessions_.end()) return nullptr;
  SSL_SESSION_up_ref(it->second);
  return it->second;
}
}  // namespace lionet
