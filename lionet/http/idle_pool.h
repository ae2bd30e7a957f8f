// lionet/http/idle_pool.h: keep-alive connections to one destination, kept between requests:
// the HTTP client keeps one pool per scheme://host:port, the reverse proxy one per upstream.
//
// Owns: when an idle connection is too old to reuse (idle_timeout), how many are kept
// (max_idle), which one is handed out (the newest: the oldest ones expire), the check that an
// old one is still open (one non-blocking MSG_PEEK), closing what it drops (outside its
// locks). Must not: connect, or decide whether a connection may be reused (the caller puts
// back only a connection whose exchange ended cleanly).
//
// Sharded by worker: a worker pushes to and pops from its own shard (a lock nobody else takes
// unless its own shard is empty) and looks into the others only while the count says some
// connection is idle there. Locks are held for a vector operation, never across IO or a park.
#pragma once

#include <atomic>
#include <cstddef>
#include <memory>
#include <vector>

#include "lionet/base/clock.h"
#include "lionet/net/stream.h"

namespace lionet::http {

// A TimePoint as the int64 an atomic keeps (the pool's sweep time, the proxy's timestamps).
inline int64_t ticks(TimePoint t) { return t.time_since_epoch().count(); }

// A connection the pool can keep. Users derive from it to keep their own per-connection state
// with it (the proxy keeps its buffer).
struct PooledConnection {
  virtual ~PooledConnection() = default;
  std::unique_ptr<Stream> stream;
  int fd = -1;  // the socket under stream, for the idle peek; -1: never peeked
  TimePoint since{};  // when it was last put back
  bool reused = false;  // it has come out of the pool at least once
};

struct IdlePoolOptions {
  std::size_t max_idle = 16;  // connections kept at most (also when puts race)
  Duration idle_timeout = std::chrono::seconds(30);
  // A connection idle this long or more is checked for a close by its peer before it is handed
  // out; younger ones are trusted (callers resend a request that got no response byte on a
  // reused connection, once, on a new one).
  Duration peek_after = std::chrono::milliseconds(500);
};

class IdlePool {
 public:
  explicit IdlePool(IdlePoolOptions options = {});
  ~IdlePool();  // closes what it holds
  IdlePool(const IdlePool&) = delete;
  IdlePool& operator=(const IdlePool&) = delete;

  // The most recently put connection that is still fresh and open, marked reused; null when
  // there is none. Expired ones met on the way are closed, and the whole pool is swept (sweep())
  // when that is due, so steady light traffic that reuses only the newest connections does not
  // keep the older ones open past idle_timeout.
  std::unique_ptr<PooledConnection> take();
  // Keeps c, stamped now, unless max_idle are kept already: then closes it.
  void put(std::unique_ptr<PooledConnection> c);
  // Closes the connections idle past idle_timeout if a sweep is due (every idle_timeout / 2, at
  // least 10 ms; whoever wins the race sweeps). For a reaper while no request comes.
  void sweep();
  // Closes every connection it holds.
  void close_all();
  // Connections held right now.
  std::size_t size() const noexcept { return count_.load(std::memory_order_relaxed); }
  // How often sweep() is due.
  Duration sweep_period() const noexcept;
  const IdlePoolOptions& options() const noexcept { return options_; }

 private:
  struct Shard;
  static constexpr std::size_t kShards = 8;
  void sweep_if_due(TimePoint t, std::vector<std::unique_ptr<PooledConnection>>& expired);

  const IdlePoolOptions options_;
  std::unique_ptr<Shard[]> shards_;
  std::atomic<std::size_t> count_{0};
  std::atomic<int64_t> next_sweep_{0};  // ticks of TimePoint
};

}  // namespace lionet::http
