// The lionet binary's `kafka` server with `tls:` and `sasl:`: kcat over SASL_SSL (SCRAM-SHA-256
// and PLAIN) produces and consumes, a user's permissions (`sasl.acls`) refuse another topic
// with "Topic authorization failed", /metrics counts the authentications and the refusals;
// `--check` refuses a users file readable by others (naming the file), a missing one, an
// unknown mechanism, SASL without TLS unless allow_plaintext_sasl, sasl on a non-kafka server
// and a bad ACL pattern.
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <string>

#include "app_process.h"

namespace lionet::app {
namespace {
using namespace lionet::app::testing;

std::string users_file(TempConf& conf, mode_t mode) {
  conf.write("kafka-users.txt", "# test users\nalice:alice-secret\nbob:bob-secret\n");
  const std::string path = conf.path() + "/kafka-users.txt";
  ::chmod(path.c_str(), mode);
  return path;
}

TEST(AppKafkaSasl, CheckRefusesUnsafeOrBrokenSaslSettings) {
  struct Case {
    std::string server;
    mode_t mode;
    std::string expect;  // "" = accepted
  };
  for (const Case& c : std::initializer_list<Case>{
           {"tls: {cert: c.pem, key: k.pem}, sasl: {mechanisms: [SCRAM-SHA-256, SCRAM-SHA-512, PLAIN], users: USERS}",
            0600, ""},
           {"sasl: {users: USERS, allow_plaintext_sasl: true}", 0600, ""},
           {"tls: {cert: c.pem, key: k.pem}, sasl: {users: USERS}", 0644,
            "kafka-users.txt is mode 0644: it holds passwords and must be readable by its owner only"},
           {"tls: {cert: c.pem, key: k.pem}, sasl: {users: USERS.missing}", 0600, "cannot open"},
           {"tls: {cert: c.pem, key: k.pem}, sasl: {mechanisms: [GSSAPI], users: USERS}", 0600,
            "unknown SASL mechanism 'GSSAPI'"},
           {"sasl: {users: USERS}", 0600, "servers[0].sasl: SASL without tls"},
           {"tls: {cert: c.pem, key: k.pem}, sasl: {users: USERS, acls: {alice: {produce: ['a*b']}}}", 0600,
            "a pattern is a name"},
       }) {
    TempConf conf;
    std::string server = c.server;
    const std::string users = users_file(conf, c.mode);
    server.replace(server.find("USERS"), 5, users);
    conf.write("server.yml", "servers:\n  - {name: k, type: kafka, listen: ['127.0.0.1:9092'], " + server + "}\n");
    Process p({"-c", conf.path(), "--check"});
    REQUIRE_BINARY(p);
    EXPECT_EQ(p.wait(), c.expect.empty() ? 0 : 1) << server << "\n" << p.output();
    if (!c.expect.empty()) {
      EXPECT_NE(p.output().find(c.expect), std::string::npos) << server << "\n" << p.output();
    }
    if (c.mode == 0644) {
      EXPECT_NE(p.output().find(users), std::string::npos) << p.output();
    }
  }
  TempConf conf;
  const std::string users = users_file(conf, 0600);
  conf.write("server.yml", "servers:\n  - {name: w, type: http, listen: ['127.0.0.1:9092'], sasl: {users: " + users +
                               ", allow_plaintext_sasl: true}}\n");
  Process p({"-c", conf.path(), "--check"});
  REQUIRE_BINARY(p);
  EXPECT_EQ(p.wait(), 1);
  EXPECT_NE(p.output().find("servers[0].sasl: only a kafka server takes a sasl section"), std::string::npos)
      << p.output();
}

TEST(AppKafkaSasl, KcatOverSaslSslWithPermissions) {
  ASSERT_EQ(sh("kcat -V >/dev/null 2>&1 && echo yes"), "yes\n") << "kcat is missing: run scripts/install-deps.sh";
  TempConf conf;
  const std::string users = users_file(conf, 0600);
  const std::string cert = conf.path() + "/cert.pem", key = conf.path() + "/key.pem";
  int rc = -1;
  sh("openssl req -x509 -newkey rsa:2048 -nodes -keyout " + key + " -out " + cert +
         " -days 2 -subj /CN=localhost -addext subjectAltName=DNS:localhost,IP:127.0.0.1 2>&1",
     &rc);
  ASSERT_EQ(rc, 0);
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
                 "    routes: [{path: /metrics, type: metrics}]\n"
                 "  - name: k\n    type: kafka\n    listen: ['127.0.0.1:" +
                 std::to_string(port) + "']\n    tls: {cert: " + cert + ", key: " + key +
                 "}\n"
                 "    sasl:\n      mechanisms: [SCRAM-SHA-256, PLAIN]\n      users: " +
                 users +
                 "\n      acls:\n        alice: {produce: ['*'], consume: ['*'], groups: ['*']}\n"
                 "        bob: {produce: [bob-topic], consume: ['bob*'], groups: []}\n");
  Process p({"-c", conf.path()});
  REQUIRE_BINARY(p);
  ASSERT_TRUE(p.wait_for(kReady)) << p.output();
  EXPECT_EQ(p.output().find("alice-secret"), std::string::npos);  // never logged
  auto kcat = [&](const std::string& mech, const std::string& user, const std::string& pw) {
    return "timeout 30 kcat -b 127.0.0.1:" + std::to_string(port) +
           " -X security.protocol=SASL_SSL -X sasl.mechanisms=" + mech + " -X sasl.username=" + user +
           " -X sasl.password=" + pw + " -X ssl.ca.location=" + cert + " ";
  };
  std::string out =
      sh("printf 'a\\nb\\n' | " + kcat("SCRAM-SHA-256", "alice", "alice-secret") + "-t orders -P 2>&1", &rc);
  ASSERT_EQ(rc, 0) << out;
  out = sh(kcat("PLAIN", "alice", "alice-secret") + "-q -t orders -C -o beginning -e -f '%s@%o\\n' 2>&1", &rc);
  EXPECT_EQ(rc, 0) << out;
  EXPECT_EQ(out, "a@0\nb@1\n");
  out = sh("printf 'x\\n' | " + kcat("SCRAM-SHA-256", "bob", "bob-secret") + "-t orders -P 2>&1", &rc);
  EXPECT_NE(out.find("Topic authorization failed"), std::string::npos) << out;
  out = sh(kcat("SCRAM-SHA-256", "bob", "nope") + "-L -m 2 2>&1", &rc);
  EXPECT_NE(out.find("invalid credentials"), std::string::npos) << out;
  const Curl m = curl("http://127.0.0.1:" + std::to_string(http) + "/metrics");
  EXPECT_NE(
      m.body.find("lionet_kafka_sasl_authentications_total{server=\"k\",mechanism=\"SCRAM-SHA-256\",result=\"ok\"} "),
      std::string::npos)
      << m.body;
  // kcat retries a failed authentication: at least one failure.
  EXPECT_EQ(m.body.find("lionet_kafka_sasl_authentications_total{server=\"k\",mechanism=\"SCRAM-SHA-256\",result="
                        "\"failed\"} 0"),
            std::string::npos)
      << m.body;
  EXPECT_NE(m.body.find("lionet_kafka_sasl_authentications_total{server=\"k\",mechanism=\"PLAIN\",result=\"ok\"} 1"),
            std::string::npos)
      << m.body;
  EXPECT_EQ(m.body.find("lionet_kafka_authorization_failures_total{server=\"k\",resource=\"topic\"} 0"),
            std::string::npos)
      << m.body;
  p.signal(SIGTERM);
  EXPECT_EQ(p.wait(), 0) << p.output();
}

}  // namespace
}  // namespace lionet::app
