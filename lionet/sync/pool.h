// lionet/sync/pool.h: lionet::Pool<T>, a bounded set of connections of any blocking client
// (libpq's PGconn, hiredis' redisContext, MariaDB's MYSQL) shared by fibers: what the hooks
// make possible, without each user writing it.
//
//   lionet::Pool<PGconn> pool({.max_size = 8},
//       [] { return lionet::Pool<PGconn>::Handle(PQconnectdb(dsn), PQfinish); },
//       [](PGconn& c) { return PQstatus(&c) == CONNECTION_OK && PQtransactionStatus(&c) == PQTRANS_IDLE; });
//   {
//     auto conn = pool.acquire();          // waits for a free one; honours the fiber's deadline
//     PGresult* r = PQexec(conn.get(), "SELECT 1");
//     ...
//   }                                      // back to the pool if it passes the check
//
// Owns: up to max_size objects (idle ones, and the ones leased out). Policy:
//  - acquire() takes an idle object (the most recently returned: warm caches, and the others
//    age out), else makes one with the factory while fewer than max_size exist, else waits
//    (FIFO) for a release. The wait is a cancellable one (sched/cancel.h): a cancelled fiber,
//    or one past its DeadlineScope, gets FiberInterrupted (ECANCELED / ETIMEDOUT);
//  - a lease returned runs the check (health check and reset: roll back, drain results);
//    false, or Lease::discard(), destroys the object instead of keeping it;
//  - a factory that throws (or returns null) gives the slot back and the exception (or
//    std::runtime_error) reaches acquire()'s caller;
//  - idle objects older than idle_timeout are destroyed on the next acquire() or release.
// Concurrency: any method from any fiber or thread. The pool must outlive its leases.
#pragma once

#include <chrono>
#include <cstddef>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <stdexcept>
#include <utility>

#include "lionet/base/clock.h"
#include "lionet/sched/cancel.h"
#include "lionet/sync/mutex.h"
#include "lionet/sync/semaphore.h"

namespace lionet {

struct PoolOptions {
  std::size_t max_size = 8;  // objects in existence at most (idle + leased)
  Duration idle_timeout = std::chrono::minutes(5);  // idle longer than this: destroyed
};

template <class T>
class Pool {
 public:
  // An owned object with its deleter (PQfinish, redisFree, mysql_close, or delete).
  using Handle = std::unique_ptr<T, std::function<void(T*)>>;
  using Factory = std::function<Handle()>;
  using Check = std::function<bool(T&)>;

  class Lease {
   public:
    Lease() = default;
    Lease(Lease&& o) noexcept : pool_(std::exchange(o.pool_, nullptr)), obj_(std::move(o.obj_)) {}
    Lease& operator=(Lease&& o) noexcept {
      if (this != &o) {
        reset();
        pool_ = std::exchange(o.pool_, nullptr);
        obj_ = std::move(o.obj_);
      }
      return *this;
    }
    ~Lease() { reset(); }
    T* get() const noexcept { return obj_.get(); }
    T& operator*() const noexcept { return *obj_; }
    T* operator->() const noexcept { return obj_.get(); }
    explicit operator bool() const noexcept { return obj_ != nullptr; }
    // Destroys the object instead of returning it (it is broken: a timed-out query left the
    // connection in an unknown state).
    void discard() noexcept {
      if (pool_) std::exchange(pool_, nullptr)->give_back(std::move(obj_), false);
    }
    // Returns it now (as the destructor does).
    void reset() noexcept {
      if (pool_) std::exchange(pool_, nullptr)->give_back(std::move(obj_), true);
    }

   private:
    friend class Pool;
    Lease(Pool* p, Handle h) noexcept : pool_(p), obj_(std::move(h)) {}
    Pool* pool_ = nullptr;
    Handle obj_;
  };

  Pool(PoolOptions opts, Factory make, Check check = {})
      : opts_(opts), make_(std::move(make)), check_(std::move(check)), slots_(static_cast<int64_t>(opts.max_size)) {
    if (opts_.max_size == 0) throw std::invalid_argument("lionet::Pool: max_size must be at least 1");
    if (!make_) throw std::invalid_argument("lionet::Pool: a factory is required");
  }
  ~Pool() = default;  // destroys the idle objects; leases must have ended
  Pool(const Pool&) = delete;
  Pool& operator=(const Pool&) = delete;

  // Waits for an object (see the top). Throws FiberInterrupted when cancelled or past the
  // fiber's deadline, and whatever the factory throws.
  Lease acquire() {
    if (!current_fiber()) {
      slots_.acquire();  // a plain thread is never cancelled
    } else if (!slots_.try_acquire_until(TimePoint::max())) {  // a claimed wait: cancellable
      const int e = this_fiber::interruption();
      throw FiberInterrupted(e ? e : ETIMEDOUT, "lionet::Pool::acquire: interrupted while waiting for a connection");
    }
    return take_slot();
  }
  // As acquire(), but gives up after `d` (nullopt), besides a cancel or deadline (nullopt too).
  std::optional<Lease> try_acquire_for(Duration d) {
    if (!slots_.try_acquire_for(d)) return std::nullopt;
    return take_slot();
  }

  std::size_t idle() const {
    std::lock_guard lk(mu_);
    return idle_.size();
  }
  // Objects in existence (idle and leased).
  std::size_t size() const {
    std::lock_guard lk(mu_);
    return live_;
  }

 private:
  struct Idle {
    Handle obj;
    TimePoint since;
  };

  // Holds a slot: an idle object, or a new one.
  Lease take_slot() {
    Handle h;
    {
      std::lock_guard lk(mu_);
      expire_locked();
      if (!idle_.empty()) {
        h = std::move(idle_.back().obj);
        idle_.pop_back();
      } else {
        ++live_;
      }
    }
    if (h) return Lease(this, std::move(h));
    try {
      h = make_();
      if (!h) throw std::runtime_error("lionet::Pool: the factory returned no object");
    } catch (...) {
      {
        std::lock_guard lk(mu_);
        --live_;
      }
      slots_.release();
      throw;
    }
    return Lease(this, std::move(h));
  }

  void give_back(Handle h, bool keep) noexcept {
    if (h && keep && check_) {
      CancelShield shield;  // a reset (ROLLBACK) must run even in a cancelled fiber
      try {
        keep = check_(*h);
      } catch (...) {
        keep = false;
      }
    }
    Handle doomed;
    {
      std::lock_guard lk(mu_);
      if (h && keep) {
        idle_.push_back(Idle{std::move(h), now()});
      } else {
        doomed = std::move(h);
        --live_;
      }
      expire_locked();
    }
    {
      CancelShield shield;
      doomed.reset();  // outside the lock: PQfinish may block (a hooked send of Terminate)
    }
    slots_.release();
  }

  // Under mu_: idle objects past idle_timeout (the oldest are at the front) are destroyed.
  void expire_locked() noexcept {
    const TimePoint limit = now() - opts_.idle_timeout;
    while (!idle_.empty() && idle_.front().since < limit) {
      idle_.pop_front();
      --live_;
    }
  }

  const PoolOptions opts_;
  Factory make_;
  Check check_;
  Semaphore slots_;  // permits: objects that may still be leased (idle or not yet made)
  mutable Mutex mu_;
  std::deque<Idle> idle_;
  std::size_t live_ = 0;
};

}  // namespace lionet
