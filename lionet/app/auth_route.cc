// lionet/app/auth_route.cc: a route's `auth:` YAML and its Authenticator (see auth_route.h).
#include "lionet/app/auth_route.h"

#include "lionet/config/fields.h"
#include "lionet/http/auth.h"

namespace lionet::config {
namespace {
using app::AuthConfig;
using app::BasicAuthConfig;
using app::BearerAuthConfig;
using app::ClientCertAuthConfig;

const Fields<BasicAuthConfig> kBasicFields = {
    {"realm", &BasicAuthConfig::realm},
    {"htpasswd", &BasicAuthConfig::htpasswd, kRequired},
};
const Fields<BearerAuthConfig> kBearerFields = {
    {"realm", &BearerAuthConfig::realm},
    {"tokens", &BearerAuthConfig::tokens, kRequired},
};
const Fields<ClientCertAuthConfig> kClientCertFields = {
    {"subjects", &ClientCertAuthConfig::subjects},
    {"sans", &ClientCertAuthConfig::sans},
};
const Fields<AuthConfig> kAuthFields = {
    {"basic", &AuthConfig::basic},
    {"bearer", &AuthConfig::bearer},
    {"client_cert", &AuthConfig::client_cert},
    {"max_failures", &AuthConfig::max_failures},
    {"failure_window", &AuthConfig::failure_window},
    {"block_for", &AuthConfig::block_for},
    {"max_addresses", &AuthConfig::max_addresses},
    {"cache_entries", &AuthConfig::cache_entries},
};

// A realm goes into WWW-Authenticate inside quotes, unescaped.
void check_realm(const YAML::Node& n, const std::string& realm) {
  for (unsigned char c : realm)
    if (c < 0x20 || c == 0x7f || c == '"' || c == '\\')
      conversion_error(n["realm"], "a realm has no quote, backslash or control character");
}
}  // namespace

BasicAuthConfig ConfigTraits<BasicAuthConfig>::from_yaml(const YAML::Node& n) {
  BasicAuthConfig b = kBasicFields.decode(n);
  check_realm(n, b.realm);
  if (b.htpasswd.empty()) conversion_error(n["htpasswd"], "needs the htpasswd file (htpasswd -B -c FILE USER)");
  return b;
}
YAML::Node ConfigTraits<BasicAuthConfig>::to_yaml(const BasicAuthConfig& b) { return kBasicFields.encode(b); }

BearerAuthConfig ConfigTraits<BearerAuthConfig>::from_yaml(const YAML::Node& n) {
  BearerAuthConfig b = kBearerFields.decode(n);
  check_realm(n, b.realm);
  if (b.tokens.empty()) conversion_error(n["tokens"], "needs the token file");
  return b;
}
YAML::Node ConfigTraits<BearerAuthConfig>::to_yaml(const BearerAuthConfig& b) { return kBearerFields.encode(b); }

ClientCertAuthConfig ConfigTraits<ClientCertAuthConfig>::from_yaml(const YAML::Node& n) {
  ClientCertAuthConfig c = kClientCertFields.decode(n);
  for (const auto& s : c.sans)
    if (!s.starts_with("DNS:") && !s.starts_with("email:") && !s.starts_with("URI:"))
      conversion_error(n["sans"], "'" + s + "': a SAN is DNS:<name>, email:<address> or URI:<uri>");
  return c;
}
YAML::Node ConfigTraits<ClientCertAuthConfig>::to_yaml(const ClientCertAuthConfig& c) {
  return kClientCertFields.encode(c);
}

AuthConfig ConfigTraits<AuthConfig>::from_yaml(const YAML::Node& n) {
  AuthConfig a = kAuthFields.decode(n);
  const int kinds = int(a.basic.has_value()) + int(a.bearer.has_value()) + int(a.client_cert.has_value());
  if (kinds != 1)
    conversion_error(n, "auth needs exactly one of basic, bearer or client_cert (got " + std::to_string(kinds) + ")");
  if (a.max_failures > 1000000) conversion_error(n["max_failures"], "must be in 0..1000000 (0: no brake)");
  if (a.failure_window.count() < 1 || a.failure_window.count() > 86400000)
    conversion_error(n["failure_window"], "must be in 1ms..86400000ms");
  if (a.block_for.count() < 1 || a.block_for.count() > 86400000)
    conversion_error(n["block_for"], "must be in 1ms..86400000ms");
  if (a.max_addresses < 1 || a.max_addresses > 10000000) conversion_error(n["max_addresses"], "must be in 1..10000000");
  if (a.cache_entries > 1000000) conversion_error(n["cache_entries"], "must be in 0..1000000");
  try {
    app::check_auth_file(a);  // --check refuses a file the route could not load
  } catch (const http::AuthFileError& e) {
    const YAML::Node k = a.basic ? n["basic"] : n["bearer"];
    conversion_error(k, e.what());
  }
  return a;
}
YAML::Node ConfigTraits<AuthConfig>::to_yaml(const AuthConfig& a) { return kAuthFields.encode(a); }
}  // namespace lionet::config

namespace lionet::app {

std::string auth_file(const AuthConfig& a) {
  if (a.basic) return a.basic->htpasswd;
  if (a.bearer) return a.bearer->tokens;
  return {};
}

void check_auth_file(const AuthConfig& a) {
  if (a.basic) http::HtpasswdUsers::load(a.basic->htpasswd);
  if (a.bearer) http::BearerTokens::load(a.bearer->tokens);
}

std::shared_ptr<http::Authenticator> make_authenticator(const AuthConfig& a) {
  http::AuthOptions o;
  o.kind = a.basic ? http::AuthKind::kBasic : a.bearer ? http::AuthKind::kBearer : http::AuthKind::kClientCert;
  if (a.basic) o.realm = a.basic->realm;
  if (a.bearer) o.realm = a.bearer->realm;
  if (a.client_cert) o.client_cert = {a.client_cert->subjects, a.client_cert->sans};
  o.brake = {a.max_failures, a.failure_window, a.block_for, a.max_addresses};
  o.cache_entries = a.cache_entries;
  auto auth = std::make_shared<http::Authenticator>(std::move(o));
  if (a.basic) auth->set_users(http::HtpasswdUsers::load(a.basic->htpasswd));
  if (a.bearer) auth->set_tokens(http::BearerTokens::load(a.bearer->tokens));
  return auth;
}

std::string reload_auth(const AuthRoute& r) {
  try {
    if (r.config.basic) r.auth->set_users(http::HtpasswdUsers::load(r.config.basic->htpasswd));
    if (r.config.bearer) r.auth->set_tokens(http::BearerTokens::load(r.config.bearer->tokens));
  } catch (const std::exception& e) {
    return e.what();
  }
  return {};
}

}  // namespace lionet::app
