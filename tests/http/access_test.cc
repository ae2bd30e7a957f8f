// Tests of lionet/http/access.h: the rate limiter's leaky bucket (nginx's limit_req rules),
// its bound on keys and its locking. The handler wrappers are tested through the binary with
// curl (tests/app/app_access_test.cc).
#include "lionet/http/access.h"

#include <gtest/gtest.h>

#include <atomic>
#include <string>
#include <thread>
#include <vector>

namespace lionet::http {
namespace {

using std::chrono::milliseconds;

TimePoint t0() { return TimePoint{} + std::chrono::hours(1); }

TEST(RateLimiter, BurstZeroAdmitsOneRequestPerInterval) {
  RateLimiter l({.rate = 10, .burst = 0, .nodelay = true});
  EXPECT_TRUE(l.account("k", t0()).allowed);
  auto refused = l.account("k", t0() + milliseconds(50));
  EXPECT_FALSE(refused.allowed);
  EXPECT_EQ(std::chrono::duration_cast<milliseconds>(refused.retry_after).count(), 50);
  EXPECT_TRUE(l.account("k", t0() + milliseconds(100)).allowed);
  EXPECT_FALSE(l.account("k", t0() + milliseconds(199)).allowed);
  EXPECT_TRUE(l.account("k", t0() + milliseconds(200)).allowed);
}

TEST(RateLimiter, NodelayServesTheBurstAtOnceThenRefuses) {
  RateLimiter l({.rate = 1, .burst = 3, .nodelay = true});
  for (int i = 0; i < 4; ++i) {  // the first request plus the burst of 3
    auto d = l.account("k", t0());
    EXPECT_TRUE(d.allowed) << i;
    EXPECT_EQ(d.delay.count(), 0) << i;
  }
  EXPECT_FALSE(l.account("k", t0()).allowed);
  EXPECT_TRUE(l.account("other", t0()).allowed);  // keys are independent
}

TEST(RateLimiter, WithoutNodelayTheBurstIsSpacedOutAtTheRate) {
  RateLimiter l({.rate = 10, .burst = 2});
  EXPECT_EQ(l.account("k", t0()).delay.count(), 0);
  EXPECT_EQ(std::chrono::duration_cast<milliseconds>(l.account("k", t0()).delay).count(), 100);
  EXPECT_EQ(std::chrono::duration_cast<milliseconds>(l.account("k", t0()).delay).count(), 200);
  EXPECT_FALSE(l.account("k", t0()).allowed);
}

TEST(RateLimiter, SustainedLoadIsHeldToTheRate) {
  RateLimiter l({.rate = 50, .burst = 10, .nodelay = true});
  int allowed = 0;
  for (int ms = 0; ms < 2000; ++ms)  // 1000 requests a second for 2 s
    allowed += l.account("k", t0() + milliseconds(ms)).allowed;
  // 50 a second for 2 s, plus the first request and the burst.
  EXPECT_GE(allowed, 100 + 10);
  EXPECT_LE(allowed, 100 + 11 + 1);
}

TEST(RateLimiter, KeysAreBoundedAndTheLeastRecentlySeenIsForgotten) {
  RateLimiter l({.rate = 1, .burst = 0, .nodelay = true, .max_keys = 64});
  EXPECT_TRUE(l.account("abuser", t0()).allowed);
  EXPECT_FALSE(l.account("abuser", t0()).allowed);
  for (int i = 0; i < 100000; ++i) (void)l.account("flood" + std::to_string(i), t0());
  EXPECT_LE(l.keys(), 64u);
  // The flood pushed the abuser out: it starts again with an empty bucket (documented).
  EXPECT_TRUE(l.account("abuser", t0()).allowed);
}

TEST(RateLimiter, RejectsANonPositiveRate) {
  EXPECT_THROW(RateLimiter({.rate = 0}), std::invalid_argument);
  EXPECT_THROW(RateLimiter({.rate = -1}), std::invalid_argument);
}

TEST(RateLimiter, ConcurrentAccountingNeverAdmitsMoreThanTheBucketAllows) {
  RateLimiter l({.rate = 1, .burst = 99, .nodelay = true});
  std::atomic<int> allowed{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t)
    threads.emplace_back([&] {
      for (int i = 0; i < 1000; ++i) allowed += l.account("shared", t0()).allowed;
    });
  for (auto& t : threads) t.join();
  EXPECT_EQ(allowed.load(), 100);
}

}  // namespace
}  // namespace lionet::http
