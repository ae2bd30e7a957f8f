// lionet/ssl/detail/tls_bio.h: the BIO between one SSL object and its SslStream. Private to ssl/.
//
// Owns: TlsIo (an input buffer OpenSSL reads records from, an output buffer it writes records
// to) and the BIO_METHOD over it. Must not: make system calls or park (the stream moves bytes
// between these buffers and the Socket outside OpenSSL), or allocate per record (capacities are
// kept for the connection's life).
//
// Why not SSL_set_fd: OpenSSL's socket BIO makes the system calls itself, so a stream that
// parks must wait on the fd without being inside a Socket call. Then Socket's close protocol
// cannot see the wait (a TcpServer closing the borrowed socket would not wake it, and the fd
// number could be reused under it). With these buffers every system call is a Socket call.
// Cost: one memcpy of each record in each direction; gain: one read(2) brings every record that
// has arrived (OpenSSL without read-ahead reads each record with two calls), and one send(2)
// carries all records of a write (OpenSSL writes each record with its own call).
//
// Who touches what: OpenSSL (inside SSL_* calls, under the stream's ssl_mu_) consumes `in`
// and appends to `out`. The stream's reader fills `in` (only when OpenSSL consumed all of it,
// so never at the same time as OpenSSL reads it: only the reader's SSL calls read). Any
// flusher, holding write_mu_, swaps `out` with `sending` under ssl_mu_ and sends `sending`
// without the spin lock.
#pragma once

#include <openssl/bio.h>

#include <cstddef>
#include <memory>

namespace lionet::ssl_detail {

struct ByteBuffer {
  std::unique_ptr<char[]> data;
  size_t len = 0;
  size_t cap = 0;
  // Room for n more bytes (keeps the contents); false if allocation failed.
  bool reserve_more(size_t n) noexcept;
};

struct TlsIo {
  // One full TLS record (16 KiB + header, padding, tag) with room to spare: the input buffer's
  // capacity, read in one read(2).
  static constexpr size_t kInCapacity = 17 * 1024;
  // The output buffer is sent once it would pass this (OpenSSL then sees "retry write").
  static constexpr size_t kOutLimit = 64 * 1024;

  ByteBuffer in;  // in.data[in_pos, in.len) not yet consumed by OpenSSL
  size_t in_pos = 0;
  bool in_eof = false;  // the socket reached end of stream
  ByteBuffer out;  // records not yet handed to the socket
  ByteBuffer sending;  // records being sent by the flusher
};

// A BIO over io (not owned). Reads and writes never block: empty input or a full output
// buffer is "retry". BIO_CTRL_FLUSH succeeds (the stream flushes after the SSL call).
BIO* new_tls_bio(TlsIo* io) noexcept;
}  // namespace lionet::ssl_detail
