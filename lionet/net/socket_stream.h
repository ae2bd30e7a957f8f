// lionet/net/socket_stream.h: lionet::SocketStream, the Stream over a connected Socket
// (plain TCP or Unix). It owns the Socket.
//
// Owns: mapping Stream calls onto Socket calls, and the sendfile fallback decision. Must not
// add buffering (Buffer does that for parsers) or copy on the write path.
#pragma once

#include <atomic>
#include <utility>

#include "lionet/net/socket.h"
#include "lionet/net/stream.h"

namespace lionet {

class SocketStream final : public Stream {
 public:
  SocketStream() = default;
  explicit SocketStream(Socket s) noexcept : sock_(std::move(s)) {}

  Result<size_t> read(void* buf, size_t n) override { return note(sock_.read(buf, n)); }
  Result<size_t> readv(const iovec* iov, int iovcnt) override { return note(sock_.readv(iov, iovcnt)); }
  Result<size_t> write(const void* buf, size_t n) override { return sock_.write(buf, n); }
  Result<size_t> writev(const iovec* iov, int iovcnt) override { return sock_.writev(iov, iovcnt); }
  Result<size_t> write_more(const void* buf, size_t n) override { return sock_.write_more(buf, n); }
  // Kernel sendfile(2); the copy fallback if the kernel refuses before the first byte
  // (EINVAL/ENOSYS/EOPNOTSUPP: e.g. a file system without splice support).
  Result<size_t> sendfile(int file_fd, off_t offset, size_t count) override;
  Result<void> shutdown_write() override { return sock_.shutdown(SHUT_WR); }
  void close() noexcept override { sock_.close(); }
  void set_timeouts(std::optional<Duration> read, std::optional<Duration> write) override {
    sock_.set_read_timeout(read);
    sock_.set_write_timeout(write);
  }
  using Stream::write;

  Socket& socket() noexcept { return sock_; }
  const Socket& socket() const noexcept { return sock_; }
  // True once a read has returned data. Any thread may ask: TcpServer's drain leaves the
  // read side of a connection whose peer has sent nothing yet open (its first request may
  // be in flight).
  bool received() const noexcept { return received_.load(std::memory_order_relaxed); }

 private:
  Result<size_t> note(Result<size_t> r) noexcept {
    if (r.ok() && *r > 0 && !received_.load(std::memory_order_relaxed))
      received_.store(true, std::memory_order_relaxed);
    return r;
  }

  Socket sock_;
  std::atomic<bool> received_{false};
};
}  // namespace lionet
