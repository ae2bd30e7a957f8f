// lionet/ssl/ssl_stream.h: lionet::SslStream, TLS over a connected fiber Socket behind the one
// Stream interface (ARCHITECTURE decision 8): HTTP reads and writes it like a SocketStream.
//
//   auto ctx = lionet::SslContext::server({.certificates = {{"cert.pem", "key.pem"}}});
//   TcpServer server(io, [ctx](SocketStream& s) {
//     lionet::SslStream tls(ctx, s.socket());          // borrowed: TcpServer owns the socket
//     if (!tls.handshake()) return;                    // bounded by handshake_timeout
//     char buf[4096];
//     while (auto r = tls.read(buf, sizeof buf)) { if (*r == 0 || !tls.write(buf, *r)) break; }
//   });
//
// Owns: one SSL object (never shared: no lock is common to two connections), the BIO between
// it and the Socket, and this stream's close protocol. Must not: park a fiber while an OpenSSL
// call is in progress, leave anything in a thread's OpenSSL error queue, or call the fd's
// system calls itself (the Socket does, see below). Protocol notes at the top of ssl_stream.cc.
//
// How bytes move (detail/tls_bio.h): OpenSSL reads records from an input buffer that the
// stream fills with Socket::read (one system call brings every record that has arrived), and
// writes records into an output buffer that the stream sends with Socket::write after the
// OpenSSL call. OpenSSL therefore never blocks: when the input is empty its BIO says "retry",
// SSL_* returns WANT_READ, and the stream parks in Socket::read, i.e. in Socket's own close
// protocol, deadlines and plain-thread poll fallback. Every byte that goes through the socket
// goes through Socket's calls: another fiber's close(), and TcpServer::stop() closing a
// borrowed socket, wake a parked call with ECANCELED exactly as for a SocketStream.
// With kTLS (SslContext::ktls_enabled(): the kernel offers the "tls" ULP) the write side is
// OpenSSL's socket BIO instead, so that the kernel encrypts and sendfile() stays zero-copy.
//
// Errors (Result codes): EPROTO for a TLS failure (bad record, alert, failed verification;
// last_error() says which), ETIMEDOUT, ECANCELED (closed by another fiber while waiting),
// EBADF (used after close()), and the Socket's own errors (ECONNRESET, EPIPE). A peer's
// close_notify reads as end of stream (0); so does a peer that closes TCP without one
// (SSL_OP_IGNORE_UNEXPECTED_EOF: HTTP's own framing detects a truncated body).
// Renegotiation is refused (the peer gets a no_renegotiation warning and the connection goes
// on); TLS 1.3 KeyUpdate and session tickets arriving in the middle of a read are handled.
//
// Concurrency: as Stream: one reader fiber and one writer fiber at a time plus close() from
// anyone. A reader and a writer may both start before the handshake: the first runs it
// (implicitly, bounded by handshake_timeout), the other waits for it. set_timeouts,
// set_server_name and destruction need exclusive access.
#pragma once

#include <openssl/ssl.h>

#include <atomic>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "lionet/base/spinlock.h"
#include "lionet/net/socket.h"
#include "lionet/net/stream.h"
#include "lionet/ssl/detail/tls_bio.h"
#include "lionet/ssl/ssl_context.h"
#include "lionet/sync/mutex.h"

namespace lionet {

class SslStream final : public Stream {
 public:
  // Owns the socket.
  SslStream(std::shared_ptr<SslContext> ctx, Socket&& owned);
  // The socket is owned elsewhere (e.g. TcpServer's connection) and must outlive the stream;
  // close() still closes it. The stream starts with the socket's read/write timeouts.
  SslStream(std::shared_ptr<SslContext> ctx, Socket& borrowed);
  ~SslStream() override;
  SslStream(const SslStream&) = delete;
  SslStream& operator=(const SslStream&) = delete;

  // Server: accept; client: connect (with SNI, verification and a cached session if any).
  // Bounded as a whole by options().handshake_timeout: ETIMEDOUT on expiry (a silent client),
  // EPROTO on a TLS failure. Idempotent once it succeeded.
  Result<void> handshake();

  Result<size_t> read(void* buf, size_t n) override;
  Result<size_t> readv(const iovec* iov, int iovcnt) override;
  Result<size_t> write(const void* buf, size_t n) override;
  // Small iovecs are coalesced into full records (one SSL_write per 16 KiB), so a header and
  // a body go out as one record and one system call.
  Result<size_t> writev(const iovec* iov, int iovcnt) override;
  // kTLS: SSL_sendfile (the kernel encrypts the page cache). Otherwise pread into a 16 KiB
  // per-stream buffer + SSL_write. ktls_send() tells which.
  Result<size_t> sendfile(int file_fd, off_t offset, size_t count) override;
  // Sends close_notify (the peer reads end of stream); this side can still read.
  Result<void> shutdown_write() override;
  // Idempotent, safe while other fibers are inside calls (they fail with ECANCELED). Sends
  // close_notify first if that cannot wait (no write in progress, room in the socket buffer).
  void close() noexcept override;
  void set_timeouts(std::optional<Duration> read, std::optional<Duration> write) override;
  using Stream::write;

  // Client, before the handshake: SNI and verified host name for this connection (default:
  // the context's server_name); also the key of the context's session cache.
  void set_server_name(std::string_view name);

  // After the handshake:
  std::string_view alpn_selected() const noexcept;  // "" if none
  std::string_view application_protocol() const noexcept override { return alpn_selected(); }
  bool session_reused() const noexcept;
  // The peer's certificate when the handshake verified one (SSL_get_verify_result is
  // X509_V_OK), else nullptr; server side: SslOptions::verify_peer asks for it.
  x509_st* verified_peer_certificate() const noexcept override;
  bool ktls_send() const noexcept { return ktls_send_; }
  const char* version() const noexcept;  // "TLSv1.3", "TLSv1.2"
  bool handshake_done() const noexcept { return handshake_done_.load(std::memory_order_acquire); }
  // The OpenSSL reason of the last EPROTO ("" if none), for logs.
  std::string last_error() const;

  Socket& socket() noexcept { return *sock_; }
  SSL* native() const noexcept { return ssl_; }

 private:
  Result<void> ready();  // open and past the handshake (run here on first use)
  // A call's time limit, resolved when the call first touches the socket.
  struct CallTimer {
    explicit CallTimer(std::optional<Duration> l) noexcept : limit(l) {}
    std::optional<Duration> limit;
    std::optional<TimePoint> at;
    bool resolved = false;
    Deadline deadline() noexcept;
  };
  enum class Step { kDone, kRetry, kFail };

  void init();
  // One SSL call's outcome (r <= 0): what to do next. Drains the error queue.
  Step after_failure(int r, bool reading, CallTimer& t, std::error_code& err) noexcept;
  // Moves records OpenSSL produced to the socket. flush() takes write_mu_, flush_locked()
  // expects the caller to hold it.
  Result<void> flush(CallTimer& t) noexcept;
  Result<void> flush_locked(CallTimer& t) noexcept;
  // Reads what the socket has into the input buffer (parks while it has nothing).
  Result<void> fill(CallTimer& t) noexcept;
  // SSL_write_ex of all n bytes (records may stay in the output buffer); write_mu_ held.
  Result<void> write_records(const void* buf, size_t n, CallTimer& t) noexcept;
  Result<size_t> sendfile_by_ktls(int file_fd, off_t offset, size_t count, CallTimer& t) noexcept;
  // kTLS only (OpenSSL writes to the fd itself): wait until the fd is writable.
  Result<void> wait_writable(CallTimer& t) noexcept;
  bool pending_output() noexcept;

  std::shared_ptr<SslContext> ctx_;
  Socket owned_;
  Socket* sock_;
  SSL* ssl_ = nullptr;
  ssl_detail::TlsIo io_;  // the BIO's buffers (see detail/tls_bio.h for who touches what)
  // Held around every SSL_* call and buffer hand-over, never across a park: serialises the
  // reader's and the writer's OpenSSL calls on the one SSL object.
  SpinLock ssl_mu_;
  // One fiber at a time sends the output buffer (held across parks): the writer for its whole
  // call, the reader only when OpenSSL produced records while reading.
  Mutex write_mu_;
  Mutex handshake_mu_;  // one handshake at a time (implicit ones from a reader and a writer)
  std::unique_ptr<char[]> staging_;  // writev coalescing / sendfile chunks (writer only)
  std::optional<Duration> read_timeout_;
  std::optional<Duration> write_timeout_;
  std::atomic<bool> handshake_done_{false};
  std::atomic<bool> closed_{false};
  std::atomic<IOManager*> waited_io_{nullptr};  // kTLS waits only: cancelled by close()
  bool ktls_send_ = false;  // set once by the handshake
  std::atomic<unsigned long> last_error_{0};  // OpenSSL error code of the last EPROTO
};
}  // namespace lionet
