// tests/app/app_faults_test.cc: faults injected into a running lionet binary (issue 10): peers
// that reset mid-response, the disk filling up while appending (RLIMIT_FSIZE on the server),
// the certificate files removed after start. Each time: a clear error for the one affected
// request, the rest keeps serving, nothing acknowledged is lost.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/resource.h>
#include <sys/socket.h>

#include <thread>

#include "tests/app/app_process.h"

namespace lionet::app {
namespace {
namespace fs = std::filesystem;
using namespace lionet::app::testing;
using namespace std::chrono_literals;

struct Server {
  TempConf conf;
  fs::path root{conf.path()};
  int http = free_port();
  int https = free_port();
  std::unique_ptr<Process> proc;

  Server() {
    fs::create_directories(root / "www");
    std::ofstream(root / "www" / "big.bin", std::ios::binary) << std::string(8 << 20, 'x');
    std::ofstream(root / "www" / "small.txt") << "small file\n";
    const std::string r = root.string();
    conf.write("server.yml",
               "scheduler: {threads: 2}\n"
               "storage: {data_dir: " +
                   r +
                   "/data}\n"
                   "servers:\n"
                   "  - {name: web, type: http, listen: ['127.0.0.1:" +
                   std::to_string(http) +
                   "'], routes: [\n"
                   "      {path: /, type: static, root: " +
                   r +
                   "/www, mode: auto},\n"
                   "      {path: /topics, type: storage}, {path: /healthz, type: health}]}\n"
                   "  - {name: tls, type: https, listen: ['127.0.0.1:" +
                   std::to_string(https) +
                   "'],\n"
                   "     tls: {cert: " +
                   r + "/tls/cert.pem, key: " + r +
                   "/tls/key.pem, generate_self_signed: true},\n"
                   "     routes: [{path: /healthz, type: health}]}\n");
  }
  // fsize_limit: RLIMIT_FSIZE of the server (0 = none).
  bool start(rlim_t fsize_limit = 0) {
    rlimit old{};
    ::getrlimit(RLIMIT_FSIZE, &old);
    if (fsize_limit) {
      rlimit lim{fsize_limit, old.rlim_max};
      ::setrlimit(RLIMIT_FSIZE, &lim);
    }
    proc = std::make_unique<Process>(std::vector<std::string>{"-c", conf.path()});
    if (fsize_limit) ::setrlimit(RLIMIT_FSIZE, &old);
    return proc->started() && proc->wait_for("scheduler 'lionet' running");
  }
  std::string url(const std::string& p) const { return "http://127.0.0.1:" + std::to_string(http) + p; }
  bool healthy() const { return curl(url("/healthz")).status == 200; }
};

TEST(AppFaults, PeersResettingMidResponseDoNotDisturbOthers) {
  Server s;
  ASSERT_TRUE(s.start()) << (s.proc ? s.proc->output() : "");
  for (int i = 0; i < 50; ++i) {  // 50 clients ask for 8 MiB, read a little, then reset
    int fd = connect_to(s.http);
    ASSERT_GE(fd, 0);
    const std::string req = "GET /big.bin HTTP/1.1\r\nHost: x\r\n\r\n";
    ASSERT_EQ(::write(fd, req.data(), req.size()), static_cast<ssize_t>(req.size()));
    char buf[4096];
    EXPECT_GT(::read(fd, buf, sizeof buf), 0);
    linger lg{1, 0};  // close with RST
    ::setsockopt(fd, SOL_SOCKET, SO_LINGER, &lg, sizeof lg);
    ::close(fd);
    if (i % 10 == 0) {
      EXPECT_TRUE(s.healthy()) << "after " << i << " resets";
    }
  }
  auto [code, body] = curl(s.url("/small.txt"));
  EXPECT_EQ(code, 200);
  EXPECT_EQ(body, "small file\n");
  s.proc->signal(SIGTERM);
  EXPECT_EQ(s.proc->wait(20s), 0) << s.proc->output();
}

TEST(AppFaults, DiskFullWhileAppendingAnswers507AndLosesNothingAcknowledged) {
  Server s;
  ASSERT_TRUE(s.start(256 * 1024)) << (s.proc ? s.proc->output() : "");  // files end at 256 KiB
  const std::string rec(1000, 'r');
  std::ofstream(s.root / "rec.txt") << rec;
  int acked = 0, full = 0;
  std::string full_body;
  for (int i = 0; i < 400 && full == 0; ++i) {  // ~1 KiB records: the limit is hit near 250
    auto [code, body] =
        curl("--data-binary @" + (s.root / "rec.txt").string() + " " + s.url("/topics/full/partitions/0/records"));
    if (code == 201) ++acked;
    else if (code == 507) ++full, full_body = body;
    else ADD_FAILURE() << "unexpected " << code << ": " << body;
  }
  ASSERT_EQ(full, 1) << "RLIMIT_FSIZE was never hit";
  EXPECT_NE(full_body.find("\"error\""), std::string::npos) << full_body;
  EXPECT_GT(acked, 100);
  EXPECT_TRUE(s.healthy());  // the rest keeps serving
  EXPECT_EQ(curl(s.url("/small.txt")).status, 200);
  // Every acknowledged record reads back, before and after a restart.
  auto count_records = [&] {
    int n = 0;
    for (int64_t off = 0; off < acked + 10;) {
      std::string arg = "'";  // appended, not "'" + ...: gcc 12's -Wrestrict false positive
      arg += s.url("/topics/full/partitions/0/records?offset=" + std::to_string(off)) + "'";
      auto [code, body] = curl(arg);
      if (code != 200 || body.empty()) break;
      for (std::size_t p = 0; (p = body.find("\"value\":\"" + rec + "\"", p)) != std::string::npos; ++p) ++n, ++off;
    }
    return n;
  };
  EXPECT_EQ(count_records(), acked);
  s.proc->signal(SIGTERM);
  EXPECT_EQ(s.proc->wait(20s), 0) << s.proc->output();
  ASSERT_TRUE(s.start()) << s.proc->output();
  EXPECT_EQ(count_records(), acked);
  // With room again, appends go on after the last acknowledged offset.
  auto [code, body] = curl("--data-binary more " + s.url("/topics/full/partitions/0/records"));
  EXPECT_EQ(code, 201) << body;
  EXPECT_NE(body.find("\"base_offset\":" + std::to_string(acked)), std::string::npos) << body;
  s.proc->signal(SIGTERM);
  EXPECT_EQ(s.proc->wait(20s), 0) << s.proc->output();
}

// The storage files made immutable after start (chattr +i: what a read-only remount does to
// writes, and it binds root too): appends answer 503 with a JSON error, reads and everything
// else go on, and appends work again once the files are writable.
TEST(AppFaults, StorageMadeReadOnlyAfterStartAnswers503AndKeepsReading) {
  Server s;
  ASSERT_TRUE(s.start()) << (s.proc ? s.proc->output() : "");
  const std::string rec = s.url("/topics/ro/partitions/0/records");
  for (int i = 0; i < 5; ++i) ASSERT_EQ(curl("--data-binary before-" + std::to_string(i) + " " + rec).status, 201);
  const std::string data = (s.root / "data").string();
  struct Unfreeze {
    std::string dir;
    ~Unfreeze() { (void)std::system(("chattr -R -i " + dir + " 2>/dev/null").c_str()); }
  } unfreeze{data};
  if (std::system(("chattr -R +i " + data + " 2>/dev/null").c_str()) != 0) {
    GTEST_SKIP() << "chattr +i is not supported on " << data << "'s file system";
  }
  auto [code, body] = curl("--data-binary during " + rec);
  EXPECT_EQ(code, 503) << body;
  EXPECT_NE(body.find("\"error\""), std::string::npos) << body;
  auto [rcode, rbody] = curl("'" + rec + "?offset=0'");
  EXPECT_EQ(rcode, 200);
  for (int i = 0; i < 5; ++i) EXPECT_NE(rbody.find("before-" + std::to_string(i)), std::string::npos) << rbody;
  EXPECT_TRUE(s.healthy());
  ASSERT_EQ(std::system(("chattr -R -i " + data).c_str()), 0);
  auto [acode, abody] = curl("--data-binary after " + rec);
  EXPECT_EQ(acode, 201) << abody;
  EXPECT_NE(abody.find("\"base_offset\":5"), std::string::npos) << abody;
  s.proc->signal(SIGTERM);
  EXPECT_EQ(s.proc->wait(20s), 0) << s.proc->output();
}

TEST(AppFaults, CertificateRemovedAfterStartKeepsHttpsServing) {
  Server s;
  ASSERT_TRUE(s.start()) << (s.proc ? s.proc->output() : "");
  const std::string cert = (s.root / "tls" / "cert.pem").string();
  ASSERT_TRUE(fs::exists(cert));
  const std::string saved = s.root.string() + "/cert-copy.pem";
  fs::copy_file(cert, saved);
  fs::remove_all(s.root / "tls");
  for (int i = 0; i < 5; ++i) {
    auto [code, body] = curl("--cacert " + saved + " https://127.0.0.1:" + std::to_string(s.https) + "/healthz");
    EXPECT_EQ(code, 200) << body;
  }
  EXPECT_TRUE(s.healthy());
  s.proc->signal(SIGTERM);
  EXPECT_EQ(s.proc->wait(20s), 0) << s.proc->output();
}
}  // namespace
}  // namespace lionet::app
