// lionet/http2/detail/output.cc: send_all (see output.h).
#include "lionet/http2/detail/output.h"

#include <cerrno>

namespace lionet::http2::detail {

namespace {
constexpr std::size_t kWriteBatch = 64 * 1024;  // output gathered before one write()

// A thread's free output buffers, last given back on top. Bounded: at most kKept buffers of at
// most kKeptBytes each stay (a flush that gathered a run of large frames frees its buffer).
class FreeBufs {
 public:
  static constexpr std::size_t kKept = 4;
  ~FreeBufs() { gone = true; }  // a buffer given back after this is freed
  std::unique_ptr<OutBuf> take() {
    if (gone || n_ == 0) return std::make_unique<OutBuf>();
    return std::move(bufs_[--n_]);
  }
  void give(std::unique_ptr<OutBuf> b) noexcept {
    if (!gone && n_ < kKept && b->capacity() <= kKeptBytes) bufs_[n_++] = std::move(b);
  }
  static inline thread_local bool gone = false;  // trivially destructible: readable to the end

 private:
  static constexpr std::size_t kKeptBytes = 2 * kWriteBatch;
  std::unique_ptr<OutBuf> bufs_[kKept];
  std::size_t n_ = 0;
};
thread_local FreeBufs t_free;
// Not inlined: a fiber whose write waited may go on on another worker, and a thread_local's
// address computed before the wait must not be reused after it.
[[gnu::noinline]] FreeBufs& free_bufs() noexcept { return t_free; }

// The borrowed buffer, given back to the free list of the thread the flush ends on.
struct Lease {
  explicit Lease(OutBuf*& slot) : slot(slot), buf(free_bufs().take()) {
    buf->clear();
    slot = buf.get();
  }
  ~Lease() {
    slot = nullptr;
    free_bufs().give(std::move(buf));
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
    if (n == 0 || out.size() >= kWriteBatch) {
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
      if (n == 0) return Sent::kAll;
    }
  }
}

}  // namespace lionet::http2::detail
