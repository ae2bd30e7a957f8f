// lionet/ssl/detail/ssl_errors.h: OpenSSL's per-thread error queue, handled so that no error
// leaks from one connection (or fiber) to another. Private to ssl/.
//
// Why this matters with fibers: ERR_* state is thread-local, and a fiber may resume on another
// worker after any park. SslStream therefore never parks while an OpenSSL call is in progress
// (its BIO never blocks: it reports "retry" and the stream parks after the call returned), and
// it drains the queue after every failed call, before any park: whatever OpenSSL queued is
// read on the thread that queued it and cannot surface in another fiber's SSL_get_error().
#pragma once

#include <string>

namespace lionet::ssl_detail {

// Empties the calling thread's queue if anything is in it (cheap when empty).
void clear_errors() noexcept;
// Empties the queue and returns its entries as one line ("" if it was empty).
std::string drain_errors();
// Empties the queue and returns the first (oldest) error code (0 if none).
unsigned long drain_first_error() noexcept;
}  // namespace lionet::ssl_detail
