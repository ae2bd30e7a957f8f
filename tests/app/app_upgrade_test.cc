// tests/app/app_upgrade_test.cc: the binary upgrade on SIGUSR2 (app/upgrade.h): the running
// lionet starts the binary at its own path with its listening sockets, the new one takes over
// the store and the sockets, the old one exits. A client making 20,000 requests (one connection
// each; every tenth a storage append) across the upgrade sees no connection error, and every
// append acknowledged before, during and after it is readable from the new process.
#include <sys/wait.h>

#include <thread>

#include "tests/app/app_deploy_client.h"
#include "tests/app/app_process.h"

namespace lionet::app::testing {
namespace {

TEST(AppUpgrade, Sigusr2HandsOverWithoutAConnectionError) {
  TempConf conf;
  const int port = free_port();
  conf.write("server.yml",
             "scheduler: {threads: 2}\n"
             "storage: {data_dir: " +
                 conf.path() +
                 "/data}\n"
                 "app: {shutdown_timeout: 5s}\n"
                 "servers:\n"
                 "  - name: web\n"
                 "    type: http\n"
                 "    listen: [\"127.0.0.1:" +
                 std::to_string(port) +
                 "\"]\n"
                 "    routes:\n"
                 "      - {path: /healthz, type: health}\n"
                 "      - {path: /topics, type: storage}\n");
  Process p({"-c", conf.path()});
  REQUIRE_BINARY(p);
  ASSERT_TRUE(p.wait_for("running with")) << p.output();

  RequestLoop loop;
  constexpr int kRequests = 20000;
  std::atomic<int> appended{0};
  std::atomic<int> sent{0};
  std::thread client([&] {
    for (int i = 0; i < kRequests; ++i) {
      sent.store(i + 1);
      if (i % 10 == 0) {
        std::string body = std::to_string(i);  // ("r" + std::to_string(i): gcc 12's -Wrestrict false positive)
        if (loop.one(port, post_request("/topics/up/partitions/0/records", body))) appended++;
      } else {
        loop.one(port, get_request("/healthz"));
      }
    }
  });
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(120);
  while (sent.load() < 2000 && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  const auto t0 = std::chrono::steady_clock::now();
  p.signal(SIGUSR2);
  // The old process exits 0 once the new one serves (WNOWAIT: Process::wait reaps it later).
  int exited_at = -1;
  siginfo_t si{};
  while (std::chrono::steady_clock::now() < deadline) {
    si = {};
    if (::waitid(P_PID, static_cast<id_t>(p.pid()), &si, WEXITED | WNOHANG | WNOWAIT) == 0 && si.si_pid == p.pid()) {
      exited_at = sent.load();
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  const double handover_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  client.join();
  ASSERT_GE(exited_at, 0) << "the old process did not exit\n" << p.output();
  EXPECT_EQ(si.si_code, CLD_EXITED);
  EXPECT_EQ(si.si_status, 0);
  EXPECT_LT(exited_at, kRequests) << "the upgrade finished after the client: nothing was served across it";

  // The new process's pid, from the old one's log line.
  p.wait_for("is serving");
  // (No std::regex: gcc 12's <regex> trips -Wmaybe-uninitialized under ASan's -O2.)
  const std::string out = p.output();
  const auto started = out.find("upgrade: started ");
  ASSERT_NE(started, std::string::npos) << out;
  const auto pid_at = out.find("(pid ", started);
  ASSERT_NE(pid_at, std::string::npos) << out;
  const pid_t next = std::atoi(out.c_str() + pid_at + 5);
  EXPECT_NE(next, p.pid());
  EXPECT_EQ(::kill(next, 0), 0) << "the new process is not running\n" << out;

  std::printf(
      "upgrade: %d requests, %d answered, %d connection errors, %d non-2xx; old process gone %.0f ms after "
      "SIGUSR2 (request %d)\n",
      kRequests, loop.done.load(), loop.conn_errors.load(), loop.bad_status.load(), handover_ms, exited_at);
  EXPECT_EQ(loop.conn_errors.load(), 0) << loop.first_error;
  EXPECT_EQ(loop.bad_status.load(), 0) << loop.first_error;
  EXPECT_EQ(loop.done.load(), kRequests);

  // Every acknowledged append is in the store the new process opened.
  const Curl records = curl("'http://127.0.0.1:" + std::to_string(port) +
                            "/topics/up/partitions/0/records?offset=0&max_bytes=10000000'");
  EXPECT_EQ(records.status, 200);
  int lines = 0;
  for (char c : records.body) lines += c == '\n';
  EXPECT_EQ(lines, appended.load()) << records.body.substr(0, 300);

  ::kill(next, SIGTERM);
  EXPECT_EQ(p.wait(), 0) << p.output();  // the pipe closes once the new process is gone too
  EXPECT_NE(p.output().find("stopped"), std::string::npos);
}

// A new binary that cannot start (here: the configuration became invalid) leaves the old one
// serving.
TEST(AppUpgrade, AFailedUpgradeKeepsServing) {
  TempConf conf;
  const int port = free_port();
  conf.write("server.yml",
             "servers:\n"
             "  - name: web\n"
             "    type: http\n"
             "    listen: [\"127.0.0.1:" +
                 std::to_string(port) +
                 "\"]\n"
                 "    routes:\n"
                 "      - {path: /healthz, type: health}\n");
  Process p({"-c", conf.path()});
  REQUIRE_BINARY(p);
  ASSERT_TRUE(p.wait_for("running with")) << p.output();
  conf.write("server.yml", "servers: [{name: web, type: nonsense}]\n");
  p.signal(SIGUSR2);
  ASSERT_TRUE(p.wait_for("went away before it was ready; still serving")) << p.output();
  EXPECT_EQ(curl("http://127.0.0.1:" + std::to_string(port) + "/healthz").status, 200);
  p.signal(SIGTERM);
  EXPECT_EQ(p.wait(), 0) << p.output();
}
}  // namespace
}  // namespace lionet::app::testing
