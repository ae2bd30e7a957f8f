// lionet/syslog/server.h: lionet::syslog::Server, syslog ingest into a storage topic: UDP
// datagrams and TCP streams (RFC 6587) of RFC 5424 / RFC 3164 messages, each stored as one
// record (value: message.h's JSON; key: host or app name; timestamp: the message's own, else
// the arrival time).
//
//   lionet::syslog::ServerOptions o;
//   o.topic = "syslog";
//   lionet::syslog::Server s(sched, store, o);
//   s.listen_udp(lionet::Address::parse("127.0.0.1:5514").value());
//   s.listen_tcp(lionet::Address::parse("127.0.0.1:5514").value());
//   s.start();   // then `logger -n 127.0.0.1 -P 5514 --rfc5424 hello` lands in the topic
//   ...
//   s.stop(std::chrono::seconds(5));
//
// Owns: the UDP sockets (one per worker of sched per address, SO_REUSEPORT, so the kernel
// spreads datagrams over the workers) and their reader fibers, a TcpServer per TCP address, the
// counters. Must not: parse or store on another thread than the reader's (no queue between the
// socket and the store: while an append is written, datagrams wait in the socket's receive
// buffer, and what overflows it is dropped and counted by the kernel: kernel_drops()).
//
// Batching: a UDP reader takes up to batch_max datagrams per recvmmsg, waits at most `linger`
// after the first for the batch to fill, then appends them (one append per partition: one
// write, one CRC, one sync under the store's flush policy). A TCP connection appends what each
// read brought (up to batch_max records per append). Records go to partition
// FNV-1a(key) % partitions (a key-less message to partition 0).
//
// Nothing received is dropped silently: a message that follows neither RFC is stored raw with
// "malformed":true; one longer than max_message_size is stored cut with "truncated":true (UDP:
// what the socket buffer slot holds); an append that fails (disk full, IO error) loses its
// records, counted in stats().lost and logged (logger "syslog", rate-limited).
#pragma once

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "lionet/base/clock.h"
#include "lionet/net/address.h"
#include "lionet/net/tcp_server.h"
#include "lionet/net/udp_socket.h"
#include "lionet/sched/scheduler.h"
#include "lionet/storage/fwd.h"

namespace lionet::syslog {

struct ServerOptions {
  std::string name = "syslog";  // in logs and thread names. YAML: servers[].name
  std::string topic = "syslog";  // created at start if missing. YAML: servers[].topic
  bool key_by_app = false;  // key = app name instead of host name. YAML: servers[].key (host | app)
  std::size_t batch_max = 256;  // records per append at most (1..65536). YAML: servers[].batch_max
  Duration linger = std::chrono::milliseconds(5);  // UDP: wait for a batch to fill. YAML: servers[].linger
  std::size_t max_message_size = 8192;  // bytes of one message kept (480..1048576). YAML: servers[].max_message_size
  int recv_buffer = 4 << 20;  // UDP SO_RCVBUF (bytes; the kernel doubles it). YAML: servers[].recv_buffer
  std::size_t max_connections = 10000;  // TCP. YAML: servers[].max_connections
  std::size_t max_connections_per_address = 0;  // TCP, 0 = none. YAML: servers[].max_connections_per_address
  // Who may send: a TCP peer these rules refuse is closed at accept, a UDP datagram from one
  // is dropped and counted (ServerStats::denied). YAML: servers[].allow / deny
  AddressRules admit{};
  Duration idle_timeout = std::chrono::minutes(5);  // TCP: a silent connection is closed. YAML: servers[].idle_timeout
};

struct ServerStats {
  uint64_t received = 0;  // messages taken from a socket
  uint64_t stored = 0;  // records appended (acknowledged by the store)
  uint64_t malformed = 0;  // stored raw: neither RFC 5424 nor RFC 3164
  uint64_t truncated = 0;  // stored cut at max_message_size
  uint64_t lost = 0;  // records whose append failed
  uint64_t tcp_connections = 0;  // accepted so far
  uint64_t denied = 0;  // UDP datagrams dropped because `admit` refused their sender
};

class Server {
 public:
  Server(Scheduler& sched, storage::Store& store, ServerOptions options);
  ~Server();  // stops if still running
  Server(const Server&) = delete;
  Server& operator=(const Server&) = delete;

  // Before start(). Throw std::system_error naming the address ("syslog udp 127.0.0.1:5514:
  // Address already in use").
  void listen_udp(const Address& local);
  void listen_tcp(const Address& local);
  // A TCP listener handed to this process (socket activation, a binary upgrade): see
  // TcpServer::adopt.
  void adopt_tcp(int fd);
  // The TCP listeners' servers (for handing their sockets on, TcpServer::listening_fds).
  std::vector<TcpServer*> tcp_servers() const;
  // Creates the topic if missing (std::runtime_error when the store refuses), starts the readers.
  void start();
  // Stops reading: UDP readers end (what they hold is appended first), TCP connections get
  // until `drain` to end, then are closed. True if every connection ended within it.
  bool stop(Duration drain);

  ServerStats stats() const noexcept;
  // Datagrams the kernel dropped because a socket's receive buffer was full (the sockets'
  // sk_drops, what SO_RXQ_OVFL reports, read with SO_MEMINFO), summed over the UDP sockets.
  uint64_t kernel_drops() const noexcept;
  // "udp://127.0.0.1:5514", "tcp://127.0.0.1:5514" (ports resolved).
  std::vector<std::string> addresses() const;

  struct Impl;

 private:
  std::unique_ptr<Impl> impl_;
};
}  // namespace lionet::syslog
