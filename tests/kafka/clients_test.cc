// Real Kafka clients against lionet::kafka::Server on 127.0.0.1: kcat (Debian's, librdkafka
// 2.0.2) producing keyed records with headers and consuming them (keys, values, offsets and
// headers) with -o beginning and -o end, and in a consumer group (-G) that resumes after its
// commit; kafka-python (pinned in scripts/install-deps.sh) producing with its default settings
// (idempotence on) and consuming, alone and in a group that resumes after its commit. A missing client fails the test, naming the script that
// installs it (never a silent skip).
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <map>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "../app/app_process.h"
#include "kafka_test_util.h"

namespace lionet::kafka {
namespace {
using app::testing::sh;
using testing::have;
using testing::KafkaFixture;

TEST(KafkaClients, KcatProducesAndConsumesWithKeysAndOffsets) {
  ASSERT_TRUE(have("kcat -V")) << "kcat is missing: run scripts/install-deps.sh";
  KafkaFixture fx;
  const std::string b = "-b 127.0.0.1:" + std::to_string(fx.port());
  int rc = -1;
  // Produce to a new topic: kcat's Metadata request auto-creates it.
  sh("printf 'k1:v1\\nk2:v2\\n:nokey\\n' | timeout 30 kcat " + b +
         " -t kc -P -K: -H trace=abc -X topic.request.required.acks=all 2>&1",
     &rc);
  ASSERT_EQ(rc, 0);
  std::string out = sh("timeout 30 kcat " + b + " -q -t kc -C -o beginning -e -f '%k=%s@%o;%h\\n' 2>&1", &rc);
  EXPECT_EQ(rc, 0) << out;
  EXPECT_EQ(out, "k1=v1@0;trace=abc\nk2=v2@1;trace=abc\n=nokey@2;trace=abc\n");
  // -o end: a consumer started at the end sees only what is produced after it.
  std::string tail;
  std::thread consumer(
      [&] { tail = sh("timeout 30 kcat " + b + " -q -t kc -C -o end -c 1 -f '%k=%s@%o;%h\\n' 2>&1"); });
  std::this_thread::sleep_for(std::chrono::milliseconds(1500));  // its ListOffsets and first Fetch
  sh("printf 'k3:v3\\n' | timeout 30 kcat " + b + " -t kc -P -K: -H a=1 -H b=2 2>&1", &rc);
  consumer.join();
  EXPECT_EQ(tail, "k3=v3@3;a=1,b=2\n");
  // The store holds them as the HTTP API serves them.
  auto rr = fx.store().find("kc", 0).value()->read(0, 1 << 20).value();
  ASSERT_EQ(rr.size(), 4u);
  EXPECT_EQ(rr[1].key, "k2");
  EXPECT_EQ(rr[1].value, "v2");
  // A topic of three partitions: keyed records spread over them, all read back with -e.
  storage::TopicOptions to;
  to.name = "kc3";
  to.partitions = 3;
  ASSERT_TRUE(fx.store().create_topic(to));
  sh("seq 1 30 | sed 's/.*/k&:v&/' | timeout 30 kcat " + b + " -t kc3 -P -K: 2>&1", &rc);
  ASSERT_EQ(rc, 0);
  out = sh("timeout 30 kcat " + b + " -q -t kc3 -C -o beginning -e -f '%k=%s\\n' | sort -V 2>&1", &rc);
  std::string want;
  for (int i = 1; i <= 30; ++i) {
    const std::string n = std::to_string(i);
    want.append("k").append(n).append("=v").append(n).append("\n");
  }
  EXPECT_EQ(out, want);
  int used = 0;
  for (uint32_t p = 0; p < 3; ++p) used += fx.store().find("kc3", p).value()->end_offset() > 0;
  EXPECT_GE(used, 2);  // librdkafka's partitioner hashed the keys over the partitions
  // Listing the metadata works too (kcat -L).
  out = sh("timeout 30 kcat " + b + " -L 2>&1", &rc);
  EXPECT_EQ(rc, 0) << out;
  EXPECT_NE(out.find("topic \"kc\" with 1 partitions"), std::string::npos) << out;
}

// librdkafka compresses whole batches when asked (compression.codec): each of its four codecs
// reaches the store as plain records (readable over the HTTP API too) and comes back intact.
TEST(KafkaClients, KcatCompressedProducersOfEveryCodec) {
  ASSERT_TRUE(have("kcat -V")) << "kcat is missing: run scripts/install-deps.sh";
  KafkaFixture fx;
  const std::string b = "-b 127.0.0.1:" + std::to_string(fx.port());
  for (const char* codec : {"gzip", "snappy", "lz4", "zstd"}) {
    SCOPED_TRACE(codec);
    const std::string topic = std::string("z") + codec;
    int rc = -1;
    // 2,000 records (repetitive values: they compress) in batches of several hundred.
    std::string out = sh("seq 1 2000 | sed 's/.*/k&:value-&-&-&-&-&/' | timeout 30 kcat " + b + " -t " + topic +
                             " -P -K: -z " + codec + " -X linger.ms=50 -X topic.request.required.acks=all 2>&1",
                         &rc);
    ASSERT_EQ(rc, 0) << out;
    out = sh("timeout 30 kcat " + b + " -q -t " + topic + " -C -o beginning -e -f '%k=%s\\n' 2>&1", &rc);
    EXPECT_EQ(rc, 0) << out;
    std::string want;
    for (int i = 1; i <= 2000; ++i) {
      const std::string n = std::to_string(i);
      want.append("k").append(n).append("=value-").append(n).append("-").append(n).append("-").append(n);
      want.append("-").append(n).append("-").append(n).append("\n");
    }
    EXPECT_EQ(out, want);
    auto log = fx.store().find(topic, 0);
    ASSERT_TRUE(log.ok());
    EXPECT_EQ((*log)->end_offset(), 2000);
    auto rr = (*log)->read(1999, 1 << 20).value();
    ASSERT_EQ(rr.size(), 1u);
    EXPECT_EQ(rr[0].value, "value-2000-2000-2000-2000-2000");
  }
}

TEST(KafkaClients, KafkaPythonDefaultProducerAndConsumer) {
  const std::string py = LIONET_TEST_PYTHON;
  ASSERT_TRUE(have(py + " -c 'import kafka'")) << py << " has no kafka-python: run scripts/install-deps.sh";
  KafkaFixture fx(storage::FlushPolicy::kEveryBatch);
  int rc = -1;
  const std::string out =
      sh("timeout 90 " + py + " " + LIONET_SOURCE_DIR +
             "/tests/kafka/kafka_python_check.py 127.0.0.1:" + std::to_string(fx.port()) + " kp 200 2>&1",
         &rc);
  EXPECT_EQ(rc, 0) << out;
  EXPECT_EQ(out, "OK 200\n") << out;
  auto rr = fx.store().find("kp", 0).value()->read(0, 1 << 20).value();
  EXPECT_EQ(rr.size(), 200u);
  // Idempotence was on: an id was handed out and its batches' sequences recorded.
  EXPECT_GE(fx.store().find("__kafka_producers", 0).value()->end_offset(), 2);
}

// kcat's balanced consumer (-G, librdkafka's KafkaConsumer: FindCoordinator, JoinGroup with
// MEMBER_ID_REQUIRED, SyncGroup running the range assignor, OffsetFetch, auto-commit on
// close): a first run takes 12 of 30 records and commits, a second run in the same group
// resumes after them: together every record once.
TEST(KafkaClients, KcatGroupConsumerCommitsAndASecondRunResumes) {
  ASSERT_TRUE(have("kcat -V")) << "kcat is missing: run scripts/install-deps.sh";
  KafkaFixture fx;
  storage::TopicOptions to;
  to.name = "kg";
  to.partitions = 3;
  ASSERT_TRUE(fx.store().create_topic(to));
  const std::string b = "-b 127.0.0.1:" + std::to_string(fx.port());
  int rc = -1;
  sh("seq 1 30 | sed 's/.*/k&:v&/' | timeout 30 kcat " + b + " -t kg -P -K: 2>&1", &rc);
  ASSERT_EQ(rc, 0);
  const std::string consume = "timeout 60 kcat " + b + " -q -G grp -X auto.offset.reset=earliest -f '%p:%o:%s\\n' ";
  const std::string first = sh(consume + "-c 12 kg 2>&1", &rc);
  EXPECT_EQ(rc, 0) << first;
  const std::string second = sh(consume + "-e kg 2>&1", &rc);
  EXPECT_EQ(rc, 0) << second;
  auto lines = [](const std::string& out) {
    std::vector<std::string> v;
    std::size_t at = 0;
    for (std::size_t nl; (nl = out.find('\n', at)) != std::string::npos; at = nl + 1)
      v.push_back(out.substr(at, nl - at));
    return v;
  };
  const auto a = lines(first), c = lines(second);
  EXPECT_EQ(a.size(), 12u) << first;
  EXPECT_EQ(c.size(), 18u) << second;
  std::map<std::string, int> seen;  // "partition:offset" -> times consumed
  std::set<std::string> values;
  for (const auto* run : {&a, &c}) {
    for (const std::string& l : *run) {
      const std::size_t colon = l.rfind(':');
      ++seen[l.substr(0, colon)];
      values.insert(l.substr(colon + 1));
    }
  }
  EXPECT_EQ(seen.size(), 30u);
  for (const auto& [po, n] : seen) EXPECT_EQ(n, 1) << po << " consumed " << n << " times";
  EXPECT_EQ(values.size(), 30u);
  // The second run's first record of each partition is where the first run's commit left it.
  for (uint32_t p = 0; p < 3; ++p) {
    int64_t first_max = -1, second_min = INT64_MAX;
    for (const std::string& l : a)
      if (std::stoi(l) == static_cast<int>(p))
        first_max = std::max<int64_t>(first_max, std::stoll(l.substr(l.find(':') + 1)));
    for (const std::string& l : c)
      if (std::stoi(l) == static_cast<int>(p))
        second_min = std::min<int64_t>(second_min, std::stoll(l.substr(l.find(':') + 1)));
    if (second_min != INT64_MAX) {
      EXPECT_EQ(second_min, first_max + 1) << "partition " << p;
    }
  }
}

// kafka-python's group consumer (group_id, enable_auto_commit=False, commit()): a first
// consumer reads 120 of 300 records and commits; a new consumer in the group reads the rest.
TEST(KafkaClients, KafkaPythonGroupConsumerCommitsAndANewConsumerResumes) {
  const std::string py = LIONET_TEST_PYTHON;
  ASSERT_TRUE(have(py + " -c 'import kafka'")) << py << " has no kafka-python: run scripts/install-deps.sh";
  KafkaFixture fx;
  storage::TopicOptions to;
  to.name = "kpg";
  to.partitions = 3;
  ASSERT_TRUE(fx.store().create_topic(to));
  int rc = -1;
  const std::string out =
      sh("timeout 120 " + py + " " + LIONET_SOURCE_DIR +
             "/tests/kafka/kafka_python_group_check.py 127.0.0.1:" + std::to_string(fx.port()) + " kpg 300 120 2>&1",
         &rc);
  EXPECT_EQ(rc, 0) << out;
  EXPECT_EQ(out, "OK 120 180\n") << out;
  // The first consumer's commit went through this coordinator (a partition or more), and each
  // consumer made a generation of the group.
  const GroupStats g = fx.server().broker().stats().groups;
  EXPECT_GE(g.offset_commits, 1u);
  EXPECT_GE(g.rebalances, 2u);
}

}  // namespace
}  // namespace lionet::kafka
