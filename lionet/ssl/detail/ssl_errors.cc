// lionet/ssl/detail/ssl_errors.cc: see ssl_errors.h.
#include "lionet/ssl/detail/ssl_errors.h"

#include <openssl/err.h>

namespace lionet::ssl_detail {

void clear_errors() noexcept {
  if (ERR_peek_error() != 0) ERR_clear_error();
}

std::string drain_errors() {
  std::string out;
  char buf[256];
  while (unsigned long e = ERR_get_error()) {
    ERR_error_string_n(e, buf, sizeof buf);
    if (!out.empty()) out += "; ";
    out += buf;
  }
  return out;
}

unsigned long drain_first_error() noexcept {
  unsigned long first = ERR_get_error();
  if (first != 0) ERR_clear_error();
  return first;
}
}  // namespace lionet::ssl_detail
