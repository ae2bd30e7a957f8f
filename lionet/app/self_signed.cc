// lionet/app/self_signed.cc: see self_signed.h. OpenSSL 3 APIs only (EVP_RSA_gen, X509_*).
#include "lionet/app/self_signed.h"

#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/rsa.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>
#include <sys/stat.h>

#include <cstdio>
#include <filesystem>
#include <memory>

namespace lionet::app {
namespace {
template <class T, void (*F)(T*)>
struct Free {
  void operator()(T* p) const { F(p); }
};
using PKey = std::unique_ptr<EVP_PKEY, Free<EVP_PKEY, EVP_PKEY_free>>;
using Cert = std::unique_ptr<X509, Free<X509, X509_free>>;

bool add_ext(X509* cert, int nid, const char* value) {
  X509V3_CTX ctx;
  X509V3_set_ctx_nodb(&ctx);
  X509V3_set_ctx(&ctx, cert, cert, nullptr, nullptr, 0);
  X509_EXTENSION* ext = X509V3_EXT_conf_nid(nullptr, &ctx, nid, value);
  if (!ext) return false;
  bool ok = X509_add_ext(cert, ext, -1) == 1;
  X509_EXTENSION_free(ext);
  return ok;
}

bool write_pem(const std::string& path, mode_t mode, bool key, EVP_PKEY* pkey, X509* cert) {
  std::filesystem::path p(path);
  std::error_code ec;
  if (p.has_parent_path()) std::filesystem::create_directories(p.parent_path(), ec);
  FILE* f = std::fopen(path.c_str(), "wx");  // x: never overwrite
  if (!f) return false;
  ::fchmod(::fileno(f), mode);
  bool ok =
      key ? PEM_write_PrivateKey(f, pkey, nullptr, nullptr, 0, nullptr, nullptr) == 1 : PEM_write_X509(f, cert) == 1;
  return std::fclose(f) == 0 && ok;
}
}  // namespace

std::string ensure_self_signed(const std::string& cert_path, const std::string& key_path) {
  namespace fs = std::filesystem;
  const bool have_cert = fs::exists(cert_path), have_key = fs::exists(key_path);
  if (have_cert && have_key) return "";
  if (have_cert != have_key) {
    return "only one of " + cert_path + " and " + key_path + " exists; remove it or provide both";
  }
  PKey pkey(EVP_RSA_gen(2048));
  Cert cert(X509_new());
  if (!pkey || !cert) return "cannot generate an RSA-2048 key";
  X509_set_version(cert.get(), 2);
  ASN1_INTEGER_set(X509_get_serialNumber(cert.get()), static_cast<long>(::time(nullptr)));
  X509_gmtime_adj(X509_getm_notBefore(cert.get()), 0);
  X509_gmtime_adj(X509_getm_notAfter(cert.get()), 365L * 24 * 3600);
  X509_set_pubkey(cert.get(), pkey.get());
  X509_NAME* name = X509_get_subject_name(cert.get());
  X509_NAME_add_entry_by_txt(name, "O", MBSTRING_ASC, reinterpret_cast<const unsigned char*>("LioNet self-signed"), -1,
                             -1, 0);
  X509_NAME_add_entry_by_txt(name, "CN", MBSTRING_ASC, reinterpret_cast<const unsigned char*>("localhost"), -1, -1, 0);
  X509_set_issuer_name(cert.get(), name);
  if (!add_ext(cert.get(), NID_subject_alt_name, "DNS:localhost,IP:127.0.0.1,IP:::1") ||
      !add_ext(cert.get(), NID_basic_constraints, "critical,CA:FALSE") ||
      X509_sign(cert.get(), pkey.get(), EVP_sha256()) == 0) {
    return "cannot build the self-signed certificate";
  }
  if (!write_pem(key_path, 0600, true, pkey.get(), nullptr)) return "cannot write " + key_path;
  if (!write_pem(cert_path, 0644, false, nullptr, cert.get())) return "cannot write " + cert_path;
  return "";
}
}  // namespace lionet::app
