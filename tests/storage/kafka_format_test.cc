// tests/storage/kafka_format_test.cc: segments in BatchFormat::kKafka (Kafka's RecordBatch magic 2,
// byte for byte: lionet/storage/detail/kafka_format.h). What a user of the store sees: records
// with headers round-trip, Kafka batches are stored as the producer sent them (only the base
// offset and the leader epoch change, the max timestamp when it is wrong), compressed batches
// stay compressed and read back, bad batches are refused whole, a directory may mix both
// formats, recovery cuts a damaged tail, truncate_to may cut a compressed batch, and
// read_stored hands out exactly the stored bytes a Kafka Fetch would send. (The kLionet
// layout's damage is in index_damage_test.cc and recovery_test.cc.)
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include "lionet/kafka/codec.h"
#include "lionet/kafka/record_batch.h"
#include "lionet/storage/compression.h"
#include "lionet/storage/crc32c.h"
#include "lionet/storage/detail/kafka_format.h"
#include "lionet/storage/file_system.h"
#include "lionet/storage/kafka_batch.h"
#include "lionet/storage/log.h"
#include "tests/storage/storage_test_util.h"

namespace lionet::storage {
namespace {

using detail::load_be;
using detail::store_be;
using test::file_size;
using test::segment_file;
using test::TempDir;

constexpr std::size_t kBig = std::size_t{1} << 24;  // a max_bytes that takes a whole segment

// Sizes are predictable (no preallocation) and no sync is needed to look at the files.
LogOptions opts(BatchFormat f = BatchFormat::kKafka) {
  LogOptions o;
  o.batch_format = f;
  o.flush_policy = FlushPolicy::kNone;
  o.preallocate_bytes = 0;
  return o;
}

int64_t wall_ms() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::system_clock::now().time_since_epoch())
      .count();
}

// One record as a test expects it back (owned copies).
struct Rec {
  int64_t offset = 0;
  int64_t ts = 0;
  std::string key, value, headers;
  bool operator==(const Rec&) const = default;
};
std::ostream& operator<<(std::ostream& os, const Rec& r) {
  return os << "{offset " << r.offset << ", ts " << r.ts << ", key '" << r.key << "', value " << r.value.size()
            << " bytes, headers " << r.headers.size() << " bytes}";
}
Rec to_rec(const RecordView& v) {
  return Rec{v.offset, v.timestamp, std::string(v.key), std::string(v.value), std::string(v.headers)};
}

// A Kafka header section: count varint, then (key length, key, value length (-1: null), value).
struct Header {
  std::string key;
  std::optional<std::string> value;
};
std::string header_section(const std::vector<Header>& hs) {
  std::string out;
  kafka::Writer w(out);
  w.varint(static_cast<int32_t>(hs.size()));
  for (const Header& h : hs) {
    w.varint(static_cast<int32_t>(h.key.size()));
    w.raw(h.key);
    if (h.value) {
      w.varint(static_cast<int32_t>(h.value->size()));
      w.raw(*h.value);
    } else {
      w.varint(-1);
    }
  }
  return out;
}

// An uncompressed Kafka batch of these records (their offsets must be consecutive).
std::string kafka_batch(const std::vector<Rec>& recs) {
  std::vector<kafka::OutRecord> out;
  for (const Rec& r : recs) out.push_back(kafka::OutRecord{r.offset, r.ts, r.key, r.value, r.headers});
  std::string b;
  kafka::encode_batch(out, b);
  return b;
}

void fix_crc(std::string& b) { store_be<uint32_t>(b.data() + 17, crc32c(0, b.data() + 21, b.size() - 21)); }

// The batch with its records section compressed with `codec` (attributes, length and CRC set).
std::string compressed(const std::string& plain, int codec) {
  std::string out = plain.substr(0, kKafkaHeaderBytes);
  EXPECT_TRUE(compress(codec, std::string_view(plain).substr(kKafkaHeaderBytes), out)) << codec;
  store_be<int16_t>(out.data() + 21, static_cast<int16_t>(codec));
  store_be<int32_t>(out.data() + 8, static_cast<int32_t>(out.size() - 12));
  fix_crc(out);
  return out;
}

// What the store keeps of an input batch: base offset `base`, partition leader epoch 0.
std::string stamped(std::string b, int64_t base) {
  store_be<int64_t>(b.data(), base);
  store_be<int32_t>(b.data() + 12, 0);
  return b;
}

// Records [from, to) offsets with the given header section on every other one.
std::vector<Rec> make_recs(int64_t from, int64_t n, int64_t ts0, std::size_t value_len = 40) {
  std::vector<Rec> v;
  for (int64_t i = 0; i < n; i++) {
    const int64_t off = from + i;
    Rec r{off, ts0 + (i % 3) * 7, test::key_for(off), test::value_for(off, value_len), ""};
    if (off % 2 == 0) r.headers = header_section({{"trace", "t-" + std::to_string(off)}, {"nullv", std::nullopt}});
    if (off % 5 == 3) r.key.clear();  // some null keys
    v.push_back(std::move(r));
  }
  return v;
}

std::vector<Record> as_records(const std::vector<Rec>& recs) {
  std::vector<Record> out;
  for (const Rec& r : recs) out.push_back(Record{r.key, r.value, r.ts, r.headers});
  return out;
}

// Every record from `from` to the end, one read per call of `max_bytes`.
std::vector<Rec> read_all(const Log& log, int64_t from, std::size_t max_bytes = kBig) {
  std::vector<Rec> out;
  ReadResult rr;
  int64_t off = from;
  while (off < log.end_offset()) {
    auto r = log.read(off, max_bytes, rr);
    EXPECT_TRUE(r.ok()) << "offset " << off << ": " << r.error().message();
    if (!r.ok() || rr.empty()) break;
    for (const RecordView& v : rr.records()) out.push_back(to_rec(v));
    EXPECT_EQ(rr.next_offset(), out.back().offset + 1);
    off = rr.next_offset();
  }
  return out;
}

// Start positions of the batches of a kKafka segment file.
std::vector<uint64_t> kafka_positions(const std::string& bytes) {
  std::vector<uint64_t> pos;
  for (uint64_t p = 0; p + 12 <= bytes.size();) {
    pos.push_back(p);
    p += static_cast<uint64_t>(load_be<int32_t>(bytes.data() + p + 8)) + 12;
  }
  return pos;
}

// 1. Records with keys (one empty), values (one empty, one large), timestamps (two "now") and
//    headers on some, appended with append_batch and append, read back identically: right
//    after the append, one record per read, and after close + reopen.
TEST(StorageKafkaFormat, RecordsWithHeadersRoundTripAcrossReopen) {
  TempDir d;
  const std::string h1 = header_section({{"content-type", "json"}});
  const std::string h2 = header_section({{"a", "1"}, {"b", std::nullopt}, {"", ""}});
  const std::string big(5000, 'x');
  std::vector<Rec> want;
  {
    auto log = Log::open(d.path(), opts()).value();
    const int64_t before = wall_ms();
    const std::vector<Record> b1 = {Record{"k0", "v0", 1000, h1}, Record{"", "v1", -1, ""}, Record{"k2", "", 999, h2},
                                    Record{"k3", big, 5000, ""}};
    auto r1 = log->append_batch(b1);
    ASSERT_TRUE(r1.ok()) << r1.error().message();
    EXPECT_EQ(*r1, 0);
    auto r2 = log->append(Record{"single", "value", -1, h2});
    ASSERT_TRUE(r2.ok()) << r2.error().message();
    EXPECT_EQ(*r2, 4);
    auto r3 = log->append(Record{"", "no key", 7, ""});
    ASSERT_TRUE(r3.ok()) << r3.error().message();
    EXPECT_EQ(*r3, 5);
    const int64_t after = wall_ms();
    EXPECT_EQ(log->end_offset(), 6);

    const std::vector<Rec> got = read_all(*log, 0);
    ASSERT_EQ(got.size(), 6u);
    // Timestamps < 0 were stamped with the wall clock at the append.
    EXPECT_GE(got[1].ts, before);
    EXPECT_LE(got[1].ts, after);
    EXPECT_GE(got[4].ts, before);
    EXPECT_LE(got[4].ts, after);
    want = {Rec{0, 1000, "k0", "v0", h1}, Rec{1, got[1].ts, "", "v1", ""},          Rec{2, 999, "k2", "", h2},
            Rec{3, 5000, "k3", big, ""},  Rec{4, got[4].ts, "single", "value", h2}, Rec{5, 7, "", "no key", ""}};
    EXPECT_EQ(got, want);
    // From every offset, one batch per read (max_bytes 1), including offsets inside a batch.
    for (int64_t off = 0; off < 6; off++) {
      const std::vector<Rec> tail = read_all(*log, off, 1);
      EXPECT_EQ(tail, std::vector<Rec>(want.begin() + off, want.end())) << "from offset " << off;
    }
  }
  auto log = Log::open(d.path(), opts()).value();
  EXPECT_EQ(log->end_offset(), 6);
  EXPECT_EQ(read_all(*log, 0), want);
  EXPECT_EQ(read_all(*log, 2, 1), std::vector<Rec>(want.begin() + 2, want.end()));
  auto r = log->append(Record{"after", "reopen", 42, h1});
  ASSERT_TRUE(r.ok()) << r.error().message();
  EXPECT_EQ(*r, 6);
  want.push_back(Rec{6, 42, "after", "reopen", h1});
  EXPECT_EQ(read_all(*log, 0), want);
}

// 2. A Kafka batch sent with a wrong base offset, a nonzero leader epoch and producer fields is
//    stored byte for byte except the base offset (the offset the log assigns) and the epoch (0);
//    read() returns its records with headers; read_stored points exactly at those bytes.
TEST(StorageKafkaFormat, KafkaBatchIsStoredAsSentExceptOffsetAndEpoch) {
  TempDir d;
  auto log = Log::open(d.path(), opts()).value();
  test::append_n(*log, 3, 3);  // a batch before it: position != 0, base offset 3
  const std::string path = segment_file(d.path(), 0, ".log");
  const uint64_t pos = file_size(path);

  std::vector<Rec> first = make_recs(100, 3, 7000);  // wrong offsets: 100.. instead of 3..
  std::string b1 = kafka_batch(first);
  store_be<int32_t>(b1.data() + 12, 0x01020304);  // leader epoch (not covered by the CRC)
  store_be<int64_t>(b1.data() + 43, 987654321);  // producer id, epoch, base sequence
  store_be<int16_t>(b1.data() + 51, 3);
  store_be<int32_t>(b1.data() + 53, 17);
  fix_crc(b1);
  std::vector<Rec> second = make_recs(0, 2, 8000);  // base 0: also wrong
  std::string b2 = kafka_batch(second);
  store_be<int32_t>(b2.data() + 12, -5);

  const std::vector<std::string_view> in = {b1, b2};
  auto r = log->append_kafka_batches(in);
  ASSERT_TRUE(r.ok()) << r.error().message();
  EXPECT_EQ(*r, 3);
  EXPECT_EQ(log->end_offset(), 8);

  const std::string file = test::read_file(path);
  ASSERT_EQ(file.size(), pos + b1.size() + b2.size());
  EXPECT_TRUE(file.substr(pos, b1.size()) == stamped(b1, 3)) << "first batch's stored bytes differ";
  EXPECT_TRUE(file.substr(pos + b1.size()) == stamped(b2, 6)) << "second batch's stored bytes differ";
  EXPECT_EQ(load_be<int64_t>(file.data() + pos + 43), 987654321);

  std::vector<Rec> want;
  for (std::size_t i = 0; i < first.size(); i++) {
    want.push_back(first[i]);
    want.back().offset = 3 + static_cast<int64_t>(i);
  }
  for (std::size_t i = 0; i < second.size(); i++) {
    want.push_back(second[i]);
    want.back().offset = 6 + static_cast<int64_t>(i);
  }
  EXPECT_EQ(read_all(*log, 3), want);
  EXPECT_EQ(read_all(*log, 4, 1), std::vector<Rec>(want.begin() + 1, want.end()));

  // read_stored from an offset inside the first batch: that batch, where it is in the file.
  auto s = log->read_stored(4, b1.size());
  ASSERT_TRUE(s.ok()) << s.error().message();
  EXPECT_EQ(s->format, BatchFormat::kKafka);
  ASSERT_NE(s->file, nullptr);
  EXPECT_NE(s->keep, nullptr);
  EXPECT_EQ(s->position, pos);
  EXPECT_EQ(s->bytes, b1.size());
  EXPECT_EQ(s->first_offset, 3);
  EXPECT_EQ(s->next_offset, 6);
  std::string got(s->bytes, '\0');
  auto n = s->file->pread(got.data(), got.size(), s->position);
  ASSERT_TRUE(n.ok()) << n.error().message();
  ASSERT_EQ(*n, got.size());
  EXPECT_TRUE(got == stamped(b1, 3));
  EXPECT_TRUE(got == file.substr(pos, b1.size()));
  // Both batches.
  auto s2 = log->read_stored(3, kBig);
  ASSERT_TRUE(s2.ok()) << s2.error().message();
  EXPECT_EQ(s2->position, pos);
  EXPECT_EQ(s2->bytes, b1.size() + b2.size());
  EXPECT_EQ(s2->next_offset, 8);

  // Survives reopen (the recovery scan accepts the stored bytes).
  log.reset();
  log = Log::open(d.path(), opts()).value();
  EXPECT_EQ(log->end_offset(), 8);
  EXPECT_EQ(read_all(*log, 3), want);
  EXPECT_EQ(test::verify_range(*log, 0, 3, 300, 1), 3);
  EXPECT_TRUE(test::read_file(path) == file);
}

// 3. Batches compressed with each codec are stored compressed (same bytes as sent but the base
//    offset and epoch) and read back; one read spanning all of them returns every value (the
//    views of every inflated batch stay valid), and so does a ReadResult reused for a second read.
TEST(StorageKafkaFormat, CompressedBatchesAreStoredCompressedAndReadBack) {
  TempDir d;
  auto log = Log::open(d.path(), opts()).value();
  const std::string path = segment_file(d.path(), 0, ".log");
  std::vector<Rec> want;
  std::vector<std::string> inputs;
  int64_t next = 0;
  for (int codec = 1; codec <= 4; codec++) {
    std::vector<Rec> recs = make_recs(next, 20, 10000 * codec);
    for (Rec& r : recs) {  // values that compress (and differ per record)
      r.value = std::string(100 + static_cast<std::size_t>(r.offset % 50), static_cast<char>('a' + r.offset % 26)) +
                std::to_string(r.offset);
    }
    const std::string in = compressed(kafka_batch(recs), codec);
    ASSERT_LT(in.size(), kafka_batch(recs).size()) << "codec " << codec << " did not compress";
    const uint64_t pos = file_size(path);
    const std::vector<std::string_view> span = {in};
    auto r = log->append_kafka_batches(span);
    ASSERT_TRUE(r.ok()) << "codec " << codec << ": " << r.error().message();
    EXPECT_EQ(*r, next);
    const std::string file = test::read_file(path);
    ASSERT_EQ(file.size(), pos + in.size()) << "codec " << codec;
    EXPECT_TRUE(file.substr(pos) == stamped(in, next)) << "codec " << codec << ": stored bytes differ";
    EXPECT_EQ(load_be<int16_t>(file.data() + pos + 21) & 7, codec);
    // This batch alone, from an offset inside it.
    auto one = log->read(next + 5, 1);
    ASSERT_TRUE(one.ok()) << one.error().message();
    ASSERT_EQ(one->size(), 15u) << "codec " << codec;
    for (std::size_t i = 0; i < one->size(); i++) EXPECT_EQ(to_rec((*one)[i]), recs[i + 5]) << "codec " << codec;
    want.insert(want.end(), recs.begin(), recs.end());
    inputs.push_back(in);
    next += 20;
  }
  // All four codecs again in one call: consecutive offsets, one after the other in the file.
  std::vector<std::string_view> all;
  for (const std::string& s : inputs) all.push_back(s);
  const uint64_t pos = file_size(path);
  auto r = log->append_kafka_batches(all);
  ASSERT_TRUE(r.ok()) << r.error().message();
  EXPECT_EQ(*r, 80);
  EXPECT_EQ(log->end_offset(), 160);
  const std::string file = test::read_file(path);
  uint64_t at = pos;
  for (std::size_t i = 0; i < inputs.size(); i++) {
    EXPECT_TRUE(file.substr(at, inputs[i].size()) == stamped(inputs[i], 80 + 20 * static_cast<int64_t>(i)))
        << "batch " << i << " of the multi-batch append";
    at += inputs[i].size();
  }
  EXPECT_EQ(at, file.size());
  for (int64_t i = 0; i < 80; i++) {
    Rec c = want[static_cast<std::size_t>(i)];
    c.offset += 80;
    want.push_back(c);
  }

  // One read over all eight compressed batches: checked only once it has returned.
  ReadResult rr;
  ASSERT_TRUE(log->read(0, kBig, rr).ok());
  ASSERT_EQ(rr.size(), 160u);
  for (std::size_t i = 0; i < rr.size(); i++) EXPECT_EQ(to_rec(rr[i]), want[i]) << i;
  EXPECT_EQ(rr.next_offset(), 160);
  EXPECT_EQ(rr.bytes(), file.size());
  // The same ReadResult reused, from inside a batch.
  ASSERT_TRUE(log->read(33, kBig, rr).ok());
  ASSERT_EQ(rr.size(), 127u);
  for (std::size_t i = 0; i < rr.size(); i++) EXPECT_EQ(to_rec(rr[i]), want[i + 33]) << i + 33;
  // And after reopen (recovery inflates and checks each of them).
  log.reset();
  log = Log::open(d.path(), opts()).value();
  EXPECT_EQ(log->end_offset(), 160);
  EXPECT_EQ(read_all(*log, 0), want);
  EXPECT_EQ(read_all(*log, 7, 1), std::vector<Rec>(want.begin() + 7, want.end()));
}

// 3b. A compressed batch whose records inflate past max_batch_bytes (a compression bomb), or an
//     uncompressed one larger than it: kRecordTooLarge, nothing appended.
TEST(StorageKafkaFormat, BatchTooLargeOrInflatingPastMaxBatchBytesIsRefused) {
  TempDir d;
  LogOptions o = opts();
  o.max_batch_bytes = 64 * 1024;
  auto log = Log::open(d.path(), o).value();
  test::append_n(*log, 2, 2);
  const std::string path = segment_file(d.path(), 0, ".log");
  const uint64_t size = file_size(path);
  const std::string plain = kafka_batch({Rec{0, 1, "k", std::string(200 * 1024, 'a'), ""}});
  for (int codec = 1; codec <= 4; codec++) {
    const std::string bomb = compressed(plain, codec);
    ASSERT_LT(bomb.size(), o.max_batch_bytes) << "codec " << codec;
    const std::vector<std::string_view> in = {bomb};
    auto r = log->append_kafka_batches(in);
    ASSERT_FALSE(r.ok()) << "codec " << codec;
    EXPECT_EQ(r.error(), Errc::kRecordTooLarge) << "codec " << codec << ": " << r.error().message();
    EXPECT_EQ(log->end_offset(), 2);
    EXPECT_EQ(file_size(path), size);
  }
  const std::vector<std::string_view> in = {plain};
  auto r = log->append_kafka_batches(in);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error(), Errc::kRecordTooLarge) << r.error().message();
  // A good batch after a refused one in the same call: still nothing appended.
  const std::string good = kafka_batch(make_recs(0, 2, 5));
  const std::string bomb = compressed(plain, 4);
  const std::vector<std::string_view> mixed = {good, bomb};
  r = log->append_kafka_batches(mixed);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error(), Errc::kRecordTooLarge) << r.error().message();
  EXPECT_EQ(log->end_offset(), 2);
  EXPECT_EQ(file_size(path), size);
  // The log still works.
  const std::vector<std::string_view> one = {good};
  r = log->append_kafka_batches(one);
  ASSERT_TRUE(r.ok()) << r.error().message();
  EXPECT_EQ(*r, 2);
  EXPECT_EQ(test::verify_range(*log, 0, 2, 300, 1), 2);
  std::vector<Rec> want = make_recs(0, 2, 5);
  for (Rec& w : want) w.offset += 2;
  EXPECT_EQ(read_all(*log, 2), want);
}

// 4. A batch whose max_timestamp is not its records' largest timestamp (too small or too large,
//    CRC valid for the wrong value) is stored with the right one and a CRC matching the stored
//    bytes, compressed or not; offset_for_time and the recovery scan then agree with it.
TEST(StorageKafkaFormat, WrongMaxTimestampIsCorrectedAndCrcRecomputed) {
  for (int codec : {0, 1, 4}) {
    for (int64_t wrong : {int64_t{1500}, int64_t{999999}}) {
      SCOPED_TRACE("codec " + std::to_string(codec) + ", max_timestamp " + std::to_string(wrong));
      TempDir d;
      auto log = Log::open(d.path(), opts()).value();
      const std::string path = segment_file(d.path(), 0, ".log");
      const std::vector<Rec> recs = {Rec{0, 1000, "a", "x", ""}, Rec{1, 3000, "b", "y", header_section({{"h", "v"}})},
                                     Rec{2, 2000, "c", "z", ""}};
      std::string in = kafka_batch(recs);
      if (codec != 0) in = compressed(in, codec);
      ASSERT_EQ(load_be<int64_t>(in.data() + 35), 3000);
      store_be<int64_t>(in.data() + 35, wrong);
      fix_crc(in);
      const std::vector<std::string_view> span = {in};
      auto r = log->append_kafka_batches(span);
      ASSERT_TRUE(r.ok()) << r.error().message();
      const std::string file = test::read_file(path);
      ASSERT_EQ(file.size(), in.size());
      EXPECT_EQ(load_be<int64_t>(file.data() + 35), 3000);
      EXPECT_EQ(load_be<uint32_t>(file.data() + 17), crc32c(0, file.data() + 21, file.size() - 21))
          << "stored CRC does not match the stored bytes";
      EXPECT_NE(load_be<uint32_t>(file.data() + 17), load_be<uint32_t>(in.data() + 17));
      // Nothing else changed: the input with offset, epoch, max timestamp and CRC replaced.
      std::string expect = stamped(in, 0);
      store_be<int64_t>(expect.data() + 35, 3000);
      fix_crc(expect);
      EXPECT_TRUE(file == expect);
      auto t = log->offset_for_time(2500);
      ASSERT_TRUE(t.ok());
      EXPECT_EQ(*t, 1);
      t = log->offset_for_time(3001);
      ASSERT_TRUE(t.ok());
      EXPECT_EQ(*t, 3);
      log.reset();
      log = Log::open(d.path(), opts()).value();
      EXPECT_EQ(log->end_offset(), 3);
      EXPECT_EQ(file_size(path), in.size());
      EXPECT_EQ(read_all(*log, 0), recs);
    }
  }
}

// 5. Every kind of invalid batch is refused with kInvalidArgument and nothing is appended, also
//    when it comes after a good batch in the same call; the log keeps working.
TEST(StorageKafkaFormat, InvalidBatchesAreRefusedAndNothingAppended) {
  TempDir d;
  auto log = Log::open(d.path(), opts()).value();
  test::append_n(*log, 4, 2);
  const std::string path = segment_file(d.path(), 0, ".log");
  const uint64_t size = file_size(path);
  // Three records, all with timestamp delta 0 and small bodies: record 0 is at 61 and its
  // length varint, attributes and timestamp delta take one byte each, so its offset delta is at 64.
  const std::vector<Rec> recs = {Rec{0, 500, "k0", "v0", ""}, Rec{1, 500, "k1", "v1", header_section({{"h", "1"}})},
                                 Rec{2, 500, "k2", "v2", ""}};
  const std::string good = kafka_batch(recs);
  ASSERT_EQ(good[64], 0);  // offset delta 0

  struct Case {
    std::string name;
    std::string bytes;
  };
  std::vector<Case> cases;
  auto with = [&](std::string name, auto&& change, bool recrc) {
    std::string b = good;
    change(b);
    if (recrc) fix_crc(b);
    cases.push_back(Case{std::move(name), std::move(b)});
  };
  with(
      "bad CRC (a value byte changed)", [](std::string& b) { b[b.size() - 3] ^= 0x01; }, false);
  with(
      "bad CRC (CRC field changed)", [](std::string& b) { b[18] ^= 0x40; }, false);
  with(
      "magic 1", [](std::string& b) { b[16] = 1; }, false);
  with(
      "magic 0", [](std::string& b) { b[16] = 0; }, false);
  with(
      "magic 3", [](std::string& b) { b[16] = 3; }, false);
  with(
      "attributes: LogAppendTime (bit 3)", [](std::string& b) { store_be<int16_t>(b.data() + 21, 0x08); }, true);
  with(
      "attributes: transactional (bit 4)", [](std::string& b) { store_be<int16_t>(b.data() + 21, 0x10); }, true);
  with(
      "attributes: control (bit 5)", [](std::string& b) { store_be<int16_t>(b.data() + 21, 0x20); }, true);
  with(
      "attributes: bit 6", [](std::string& b) { store_be<int16_t>(b.data() + 21, 0x40); }, true);
  with(
      "attributes: high byte", [](std::string& b) { store_be<int16_t>(b.data() + 21, 0x0100); }, true);
  for (int codec : {5, 6, 7}) {
    with(
        "codec " + std::to_string(codec), [codec](std::string& b) { store_be<int16_t>(b.data() + 21, codec); }, true);
  }
  with(
      "record count 2, last_offset_delta 2", [](std::string& b) { store_be<int32_t>(b.data() + 57, 2); }, true);
  with(
      "record count 4, last_offset_delta 2", [](std::string& b) { store_be<int32_t>(b.data() + 57, 4); }, true);
  with(
      "record count 3, last_offset_delta 3", [](std::string& b) { store_be<int32_t>(b.data() + 23, 3); }, true);
  with(
      "record count 0, last_offset_delta -1",
      [](std::string& b) {
        store_be<int32_t>(b.data() + 57, 0);
        store_be<int32_t>(b.data() + 23, -1);
      },
      true);
  with(
      "record count -1", [](std::string& b) { store_be<int32_t>(b.data() + 57, -1); }, true);
  with(
      "framing: first record's offset delta 1",
      [](std::string& b) {
        b[64] = 2; /* zig-zag 1 */
      },
      true);
  with(
      "framing: first record's length one more", [](std::string& b) { b[61] = static_cast<char>(b[61] + 2); }, true);
  with(
      "framing: first record's length one less", [](std::string& b) { b[61] = static_cast<char>(b[61] - 2); }, true);
  with(
      "framing: a trailing byte after the records",
      [](std::string& b) {
        b.push_back('\0');
        store_be<int32_t>(b.data() + 8, static_cast<int32_t>(b.size() - 12));
      },
      true);
  with(
      "framing: last record cut short",
      [](std::string& b) {
        b.pop_back();
        store_be<int32_t>(b.data() + 8, static_cast<int32_t>(b.size() - 12));
      },
      true);
  with(
      "batch_length one more than the bytes",
      [](std::string& b) { store_be<int32_t>(b.data() + 8, static_cast<int32_t>(b.size() - 11)); }, false);
  with(
      "batch_length one less than the bytes",
      [](std::string& b) { store_be<int32_t>(b.data() + 8, static_cast<int32_t>(b.size() - 13)); }, false);
  with(
      "batch_length negative", [](std::string& b) { store_be<int32_t>(b.data() + 8, -1); }, false);
  with(
      "shorter than a header", [](std::string& b) { b.resize(40); }, false);
  with(
      "empty bytes", [](std::string& b) { b.clear(); }, false);
  with(
      "gzip codec, records not gzip", [](std::string& b) { store_be<int16_t>(b.data() + 21, 1); }, true);
  with(
      "zstd codec, records not zstd", [](std::string& b) { store_be<int16_t>(b.data() + 21, 4); }, true);
  with(
      "compressed stream truncated",
      [&](std::string& b) {
        b = compressed(good, 1);
        b.resize(b.size() - 4);
        store_be<int32_t>(b.data() + 8, static_cast<int32_t>(b.size() - 12));
      },
      true);
  with(
      "compressed records with bad framing",
      [&](std::string& b) {
        std::string bad = good;
        bad[64] = 2;
        b = compressed(bad, 3);
      },
      true);

  for (const Case& c : cases) {
    for (bool after_good : {false, true}) {
      std::vector<std::string_view> in;
      if (after_good) in.push_back(good);
      in.push_back(c.bytes);
      auto r = log->append_kafka_batches(in);
      ASSERT_FALSE(r.ok()) << c.name << (after_good ? " (after a good batch)" : "") << ": accepted";
      EXPECT_EQ(r.error(), Errc::kInvalidArgument) << c.name << ": " << r.error().message();
      EXPECT_EQ(log->end_offset(), 4) << c.name;
      EXPECT_EQ(file_size(path), size) << c.name;
    }
  }
  auto r = log->append_kafka_batches(std::span<const std::string_view>());
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error(), Errc::kInvalidArgument);

  // Still working, and nothing of the refused batches shows up after a reopen either.
  const std::vector<std::string_view> in = {good};
  r = log->append_kafka_batches(in);
  ASSERT_TRUE(r.ok()) << r.error().message();
  EXPECT_EQ(*r, 4);
  log.reset();
  log = Log::open(d.path(), opts()).value();
  EXPECT_EQ(log->end_offset(), 7);
  EXPECT_EQ(test::verify_range(*log, 0, 4, 300, 1), 4);
  std::vector<Rec> want = recs;
  for (Rec& w : want) w.offset += 4;
  EXPECT_EQ(read_all(*log, 4), want);
}

// 6. One directory, both formats: reopening with the other format seals the active segment (one
//    more segment), appends go to a segment of the new format, and every record of both stays
//    readable; read_stored says which format an offset's segment has. A kLionet log stores a
//    Kafka batch's records without headers.
TEST(StorageKafkaFormat, ReopeningInTheOtherFormatSealsTheActiveSegment) {
  TempDir d;
  const std::string dir = d.sub("log");
  // Kafka batches hold the same contents as append_n (key_for, value_for, 1000 + offset), plus
  // headers, so verify_range checks every offset whatever wrote it.
  auto kafka_append = [](Log& log, int64_t n, int codec = 0) {
    std::vector<Rec> recs;
    for (int64_t i = 0; i < n; i++) {
      const int64_t off = log.end_offset() + i;
      recs.push_back(
          Rec{off, 1000 + off, test::key_for(off), test::value_for(off), header_section({{"h", std::to_string(off)}})});
    }
    const std::string b = codec == 0 ? kafka_batch(recs) : compressed(kafka_batch(recs), codec);
    const std::vector<std::string_view> in = {b};
    auto r = log.append_kafka_batches(in);
    ASSERT_TRUE(r.ok()) << r.error().message();
    EXPECT_EQ(*r, recs.front().offset);
  };
  auto format_at = [](const Log& log, int64_t off) {
    auto s = log.read_stored(off, 1);
    EXPECT_TRUE(s.ok()) << off << ": " << s.error().message();
    return s.ok() ? s->format : BatchFormat{};
  };
  auto headers_at = [](const Log& log, int64_t off) {
    auto r = log.read(off, 1);
    EXPECT_TRUE(r.ok() && !r->empty()) << off;
    return r.ok() && !r->empty() ? std::string((*r)[0].headers) : std::string("<none>");
  };
  {
    auto log = Log::open(dir, opts(BatchFormat::kLionet)).value();
    test::append_n(*log, 10, 2);
    EXPECT_EQ(log->segment_count(), 1u);
    EXPECT_EQ(format_at(*log, 3), BatchFormat::kLionet);
  }
  {
    auto log = Log::open(dir, opts(BatchFormat::kKafka)).value();
    EXPECT_EQ(log->segment_count(), 2u);
    EXPECT_EQ(log->segment_base_offsets(), (std::vector<int64_t>{0, 10}));
    EXPECT_EQ(log->end_offset(), 10);
    test::append_n(*log, 6, 3);
    kafka_append(*log, 4);  // 16..19
    EXPECT_EQ(log->end_offset(), 20);
    EXPECT_EQ(test::verify_range(*log, 0, 20), 20);
    EXPECT_EQ(format_at(*log, 3), BatchFormat::kLionet);
    auto old = log->read_stored(3, kBig);
    ASSERT_TRUE(old.ok());
    EXPECT_EQ(old->file, nullptr);  // only the format is set
    EXPECT_EQ(old->bytes, 0u);
    auto s = log->read_stored(11, kBig);
    ASSERT_TRUE(s.ok()) << s.error().message();
    EXPECT_EQ(s->format, BatchFormat::kKafka);
    EXPECT_EQ(s->first_offset, 10);
    EXPECT_EQ(s->next_offset, 20);
    EXPECT_EQ(s->position, 0u);
    EXPECT_EQ(s->bytes, file_size(segment_file(dir, 10, ".log")));
    EXPECT_EQ(headers_at(*log, 17), header_section({{"h", "17"}}));
  }
  {
    auto log = Log::open(dir, opts(BatchFormat::kKafka)).value();  // same format: no roll
    EXPECT_EQ(log->segment_count(), 2u);
    EXPECT_EQ(test::verify_range(*log, 0, 20), 20);
  }
  {
    auto log = Log::open(dir, opts(BatchFormat::kLionet)).value();
    EXPECT_EQ(log->segment_count(), 3u);
    EXPECT_EQ(log->segment_base_offsets(), (std::vector<int64_t>{0, 10, 20}));
    test::append_n(*log, 3, 3);  // 20..22
    kafka_append(*log, 2, 3);  // 23..24, lz4: stored as a kLionet batch, headers dropped
    const std::string k25 = test::key_for(25), v25 = test::value_for(25);
    auto r = log->append(Record{k25, v25, 1025, header_section({{"dropped", "here"}})});  // 25
    ASSERT_TRUE(r.ok()) << r.error().message();
    EXPECT_EQ(*r, 25);
    EXPECT_EQ(log->end_offset(), 26);
    EXPECT_EQ(format_at(*log, 21), BatchFormat::kLionet);
    EXPECT_EQ(format_at(*log, 24), BatchFormat::kLionet);
    EXPECT_EQ(format_at(*log, 12), BatchFormat::kKafka);
    EXPECT_EQ(format_at(*log, 0), BatchFormat::kLionet);
    EXPECT_EQ(headers_at(*log, 24), "");
    EXPECT_EQ(headers_at(*log, 25), "");
    EXPECT_EQ(headers_at(*log, 17), header_section({{"h", "17"}}));
    EXPECT_EQ(test::verify_range(*log, 0, 26), 26);
  }
  {
    auto log = Log::open(dir, opts(BatchFormat::kKafka)).value();
    EXPECT_EQ(log->segment_count(), 4u);
    EXPECT_EQ(log->segment_base_offsets(), (std::vector<int64_t>{0, 10, 20, 26}));
    kafka_append(*log, 2, 4);  // 26..27, zstd
    EXPECT_EQ(format_at(*log, 27), BatchFormat::kKafka);
    EXPECT_EQ(format_at(*log, 22), BatchFormat::kLionet);
    EXPECT_EQ(headers_at(*log, 27), header_section({{"h", "27"}}));
    EXPECT_EQ(test::verify_range(*log, 0, 28), 28);
    EXPECT_EQ(test::verify_range(*log, 0, 28, 300, kBig), 28);
    // offset_for_time crosses segments of both formats.
    for (int64_t off : {0, 9, 10, 19, 20, 24, 25, 26, 27}) {
      auto t = log->offset_for_time(1000 + off);
      ASSERT_TRUE(t.ok());
      EXPECT_EQ(*t, off);
    }
    // truncate_to inside a batch of the kLionet segment [20, 26): that segment is rewritten in
    // its own format and, holding batches, sealed again: the next append starts a kKafka one.
    auto t = log->truncate_to(22);
    ASSERT_TRUE(t.ok()) << t.error().message();
    EXPECT_EQ(log->end_offset(), 22);
    EXPECT_EQ(log->segment_base_offsets(), (std::vector<int64_t>{0, 10, 20, 22}));
    EXPECT_EQ(test::verify_range(*log, 0, 22), 22);
    test::append_n(*log, 2, 2);  // 22..23
    EXPECT_EQ(format_at(*log, 21), BatchFormat::kLionet);
    EXPECT_EQ(format_at(*log, 23), BatchFormat::kKafka);
    EXPECT_EQ(test::verify_range(*log, 0, 24), 24);
    // At the kLionet segment's base: it empties and becomes the kKafka active segment in place.
    t = log->truncate_to(20);
    ASSERT_TRUE(t.ok()) << t.error().message();
    EXPECT_EQ(log->segment_base_offsets(), (std::vector<int64_t>{0, 10, 20}));
    kafka_append(*log, 3, 2);  // 20..22, snappy
    EXPECT_EQ(format_at(*log, 20), BatchFormat::kKafka);
    EXPECT_EQ(headers_at(*log, 21), header_section({{"h", "21"}}));
    EXPECT_EQ(test::verify_range(*log, 0, 23), 23);
  }
  auto log = Log::open(dir, opts(BatchFormat::kKafka)).value();
  EXPECT_EQ(log->segment_base_offsets(), (std::vector<int64_t>{0, 10, 20}));
  EXPECT_EQ(log->end_offset(), 23);
  EXPECT_EQ(format_at(*log, 20), BatchFormat::kKafka);
  EXPECT_EQ(test::verify_range(*log, 0, 23), 23);
}

// 6b. An active segment of the other format that holds no batch (empty, or only preallocated
//     zeros a crash left) becomes one of the configured format in place: no extra segment.
TEST(StorageKafkaFormat, EmptyActiveSegmentTakesTheConfiguredFormatWithoutARoll) {
  for (BatchFormat from : {BatchFormat::kLionet, BatchFormat::kKafka}) {
    for (std::size_t zeros : {std::size_t{0}, std::size_t{4096}}) {
      const BatchFormat to = from == BatchFormat::kKafka ? BatchFormat::kLionet : BatchFormat::kKafka;
      SCOPED_TRACE(std::string(from == BatchFormat::kKafka ? "kafka" : "lionet") + " -> other, " +
                   std::to_string(zeros) + " zero bytes");
      TempDir d;
      const std::string path = segment_file(d.path(), 0, ".log");
      { auto log = Log::open(d.path(), opts(from)).value(); }
      if (zeros > 0) test::write_file(path, std::string(zeros, '\0'));
      {
        auto log = Log::open(d.path(), opts(to)).value();
        EXPECT_EQ(log->segment_count(), 1u);
        EXPECT_EQ(log->end_offset(), 0);
        test::append_n(*log, 3, 3);
        auto s = log->read_stored(0, kBig);
        ASSERT_TRUE(s.ok());
        EXPECT_EQ(s->format, to);
        auto rr = log->read(0, kBig);  // its bytes(): the stored batch, whatever its format
        ASSERT_TRUE(rr.ok());
        EXPECT_EQ(rr->size(), 3u);
        EXPECT_EQ(file_size(path), rr->bytes()) << "the zeros (or other bytes) are still in the file";
        if (to == BatchFormat::kKafka) {
          EXPECT_EQ(s->bytes, rr->bytes());
        }
      }
      auto log = Log::open(d.path(), opts(to)).value();
      EXPECT_EQ(log->segment_count(), 1u);
      EXPECT_EQ(log->read_stored(0, kBig)->format, to);
      EXPECT_EQ(test::verify_range(*log, 0, 3), 3);
    }
  }
}

// 6c. Sealed kKafka segments (plain and compressed batches of every codec) read through their
//     index files: every offset, alone and in large reads, in any order, and offset_for_time;
//     the same once the index files are gone (rebuilt by a scan).
TEST(StorageKafkaFormat, SealedKafkaSegmentsReadEveryOffsetThroughTheirIndex) {
  TempDir d;
  LogOptions o = opts();
  o.segment_bytes = 4096;
  o.index_interval_bytes = 256;
  std::vector<int64_t> bases;
  {
    auto log = Log::open(d.path(), o).value();
    for (int i = 0; log->end_offset() < 300; i++) {
      if (i % 2 == 0) {
        test::append_n(*log, 1 + i % 5, 1 + i % 5);
        continue;
      }
      std::vector<Rec> recs;
      for (int64_t k = 0; k < 1 + i % 7; k++) {
        const int64_t off = log->end_offset() + k;
        recs.push_back(Rec{off, 1000 + off, test::key_for(off), test::value_for(off), ""});
      }
      const std::string b = compressed(kafka_batch(recs), 1 + (i / 2) % 4);
      const std::vector<std::string_view> in = {b};
      auto r = log->append_kafka_batches(in);
      ASSERT_TRUE(r.ok()) << r.error().message();
    }
    bases = log->segment_base_offsets();
    ASSERT_GE(bases.size(), 4u);
  }
  for (bool drop_index : {false, true}) {
    SCOPED_TRACE(drop_index ? "index files removed" : "index files loaded");
    if (drop_index) {
      for (int64_t b : bases) {
        std::filesystem::remove(segment_file(d.path(), b, ".index"));
        std::filesystem::remove(segment_file(d.path(), b, ".timeindex"));
      }
    }
    auto log = Log::open(d.path(), o).value();
    const int64_t end = log->end_offset();
    ASSERT_GE(end, 300);
    EXPECT_EQ(log->segment_base_offsets(), bases);
    EXPECT_EQ(test::verify_range(*log, 0, end, 300, 1), end);
    EXPECT_EQ(test::verify_range(*log, 0, end, 300, kBig), end);
    ReadResult rr;
    for (int64_t off = end - 1; off >= 0; off--) {
      auto r = log->read(off, 1, rr);
      ASSERT_TRUE(r.ok()) << "offset " << off << ": " << r.error().message();
      ASSERT_FALSE(rr.empty());
      EXPECT_EQ(rr[0].offset, off);
      EXPECT_EQ(rr[0].value, test::value_for(off)) << "offset " << off;
      auto s = log->read_stored(off, 1);
      ASSERT_TRUE(s.ok()) << "offset " << off << ": " << s.error().message();
      EXPECT_LE(s->first_offset, off);
      EXPECT_GT(s->next_offset, off);
    }
    for (int64_t off = 0; off < end; off += 7) {
      auto t = log->offset_for_time(1000 + off);
      ASSERT_TRUE(t.ok());
      EXPECT_EQ(*t, off);
    }
  }
}

// The log of the recovery tests: three kKafka batches (with headers; the middle one gzip).
struct RecoveryLog {
  std::vector<Rec> recs;  // offsets 0..8
  std::vector<uint64_t> pos;  // the three batch positions
  std::vector<int64_t> ends = {3, 7, 9};
  std::string bytes;  // the segment file
};
RecoveryLog write_recovery_log(const std::string& dir) {
  RecoveryLog rl;
  auto log = Log::open(dir, opts()).value();
  std::vector<Rec> a = make_recs(0, 3, 100);
  std::vector<Rec> b = make_recs(3, 4, 200, 100);
  std::vector<Rec> c = make_recs(7, 2, 300);
  EXPECT_TRUE(log->append_batch(as_records(a)).ok());
  const std::string gz = compressed(kafka_batch(b), 1);
  const std::vector<std::string_view> in = {gz};
  EXPECT_TRUE(log->append_kafka_batches(in).ok());
  EXPECT_TRUE(log->append_batch(as_records(c)).ok());
  EXPECT_EQ(log->end_offset(), 9);
  rl.recs = a;
  rl.recs.insert(rl.recs.end(), b.begin(), b.end());
  rl.recs.insert(rl.recs.end(), c.begin(), c.end());
  log.reset();
  rl.bytes = test::read_file(segment_file(dir, 0, ".log"));
  rl.pos = kafka_positions(rl.bytes);
  EXPECT_EQ(rl.pos.size(), 3u);
  return rl;
}

// Opens the log in `dir` whose segment holds `bytes`, checks it recovered to `end` (records as in
// rl, file cut to `size`), that an append gets `end`, and that all of it survives another reopen.
void expect_recovered(const std::string& dir, const RecoveryLog& rl, const std::string& bytes, int64_t end,
                      uint64_t size, const std::string& what) {
  SCOPED_TRACE(what);
  const std::string path = segment_file(dir, 0, ".log");
  test::write_file(path, bytes);
  std::vector<Rec> want(rl.recs.begin(), rl.recs.begin() + end);
  {
    auto log = Log::open(dir, opts()).value();
    EXPECT_EQ(log->end_offset(), end);
    EXPECT_EQ(file_size(path), size);
    EXPECT_EQ(read_all(*log, 0), want);
    const std::string h = header_section({{"after", "recovery"}});
    auto r = log->append(Record{"new", "record", 77, h});
    ASSERT_TRUE(r.ok()) << r.error().message();
    EXPECT_EQ(*r, end);
    want.push_back(Rec{end, 77, "new", "record", h});
  }
  auto log = Log::open(dir, opts()).value();
  EXPECT_EQ(log->end_offset(), end + 1);
  EXPECT_EQ(read_all(*log, 0), want);
  EXPECT_EQ(read_all(*log, 0, 1), want);
}

// 7a. The file cut inside a batch (a crash mid-write): recovery cuts that batch, keeps every
//     batch before it, and appends continue at its base offset.
TEST(StorageKafkaFormat, RecoveryCutsATornLastBatch) {
  TempDir d;
  const RecoveryLog rl = write_recovery_log(d.path());
  const uint64_t last = rl.pos[2];
  const uint64_t size = rl.bytes.size();
  for (uint64_t cut :
       {last + 1, last + 8, last + 11, last + 12, last + 30, last + 60, last + 61, last + 70, size - 1}) {
    expect_recovered(d.path(), rl, rl.bytes.substr(0, cut), 7, last, "cut at " + std::to_string(cut));
  }
  // Inside the compressed middle batch: the last two go.
  const uint64_t mid = rl.pos[1] + (rl.pos[2] - rl.pos[1]) / 2;
  expect_recovered(d.path(), rl, rl.bytes.substr(0, mid), 3, rl.pos[1], "cut inside the gzip batch");
}

// 7b. A flipped byte anywhere in the last batch (but the partition leader epoch, which nothing
//     covers) fails its CRC, magic, length or offset: the batch is cut; one in the middle batch
//     cuts it and everything after.
TEST(StorageKafkaFormat, RecoveryCutsADamagedBatch) {
  TempDir d;
  const RecoveryLog rl = write_recovery_log(d.path());
  const uint64_t last = rl.pos[2];
  for (uint64_t i = 0; last + i < rl.bytes.size(); i++) {
    if (i >= 12 && i < 16) continue;  // partition leader epoch
    std::string bytes = rl.bytes;
    bytes[last + i] ^= 0x10;
    expect_recovered(d.path(), rl, bytes, 7, last, "byte " + std::to_string(i) + " of the last batch flipped");
    if (HasFatalFailure()) return;
  }
  for (uint64_t i : {uint64_t{0}, uint64_t{9}, uint64_t{16}, uint64_t{17}, uint64_t{22}, uint64_t{61},
                     (rl.pos[2] - rl.pos[1]) - 1}) {
    std::string bytes = rl.bytes;
    bytes[rl.pos[1] + i] ^= 0x01;
    expect_recovered(d.path(), rl, bytes, 3, rl.pos[1], "byte " + std::to_string(i) + " of the gzip batch flipped");
  }
  // The first batch (which also tells the segment's format): the whole segment goes, the log
  // restarts at its base offset in kKafka.
  for (uint64_t i : {uint64_t{7}, uint64_t{10}, uint64_t{16}, uint64_t{19}, uint64_t{30}, rl.pos[1] - 1}) {
    std::string bytes = rl.bytes;
    bytes[i] ^= 0x04;
    expect_recovered(d.path(), rl, bytes, 0, 0, "byte " + std::to_string(i) + " of the first batch flipped");
    auto log = Log::open(d.path(), opts()).value();
    auto s = log->read_stored(0, kBig);
    ASSERT_TRUE(s.ok());
    EXPECT_EQ(s->format, BatchFormat::kKafka);
  }
}

// 7c. Zeros after the last batch (preallocated space of a log that was not closed): every
//     record kept, the zeros cut.
TEST(StorageKafkaFormat, RecoveryCutsAZeroTailAndKeepsEveryRecord) {
  TempDir d;
  const RecoveryLog rl = write_recovery_log(d.path());
  for (std::size_t zeros : {std::size_t{1}, std::size_t{11}, std::size_t{12}, std::size_t{40}, std::size_t{61},
                            std::size_t{100}, std::size_t{1} << 20}) {
    expect_recovered(d.path(), rl, rl.bytes + std::string(zeros, '\0'), 9, rl.bytes.size(),
                     std::to_string(zeros) + " zero bytes after the last batch");
  }
}

// 8. truncate_to inside a compressed batch with headers (any codec; the batch in the active or in
//    a sealed segment): the records before the offset stay, with headers and timestamps, as a
//    plain kKafka batch; the next append gets the offset; all of it survives reopen; and the
//    rewritten batch can be cut again.
TEST(StorageKafkaFormat, TruncateInsideACompressedBatchKeepsItsFirstRecords) {
  for (int codec = 1; codec <= 4; codec++) {
    for (bool sealed : {false, true}) {
      for (bool big : {false, true}) {  // big: the plain rewrite is far larger than the compressed batch
        SCOPED_TRACE("codec " + std::to_string(codec) + (sealed ? ", C in a new segment" : "") +
                     (big ? ", large compressible values" : ""));
        TempDir d;
        LogOptions o = opts();
        if (sealed) o.segment_bytes = 1024;
        std::vector<Rec> a = make_recs(0, 3, 100);
        std::vector<Rec> b = make_recs(3, 6, 400, 20);
        for (Rec& r : b) {
          if (r.headers.empty()) r.headers = header_section({{"only", "odd"}});
          if (big) r.value = std::string(1500, 'z') + std::to_string(r.offset);
        }
        b[1].ts = 50;  // timestamps not in order
        std::vector<Rec> c = make_recs(9, 2, 900, 20);
        if (sealed) {
          for (Rec& r : c) r.value = std::string(600, 'c');  // this batch alone is past segment_bytes
        }
        auto log = Log::open(d.path(), o).value();
        ASSERT_TRUE(log->append_batch(as_records(a)).ok());
        const std::string in = compressed(kafka_batch(b), codec);
        const std::vector<std::string_view> span = {in};
        ASSERT_TRUE(log->append_kafka_batches(span).ok());
        ASSERT_TRUE(log->append_batch(as_records(c)).ok());
        const std::vector<int64_t> bases = log->segment_base_offsets();
        ASSERT_EQ(bases.back(), sealed ? 9 : 0) << "batch C should " << (sealed ? "" : "not ") << "start a segment";
        auto sb = log->read_stored(3, 1);
        ASSERT_TRUE(sb.ok()) << sb.error().message();
        ASSERT_EQ(sb->first_offset, 3);
        const uint64_t bpos = sb->position;
        const int64_t bbase = *(std::upper_bound(bases.begin(), bases.end(), int64_t{3}) - 1);
        const std::size_t kept_segments =
            static_cast<std::size_t>(std::upper_bound(bases.begin(), bases.end(), int64_t{3}) - bases.begin());
        const std::string path = segment_file(d.path(), bbase, ".log");

        auto t = log->truncate_to(6);
        ASSERT_TRUE(t.ok()) << t.error().message();
        EXPECT_EQ(log->end_offset(), 6);
        EXPECT_EQ(log->segment_count(), kept_segments);
        std::vector<Rec> want(a);
        want.insert(want.end(), b.begin(), b.begin() + 3);
        EXPECT_EQ(read_all(*log, 0), want);
        EXPECT_EQ(read_all(*log, 4, 1), std::vector<Rec>(want.begin() + 4, want.end()));
        // The rewritten batch: plain, last in the file, holding 3..5.
        auto s = log->read_stored(5, 1);
        ASSERT_TRUE(s.ok()) << s.error().message();
        EXPECT_EQ(s->position, bpos);
        EXPECT_EQ(s->first_offset, 3);
        EXPECT_EQ(s->next_offset, 6);
        const std::string file = test::read_file(path);
        EXPECT_EQ(s->position + s->bytes, file.size());
        EXPECT_EQ(load_be<int16_t>(file.data() + bpos + 21) & 7, 0);
        if (big) {
          EXPECT_GT(s->bytes, in.size());
        }

        const std::string h = header_section({{"new", "one"}});
        auto r = log->append(Record{"k", "after truncate", 12345, h});
        ASSERT_TRUE(r.ok()) << r.error().message();
        EXPECT_EQ(*r, 6);
        want.push_back(Rec{6, 12345, "k", "after truncate", h});
        EXPECT_EQ(read_all(*log, 0), want);

        log.reset();
        log = Log::open(d.path(), o).value();
        EXPECT_EQ(log->end_offset(), 7);
        EXPECT_EQ(read_all(*log, 0), want);
        EXPECT_EQ(read_all(*log, 0, 1), want);

        // Cut the rewritten batch again, in its middle.
        t = log->truncate_to(4);
        ASSERT_TRUE(t.ok()) << t.error().message();
        want.resize(4);
        EXPECT_EQ(read_all(*log, 0), want);
        r = log->append(Record{"", "again", 1, ""});
        ASSERT_TRUE(r.ok()) << r.error().message();
        EXPECT_EQ(*r, 4);
        want.push_back(Rec{4, 1, "", "again", ""});
        log.reset();
        log = Log::open(d.path(), o).value();
        EXPECT_EQ(read_all(*log, 0), want);

        // And at a batch boundary: nothing rewritten, the file ends where batch B began.
        t = log->truncate_to(3);
        ASSERT_TRUE(t.ok()) << t.error().message();
        EXPECT_EQ(log->end_offset(), 3);
        EXPECT_EQ(file_size(path), bpos);
        want.resize(3);
        EXPECT_EQ(read_all(*log, 0), want);
      }
    }
  }
}

// 8b. The same cut where the records kept, written plain, make a batch larger than
//     max_batch_bytes (their compressed batch was within it, and so was their inflated
//     records section). Either truncate_to keeps them (as one or more batches) or it refuses and
//     changes nothing: in both cases every record the log still reports reads back, and an
//     append after it survives reopen.
TEST(StorageKafkaFormat, TruncateWhosePlainRewriteExceedsMaxBatchBytesLosesNothing) {
  for (int codec = 1; codec <= 4; codec++) {
    SCOPED_TRACE("codec " + std::to_string(codec));
    TempDir d;
    LogOptions o = opts();
    o.max_batch_bytes = 64 * 1024;
    // Record 0 takes 65502 bytes of the 65510-byte records section (<= max_batch_bytes); alone in
    // a plain batch it makes 61 + 65502 > 65536.
    const std::vector<Rec> recs = {Rec{0, 1000, "k", std::string(65490, 'a'), ""}, Rec{1, 1001, "k", "b", ""}};
    const std::string plain = kafka_batch(recs);
    ASSERT_LE(plain.size() - kKafkaHeaderBytes, o.max_batch_bytes);
    ASSERT_GT(kKafkaHeaderBytes + (plain.size() - kKafkaHeaderBytes - 8), o.max_batch_bytes);
    const std::string in = compressed(plain, codec);
    auto log = Log::open(d.path(), o).value();
    const std::vector<std::string_view> span = {in};
    auto r = log->append_kafka_batches(span);
    ASSERT_TRUE(r.ok()) << r.error().message();
    ASSERT_EQ(read_all(*log, 0), recs);

    auto t = log->truncate_to(1);
    std::vector<Rec> want = recs;
    if (t.ok()) want.resize(1);  // else refused: nothing may have changed
    SCOPED_TRACE(t.ok() ? std::string("truncate_to(1) succeeded") : "truncate_to(1) refused: " + t.error().message());
    EXPECT_EQ(log->end_offset(), static_cast<int64_t>(want.size()));
    EXPECT_EQ(read_all(*log, 0), want);
    const int64_t next = static_cast<int64_t>(want.size());
    auto a = log->append(Record{"after", "truncate", 5, ""});
    ASSERT_TRUE(a.ok()) << a.error().message();
    EXPECT_EQ(*a, next);
    want.push_back(Rec{next, 5, "after", "truncate", ""});
    EXPECT_EQ(read_all(*log, 0), want);
    log.reset();
    log = Log::open(d.path(), o).value();
    EXPECT_EQ(log->end_offset(), next + 1);
    EXPECT_EQ(read_all(*log, 0), want);
  }
}

// 1b. Record::headers is a Kafka header section; one that is not (a count with no headers after
//     it, a negative count, a header cut short) must not cost acknowledged records: the append is
//     refused (kInvalidArgument), or else every acknowledged record reads back, also after
//     reopen, including good records appended after it.
TEST(StorageKafkaFormat, MalformedHeaderSectionCostsNoAcknowledgedRecord) {
  const std::vector<std::string> bad_sections = {std::string("\x02", 1), std::string("\x01", 1),
                                                 std::string("\x02\x02k", 3), header_section({{"k", "v"}}) + "x"};
  for (std::size_t i = 0; i < bad_sections.size(); i++) {
    SCOPED_TRACE("malformed header section " + std::to_string(i));
    TempDir d;
    std::vector<Rec> want;
    {
      auto log = Log::open(d.path(), opts()).value();
      ASSERT_TRUE(log->append(Record{"k", "good before", 1, ""}).ok());
      want.push_back(Rec{0, 1, "k", "good before", ""});
      auto bad = log->append(Record{"k", "bad headers", 2, bad_sections[i]});
      SCOPED_TRACE(bad.ok() ? "the record with the malformed header section was accepted"
                            : "refused: " + bad.error().message());
      if (bad.ok()) {
        want.push_back(Rec{*bad, 2, "k", "bad headers", bad_sections[i]});
      } else {
        EXPECT_EQ(bad.error(), Errc::kInvalidArgument) << bad.error().message();
      }
      auto good = log->append(Record{"k", "good after", 3, ""});
      ASSERT_TRUE(good.ok()) << good.error().message();
      want.push_back(Rec{*good, 3, "k", "good after", ""});
      EXPECT_EQ(read_all(*log, 0, 1), want);
    }
    auto log = Log::open(d.path(), opts()).value();
    EXPECT_EQ(log->end_offset(), want.back().offset + 1) << "acknowledged records were cut by recovery";
    EXPECT_EQ(read_all(*log, 0, 1), want);
  }
}

// 9. read_stored's ranges: whole batches from the one holding the offset (even when it begins
//    before it), at least one, more only within max_bytes, never past the segment; the end
//    offset gives 0 bytes; offsets outside the log are out of range. The bytes it names are
//    batches a Kafka decoder reads back.
TEST(StorageKafkaFormat, ReadStoredReturnsWholeBatchesWithinMaxBytes) {
  TempDir d;
  LogOptions o = opts();
  o.segment_bytes = 2048;
  auto log = Log::open(d.path(), o).value();
  test::append_n(*log, 15, 3, 100);  // batches of 3 records: [0,3) [3,6) ...
  const std::string path = segment_file(d.path(), 0, ".log");
  ASSERT_EQ(log->segment_count(), 1u) << "the first 15 records should fit in one segment";
  const std::string file = test::read_file(path);
  const std::vector<uint64_t> pos = kafka_positions(file);
  ASSERT_EQ(pos.size(), 5u);
  auto len = [&](std::size_t i) { return (i + 1 < pos.size() ? pos[i + 1] : file.size()) - pos[i]; };

  auto s = log->read_stored(4, 1);  // inside the second batch; max_bytes below one batch
  ASSERT_TRUE(s.ok()) << s.error().message();
  EXPECT_EQ(s->format, BatchFormat::kKafka);
  EXPECT_EQ(s->position, pos[1]);
  EXPECT_EQ(s->bytes, len(1));
  EXPECT_EQ(s->first_offset, 3);
  EXPECT_EQ(s->next_offset, 6);

  s = log->read_stored(5, len(1) + len(2));  // exactly two batches
  ASSERT_TRUE(s.ok());
  EXPECT_EQ(s->position, pos[1]);
  EXPECT_EQ(s->bytes, len(1) + len(2));
  EXPECT_EQ(s->next_offset, 9);

  s = log->read_stored(3, len(1) + len(2) - 1);  // one byte short of two
  ASSERT_TRUE(s.ok());
  EXPECT_EQ(s->bytes, len(1));
  EXPECT_EQ(s->next_offset, 6);

  s = log->read_stored(0, kBig);
  ASSERT_TRUE(s.ok());
  EXPECT_EQ(s->position, 0u);
  EXPECT_EQ(s->bytes, file.size());
  EXPECT_EQ(s->first_offset, 0);
  EXPECT_EQ(s->next_offset, 15);
  // Those bytes decode as Kafka batches holding the records.
  std::string got(s->bytes, '\0');
  ASSERT_EQ(*s->file->pread(got.data(), got.size(), s->position), got.size());
  std::vector<kafka::DecodedBatch> batches;
  const kafka::BatchError e = kafka::decode_batches(got, batches);
  ASSERT_EQ(e.code, kafka::ErrorCode::kNone) << e.why;
  ASSERT_EQ(batches.size(), 5u);
  for (std::size_t i = 0; i < batches.size(); i++) {
    EXPECT_EQ(batches[i].base_offset, static_cast<int64_t>(3 * i));
    ASSERT_EQ(batches[i].records.size(), 3u);
    for (std::size_t k = 0; k < 3; k++) {
      const int64_t off = static_cast<int64_t>(3 * i + k);
      EXPECT_EQ(batches[i].records[k].value, test::value_for(off, 100));
      EXPECT_EQ(batches[i].records[k].timestamp, 1000 + off);
    }
  }

  // The end offset: ok, nothing. Past it and before the start: out of range.
  s = log->read_stored(15, kBig);
  ASSERT_TRUE(s.ok()) << s.error().message();
  EXPECT_EQ(s->bytes, 0u);
  EXPECT_EQ(s->next_offset, 15);
  for (int64_t bad : {int64_t{16}, int64_t{1000}, int64_t{-1}}) {
    auto r = log->read_stored(bad, kBig);
    ASSERT_FALSE(r.ok()) << bad;
    EXPECT_EQ(r.error(), Errc::kOffsetOutOfRange) << bad;
  }

  // Several segments: a range never crosses into the next one.
  test::append_n(*log, 60, 3, 100);
  const std::vector<int64_t> bases = log->segment_base_offsets();
  ASSERT_GE(bases.size(), 3u);
  s = log->read_stored(bases[1] - 1, kBig);
  ASSERT_TRUE(s.ok());
  EXPECT_EQ(s->next_offset, bases[1]);
  EXPECT_EQ(s->position + s->bytes, file_size(segment_file(d.path(), bases[0], ".log")));
  s = log->read_stored(bases[1], kBig);
  ASSERT_TRUE(s.ok());
  EXPECT_EQ(s->position, 0u);
  EXPECT_EQ(s->first_offset, bases[1]);
  EXPECT_EQ(s->next_offset, bases[2]);
  // After retention deleted old segments, their offsets are out of range.
  LogOptions ro = o;
  ro.retention_bytes = 0;
  log.reset();
  log = Log::open(d.path(), ro).value();
  auto dropped = log->enforce_retention();
  ASSERT_TRUE(dropped.ok());
  EXPECT_GE(*dropped, 2u);
  const int64_t start = log->start_offset();
  ASSERT_GT(start, 0);
  auto r = log->read_stored(start - 1, kBig);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error(), Errc::kOffsetOutOfRange);
  s = log->read_stored(start, kBig);
  ASSERT_TRUE(s.ok()) << s.error().message();
  EXPECT_EQ(s->first_offset, start);
  EXPECT_EQ(s->next_offset, log->end_offset());
}

// Review findings (each failed before its fix):
// A. Kafka's "no timestamp" (-1) records: their segment has no known time, so time retention
//    leaves it (only retention.bytes removes it). It was deleted at the next roll, however new.
TEST(StorageKafkaFormat, RecordsWithoutATimestampAreNotDeletedByTimeRetention) {
  TempDir d;
  LogOptions o = opts();
  o.segment_bytes = 4096;
  o.retention_ms = 60 * 1000;
  auto log = Log::open(d.path(), o).value();
  for (int64_t i = 0; i < 40; i++) {
    const std::string b = kafka_batch({Rec{i, -1, "k", std::string(300, 'n'), ""}});
    const std::vector<std::string_view> in = {b};
    ASSERT_TRUE(log->append_kafka_batches(in).ok());
  }
  ASSERT_GE(log->segment_count(), 3u);
  EXPECT_EQ(log->enforce_retention(wall_ms()).value(), 0u);
  EXPECT_EQ(log->start_offset(), 0);
  ReadResult rr;
  ASSERT_TRUE(log->read(0, 1, rr).ok());
  EXPECT_EQ(rr[0].timestamp, -1);
  // Records with times still age out.
  const int64_t old = wall_ms() - 3600 * 1000;
  TempDir d2;
  auto aged = Log::open(d2.path(), o).value();
  for (int64_t i = 0; i < 40; i++) ASSERT_TRUE(aged->append(Record{"k", std::string(300, 'o'), old}).ok());
  EXPECT_GE(aged->enforce_retention(wall_ms()).value() + (aged->start_offset() > 0 ? 1u : 0u), 1u);
  EXPECT_GT(aged->start_offset(), 0);
}

// B. A read's memory is bounded by max_bytes, not only its stored (compressed) bytes: after the
//    first batch, inflated records count. Four gzip batches of ~1 MiB of records each take a
//    few KiB on disk; a 64 KiB read returned all four (4 MiB inflated).
TEST(StorageKafkaFormat, InflatedRecordsCountAgainstMaxBytes) {
  TempDir d;
  auto log = Log::open(d.path(), opts()).value();
  for (int64_t b = 0; b < 4; b++) {
    std::vector<Rec> recs;
    for (int64_t i = 0; i < 16; i++) recs.push_back(Rec{b * 16 + i, 1000, "k", std::string(64 * 1024, 'z'), ""});
    const std::string z = compressed(kafka_batch(recs), 1);
    ASSERT_LT(z.size(), 16u * 1024);
    const std::vector<std::string_view> in = {z};
    ASSERT_TRUE(log->append_kafka_batches(in).ok());
  }
  ReadResult rr;
  ASSERT_TRUE(log->read(0, 64 * 1024, rr).ok());
  EXPECT_EQ(rr.size(), 16u);  // the first batch (always whole), then the budget is spent
  EXPECT_EQ(rr.next_offset(), 16);
  for (const RecordView& v : rr.records()) EXPECT_EQ(v.value, std::string(64 * 1024, 'z'));
  ASSERT_TRUE(log->read(0, 5 << 19, rr).ok());  // 2.5 MiB: two batches' records (~1.05 MiB each), not three
  EXPECT_EQ(rr.size(), 32u);
  EXPECT_EQ(read_all(*log, 0, 64 * 1024).size(), 64u);  // paging still reaches everything
}

// C. Damage to the first four bytes of a sealed segment's first batch (its base offset, which
//    the CRC does not cover) made the layout detection guess kLionet: the index files did not
//    load, the rebuild found nothing, and every offset of the segment read kCorrupt. Now only
//    that batch's offsets do.
TEST(StorageKafkaFormat, DamagedFirstBatchOfASealedSegmentCostsOnlyThatBatch) {
  TempDir d;
  LogOptions o = opts();
  o.segment_bytes = 4096;
  o.index_interval_bytes = 1;  // an index entry per batch: a read never walks from the damaged one
  std::vector<int64_t> bases;
  {
    auto log = Log::open(d.path(), o).value();
    test::append_n(*log, 120, 3);
    bases = log->segment_base_offsets();
    ASSERT_GE(bases.size(), 3u);
  }
  const std::string path = segment_file(d.path(), bases[1], ".log");
  std::string bytes = test::read_file(path);
  const int64_t first_next = bases[1] + 3;  // batches of 3 records
  bytes[2] ^= 0x5a;
  test::write_file(path, bytes);
  for (bool drop_index : {false, true}) {
    SCOPED_TRACE(drop_index ? "index files removed" : "index files loaded");
    if (drop_index) {
      std::filesystem::remove(segment_file(d.path(), bases[1], ".index"));
      std::filesystem::remove(segment_file(d.path(), bases[1], ".timeindex"));
    }
    auto log = Log::open(d.path(), o).value();
    ReadResult rr;
    for (int64_t off = bases[1]; off < bases[2]; off++) {
      auto r = log->read(off, 1, rr);
      if (off < first_next) {
        EXPECT_FALSE(r.ok()) << off;
        continue;
      }
      if (drop_index) {
        // Without index files the rebuild stops at the damaged first batch (a sealed segment's
        // damage is reported, not skipped): the rest reads kCorrupt, the other segments do not.
        EXPECT_FALSE(r.ok()) << off;
        continue;
      }
      ASSERT_TRUE(r.ok()) << "offset " << off << ": " << r.error().message();
      EXPECT_EQ(rr[0].offset, off);
      EXPECT_EQ(rr[0].value, test::value_for(off));
    }
    EXPECT_EQ(read_all(*log, bases[2]).size(), static_cast<std::size_t>(log->end_offset() - bases[2]));
  }
}

}  // namespace
}  // namespace lionet::storage
