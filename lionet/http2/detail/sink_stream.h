// lionet/http2/detail/sink_stream.h: a write-only Stream for http::BodyWriter (which writes
// to a Stream) when the bytes go somewhere else than a socket: the server's per-stream writer
// buffer, the client's gathered request body. Subclasses define write(); reads fail with
// ENOTSUP, writev() is write() per piece, the rest does nothing. Internal to http2/.
#pragma once

#include <cerrno>

#include "lionet/net/stream.h"

namespace lionet::http2::detail {

class SinkStream : public Stream {
 public:
  Result<size_t> read(void*, size_t) override { return errno_error(ENOTSUP); }
  Result<size_t> readv(const iovec*, int) override { return errno_error(ENOTSUP); }
  Result<size_t> writev(const iovec* iov, int iovcnt) override {
    size_t total = 0;
    for (int i = 0; i < iovcnt; ++i) {
      auto r = write(iov[i].iov_base, iov[i].iov_len);
      if (!r) return r;
      total += *r;
    }
    return total;
  }
  using Stream::write;
  Result<void> shutdown_write() override { return {}; }
  void close() noexcept override {}
  void set_timeouts(std::optional<Duration>, std::optional<Duration>) override {}
};

}  // namespace lionet::http2::detail
