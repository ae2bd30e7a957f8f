// The hot path of a kept-alive connection allocates nothing once warm: parser vectors, the
// input buffer, the response strings and the header block are reused per connection
// (issue 7: "no per-request allocations"). Counts operator new calls in the whole process
// while one client (a plain thread, fixed buffers) sends pipelined pairs of requests over one
// connection. The same with the access log on: its line is formatted into a reused per-thread
// string and copied into a preallocated buffer.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <fstream>
#include <new>
#include <string>

#include "http_test_util.h"
#include "lionet/http/access_log.h"

namespace {
std::atomic<uint64_t> g_news{0};
}  // namespace

// Sanitizers own operator new/delete (and check their pairing): count only in plain builds.
#if !defined(LIONET_ASAN) && !defined(LIONET_TSAN)
#define LIONET_COUNT_ALLOCS 1
// The replacements pair malloc with free, so gcc's -Wmismatched-new-delete is a false positive
// here; at -O1 (LIONET_TEST_OPT) it reports the free() inlined into std::make_shared's callers.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmismatched-new-delete"
#endif
void* operator new(std::size_t n) {
  g_news.fetch_add(1, std::memory_order_relaxed);
  if (void* p = std::malloc(n ? n : 1)) return p;
  throw std::bad_alloc();
}
void operator delete(void* p) noexcept { std::free(p); }
void operator delete(void* p, std::size_t) noexcept { std::free(p); }
#endif

namespace lionet::http {
namespace {
using test::TestServer;

// operator new calls in the whole process for 1000 kept-alive requests (500 pipelined pairs),
// after 100 to warm up.
uint64_t allocations_per_1000_requests(ServerOptions options) {
  Router router;
  router.get("/hello", [](Request&, Response& s) {
    s.set_header("Content-Type", "text/plain");
    s.set_body_view("hello world");
  });
  router.get("/topics/{t}/p/{p}", [](Request& q, Response& s) {
    s.set_header("X-Topic", q.param("t"));
    s.set_body_view("ok");
  });
  TestServer ts(router.handler(), std::move(options), 1);
  ts.start();
  Socket c = Socket::connect_to(Address::ipv4_loopback(ts.port()), Deadline::after(std::chrono::seconds(5))).value();
  static const char kReq[] =
      "GET /hello HTTP/1.1\r\nHost: h\r\nUser-Agent: t\r\nAccept: */*\r\n\r\n"
      "GET /topics/orders/p/3 HTTP/1.1\r\nHost: h\r\n\r\n";
  char buf[8192];
  auto round = [&] {
    if (!c.write(kReq, sizeof kReq - 1, Deadline::after(std::chrono::seconds(5)))) return false;
    size_t got = 0;
    int seen = 0;
    while (seen < 2) {
      auto r = c.read(buf + got, sizeof buf - got, Deadline::after(std::chrono::seconds(5)));
      if (!r || *r == 0) return false;
      got += *r;
      std::string_view v(buf, got);
      seen = (v.find("hello world") != std::string_view::npos) + (v.rfind("\r\n\r\nok") == got - 6);
    }
    return true;
  };
  for (int i = 0; i < 50; ++i) EXPECT_TRUE(round());  // warm up: buffers, timers, caches
  uint64_t before = g_news.load();
  for (int i = 0; i < 500; ++i) EXPECT_TRUE(round());
  return g_news.load() - before;
}

TEST(HotPath, KeptAliveRequestsDoNotAllocate) {
#ifndef LIONET_COUNT_ALLOCS
  GTEST_SKIP() << "allocation counting is off under sanitizers";
#endif
  const uint64_t allocs = allocations_per_1000_requests({});
  // Two pipelined requests per round: 1000 requests. The server's fiber parks once per round
  // (waiting for the next one) with a deadline: its timer entry comes from the worker's cache
  // (base/object_cache.h), so nothing is allocated per round or per request; a handful of
  // allocations is slack for one-off growth.
  EXPECT_LE(allocs, 20u) << allocs << " allocations for 1000 requests";
}

TEST(HotPath, KeptAliveRequestsDoNotAllocateWithTheAccessLogOn) {
#ifndef LIONET_COUNT_ALLOCS
  GTEST_SKIP() << "allocation counting is off under sanitizers";
#endif
  const std::string path = "/tmp/lionet-alloc-access-" + std::to_string(::getpid()) + ".log";
  ServerOptions o;
  o.access_log =
      std::make_shared<AccessLog>(AccessLogOptions{.path = path, .flush_interval = std::chrono::milliseconds(5)});
  auto log = o.access_log;
  const uint64_t allocs = allocations_per_1000_requests(std::move(o));
  EXPECT_LE(allocs, 20u) << allocs << " allocations for 1000 requests and their access log lines";
  EXPECT_EQ(log->stats().lines_dropped, 0u);
  log.reset();  // the server went with the helper: this was the last reference
  std::ifstream f(path);
  const std::string text((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  EXPECT_EQ(std::count(text.begin(), text.end(), '\n'), 1100) << "every request logged";
  ::unlink(path.c_str());
}
}  // namespace
}  // namespace lionet::http

// Unity build (tests/CMakeLists.txt): the next file of the batch keeps the warning, and the macro stays here.
#ifdef LIONET_COUNT_ALLOCS
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic pop
#endif
#undef LIONET_COUNT_ALLOCS
#endif
