// sched/os_locks.h through the hooked pthread_mutex_* functions: a "library" that holds its own
// std::mutex across a read the hooks turn into a park is reported (the fiber, the lock, the
// stack naming the library's function), once per call site and counted every time; a
// lionet::Mutex held across a park is not; `off` counts nothing; the lock taken before a switch
// is released after it, wherever the fiber resumed, without leaving a count behind.
#include "lionet/sched/os_locks.h"

#include <spdlog/sinks/base_sink.h>
#include <spdlog/spdlog.h>
#include <sys/socket.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <mutex>
#include <sstream>
#include <string>
#include <thread>

#include "hook_test_util.h"
#include "lionet/sched/scheduler.h"
#include "lionet/sync/mutex.h"

namespace lionet {
namespace {
using hook_test::Runtime;
using namespace std::chrono_literals;

// A blocking client library's shape: its own lock around a blocking read of its socket.
[[gnu::noinline]] char library_reads_under_its_own_mutex(std::mutex& m, int fd) {
  std::lock_guard<std::mutex> lk(m);
  char c = 0;
  if (::read(fd, &c, 1) != 1) c = 0;  // hooked: the fiber parks here, holding m
  asm volatile("");
  return c;
}

struct Sockets {
  int fd[2] = {-1, -1};
  Sockets() { EXPECT_EQ(::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, fd), 0); }
  ~Sockets() {
    ::close(fd[0]);
    ::close(fd[1]);
  }
};

// The default logger's lines, captured while it lives (the report is logged by a thread of
// its own: reads and writes of the text are under the sink's own lock).
class TextSink : public spdlog::sinks::base_sink<std::mutex> {
 public:
  std::string text() {
    std::lock_guard<std::mutex> lk(mu_);
    return text_;
  }

 protected:
  void sink_it_(const spdlog::details::log_msg& msg) override {
    std::lock_guard<std::mutex> lk(mu_);
    text_.append(msg.payload.data(), msg.payload.size());
    text_ += '\n';
  }
  void flush_() override {}

 private:
  std::mutex mu_;
  std::string text_;
};

struct CapturedLog {
  std::shared_ptr<TextSink> sink = std::make_shared<TextSink>();
  CapturedLog() { spdlog::default_logger()->sinks().push_back(sink); }
  ~CapturedLog() {
    auto& sinks = spdlog::default_logger()->sinks();
    sinks.erase(std::remove(sinks.begin(), sinks.end(), sink), sinks.end());
  }
  std::string str() { return sink->text(); }
  // Waits (bounded) until the text contains `needle`; the text then.
  std::string wait_for(const std::string& needle) {
    const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    std::string t = str();
    while (t.find(needle) == std::string::npos && std::chrono::steady_clock::now() < give_up) {
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
      t = str();
    }
    return t;
  }
};

struct ModeGuard {
  OsLockCheck before = os_lock_check();
  explicit ModeGuard(OsLockCheck m) { set_os_lock_check(m); }
  ~ModeGuard() { set_os_lock_check(before); }
};

// One read under the library's mutex in a fiber, the data sent 30 ms later from this thread.
char read_under_mutex(Runtime& rt, std::mutex& m, Sockets& s, char byte) {
  auto h = rt.sched.spawn([&] { return library_reads_under_its_own_mutex(m, s.fd[0]); }, {.name = "libclient"});
  std::this_thread::sleep_for(30ms);
  EXPECT_EQ(::write(s.fd[1], &byte, 1), 1);
  return h.join();
}

TEST(OsLockCheck, AStdMutexHeldAcrossAHookedReadIsReportedOncePerCallSiteWithItsStack) {
  ModeGuard mode(OsLockCheck::kLog);
  CapturedLog log;
  Runtime rt(2);
  Sockets s;
  std::mutex m;
  const uint64_t before = os_lock_violations();
  EXPECT_EQ(read_under_mutex(rt, m, s, 'a'), 'a');
  EXPECT_EQ(os_lock_violations(), before + 1);
  const std::string text = log.wait_for("library_reads_under_its_own_mutex");
  EXPECT_NE(text.find("\"libclient\" reached a scheduling point holding 1 pthread mutex"), std::string::npos) << text;
  char addr[32];
  std::snprintf(addr, sizeof addr, "0x%llx", static_cast<unsigned long long>(reinterpret_cast<uintptr_t>(&m)));
  EXPECT_NE(text.find(addr), std::string::npos) << "the lock's address\n" << text;
  EXPECT_NE(text.find("library_reads_under_its_own_mutex"), std::string::npos) << "the stack\n" << text;

  // The same call site again: counted, not logged again.
  EXPECT_EQ(read_under_mutex(rt, m, s, 'b'), 'b');
  EXPECT_EQ(os_lock_violations(), before + 2);
  std::this_thread::sleep_for(std::chrono::milliseconds(300));  // a second report would be logged by now
  const std::string again = log.str();
  std::size_t lines = 0;
  for (std::size_t p = again.find("reached a scheduling point"); p != std::string::npos;
       p = again.find("reached a scheduling point", p + 1))
    ++lines;
  EXPECT_EQ(lines, 1u) << again;

  // The count went with the fiber and came back off when it unlocked: the workers' next
  // fibers, which hold nothing, are not reported at their own parks and yields.
  for (int i = 0; i < 50; ++i)
    rt.run([] {
      this_fiber::yield();
      (void)this_fiber::sleep_for(1ms);
    });
  EXPECT_EQ(os_lock_violations(), before + 2);
}

TEST(OsLockCheck, ALionetMutexHeldAcrossAParkAndAStdMutexReleasedBeforeItAreNotReported) {
  ModeGuard mode(OsLockCheck::kLog);
  Runtime rt(2);
  const uint64_t before = os_lock_violations();
  Mutex lm;
  std::mutex m;
  rt.run([&] {
    std::lock_guard<Mutex> lk(lm);  // what lionet::Mutex is for
    (void)this_fiber::sleep_for(20ms);
    this_fiber::yield();
  });
  rt.run([&] {
    { std::lock_guard<std::mutex> lk(m); }  // released before the park
    (void)this_fiber::sleep_for(20ms);
  });
  EXPECT_EQ(os_lock_violations(), before);
}

TEST(OsLockCheck, OffCountsNothing) {
  ModeGuard mode(OsLockCheck::kOff);
  Runtime rt(1);
  Sockets s;
  std::mutex m;
  const uint64_t before = os_lock_violations();
  EXPECT_EQ(read_under_mutex(rt, m, s, 'c'), 'c');
  EXPECT_EQ(os_lock_violations(), before);
}

TEST(OsLockCheck, AbortModeStopsTheProcessWithTheReport) {
  EXPECT_DEATH(
      {
        set_os_lock_check(OsLockCheck::kAbort);
        Runtime rt(1);
        std::mutex m;
        auto h = rt.sched.spawn([&] {
          std::lock_guard<std::mutex> lk(m);
          (void)this_fiber::sleep_for(1ms);  // a park with the mutex held
        });
        h.join();
      },
      "reached a scheduling point holding 1 pthread mutex");
}

TEST(OsLockCheck, ParsesItsYamlSpellings) {
  OsLockCheck m = OsLockCheck::kLog;
  EXPECT_TRUE(parse_os_lock_check("off", m));
  EXPECT_EQ(m, OsLockCheck::kOff);
  EXPECT_TRUE(parse_os_lock_check("abort", m));
  EXPECT_EQ(m, OsLockCheck::kAbort);
  EXPECT_TRUE(parse_os_lock_check("log", m));
  EXPECT_EQ(m, OsLockCheck::kLog);
  EXPECT_FALSE(parse_os_lock_check("warn", m));
}

}  // namespace
}  // namespace lionet
