// tests/app/app_systemd_test.cc: the lionet binary under a service manager, without systemd as
// PID 1: the notify protocol seen on a NOTIFY_SOCKET this test owns (READY=1, RELOADING=1 ...
// READY=1 on SIGHUP, STOPPING=1 on SIGTERM, in that order; WATCHDOG=1 pings), and socket activation by
// systemd-socket-activate (Debian's systemd package; scripts/install-deps.sh installs it):
// requests are served through the passed socket, and a restart under it refuses nothing.
#include <sys/socket.h>
#include <sys/un.h>

#include <fstream>
#include <thread>

#include "tests/app/app_deploy_client.h"
#include "tests/app/app_process.h"

namespace lionet::app::testing {
namespace {

std::string http_conf(const std::string& name, int port, const std::string& data_dir) {
  return "scheduler: {threads: 2}\n"
         "storage: {data_dir: " +
         data_dir +
         "}\n"
         "app: {shutdown_timeout: 5s}\n"
         "servers:\n"
         "  - name: " +
         name +
         "\n"
         "    type: http\n"
         "    listen: [\"127.0.0.1:" +
         std::to_string(port) +
         "\"]\n"
         "    routes:\n"
         "      - {path: /healthz, type: health}\n"
         "      - {path: /topics, type: storage}\n"
         "      - {path: /, type: hello}\n";
}

// A datagram socket at a fresh path: what systemd listens on for sd_notify.
class NotifySocket {
 public:
  NotifySocket() {
    path_ = (fs::temp_directory_path() / ("lionet-notify-" + std::to_string(::getpid()))).string();
    ::unlink(path_.c_str());
    fd_ = ::socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    sockaddr_un a{};
    a.sun_family = AF_UNIX;
    std::snprintf(a.sun_path, sizeof a.sun_path, "%s", path_.c_str());
    bound_ = ::bind(fd_, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0;
  }
  ~NotifySocket() {
    ::close(fd_);
    ::unlink(path_.c_str());
  }
  bool bound() const { return bound_; }
  const std::string& path() const { return path_; }
  // The next message, "" after the timeout.
  std::string next(std::chrono::milliseconds timeout = std::chrono::seconds(30)) {
    pollfd p{fd_, POLLIN, 0};
    if (::poll(&p, 1, static_cast<int>(timeout.count())) <= 0) return {};
    char buf[4096];
    const ssize_t n = ::recv(fd_, buf, sizeof buf, 0);
    return n > 0 ? std::string(buf, static_cast<std::size_t>(n)) : std::string();
  }
  // The next message that is not a STATUS= line or a watchdog ping (those come at any point).
  std::string next_state() {
    for (;;) {
      std::string m = next();
      if (m.rfind("STATUS=", 0) != 0 && m != "WATCHDOG=1") return m;
    }
  }

 private:
  std::string path_;
  int fd_ = -1;
  bool bound_ = false;
};

TEST(AppSystemd, NotifyReadyReloadingStopping) {
#if !LIONET_HAVE_SYSTEMD
  FAIL() << "built with LIONET_WITH_SYSTEMD=OFF: this binary sends no notifications";
#else
  NotifySocket ns;
  ASSERT_TRUE(ns.bound()) << ns.path();
  TempConf conf;
  const int port = free_port();
  conf.write("server.yml", http_conf("web", port, conf.path() + "/data"));
  Process p({"-c", conf.path()}, {"NOTIFY_SOCKET=" + ns.path()});
  REQUIRE_BINARY(p);
  EXPECT_EQ(ns.next_state(), "READY=1");
  // READY=1 means serving: the listener and the store are there.
  EXPECT_EQ(curl("http://127.0.0.1:" + std::to_string(port) + "/healthz").status, 200);
  EXPECT_EQ(curl("-d x http://127.0.0.1:" + std::to_string(port) + "/topics/t/partitions/0/records").status, 201);
  const std::string status = ns.next(std::chrono::seconds(10));
  EXPECT_EQ(status.rfind("STATUS=", 0), 0u) << status;
  EXPECT_NE(status.find("requests/s"), std::string::npos) << status;

  p.signal(SIGHUP);
  const std::string reloading = ns.next_state();
  EXPECT_EQ(reloading.rfind("RELOADING=1\nMONOTONIC_USEC=", 0), 0u) << reloading;
  timespec now{};
  clock_gettime(CLOCK_MONOTONIC, &now);
  const long long usec = std::atoll(reloading.c_str() + reloading.find('=', 12) + 1);
  const long long now_usec = now.tv_sec * 1000000LL + now.tv_nsec / 1000;
  EXPECT_GT(usec, now_usec - 30 * 1000000LL) << reloading;  // CLOCK_MONOTONIC, microseconds
  EXPECT_LE(usec, now_usec) << reloading;
  EXPECT_EQ(ns.next_state(), "READY=1");

  p.signal(SIGTERM);
  EXPECT_EQ(ns.next_state(), "STOPPING=1");
  EXPECT_EQ(p.wait(), 0) << p.output();
#endif
}

// WatchdogSec=: systemd passes WATCHDOG_USEC (here 200 ms); the heartbeat fiber pings every
// half of it while the scheduler runs.
TEST(AppSystemd, WatchdogPingsEveryHalfInterval) {
#if !LIONET_HAVE_SYSTEMD
  FAIL() << "built with LIONET_WITH_SYSTEMD=OFF: this binary sends no notifications";
#else
  NotifySocket ns;
  ASSERT_TRUE(ns.bound()) << ns.path();
  TempConf conf;
  conf.write("server.yml", http_conf("web", free_port(), conf.path() + "/data"));
  Process p({"-c", conf.path()}, {"NOTIFY_SOCKET=" + ns.path(), "WATCHDOG_USEC=200000"});
  REQUIRE_BINARY(p);
  EXPECT_EQ(ns.next_state(), "READY=1");
  int pings = 0;
  const auto start = std::chrono::steady_clock::now();
  while (std::chrono::steady_clock::now() - start < std::chrono::seconds(2)) {
    const std::string m = ns.next(std::chrono::milliseconds(500));
    ASSERT_FALSE(m.empty()) << "no message for 500 ms: the watchdog would have fired";
    pings += m == "WATCHDOG=1";
  }
  EXPECT_GE(pings, 12) << "2 s at one ping per 100 ms";
  EXPECT_LE(pings, 25);
  p.signal(SIGTERM);
  EXPECT_EQ(ns.next_state(), "STOPPING=1");
  EXPECT_EQ(p.wait(), 0) << p.output();
#endif
}

// SIGUSR2 under systemd: the old process, the main PID systemd listens to, passes MAINPID=<new
// pid> on before it exits; the new process is the one that then says STOPPING=1.
TEST(AppSystemd, UpgradeHandsTheMainPidOver) {
#if !LIONET_HAVE_SYSTEMD
  FAIL() << "built with LIONET_WITH_SYSTEMD=OFF: this binary sends no notifications";
#else
  NotifySocket ns;
  ASSERT_TRUE(ns.bound()) << ns.path();
  TempConf conf;
  const int port = free_port();
  conf.write("server.yml", http_conf("web", port, conf.path() + "/data"));
  Process p({"-c", conf.path()}, {"NOTIFY_SOCKET=" + ns.path()});
  REQUIRE_BINARY(p);
  EXPECT_EQ(ns.next_state(), "READY=1");
  p.signal(SIGUSR2);
  const std::string moved = ns.next_state();
  ASSERT_EQ(moved.rfind("MAINPID=", 0), 0u) << moved << "\n" << p.output();
  const pid_t next = std::atoi(moved.c_str() + 8);
  EXPECT_NE(next, p.pid());
  ASSERT_TRUE(p.wait_for("is serving")) << p.output();
  EXPECT_NE(p.output().find("(pid " + std::to_string(next) + ")"), std::string::npos) << p.output();
  EXPECT_EQ(curl("http://127.0.0.1:" + std::to_string(port) + "/healthz").status, 200);
  ::kill(next, SIGTERM);
  EXPECT_EQ(ns.next_state(), "STOPPING=1");
  EXPECT_EQ(p.wait(), 0) << p.output();
#endif
}

// systemd-socket-activate holds a listening socket and passes it (fd 3, LISTEN_FDNAMES=web) to
// a shell that, like systemd with a .socket unit, keeps it open and runs lionet twice: the
// first is stopped with SIGTERM in the middle of a request loop, the second takes the same
// socket. The conf lists another port: the socket is matched to server 'web' by its name.
TEST(AppSystemd, SocketActivationServesAndARestartRefusesNothing) {
  ASSERT_EQ(::system("command -v systemd-socket-activate >/dev/null"), 0)
      << "systemd-socket-activate missing: run scripts/install-deps.sh";
  TempConf conf;
  const int port = free_port();
  const int conf_port = free_port();
  conf.write("server.yml", http_conf("web", conf_port, conf.path() + "/data"));
  const fs::path bin = find_binary();
  ASSERT_FALSE(bin.empty()) << "lionet binary not found (build it, or set TEST_LIONET_BINARY)";
  const std::string dir = conf.path();
  const std::string script = "for i in 1 2; do (echo $BASHPID > " + dir + "/pid.$i; exec env LISTEN_PID=$BASHPID " +
                             bin.string() + " -c " + dir + " >> " + dir + "/out.$i 2>&1); done";
  const std::string cmd = "systemd-socket-activate -l 127.0.0.1:" + std::to_string(port) + " --fdname=web bash -c '" +
                          script + "' > " + dir + "/activate.log 2>&1 & echo $!";
  const pid_t activator = std::atoi(sh(cmd).c_str());
  ASSERT_GT(activator, 0);
  auto read_pid = [&](int i) {
    std::ifstream in(dir + "/pid." + std::to_string(i));
    int pid = 0;
    in >> pid;
    return pid;
  };

  // Until it listens, a connection is refused by the kernel: that is not what is measured.
  for (int i = 0; i < 1000 && sh("cat " + dir + "/activate.log").find("Listening on") == std::string::npos; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  ASSERT_NE(sh("cat " + dir + "/activate.log").find("Listening on"), std::string::npos)
      << sh("cat " + dir + "/activate.log");

  RequestLoop loop;
  constexpr int kRequests = 3000;
  std::thread client([&] {
    for (int i = 0; i < kRequests; ++i) loop.one(port, get_request(i % 2 ? "/healthz" : "/"));
  });
  // SIGTERM the first lionet a third of the way through.
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (loop.done.load() + loop.conn_errors.load() < kRequests / 3 && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  const int first = read_pid(1);
  ASSERT_GT(first, 0);
  ::kill(first, SIGTERM);
  client.join();
  const int second = read_pid(2);
  ::kill(second, SIGTERM);
  // The shell (not our child: the popen shell started it) ends after the second lionet.
  for (int i = 0; i < 3000 && ::kill(activator, 0) == 0; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  EXPECT_NE(::kill(activator, 0), 0) << "systemd-socket-activate still running";

  std::ifstream out1(dir + "/out.1");
  const std::string log1((std::istreambuf_iterator<char>(out1)), std::istreambuf_iterator<char>());
  EXPECT_NE(log1.find("systemd socket activation: 1 listening socket(s)"), std::string::npos) << log1;
  EXPECT_NE(log1.find("127.0.0.1:" + std::to_string(port)), std::string::npos) << log1;
  EXPECT_GT(second, 0) << "the second lionet never started";
  EXPECT_NE(second, first);
  EXPECT_EQ(loop.conn_errors.load(), 0) << loop.first_error;
  EXPECT_EQ(loop.bad_status.load(), 0) << loop.first_error;
  EXPECT_EQ(loop.done.load(), kRequests);
  // Nothing listened on the configured port: the passed socket replaced it.
  EXPECT_LT(connect_to(conf_port), 0);
}
}  // namespace
}  // namespace lionet::app::testing
