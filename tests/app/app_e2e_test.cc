// tests/app/app_e2e_test.cc: the lionet binary end to end, as a user meets it: a temp conf with
// random ports (http + https + echo + storage), every route hit with curl and with
// lionet::http::Client, records appended and read back over HTTP (a read of an unknown topic is
// 404 and creates nothing; a Content-Length over max_body_bytes gets the API's JSON 413),
// /metrics counters that move,
// the fiber dump (route and SIGQUIT), SIGTERM during a wrk run (exit 0, no error responses,
// every acknowledged record readable after a restart), a second signal, start-up failures
// (port in use, bad certificate, missing root), --check on broken configs, SIGHUP reopening logs.
// Servers listen on 127.0.0.1 only; every load loop is bounded in count and time.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <atomic>
#include <cstdio>
#include <map>
#include <mutex>
#include <thread>

#include "lionet/http/client.h"
#include "lionet/io/io_manager.h"
#include "lionet/sched/scheduler.h"
#include "tests/app/app_process.h"

namespace lionet::app {
namespace {
namespace fs = std::filesystem;
using namespace lionet::app::testing;
using namespace std::chrono_literals;

// A temp directory with a www/ tree and a conf/ dir for the binary; ports chosen at random.
class Site {
 public:
  Site() : root_(conf_.path()) {
    http = free_port();
    https = free_port();
    echo = free_port();
    fs::create_directories(root_ / "www" / "sub");
    std::ofstream(root_ / "www" / "index.html") << "<h1>e2e index</h1>\n";
    write_file("www/small.txt", 1000);  // AUTO: memory
    write_file("www/sub/medium.bin", 200000);  // AUTO: chunked
    write_file("www/large.bin", 3 << 20);  // AUTO: sendfile
    fs::create_directories(root_ / "conf");
  }
  void write_file(const std::string& rel, std::size_t n) {
    std::string s(n, '\0');
    for (std::size_t i = 0; i < n; ++i) s[i] = static_cast<char>('a' + (i * 7 + i / 251) % 26);
    std::ofstream(root_ / rel, std::ios::binary) << s;
  }
  // The servers section; extra goes at the end of server.yml.
  void write_conf(const std::string& extra = "", const std::string& shutdown = "5000ms") {
    const std::string r = root_.string();
    std::ofstream(root_ / "conf" / "server.yml")
        << "scheduler: {threads: 2}\n"
        << "app: {shutdown_timeout: " << shutdown << "}\n"
        << "workers: {edge: {threads: 1}}\n"
        << "storage: {data_dir: " << r << "/data, flush: {policy: every_batch}}\n"
        << "servers:\n"
        << "  - name: web\n    type: http\n    listen: ['127.0.0.1:" << http << "']\n"
        << "    routes:\n"
        << "      - {path: /, type: static, root: " << r << "/www, mode: auto}\n"
        << "      - {path: /topics, type: storage}\n"
        << "      - {path: /metrics, type: metrics}\n"
        << "      - {path: /healthz, type: health}\n"
        << "      - {path: /debug/fibers, type: debug_fibers}\n"
        << "  - name: tls\n    type: https\n    listen: ['127.0.0.1:" << https << "']\n"
        << "    tls: {cert: " << r << "/tls/cert.pem, key: " << r << "/tls/key.pem, generate_self_signed: true}\n"
        << "    routes:\n"
        << "      - {path: /, type: static, root: " << r << "/www, mode: auto}\n"
        << "      - {path: /healthz, type: health}\n"
        << "  - name: echo\n    type: echo\n    workers: edge\n    listen: ['127.0.0.1:" << echo << "']\n"
        << extra;
  }
  std::string conf() const { return (root_ / "conf").string(); }
  fs::path root() const { return root_; }
  std::string url(const std::string& path) const { return "http://127.0.0.1:" + std::to_string(http) + path; }
  int http = 0, https = 0, echo = 0;

 private:
  TempConf conf_;
  fs::path root_;
};

// Uint64 value of the first sample line starting with `prefix` in a Prometheus page (-1: none).
long long metric(const std::string& page, const std::string& prefix) {
  std::size_t at = 0;
  while ((at = page.find(prefix, at)) != std::string::npos) {
    if (at == 0 || page[at - 1] == '\n') {
      auto sp = page.find(' ', at + prefix.size());
      return std::atoll(page.c_str() + sp + 1);
    }
    at += prefix.size();
  }
  return -1;
}

std::string echo_roundtrip(int port, const std::string& msg) {
  std::string got;
  const int s = connect_to(port);
  if (s >= 0 && ::write(s, msg.data(), msg.size()) > 0) {
    char buf[256];
    while (got.size() < msg.size()) {
      ssize_t n = ::read(s, buf, sizeof buf);
      if (n <= 0) break;
      got.append(buf, static_cast<std::size_t>(n));
    }
  }
  if (s >= 0) ::close(s);
  return got;
}

TEST(AppE2E, EveryRouteOverHttpHttpsAndEchoAndMetricsMove) {
  Site site;
  site.write_conf();
  Process p({"-c", site.conf()});
  REQUIRE_BINARY(p);
  ASSERT_TRUE(p.wait_for(kReady)) << p.output();

  // Static files in each AUTO size class, byte for byte.
  auto index = curl(site.url("/"));
  EXPECT_EQ(index.status, 200);
  EXPECT_NE(index.body.find("e2e index"), std::string::npos);
  for (const char* f : {"small.txt", "sub/medium.bin", "large.bin"}) {
    const std::string out = (site.root() / "got").string();
    int rc = 0;
    sh("curl -sS --max-time 20 -o " + out + " " + site.url(std::string("/") + f), &rc);
    EXPECT_EQ(rc, 0) << f;
    EXPECT_EQ(file_bytes(out), file_bytes(site.root() / "www" / f)) << f;
  }
  EXPECT_EQ(curl(site.url("/nope.html")).status, 404);
  EXPECT_EQ(curl(site.url("/healthz")).body, "ok\n");

  // HTTPS with the certificate the binary generated, verified by curl.
  const std::string cert = (site.root() / "tls" / "cert.pem").string();
  auto tls = curl("--cacert " + cert + " https://127.0.0.1:" + std::to_string(site.https) + "/sub/medium.bin");
  EXPECT_EQ(tls.status, 200) << tls.body;
  EXPECT_EQ(tls.body, file_bytes(site.root() / "www" / "sub" / "medium.bin"));

  // HTTP/2 on the same listeners (http2 defaults to true): h2 chosen by ALPN on https, h2c
  // with prior knowledge on http; the same routes, byte for byte.
  {
    const std::string out = (site.root() / "got-h2").string();
    int rc = 0;
    std::string v = sh("curl -sS --max-time 20 --http2 --cacert " + cert + " -o " + out +
                           " -w '%{http_version}' https://127.0.0.1:" + std::to_string(site.https) + "/large.bin",
                       &rc);
    EXPECT_EQ(rc, 0);
    EXPECT_EQ(v, "2");
    EXPECT_EQ(file_bytes(out), file_bytes(site.root() / "www" / "large.bin"));
    v = sh("curl -sS --max-time 20 --http2-prior-knowledge -o " + out + " -w '%{http_version}' " +
               site.url("/sub/medium.bin"),
           &rc);
    EXPECT_EQ(rc, 0);
    EXPECT_EQ(v, "2");
    EXPECT_EQ(file_bytes(out), file_bytes(site.root() / "www" / "sub" / "medium.bin"));
  }

  // Storage: one record, a batch, read back, list.
  std::ofstream(site.root() / "batch.ndjson") << "second\nthird\n";
  auto one = curl("-X POST --data-binary 'first record' " + site.url("/topics/e2e/partitions/0/records"));
  EXPECT_EQ(one.status, 201) << one.body;
  EXPECT_NE(one.body.find("\"base_offset\":0"), std::string::npos) << one.body;
  auto batch = curl("-X POST -H 'Content-Type: application/x-ndjson' --data-binary @" +
                    (site.root() / "batch.ndjson").string() + " " + site.url("/topics/e2e/partitions/0/records"));
  EXPECT_EQ(batch.status, 201) << batch.body;
  EXPECT_NE(batch.body.find("\"base_offset\":1"), std::string::npos) << batch.body;
  auto read = curl("'" + site.url("/topics/e2e/partitions/0/records?offset=0") + "'");
  EXPECT_EQ(read.status, 200);
  for (const char* v : {"first record", "second", "third"})
    EXPECT_NE(read.body.find(v), std::string::npos) << read.body;
  EXPECT_NE(curl(site.url("/topics")).body.find("e2e"), std::string::npos);
  auto bad = curl("'" + site.url("/topics/e2e/partitions/0/records?offset=99") + "'");
  EXPECT_EQ(bad.status, 416) << bad.body;
  EXPECT_NE(bad.body.find("\"error\""), std::string::npos) << bad.body;

  // The project's own client, from fibers, keep-alive.
  {
    Scheduler sched({.threads = 1});
    IOManager io(sched);
    sched
        .spawn([&] {
          http::Client client;
          for (int i = 0; i < 5; ++i) {
            auto r = client.get(site.url("/healthz"));
            ASSERT_TRUE(r.ok()) << r.error().message();
            EXPECT_EQ(r.value().status, 200);
          }
        })
        .join();
    sched.stop();
  }

  // Echo.
  EXPECT_EQ(echo_roundtrip(site.echo, "ping over echo"), "ping over echo");

  // The fiber dump names the acceptors' waits, over HTTP and on SIGQUIT.
  auto dump = curl(site.url("/debug/fibers"));
  EXPECT_EQ(dump.status, 200);
  EXPECT_NE(dump.body.find("read"), std::string::npos) << dump.body;
  EXPECT_NE(dump.body.find("fd "), std::string::npos) << dump.body;
  const std::size_t before_quit = p.output().size();
  p.signal(SIGQUIT);
  EXPECT_TRUE(p.wait_for("fiber dump", 10s, before_quit)) << p.output();

  // Counters moved.
  auto m = curl(site.url("/metrics"));
  EXPECT_EQ(m.status, 200);
  EXPECT_GE(metric(m.body, "lionet_http_requests_total{server=\"web\",class=\"2xx\"}"), 10) << m.body;
  EXPECT_GE(metric(m.body, "lionet_http_requests_total{server=\"web\",class=\"4xx\"}"), 2) << m.body;
  EXPECT_GE(metric(m.body, "lionet_connections_accepted_total{server=\"echo\",type=\"echo\"}"), 1) << m.body;
  EXPECT_GE(metric(m.body, "lionet_received_bytes_total{server=\"echo\",type=\"echo\"}"), 14) << m.body;
  EXPECT_GE(metric(m.body, "lionet_sent_bytes_total{server=\"web\",type=\"http\"}"), 3 << 20) << m.body;
  EXPECT_GE(metric(m.body, "lionet_sent_bytes_total{server=\"tls\",type=\"https\"}"), 200000) << m.body;
  EXPECT_EQ(metric(m.body, "lionet_storage_appended_records_total"), 3) << m.body;
  EXPECT_GE(metric(m.body, "lionet_storage_reads_total"), 1) << m.body;
  EXPECT_GE(metric(m.body, "lionet_fibers_created_total{pool=\"main\"}"), 10) << m.body;
  EXPECT_GE(metric(m.body, "lionet_http_request_duration_seconds_count{server=\"web\"}"), 10) << m.body;
  // The h2 and h2c downloads above.
  EXPECT_GE(metric(m.body, "lionet_http2_connections_total{server=\"tls\",type=\"https\"}"), 1) << m.body;
  EXPECT_GE(metric(m.body, "lionet_http2_connections_total{server=\"web\",type=\"http\"}"), 1) << m.body;
  EXPECT_GE(metric(m.body, "lionet_http2_streams_total{server=\"web\",type=\"http\"}"), 1) << m.body;
  EXPECT_EQ(metric(m.body, "lionet_http2_goaways_sent_total{server=\"web\",reason=\"protocol_error\"}"), 0) << m.body;

  p.signal(SIGTERM);
  EXPECT_EQ(p.wait(), 0) << p.output();
}

// Appends from 8 fibers (lionet::http::Client) and a wrk run on /healthz while SIGTERM arrives:
// exit 0, no non-2xx answer, and after a restart every acknowledged record reads back.
TEST(AppE2E, SigtermDuringLoadExitsZeroAndLosesNoAcknowledgedRecord) {
  if (sh("command -v wrk").empty()) GTEST_FAIL() << "wrk is not installed (scripts/install-deps.sh installs it)";
  Site site;
  site.write_conf();
  std::map<int64_t, std::string> acked;  // offset -> value
  std::mutex acked_mu;
  std::atomic<int> non_2xx{0};
  {
    Process p({"-c", site.conf()});
    REQUIRE_BINARY(p);
    ASSERT_TRUE(p.wait_for(kReady)) << p.output();
    const std::string wrk_out = (site.root() / "wrk.txt").string();
    std::thread wrk([&] { sh("wrk -t1 -c16 -d6s --timeout 2s " + site.url("/healthz") + " > " + wrk_out + " 2>&1"); });
    std::atomic<bool> server_gone{false};
    std::thread appenders([&] {
      Scheduler sched({.threads = 1});
      IOManager io(sched);
      std::vector<JoinHandle<void>> hs;
      for (int f = 0; f < 8; ++f) {
        hs.push_back(sched.spawn([&, f] {
          http::Client client({.connect_timeout = 2s, .request_timeout = 5s});
          for (int i = 0; i < 5000 && !server_gone.load(); ++i) {  // bounded; ends when the server is gone
            const std::string v = "rec-" + std::to_string(f) + "-" + std::to_string(i);
            auto r = client.post(site.url("/topics/load/partitions/0/records"), v, "text/plain");
            if (!r.ok()) break;  // connection refused / closed: the listener is gone
            if (r.value().status != 201) {
              ++non_2xx;
              break;
            }
            const std::string& b = r.value().body;
            auto at = b.find("\"base_offset\":");
            ASSERT_NE(at, std::string::npos) << b;
            std::lock_guard lk(acked_mu);
            acked[std::atoll(b.c_str() + at + 14)] = v;
          }
        }));
      }
      for (auto& h : hs) h.join();
      sched.stop();
    });
    // SIGTERM once the load is under way: at least 1.5 s in and 25 acknowledgements (a sanitizer
    // build is many times slower, so time alone does not say the appenders got anywhere), or 30 s.
    const auto load_start = std::chrono::steady_clock::now();
    for (;;) {
      std::this_thread::sleep_for(50ms);
      const auto in = std::chrono::steady_clock::now() - load_start;
      std::size_t n;
      {
        std::lock_guard lk(acked_mu);
        n = acked.size();
      }
      if ((in >= 1500ms && n >= 25) || in >= 30s) break;
    }
    p.signal(SIGTERM);
    EXPECT_EQ(p.wait(20s), 0) << p.output();
    server_gone = true;
    appenders.join();
    wrk.join();
    const std::string w = file_bytes(wrk_out);
    EXPECT_EQ(w.find("Non-2xx"), std::string::npos) << w;
    EXPECT_NE(w.find("requests in"), std::string::npos) << w;
  }
  EXPECT_EQ(non_2xx.load(), 0);
  ASSERT_GT(acked.size(), 20u) << "the appenders got too few acknowledgements to mean anything";

  // Restart on the same data and read everything back.
  Process p2({"-c", site.conf()});
  ASSERT_TRUE(p2.wait_for(kReady)) << p2.output();
  std::map<int64_t, std::string> stored;
  int64_t next = 0;
  for (int page = 0; page < 10000; ++page) {
    auto r =
        curl("-D - '" +
             site.url("/topics/load/partitions/0/records?offset=" + std::to_string(next) + "&max_bytes=65536") + "'");
    ASSERT_EQ(r.status, 200) << r.body;
    auto hdr_end = r.body.find("\r\n\r\n");
    ASSERT_NE(hdr_end, std::string::npos);
    const std::string body = r.body.substr(hdr_end + 4);
    if (body.empty()) break;
    std::size_t pos = 0;
    while (pos < body.size()) {
      auto eol = body.find('\n', pos);
      if (eol == std::string::npos) eol = body.size();
      const std::string line = body.substr(pos, eol - pos);
      pos = eol + 1;
      auto o = line.find("\"offset\":");
      auto v = line.find("\"value\":\"");
      if (o == std::string::npos || v == std::string::npos) continue;
      const int64_t off = std::atoll(line.c_str() + o + 9);
      stored[off] = line.substr(v + 9, line.find('"', v + 9) - (v + 9));
      next = off + 1;
    }
  }
  for (const auto& [off, v] : acked) {
    auto it = stored.find(off);
    ASSERT_NE(it, stored.end()) << "acknowledged offset " << off << " (" << v << ") missing after restart";
    EXPECT_EQ(it->second, v) << "offset " << off;
  }
  p2.signal(SIGTERM);
  EXPECT_EQ(p2.wait(), 0) << p2.output();
}

// A client that does not read a 3 MiB file keeps its response in flight, so the drain waits
// (shutdown_timeout 30 s); a second SIGTERM then exits at once with status 1.
TEST(AppE2E, SecondSignalDuringDrainExitsAtOnce) {
  Site site;
  site.write_conf("", "30000ms");
  Process p({"-c", site.conf()});
  REQUIRE_BINARY(p);
  ASSERT_TRUE(p.wait_for(kReady)) << p.output();
  int s = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  int small = 4096;
  ::setsockopt(s, SOL_SOCKET, SO_RCVBUF, &small, sizeof small);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(static_cast<uint16_t>(site.http));
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(::connect(s, reinterpret_cast<sockaddr*>(&a), sizeof a), 0);
  const std::string req = "GET /large.bin HTTP/1.1\r\nHost: x\r\n\r\n";
  ASSERT_EQ(::write(s, req.data(), req.size()), static_cast<ssize_t>(req.size()));
  std::this_thread::sleep_for(300ms);  // the response fills the socket buffers and blocks
  p.signal(SIGTERM);
  ASSERT_TRUE(p.wait_for("SIGTERM: stopping", 10s)) << p.output();
  std::this_thread::sleep_for(300ms);
  const auto t0 = std::chrono::steady_clock::now();
  p.signal(SIGTERM);
  EXPECT_EQ(p.wait(10s), 1) << p.output();
  EXPECT_LT(std::chrono::steady_clock::now() - t0, 5s);
  EXPECT_NE(p.output().find("exiting now"), std::string::npos) << p.output();
  ::close(s);
}

TEST(AppE2E, StartupFailuresExitNonZeroWithOneClearLine) {
  {  // port in use
    Site site;
    site.write_conf();
    int s = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = htons(static_cast<uint16_t>(site.http));
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    ASSERT_EQ(::bind(s, reinterpret_cast<sockaddr*>(&a), sizeof a), 0);
    ASSERT_EQ(::listen(s, 1), 0);
    Process p({"-c", site.conf()});
    REQUIRE_BINARY(p);
    EXPECT_EQ(p.wait(20s), 1) << p.output();
    const std::string line = "lionet: cannot start: server 'web': bind 127.0.0.1:" + std::to_string(site.http) +
                             ": Address already in use\n";
    EXPECT_NE(p.output().find(line), std::string::npos) << "want: " << line << p.output();
    EXPECT_EQ(p.output().find("lionet: lionet:"), std::string::npos) << p.output();
    // README quotes this case: the quote must be what the binary prints (port aside).
    std::ifstream readme(std::string(LIONET_SOURCE_DIR) + "/README.md");
    std::string text((std::istreambuf_iterator<char>(readme)), {}), flat;
    for (char ch : text) {
      if (ch == '\n' || ch == ' ') {
        if (!flat.empty() && flat.back() != ' ') flat += ' ';
      } else {
        flat += ch;
      }
    }
    const auto q = flat.find("`lionet: cannot start: server 'web': ");
    ASSERT_NE(q, std::string::npos) << "README no longer quotes the port-in-use line";
    std::string quoted = flat.substr(q + 1, flat.find('`', q + 1) - q - 1);
    quoted.replace(quoted.find("8080"), 4, std::to_string(site.http));
    EXPECT_NE(p.output().find(quoted + "\n"), std::string::npos) << "README quotes: " << quoted << "\n" << p.output();
    ::close(s);
  }
  {  // certificate missing and not to be generated
    Site site;
    site.write_conf("  - name: bad-tls\n    type: https\n    listen: ['127.0.0.1:" + std::to_string(free_port()) +
                    "']\n    tls: {cert: /nonexistent/cert.pem, key: /nonexistent/key.pem}\n"
                    "    routes: [{path: /healthz, type: health}]\n");
    Process p({"-c", site.conf()});
    REQUIRE_BINARY(p);
    EXPECT_EQ(p.wait(20s), 1) << p.output();
    EXPECT_NE(p.output().find("cannot start: server 'bad-tls'"), std::string::npos) << p.output();
    EXPECT_NE(p.output().find("/nonexistent/cert.pem"), std::string::npos) << p.output();
  }
  {  // static root that does not exist
    Site site;
    site.write_conf("  - name: bad-root\n    type: http\n    listen: ['127.0.0.1:" + std::to_string(free_port()) +
                    "']\n    routes: [{path: /, type: static, root: /nonexistent/www}]\n");
    Process p({"-c", site.conf()});
    REQUIRE_BINARY(p);
    EXPECT_EQ(p.wait(20s), 1) << p.output();
    EXPECT_NE(p.output().find("cannot start: server 'bad-root': route /"), std::string::npos) << p.output();
    EXPECT_NE(p.output().find("/nonexistent/www"), std::string::npos) << p.output();
  }
}

// The storage API's answers a client relies on: keys, JSON escaping, bytes that are not UTF-8,
// paging with X-Next-Offset, and each error status with a JSON message.
TEST(AppE2E, StorageApiEncodingsPagingAndErrors) {
  Site site;
  site.write_conf();
  Process p({"-c", site.conf()});
  REQUIRE_BINARY(p);
  ASSERT_TRUE(p.wait_for(kReady)) << p.output();
  const std::string rec = site.url("/topics/api/partitions/0/records");
  std::ofstream(site.root() / "q.txt") << "say \"hi\"\\ \x01 caf\xc3\xa9";
  std::ofstream(site.root() / "bin.dat", std::ios::binary) << std::string("\xff\xfe\x00z", 4);
  EXPECT_EQ(curl("--data-binary @" + (site.root() / "q.txt").string() + " '" + rec + "?key=k%201'").status, 201);
  EXPECT_EQ(curl("--data-binary @" + (site.root() / "bin.dat").string() + " " + rec).status, 201);
  auto all = curl("'" + rec + "?offset=0'");
  ASSERT_EQ(all.status, 200);
  EXPECT_NE(all.body.find("\"key\":\"k 1\""), std::string::npos) << all.body;
  EXPECT_NE(all.body.find("\"value\":\"say \\\"hi\\\"\\\\ \\u0001 caf\xc3\xa9\""), std::string::npos) << all.body;
  EXPECT_NE(all.body.find("\"value_base64\":\"//4Aeg==\""), std::string::npos) << all.body;
  site.write_file("huge.bin", 9 << 20);  // over max_body_bytes (8 MiB), sent chunked
  // Paging: max_bytes smaller than one batch still returns that batch and the next offset.
  auto first = curl("-D - '" + rec + "?offset=0&max_bytes=1'");
  EXPECT_NE(first.body.find("X-Next-Offset: 1"), std::string::npos) << first.body;
  struct Case {
    std::string args;
    int status;
    std::string words;
  };
  const std::vector<Case> cases = {
      {"'" + site.url("/topics/b%20d/partitions/0/records") + "'", 400, "invalid topic name"},
      {"'" + site.url("/topics/api/partitions/x/records") + "'", 400, "invalid partition"},
      {"'" + site.url("/topics/api/partitions/5/records") + "'", 404, "no such partition"},
      {"'" + rec + "?offset=3'", 416, "valid offsets: 0 to 2"},
      {"'" + rec + "?offset=-5'", 400, "non-negative numbers"},  // malformed, like abc: one rule
      {"'" + rec + "?offset=abc'", 400, "non-negative numbers"},
      {"-X POST " + rec, 400, "empty body"},
      {"-X POST -H 'Transfer-Encoding: chunked' --data-binary @" + (site.root() / "huge.bin").string() + " " + rec, 413,
       "max_body_bytes"},
  };
  for (const auto& c : cases) {
    auto r = curl(c.args);
    EXPECT_EQ(r.status, c.status) << c.args << " -> " << r.body;
    EXPECT_NE(r.body.find("{\"error\":"), std::string::npos) << c.args << " -> " << r.body;
    EXPECT_NE(r.body.find(c.words), std::string::npos) << c.args << " -> " << r.body;
  }
  p.signal(SIGTERM);
  EXPECT_EQ(p.wait(), 0) << p.output();
}

// A read names a topic that does not exist: 404 with the API's JSON error, and nothing is
// created (auto_create_topics is on, as by default: only appends create).
TEST(AppE2E, StorageReadOfUnknownTopicIs404AndCreatesNothing) {
  Site site;
  site.write_conf();
  Process p({"-c", site.conf()});
  REQUIRE_BINARY(p);
  ASSERT_TRUE(p.wait_for(kReady)) << p.output();
  auto r = curl("-D - '" + site.url("/topics/ghost/partitions/0/records?offset=0") + "'");
  EXPECT_EQ(r.status, 404) << r.body;
  EXPECT_NE(r.body.find("Content-Type: application/json"), std::string::npos) << r.body;
  EXPECT_NE(r.body.find("{\"error\":\"topic 'ghost' partition 0: no such topic\"}"), std::string::npos) << r.body;
  EXPECT_EQ(curl("'" + site.url("/topics/ghost/partitions/3/records") + "'").status, 404);
  auto list = curl("'" + site.url("/topics") + "'");
  EXPECT_EQ(list.status, 200);
  EXPECT_EQ(list.body.find("ghost"), std::string::npos) << list.body;
  EXPECT_FALSE(fs::exists(site.root() / "data" / "ghost-0"));
  for (const auto& e : fs::directory_iterator(site.root() / "data"))
    EXPECT_EQ(e.path().filename().string().find("ghost"), std::string::npos) << e.path();
  // Appends still create it, and then it reads.
  EXPECT_EQ(curl("--data-binary x '" + site.url("/topics/ghost/partitions/0/records") + "'").status, 201);
  EXPECT_NE(curl("'" + site.url("/topics") + "'").body.find("{\"name\":\"ghost\",\"partitions\":1}"),
            std::string::npos);
  EXPECT_TRUE(fs::is_directory(site.root() / "data" / "ghost-0"));
  EXPECT_EQ(curl("'" + site.url("/topics/ghost/partitions/0/records") + "'").status, 200);
  p.signal(SIGTERM);
  EXPECT_EQ(p.wait(), 0) << p.output();
}

// Sends `request` on a new connection to 127.0.0.1:port and returns all it gets until the server
// closes (or 5 s pass without a byte).
std::string raw_exchange(int port, const std::string& request) {
  std::string got;
  const int s = connect_to(port);
  if (s < 0) return got;
  if (::write(s, request.data(), request.size()) == static_cast<ssize_t>(request.size())) {
    char buf[4096];
    for (ssize_t n; (n = ::read(s, buf, sizeof buf)) > 0;) got.append(buf, static_cast<std::size_t>(n));
  }
  ::close(s);
  return got;
}

// A Content-Length over the server's max_body_bytes (8 MiB by default) is refused before the
// body is read; on a storage route the answer is the API's JSON error, on the others the
// server's plain text as before. Either way the connection closes after the answer.
TEST(AppE2E, StorageBodyOverMaxBodyBytesIsJson413) {
  Site site;
  site.write_conf();
  Process p({"-c", site.conf()});
  REQUIRE_BINARY(p);
  ASSERT_TRUE(p.wait_for(kReady)) << p.output();
  const std::string big = "Content-Length: " + std::to_string((8 << 20) + 1) + "\r\n";
  std::string r = raw_exchange(site.http,
                               "POST /topics/big/partitions/0/records HTTP/1.1\r\nHost: x\r\n"
                               "Content-Type: application/octet-stream\r\n" +
                                   big + "\r\nfirst bytes");
  EXPECT_EQ(r.rfind("HTTP/1.1 413 ", 0), 0u) << r;
  EXPECT_NE(r.find("\r\nContent-Type: application/json\r\n"), std::string::npos) << r;
  EXPECT_NE(r.find("\r\nConnection: close\r\n"), std::string::npos) << r;
  const auto body_at = r.find("\r\n\r\n");
  ASSERT_NE(body_at, std::string::npos) << r;
  const std::string body = r.substr(body_at + 4);
  EXPECT_EQ(body.rfind("{\"error\":\"", 0), 0u) << body;
  EXPECT_NE(body.find("max_body_bytes"), std::string::npos) << body;
  EXPECT_EQ(body.substr(body.size() - 3), "\"}\n") << body;
  // A GET of the topic list with such a body: the same JSON answer.
  r = raw_exchange(site.http, "GET /topics HTTP/1.1\r\nHost: x\r\n" + big + "\r\n");
  EXPECT_EQ(r.rfind("HTTP/1.1 413 ", 0), 0u) << r;
  EXPECT_NE(r.find("{\"error\":"), std::string::npos) << r;
  // Other routes keep the server's plain-text 413.
  r = raw_exchange(site.http, "GET /healthz HTTP/1.1\r\nHost: x\r\n" + big + "\r\n");
  EXPECT_EQ(r.rfind("HTTP/1.1 413 ", 0), 0u) << r;
  EXPECT_NE(r.find("\r\nContent-Type: text/plain; charset=utf-8\r\n"), std::string::npos) << r;
  EXPECT_NE(r.find("Content-Length over the limit"), std::string::npos) << r;
  // Nothing was appended or created, and the server serves on.
  EXPECT_EQ(curl("'" + site.url("/topics") + "'").body, "{\"topics\":[]}\n");
  EXPECT_EQ(curl("'" + site.url("/healthz") + "'").status, 200);
  p.signal(SIGTERM);
  EXPECT_EQ(p.wait(), 0) << p.output();
}

// The per-server keys max_keepalive_requests and write_timeout reach the HTTP server: with
// max_keepalive_requests: 2, three requests pipelined on one connection get two answers, the
// second saying Connection: close, and then the connection ends.
TEST(AppE2E, MaxKeepaliveRequestsClosesAConnectionAfterThatMany) {
  TempConf conf;
  const int port = free_port();
  conf.write("server.yml",
             "scheduler: {threads: 1}\n"
             "storage: {data_dir: " +
                 conf.path() +
                 "/data}\n"
                 "servers:\n"
                 "  - name: web\n"
                 "    type: http\n"
                 "    listen: ['127.0.0.1:" +
                 std::to_string(port) +
                 "']\n"
                 "    max_keepalive_requests: 2\n"
                 "    write_timeout: 5s\n"
                 "    routes:\n"
                 "      - {path: /healthz, type: health}\n");
  Process p({"-c", conf.path()});
  REQUIRE_BINARY(p);
  ASSERT_TRUE(p.wait_for(kReady)) << p.output();
  const std::string get = "GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n";
  const std::string r = raw_exchange(port, get + get + get);
  size_t answers = 0, closes = 0;
  for (size_t at = 0; (at = r.find("HTTP/1.1 200 ", at)) != std::string::npos; ++at) ++answers;
  for (size_t at = 0; (at = r.find("\r\nConnection: close\r\n", at)) != std::string::npos; ++at) ++closes;
  EXPECT_EQ(answers, 2u) << r;
  EXPECT_EQ(closes, 1u) << r;
  EXPECT_GT(r.rfind("\r\nConnection: close\r\n"), r.rfind("HTTP/1.1 200 ")) << r;
  p.signal(SIGTERM);
  EXPECT_EQ(p.wait(), 0) << p.output();
}

struct BrokenConf {
  const char* yaml;
  const char* expect;  // part of the message
};
class AppE2ECheck : public ::testing::TestWithParam<BrokenConf> {};

TEST_P(AppE2ECheck, CheckRejectsNamingTheKey) {
  TempConf conf;
  conf.write("server.yml", GetParam().yaml);
  Process p({"-c", conf.path(), "--check"});
  REQUIRE_BINARY(p);
  EXPECT_EQ(p.wait(20s), 1) << p.output();
  EXPECT_NE(p.output().find(GetParam().expect), std::string::npos) << p.output();
}

INSTANTIATE_TEST_SUITE_P(
    Broken, AppE2ECheck,
    ::testing::Values(
        BrokenConf{"scheduler: {threads: many}\n", "scheduler.threads"},
        BrokenConf{"scheduler: {threads: 5000}\n", "scheduler.threads"},
        BrokenConf{"servers: [{name: a, type: gopher, listen: ['127.0.0.1:1']}]\n", "unknown server type 'gopher'"},
        BrokenConf{"servers: [{name: a, type: http, listen: ['127.0.0.1:9']}, {name: b, type: echo, listen: "
                   "['127.0.0.1:9']}]\n",
                   "servers[1].listen[0]"},
        BrokenConf{"servers: [{name: a, type: http, listen: ['127.0.0.1:9'], max_connections: 0}]\n",
                   "max_connections"},
        BrokenConf{"storage: {flush: {policy: sometimes}}\n", "storage.flush.policy"}),
    [](const ::testing::TestParamInfo<BrokenConf>& i) { return "case" + std::to_string(i.index); });

TEST(AppE2E, SighupReopensTheLogFile) {
  Site site;
  const std::string log = (site.root() / "lionet.log").string();
  site.write_conf();
  std::ofstream(site.root() / "conf" / "log.yml")
      << "log:\n  loggers:\n    - name: root\n      level: info\n      flush_level: info\n      sinks:\n"
      << "        - {type: rotating_file, path: " << log << ", max_size: 10000000, max_files: 2}\n";
  Process p({"-c", site.conf()});
  REQUIRE_BINARY(p);
  for (int i = 0; i < 200 && file_bytes(log).find(kReady) == std::string::npos; ++i) std::this_thread::sleep_for(50ms);
  ASSERT_NE(file_bytes(log).find(kReady), std::string::npos) << file_bytes(log) << p.output();
  fs::rename(log, log + ".moved");  // what logrotate does
  p.signal(SIGHUP);
  for (int i = 0; i < 200 && file_bytes(log).find("log files reopened") == std::string::npos; ++i)
    std::this_thread::sleep_for(50ms);
  EXPECT_NE(file_bytes(log).find("log files reopened"), std::string::npos) << p.output();
  p.signal(SIGTERM);
  EXPECT_EQ(p.wait(), 0) << p.output();
}
}  // namespace
}  // namespace lionet::app

namespace lionet::app {
namespace {
using namespace lionet::app::testing;
using namespace std::chrono_literals;

// A pool whose fiber stacks are exhausted (workers.<pool>.max_stack_memory) by a flood of idle
// connections: the excess is closed and logged, the process stays up, the health route on
// another pool answers throughout, /metrics shows the stacks and the closed connections, and
// once the flood leaves, the flooded server serves again.
TEST(AppE2E, StackBudgetExhaustedByAFloodLeavesHealthServing) {
  TempConf dir;
  const int echo = free_port(), admin = free_port();
  constexpr long kStride = 128 * 1024 + 4096;  // default stack_size plus its guard page
  constexpr int kBudget = 30;  // fibers of the 'conns' pool: the acceptor + 29
  dir.write("server.yml",
            "scheduler: {threads: 1}\n"
            "workers: {conns: {threads: 1, max_stack_memory: " +
                std::to_string(kBudget * kStride) +
                "}}\n"
                "servers:\n"
                "  - name: edge\n    type: echo\n    workers: conns\n"
                "    listen: ['127.0.0.1:" +
                std::to_string(echo) +
                "']\n"
                "  - name: admin\n    type: http\n    listen: ['127.0.0.1:" +
                std::to_string(admin) +
                "']\n"
                "    routes:\n"
                "      - {path: /healthz, type: health}\n"
                "      - {path: /metrics, type: metrics}\n");
  Process p({"-c", dir.path()});
  ASSERT_TRUE(p.started());
  ASSERT_TRUE(p.wait_for(kReady)) << p.output();
  const std::string health = "http://127.0.0.1:" + std::to_string(admin) + "/healthz";

  std::vector<int> flood;
  for (int i = 0; i < 100; ++i) {
    const int s = connect_to(echo);
    ASSERT_GE(s, 0);
    flood.push_back(s);
  }
  EXPECT_TRUE(p.wait_for("edge: no fiber for a new connection, closed it", 10s)) << p.output();
  EXPECT_EQ(curl(health).status, 200) << "health route not served while the flood holds the stacks";
  // The excess connections were closed by the server: their reads see end of stream (polled
  // together, bounded; the served ones stay open and silent).
  int closed = 0;
  std::vector<pollfd> pfs;
  for (int s : flood) pfs.push_back(pollfd{s, POLLIN, 0});
  for (auto until = std::chrono::steady_clock::now() + 10s; std::chrono::steady_clock::now() < until;) {
    if (::poll(pfs.data(), pfs.size(), 100) <= 0) {
      if (closed >= 100 - kBudget) break;  // nothing more arrives
      continue;
    }
    for (auto& pf : pfs) {
      if (pf.fd >= 0 && (pf.revents & (POLLIN | POLLHUP | POLLERR))) {
        char c;
        if (::read(pf.fd, &c, 1) <= 0) ++closed;
        pf.fd = -pf.fd - 1;  // stop watching it (poll ignores negative fds)
      }
    }
  }
  // The pool holds its acceptor and the connections it serves: the rest were closed.
  EXPECT_GE(closed, 100 - kBudget + 1);
  EXPECT_LE(closed, 100 - kBudget + 5);
  auto m = curl("http://127.0.0.1:" + std::to_string(admin) + "/metrics");
  EXPECT_EQ(m.status, 200);
  EXPECT_EQ(metric(m.body, "lionet_connections_no_fiber_total{server=\"edge\",type=\"echo\"}"), closed) << m.body;
  EXPECT_GE(metric(m.body, "lionet_fiber_stacks_mapped{pool=\"conns\"}"), kBudget) << m.body;
  EXPECT_GT(metric(m.body, "lionet_fiber_stack_reserved_bytes{pool=\"conns\"}"), 0) << m.body;
  EXPECT_GE(metric(m.body, "lionet_fiber_stacks_cached{pool=\"main\"}"), 0) << m.body;

  for (int s : flood) ::close(s);
  // The flood's fibers end; the flooded server serves a new client again.
  std::string got;
  for (int i = 0; i < 100 && got != "again"; ++i) {
    got = echo_roundtrip(echo, "again");
    if (got != "again") std::this_thread::sleep_for(50ms);
  }
  EXPECT_EQ(got, "again");
  EXPECT_EQ(curl(health).status, 200);
  p.signal(SIGTERM);
  EXPECT_EQ(p.wait(), 0) << p.output();
}
}  // namespace
}  // namespace lionet::app
