// lionet/kafka/server.h + broker.h over a raw socket: each API at the versions real clients
// send (ApiVersions v0/v2 and the v0-format refusal of v3, Metadata v4/v8 with auto-creation,
// Produce v7 and Fetch v11 round trips, long-poll Fetch woken by a produce, ListOffsets v2 and
// v5, InitProducerId v1, idempotent retries and gaps, the state across a restart, transactional
// producers refused, acks=0), pipelined requests answered in order, malformed frames closing
// only their own connection, and records crossing between Kafka and the store's own API.
#include <gtest/gtest.h>

#include <chrono>
#include <map>
#include <thread>
#include <vector>

#include "../common/sanitizers.h"
#include "kafka_test_util.h"
#include "lionet/kafka/protocol.h"
#include "lionet/kafka/record_batch.h"
#include "lionet/storage/crc32c.h"

namespace lionet::kafka {
namespace {
using namespace std::chrono_literals;
using testing::create;
using testing::KafkaFixture;
using testing::RawClient;

std::string batch(const std::vector<OutRecord>& recs, int64_t pid = -1, int16_t epoch = -1, int32_t seq = -1,
                  int16_t attributes = 0) {
  std::string b;
  encode_batch(recs, b);
  std::string patch;
  Writer p(patch);
  p.i16(attributes);
  b.replace(21, 2, patch);
  patch.clear();
  p.i64(pid);
  p.i16(epoch);
  p.i32(seq);
  b.replace(43, 14, patch);
  patch.clear();
  p.u32(storage::crc32c(0, b.data() + 21, b.size() - 21));
  b.replace(17, 4, patch);
  return b;
}

struct ProduceResult {
  int16_t error = -99;
  int64_t base_offset = -1;
};

int32_t send_produce(RawClient& c, const std::string& topic, int32_t partition, const std::string& records,
                     int16_t acks = -1, std::optional<std::string_view> txn = std::nullopt) {
  return c.send(0, 7, [&](Writer& w) {
    w.nullable_string(txn);
    w.i16(acks);
    w.i32(5000);
    w.array_count(1);
    w.string(topic);
    w.array_count(1);
    w.i32(partition);
    w.nullable_bytes(std::string_view(records));
  });
}

ProduceResult read_produce(RawClient& c, int32_t corr) {
  const std::string resp = c.recv();
  Reader r(resp);
  EXPECT_EQ(r.i32(), corr);
  EXPECT_EQ(r.array_count(), 1);
  r.string();
  EXPECT_EQ(r.array_count(), 1);
  r.i32();
  ProduceResult pr;
  pr.error = r.i16();
  pr.base_offset = r.i64();
  r.i64();  // log append time
  r.i64();  // log start (v5+)
  EXPECT_EQ(r.i32(), 0);  // throttle
  EXPECT_TRUE(r.ok() && r.at_end()) << r.error();
  return pr;
}

ProduceResult produce(RawClient& c, const std::string& topic, int32_t partition, const std::string& records) {
  return read_produce(c, send_produce(c, topic, partition, records));
}

struct FetchResult {
  int16_t error = -99;
  int64_t high_watermark = -1;
  std::vector<DecodedBatch> batches;
  std::string bytes;  // keeps the views alive
};

int32_t send_fetch(RawClient& c, const std::string& topic, int32_t partition, int64_t offset, int32_t max_wait_ms,
                   int32_t max_bytes = 1 << 20) {
  return c.send(1, 11, [&](Writer& w) {
    w.i32(-1);
    w.i32(max_wait_ms);
    w.i32(1);
    w.i32(max_bytes);
    w.i8(0);
    w.i32(0);
    w.i32(-1);
    w.array_count(1);
    w.string(topic);
    w.array_count(1);
    w.i32(partition);
    w.i32(-1);
    w.i64(offset);
    w.i64(-1);
    w.i32(max_bytes);
    w.array_count(0);
    w.string("");
  });
}

FetchResult read_fetch(RawClient& c, int32_t corr) {
  FetchResult f;
  const std::string resp = c.recv();
  Reader r(resp);
  EXPECT_EQ(r.i32(), corr);
  r.i32();  // throttle
  EXPECT_EQ(r.i16(), 0);  // top-level error
  EXPECT_EQ(r.i32(), 0);  // session id
  EXPECT_EQ(r.array_count(), 1);
  r.string();
  EXPECT_EQ(r.array_count(), 1);
  r.i32();
  f.error = r.i16();
  f.high_watermark = r.i64();
  r.i64();
  r.i64();
  EXPECT_EQ(r.array_count(true), 0);
  EXPECT_EQ(r.i32(), -1);
  f.bytes = std::string(r.nullable_bytes().value_or(""));
  EXPECT_TRUE(r.ok() && r.at_end()) << r.error();
  EXPECT_EQ(decode_batches(f.bytes, f.batches).code, ErrorCode::kNone);
  return f;
}

std::vector<std::string> values(const FetchResult& f) {
  std::vector<std::string> out;
  for (const auto& b : f.batches)
    for (const auto& r : b.records) out.emplace_back(r.value.value_or("<null>"));
  return out;
}

TEST(KafkaServer, ApiVersionsV0V2AndTheV0RefusalOfV3) {
  KafkaFixture fx;
  RawClient c(fx.port());
  for (int16_t v : {0, 2}) {
    const int32_t corr = c.send(18, v, nullptr);
    const std::string resp = c.recv();
    Reader r(resp);
    EXPECT_EQ(r.i32(), corr);
    EXPECT_EQ(r.i16(), 0);
    const int32_t n = r.array_count();
    EXPECT_EQ(n, static_cast<int32_t>(std::size(kSupportedApis)));
    bool produce3 = false, fetch4 = false;
    for (int32_t i = 0; i < n; ++i) {
      const int16_t k = r.i16(), lo = r.i16(), hi = r.i16();
      produce3 |= k == 0 && lo <= 3 && hi >= 3;
      fetch4 |= k == 1 && lo <= 4 && hi >= 4;
    }
    EXPECT_TRUE(produce3 && fetch4);  // librdkafka's MsgVer2 needs both
    if (v >= 1) {
      EXPECT_EQ(r.i32(), 0);
    }
    EXPECT_TRUE(r.ok() && r.at_end());
  }
  // v3 (flexible: header v2 with tagged fields) gets error 35 and the ranges in the v0 layout.
  std::string f;
  Writer w(f);
  const std::size_t at = w.reserve_i32();
  w.i16(18);
  w.i16(3);
  w.i32(77);
  w.nullable_string(std::string_view("x"));
  w.i8(0);  // tagged fields
  w.raw(
      std::string("\x04"
                  "kcat"
                  "\x06"
                  "1.7.1"
                  "\x00",
                  12));  // compact client software name and version
  w.patch_i32(at, static_cast<int32_t>(f.size() - 4));
  c.send_raw(f);
  const std::string resp = c.recv();
  Reader r(resp);
  EXPECT_EQ(r.i32(), 77);
  EXPECT_EQ(r.i16(), 35);
  const int32_t n = r.array_count();
  for (int32_t i = 0; i < n; ++i) r.raw(6);
  EXPECT_TRUE(r.ok() && r.at_end());
}

TEST(KafkaServer, MetadataListsTopicsAndAutoCreates) {
  KafkaFixture fx;
  create(fx.store(), "three", 3);
  RawClient c(fx.port());
  auto metadata = [&](int16_t v, std::optional<std::vector<std::string>> topics, bool auto_create) {
    const int32_t corr = c.send(3, v, [&](Writer& w) {
      if (!topics) {
        w.array_count(-1);
      } else {
        w.array_count(static_cast<int32_t>(topics->size()));
        for (auto& t : *topics) w.string(t);
      }
      w.boolean(auto_create);
      if (v >= 8) {
        w.boolean(false);
        w.boolean(false);
      }
    });
    std::string resp = c.recv();
    Reader r(resp);
    EXPECT_EQ(r.i32(), corr);
    r.i32();  // throttle
    EXPECT_EQ(r.array_count(), 1);
    EXPECT_EQ(r.i32(), 1);
    EXPECT_EQ(r.string(), "127.0.0.1");
    EXPECT_EQ(r.i32(), fx.port());
    r.nullable_string();
    EXPECT_EQ(r.nullable_string().value_or(""), "lionet");
    EXPECT_EQ(r.i32(), 1);
    std::map<std::string, std::pair<int16_t, int32_t>> out;  // name -> error, partitions
    const int32_t nt = r.array_count();
    for (int32_t i = 0; i < nt; ++i) {
      const int16_t err = r.i16();
      const std::string name(r.string());
      r.boolean();
      const int32_t np = r.array_count();
      for (int32_t p = 0; p < np; ++p) {
        EXPECT_EQ(r.i16(), 0);
        EXPECT_EQ(r.i32(), p);
        EXPECT_EQ(r.i32(), 1);  // leader
        if (v >= 7) r.i32();
        EXPECT_EQ(r.array_count(), 1);
        r.i32();
        EXPECT_EQ(r.array_count(), 1);
        r.i32();
        if (v >= 5) {
          EXPECT_EQ(r.array_count(), 0);
        }
      }
      if (v >= 8) r.i32();
      out[name] = {err, np};
    }
    if (v >= 8) r.i32();
    EXPECT_TRUE(r.ok() && r.at_end()) << r.error();
    return out;
  };
  auto all = metadata(4, std::nullopt, false);
  EXPECT_EQ(all.size(), 1u);  // the internal __kafka_producers and __kafka_headers are not listed
  EXPECT_EQ(all["three"], std::make_pair(int16_t{0}, 3));
  auto none = metadata(4, std::vector<std::string>{"fresh"}, false);
  EXPECT_EQ(none["fresh"].first, 3);  // UNKNOWN_TOPIC_OR_PARTITION
  EXPECT_FALSE(fx.store().describe("fresh"));
  auto made = metadata(8, std::vector<std::string>{"fresh", "bad/name"}, true);
  EXPECT_EQ(made["fresh"], std::make_pair(int16_t{0}, 1));
  EXPECT_EQ(made["bad/name"].first, 17);  // INVALID_TOPIC_EXCEPTION
  EXPECT_TRUE(fx.store().describe("fresh"));
}

TEST(KafkaServer, ProduceFetchRoundTripAndTheStoreSeesTheSameRecords) {
  KafkaFixture fx;
  create(fx.store(), "t");
  RawClient c(fx.port());
  auto pr = produce(c, "t", 0, batch({{0, 1700000000000, "k1", "v1", {}}, {1, 1700000000001, "", "v2", {}}}));
  EXPECT_EQ(pr.error, 0);
  EXPECT_EQ(pr.base_offset, 0);
  // The store's own API (what HTTP serves) reads them, and what it appends Kafka reads.
  storage::Log* log = fx.store().find("t", 0).value();
  auto rr = log->read(0, 1 << 20).value();
  ASSERT_EQ(rr.size(), 2u);
  EXPECT_EQ(rr[0].key, "k1");
  EXPECT_EQ(rr[0].value, "v1");
  EXPECT_EQ(rr[0].timestamp, 1700000000000);
  ASSERT_TRUE(log->append(storage::Record{"hk", "from-http", 1700000000002}));
  auto f = read_fetch(c, send_fetch(c, "t", 0, 0, 0));
  EXPECT_EQ(f.error, 0);
  EXPECT_EQ(f.high_watermark, 3);
  EXPECT_EQ(values(f), (std::vector<std::string>{"v1", "v2", "from-http"}));
  ASSERT_FALSE(f.batches.empty());
  EXPECT_EQ(f.batches[0].base_offset, 0);
  // From the middle, at the end (empty), past the end (OFFSET_OUT_OF_RANGE), unknown topic.
  EXPECT_EQ(values(read_fetch(c, send_fetch(c, "t", 0, 2, 0))), std::vector<std::string>{"from-http"});
  EXPECT_TRUE(values(read_fetch(c, send_fetch(c, "t", 0, 3, 0))).empty());
  EXPECT_EQ(read_fetch(c, send_fetch(c, "t", 0, 9, 0)).error, 1);
  EXPECT_EQ(read_fetch(c, send_fetch(c, "nope", 0, 0, 0)).error, 3);
  EXPECT_EQ(produce(c, "nope", 0, batch({{0, 1, "", "x", {}}})).error, 3);  // Produce never creates
  EXPECT_EQ(produce(c, "t", 5, batch({{0, 1, "", "x", {}}})).error, 3);
  EXPECT_EQ(produce(c, "__kafka_headers", 0, batch({{0, 1, "", "x", {}}})).error, 17);  // internal: refused
}

TEST(KafkaServer, HeadersRoundTripAndSurviveARestart) {
  KafkaFixture fx;
  create(fx.store(), "t");
  std::string hdr;
  Writer hw(hdr);
  hw.varint(2);
  hw.varint(5);
  hw.raw("trace");
  hw.varint(3);
  hw.raw("abc");
  hw.varint(1);
  hw.raw("n");
  hw.varint(-1);  // a null header value
  auto check = [&](RawClient& c) {
    auto f = read_fetch(c, send_fetch(c, "t", 0, 0, 0));
    // The produced batch as it was sent, then the store API's record in a batch of its own.
    ASSERT_EQ(f.batches.size(), 2u);
    EXPECT_EQ(f.batches[0].base_offset, 0);
    EXPECT_EQ(f.batches[1].base_offset, 2);
    std::vector<DecodedRecord> recs;
    for (const auto& b : f.batches) recs.insert(recs.end(), b.records.begin(), b.records.end());
    ASSERT_EQ(recs.size(), 3u);
    EXPECT_EQ(recs[0].header_count, 0u);
    EXPECT_EQ(recs[1].header_count, 2u);
    EXPECT_EQ(recs[1].headers, hdr);
    EXPECT_EQ(recs[2].header_count, 0u);  // appended by the store's API: no headers
  };
  {
    RawClient c(fx.port());
    ASSERT_EQ(produce(c, "t", 0, batch({{0, 1, "", "plain", {}}, {1, 1, "", "headed", hdr}})).error, 0);
    ASSERT_TRUE(fx.store().find("t", 0).value()->append(storage::Record{"", "http", 5}));
    check(c);
  }
  fx.close();
  fx.open();
  RawClient c(fx.port());
  check(c);
}

// Four producers append headed batches to one partition while a consumer long-polls it: every
// record reaches the consumer once, in offset order, with its own header (the pending mark of
// header_store.h: no record is served before its headers are recorded). 4 x 60 batches of 2
// records (4 x 15 under sanitizers).
TEST(KafkaServer, ConcurrentHeadedProducesNeverServeARecordWithoutItsHeaders) {
  // every_batch: a batch is readable while its append waits for the fdatasync, which widens
  // the window between the records and their headers that the pending mark must cover.
  KafkaFixture fx(storage::FlushPolicy::kEveryBatch);
  create(fx.store(), "t");
  const int batches = lionet::test::kSlowdown > 1 ? 15 : 60, producers = 4;
  const int total = producers * batches * 2;
  auto header = [](const std::string& v) {
    std::string h;
    Writer w(h);
    w.varint(1);
    w.varint(1);
    w.raw("v");
    w.varint(static_cast<int32_t>(v.size()));
    w.raw(v);
    return h;
  };
  std::vector<std::thread> threads;
  for (int p = 0; p < producers; ++p) {
    threads.emplace_back([&, p] {
      RawClient c(fx.port());
      for (int i = 0; i < batches; ++i) {
        const std::string a = std::to_string(p) + "-" + std::to_string(2 * i);
        const std::string b = std::to_string(p) + "-" + std::to_string(2 * i + 1);
        const std::string ha = header(a), hb = header(b);
        EXPECT_EQ(produce(c, "t", 0, batch({{0, 1, "", a, ha}, {1, 1, "", b, hb}})).error, 0);
      }
    });
  }
  RawClient consumer(fx.port());
  int64_t next = 0;
  std::map<std::string, int> seen;
  const auto end = std::chrono::steady_clock::now() + 60s;
  while (next < total && std::chrono::steady_clock::now() < end) {
    auto f = read_fetch(consumer, send_fetch(consumer, "t", 0, next, 200));
    ASSERT_EQ(f.error, 0);
    for (const auto& b : f.batches) {
      for (std::size_t i = 0; i < b.records.size(); ++i) {
        const auto& r = b.records[i];
        EXPECT_EQ(b.base_offset + static_cast<int64_t>(i), next);
        ASSERT_EQ(r.header_count, 1u) << "offset " << next;
        EXPECT_EQ(r.headers, header(std::string(r.value.value_or(""))));
        ++seen[std::string(r.value.value_or(""))];
        ++next;
      }
    }
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(next, total);
  EXPECT_EQ(seen.size(), static_cast<std::size_t>(total));
}

TEST(KafkaServer, LongPollFetchIsWokenByAProduce) {
  KafkaFixture fx;
  create(fx.store(), "t");
  RawClient consumer(fx.port());
  const auto start = std::chrono::steady_clock::now();
  const int32_t corr = send_fetch(consumer, "t", 0, 0, 10000);
  std::thread producer([&] {
    std::this_thread::sleep_for(300ms);
    RawClient c(fx.port());
    EXPECT_EQ(produce(c, "t", 0, batch({{0, 1, "", "late", {}}})).error, 0);
  });
  auto f = read_fetch(consumer, corr);
  const auto took = std::chrono::steady_clock::now() - start;
  producer.join();
  EXPECT_EQ(values(f), std::vector<std::string>{"late"});
  EXPECT_GE(took, 250ms);
  EXPECT_LT(took, 5s);  // woken, not the 10 s max_wait
  // Nothing arrives: answered empty after max_wait_ms (longer than the one-second park slices).
  const auto t0 = std::chrono::steady_clock::now();
  EXPECT_TRUE(values(read_fetch(consumer, send_fetch(consumer, "t", 0, 1, 1500))).empty());
  EXPECT_GE(std::chrono::steady_clock::now() - t0, 1490ms);
}

// A Fetch over three partitions parks on all of them: a produce to the last one wakes it (not
// max_wait_ms), over and over; and the watcher fibers end when the server stops.
TEST(KafkaServer, LongPollOverSeveralPartitionsIsWokenByAnyOfThem) {
  KafkaFixture fx;
  create(fx.store(), "t3", 3);
  RawClient consumer(fx.port()), producer(fx.port());
  for (int round = 0; round < 5; ++round) {
    const int32_t target = round % 3 == 0 ? 2 : round % 3;  // 2, 1, 2, 0, 1
    const auto start = std::chrono::steady_clock::now();
    const int32_t corr = consumer.send(1, 11, [&](Writer& w) {
      w.i32(-1);
      w.i32(10000);  // max_wait_ms
      w.i32(1);
      w.i32(1 << 20);
      w.i8(0);
      w.i32(0);
      w.i32(-1);
      w.array_count(1);
      w.string("t3");
      w.array_count(3);
      for (int32_t p = 0; p < 3; ++p) {
        w.i32(p);
        w.i32(-1);
        w.i64(fx.store().find("t3", static_cast<uint32_t>(p)).value()->end_offset());
        w.i64(-1);
        w.i32(1 << 20);
      }
      w.array_count(0);
      w.string("");
    });
    std::this_thread::sleep_for(100ms);  // parked by now
    EXPECT_EQ(produce(producer, "t3", target, batch({{0, 1, "", "r" + std::to_string(round), {}}})).error, 0);
    const std::string resp = consumer.recv();
    EXPECT_LT(std::chrono::steady_clock::now() - start, 5s) << "round " << round;
    Reader r(resp);
    EXPECT_EQ(r.i32(), corr);
    r.i32();
    r.i16();
    r.i32();
    EXPECT_EQ(r.array_count(), 1);
    r.string();
    EXPECT_EQ(r.array_count(), 3);
    int with_records = 0;
    for (int p = 0; p < 3; ++p) {
      const int32_t index = r.i32();
      EXPECT_EQ(r.i16(), 0);
      r.i64();
      r.i64();
      r.i64();
      r.array_count(true);
      r.i32();
      const auto bytes = r.nullable_bytes().value_or("");
      if (!bytes.empty()) {
        ++with_records;
        EXPECT_EQ(index, target);
      }
    }
    EXPECT_EQ(with_records, 1);
    EXPECT_TRUE(r.ok() && r.at_end());
  }
  const auto t0 = std::chrono::steady_clock::now();
  fx.close();  // waits for the watcher fibers
  EXPECT_LT(std::chrono::steady_clock::now() - t0, 3s);
}

TEST(KafkaServer, ListOffsetsEarliestLatestAndByTime) {
  KafkaFixture fx;
  create(fx.store(), "t");
  RawClient c(fx.port());
  ASSERT_EQ(produce(c, "t", 0, batch({{0, 1000, "", "a", {}}, {1, 2000, "", "b", {}}, {2, 3000, "", "c", {}}})).error,
            0);
  for (int16_t v : {2, 5}) {
    const int64_t stamps[] = {-2, -1, 1500, 3000, 9999};
    const int32_t corr = c.send(2, v, [&](Writer& w) {
      w.i32(-1);
      w.i8(0);
      w.array_count(1);
      w.string("t");
      w.array_count(5);
      for (int64_t ts : stamps) {
        w.i32(0);
        if (v >= 4) w.i32(-1);
        w.i64(ts);
      }
    });
    const std::string resp = c.recv();
    Reader r(resp);
    EXPECT_EQ(r.i32(), corr);
    r.i32();
    EXPECT_EQ(r.array_count(), 1);
    r.string();
    EXPECT_EQ(r.array_count(), 5);
    const int64_t want_off[] = {0, 3, 1, 2, -1};
    const int64_t want_ts[] = {-1, -1, 2000, 3000, -1};
    for (int i = 0; i < 5; ++i) {
      EXPECT_EQ(r.i32(), 0);
      EXPECT_EQ(r.i16(), 0);
      EXPECT_EQ(r.i64(), want_ts[i]) << i;
      EXPECT_EQ(r.i64(), want_off[i]) << i;
      if (v >= 4) r.i32();
    }
    EXPECT_TRUE(r.ok() && r.at_end());
  }
}

std::pair<int64_t, int16_t> init_producer_id(RawClient& c, std::optional<std::string_view> txn = std::nullopt,
                                             int16_t* error = nullptr) {
  const int32_t corr = c.send(22, 1, [&](Writer& w) {
    w.nullable_string(txn);
    w.i32(60000);
  });
  const std::string resp = c.recv();
  Reader r(resp);
  EXPECT_EQ(r.i32(), corr);
  r.i32();
  const int16_t err = r.i16();
  if (error) *error = err;
  const int64_t pid = r.i64();
  const int16_t epoch = r.i16();
  EXPECT_TRUE(r.ok() && r.at_end());
  return {pid, epoch};
}

TEST(KafkaServer, IdempotentProduceDeduplicatesRetriesRefusesGapsAndSurvivesRestart) {
  KafkaFixture fx(storage::FlushPolicy::kEveryBatch);
  create(fx.store(), "t");
  int64_t pid;
  {
    RawClient c(fx.port());
    auto [p, epoch] = init_producer_id(c);
    pid = p;
    EXPECT_GE(pid, 0);
    EXPECT_EQ(epoch, 0);
    EXPECT_NE(init_producer_id(c).first, pid);  // ids never repeat
    const std::string b0 = batch({{0, 1, "", "a", {}}, {1, 1, "", "b", {}}}, pid, 0, 0);
    const std::string b1 = batch({{0, 1, "", "c", {}}}, pid, 0, 2);
    EXPECT_EQ(produce(c, "t", 0, b0).base_offset, 0);
    EXPECT_EQ(produce(c, "t", 0, b1).base_offset, 2);
    EXPECT_EQ(produce(c, "t", 0, b0).base_offset, 0);  // a retry: acknowledged, not appended
    EXPECT_EQ(produce(c, "t", 0, b1).base_offset, 2);
    EXPECT_EQ(fx.store().find("t", 0).value()->end_offset(), 3);
    const auto gap = produce(c, "t", 0, batch({{0, 1, "", "x", {}}}, pid, 0, 5));
    EXPECT_EQ(gap.error, 45);  // OUT_OF_ORDER_SEQUENCE_NUMBER
    EXPECT_EQ(produce(c, "t", 0, batch({{0, 1, "", "x", {}}}, 999999, 0, 0)).error, 59);  // never handed out
    EXPECT_EQ(fx.store().find("t", 0).value()->end_offset(), 3);
  }
  fx.close();
  fx.open();
  RawClient c(fx.port());
  EXPECT_EQ(produce(c, "t", 0, batch({{0, 1, "", "c", {}}}, pid, 0, 2)).base_offset, 2);  // still a duplicate
  EXPECT_EQ(produce(c, "t", 0, batch({{0, 1, "", "d", {}}}, pid, 0, 3)).base_offset, 3);
  EXPECT_EQ(fx.store().find("t", 0).value()->end_offset(), 4);
  EXPECT_GT(init_producer_id(c).first, pid);
}

// The crash window between a batch's append and its producer-state record: the batch is in the
// store (as the producer sent it, producer fields included) but the state never learned it. At
// the next start the broker reads each partition's last batch and learns it, so the client's
// retry is acknowledged with the stored offset instead of being appended twice.
TEST(KafkaServer, AnIdempotentBatchWhoseStateACrashLostIsNotAppendedTwice) {
  KafkaFixture fx(storage::FlushPolicy::kEveryBatch);
  create(fx.store(), "t");
  int64_t pid;
  const auto batch_at = [&](int32_t seq, const char* v) { return batch({{0, 1, "", v, {}}}, pid, 0, seq); };
  {
    RawClient c(fx.port());
    pid = init_producer_id(c).first;
    ASSERT_GE(pid, 0);
    EXPECT_EQ(produce(c, "t", 0, batch_at(0, "a")).base_offset, 0);
  }
  // What a crash right after the append of seq 1 leaves: the batch, not its state record; and
  // an append that does not take the producer lock (the HTTP API's) landed after it.
  const std::string lost = batch_at(1, "b");
  const std::string_view view(lost);
  storage::Log& log = *fx.store().find("t", 0).value();
  ASSERT_EQ(log.append_kafka_batches(std::span<const std::string_view>(&view, 1)).value(), 1);
  ASSERT_EQ(log.append(storage::Record{"", "http", 7}).value(), 2);
  fx.close();
  fx.open();
  RawClient c(fx.port());
  EXPECT_EQ(produce(c, "t", 0, batch_at(1, "b")).base_offset, 1);  // the retry: a duplicate
  EXPECT_EQ(fx.store().find("t", 0).value()->end_offset(), 3);
  EXPECT_EQ(produce(c, "t", 0, batch_at(2, "c")).base_offset, 3);  // the sequence goes on
  EXPECT_EQ(produce(c, "t", 0, batch_at(4, "e")).error, 45);  // and gaps are still gaps
  EXPECT_EQ(values(read_fetch(c, send_fetch(c, "t", 0, 0, 0))), (std::vector<std::string>{"a", "b", "http", "c"}));
  // Learned once: a second restart finds it in the state topic.
  fx.close();
  fx.open();
  RawClient c2(fx.port());
  EXPECT_EQ(produce(c2, "t", 0, batch_at(2, "c")).base_offset, 3);
  EXPECT_EQ(fx.store().find("t", 0).value()->end_offset(), 4);
}

TEST(KafkaServer, TransactionalProducersAreRefused) {
  KafkaFixture fx;
  create(fx.store(), "t");
  RawClient c(fx.port());
  int16_t err = 0;
  init_producer_id(c, "txn-1", &err);
  EXPECT_EQ(err, 53);
  EXPECT_EQ(read_produce(c, send_produce(c, "t", 0, batch({{0, 1, "", "a", {}}}), -1, "txn-1")).error, 53);
  EXPECT_EQ(produce(c, "t", 0, batch({{0, 1, "", "a", {}}}, -1, -1, -1, 0x10)).error, 53);  // transactional bit
  EXPECT_EQ(fx.store().find("t", 0).value()->end_offset(), 0);
}

TEST(KafkaServer, PipelinedRequestsAreAnsweredInOrderAndAcksZeroGetsNoAnswer) {
  KafkaFixture fx;
  create(fx.store(), "t");
  RawClient c(fx.port());
  send_produce(c, "t", 0, batch({{0, 1, "", "zero", {}}}), 0);  // acks=0: no response
  std::vector<int32_t> corrs;
  for (int i = 0; i < 5; ++i) corrs.push_back(send_produce(c, "t", 0, batch({{0, 1, "", std::to_string(i), {}}})));
  const int32_t fc = send_fetch(c, "t", 0, 0, 0);
  for (int i = 0; i < 5; ++i) EXPECT_EQ(read_produce(c, corrs[i]).base_offset, i + 1);
  EXPECT_EQ(values(read_fetch(c, fc)), (std::vector<std::string>{"zero", "0", "1", "2", "3", "4"}));
}

TEST(KafkaServer, MalformedFramesCloseOnlyTheirConnection) {
  KafkaFixture fx;
  create(fx.store(), "t");
  RawClient good(fx.port());
  auto probe = [&] {  // the other connection still works
    const int32_t corr = good.send(18, 0, nullptr);
    const std::string resp = good.recv();
    Reader r(resp);
    return r.i32() == corr;
  };
  {  // a size below a header
    RawClient c(fx.port());
    c.send_raw(std::string("\x00\x00\x00\x02\x00\x12", 6));
    EXPECT_TRUE(c.closed_by_server());
  }
  {  // a size past max_request_size
    RawClient c(fx.port());
    c.send_raw(std::string("\x7f\xff\xff\xff", 4));
    EXPECT_TRUE(c.closed_by_server());
  }
  {  // a negative topic count
    RawClient c(fx.port());
    c.send(3, 4, [](Writer& w) {
      w.i32(-7);
      w.boolean(false);
    });
    EXPECT_TRUE(c.closed_by_server());
  }
  {  // a string length past the frame
    RawClient c(fx.port());
    c.send(1, 11, [](Writer& w) {
      w.i32(-1);
      w.i32(0);
      w.i32(1);
      w.i32(100);
      w.i8(0);
      w.i32(0);
      w.i32(-1);
      w.array_count(1);
      w.i16(3000);
    });
    EXPECT_TRUE(c.closed_by_server());
  }
  {  // a batch whose CRC does not match
    RawClient c(fx.port());
    std::string b = batch({{0, 1, "", "a", {}}});
    b.back() ^= 1;
    send_produce(c, "t", 0, b);
    EXPECT_TRUE(c.closed_by_server());
  }
  EXPECT_TRUE(probe());
  EXPECT_EQ(fx.server().broker().stats().malformed, 3u);  // the two size errors never reach it
  EXPECT_EQ(fx.store().find("t", 0).value()->end_offset(), 0);
  // An unknown API: UNSUPPORTED_VERSION, and the connection stays.
  const int32_t corr = good.send(1000, 0, nullptr);
  const std::string resp = good.recv();
  Reader r(resp);
  EXPECT_EQ(r.i32(), corr);
  EXPECT_EQ(r.i16(), 35);
  EXPECT_TRUE(probe());
}

}  // namespace
}  // namespace lionet::kafka
