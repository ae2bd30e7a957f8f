// Tests of lionet/http/idle_pool.h, the keep-alive pool the HTTP client and the reverse proxy
// share: which connection comes back, which ones are closed (too many, too old, closed by the
// peer), and that nothing it drops stays open.
#include "lionet/http/idle_pool.h"

#include <gtest/gtest.h>
#include <sys/socket.h>
#include <unistd.h>

#include <memory>
#include <thread>

namespace lionet::http {
namespace {

// A stream that only records whether it was closed.
class FakeStream final : public Stream {
 public:
  explicit FakeStream(bool* closed) : closed_(closed) {}
  Result<size_t> read(void*, size_t) override { return size_t{0}; }
  Result<size_t> readv(const iovec*, int) override { return size_t{0}; }
  Result<size_t> write(const void*, size_t n) override { return n; }
  Result<size_t> writev(const iovec*, int) override { return size_t{0}; }
  Result<void> shutdown_write() override { return {}; }
  void close() noexcept override { *closed_ = true; }
  void set_timeouts(std::optional<Duration>, std::optional<Duration>) override {}

 private:
  bool* closed_;
};

std::unique_ptr<PooledConnection> conn(bool* closed, int fd = -1) {
  auto c = std::make_unique<PooledConnection>();
  c->stream = std::make_unique<FakeStream>(closed);
  c->fd = fd;
  return c;
}

TEST(IdlePool, HandsOutTheNewestFirstMarkedReused) {
  bool a = false, b = false;
  IdlePool pool;
  PooledConnection* pa = conn(&a).release();
  PooledConnection* pb = conn(&b).release();
  pool.put(std::unique_ptr<PooledConnection>(pa));
  pool.put(std::unique_ptr<PooledConnection>(pb));
  EXPECT_EQ(pool.size(), 2u);
  auto first = pool.take();
  ASSERT_TRUE(first);
  EXPECT_EQ(first.get(), pb);
  EXPECT_TRUE(first->reused);
  auto second = pool.take();
  EXPECT_EQ(second.get(), pa);
  EXPECT_FALSE(pool.take());
  EXPECT_FALSE(a || b);  // handed out, not closed
}

TEST(IdlePool, ClosesWhatItHasNoRoomFor) {
  bool closed[3] = {};  // before the pool: its destructor closes what it still holds
  IdlePool pool(IdlePoolOptions{.max_idle = 2});
  for (bool& c : closed) pool.put(conn(&c));
  EXPECT_EQ(pool.size(), 2u);
  EXPECT_FALSE(closed[0] || closed[1]);
  EXPECT_TRUE(closed[2]);
}

TEST(IdlePool, NeverHandsOutOneIdlePastIdleTimeout) {
  bool old = false;
  IdlePool pool(IdlePoolOptions{.idle_timeout = std::chrono::milliseconds(20)});
  pool.put(conn(&old));
  std::this_thread::sleep_for(std::chrono::milliseconds(40));
  EXPECT_FALSE(pool.take());
  EXPECT_TRUE(old);
  EXPECT_EQ(pool.size(), 0u);
}

TEST(IdlePool, SweepClosesTheExpiredOnesUnderTheNewest) {
  bool old = false, fresh = false;  // before the pool: its destructor closes `fresh`
  IdlePool pool(IdlePoolOptions{.idle_timeout = std::chrono::milliseconds(30)});
  pool.put(conn(&old));
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  pool.put(conn(&fresh));
  pool.sweep();
  EXPECT_TRUE(old);
  EXPECT_FALSE(fresh);
  EXPECT_EQ(pool.size(), 1u);
}

TEST(IdlePool, DropsAnOldOneItsPeerClosedAndKeepsAnOpenOne) {
  int sv[2];
  ASSERT_EQ(::socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
  int open_pair[2];
  ASSERT_EQ(::socketpair(AF_UNIX, SOCK_STREAM, 0, open_pair), 0);
  bool gone = false, alive = false;
  IdlePool pool(IdlePoolOptions{.peek_after = Duration::zero()});
  pool.put(conn(&alive, open_pair[0]));
  pool.put(conn(&gone, sv[0]));  // the newest: taken first
  ::close(sv[1]);  // its peer hangs up while it idles
  EXPECT_FALSE(pool.take());  // peeked: end of stream, closed, not handed out
  EXPECT_TRUE(gone);
  auto c = pool.take();
  ASSERT_TRUE(c);
  EXPECT_EQ(c->fd, open_pair[0]);
  EXPECT_FALSE(alive);
  for (int fd : {sv[0], open_pair[0], open_pair[1]}) ::close(fd);
}

TEST(IdlePool, ClosesEverythingItHoldsWhenDestroyed) {
  bool closed[3] = {};
  {
    IdlePool pool;
    for (bool& c : closed) pool.put(conn(&c));
  }
  for (bool c : closed) EXPECT_TRUE(c);
}

}  // namespace
}  // namespace lionet::http
