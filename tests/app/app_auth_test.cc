// HTTP authentication in the lionet binary (routes' `auth:`, http/auth.h), with curl:
//  - Basic against an `htpasswd -B` file made here: right password 200, wrong 401, none 401
//    with the realm; the file changed and SIGHUP: the old password is refused, the new passes;
//    the brute-force brake (429 + Retry-After); the access log holds neither password, token
//    nor Authorization value, nor do the error log and the fiber dumps (the route and
//    SIGQUIT's); /metrics counts successes, failures and brake refusals.
//  - Bearer tokens on a storage route (its several routes behind one check).
//  - `watch: true` reloads a changed token file.
//  - A required TLS client certificate (a CA and certificates made here with openssl) over
//    HTTP/1.1 and HTTP/2: the listed subject 200, another 403, none 403.
//  - --check refuses a bcrypt-less htpasswd (naming file:line), an unreadable file, an unknown
//    auth kind and client_cert on a plain http server.
// A missing tool (curl, htpasswd, openssl) fails the test: it is never skipped.
#include <gtest/gtest.h>

#include <chrono>
#include <fstream>
#include <regex>
#include <string>
#include <thread>

#include "app_process.h"

namespace lionet::app::testing {
namespace {
using namespace std::chrono_literals;

void require_tool(const char* tool) {
  int rc = -1;
  sh(std::string("command -v ") + tool + " >/dev/null", &rc);
  ASSERT_EQ(rc, 0) << tool << " is not installed (scripts/install-deps.sh installs it)";
}

// "<status> <header value>" of a request (the named response header, "" if absent).
std::string status_and(const std::string& args, const std::string& header) {
  const std::string out = sh("curl -sS --max-time 10 -o /dev/null -D - " + args + " 2>&1");
  std::smatch m;
  std::string status = std::regex_search(out, m, std::regex(R"(HTTP/[0-9.]+ (\d{3}))")) ? m[1].str() : "?";
  if (std::regex_search(out, m, std::regex("\r\n" + header + ": ([^\r]*)\r\n", std::regex::icase)))
    status += " " + m[1].str();
  return status;
}

uint64_t auth_metric(const std::string& page, const std::string& sample) {
  const auto p = page.find(sample + " ");
  return p == std::string::npos ? 0 : std::stoull(page.substr(p + sample.size() + 1));
}

TEST(AppAuth, BasicBearerBrakeReloadAndNothingSecretInTheAccessLog) {
  require_tool("curl");
  require_tool("htpasswd");
  TempConf conf;
  const std::string d = conf.path();
  int rc = -1;
  sh("htpasswd -cbB -C 4 " + d + "/users.htpasswd alice 'open sesame' 2>&1", &rc);
  ASSERT_EQ(rc, 0);
  ASSERT_TRUE(file_bytes(d + "/users.htpasswd").starts_with("alice:$2y$04$")) << file_bytes(d + "/users.htpasswd");
  conf.write("tokens.txt", "# API tokens\ntok-Alpha.1\n");
  fs::create_directories(d + "/www");
  conf.write("www/index.html", "private page\n");
  const int http = free_port();
  const std::string log = d + "/access.log";
  conf.write("server.yml",
             "scheduler: {threads: 2}\n"
             "storage: {data_dir: " +
                 d +
                 "/data}\n"
                 "servers:\n"
                 "  - name: web\n    type: http\n    listen: ['127.0.0.1:" +
                 std::to_string(http) +
                 "']\n"
                 "    access_log: {path: " +
                 log +
                 ", flush_interval: 20ms}\n"
                 "    routes:\n"
                 "      - {path: /private, type: static, root: " +
                 d +
                 "/www, auth: {basic: {realm: "
                 "lionet, htpasswd: " +
                 d +
                 "/users.htpasswd}, max_failures: 3, block_for: 30s}}\n"
                 "      - {path: /api, type: storage, auth: {bearer: {tokens: " +
                 d +
                 "/tokens.txt}}}\n"
                 "      - {path: /metrics, type: metrics}\n"
                 "      - {path: /debug/fibers, type: debug_fibers}\n");
  Process p({"-c", d});
  REQUIRE_BINARY(p);
  ASSERT_TRUE(p.wait_for("scheduler 'lionet' running")) << p.output();
  const std::string base = "http://127.0.0.1:" + std::to_string(http);

  // Basic.
  EXPECT_EQ(status_and(base + "/private/", "WWW-Authenticate"), "401 Basic realm=\"lionet\", charset=\"UTF-8\"");
  EXPECT_EQ(status_and("-u 'alice:wrong' " + base + "/private/", "WWW-Authenticate"),
            "401 Basic realm=\"lionet\", charset=\"UTF-8\"");
  Curl c = curl("-u 'alice:open sesame' " + base + "/private/");
  EXPECT_EQ(c.status, 200);
  EXPECT_EQ(c.body, "private page\n");
  EXPECT_EQ(curl("-u 'alice:open sesame' " + base + "/private/?again=1").status, 200);  // the cache
  EXPECT_EQ(curl("-u 'alice:open sesame' --http2-prior-knowledge " + base + "/private/").status, 200);  // h2c

  // Bearer, on the storage route's several routes.
  EXPECT_EQ(status_and(base + "/api", "WWW-Authenticate"), "401 Bearer realm=\"lionet\"");
  EXPECT_EQ(status_and("-H 'Authorization: Bearer nope' " + base + "/api", "WWW-Authenticate"),
            "401 Bearer realm=\"lionet\", error=\"invalid_token\"");
  c = curl("-H 'Authorization: Bearer tok-Alpha.1' -X POST --data-binary 'v1' " + base +
           "/api/t1/partitions/0/records");
  EXPECT_EQ(c.status, 201) << c.body;
  c = curl("-H 'Authorization: Bearer tok-Alpha.1' '" + base + "/api/t1/partitions/0/records?offset=0'");
  EXPECT_EQ(c.status, 200) << c.body;
  EXPECT_NE(c.body.find("\"value\":\"v1\""), std::string::npos) << c.body;

  // SIGHUP after a password change: the old one (cached) is refused, the new one passes.
  sh("htpasswd -bB -C 4 " + d + "/users.htpasswd alice 'new-Pass' 2>&1", &rc);
  ASSERT_EQ(rc, 0);
  std::size_t at = p.output().size();
  p.signal(SIGHUP);
  ASSERT_TRUE(p.wait_for("SIGHUP: credentials reloaded for 2 route(s)", 20s, at)) << p.output();
  EXPECT_EQ(curl("-u 'alice:open sesame' " + base + "/private/").status, 401);
  EXPECT_EQ(curl("-u 'alice:new-Pass' " + base + "/private/").status, 200);

  // A broken file on SIGHUP keeps the running credentials and says why (file:line).
  conf.write("users.htpasswd", "alice:$apr1$abc$def\n");
  at = p.output().size();
  p.signal(SIGHUP);
  ASSERT_TRUE(
      p.wait_for("credentials not reloaded, keeping the running ones: " + d + "/users.htpasswd:1: MD5-crypt", 20s, at))
      << p.output();
  EXPECT_EQ(curl("-u 'alice:new-Pass' " + base + "/private/").status, 200);

  // The brake: three wrong passwords, then 429 with Retry-After, even for the right one.
  for (int i = 0; i < 3; ++i)
    EXPECT_EQ(curl("-u 'alice:guess" + std::to_string(i) + "' " + base + "/private/").status, 401);
  EXPECT_EQ(status_and("-u 'alice:new-Pass' " + base + "/private/", "Retry-After"), "429 30");
  // Bearer has its own brake (per route): the token still passes.
  EXPECT_EQ(curl("-H 'Authorization: Bearer tok-Alpha.1' " + base + "/api").status, 200);

  c = curl(base + "/metrics");
  const std::string l = "{server=\"web\",route=\"/private\",result=";
  EXPECT_EQ(auth_metric(c.body, "lionet_http_auth_total" + l + "\"success\"}"), 5u) << c.body;
  EXPECT_EQ(auth_metric(c.body, "lionet_http_auth_total" + l + "\"failure\"}"), 6u) << c.body;
  EXPECT_EQ(auth_metric(c.body, "lionet_http_auth_total" + l + "\"braked\"}"), 1u) << c.body;
  EXPECT_EQ(auth_metric(c.body, "lionet_http_auth_total{server=\"web\",route=\"/api\",result=\"success\"}"), 3u)
      << c.body;

  // The access log: the requests are there, no credential is.
  ASSERT_TRUE(poll_until([&] { return file_bytes(log).find("GET /metrics") != std::string::npos; })) << p.output();
  // The fiber dumps (the route, and SIGQUIT's on stderr, which p.output() holds).
  const std::string dump = curl(base + "/debug/fibers").body;
  EXPECT_NE(dump.find("fiber"), std::string::npos) << dump;
  at = p.output().size();
  p.signal(SIGQUIT);
  ASSERT_TRUE(p.wait_for("SIGQUIT: fiber dump", 20s, at)) << p.output();
  const std::string text = file_bytes(log) + dump + p.output();
  EXPECT_NE(file_bytes(log).find("\"GET /private/?again=1 HTTP/1.1\" 200"), std::string::npos) << file_bytes(log);
  for (const char* secret : {"open sesame", "open%20sesame", "new-Pass", "guess", "tok-Alpha", "Authorization",
                             "YWxpY2U6b3BlbiBzZXNhbWU=", "alice:"})
    EXPECT_EQ(text.find(secret), std::string::npos) << secret << " appears in\n" << text;
  p.signal(SIGTERM);
  EXPECT_EQ(p.wait(), 0) << p.output();
}

TEST(AppAuth, WatchReloadsAChangedTokenFile) {
  require_tool("curl");
  TempConf conf;
  const std::string d = conf.path();
  conf.write("tokens.txt", "first-token\n");
  const int http = free_port();
  conf.write("server.yml",
             "watch: true\nservers:\n  - name: web\n    type: http\n    listen: ['127.0.0.1:" + std::to_string(http) +
                 "']\n    routes:\n      - {path: /h, type: hello, auth: "
                 "{bearer: {tokens: " +
                 d + "/tokens.txt}}}\n");
  Process p({"-c", d});
  REQUIRE_BINARY(p);
  ASSERT_TRUE(p.wait_for("scheduler 'lionet' running")) << p.output();
  const std::string url = "http://127.0.0.1:" + std::to_string(http) + "/h";
  EXPECT_EQ(curl("-H 'Authorization: Bearer first-token' " + url).status, 200);
  const std::size_t at = p.output().size();
  // The digest form: the file need not hold the token.
  conf.write("tokens.txt", "sha256:" + sh("printf %s second-token | sha256sum | cut -c1-64"));
  ASSERT_TRUE(p.wait_for("credentials reloaded from " + d + "/tokens.txt", 20s, at)) << p.output();
  EXPECT_EQ(curl("-H 'Authorization: Bearer first-token' " + url).status, 401);
  EXPECT_EQ(curl("-H 'Authorization: Bearer second-token' " + url).status, 200);
  p.signal(SIGTERM);
  EXPECT_EQ(p.wait(), 0) << p.output();
}

TEST(AppAuth, RequiredClientCertificateOverHttp1AndHttp2) {
  require_tool("curl");
  require_tool("openssl");
  TempConf conf;
  const std::string d = conf.path();
  int rc = -1;
  auto openssl = [&](const std::string& args) {
    sh("cd " + d + " && openssl " + args + " 2>&1", &rc);
    ASSERT_EQ(rc, 0) << args;
  };
  openssl("req -x509 -newkey rsa:2048 -nodes -keyout ca.key -out ca.pem -days 2 -subj /CN=lionet-test-ca");
  openssl("req -x509 -newkey rsa:2048 -nodes -keyout srv.key -out srv.pem -days 2 -subj /CN=localhost");
  for (const char* cn : {"ops", "other"}) {
    const std::string n = cn;
    openssl("req -newkey rsa:2048 -nodes -keyout " + n + ".key -out " + n + ".csr -subj /CN=" + n);
    openssl("x509 -req -in " + n + ".csr -CA ca.pem -CAkey ca.key -CAcreateserial -out " + n + ".pem -days 2");
  }
  const int https = free_port();
  conf.write("server.yml", "servers:\n  - name: tls\n    type: https\n    listen: ['127.0.0.1:" +
                               std::to_string(https) + "']\n    tls: {cert: " + d + "/srv.pem, key: " + d +
                               "/srv.key, verify_client: optional, client_ca: " + d +
                               "/ca.pem}\n"
                               "    routes:\n      - {path: /admin, type: metrics, auth: {client_cert: {subjects: "
                               "[\"CN=ops\"]}}}\n      - {path: /open, type: health}\n");
  Process p({"-c", d});
  REQUIRE_BINARY(p);
  ASSERT_TRUE(p.wait_for("scheduler 'lionet' running")) << p.output();
  const std::string url = " https://127.0.0.1:" + std::to_string(https);
  for (const char* version : {"--http1.1", "--http2"}) {
    const std::string k = std::string("-k ") + version;
    Curl c = curl(k + " --cert " + d + "/ops.pem --key " + d + "/ops.key" + url + "/admin");
    EXPECT_EQ(c.status, 200) << version << c.body;
    EXPECT_NE(c.body.find("lionet_http_auth_total"), std::string::npos) << c.body;
    EXPECT_EQ(curl(k + " --cert " + d + "/other.pem --key " + d + "/other.key" + url + "/admin").status, 403)
        << version;
    EXPECT_EQ(curl(k + url + "/admin").status, 403) << version;
    EXPECT_EQ(curl(k + url + "/open").status, 200) << version;  // optional: other routes need none
  }
  // A certificate from another CA fails the handshake itself.
  openssl("req -x509 -newkey rsa:2048 -nodes -keyout rogue.key -out rogue.pem -days 2 -subj /CN=ops");
  EXPECT_EQ(curl("-k --cert " + d + "/rogue.pem --key " + d + "/rogue.key" + url + "/admin").status, 0);
  p.signal(SIGTERM);
  EXPECT_EQ(p.wait(), 0) << p.output();
}

struct BrokenAuth {
  std::string route;  // the route line, with {d} for the conf directory
  std::string server = "http";
  std::string expect;
};

class AppAuthCheck : public ::testing::TestWithParam<BrokenAuth> {};

TEST_P(AppAuthCheck, CheckRejects) {
  TempConf conf;
  const std::string d = conf.path();
  conf.write("md5.htpasswd", "alice:x\nbob:$apr1$abc$def\n");
  conf.write("tokens.txt", "good\nnot a token\n");
  std::string route = GetParam().route;
  for (std::size_t p; (p = route.find("{d}")) != std::string::npos;) route.replace(p, 3, d);
  std::string expect = GetParam().expect;
  for (std::size_t p; (p = expect.find("{d}")) != std::string::npos;) expect.replace(p, 3, d);
  conf.write("server.yml", "servers:\n  - name: web\n    type: " + GetParam().server +
                               "\n    listen: ['127.0.0.1:1']\n    routes:\n      - " + route + "\n");
  Process p({"-c", d, "--check"});
  REQUIRE_BINARY(p);
  EXPECT_EQ(p.wait(20s), 1) << p.output();
  EXPECT_NE(p.output().find(expect), std::string::npos) << p.output();
}

INSTANTIATE_TEST_SUITE_P(
    Broken, AppAuthCheck,
    ::testing::Values(
        BrokenAuth{"{path: /p, type: hello, auth: {basic: {htpasswd: {d}/md5.htpasswd}}}", "http",
                   "{d}/md5.htpasswd:1: plain-text or DES crypt entries are refused"},
        BrokenAuth{"{path: /p, type: hello, auth: {basic: {htpasswd: {d}/missing}}}", "http",
                   "{d}/missing: No such file or directory"},
        BrokenAuth{"{path: /p, type: hello, auth: {bearer: {tokens: {d}/tokens.txt}}}", "http",
                   "{d}/tokens.txt:2: not a bearer token"},
        BrokenAuth{"{path: /p, type: hello, auth: {digest: {realm: x}}}", "http", "unknown field 'digest'"},
        BrokenAuth{"{path: /p, type: hello, auth: {}}", "http", "exactly one of basic, bearer or client_cert"},
        BrokenAuth{"{path: /p, type: hello, auth: {client_cert: {subjects: [CN=ops]}}}", "http",
                   "client certificates need an https server"}),
    [](const ::testing::TestParamInfo<BrokenAuth>& i) { return "case" + std::to_string(i.index); });

}  // namespace
}  // namespace lionet::app::testing
