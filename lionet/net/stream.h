// lionet/net/stream.h: lionet::Stream, the one byte-stream interface that plain TCP
// (SocketStream) and TLS (ssl/) implement, so that HTTP never knows which it has
// (ARCHITECTURE decision 8).
//
// Owns: the interface and its blocking-style contract, plus helpers built only on it
// (read_full, and the portable sendfile fallback). Must not know sockets or TLS.
//
// Contract for implementers and users:
// - Calls park the calling fiber, never the worker thread; errors are Results (errno codes in
//   std::generic_category(): ECONNRESET, EPIPE, ETIMEDOUT, ECANCELED, ...), never exceptions.
// - read() returns at least one byte, or 0 at end of stream; read(buf, 0) returns 0 at once.
// - write()/writev() write everything or fail (write_all semantics: a partial count is only
//   ever internal). After an error the stream should be closed; bytes may have been sent.
// - Timeouts (set_timeouts) bound each call as a whole; expiry is ETIMEDOUT and the stream
//   stays usable.
// - close() is idempotent and may be called while another fiber is inside a call on the
//   stream; that call then fails (ECANCELED) instead of waiting forever.
// Concurrency: one reader fiber and one writer fiber at a time, plus close() from anyone.
#pragma once

#include <sys/types.h>
#include <sys/uio.h>

#include <cstddef>
#include <functional>
#include <optional>
#include <string_view>

#include "lionet/base/clock.h"
#include "lionet/base/result.h"

struct x509_st;  // OpenSSL's X509, named here without including OpenSSL (net/ knows no TLS)

namespace lionet {

class Stream {
 public:
  virtual ~Stream() = default;

  virtual Result<size_t> read(void* buf, size_t n) = 0;
  virtual Result<size_t> readv(const iovec* iov, int iovcnt) = 0;
  virtual Result<size_t> write(const void* buf, size_t n) = 0;
  virtual Result<size_t> writev(const iovec* iov, int iovcnt) = 0;
  // Sends count bytes of file_fd from offset; returns bytes sent (fewer only if the file
  // ended). The default reads the file in 64 KiB chunks and write()s them; SocketStream uses
  // the kernel's sendfile(2) and falls back to this when the kernel cannot.
  virtual Result<size_t> sendfile(int file_fd, off_t offset, size_t count);
  // write(), telling the transport that more follows at once (a response head before its
  // sendfile body): plain TCP holds a short write back to share a segment with it (MSG_MORE,
  // nginx's tcp_nopush). The default is write().
  virtual Result<size_t> write_more(const void* buf, size_t n) { return write(buf, n); }
  // Half-close: the peer reads end of stream; this side may still read.
  virtual Result<void> shutdown_write() = 0;
  virtual void close() noexcept = 0;
  // nullopt = no limit (the default).
  virtual void set_timeouts(std::optional<Duration> read, std::optional<Duration> write) = 0;
  // The application protocol the peers agreed on while connecting (TLS ALPN, e.g. "h2"); ""
  // when none was negotiated (plain TCP, or no ALPN).
  virtual std::string_view application_protocol() const noexcept { return {}; }
  // The certificate the peer presented and the transport verified (a TLS server stream whose
  // context asks for client certificates); nullptr otherwise (plain TCP, no certificate sent).
  // Borrowed: valid while the stream is. Decorators forward it.
  virtual x509_st* verified_peer_certificate() const noexcept { return nullptr; }

  // Non-virtual helpers.
  Result<size_t> write(std::string_view s) { return write(s.data(), s.size()); }
  // Reads until n bytes or end of stream: returns n, or fewer only at end of stream.
  Result<size_t> read_full(void* buf, size_t n);

 protected:
  // The portable sendfile: pread() into a buffer, write() it out.
  Result<size_t> sendfile_by_copy(int file_fd, off_t offset, size_t count);
};

// The loop under every sendfile by copy: count bytes of file_fd from offset, pread into buf
// (cap bytes) a chunk at a time, each handed to out(data, n) before the next is read. The bytes
// copied (fewer only if the file ended), or the first error of pread or out. A slow disk
// blocks the caller's worker (pread of a regular file does not wait for the network; file/
// offers async reads for that case).
Result<size_t> copy_from_file(int file_fd, off_t offset, size_t count, char* buf, size_t cap,
                              const std::function<Result<void>(const char*, size_t)>& out);
}  // namespace lionet
