// lionet/http2/detail/output.h: what the HTTP/2 server session and client connection share
// around libnghttp2: the output buffer their writes gather in, sending what a session has to
// send, and HPACK field-list helpers. Internal to http2/.
#pragma once

#include <nghttp2/nghttp2.h>

#include <algorithm>
#include <cstddef>
#include <cstring>
#include <memory>
#include <string_view>

#include "lionet/net/stream.h"

namespace lionet::http2::detail {

// libnghttp2's set-up objects, freed however set-up ends: null when nghttp2 could not make one.
struct CallbacksDel {
  void operator()(nghttp2_session_callbacks* c) const noexcept { nghttp2_session_callbacks_del(c); }
};
struct OptionDel {
  void operator()(nghttp2_option* o) const noexcept { nghttp2_option_del(o); }
};
using CallbacksPtr = std::unique_ptr<nghttp2_session_callbacks, CallbacksDel>;
using OptionPtr = std::unique_ptr<nghttp2_option, OptionDel>;
inline CallbacksPtr new_callbacks() noexcept {
  nghttp2_session_callbacks* c = nullptr;
  return CallbacksPtr(nghttp2_session_callbacks_new(&c) == 0 ? c : nullptr);
}
inline OptionPtr new_option() noexcept {
  nghttp2_option* o = nullptr;
  return OptionPtr(nghttp2_option_new(&o) == 0 ? o : nullptr);
}

// Output gathered before one write: a byte buffer whose growth does not zero-fill (the
// server preads a file's DATA payload straight into the room grow() makes).
class OutBuf {
 public:
  std::size_t size() const noexcept { return size_; }
  std::size_t capacity() const noexcept { return cap_; }
  const char* data() const noexcept { return p_.get(); }
  void clear() noexcept { size_ = 0; }
  void resize_down(std::size_t n) noexcept { size_ = n; }
  // n more bytes at the end, uninitialised.
  char* grow(std::size_t n) {
    if (size_ + n > cap_) {
      std::size_t cap = std::max(size_ + n, cap_ * 2);
      std::unique_ptr<char[]> p(new char[cap]);
      if (size_) std::memcpy(p.get(), p_.get(), size_);
      p_ = std::move(p);
      cap_ = cap;
    }
    char* at = p_.get() + size_;
    size_ += n;
    return at;
  }
  void append(const void* d, std::size_t n) {
    if (n) std::memcpy(grow(n), d, n);
  }
  // A write's worth gathered (kWriteBatch): time to write before gathering more. A
  // send_data_callback that fills the buffer returns NGHTTP2_ERR_PAUSE, so mem_send returns 0
  // with frames still to send: send_all reads a full buffer at 0 as "paused", not "nothing left".
  bool full() const noexcept;

 private:
  std::unique_ptr<char[]> p_;
  std::size_t size_ = 0, cap_ = 0;
};

// Output gathered before one write(): a flush writes in pieces of about this size, so its buffer
// stays small and warm in cache (a 1 MiB response's DATA frames used to gather whole: a 1 MiB
// buffer grown by doubling, copied at each step, and one 1 MiB write).
constexpr std::size_t kWriteBatch = 64 * 1024;
inline bool OutBuf::full() const noexcept { return size_ >= kWriteBatch; }

enum class Sent { kAll, kSessionError, kWriteError };

// Everything nghttp2_session_mem_send has to send, gathered in an output buffer and written to
// `stream` kWriteBatch at a time (a send_data_callback that fills the buffer pauses mem_send:
// OutBuf::full). *wrote: whether any bytes were written; *write_errno: the error of
// a failed write (ECONNRESET for a write of zero bytes).
//
// The buffer is not the connection's: send_all borrows one from its thread's stack of free
// buffers (the one given back last, so its lines are still in this CPU's cache) and gives it
// back when everything is written; *out points at it meanwhile, for the callbacks that append
// to it inside mem_send (a DATA frame's send_data_callback), and is null otherwise. A send_all
// whose write waits keeps its buffer; another connection's flush on that worker then takes the
// next one. With a buffer per connection, each flush at -c100 wrote into one of 100 buffers,
// cold by the time its turn came back (callgrind: ~22 L1 write misses per request in memcpy).
Sent send_all(nghttp2_session* session, OutBuf*& out, Stream& stream, bool* wrote, int* write_errno);

// A field of an nghttp2 field list pointing at n and v (which must outlive the list).
inline nghttp2_nv nv(std::string_view n, std::string_view v) noexcept {
  return {reinterpret_cast<uint8_t*>(const_cast<char*>(n.data())),
          reinterpret_cast<uint8_t*>(const_cast<char*>(v.data())), n.size(), v.size(), NGHTTP2_NV_FLAG_NONE};
}

}  // namespace lionet::http2::detail
