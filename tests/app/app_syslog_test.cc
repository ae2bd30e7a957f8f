// The lionet binary's `syslog` server type: util-linux `logger` over UDP and TCP, in RFC 5424
// and RFC 3164, lands in the topic and is read back over the HTTP storage API with its key,
// timestamp and message; /metrics counts it; bad syslog configurations are refused at load.
#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <string>
#include <thread>

#include "app_process.h"

namespace lionet::app {
namespace {
namespace fs = std::filesystem;
using namespace lionet::app::testing;
using namespace std::chrono_literals;

TEST(AppSyslog, LoggerOverUdpAndTcpIsReadableOverTheHttpStorageApi) {
  if (sh("logger --help >/dev/null 2>&1 && echo yes") != "yes\n") GTEST_SKIP() << "util-linux logger is not installed";
  TempConf conf;
  const int http = free_port(), port = free_port();
  conf.write("server.yml",
             "scheduler: {threads: 2}\n"
             "storage: {data_dir: " +
                 conf.path() +
                 "/data}\n"
                 "servers:\n"
                 "  - name: api\n    type: http\n    listen: ['127.0.0.1:" +
                 std::to_string(http) +
                 "']\n"
                 "    routes:\n"
                 "      - {path: /topics, type: storage}\n"
                 "      - {path: /metrics, type: metrics}\n"
                 "  - name: logs\n    type: syslog\n    topic: syslog\n    key: app\n"
                 "    listen: ['udp://127.0.0.1:" +
                 std::to_string(port) + "', 'tcp://127.0.0.1:" + std::to_string(port) + "']\n");
  Process p({"-c", conf.path()});
  REQUIRE_BINARY(p);
  ASSERT_TRUE(p.wait_for(kReady)) << p.output();
  EXPECT_NE(p.output().find("server logs (syslog) on udp://127.0.0.1:" + std::to_string(port)), std::string::npos)
      << p.output();
  const std::string to = "logger -n 127.0.0.1 -P " + std::to_string(port);
  EXPECT_EQ(sh(to + " -d --rfc5424 -t udpapp 'hello from udp' 2>&1"), "");
  EXPECT_EQ(sh(to + " -T --rfc3164 -t tcpapp 'hello from tcp' 2>&1"), "");

  const std::string url = "http://127.0.0.1:" + std::to_string(http) + "/topics/syslog/partitions/0/records?offset=0";
  Curl got;
  for (int i = 0; i < 100; ++i) {  // the TCP connection's records come when logger closes it
    got = curl(url);
    if (got.body.find("hello from tcp") != std::string::npos && got.body.find("hello from udp") != std::string::npos)
      break;
    std::this_thread::sleep_for(50ms);
  }
  ASSERT_EQ(got.status, 200) << got.body;
  // key: app (key: app), the message inside the JSON value, a timestamp of today.
  EXPECT_NE(got.body.find(R"("key":"udpapp")"), std::string::npos) << got.body;
  EXPECT_NE(got.body.find(R"("key":"tcpapp")"), std::string::npos) << got.body;
  EXPECT_NE(got.body.find(R"(\"msg\":\"hello from udp\")"), std::string::npos) << got.body;
  EXPECT_NE(got.body.find(R"(\"format\":\"rfc3164\")"), std::string::npos) << got.body;
  const auto now_ms =
      std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::system_clock::now().time_since_epoch())
          .count();
  const auto ts_at = got.body.find("\"timestamp\":");
  ASSERT_NE(ts_at, std::string::npos);
  const long long ts = std::atoll(got.body.c_str() + ts_at + 12);
  EXPECT_LT(std::llabs(ts - now_ms), 120000) << got.body;

  // A record is readable as soon as the store has it; the append returns to the syslog fiber,
  // which counts it, a moment later (under TSan that moment is visible).
  Curl m;
  poll_until([&] {
    m = curl("http://127.0.0.1:" + std::to_string(http) + "/metrics");
    return m.body.find("lionet_syslog_stored_total{server=\"logs\"} 2") != std::string::npos;
  });
  EXPECT_NE(m.body.find("lionet_syslog_stored_total{server=\"logs\"} 2"), std::string::npos) << m.body;
  EXPECT_NE(m.body.find("lionet_syslog_kernel_drops_total{server=\"logs\"} 0"), std::string::npos) << m.body;
  p.signal(SIGTERM);
  EXPECT_EQ(p.wait(), 0) << p.output();
}

TEST(AppSyslog, BadSyslogConfigurationsAreRefusedNamingTheKey) {
  struct Case {
    std::string server, expect;
  };
  for (const Case& c : std::initializer_list<Case>{
           {"{name: l, type: syslog, listen: ['127.0.0.1:5514']}", "needs udp:// or tcp://"},
           {"{name: l, type: syslog, listen: ['udp://127.0.0.1:5514'], key: user}", "must be host or app"},
           {"{name: l, type: syslog, listen: ['udp://127.0.0.1:5514'], batch_max: 0}", "batch_max"},
           {"{name: l, type: syslog, listen: ['udp://127.0.0.1:5514'], max_message_size: 100}", "max_message_size"},
           {"{name: l, type: syslog, listen: ['udp://127.0.0.1:5514', 'udp://127.0.0.1:5514']}", "already used"},
       }) {
    TempConf conf;
    conf.write("server.yml", "servers:\n  - " + c.server + "\n");
    Process p({"-c", conf.path(), "--check"});
    REQUIRE_BINARY(p);
    EXPECT_EQ(p.wait(), 1) << c.server;
    EXPECT_NE(p.output().find(c.expect), std::string::npos) << c.server << "\n" << p.output();
  }
  // udp and tcp may share a port.
  TempConf conf;
  conf.write("server.yml",
             "servers:\n  - {name: l, type: syslog, listen: ['udp://127.0.0.1:5514', "
             "'tcp://127.0.0.1:5514']}\n");
  Process p({"-c", conf.path(), "--check"});
  REQUIRE_BINARY(p);
  EXPECT_EQ(p.wait(), 0) << p.output();
}
}  // namespace
}  // namespace lionet::app
