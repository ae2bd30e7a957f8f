// lionet/http/access.h: who may come in, per request: address rules (403) and rate limits
// (nginx's limit_req: 429 with Retry-After), as wrappers around a handler, for HTTP/1.1 and
// HTTP/2 alike. Authentication is http/auth.h; limits per connection (connections per client
// address, address rules at accept) are net/tcp_server.h's.
//
//   auto limiter = std::make_shared<http::RateLimiter>(http::RateLimitOptions{.rate = 50, .burst = 10});
//   router.get("/api", http::with_rate_limit(api, limiter));
//   router.get("/internal", http::with_address_rules(h, AddressRules::parse({"10.0.0.0/8"}, {})));
//
// Owns: RateLimiter (the per-key leaky buckets, bounded), the two wrappers. Must not: block
// while holding a shard lock (the limiter's locks are held for a lookup and a few arithmetic
// operations, never across a park).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "lionet/base/clock.h"
#include "lionet/base/metrics.h"
#include "lionet/http/request.h"
#include "lionet/http/response.h"
#include "lionet/http/server.h"
#include "lionet/net/address_rules.h"

namespace lionet::http {

// h, answering 403 to a peer `rules` does not admit (and counting it in *denied when given).
// A request whose peer address is unknown (no socket) is refused too, unless rules is empty.
Handler with_address_rules(Handler h, AddressRules rules, Counter* denied = nullptr);

struct RateLimitOptions {
  // Requests per second per key, > 0. nginx: `limit_req_zone ... rate=50r/s`.
  double rate = 10;
  // Requests above the rate a key may have outstanding: delayed (queued) to keep the rate, or
  // served at once with nodelay; one more is refused. nginx: `limit_req ... burst=10`.
  std::size_t burst = 0;
  // Serve requests within the burst at once instead of spacing them out. nginx: `nodelay`.
  bool nodelay = false;
  // "" = the client address (IPv4 whole, IPv6 whole), else the value of this request header
  // (an API key, say); a request without the header is limited by its client address.
  std::string key_header{};
  // Keys remembered at most (the bound on memory: about 100 bytes per key, 6.5 MB at the
  // default). When full, the least recently seen key is forgotten: under a flood of more
  // distinct keys than this, a forgotten key starts again with an empty bucket. nginx: the
  // zone's size (a 1 MB zone holds about 16,000 states).
  std::size_t max_keys = 65536;
  // The answer to a refused request (nginx's limit_req_status; 503 by default there).
  int status = 429;
};

// Leaky buckets, one per key, nginx's limit_req algorithm: each key has an excess that drains
// at `rate` per second; a request adds 1. An excess above `burst` refuses the request (the
// excess is left as it was); otherwise the request is delayed by excess / rate (0 with
// nodelay). Thread-safe: keys are spread over 16 shards, each with its own lock.
class RateLimiter {
 public:
  explicit RateLimiter(RateLimitOptions options);
  ~RateLimiter();
  RateLimiter(const RateLimiter&) = delete;
  RateLimiter& operator=(const RateLimiter&) = delete;

  struct Decision {
    bool allowed = true;
    Duration delay{0};  // allowed: wait this long first (never with nodelay)
    Duration retry_after{0};  // refused: when the bucket will have room again
  };
  // Accounts one request of `key` at time t.
  Decision account(std::string_view key, TimePoint t);
  // The key of a request: its key_header's value, else its client address (bytes, not text).
  std::string key_of(const Request& req) const;
  std::size_t keys() const noexcept;
  const RateLimitOptions& options() const noexcept { return options_; }

 private:
  struct Shard;
  const RateLimitOptions options_;
  const uint64_t seed_;  // keys are hashed with a per-process random seed
  std::unique_ptr<Shard[]> shards_;
};

// Counters of a limited route (/metrics: lionet_http_rate_limited_total,
// lionet_http_rate_delayed_total).
struct RateLimitCounters {
  Counter refused;
  Counter delayed;
};

// h behind the limiter: a refused request gets options().status with `Retry-After` (whole
// seconds, at least 1) and `Connection` untouched; a delayed one waits (a cancellable sleep:
// a client gone meanwhile, or a handler deadline, ends the wait with the usual 499 / 504).
Handler with_rate_limit(Handler h, std::shared_ptr<RateLimiter> limiter, RateLimitCounters* counters = nullptr);

}  // namespace lionet::http
