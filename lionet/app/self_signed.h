// lionet/app/self_signed.h: a self-signed certificate for `make run`'s HTTPS server, made on
// first start into a git-ignored folder (tls.generate_self_signed: true in conf/server.yml).
// Never overwrites: if either file exists, nothing is written. Not for production use: a
// browser warns about it; point tls.cert / tls.key at a real certificate instead.
#pragma once

#include <string>

namespace lionet::app {
// Writes an RSA-2048 key (mode 0600) and a certificate for CN=localhost with subjectAltName
// DNS:localhost, IP:127.0.0.1, IP:::1, valid for 365 days. Creates missing parent folders.
// Returns "" on success (or when both files exist), else one line saying what failed.
std::string ensure_self_signed(const std::string& cert_path, const std::string& key_path);
}  // namespace lionet::app
