// lionet/http2/detail/output.cc: send_all (see output.h).
#include "lionet/http2/detail/output.h"

#include "lionet/http2/detail/thread_stack.h"

#include <cerrno>

namespace lionet::http2::detail {

namespace {
// Free output buffers: at most 4 a thread, each of at most kKeptBytes (a flush that gathered a
// run of large frames frees its buffer).
using FreeBufs = ThreadStack<OutBuf, 4>;
constexpr std::size_t kKeptBytes = 2 * kWriteBatch;

// The borrowed buffer, given back to the free buffers of the thread the flush ends on.
struct Lease {
  explicit Lease(OutBuf*& slot) : slot(slot), buf(FreeBufs::take()) {
    if (!buf) buf = std::make_unique<OutBuf>();
    buf->clear();
    slot = buf.get();
  }
  ~Lease() {
    slot = nullptr;
    if (buf->capacity() <= kKeptBytes) FreeBufs::give(std::move(buf));
  }
  OutBuf*& slot;
  std::unique_ptr<OutBuf> buf;
};
}  // namespace

Sent send_all(nghttp2_session* session, OutBuf*& slot, Stream& stream, bool* wrote, int* write_errno) {
  *wrote = false;
  Lease lease(slot);
  OutBuf& out = *lease.buf;
  for (;;) {
    const uint8_t* data = nullptr;
    ssize_t n = nghttp2_session_mem_send(session, &data);
    if (n < 0) return Sent::kSessionError;
    if (n > 0) out.append(data, static_cast<std::size_t>(n));
    if (n == 0 || out.full()) {
      // Full: a write's worth gathered, or (at 0) send_data paused mem_send: more is to come
      // either way. Not full at 0: nothing left. (A buffer is never full when mem_send
      // starts: it is written as soon as it is.)
      const bool more = out.full();
      std::size_t off = 0;
      while (off < out.size()) {
        auto w = stream.write(out.data() + off, out.size() - off);
        if (!w || *w == 0) {
          *write_errno = w ? ECONNRESET : w.error().value();
          return Sent::kWriteError;
        }
        off += *w;
        *wrote = true;
      }
      out.clear();
      if (!more) return Sent::kAll;
    }
  }
}

}  // namespace lionet::http2::detail
