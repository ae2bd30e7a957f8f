// lionet/net/udp_socket.h: lionet::UdpSocket, an owned UDP socket whose calls park the calling
// fiber (never the worker thread) while the kernel is not ready, and lionet::Datagram, the
// caller-owned slot one datagram is received into or sent from.
//
// Owns: datagram IO (single and batched over recvmmsg/sendmmsg), binding (IPv4/IPv6,
// SO_REUSEPORT), the default peer of connect(). Must not: allocate per datagram or per call
// (batches use fixed arrays on the caller's stack, kMaxBatch at a time), throw on the request
// path, call hooked libc (detail/sys.h), or know about any protocol above UDP.
//
// Built on Socket (socket.h), which it holds: the fd, O_NONBLOCK, the per-socket timeouts, the
// wait (IOManager park in a fiber, poll(2) on a plain thread), Deadline and the close protocol
// are Socket's, unchanged and shared rather than copied (UdpSocket is Socket's friend and uses
// its call guard and retry/wait helpers). So everything socket.h says about them holds here:
// Deadline() = this socket's timeout for the direction (none by default), expiry returns
// ETIMEDOUT and leaves the socket usable; close() from another fiber wakes a waiting call with
// ECANCELED; a call after close() returns EBADF.
//
// Datagram semantics (Linux):
// - A datagram longer than the slot's buffer is cut to it: `truncated` is set and `full_length`
//   says how long it was (recv with MSG_TRUNC). The lost tail cannot be read again.
// - A zero-length datagram is delivered as one (length 0): unlike a stream, 0 is not an end.
// - On a connected socket, an ICMP error for an earlier send (port unreachable) surfaces as
//   ECONNREFUSED from the next recv*/send* call. Unconnected sockets do not see ICMP errors.
// - A send is all or nothing: EMSGSIZE if the datagram is too large for UDP.
// Concurrency: any number of fibers may call recv*/send*/close on one UdpSocket at once (each
// datagram goes to exactly one receiver). open/bind/connect, set_*_timeout, moves and
// destruction need exclusive access. For one socket per worker, bind several with
// UdpOptions::reuse_port on the same port: the kernel spreads peers by their address hash.
// Not done (issue 26): GSO/GRO (UDP_SEGMENT, UDP_GRO), IP_RECVERR (ICMP errors on unconnected
// sockets), ancillary data (SO_RXQ_OVFL drop counts, IP_PKTINFO).
#pragma once

#include <sys/socket.h>

#include <cstddef>
#include <optional>
#include <span>

#include "lionet/base/clock.h"
#include "lionet/base/result.h"
#include "lionet/net/address.h"
#include "lionet/net/socket.h"

namespace lionet {

// One datagram: where to receive it, or what to send. The caller owns the buffer, which must
// outlive the call; the library never copies the payload beyond what the kernel does.
struct Datagram {
  // Receive: where the payload is written (capacity = size()). Send: holds the payload.
  std::span<char> buffer{};
  // Receive: bytes written into buffer (<= buffer.size()). Send: how many bytes of buffer to
  // send (<= buffer.size(), else EINVAL). So a received slot can be sent back as it is (echo).
  size_t length = 0;
  // Receive: the datagram's length on the wire; > length exactly when truncated.
  size_t full_length = 0;
  // Receive: the datagram did not fit in buffer (MSG_TRUNC); its tail is lost.
  bool truncated = false;
  // Receive: the sender (recv_from, recv_many; recv leaves it as it was).
  // Send: the destination; empty (Address()) = the connected peer.
  Address peer{};

  std::span<char> payload() const noexcept { return buffer.first(length); }
};

struct UdpOptions {
  bool reuse_addr = false;  // SO_REUSEADDR
  bool reuse_port = false;  // SO_REUSEPORT: one socket per worker on one port, kernel-balanced
  int recv_buffer = 0;  // SO_RCVBUF in bytes (the kernel doubles it); 0 = system default
  int send_buffer = 0;  // SO_SNDBUF in bytes; 0 = system default
};

class UdpSocket {
 public:
  // Datagrams per recvmmsg/sendmmsg system call. Larger spans are handled kMaxBatch at a time;
  // the per-call arrays (kMaxBatch mmsghdr + iovec, about 5 KiB) live on the caller's stack.
  static constexpr size_t kMaxBatch = 64;

  UdpSocket() noexcept = default;
  // Adopts a datagram socket fd (made non-blocking). The UdpSocket closes it.
  explicit UdpSocket(int fd) noexcept : sock_(fd) {}
  UdpSocket(UdpSocket&&) noexcept = default;  // exclusive access (no call in flight)
  UdpSocket& operator=(UdpSocket&&) noexcept = default;

  // A new non-blocking, close-on-exec UDP socket of `family` (AF_INET or AF_INET6).
  static Result<UdpSocket> open(int family) noexcept;
  // open() + options + bind(). Port 0 = an ephemeral port (see local_address()).
  static Result<UdpSocket> bind_to(const Address& local, const UdpOptions& options = {}) noexcept;

  Result<void> bind(const Address& local) noexcept;
  // Sets the default peer: send()/send_many() without a peer go there, only its datagrams are
  // received, and ICMP errors about it are reported (ECONNREFUSED). Never waits.
  Result<void> connect(const Address& peer) noexcept;

  // One datagram of n bytes to peer / to the connected peer. Waits (write timeout by default)
  // only while the send buffer is full.
  Result<void> send_to(const void* buf, size_t n, const Address& peer, Deadline d = Deadline()) noexcept;
  Result<void> send(const void* buf, size_t n, Deadline d = Deadline()) noexcept;
  // One datagram into d.buffer: sets d.length, d.full_length, d.truncated and (recv_from only)
  // d.peer. Waits (read timeout by default) until one arrives.
  Result<void> recv_from(Datagram& d, Deadline dl = Deadline()) noexcept;
  Result<void> recv(Datagram& d, Deadline dl = Deadline()) noexcept;

  // Waits for at least one datagram (read timeout by default), then fills as many slots as the
  // kernel has datagrams queued, in one recvmmsg, without waiting again. Returns how many
  // slots were filled, 1..min(slots.size(), kMaxBatch); each is filled as by recv_from. An
  // empty span returns 0 at once.
  Result<size_t> recv_many(std::span<Datagram> slots, Deadline dl = Deadline()) noexcept;
  // Sends the datagrams in order (each its first `length` bytes, to its peer or the connected
  // one), kMaxBatch per sendmmsg, waiting while the send buffer is full. Returns how many were
  // sent: all, or fewer when the deadline passed, the socket was closed or an error stopped it
  // after at least one went out. An error that belongs to a datagram (EMSGSIZE, EINVAL) then
  // comes back from the call that starts with it; an ICMP report (ECONNREFUSED) met then is
  // lost, as UDP may lose it anyway. An error before any was sent is returned as the error.
  // An empty span returns 0 at once.
  Result<size_t> send_many(std::span<const Datagram> datagrams, Deadline dl = Deadline()) noexcept;

  // Idempotent; safe while other fibers are inside calls on this socket (they get ECANCELED).
  void close() noexcept { sock_.close(); }

  void set_read_timeout(std::optional<Duration> t) noexcept { sock_.set_read_timeout(t); }
  void set_write_timeout(std::optional<Duration> t) noexcept { sock_.set_write_timeout(t); }
  std::optional<Duration> read_timeout() const noexcept { return sock_.read_timeout(); }
  std::optional<Duration> write_timeout() const noexcept { return sock_.write_timeout(); }

  Result<void> set_option(int level, int name, int value) noexcept { return sock_.set_option(level, name, value); }
  Result<int> get_option(int level, int name) const noexcept { return sock_.get_option(level, name); }
  Result<void> set_reuse_addr(bool on) noexcept { return sock_.set_reuse_addr(on); }
  Result<void> set_reuse_port(bool on) noexcept { return sock_.set_reuse_port(on); }

  Result<Address> local_address() const noexcept { return sock_.local_address(); }
  Result<Address> peer_address() const noexcept { return sock_.peer_address(); }

  int fd() const noexcept { return sock_.fd(); }
  bool is_open() const noexcept { return sock_.is_open(); }
  explicit operator bool() const noexcept { return is_open(); }
  // Gives up ownership: returns the fd (still non-blocking). Needs exclusive access.
  int release() noexcept { return sock_.release(); }

 private:
  Result<void> send_one(const void* buf, size_t n, const Address* peer, Deadline d) noexcept;
  Result<void> recv_one(Datagram& d, bool want_peer, Deadline dl) noexcept;

  Socket sock_;  // the fd and its close protocol, timeouts and waits (see the top)
};
}  // namespace lionet
