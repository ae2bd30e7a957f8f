// lionet/net/tcp_server.h: lionet::TcpServer, accept loops in fibers and a fiber per
// connection running the user's handler over a SocketStream.
//
//   lionet::TcpServer server(io, [](lionet::SocketStream& s) { /* serve one connection */ });
//   server.listen(lionet::Address::parse("127.0.0.1:8080").value());   // throws if bind fails
//   server.start();
//   ...
//   server.stop(std::chrono::seconds(5));   // stop accepting, drain, then cancel
//
// Owns: listeners, acceptor fibers, the set of live connections, the connection limits (in
// all, per client address), the address rules applied at accept, and
// the shutdown protocol. Must not: know any protocol (HTTP, TLS wrap the handler), read
// configuration (TcpServerOptions is filled by app/), or throw after start().
//
// Shutdown protocol (stop(drain)), in order:
//   1. stopping() becomes true; every listener is closed, which wakes its acceptor fiber
//      (Socket::close shuts it down and cancels the wait); the acceptors are joined.
//      New connections are refused by the kernel from here on.
//   2. If drain_shutdown_read: every live connection that has received data has its read
//      side shut down, so a handler waiting for its next request reads end of stream and
//      ends, while one busy finishing a response can still write it (bytes already queued
//      stay readable). A connection whose peer has sent nothing yet is left open: it was
//      accepted a moment ago and its first request may be in flight (cutting it made that
//      client read end of stream instead of a response during a binary upgrade). Its read
//      side is shut down once its first bytes are read, or once it has been silent for
//      drain_silent_grace since it was accepted; the protocol's own first-request timeout
//      bounds it too (HTTP answers such a request with Connection: close).
//   3. Wait until every handler has returned or the drain deadline passes, repeating step 2
//      every 10 ms for the connections it left open.
//   4. Past the deadline: every remaining connection is closed (Socket::close: its pending
//      and later calls fail with ECANCELED/EBADF), then wait for those handlers to return.
//   stop() returns true if step 3 drained everything in time.
// Faults: accept errors EMFILE/ENFILE/ENOBUFS/ENOMEM make the acceptor sleep
// accept_backoff and retry (one log line per second at most: never a spinning core);
// ECONNABORTED/EPROTO are skipped; an exception escaping a handler is logged and only that
// connection ends.
// Concurrency: listen() and start() from one thread before serving; stop() once, from any
// fiber or thread except a handler of this server (it would wait for itself). The counters
// may be read from anywhere.
#pragma once

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <system_error>
#include <unordered_map>
#include <vector>

#include "lionet/base/clock.h"
#include "lionet/base/log_limiter.h"
#include "lionet/net/address.h"
#include "lionet/net/address_rules.h"
#include "lionet/net/socket.h"
#include "lionet/net/socket_stream.h"
#include "lionet/sched/scheduler.h"
#include "lionet/sync/wait_group.h"

namespace lionet {
class IOManager;

struct TcpServerOptions {
  // Connections served at once; a connection accepted beyond it is closed at once (the client
  // reads end of stream). 0 = no limit (then RLIMIT_NOFILE is the limit).
  std::size_t max_connections = 0;
  // Connections served at once from one client address (IpKey: the IPv4 address, the whole
  // IPv6 address); the next one from it is closed at once. Unix-domain peers are not counted.
  // The table holds only addresses with a live connection, so max_connections bounds it.
  // 0 = no limit. nginx: limit_conn per $binary_remote_addr.
  std::size_t max_connections_per_address = 0;
  // Who may connect: a peer these rules refuse is closed at once, before any byte is read
  // (net/address_rules.h). Empty: everyone.
  AddressRules admit{};
  // One SO_REUSEPORT listener per worker for each address, its acceptor pinned to that
  // worker: the kernel spreads connections over workers and accept never contends. Costs one
  // fd per worker per address.
  bool reuse_port_per_worker = false;
  // SO_REUSEPORT on every listener, so that other processes (another `lionet`, the same
  // program started twice) may listen on the same address: the kernel spreads new
  // connections over all of them by a hash of the peer. Off: a second bind fails EADDRINUSE.
  // (reuse_port_per_worker implies it.)
  bool reuse_port = false;
  int backlog = SOMAXCONN;
  // Applied to each accepted connection's stream (nullopt = no limit).
  std::optional<Duration> read_timeout{};
  std::optional<Duration> write_timeout{};
  // How long an acceptor sleeps after EMFILE/ENFILE/ENOBUFS/ENOMEM before trying again.
  Duration accept_backoff = std::chrono::milliseconds(100);
  // Connections an acceptor takes in a row before it yields its worker. accept does not park
  // while the backlog is non-empty, so with no yield one flood burst (up to `backlog`, 4096)
  // ran in one slice: no other fiber of the worker, nor the reactor poll that wakes them, ran
  // meanwhile. Fibers woken by IO run at the next yields (the reactor is polled at scheduling
  // points); a fiber that only yields may wait longer once a batch exceeds the local run queue
  // (256) and spills. The cost: new connections' first slices now run between batches, so a
  // burst drains more slowly. Measured by scripts/abuse.sh (20,000 connections at a fresh
  // 1-worker server, bench/abuse_client's keep-alive probe): no yield, worst probe wait 64-115
  // ms, p99 ~5 ms, backlog never overflowed; 512, worst 11-30 ms, p99 ~10 ms (more requests
  // wait one batch), overflowed in 2 of 12 runs; 64-256 overflowed more often (dropped SYNs
  // are retried by the client after 1 s). 0 = never yield.
  unsigned accept_batch = 512;
  // Step 2 of the shutdown protocol.
  bool drain_shutdown_read = true;
  // Step 2: how long a connection whose peer has sent nothing since it was accepted keeps
  // its read side during a drain (its first request may still be on the way).
  Duration drain_silent_grace = std::chrono::seconds(1);
  // Names the acceptor fibers and log lines.
  std::string name = "tcp";
};

class TcpServer {
 public:
  // Runs once per connection, in its own fiber; the connection is closed when it returns.
  using Handler = std::function<void(SocketStream&)>;

  // Accepts and serves on sched's workers; IO goes through the scheduler's driver.
  TcpServer(Scheduler& sched, Handler handler, TcpServerOptions options = {});
  // The same on io.scheduler() (kept for code that made its own IOManager).
  TcpServer(IOManager& io, Handler handler, TcpServerOptions options = {});
  // stop(0) if started and not yet stopped.
  ~TcpServer();
  TcpServer(const TcpServer&) = delete;
  TcpServer& operator=(const TcpServer&) = delete;

  // Binds and listens (port 0: an ephemeral port, see addresses()). Throws std::system_error
  // naming the address on failure. Call before start(); may be called for several addresses.
  void listen(const Address& local);
  // Serves on a socket that is already bound and listening, handed to this process (systemd
  // socket activation, a binary upgrade: app/inherited_listeners.h). Takes fd over (it becomes
  // non-blocking and close-on-exec). Throws std::system_error if fd is not a listening stream
  // socket. Call before start().
  void adopt(int fd);
  // Stops accepting without shutting the listening sockets down, for when another process
  // holds them too and goes on accepting (a binary upgrade): acceptors are woken by cancelling
  // their waits (repeated until each has left), then this process's fds close. Connections
  // accepted so far are untouched: stop() drains them as usual. Any thread but an acceptor.
  void stop_accepting_keep_sockets();
  // The listening fds, one per listen()/adopt() (the first when reuse_port_per_worker made
  // several), matching addresses(). Owned by this server.
  std::vector<int> listening_fds() const;
  // Spawns the acceptor fibers. Throws std::logic_error without listen() or if called twice.
  void start();
  // The shutdown protocol above. Returns true if all connections ended within drain.
  bool stop(Duration drain);

  // The bound addresses, one per listen() call (ephemeral ports resolved).
  std::vector<Address> addresses() const;
  bool stopping() const noexcept { return stopping_.load(std::memory_order_acquire); }
  std::size_t connections() const noexcept { return live_.load(std::memory_order_relaxed); }
  uint64_t accepted() const noexcept { return accepted_.load(std::memory_order_relaxed); }
  uint64_t rejected() const noexcept { return rejected_.load(std::memory_order_relaxed); }
  // Connections closed at once because options.admit refused their address.
  uint64_t denied() const noexcept { return denied_.load(std::memory_order_relaxed); }
  // Connections closed at once because their address had max_connections_per_address.
  uint64_t per_address_rejected() const noexcept { return per_address_rejected_.load(std::memory_order_relaxed); }
  // Connections closed at once because no fiber could be spawned for them (spawn threw
  // std::system_error: fiber.max_stack_memory or the address space exhausted). Logged at most
  // once per second, with the count.
  uint64_t spawn_failures() const noexcept { return spawn_failures_.load(std::memory_order_relaxed); }

 private:
  struct Listener {
    Address address;
    Socket socket;
    int worker = -1;  // pinned acceptor (reuse_port_per_worker), else -1
  };
  struct Conn {
    explicit Conn(Socket s) : stream(std::move(s)), accepted(now()) {}
    SocketStream stream;
    TimePoint accepted;
    bool read_shut = false;  // step 2 done (under mu_)
    bool counted = false;  // holds a slot of per_address_ under `key`
    IpKey key;
    Conn* prev = nullptr;  // links protected by mu_
    Conn* next = nullptr;
  };

  void accept_loop(Listener* l) noexcept;
  void admit(Socket s, const Address& peer) noexcept;
  // max_connections_per_address: takes a slot for key (false: none left), gives one back.
  bool take_address_slot(const IpKey& key) noexcept;
  void release_address_slot(const IpKey& key) noexcept;
  void serve(Conn* c) noexcept;
  bool shut_reads(TimePoint t);
  void log_accept_error(int err) noexcept;
  void log_spawn_failure(const std::system_error& e) noexcept;

  Scheduler& sched_;
  Handler handler_;
  const TcpServerOptions options_;
  std::vector<std::unique_ptr<Listener>> listeners_;  // fixed after start()
  std::vector<Address> addresses_;  // one per listen(); fixed after start()
  std::vector<JoinHandle<void>> acceptors_;  // owned by start()/stop()

  std::mutex mu_;  // protects the list head_ and the links; never held across a park
  Conn* head_ = nullptr;
  bool cancelled_ = false;  // step 4 reached (under mu_): late arrivals are closed at once

  // Relaxed counters: statistics, and live_ is only a limit (a CAS keeps it exact).
  std::atomic<std::size_t> live_{0};
  std::atomic<uint64_t> accepted_{0};
  std::atomic<uint64_t> rejected_{0};
  std::atomic<uint64_t> denied_{0};
  std::atomic<uint64_t> per_address_rejected_{0};
  std::mutex addr_mu_;  // protects per_address_; held for one lookup, never across a park
  std::unordered_map<IpKey, std::size_t, IpKeyHash> per_address_;  // live connections per address
  std::atomic<bool> stopping_{false};  // release by stop(), acquire by acceptors and handlers
  std::atomic<int> acceptors_running_{0};  // +1 by start() per acceptor, -1 as each ends
  std::atomic<bool> started_{false};
  std::atomic<bool> stopped_{false};
  // One log line per second at most for each; the events held back are counted into the next.
  LogLimiter accept_log_;  // accept errors
  LogLimiter spawn_log_;  // connections closed for want of a fiber
  std::atomic<uint64_t> spawn_failures_{0};
  WaitGroup handlers_;  // one count per live connection's fiber
};
}  // namespace lionet
