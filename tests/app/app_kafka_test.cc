// The lionet binary's `kafka` server type: kcat produces keyed records that the HTTP storage
// API serves, and consumes what was POSTed over HTTP; bad kafka configurations are refused
// naming the key.
#include <gtest/gtest.h>
#include <unistd.h>

#include <string>

#include "app_process.h"

namespace lionet::app {
namespace {
using namespace lionet::app::testing;

constexpr const char* kReady = "scheduler 'lionet' running";

TEST(AppKafka, KcatAndTheHttpStorageApiSeeEachOthersRecords) {
  ASSERT_EQ(sh("kcat -V >/dev/null 2>&1 && echo yes"), "yes\n") << "kcat is missing: run scripts/install-deps.sh";
  TempConf conf;
  const int http = free_port(), port = free_port();
  conf.write("server.yml", "scheduler: {threads: 2}\n"
                           "storage: {data_dir: " + conf.path() + "/data, flush: {policy: every_batch}}\n"
                           "servers:\n"
                           "  - name: api\n    type: http\n    listen: ['127.0.0.1:" + std::to_string(http) + "']\n"
                           "    routes:\n"
                           "      - {path: /topics, type: storage}\n"
                           "      - {path: /metrics, type: metrics}\n"
                           "  - name: kafka\n    type: kafka\n    listen: ['127.0.0.1:" + std::to_string(port) + "']\n");
  Process p({"-c", conf.path()});
  REQUIRE_BINARY(p);
  ASSERT_TRUE(p.wait_for(kReady)) << p.output();
  EXPECT_NE(p.output().find("server kafka (kafka) on 127.0.0.1:" + std::to_string(port)), std::string::npos)
      << p.output();
  const std::string b = "-b 127.0.0.1:" + std::to_string(port);
  int rc = -1;
  sh("printf 'user1:signed up\\nuser2:paid\\n' | timeout 30 kcat " + b + " -t events -P -K: 2>&1", &rc);
  ASSERT_EQ(rc, 0);
  const std::string base = "http://127.0.0.1:" + std::to_string(http) + "/topics/events/partitions/0/records";
  const Curl got = curl("'" + base + "?offset=0'");
  ASSERT_EQ(got.status, 200) << got.body;
  EXPECT_NE(got.body.find(R"("key":"user1")"), std::string::npos) << got.body;
  EXPECT_NE(got.body.find(R"("value":"paid")"), std::string::npos) << got.body;
  const Curl posted = curl("-X POST --data-binary 'from http' '" + base + "?key=web'");
  EXPECT_EQ(posted.status, 201) << posted.body;
  const std::string out = sh("timeout 30 kcat " + b + " -q -t events -C -o beginning -e -f '%k=%s@%o\\n' 2>&1", &rc);
  EXPECT_EQ(rc, 0) << out;
  EXPECT_EQ(out, "user1=signed up@0\nuser2=paid@1\nweb=from http@2\n");
  const Curl m = curl("http://127.0.0.1:" + std::to_string(http) + "/metrics");
  EXPECT_NE(m.body.find("lionet_kafka_records_in_total{server=\"kafka\"} 2"), std::string::npos) << m.body;
  EXPECT_NE(m.body.find("lionet_kafka_records_out_total{server=\"kafka\"} "), std::string::npos) << m.body;
  EXPECT_NE(m.body.find("lionet_connections_accepted_total{server=\"kafka\",type=\"kafka\"}"), std::string::npos) << m.body;
  p.signal(SIGTERM);
  EXPECT_EQ(p.wait(), 0) << p.output();
}

TEST(AppKafka, BadKafkaConfigurationsAreRefusedNamingTheKey) {
  struct Case {
    std::string server, expect;
  };
  for (const Case& c : std::initializer_list<Case>{
           {"{name: k, type: kafka, listen: ['127.0.0.1:9092'], max_request_size: 10}", "max_request_size"},
           {"{name: k, type: kafka, listen: ['127.0.0.1:9092'], advertised_port: 70000}", "advertised_port"},
           {"{name: k, type: kafka, listen: ['127.0.0.1:9092'], routes: [{path: /, type: health}]}", "no routes"},
       }) {
    TempConf conf;
    conf.write("server.yml", "servers:\n  - " + c.server + "\n");
    Process p({"-c", conf.path(), "--check"});
    REQUIRE_BINARY(p);
    EXPECT_EQ(p.wait(), 1) << c.server;
    EXPECT_NE(p.output().find(c.expect), std::string::npos) << c.server << "\n" << p.output();
  }
}

}  // namespace
}  // namespace lionet::app
