// Who may come in (issue 46: address rules, rate limits, connections per address), as users
// see it from curl, wrk and a raw socket against the lionet binary: allow/deny per server and
// per route over IPv4 (source addresses 127.0.0.2, 127.0.0.3: all of 127/8 is loopback on
// Linux) and IPv6 (::1), 403 and its counter; an echo server refusing at accept; at most N
// connections per client address; nginx's limit_req semantics with 429 and Retry-After, by
// address and by an API-key header, and with delay instead of nodelay; --check naming a bad
// rule.
#include <gtest/gtest.h>

#include <chrono>
#include <regex>
#include <string>
#include <thread>

#include "app_process.h"

namespace lionet::app::testing {
namespace {
using namespace std::chrono_literals;

// The value of the first sample whose line starts with `prefix` (-1 if none).
long long access_metric(const std::string& page, const std::string& prefix) {
  for (std::size_t at = page.find(prefix); at != std::string::npos; at = page.find(prefix, at + 1))
    if (at == 0 || page[at - 1] == '\n') return std::atoll(page.c_str() + at + prefix.size());
  return -1;
}

std::string url(int port, const std::string& path, bool v6 = false) {
  return std::string("http://") + (v6 ? "[::1]" : "127.0.0.1") + ":" + std::to_string(port) + path;
}

// The status curl gets from `source` (a local address to connect from).
int status_from(const std::string& source, const std::string& u) {
  return curl("--interface " + source + " " + u).status;
}

// Sends "ping" and returns what comes back: "ping" from a served connection, "" when the
// server closed it (end of stream) or nothing came within 5 s.
std::string echo_once(int fd) {
  if (::send(fd, "ping", 4, MSG_NOSIGNAL) != 4) return "";
  char buf[16];
  std::string got;
  while (got.size() < 4) {
    const ssize_t n = ::recv(fd, buf, sizeof buf, 0);
    if (n <= 0) break;
    got.append(buf, static_cast<std::size_t>(n));
  }
  return got;
}

TEST(AppAccess, AddressRulesPerServerAndPerRouteAnswer403AndAreCounted) {
  TempConf dir;
  const int port = free_port(), port6 = free_port();
  dir.write("server.yml",
            "scheduler: {threads: 1}\n"
            "servers:\n"
            "  - name: web\n    type: http\n"
            "    listen: ['127.0.0.1:" +
                std::to_string(port) + "', '[::1]:" + std::to_string(port6) +
                "']\n"
                "    allow: ['127.0.0.0/30', '::1']\n"  // 127.0.0.0 .. 127.0.0.3 and ::1
                "    deny: ['127.0.0.3']\n"
                "    routes:\n"
                "      - {path: /open, type: health}\n"
                "      - {path: /internal, type: health, deny: ['127.0.0.2']}\n"
                "      - {path: /v4only, type: health, allow: ['127.0.0.0/8']}\n"
                "      - {path: /metrics, type: metrics}\n");
  Process p({"-c", dir.path()});
  REQUIRE_BINARY(p);
  ASSERT_TRUE(p.wait_for("scheduler 'lionet' running")) << p.output();

  EXPECT_EQ(status_from("127.0.0.1", url(port, "/open")), 200);
  EXPECT_EQ(status_from("127.0.0.2", url(port, "/open")), 200);
  EXPECT_EQ(status_from("127.0.0.3", url(port, "/open")), 403);  // the server's deny
  EXPECT_EQ(status_from("127.0.0.4", url(port, "/open")), 403);  // outside the server's allow
  EXPECT_EQ(status_from("127.0.0.3", url(port, "/no-such-route")), 403);  // before routing
  EXPECT_EQ(status_from("127.0.0.1", url(port, "/internal")), 200);
  EXPECT_EQ(status_from("127.0.0.2", url(port, "/internal")), 403);  // the route's deny
  EXPECT_EQ(curl("-g " + url(port6, "/open", true)).status, 200);  // ::1 in the server's allow
  EXPECT_EQ(curl("-g " + url(port6, "/v4only", true)).status, 403);  // the route's allow: IPv4 only
  EXPECT_EQ(status_from("127.0.0.1", url(port, "/v4only")), 200);
  // HTTP/2 takes the same path.
  EXPECT_EQ(curl("--http2-prior-knowledge --interface 127.0.0.2 " + url(port, "/internal")).status, 403);

  Curl m = curl(url(port, "/metrics"));
  ASSERT_EQ(m.status, 200);
  EXPECT_EQ(access_metric(m.body, "lionet_http_access_denied_total{server=\"web\",route=\"\"} "), 3) << m.body;
  EXPECT_EQ(access_metric(m.body, "lionet_http_access_denied_total{server=\"web\",route=\"/internal\"} "), 2) << m.body;
  EXPECT_EQ(access_metric(m.body, "lionet_http_access_denied_total{server=\"web\",route=\"/v4only\"} "), 1) << m.body;
}

TEST(AppAccess, AnEchoServerClosesRefusedAddressesAtAcceptAndLimitsConnectionsPerAddress) {
  TempConf dir;
  const int port = free_port(), web = free_port();
  dir.write("server.yml",
            "scheduler: {threads: 1}\n"
            "servers:\n"
            "  - name: echo\n    type: echo\n    listen: ['127.0.0.1:" +
                std::to_string(port) +
                "']\n"
                "    deny: ['127.0.0.2']\n"
                "    max_connections_per_address: 2\n"
                "  - name: web\n    type: http\n    listen: ['127.0.0.1:" +
                std::to_string(web) +
                "']\n"
                "    routes: [{path: /metrics, type: metrics}]\n");
  Process p({"-c", dir.path()});
  REQUIRE_BINARY(p);
  ASSERT_TRUE(p.wait_for("scheduler 'lionet' running")) << p.output();

  const int refused = connect_to(port, "127.0.0.2");
  ASSERT_GE(refused, 0);
  EXPECT_EQ(echo_once(refused), "");  // closed at accept
  ::close(refused);

  const int a = connect_to(port, "127.0.0.1"), b = connect_to(port, "127.0.0.1");
  EXPECT_EQ(echo_once(a), "ping");
  EXPECT_EQ(echo_once(b), "ping");
  const int third = connect_to(port, "127.0.0.1");  // a third from the same address
  EXPECT_EQ(echo_once(third), "");
  ::close(third);
  const int other = connect_to(port, "127.0.0.3");  // another address still gets in
  EXPECT_EQ(echo_once(other), "ping");
  ::close(a);  // a slot frees once a connection of that address ends
  int again = -1;
  poll_until([&] {
    if (again >= 0) ::close(again);
    again = connect_to(port, "127.0.0.1");
    return echo_once(again) == "ping";
  });
  EXPECT_EQ(echo_once(again), "ping");
  for (int fd : {b, other, again}) ::close(fd);

  Curl m = curl(url(web, "/metrics"));
  EXPECT_EQ(access_metric(m.body, "lionet_connections_denied_total{server=\"echo\",type=\"echo\"} "), 1) << m.body;
  EXPECT_GE(access_metric(m.body, "lionet_connections_per_address_rejected_total{server=\"echo\",type=\"echo\"} "), 1)
      << m.body;
}

// One UDP datagram from `source` to 127.0.0.1:port.
void udp_from(const char* source, int port, const std::string& payload) {
  int s = ::socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  sockaddr_in local{};
  local.sin_family = AF_INET;
  ::inet_pton(AF_INET, source, &local.sin_addr);
  ASSERT_EQ(::bind(s, reinterpret_cast<sockaddr*>(&local), sizeof local), 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(static_cast<uint16_t>(port));
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(::sendto(s, payload.data(), payload.size(), 0, reinterpret_cast<sockaddr*>(&a), sizeof a),
            static_cast<ssize_t>(payload.size()));
  ::close(s);
}

TEST(AppAccess, KafkaAndSyslogRefuseAtAcceptAndDropDeniedDatagrams) {
  TempConf dir;
  const int kafka = free_port(), syslog = free_port(), web = free_port();
  dir.write("server.yml",
            "scheduler: {threads: 1}\n"
            "storage: {data_dir: " +
                dir.path() +
                "/data}\n"
                "servers:\n"
                "  - name: k\n    type: kafka\n    listen: ['127.0.0.1:" +
                std::to_string(kafka) +
                "']\n"
                "    deny: ['127.0.0.2']\n"
                "  - name: s\n    type: syslog\n    listen: ['udp://127.0.0.1:" +
                std::to_string(syslog) +
                "']\n"
                "    allow: ['127.0.0.1']\n"
                "  - name: web\n    type: http\n    listen: ['127.0.0.1:" +
                std::to_string(web) +
                "']\n"
                "    routes: [{path: /metrics, type: metrics}]\n");
  Process p({"-c", dir.path()});
  REQUIRE_BINARY(p);
  ASSERT_TRUE(p.wait_for("scheduler 'lionet' running")) << p.output();

  const int refused = connect_to(kafka, "127.0.0.2");
  ASSERT_GE(refused, 0);
  char c;
  EXPECT_EQ(::recv(refused, &c, 1, 0), 0);  // closed at accept, before any request
  ::close(refused);
  int rc = -1;
  const std::string listing = sh("timeout 20 kcat -L -b 127.0.0.1:" + std::to_string(kafka) + " 2>&1", &rc);
  EXPECT_EQ(rc, 0) << listing;  // 127.0.0.1 is served
  EXPECT_NE(listing.find("1 brokers"), std::string::npos) << listing;

  udp_from("127.0.0.2", syslog, "<13>1 2026-11-29T06:00:00Z h app - - - refused");
  udp_from("127.0.0.1", syslog, "<13>1 2026-11-29T06:00:00Z h app - - - admitted");
  Curl m;
  poll_until([&] {
    m = curl(url(web, "/metrics"));
    return access_metric(m.body, "lionet_syslog_received_total{server=\"s\"} ") >= 1 &&
           access_metric(m.body, "lionet_syslog_denied_total{server=\"s\"} ") >= 1;
  });
  EXPECT_EQ(access_metric(m.body, "lionet_syslog_received_total{server=\"s\"} "), 1) << m.body;
  EXPECT_EQ(access_metric(m.body, "lionet_syslog_denied_total{server=\"s\"} "), 1) << m.body;
  EXPECT_EQ(access_metric(m.body, "lionet_connections_denied_total{server=\"k\",type=\"kafka\"} "), 1) << m.body;
}

TEST(AppAccess, RateLimitHoldsWrkToTheRateWith429AndRetryAfter) {
  TempConf dir;
  const int port = free_port();
  dir.write("server.yml",
            "scheduler: {threads: 1}\n"
            "servers:\n"
            "  - name: web\n    type: http\n    listen: ['127.0.0.1:" +
                std::to_string(port) +
                "']\n"
                "    routes:\n"
                "      - {path: /limited, type: hello, rate_limit: {rate: 50, burst: 10, nodelay: true}}\n"
                "      - {path: /keyed, type: hello, rate_limit: {rate: 0.1, burst: 0, key: 'header:X-Api-Key'}}\n"
                "      - {path: /metrics, type: metrics}\n");
  Process p({"-c", dir.path()});
  REQUIRE_BINARY(p);
  ASSERT_TRUE(p.wait_for("scheduler 'lionet' running")) << p.output();

  // wrk over the limit for 3 s: the 200s are the first request, the burst and 50 a second.
  const auto start = std::chrono::steady_clock::now();
  const std::string out = sh("timeout 30 wrk -t1 -c4 -d3s " + url(port, "/limited") + " 2>&1");
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::smatch total, non2xx;
  ASSERT_TRUE(std::regex_search(out, total, std::regex(R"((\d+) requests in)"))) << out;
  ASSERT_TRUE(std::regex_search(out, non2xx, std::regex(R"(Non-2xx or 3xx responses: (\d+))"))) << out;
  const double ok = std::stod(total[1]) - std::stod(non2xx[1]);
  EXPECT_GT(std::stod(non2xx[1]), 1000) << out;  // wrk asked far more than the limit
  // wrk runs for 3 s of its own clock; the process around it takes a little longer.
  EXPECT_GE(ok, 0.9 * (11 + 50 * 3.0)) << out;
  EXPECT_LE(ok, 1.1 * (11 + 50 * secs)) << out;

  // Keyed by an API key: each key has its own bucket (one request per 10 s, no burst).
  EXPECT_EQ(curl("-H 'X-Api-Key: alpha' " + url(port, "/keyed")).status, 200);
  const std::string head = sh("curl -sS -o /dev/null -D - --max-time 10 -H 'X-Api-Key: alpha' " + url(port, "/keyed"));
  EXPECT_NE(head.find("HTTP/1.1 429"), std::string::npos) << head;
  EXPECT_TRUE(std::regex_search(head, std::regex("Retry-After: (9|10)\r\n"))) << head;
  EXPECT_EQ(curl("-H 'X-Api-Key: beta' " + url(port, "/keyed")).status, 200);

  Curl m = curl(url(port, "/metrics"));
  // wrk does not count the answers still in flight when it stops (at most one per connection).
  const long long limited = access_metric(m.body, "lionet_http_rate_limited_total{server=\"web\",route=\"/limited\"} ");
  EXPECT_GE(limited, std::stoll(non2xx[1])) << m.body;
  EXPECT_LE(limited, std::stoll(non2xx[1]) + 4) << m.body;
  EXPECT_EQ(access_metric(m.body, "lionet_http_rate_limited_total{server=\"web\",route=\"/keyed\"} "), 1) << m.body;
}

TEST(AppAccess, WithoutNodelayTheBurstIsServedLateInsteadOfRefused) {
  TempConf dir;
  const int port = free_port();
  dir.write("server.yml",
            "scheduler: {threads: 1}\n"
            "servers:\n"
            "  - name: web\n    type: http\n    listen: ['127.0.0.1:" +
                std::to_string(port) +
                "']\n"
                "    routes: [{path: /slow, type: hello, rate_limit: {rate: 10, burst: 5}}]\n");
  Process p({"-c", dir.path()});
  REQUIRE_BINARY(p);
  ASSERT_TRUE(p.wait_for("scheduler 'lionet' running")) << p.output();
  // Six at once: the first at once, five queued 100 ms apart; a seventh would be refused.
  const auto start = std::chrono::steady_clock::now();
  const std::string codes = sh("for i in 1 2 3 4 5 6; do curl -s -o /dev/null -w '%{http_code}\\n' --max-time 10 " +
                               url(port, "/slow") + " & done; wait");
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_EQ(codes, "200\n200\n200\n200\n200\n200\n");
  EXPECT_GE(secs, 0.45);  // the last waited 5 x 100 ms (a lower bound: never flaky under load)
}

TEST(AppAccess, CheckNamesABadRule) {
  TempConf dir;
  dir.write("server.yml",
            "servers:\n  - name: web\n    type: http\n    listen: ['127.0.0.1:1']\n"
            "    routes: [{path: /, type: hello, allow: ['10.0.0.1/8']}]\n");
  Process p({"--check", "-c", dir.path()});
  REQUIRE_BINARY(p);
  EXPECT_NE(p.wait(), 0);
  EXPECT_NE(p.output().find("servers[0].routes[0].allow"), std::string::npos) << p.output();
  EXPECT_NE(p.output().find("'10.0.0.1/8': host bits set after the /8 prefix"), std::string::npos) << p.output();
}

}  // namespace
}  // namespace lionet::app::testing
