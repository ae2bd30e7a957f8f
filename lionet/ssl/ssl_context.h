// lionet/ssl/ssl_context.h: lionet::SslContext, one configured OpenSSL SSL_CTX (server or
// client) built from SslOptions, shared by every SslStream of a listener or a client.
//
// Owns: SslOptions, SslError, the SSL_CTX(s) (one per server certificate, chosen by SNI), the
// ALPN wire list, the client's session cache, and the kTLS decision. Must not: touch sockets,
// read configuration files of its own (app/ fills SslOptions), or be changed after creation
// (streams read it from several workers without a lock).
//
//   auto ctx = lionet::SslContext::server({.certificates = {{"cert.pem", "key.pem"}},
//                                          .alpn = {"http/1.1"}});   // throws SslError
//   lionet::SslStream tls(ctx, std::move(socket));
//
// Errors: server() and client() are setup calls and throw SslError whose what() names the file
// at fault ("lionet: TLS private key /etc/k.pem does not match certificate /etc/c.pem").
// Defaults (the "secure by default" set): TLS 1.2 minimum, 1.3 preferred; TLS 1.2 ciphers are
// ECDHE with AEAD only (forward secrecy, no CBC/RC4/3DES), server cipher order; renegotiation
// refused; compression off; stateless TLS 1.3 / RFC 5077 session tickets on (the server keeps
// no session cache, so resumption takes no lock); the client context keeps the newest session
// per server name and offers it on the next connection.
// Concurrency: immutable after construction except the client session cache (its own mutex,
// touched only during handshakes). shared_ptr: streams keep their context alive.
#pragma once

#include <openssl/ssl.h>

#include <map>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "lionet/base/clock.h"

namespace lionet {

struct SslCertificate {
  std::string cert_chain_file{};  // PEM: the leaf first, then intermediates
  std::string key_file{};  // PEM private key matching the leaf
};

// YAML keys given as `YAML: servers[].tls.<key>` (app/ maps them).
struct SslOptions {
  // Server: the first is the default, the others are chosen by SNI (a certificate whose
  // subjectAltName/CN matches the client's server name). Client: an optional client
  // certificate (first entry). YAML: tls.certificates [{cert, key}].
  std::vector<SslCertificate> certificates{};
  // Peers are verified against it when verify_peer. YAML: tls.ca_file.
  std::string ca_file{};
  // Server: require and verify a client certificate. Client: verify the server (also on when
  // ca_file is set; the system trust store is used when ca_file is empty). YAML: tls.verify_peer.
  bool verify_peer = false;
  // Server with verify_peer: a client that sends no certificate still completes the handshake
  // (one it sends is verified all the same; a route decides what a missing one means:
  // SslStream::verified_peer_certificate()). YAML: tls.verify_client: optional.
  bool peer_certificate_optional = false;
  // Client: the SNI name sent and the host name checked when verifying. YAML: tls.server_name.
  std::string server_name{};
  // "TLS1.2" or "TLS1.3". YAML: tls.min_version.
  std::string min_version = "TLS1.2";
  // "" (newest: TLS 1.3), "TLS1.2" or "TLS1.3". Mostly for tests and interop. YAML: tls.max_version.
  std::string max_version{};
  // TLS <= 1.2 cipher list; "" = ECDHE + AES-GCM / ChaCha20-Poly1305 only. YAML: tls.ciphers.
  std::string ciphers{};
  // TLS 1.3 suites; "" = OpenSSL's default (AES-GCM, ChaCha20). YAML: tls.ciphersuites.
  std::string ciphersuites{};
  // ALPN protocols in preference order, e.g. {"http/1.1"}. Server: the first of these the
  // client also offers is selected (none in common: the handshake continues without ALPN).
  // YAML: tls.alpn.
  std::vector<std::string> alpn{};
  // Resumption: server issues stateless tickets; client caches sessions. YAML: tls.session_tickets.
  bool session_tickets = true;
  // TLS 1.3 tickets a server issues per full handshake (each costs one encryption and ~200
  // bytes on the wire; browsers use more than one for parallel connections). YAML: tls.tickets.
  int tickets = 2;
  // Bounds SslStream::handshake() as a whole (a silent client is closed after it).
  // YAML: tls.handshake_timeout.
  Duration handshake_timeout = std::chrono::seconds(10);
  // SSL_OP_ENABLE_KTLS where the kernel offers the "tls" ULP (then sendfile() stays in the
  // kernel); otherwise pread + SSL_write. YAML: tls.ktls.
  bool ktls = true;
  // SSL_MODE_RELEASE_BUFFERS: OpenSSL frees a connection's 17-34 KiB record buffers while it
  // is idle (saves memory with many idle connections, costs an allocation per busy period).
  // YAML: tls.release_buffers.
  bool release_buffers = false;
};

class SslError : public std::runtime_error {
 public:
  using runtime_error::runtime_error;
};

class SslContext {
 public:
  // Setup calls: throw SslError naming the file at fault.
  static std::shared_ptr<SslContext> server(const SslOptions& options);
  static std::shared_ptr<SslContext> client(const SslOptions& options);
  ~SslContext();
  SslContext(const SslContext&) = delete;
  SslContext& operator=(const SslContext&) = delete;

  // The default SSL_CTX (server: the first certificate's).
  SSL_CTX* native() const noexcept { return ctxs_.front(); }
  const SslOptions& options() const noexcept { return options_; }
  bool is_server() const noexcept { return server_; }
  // True if streams of this context try kTLS (options().ktls and the kernel offers the "tls"
  // ULP, read once from /proc/sys/net/ipv4/tcp_available_ulp).
  bool ktls_enabled() const noexcept { return ktls_; }
  // Whether this kernel offers kTLS (the detection above, cached for the process).
  static bool kernel_offers_ktls() noexcept;

  // Client session cache (handshake path only): the newest resumable session for a server
  // name, with a reference for the caller (SSL_SESSION_free it), or nullptr.
  SSL_SESSION* take_session(std::string_view server_name) const;

 private:
  struct Private {};

 public:
  SslContext(Private, const SslOptions& options, bool server);

 private:
  void build_server();
  void build_client();
  SSL_CTX* new_ctx();
  void load_certificate(SSL_CTX* ctx, const SslCertificate& c) const;
  static int on_servername(SSL* ssl, int* alert, void* arg);
  static int on_alpn_select(SSL* ssl, const unsigned char** out, unsigned char* outlen, const unsigned char* in,
                            unsigned int inlen, void* arg);
  static int on_new_session(SSL* ssl, SSL_SESSION* session);

  SslOptions options_;
  bool server_;
  bool ktls_ = false;
  std::vector<SSL_CTX*> ctxs_;  // owned; [0] = default; server: one per certificate
  std::vector<X509*> leaf_certs_;  // borrowed from ctxs_ (SNI matching)
  std::string alpn_wire_;  // length-prefixed ALPN list
  mutable std::mutex sessions_mu_;  // client session cache; never held across a park
  mutable std::map<std::string, SSL_SESSION*, std::less<>> sessions_;  // owned references
};
}  // namespace lionet
