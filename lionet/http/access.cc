// lionet/http/access.cc: with_address_rules, RateLimiter, with_rate_limit (see access.h).
#include "lionet/http/access.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <list>
#include <mutex>
#include <random>
#include <stdexcept>
#include <unordered_map>

#include "lionet/sched/scheduler.h"

namespace lionet::http {

Handler with_address_rules(Handler h, AddressRules rules, Counter* denied) {
  if (rules.empty()) return h;
  return [h = std::move(h), rules = std::move(rules), denied](Request& req, Response& res) {
    auto peer = req.peer_address();
    if (!peer.ok() || !rules.admits(peer.value())) {
      if (denied) denied->add();
      res.reply(403, "Forbidden\n");
      return;
    }
    h(req, res);
  };
}

namespace {

constexpr std::size_t kShards = 16;

// 64-bit keyed hash of the key (FNV-1a over the bytes, then splitmix64's finalizer with the
// seed mixed in): keys are remembered by this digest only, so a long header value costs no
// memory, and without the seed a client cannot aim its keys at one shard.
uint64_t hash_key(std::string_view key, uint64_t seed) noexcept {
  uint64_t x = 0xcbf29ce484222325ULL ^ seed;
  for (unsigned char c : key) x = (x ^ c) * 0x100000001b3ULL;
  x ^= seed;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

uint64_t random_seed() {
  std::random_device rd;
  return (static_cast<uint64_t>(rd()) << 32) ^ rd();
}

}  // namespace

struct RateLimiter::Shard {
  struct Entry {
    uint64_t key;
    double excess;  // requests above the rate, as of `last`
    TimePoint last;
  };
  std::mutex mu;  // held for a lookup and a few operations; never across a park
  std::list<Entry> lru;  // front: most recently seen
  std::unordered_map<uint64_t, std::list<Entry>::iterator> index;
};

RateLimiter::RateLimiter(RateLimitOptions options)
    : options_(std::move(options)), seed_(random_seed()), shards_(new Shard[kShards]) {
  if (!(options_.rate > 0) || !std::isfinite(options_.rate))
    throw std::invalid_argument("rate limit: rate must be a positive number of requests per second");
  if (options_.max_keys == 0) throw std::invalid_argument("rate limit: max_keys must be at least 1");
}

RateLimiter::~RateLimiter() = default;

std::size_t RateLimiter::keys() const noexcept {
  std::size_t n = 0;
  for (std::size_t i = 0; i < kShards; ++i) {
    std::lock_guard<std::mutex> g(shards_[i].mu);
    n += shards_[i].index.size();
  }
  return n;
}

RateLimiter::Decision RateLimiter::account(std::string_view key, TimePoint t) {
  const uint64_t h = hash_key(key, seed_);
  Shard& s = shards_[h % kShards];
  const std::size_t cap = std::max<std::size_t>(1, (options_.max_keys + kShards - 1) / kShards);
  const double burst = static_cast<double>(options_.burst);
  Decision d;
  std::lock_guard<std::mutex> g(s.mu);
  auto it = s.index.find(h);
  if (it == s.index.end()) {
    // A new key: its first request passes at once with an empty bucket (nginx: excess 0).
    if (s.index.size() >= cap) {  // forget the least recently seen key
      s.index.erase(s.lru.back().key);
      s.lru.pop_back();
    }
    s.lru.push_front({h, 0.0, t});
    s.index.emplace(h, s.lru.begin());
    return d;
  }
  auto& e = *it->second;
  const double elapsed = std::chrono::duration<double>(t - e.last).count();
  // nginx's order: drain, add this request, then clamp at 0 (a key idle for 1/rate seconds
  // or more is back at an empty bucket).
  const double excess = std::max(0.0, e.excess - options_.rate * std::max(0.0, elapsed) + 1.0);
  if (excess > burst) {
    d.allowed = false;
    // Room again once the excess has drained to burst (a request then adds 1 and fits).
    const double wait = (excess - burst) / options_.rate;
    d.retry_after = std::chrono::duration_cast<Duration>(std::chrono::duration<double>(wait));
  } else {
    e.excess = excess;
    e.last = t;
    if (!options_.nodelay)
      d.delay = std::chrono::duration_cast<Duration>(std::chrono::duration<double>(excess / options_.rate));
  }
  s.lru.splice(s.lru.begin(), s.lru, it->second);
  return d;
}

std::string RateLimiter::key_of(const Request& req) const {
  if (!options_.key_header.empty()) {
    std::string_view v = req.header(options_.key_header);
    if (!v.empty()) {
      std::string k(1, 'h');
      k.append(v);
      return k;
    }
  }
  std::string k(1, 'a');
  if (auto peer = req.peer_address(); peer.ok()) {
    const IpKey ip = IpKey::of(peer.value());
    k.append(reinterpret_cast<const char*>(ip.bytes.data()), ip.bytes.size());
    if (ip.is_unix()) k += 'u';
  }
  return k;
}

Handler with_rate_limit(Handler h, std::shared_ptr<RateLimiter> limiter, RateLimitCounters* counters) {
  return [h = std::move(h), limiter = std::move(limiter), counters](Request& req, Response& res) {
    const RateLimiter::Decision d = limiter->account(limiter->key_of(req), now());
    if (!d.allowed) {
      if (counters) counters->refused.add();
      const auto secs = std::max<int64_t>(1, std::chrono::ceil<std::chrono::seconds>(d.retry_after).count());
      res.set_header("Retry-After", std::to_string(secs));
      res.reply(limiter->options().status, "Too Many Requests\n");
      return;
    }
    if (d.delay > Duration::zero()) {
      if (counters) counters->delayed.add();
      if (!this_fiber::sleep_for(d.delay)) {  // cancelled, or the handler's deadline passed
        res.reply(503, "Service Unavailable\n");
        return;
      }
    }
    h(req, res);
  };
}

}  // namespace lionet::http
