// lionet/app/counting_stream.h: a Stream decorator that adds the bytes read and written to two
// counters (the bytes_in/bytes_out of /metrics), over plain TCP or TLS alike.
//
// Owns: optionally the inner stream (TLS), never the counters. Must not: change what the inner
// stream does (every call is forwarded as is, errors included).
// Cost: one virtual call and one relaxed fetch_add per IO call (base/metrics.h).
// Concurrency: as the inner stream (one reader, one writer, close from anyone).
#pragma once

#include <memory>

#include "lionet/base/metrics.h"
#include "lionet/net/stream.h"

namespace lionet::app {

class CountingStream final : public Stream {
 public:
  // Borrows `inner` (it must outlive this object).
  CountingStream(Stream& inner, Counter& in, Counter& out) noexcept : inner_(inner), in_(in), out_(out) {}
  // Owns `inner`.
  CountingStream(std::unique_ptr<Stream> inner, Counter& in, Counter& out) noexcept
      : owned_(std::move(inner)), inner_(*owned_), in_(in), out_(out) {}

  Result<size_t> read(void* buf, size_t n) override { return count(in_, inner_.read(buf, n)); }
  Result<size_t> readv(const iovec* iov, int iovcnt) override { return count(in_, inner_.readv(iov, iovcnt)); }
  Result<size_t> write(const void* buf, size_t n) override { return count(out_, inner_.write(buf, n)); }
  Result<size_t> writev(const iovec* iov, int iovcnt) override { return count(out_, inner_.writev(iov, iovcnt)); }
  Result<size_t> sendfile(int file_fd, off_t offset, size_t count_) override {
    return count(out_, inner_.sendfile(file_fd, offset, count_));
  }
  Result<void> shutdown_write() override { return inner_.shutdown_write(); }
  void close() noexcept override { inner_.close(); }
  std::string_view application_protocol() const noexcept override { return inner_.application_protocol(); }
  x509_st* verified_peer_certificate() const noexcept override { return inner_.verified_peer_certificate(); }
  void set_timeouts(std::optional<Duration> read, std::optional<Duration> write) override {
    inner_.set_timeouts(read, write);
  }
  using Stream::write;

 private:
  static Result<size_t> count(Counter& c, Result<size_t> r) noexcept {
    if (r.ok() && r.value() > 0) c.add(r.value());
    return r;
  }
  std::unique_ptr<Stream> owned_;
  Stream& inner_;
  Counter& in_;
  Counter& out_;
};
}  // namespace lionet::app
