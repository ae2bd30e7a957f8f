// tests/app/app_test.cc: the lionet binary as a user runs it (--check, --print-config, bad
// config, bad flags, SIGTERM, SIGHUP reload changing the log at run time), plus the YAML ->
// Options binding itself.
//
// The binary is looked up beside the test binary's build tree (<build>/lionet, <build>/bin/lionet,
// <build>/app/lionet); TEST_LIONET_BINARY overrides (not LIONET_*: those are config overrides).
#include "lionet/app/config_binding.h"
#include "lionet/app/config_reference.h"
#include "lionet/app/self_signed.h"
#include "lionet/app/server_config.h"
#include "tests/app/app_process.h"

#include <gtest/gtest.h>
#include <openssl/pem.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

extern char** environ;

namespace lionet::app {
namespace {
namespace fs = std::filesystem;
using namespace lionet::app::testing;

TEST(AppBinding, ShippedConfYieldsSchedulerOptions) {
  config::Registry r("LIONET_APPTEST_UNUSED_");
  AppConfig c = define_config(r);
  auto report = r.load_dir(kConf);
  EXPECT_TRUE(report.unknown_keys.empty());
  SchedulerOptions o = scheduler_options(c);
  EXPECT_EQ(o.threads, 2);
  EXPECT_EQ(o.name, "lionet");
  EXPECT_EQ(o.local_queue_capacity, 256u);
  EXPECT_EQ(o.stack_size, 131072u);
  EXPECT_EQ(o.stack_cache_per_worker, 64u);
  auto lo = log_options(c);
  ASSERT_EQ(lo.loggers.size(), 1u);
  EXPECT_EQ(lo.loggers[0].name, "root");
  EXPECT_EQ(lo.loggers[0].level, log::Level::kInfo);
  IOManagerOptions io = io_options(c);
  EXPECT_EQ(io.backend, "auto");
  EXPECT_EQ(io.uring_entries, 256u);
  EXPECT_EQ(offload_options(c).threads, 4);
}

// Not a number: the message must not quote int's range as if it were the key's (0..1024).
TEST(AppBinding, NonIntegerThreadsSaysAnIntegerWithoutTheTypesRange) {
  config::Registry r("LIONET_APPTEST_UNUSED_");
  AppConfig c = define_config(r);
  try {
    r.load_string("scheduler:\n  threads: two\n", "inline.yml");
    FAIL() << "scheduler.threads: two was accepted";
  } catch (const config::ConfigError& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("key 'scheduler.threads': expected an integer, got 'two'"), std::string::npos) << m;
    EXPECT_EQ(m.find("2147483647"), std::string::npos) << m;
  }
  try {
    r.load_string("scheduler:\n  threads: 5000\n", "inline.yml");
    FAIL() << "scheduler.threads: 5000 was accepted";
  } catch (const config::ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("1024"), std::string::npos) << e.what();  // the documented range
  }
}

TEST(AppBinding, UnknownIoBackendIsRejectedNamingTheKey) {
  config::Registry r("LIONET_APPTEST_UNUSED_");
  AppConfig c = define_config(r);
  try {
    r.load_string("io:\n  backend: kqueue\n", "inline.yml");
    FAIL() << "io.backend: kqueue was accepted on Linux";
  } catch (const config::ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("io.backend"), std::string::npos) << e.what();
  }
  EXPECT_EQ(io_options(c).backend, "auto");  // nothing changed
}

TEST(AppBinding, LoggerYamlErrorsPointIntoTheList) {
  config::Registry r("LIONET_APPTEST_UNUSED_");
  define_config(r);
  try {
    r.load_string("log:\n  loggers:\n    - name: root\n      level: loud\n", "log.yml");
    FAIL();
  } catch (const config::ConfigError& e) {
    EXPECT_EQ(std::string(e.what()),
              "log.yml:4:14: key 'log.loggers[0].level': expected a log level (trace, debug, info, warn, error, "
              "critical, off), got 'loud'");
  }
}

// Broken `servers:` / `workers:` sections: each is rejected with a message naming the key.
struct BrokenServers {
  const char* yaml;
  const char* expected;  // substring of the error
};
class AppServersRejected : public ::testing::TestWithParam<BrokenServers> {};

TEST_P(AppServersRejected, NamesTheKey) {
  config::Registry r("LIONET_APPTEST_UNUSED_");
  AppConfig c = define_config(r);
  std::string err;
  try {
    r.load_string(GetParam().yaml, "s.yml");
    if (auto e = check_config(c)) err = *e;
  } catch (const config::ConfigError& e) {
    err = e.what();
  }
  EXPECT_NE(err.find(GetParam().expected), std::string::npos) << "error: '" << err << "'\nyaml:\n" << GetParam().yaml;
}

INSTANTIATE_TEST_SUITE_P(
    Broken, AppServersRejected,
    ::testing::Values(
        BrokenServers{"servers:\n  - {type: gopher, listen: ['127.0.0.1:1']}\n",
                      "key 'servers[0].type': unknown server type 'gopher'"},
        BrokenServers{"servers:\n  - {type: http, listen: ['127.0.0.1:1'], max_connections: lots}\n",
                      "key 'servers[0].max_connections'"},
        BrokenServers{"servers:\n  - {type: http, listen: ['127.0.0.1:1'], max_connections: 0}\n",
                      "key 'servers[0].max_connections': must be in 1..1000000"},
        BrokenServers{"servers:\n  - {type: http, listen: ['127.0.0.1:1'], header_timeout: -5ms}\n",
                      "key 'servers[0].header_timeout'"},
        BrokenServers{"servers:\n  - {type: http, listen: ['127.0.0.1:1'], write_timeout: 0ms}\n",
                      "key 'servers[0].write_timeout': must be positive"},
        BrokenServers{"servers:\n  - {type: http, listen: ['127.0.0.1:1'], max_keepalive_requests: -1}\n",
                      "key 'servers[0].max_keepalive_requests'"},
        BrokenServers{"servers:\n  - {type: http, listen: ['localhost']}\n",
                      "servers[0].listen[0]: 'localhost' is not host:port"},
        BrokenServers{"servers:\n  - {name: a, type: http, listen: ['127.0.0.1:9000']}\n"
                      "  - {name: b, type: echo, listen: ['127.0.0.1:9000']}\n",
                      "servers[1].listen[0]: 127.0.0.1:9000 is already used by servers[0] (a)"},
        BrokenServers{"servers:\n  - {type: http, listen: ['127.0.0.1:1'], workers: io}\n",
                      "servers[0].workers: no worker pool named 'io'"},
        BrokenServers{"servers:\n  - {type: https, listen: ['127.0.0.1:1']}\n",
                      "servers[0].tls: an https server needs tls.cert and tls.key"},
        BrokenServers{"servers:\n  - {type: http, listen: ['127.0.0.1:1'], routes: [{path: /, type: static}]}\n",
                      "key 'servers[0].routes[0]': a static route needs a root directory"},
        BrokenServers{"servers:\n  - {type: http, listen: ['127.0.0.1:1'], routes: [{path: /, type: static, root: "
                      "/tmp, mode: mmap}]}\n",
                      "key 'servers[0].routes[0].mode': unknown file mode 'mmap'"},
        BrokenServers{
            "servers:\n  - {type: http, listen: ['127.0.0.1:1'], routes: [{path: /, type: static, root: /tmp, "
            "precompressed: [gzip, deflate]}]}\n",
            "key 'servers[0].routes[0].precompressed': unknown encoding 'deflate' (expected br, gzip or zstd)"},
        BrokenServers{
            "servers:\n  - {type: http, listen: ['127.0.0.1:1'], routes: [{path: /, type: static, root: /tmp, "
            "open_file_cache_valid: 2h}]}\n",
            "key 'servers[0].routes[0].open_file_cache_valid'"},
        BrokenServers{
            "servers:\n  - {type: http, listen: ['127.0.0.1:1'], routes: [{path: /, type: static, root: /tmp, "
            "try_files: ['$uri', '@app']}]}\n",
            "s.yml:2:99: key 'servers[0].routes[0].try_files': no route named 'app' in this server (named: none)"},
        BrokenServers{
            "servers:\n  - type: http\n    listen: ['127.0.0.1:1']\n    routes:\n"
            "      - {name: app, type: hello}\n      - {name: app, path: /h, type: health}\n",
            "s.yml:6:16: key 'servers[0].routes[1].name': 'app' also names routes[0]; route names are unique"},
        BrokenServers{
            "servers:\n  - {type: http, listen: ['127.0.0.1:1'], routes: [{path: /, type: static, root: /tmp, "
            "try_files: ['$uri', '=4O4']}]}\n",
            "key 'servers[0].routes[0].try_files': '=4O4' is not an HTTP status (=200 .. =599)"},
        BrokenServers{
            "servers:\n  - {type: http, listen: ['127.0.0.1:1'], routes: [{path: /, type: static, root: /tmp, "
            "try_files: ['$uri', '=600']}]}\n",
            "'=600' is not an HTTP status"},
        BrokenServers{
            "servers:\n  - {type: http, listen: ['127.0.0.1:1'], routes: [{path: /, type: static, root: /tmp, "
            "try_files: ['=404', '$uri']}]}\n",
            "'=404' may only be the last entry"},
        BrokenServers{
            "servers:\n  - {type: http, listen: ['127.0.0.1:1'], routes: [{path: /, type: static, root: /tmp, "
            "try_files: ['$uri', '/../etc/passwd']}]}\n",
            "key 'servers[0].routes[0].try_files': '/../etc/passwd' has a '.', '..' or empty segment"},
        BrokenServers{"servers:\n  - {type: http, listen: ['127.0.0.1:1'], routes: [{path: /h, type: hello, "
                      "try_files: ['$uri']}]}\n",
                      "key 'servers[0].routes[0].try_files': only a static route takes try_files (this one is hello)"},
        BrokenServers{"servers:\n  - {type: http, listen: ['127.0.0.1:1'], routes: [{type: hello}]}\n",
                      "key 'servers[0].routes[0]': a route needs a path, or a name"},
        BrokenServers{"servers:\n  - {type: http, listen: ['127.0.0.1:1'], routes: [{name: api, type: storage}]}\n",
                      "key 'servers[0].routes[0].name': a storage route cannot be named"},
        BrokenServers{"servers:\n  - type: http\n    listen: ['127.0.0.1:1']\n    routes:\n"
                      "      - {path: /, type: static, root: /tmp, try_files: ['$uri', '@a']}\n"
                      "      - {name: a, type: static, root: /tmp, try_files: ['$uri', '@b']}\n"
                      "      - {name: b, type: static, root: /tmp, try_files: ['$uri', '@a']}\n",
                      "key 'servers[0].routes[1].try_files': a fallback loop: a -> @b -> @a"},
        BrokenServers{"servers:\n  - {type: http, listen: ['127.0.0.1:1'], colour: blue}\n", "colour"},
        BrokenServers{"workers:\n  io: {threads: 2000}\n", "key 'workers.io.threads': must be in 0..1024"},
        BrokenServers{"workers:\n  main: {threads: 2}\n", "'main' is the scheduler.* pool"}));

TEST(AppBinding, NamedPoolsTakeMainDefaultsForWhatTheyLeaveOut) {
  config::Registry r("LIONET_APPTEST_UNUSED_");
  AppConfig c = define_config(r);
  r.load_string(
      "scheduler: {threads: 3}\nfiber: {stack_size: 65536}\nworkers:\n  io: {threads: 1, io_backend: io_uring}\n"
      "servers:\n  - {type: echo, listen: ['127.0.0.1:7'], workers: io}\n",
      "s.yml");
  EXPECT_EQ(check_config(c), std::nullopt);
  EXPECT_EQ(pool_scheduler_options(c, "io").threads, 1);
  EXPECT_EQ(pool_scheduler_options(c, "io").stack_size, 65536u);
  EXPECT_EQ(pool_io_options(c, "io").backend, "io_uring");
  EXPECT_EQ(pool_scheduler_options(c, "main").threads, 3);
  ASSERT_EQ(c.servers->value().size(), 1u);
  EXPECT_EQ(c.servers->value()[0].idle_timeout, std::chrono::milliseconds(60000));
}

TEST(AppBinding, ConfReferenceIsUpToDate) {
  config::Registry r("LIONET_");
  define_config(r);
  std::ifstream in(kConf / "REFERENCE.md");
  ASSERT_TRUE(in) << "conf/REFERENCE.md is missing: run scripts/gen-config-reference.sh";
  std::string committed((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  EXPECT_EQ(committed, config_reference(r)) << "conf/REFERENCE.md is stale: run scripts/gen-config-reference.sh";
  EXPECT_NE(committed.find("| `servers` |"), std::string::npos);
}

TEST(AppSelfSigned, MakesAMatchingPairOnceAndNeverOverwrites) {
  TempConf dir;
  const std::string cert = dir.path() + "/tls/cert.pem", key = dir.path() + "/tls/key.pem";
  ASSERT_EQ(ensure_self_signed(cert, key), "");
  FILE* cf = std::fopen(cert.c_str(), "r");
  FILE* kf = std::fopen(key.c_str(), "r");
  ASSERT_TRUE(cf && kf);
  X509* x = PEM_read_X509(cf, nullptr, nullptr, nullptr);
  EVP_PKEY* k = PEM_read_PrivateKey(kf, nullptr, nullptr, nullptr);
  std::fclose(cf);
  std::fclose(kf);
  ASSERT_TRUE(x && k);
  EXPECT_EQ(X509_check_private_key(x, k), 1);
  EXPECT_EQ(X509_check_host(x, "localhost", 0, 0, nullptr), 1);
  EXPECT_EQ(EVP_PKEY_get_bits(k), 2048);
  X509_free(x);
  EVP_PKEY_free(k);
  EXPECT_EQ(fs::status(key).permissions() & fs::perms::others_read, fs::perms::none);
  const auto before = fs::last_write_time(cert);
  EXPECT_EQ(ensure_self_signed(cert, key), "");  // both exist: untouched
  EXPECT_EQ(fs::last_write_time(cert), before);
  fs::remove(key);
  EXPECT_NE(ensure_self_signed(cert, key).find("only one of"), std::string::npos);
}

TEST(AppBinary, CheckAcceptsTheShippedConf) {
  Process p({"-c", kConf.string(), "--check"});
  REQUIRE_BINARY(p);
  EXPECT_EQ(p.wait(), 0) << p.output();
  EXPECT_NE(p.output().find("configuration OK (3 file(s)"), std::string::npos) << p.output();
}

TEST(AppBinary, CheckRejectsABadValueNamingFileLineColumnAndKey) {
  TempConf conf;
  conf.write("server.yml", "scheduler:\n  threads: 2\nfiber:\n  stack_size: 100\n");
  Process p({"-c", conf.path(), "--check"});
  REQUIRE_BINARY(p);
  EXPECT_EQ(p.wait(), 1);
  EXPECT_NE(
      p.output().find("lionet: invalid configuration: " + conf.path() +
                      "/server.yml:4:15: key 'fiber.stack_size': invalid value: must be in [16384, 67108864], got 100"),
      std::string::npos)
      << p.output();
}

TEST(AppBinary, PrintConfigShowsEffectiveValuesWithDefaults) {
  TempConf conf;
  conf.write("only.yml", "scheduler: {threads: 3}\nnot_a_key: 1\n");
  Process p({"--print-config", "-c", conf.path()});
  REQUIRE_BINARY(p);
  EXPECT_EQ(p.wait(), 0);
  const std::string& out = p.output();
  EXPECT_NE(out.find("  threads: 3\n"), std::string::npos) << out;
  EXPECT_NE(out.find("  stack_size: 131072\n"), std::string::npos) << out;  // a default
  EXPECT_NE(out.find("# Usable stack bytes per fiber"), std::string::npos) << out;
  EXPECT_NE(out.find("unknown config key(s) ignored: not_a_key (" + conf.path() + "/only.yml:2:1)"), std::string::npos)
      << out;
}

// hook.file_* are keys of the binary (they were documented before they were bound): shown by
// --print-config, checked, and they decide where the store's appends run, which /metrics counts.
TEST(AppBinary, HookFileLimitsAreKeysAndDecideWhereAppendsRun) {
  TempConf conf;
  conf.write("bad.yml", "hook: {file_inline_write_max: 100000000}\n");
  Process bad({"-c", conf.path(), "--check"});
  REQUIRE_BINARY(bad);
  EXPECT_EQ(bad.wait(), 1);
  EXPECT_NE(bad.output().find("key 'hook.file_inline_write_max': invalid value"), std::string::npos) << bad.output();

  const int port = free_port();
  conf.write("bad.yml", "hook: {file_inline_write_max: 0}\n");  // every append's write offloaded
  conf.write("server.yml",
             "scheduler: {threads: 1}\n"
             "storage: {data_dir: " +
                 conf.path() +
                 "/data}\n"
                 "servers:\n"
                 "  - name: web\n    type: http\n    listen: ['127.0.0.1:" +
                 std::to_string(port) +
                 "']\n"
                 "    routes:\n"
                 "      - {path: /topics, type: storage}\n"
                 "      - {path: /metrics, type: metrics}\n");
  Process pc({"--print-config", "-c", conf.path()});
  EXPECT_EQ(pc.wait(), 0);
  EXPECT_NE(pc.output().find("  file_inline_write_max: 0\n"), std::string::npos) << pc.output();
  EXPECT_NE(pc.output().find("  file_nowait_max: 262144\n"), std::string::npos) << pc.output();
  EXPECT_NE(pc.output().find("  file_sync_offload: true\n"), std::string::npos) << pc.output();
  EXPECT_EQ(pc.output().find("unknown config key"), std::string::npos) << pc.output();

  Process p({"-c", conf.path()});
  ASSERT_TRUE(p.wait_for("scheduler 'lionet' running")) << p.output();
  const std::string base = "http://127.0.0.1:" + std::to_string(port);
  auto offloaded = [&] {
    const std::string m = curl(base + "/metrics").body;
    const std::string key = "lionet_hook_file_calls_total{path=\"offload\"} ";
    const auto at = m.find(key);
    return at == std::string::npos ? -1.0 : std::atof(m.c_str() + at + key.size());
  };
  const double before = offloaded();
  ASSERT_GE(before, 0) << curl(base + "/metrics").body;
  for (int i = 0; i < 5; ++i)
    EXPECT_EQ(curl("-X POST --data-binary rec " + base + "/topics/t/partitions/0/records").status, 201);
  EXPECT_GE(offloaded(), before + 5) << "appends with file_inline_write_max 0 must run on the offload pool";
  p.signal(SIGTERM);
  EXPECT_EQ(p.wait(), 0) << p.output();
}

TEST(AppBinary, UnknownFlagPrintsUsageAndExits2) {
  Process p({"-c", kConf.string(), "--frobnicate"});
  REQUIRE_BINARY(p);
  EXPECT_EQ(p.wait(), 2);
  EXPECT_NE(p.output().find("unknown argument '--frobnicate'"), std::string::npos);
  EXPECT_NE(p.output().find("usage: lionet [-c"), std::string::npos);
}

TEST(AppBinary, VersionAndADefaultConfWithoutDashC) {
  Process v({"--version"});
  REQUIRE_BINARY(v);
  EXPECT_EQ(v.wait(), 0);
  EXPECT_EQ(v.output().rfind("lionet ", 0), 0u) << v.output();
  EXPECT_NE(v.output().find('.'), std::string::npos) << v.output();
  // No -c, started from the repository: ./conf/ is the shipped one.
  Process c({"--check"}, {}, LIONET_SOURCE_DIR);
  EXPECT_EQ(c.wait(), 0) << c.output();
  EXPECT_NE(c.output().find("configuration OK"), std::string::npos) << c.output();
  EXPECT_NE(c.output().find("from conf/"), std::string::npos) << c.output();
}

// The shipped conf/ as `make run` starts it (from a scratch working directory that sees the
// repository's examples/, so var/ is created there, not in the tree): the page on 8080 links
// to /metrics, echo answers on 8081, HTTPS on 8443 with a certificate generated on first run.
TEST(AppBinary, ShippedConfServesThePageEchoAndHttpsAndStopsOnSigterm) {
  TempConf cwd;
  fs::create_directory_symlink(fs::path(LIONET_SOURCE_DIR) / "examples", fs::path(cwd.path()) / "examples");
  Process p({"-c", kConf.string()}, {}, cwd.path());
  REQUIRE_BINARY(p);
  ASSERT_TRUE(p.wait_for("running with 2 worker(s), io backend epoll")) << p.output();
  // The readiness line is logged from a fiber: it carries a nonzero fiber id.
  EXPECT_EQ(p.output().find(" F0] scheduler 'lionet' running"), std::string::npos) << p.output();
  EXPECT_NE(p.output().find("starting scheduler 'lionet': threads=2 stack_size=131072 stack_cache_per_worker=64 "
                            "local_queue_capacity=256"),
            std::string::npos)
      << p.output();
  auto run = [](const std::string& cmd) {
    std::string out;
    FILE* f = ::popen(cmd.c_str(), "r");
    char buf[4096];
    for (std::size_t n; f && (n = std::fread(buf, 1, sizeof buf, f)) > 0;) out.append(buf, n);
    if (f) ::pclose(f);
    return out;
  };
  const std::string page = run("curl -sS --max-time 10 http://127.0.0.1:8080/");
  EXPECT_NE(page.find("href=\"/metrics\""), std::string::npos) << page;
  EXPECT_NE(run("curl -sS --max-time 10 http://127.0.0.1:8080/metrics").find("lionet_fibers_alive"), std::string::npos);
  // The try_files example: a client-side route of /app is the page, a POST goes to @app (hello).
  EXPECT_EQ(run("curl -sS --max-time 10 http://127.0.0.1:8080/app/users/42"), page);
  EXPECT_EQ(run("curl -sS --max-time 10 -d x=1 http://127.0.0.1:8080/app/users/42"), "hello world");
  const std::string cert = cwd.path() + "/var/tls/cert.pem";
  EXPECT_TRUE(fs::exists(cert));
  EXPECT_NE(run("curl -sS --max-time 10 --cacert " + cert + " https://127.0.0.1:8443/").find("href=\"/metrics\""),
            std::string::npos);
  EXPECT_EQ(run("printf 'hi there' | timeout 5 nc -q 1 127.0.0.1 8081 2>&1"), "hi there");
  // The syslog server on 5514 (UDP) stores into topic syslog, readable on 8080.
  EXPECT_EQ(run("logger -n 127.0.0.1 -P 5514 -d --rfc5424 -t shipped 'hello shipped conf' 2>&1"), "");
  std::string records;
  for (int i = 0; i < 100 && records.find("hello shipped conf") == std::string::npos; ++i) {
    if (i) std::this_thread::sleep_for(std::chrono::milliseconds(50));
    records = run("curl -sS --max-time 10 'http://127.0.0.1:8080/topics/syslog/partitions/0/records?offset=0'");
  }
  EXPECT_NE(records.find("hello shipped conf"), std::string::npos) << records;
  p.signal(SIGTERM);
  EXPECT_EQ(p.wait(), 0) << p.output();
  EXPECT_NE(p.output().find("SIGTERM: stopping"), std::string::npos) << p.output();
}

TEST(AppBinary, SighupReloadChangesTheLogAtRunTime) {
  TempConf conf;
  conf.write("server.yml", "scheduler: {threads: 1}\n");
  conf.write("log.yml", "log:\n  loggers:\n    - name: root\n      level: info\n      pattern: '%l %v'\n");
  Process p({"-c", conf.path()});
  REQUIRE_BINARY(p);
  ASSERT_TRUE(p.wait_for("running with 1 worker(s)")) << p.output();
  // New level (warn) and pattern; scheduler.threads changes too, which logs a warning after
  // the log listener ran (listeners run in key order: log.loggers < scheduler.threads).
  conf.write("server.yml", "scheduler: {threads: 2}\n");
  conf.write("log.yml", "log:\n  loggers:\n    - name: root\n      level: warn\n      pattern: 'RELOADED %l %v'\n");
  p.signal(SIGHUP);
  ASSERT_TRUE(p.wait_for("RELOADED warning scheduler.threads changed")) << p.output();
  p.signal(SIGTERM);
  EXPECT_EQ(p.wait(), 0) << p.output();
  EXPECT_EQ(p.output().find("SIGTERM: stopping"), std::string::npos) << "info lines must be filtered now:\n"
                                                                     << p.output();
}
}  // namespace
}  // namespace lionet::app
