// lionet/http/idle_pool.cc: IdlePool (see idle_pool.h).
#include "lionet/http/idle_pool.h"

#include <sys/socket.h>

#include <algorithm>
#include <cerrno>
#include <functional>
#include <iterator>
#include <mutex>
#include <thread>
#include <vector>

#include "lionet/base/macros.h"
#include "lionet/sched/scheduler.h"

namespace lionet::http {
namespace {
// The shard of the calling worker (plain threads share them by thread id).
std::size_t shard_index(std::size_t shards) {
  const int w = this_fiber::worker_index();
  if (w >= 0) return static_cast<std::size_t>(w) % shards;
  return std::hash<std::thread::id>{}(std::this_thread::get_id()) % shards;
}

void close_all_of(std::vector<std::unique_ptr<PooledConnection>>& v) {
  for (auto& c : v) c->stream->close();
}
}  // namespace

// A shard is a stack (pushed with `since` = now): its oldest are at the front.
struct alignas(kCacheLine) IdlePool::Shard {
  std::mutex mu;
  std::vector<std::unique_ptr<PooledConnection>> idle;
};

IdlePool::IdlePool(IdlePoolOptions options) : options_(options), shards_(std::make_unique<Shard[]>(kShards)) {}

IdlePool::~IdlePool() { close_all(); }

Duration IdlePool::sweep_period() const noexcept {
  return std::max<Duration>(options_.idle_timeout / 2, std::chrono::milliseconds(10));
}

void IdlePool::sweep_if_due(TimePoint t, std::vector<std::unique_ptr<PooledConnection>>& expired) {
  int64_t due = next_sweep_.load(std::memory_order_relaxed);
  if (ticks(t) < due || !next_sweep_.compare_exchange_strong(due, ticks(t + sweep_period()), std::memory_order_relaxed))
    return;
  for (std::size_t i = 0; i < kShards; ++i) {
    Shard& sh = shards_[i];
    std::lock_guard<std::mutex> lk(sh.mu);
    auto fresh = std::find_if(sh.idle.begin(), sh.idle.end(), [&](const std::unique_ptr<PooledConnection>& x) {
      return t - x->since < options_.idle_timeout;
    });
    count_.fetch_sub(static_cast<std::size_t>(fresh - sh.idle.begin()), std::memory_order_relaxed);
    std::move(sh.idle.begin(), fresh, std::back_inserter(expired));
    sh.idle.erase(sh.idle.begin(), fresh);
  }
}

void IdlePool::sweep() {
  std::vector<std::unique_ptr<PooledConnection>> expired;
  sweep_if_due(coarse_now(), expired);
  close_all_of(expired);
}

std::unique_ptr<PooledConnection> IdlePool::take() {
  if (count_.load(std::memory_order_relaxed) == 0) return nullptr;
  std::vector<std::unique_ptr<PooledConnection>> expired;
  std::unique_ptr<PooledConnection> c;
  const TimePoint t = coarse_now();  // ages of seconds (idle_timeout, peek_after): a tick does not matter
  // The newest of a shard (LIFO: the oldest ones expire), dropping expired ones on the way.
  auto pop = [&](Shard& sh) {
    while (!c && !sh.idle.empty()) {
      std::unique_ptr<PooledConnection> x = std::move(sh.idle.back());
      sh.idle.pop_back();
      count_.fetch_sub(1, std::memory_order_relaxed);
      if (t - x->since < options_.idle_timeout) c = std::move(x);
      else expired.push_back(std::move(x));
    }
  };
  sweep_if_due(t, expired);
  const std::size_t own = shard_index(kShards);
  {
    std::lock_guard<std::mutex> lk(shards_[own].mu);
    pop(shards_[own]);
  }
  for (std::size_t k = 1; !c && k < kShards && count_.load(std::memory_order_relaxed) > 0; ++k) {
    Shard& sh = shards_[(own + k) % kShards];
    std::lock_guard<std::mutex> lk(sh.mu);
    pop(sh);
  }
  close_all_of(expired);
  if (c && c->fd >= 0 && t - c->since >= options_.peek_after) {
    char b;
    const ssize_t n = ::recv(c->fd, &b, 1, MSG_PEEK | MSG_DONTWAIT);
    if (!(n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))) {  // closed, reset, or stray bytes
      c->stream->close();
      c.reset();
    }
  }
  if (c) c->reused = true;
  return c;
}

void IdlePool::put(std::unique_ptr<PooledConnection> c) {
  // The slot is taken before the push, so puts racing on several workers never keep more than
  // max_idle (a check before the push let two of them pass it). Counted but not yet pushed is
  // harmless: a take() that believes the count finds nothing and opens a connection.
  if (count_.fetch_add(1, std::memory_order_relaxed) < options_.max_idle) {
    c->since = coarse_now();
    Shard& sh = shards_[shard_index(kShards)];
    std::lock_guard<std::mutex> lk(sh.mu);
    try {
      sh.idle.push_back(std::move(c));
    } catch (...) {
      count_.fetch_sub(1, std::memory_order_relaxed);
      throw;
    }
    return;
  }
  count_.fetch_sub(1, std::memory_order_relaxed);
  c->stream->close();
}

void IdlePool::close_all() {
  for (std::size_t i = 0; i < kShards; ++i) {
    std::vector<std::unique_ptr<PooledConnection>> idle;
    {
      std::lock_guard<std::mutex> lk(shards_[i].mu);
      idle.swap(shards_[i].idle);
    }
    count_.fetch_sub(idle.size(), std::memory_order_relaxed);
    close_all_of(idle);
  }
}

}  // namespace lionet::http
