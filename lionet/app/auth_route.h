// lionet/app/auth_route.h: a route's `auth:` section (YAML) and its translation into
// lionet::http::Authenticator (http/auth.h), beside proxy_route.h and static_route.h.
//
// Owns: AuthConfig and its parts (the defaults here are the documented ones: conf/REFERENCE.md
// is generated from them), their YAML traits (bad values are errors at their line), reading the
// credential files for --check and start-up, and AuthRoute (one running route's authenticator
// with the file it reloads on SIGHUP and `watch: true`). Must not: log a credential (only file
// names, line numbers and counts), or read a credential file on a worker (start-up and the
// signal/watch threads only).
//
//   - {path: /private, type: static, root: www, auth: {basic: {realm: lionet, htpasswd: users.htpasswd}}}
//   - {path: /api, type: storage, auth: {bearer: {tokens: tokens.txt}, max_failures: 5}}
//   - {path: /admin, type: metrics, auth: {client_cert: {subjects: ["CN=ops"]}}}   # https only
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "lionet/config/traits.h"

namespace lionet::http {
class Authenticator;
}

namespace lionet::app {

// auth.basic: RFC 7617 against an htpasswd file of bcrypt entries (`htpasswd -B`).
struct BasicAuthConfig {
  std::string realm = "lionet";  // WWW-Authenticate: Basic realm="..."
  std::string htpasswd;  // user:$2y$... lines (required)
  bool operator==(const BasicAuthConfig&) const = default;
};

// auth.bearer: RFC 6750 tokens from a file (a token, or sha256:<hex> of one, per line).
struct BearerAuthConfig {
  std::string realm = "lionet";  // WWW-Authenticate: Bearer realm="..."
  std::string tokens;  // the token file (required)
  bool operator==(const BearerAuthConfig&) const = default;
};

// auth.client_cert: a verified TLS client certificate whose subject (RFC 2253) or one of whose
// subjectAltNames ("DNS:x", "email:x", "URI:x") is listed; both lists empty: any verified one.
struct ClientCertAuthConfig {
  std::vector<std::string> subjects;
  std::vector<std::string> sans;
  bool operator==(const ClientCertAuthConfig&) const = default;
};

struct AuthConfig {
  // Exactly one of the three.
  std::optional<BasicAuthConfig> basic;
  std::optional<BearerAuthConfig> bearer;
  std::optional<ClientCertAuthConfig> client_cert;
  // The brute-force brake (basic and bearer): max_failures wrong credentials from one client
  // address within failure_window get that address 429 on this route for block_for. 0 = off.
  uint32_t max_failures = 10;
  std::chrono::milliseconds failure_window{60000};
  std::chrono::milliseconds block_for{300000};
  std::size_t max_addresses = 10000;  // addresses the brake tracks at most (least recent evicted)
  std::size_t cache_entries = 1024;  // basic: verified credentials cached (0 = bcrypt every request)
  bool operator==(const AuthConfig&) const = default;
};

// The credential file a route's auth reads ("" for client_cert).
std::string auth_file(const AuthConfig& a);
// Reads and checks that file as the route will (throws http::AuthFileError naming file:line):
// --check and load time, so that a config naming a bad file is refused.
void check_auth_file(const AuthConfig& a);

// One route's running authenticator (app/detail/running.h keeps them per server).
struct AuthRoute {
  std::string route;  // its path, or "@name"
  AuthConfig config;
  std::shared_ptr<http::Authenticator> auth;
};
// Builds the authenticator of a route (loads its file; throws std::exception with the cause).
std::shared_ptr<http::Authenticator> make_authenticator(const AuthConfig& a);
// Loads the route's file again into its authenticator (SIGHUP, `watch: true`). A file that
// fails to load keeps the running credentials: returns the error ("" on success).
std::string reload_auth(const AuthRoute& r);

}  // namespace lionet::app

LIONET_DECLARE_CONFIG_TRAITS(lionet::app::BasicAuthConfig);
LIONET_DECLARE_CONFIG_TRAITS(lionet::app::BearerAuthConfig);
LIONET_DECLARE_CONFIG_TRAITS(lionet::app::ClientCertAuthConfig);
LIONET_DECLARE_CONFIG_TRAITS(lionet::app::AuthConfig);
