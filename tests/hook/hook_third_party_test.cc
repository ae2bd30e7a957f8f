// tests/hook/hook_third_party_test.cc: the proof with real third-party blocking clients
// from Debian packages, unmodified, against real servers this test starts on 127.0.0.1:
//   - hiredis (sync API) against redis-server: 500 fibers on ONE worker each BLPOP k 0.2
//     (the server holds every request 200 ms); all finish well under 2 s (serially: 100 s).
//   - libcurl (easy API, which waits in poll) against a python3 http.server that holds each
//     request 200 ms: 100 fibers on ONE worker finish well under 2 s (serially: 20 s).
//   - libpq (PQconnectdb + PQexec) against a PostgreSQL server the test initialises and starts:
//     100 fibers on ONE worker each SELECT pg_sleep(0.2), well under 2 s (serially: 20 s).
// Every one runs on the default runtime: a Scheduler, which comes with its IO driver.
// The libraries are loaded with dlopen, so hook_tests needs no extra link dependency; their
// read/write/poll/connect/getaddrinfo calls bind to the hooks exported by this executable
// exactly as they would if linked normally.
#include <curl/curl.h>
#include <hiredis/hiredis.h>

#include <atomic>
#include <cstdio>
#include <string>
#include <thread>
#include <vector>

#include "hook_test_util.h"
#include "third_party_util.h"

namespace lionet {
namespace {
using hook_test::free_local_port;
using hook_test::open_lib;
using hook_test::Runtime;
using hook_test::seconds_since;
using hook_test::ServerProcess;
using hook_test::sym;
using Clock = std::chrono::steady_clock;

TEST(HookThirdParty, Hiredis500FibersBlpopOnOneWorker) {
  if (::access("/usr/bin/redis-server", X_OK) != 0) {
    FAIL() << "redis-server is not installed (/usr/bin/redis-server): run scripts/install-deps.sh";
  }
  void* lib = open_lib({"libhiredis.so", "libhiredis.so.1.1.0", "libhiredis.so.0.14"});
  ASSERT_NE(lib, nullptr) << "libhiredis not found (libhiredis-dev): " << ::dlerror();
  auto connect = sym<decltype(&redisConnect)>(lib, "redisConnect");
  auto command = sym<decltype(&redisCommand)>(lib, "redisCommand");
  auto free_reply = sym<decltype(&freeReplyObject)>(lib, "freeReplyObject");
  auto free_ctx = sym<decltype(&redisFree)>(lib, "redisFree");
  ASSERT_TRUE(connect && command && free_reply && free_ctx);

  hook_test::raise_nofile(4096);
  const uint16_t port = free_local_port();
  ASSERT_NE(port, 0);
  ServerProcess redis({"/usr/bin/redis-server", "--port", std::to_string(port), "--bind", "127.0.0.1", "--save", "",
                       "--appendonly", "no", "--daemonize", "no", "--loglevel", "warning", "--maxclients", "2000"},
                      port);
  ASSERT_TRUE(redis.ready()) << "redis-server did not start on 127.0.0.1:" << port;

  Runtime rt(1);
  constexpr int kFibers = 500;
  std::atomic<int> timed_out{0};
  std::atomic<int> failed{0};
  auto t0 = Clock::now();
  std::vector<JoinHandle<void>> hs;
  for (int i = 0; i < kFibers; ++i) {
    hs.push_back(rt.sched.spawn([&, i] {
      redisContext* c = connect("127.0.0.1", port);
      if (c == nullptr || c->err) {
        std::printf("redisConnect: %s\n", c ? c->errstr : "null");
        failed.fetch_add(1);
        if (c) free_ctx(c);
        return;
      }
      std::string key = "lionet:hook:k" + std::to_string(i % 7);
      auto* r = static_cast<redisReply*>(command(c, "BLPOP %s 0.2", key.c_str()));
      if (r != nullptr && r->type == REDIS_REPLY_NIL) {
        timed_out.fetch_add(1);
      } else {
        std::printf("BLPOP: %s\n", r ? "unexpected reply" : c->errstr);
        failed.fetch_add(1);
      }
      if (r) free_reply(r);
      free_ctx(c);
    }));
  }
  for (auto& h : hs) h.join();
  double dt = seconds_since(t0);
  std::printf("[hook] hiredis: %d fibers x BLPOP 0.2 s on 1 worker: %.3f s (serial: %.0f s)\n", kFibers, dt,
              kFibers * 0.2);
  EXPECT_EQ(failed.load(), 0);
  EXPECT_EQ(timed_out.load(), kFibers);
  EXPECT_GE(dt, 0.19);
  EXPECT_LT(dt, 2.0);
}

size_t collect(char* data, size_t size, size_t n, void* out) {
  static_cast<std::string*>(out)->append(data, size * n);
  return size * n;
}

TEST(HookThirdParty, LibcurlManyFibersOnOneWorker) {
  void* lib = open_lib({"libcurl.so.4", "libcurl.so"});
  ASSERT_NE(lib, nullptr) << "libcurl not found (libcurl4-openssl-dev): " << ::dlerror();
  auto global_init = sym<decltype(&curl_global_init)>(lib, "curl_global_init");
  auto easy_init = sym<decltype(&curl_easy_init)>(lib, "curl_easy_init");
  auto setopt = sym<decltype(&curl_easy_setopt)>(lib, "curl_easy_setopt");
  auto perform = sym<decltype(&curl_easy_perform)>(lib, "curl_easy_perform");
  auto getinfo = sym<decltype(&curl_easy_getinfo)>(lib, "curl_easy_getinfo");
  auto cleanup = sym<decltype(&curl_easy_cleanup)>(lib, "curl_easy_cleanup");
  auto strerror_ = sym<decltype(&curl_easy_strerror)>(lib, "curl_easy_strerror");
  ASSERT_TRUE(global_init && easy_init && setopt && perform && getinfo && cleanup && strerror_);
  ASSERT_EQ(global_init(CURL_GLOBAL_DEFAULT), CURLE_OK);

  hook_test::raise_nofile(4096);
  const uint16_t port = free_local_port();
  ASSERT_NE(port, 0);
  ServerProcess http({"python3", "-c", hook_test::kHttpServer, std::to_string(port)}, port);
  ASSERT_TRUE(http.ready()) << "python3 http.server did not start on 127.0.0.1:" << port;

  Runtime rt(1);
  constexpr int kFibers = 100;
  std::atomic<int> ok{0};
  auto t0 = Clock::now();
  std::vector<JoinHandle<void>> hs;
  for (int i = 0; i < kFibers; ++i) {
    hs.push_back(rt.sched.spawn([&, i] {
      CURL* h = easy_init();
      ASSERT_NE(h, nullptr);
      std::string url = "http://127.0.0.1:" + std::to_string(port) + "/r" + std::to_string(i);
      std::string body;
      setopt(h, CURLOPT_URL, url.c_str());
      setopt(h, CURLOPT_NOSIGNAL, 1L);
      setopt(h, CURLOPT_TIMEOUT, 10L);
      setopt(h, CURLOPT_WRITEFUNCTION, &collect);
      setopt(h, CURLOPT_WRITEDATA, &body);
      CURLcode rc = perform(h);
      long status = 0;
      getinfo(h, CURLINFO_RESPONSE_CODE, &status);
      cleanup(h);
      EXPECT_EQ(rc, CURLE_OK) << strerror_(rc);
      EXPECT_EQ(status, 200);
      EXPECT_EQ(body, "hello /r" + std::to_string(i));
      if (rc == CURLE_OK && status == 200) ok.fetch_add(1);
    }));
  }
  for (auto& h : hs) h.join();
  double dt = seconds_since(t0);
  std::printf("[hook] libcurl: %d fibers x GET held 0.2 s on 1 worker: %.3f s (serial: %.0f s)\n", kFibers, dt,
              kFibers * 0.2);
  EXPECT_EQ(ok.load(), kFibers);
  EXPECT_GE(dt, 0.19);
  EXPECT_LT(dt, 2.0);
}

// libpq's synchronous API (PQconnectdb + PQexec, which wait in poll) against a PostgreSQL server
// this test starts (hook_test::PostgresServer: initdb into a scratch directory and postgres on
// a private port on 127.0.0.1). Only the default Scheduler: no IOManager line.
TEST(HookThirdParty, Libpq100FibersPgSleepOnOneWorkerOfTheDefaultRuntime) {
  hook_test::LibPq pq;
  ASSERT_TRUE(pq.load()) << "libpq not found (libpq5): run scripts/install-deps.sh: " << ::dlerror();
  hook_test::raise_nofile(4096);
  {
    hook_test::PostgresServer pg(pq, 200);
    ASSERT_TRUE(pg.error().empty()) << pg.error();
    const std::string conninfo = pg.conninfo();

    Runtime rt(1);  // a Scheduler with one worker, nothing else
    constexpr int kFibers = 100;
    std::atomic<int> ok{0}, failed{0};
    auto t0 = Clock::now();
    std::vector<JoinHandle<void>> hs;
    for (int i = 0; i < kFibers; ++i) {
      hs.push_back(rt.sched.spawn([&] {
        void* c = pq.connectdb(conninfo.c_str());
        if (pq.status(c) != hook_test::kConnectionOk) {
          std::printf("PQconnectdb: %s\n", pq.error_message(c));
          failed.fetch_add(1);
        } else if (void* r = pq.exec(c, "SELECT pg_sleep(0.2)")) {
          (pq.result_status(r) == hook_test::kTuplesOk ? ok : failed).fetch_add(1);
          if (pq.result_status(r) != hook_test::kTuplesOk) std::printf("PQexec: %s\n", pq.error_message(c));
          pq.clear(r);
        } else {
          failed.fetch_add(1);
        }
        pq.finish(c);
      }));
    }
    for (auto& h : hs) h.join();
    const double dt = seconds_since(t0);
    std::printf("[hook] libpq: %d fibers x SELECT pg_sleep(0.2) on 1 worker: %.3f s (serial: %.0f s)\n", kFibers, dt,
                kFibers * 0.2);
    EXPECT_EQ(failed.load(), 0);
    EXPECT_EQ(ok.load(), kFibers);
    EXPECT_GE(dt, 0.19);
    EXPECT_LT(dt, 2.0);
  }  // the server stops, its directory goes
}
}  // namespace
}  // namespace lionet
