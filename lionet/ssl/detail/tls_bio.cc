// lionet/ssl/detail/tls_bio.cc: see tls_bio.h.
#include "lionet/ssl/detail/tls_bio.h"

#include <algorithm>
#include <cstring>
#include <new>

namespace lionet::ssl_detail {
namespace {

int bio_write_ex(BIO* b, const char* data, size_t len, size_t* written) {
  auto* io = static_cast<TlsIo*>(BIO_get_data(b));
  BIO_clear_retry_flags(b);
  // Bounded: once the buffer holds something and would pass the limit, the stream sends it
  // first (a 1 MiB SSL_write never copies 1 MiB here).
  if (io->out.len != 0 && io->out.len + len > TlsIo::kOutLimit) {
    BIO_set_retry_write(b);
    return 0;
  }
  if (!io->out.reserve_more(len)) return 0;
  std::memcpy(io->out.data.get() + io->out.len, data, len);
  io->out.len += len;
  *written = len;
  return 1;
}

int bio_read_ex(BIO* b, char* dst, size_t len, size_t* readbytes) {
  auto* io = static_cast<TlsIo*>(BIO_get_data(b));
  BIO_clear_retry_flags(b);
  size_t avail = io->in.len - io->in_pos;
  if (avail == 0) {
    *readbytes = 0;
    if (!io->in_eof) BIO_set_retry_read(b);  // else: end of stream (returns 0, no retry)
    return 0;
  }
  size_t n = std::min(avail, len);
  std::memcpy(dst, io->in.data.get() + io->in_pos, n);
  io->in_pos += n;
  *readbytes = n;
  return 1;
}

long bio_ctrl(BIO* b, int cmd, long /*num*/, void* /*ptr*/) {
  auto* io = static_cast<TlsIo*>(BIO_get_data(b));
  switch (cmd) {
    case BIO_CTRL_FLUSH:
    case BIO_CTRL_DUP: return 1;
    case BIO_CTRL_PENDING: return static_cast<long>(io->in.len - io->in_pos);
    case BIO_CTRL_WPENDING: return static_cast<long>(io->out.len);
    case BIO_CTRL_EOF: return io->in_eof && io->in.len == io->in_pos;
    default: return 0;  // includes BIO_CTRL_GET_KTLS_SEND/RECV: never kTLS
  }
}

int bio_create(BIO* b) {
  BIO_set_init(b, 1);
  return 1;
}

int bio_destroy(BIO* b) {
  BIO_set_data(b, nullptr);  // TlsIo belongs to the stream
  return 1;
}

BIO_METHOD* method() noexcept {
  static BIO_METHOD* const m = [] {
    BIO_METHOD* mm = BIO_meth_new(BIO_get_new_index() | BIO_TYPE_SOURCE_SINK, "lionet-tls");
    BIO_meth_set_write_ex(mm, bio_write_ex);
    BIO_meth_set_read_ex(mm, bio_read_ex);
    BIO_meth_set_ctrl(mm, bio_ctrl);
    BIO_meth_set_create(mm, bio_create);
    BIO_meth_set_destroy(mm, bio_destroy);
    return mm;
  }();
  return m;
}
}  // namespace

bool ByteBuffer::reserve_more(size_t n) noexcept {
  if (cap - len >= n) return true;
  size_t want = std::max(len + n, std::max<size_t>(cap * 2, 16 * 1024 + 512));
  std::unique_ptr<char[]> fresh(new (std::nothrow) char[want]);
  if (!fresh) return false;
  if (len) std::memcpy(fresh.get(), data.get(), len);
  data = std::move(fresh);
  cap = want;
  return true;
}

BIO* new_tls_bio(TlsIo* io) noexcept {
  BIO* b = BIO_new(method());
  if (b) BIO_set_data(b, io);
  return b;
}
}  // namespace lionet::ssl_detail
