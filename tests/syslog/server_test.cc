// lionet/syslog/server.h: util-linux `logger` over UDP and TCP (both framings, both RFCs) lands
// in the topic with the right key, timestamp and message; 100,000 datagrams at a bounded rate
// are all accounted for (stored + counted kernel drops = sent), also when a tiny receive buffer
// forces drops; batches fill to batch_max; malformed input is stored raw; on epoll and io_uring.
#include "lionet/syslog/server.h"

#include <gtest/gtest.h>
#include <stdlib.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <string>
#include <system_error>
#include <thread>
#include <vector>

#include "../app/app_process.h"
#include "../common/sanitizers.h"
#include "lionet/io/io_manager.h"
#include "lionet/storage/store.h"

namespace lionet::syslog {
namespace {
using namespace std::chrono_literals;
namespace fs = std::filesystem;

using app::testing::sh;  // tests/app/app_process.h: a bounded shell command's stdout

bool have_logger() { return ::system("logger --help >/dev/null 2>&1") == 0; }

class SyslogServerTest : public ::testing::TestWithParam<const char*> {
 protected:
  void SetUp() override {
    char tmpl[] = "/var/tmp/lionet-syslog-test-XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
    storage::StoreOptions so;
    so.data_dir = dir_ + "/data";
    so.log.flush_policy = storage::FlushPolicy::kNone;
    auto s = storage::Store::open(so);
    ASSERT_TRUE(s.ok()) << s.error().message();
    store_ = std::move(*s);
    sched_ = std::make_unique<Scheduler>(SchedulerOptions{.threads = 2, .name = "syslogt"});
    io_ = std::make_unique<IOManager>(*sched_, IOManagerOptions{.backend = GetParam()});
    if (std::string(io_->backend()) != GetParam()) GTEST_SKIP() << GetParam() << " unavailable here";
  }
  void TearDown() override {
    if (server_) server_->stop(1s);
    server_.reset();
    if (sched_) sched_->stop();
    io_.reset();
    sched_.reset();
    store_.reset();
    std::error_code ec;
    fs::remove_all(dir_, ec);
  }
  // A server on 127.0.0.1 (UDP and TCP on one port: the UDP port the kernel picked, again if
  // another process holds it for TCP).
  void start(ServerOptions o = {}) {
    for (int attempt = 0;; ++attempt) {
      server_ = std::make_unique<Server>(*sched_, *store_, o);
      server_->listen_udp(Address::parse("127.0.0.1:0").value());
      const std::string udp = server_->addresses().front();  // udp://127.0.0.1:PORT
      port_ = std::stoi(udp.substr(udp.rfind(':') + 1));
      try {
        server_->listen_tcp(Address::parse("127.0.0.1:" + std::to_string(port_)).value());
        break;
      } catch (const std::system_error&) {
        if (attempt == 20) throw;
      }
    }
    server_->start();
  }
  // Waits (bounded) until `n` messages were taken in and appended or lost.
  bool wait_received(uint64_t n, std::chrono::milliseconds limit = 20s) {
    const auto end = std::chrono::steady_clock::now() + limit;
    while (std::chrono::steady_clock::now() < end) {
      const auto s = server_->stats();
      if (s.received >= n && s.stored + s.lost == s.received) return true;
      std::this_thread::sleep_for(10ms);
    }
    return false;
  }
  std::vector<storage::RecordView> records(storage::ReadResult& keep, const std::string& topic = "syslog") {
    auto log = store_->find(topic, 0);
    EXPECT_TRUE(log.ok());
    if (!log) return {};
    auto r = (*log)->read(0, 64 << 20);
    EXPECT_TRUE(r.ok());
    if (!r) return {};
    keep = std::move(*r);
    return {keep.records().begin(), keep.records().end()};
  }
  std::string logger(const std::string& args) {
    return sh("logger -n 127.0.0.1 -P " + std::to_string(port_) + " " + args + " 2>&1");
  }

  std::string dir_;
  std::unique_ptr<storage::Store> store_;
  std::unique_ptr<Scheduler> sched_;
  std::unique_ptr<IOManager> io_;
  std::unique_ptr<Server> server_;
  int port_ = 0;
};

TEST_P(SyslogServerTest, LoggerOverUdpAndTcpInBothRfcsLandsWithKeyTimestampAndMessage) {
  if (!have_logger()) GTEST_SKIP() << "util-linux logger is not installed";
  start();
  const auto before = std::chrono::system_clock::now();
  EXPECT_EQ(logger("-d --rfc5424 -t app5424 'hello over udp'"), "");
  EXPECT_EQ(logger("-d --rfc3164 -t app3164 'bsd over udp'"), "");
  EXPECT_EQ(logger("-T --rfc5424 -t tcpapp 'hello over tcp'"), "");
  EXPECT_EQ(logger("-T --octet-count --rfc5424 -t counted 'octet counted'"), "");
  ASSERT_TRUE(wait_received(4)) << server_->stats().received;
  const int64_t lo = std::chrono::duration_cast<std::chrono::milliseconds>(before.time_since_epoch()).count() - 2000;
  const int64_t hi = lo + 60000;
  char host[256] = {};
  ::gethostname(host, sizeof host - 1);
  const std::string short_host = std::string(host).substr(0, std::string(host).find('.'));

  storage::ReadResult keep;
  auto recs = records(keep);
  ASSERT_EQ(recs.size(), 4u);
  std::map<std::string, const storage::RecordView*> by_msg;
  for (const auto& r : recs) {
    for (const char* m : {"hello over udp", "bsd over udp", "hello over tcp", "octet counted"})
      if (std::string(r.value).find(std::string("\"msg\":\"") + m + "\"") != std::string::npos) by_msg[m] = &r;
  }
  ASSERT_EQ(by_msg.size(), 4u) << recs[0].value;
  for (const auto& [m, r] : by_msg) {
    EXPECT_TRUE(r->key == host || r->key == short_host) << m << ": key " << r->key;
    EXPECT_GE(r->timestamp, lo) << m;
    EXPECT_LE(r->timestamp, hi) << m;
    EXPECT_NE(std::string(r->value).find("\"peer\":\"127.0.0.1\""), std::string::npos) << r->value;
  }
  EXPECT_NE(std::string(by_msg["hello over udp"]->value).find("\"format\":\"rfc5424\""), std::string::npos);
  EXPECT_NE(std::string(by_msg["hello over udp"]->value).find("\"app\":\"app5424\""), std::string::npos);
  EXPECT_NE(std::string(by_msg["bsd over udp"]->value).find("\"format\":\"rfc3164\""), std::string::npos);
  EXPECT_NE(std::string(by_msg["bsd over udp"]->value).find("\"app\":\"app3164\""), std::string::npos);
  EXPECT_NE(std::string(by_msg["octet counted"]->value).find("\"app\":\"counted\""), std::string::npos);
  const auto st = server_->stats();
  EXPECT_EQ(st.stored, 4u);
  EXPECT_EQ(st.malformed, 0u);
  EXPECT_EQ(st.tcp_connections, 2u);
}

TEST_P(SyslogServerTest, MalformedAndOversizedMessagesAreStoredRawAndFlagged) {
  start({.max_message_size = 512});
  auto s = UdpSocket::open(AF_INET).value();
  const auto to = Address::parse("127.0.0.1:" + std::to_string(port_)).value();
  const std::string junk = "not syslog at all";
  const std::string big = "<13>1 - h a - - - " + std::string(2000, 'z');
  ASSERT_TRUE(s.send_to(junk.data(), junk.size(), to).ok());
  ASSERT_TRUE(s.send_to(big.data(), big.size(), to).ok());
  ASSERT_TRUE(wait_received(2));
  storage::ReadResult keep;
  auto recs = records(keep);
  ASSERT_EQ(recs.size(), 2u);
  EXPECT_EQ(recs[0].value, R"({"format":"raw","malformed":true,"msg":"not syslog at all","peer":"127.0.0.1"})");
  EXPECT_EQ(recs[0].key, "");
  EXPECT_NE(std::string(recs[1].value).find("\"truncated\":true"), std::string::npos);
  EXPECT_EQ(recs[1].key, "h");
  EXPECT_LT(recs[1].value.size(), 700u);
  EXPECT_EQ(server_->stats().malformed, 1u);
  EXPECT_EQ(server_->stats().truncated, 1u);
}

// Sends n datagrams at about `rate` per second from a plain thread; returns how many were sent.
uint64_t send_paced(int port, uint64_t n, uint64_t rate) {
  auto s = UdpSocket::open(AF_INET).value();
  const auto to = Address::parse("127.0.0.1:" + std::to_string(port)).value();
  const auto start = std::chrono::steady_clock::now();
  uint64_t sent = 0;
  char line[128];
  for (uint64_t i = 0; i < n; ++i) {
    const int len = std::snprintf(line, sizeof line, "<14>1 - loadhost loadapp - - - message %llu",
                                  static_cast<unsigned long long>(i));
    if (s.send_to(line, static_cast<std::size_t>(len), to).ok()) ++sent;
    if (rate && i % 100 == 99) {  // pace in steps of 100
      const auto due = start + std::chrono::microseconds((i + 1) * 1000000 / rate);
      std::this_thread::sleep_until(due);
    }
  }
  return sent;
}

TEST_P(SyslogServerTest, EveryDatagramIsStoredOrCountedAsAKernelDrop) {
  const uint64_t n = test::kTsan || test::kAsan ? 20000 : 100000;
  start({.batch_max = 256});
  const uint64_t sent = send_paced(port_, n, 50000);
  ASSERT_EQ(sent, n);
  const auto end = std::chrono::steady_clock::now() + 30s;
  while (std::chrono::steady_clock::now() < end && server_->stats().received + server_->kernel_drops() < sent)
    std::this_thread::sleep_for(20ms);
  ASSERT_TRUE(wait_received(0));
  const auto st = server_->stats();
  const uint64_t drops = server_->kernel_drops();
  EXPECT_EQ(st.received + drops, sent) << "received " << st.received << " drops " << drops;
  EXPECT_EQ(st.stored, st.received);
  EXPECT_EQ(st.lost, 0u);
  storage::ReadResult keep;
  EXPECT_EQ(records(keep).size(), st.stored);
  std::printf("[ info ] %llu sent at 50k/s: %llu stored, %llu dropped by the kernel\n",
              static_cast<unsigned long long>(sent), static_cast<unsigned long long>(st.stored),
              static_cast<unsigned long long>(drops));
}

TEST_P(SyslogServerTest, ATinyReceiveBufferDropsButEveryDropIsCounted) {
  start({.recv_buffer = 4096});
  // Unpaced: the sender outruns one append per batch.
  const uint64_t sent = send_paced(port_, 50000, 0);
  const auto end = std::chrono::steady_clock::now() + 30s;
  while (std::chrono::steady_clock::now() < end && server_->stats().received + server_->kernel_drops() < sent)
    std::this_thread::sleep_for(20ms);
  ASSERT_TRUE(wait_received(0));
  const auto st = server_->stats();
  const uint64_t drops = server_->kernel_drops();
  EXPECT_GT(drops, 0u) << "no drops: the test did not overload the socket";
  EXPECT_EQ(st.received + drops, sent);
  EXPECT_EQ(st.stored, st.received);
}

INSTANTIATE_TEST_SUITE_P(Backends, SyslogServerTest, ::testing::Values("epoll", "io_uring"));
}  // namespace
}  // namespace lionet::syslog
